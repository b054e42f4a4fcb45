// cplane-probe: the substrate probe. Separate worker processes (fork + exec
// of this binary, each with its own connection) hammer one store file on the
// real disk; the probe then checks every count exactly and exits 0 only when
// all of them are right.
//
//   cplane-probe --store PATH --scenario NAME [--workers N] [--items M]
//                [--timeout S] [--json] [--combine on|off] [--durability D]
//
// Scenarios: concurrent-queue, kill-and-reclaim, lease-storm, crash-writes,
// combiner-kill, assign-race, allocate-race, retry-storm, cron-race, key-race,
// fair-share (see docs/probe.md).
// Each run works in a project of its own (probe-<scenario>-<pid>-<time>)
// claimed through a scoped actor, so an existing store is never disturbed;
// verify (and, on SQLite, PRAGMA integrity_check) still checks the whole
// store.
//
// This file is the command line: its options, the dispatch to a scenario
// (each in a file of its own, driver, workers and judge together) or to a
// worker's role, and the report. The checks every scenario ends with are in
// probe/end_checks.hpp.
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <kj/main.h>

#include <cplane/cplane.hpp>

#include "events/clock.hpp"
#include "json/json_writer.hpp"
#include "probe/allocate_race.hpp"
#include "probe/assign_race.hpp"
#include "probe/combiner_kill.hpp"
#include "probe/concurrent_queue.hpp"
#include "probe/crash_writes.hpp"
#include "probe/cron_race.hpp"
#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/fair_share.hpp"
#include "probe/fleet.hpp"
#include "probe/key_race.hpp"
#include "probe/kill_reclaim.hpp"
#include "probe/lease_storm.hpp"
#include "probe/retry_storm.hpp"
#include "probe/scenario.hpp"

namespace cplane::probe {
namespace {

// Worker processes a run may start: far above any fleet the probe models,
// far below what exhausts a machine's process table.
constexpr int kMaxWorkers = 512;

struct Config {
  std::string store;
  std::string scenario;
  std::optional<int> workers;
  std::optional<std::int64_t> items;
  double timeout = 600;
  bool json = false;
  bool combine = true;  // --combine: SQLite's group commit (key-race)
  Durability durability = Durability::fenced;  // --durability: the drain workers' stores
};

// The internal options a worker is started with (--worker ROLE and the rest).
struct WorkerArgs {
  std::string role;  // "drain", "hold", "assign", "allocate", "storm", "cron" or "keys"
  std::string store;
  std::string project;
  std::string owner;
  std::string record;
  int gate_fd = -1;
  double lease = 30;
  double stall_probability = 0;
  double stall = 0;
  std::string flags;  // shared flag file: byte `slot` is 1 while inside a command
  int slot = -1;
  // assign: the session's id, the file naming the items to ask for (one id
  // a line, rewritten as the control plane replaces closed ones), and how
  // long to keep asking.
  std::string session;
  std::string slots;
  double duration = 0;
  std::int64_t from = 1;  // cron: the first minute it walks
  std::int64_t ahead = 0;  // cron: a replacement's jump past the last occurrence fired
  bool combine = true;     // keys: SQLite's group commit
  Durability durability = Durability::fenced;  // drain, hold
};

// A scenario's figures in print order, and the checks that decide PASS.
class Report {
 public:
  explicit Report(const ScenarioResult& result) {
    for (const auto& figure : result.figures) {
      if (const auto* n = std::get_if<std::int64_t>(&figure.value)) {
        values_.push_back({figure.name, fmt::format("{}", *n), true});
      } else if (const auto* x = std::get_if<double>(&figure.value)) {
        values_.push_back(
            {figure.name, fmt::format("{:.{}f}", *x, figure.digits), std::isfinite(*x)});
      } else {
        values_.push_back({figure.name, std::get<std::string>(figure.value), false});
      }
    }
    for (const auto& c : result.checks) {
      if (!c.ok) failed_.push_back(c.sentence);
    }
  }
  bool pass() const { return failed_.empty(); }

  // --json: one object, every string escaped (json/json_writer.hpp); the
  // store as redacted_url shows it.
  void print(bool json, const std::string& scenario, const std::string& store) const {
    if (json) {
      JsonObject out;
      out.str("scenario", scenario).str("store", redacted_url(store));
      for (const auto& v : values_) {
        if (v.numeric) {
          out.raw(v.name, v.text);
        } else {
          out.str(v.name, v.text);
        }
      }
      out.boolean("pass", pass()).raw("failed_checks", json_strings(failed_));
      std::cout << out.done() << std::endl;
    } else {
      for (const auto& v : values_) std::cout << v.name << '=' << v.text << '\n';
      std::cout << (pass() ? "PASS" : "FAIL") << std::endl;
    }
    for (const auto& f : failed_) std::cerr << "cplane-probe: check failed: " << f << '\n';
  }

 private:
  struct Value {
    std::string name;
    std::string text;
    bool numeric;  // a finite number, written as it is; else a JSON string
  };
  std::vector<Value> values_;
  std::vector<std::string> failed_;
};

// retry-storm and cron-race take a configuration of their own and leave
// verify to their caller.
ScenarioResult retry_storm(const RunConfig& run) {
  ScenarioResult out =
      storm::run({.store = run.store, .project = run.project, .scratch = run.scratch,
                  .workers = run.workers, .items = run.items, .deadline = run.deadline});
  ControlStore store{run.store};
  check_verify(out, store, run.store);
  return out;
}

ScenarioResult cron_race(const RunConfig& run) {
  ScenarioResult out =
      cron::run({.store = run.store, .project = run.project, .scratch = run.scratch,
                 .workers = run.workers, .occurrences = run.items, .deadline = run.deadline});
  ControlStore store{run.store};
  check_verify(out, store, run.store);
  return out;
}

// key-race takes --combine and runs its own ledger checks (verify among them).
ScenarioResult key_race(const RunConfig& run) {
  return keys::run({.store = run.store, .project = run.project, .scratch = run.scratch,
                    .workers = run.workers, .items = run.items, .deadline = run.deadline,
                    .combine = run.combine});
}

// Every scenario, with its defaults (--workers, --items).
struct Scenario {
  const char* name;
  int workers;
  std::int64_t items;
  ScenarioResult (*run)(const RunConfig&);
};
constexpr Scenario kScenarios[] = {
    {"concurrent-queue", 16, 10'000, queue::run},
    {"kill-and-reclaim", 4, 500, reclaim::run},
    {"lease-storm", 16, 2'000, leases::run},
    {"crash-writes", 8, 2'000, crash::run},
    {"combiner-kill", 16, 10'000, combiner::run},
    {"assign-race", 16, 4, race::run},  // 4: the items raced for at once
    {"allocate-race", 16, 2'000, alloc::run},
    {"retry-storm", 16, 2'000, retry_storm},
    {"cron-race", 16, 200, cron_race},
    {"key-race", 16, 2'000, key_race},
    {"fair-share", 16, 100'000, fair::run},  // --items: project A's; B has kSmallItems
};

// One run of a scenario, in a project and a scratch directory of its own
// (removed afterwards).
class Probe {
 public:
  explicit Probe(const Config& config) : config_(config) {
    project_ = fmt::format("probe-{}-{}-{}", config.scenario, ::getpid(), now_micros() / 1000);
    scratch_ = (std::filesystem::temp_directory_path() / project_).string();
    std::filesystem::create_directories(scratch_);
  }
  ~Probe() {
    std::error_code ec;
    std::filesystem::remove_all(scratch_, ec);
  }

  int run() {
    for (const auto& scenario : kScenarios) {
      if (config_.scenario != scenario.name) continue;
      const Report report(scenario.run({.store = config_.store,
                                        .scenario = config_.scenario,
                                        .project = project_,
                                        .scratch = scratch_,
                                        .workers = config_.workers.value_or(scenario.workers),
                                        .items = config_.items.value_or(scenario.items),
                                        .deadline = start_ + config_.timeout,
                                        .timeout = config_.timeout,
                                        .combine = config_.combine,
                                        .durability = config_.durability}));
      report.print(config_.json, config_.scenario, config_.store);
      return report.pass() ? 0 : 1;
    }
    std::cerr << "cplane-probe: unknown scenario '" << config_.scenario
              << "': expected concurrent-queue, kill-and-reclaim, lease-storm, crash-writes, "
                 "combiner-kill, assign-race, allocate-race, retry-storm, cron-race, key-race or "
                 "fair-share\n";
    return 2;
  }

 private:
  Config config_;
  double start_ = fleet::seconds_now();
  std::string project_;
  std::string scratch_;
};

// ---------------------------------------------------------------------------

// Thrown to leave with an exit status; caught in main().
struct Exit {
  int code;
};

// KJ's argument parser reports through a ProcessContext: ours makes a usage
// error exit 2 with one line on stderr, as the cplane CLI does, instead of
// KJ's exit 1 with a second line.
class ProbeContext final : public kj::ProcessContext {
 public:
  explicit ProbeContext(const char* program) : program_(program) {}
  kj::StringPtr getProgramName() override { return program_; }
  [[noreturn]] void exit() override { throw Exit{0}; }
  void warning(kj::StringPtr message) override { std::cerr << message.cStr() << '\n'; }
  void error(kj::StringPtr message) override { std::cerr << message.cStr() << '\n'; }
  // KJ's message is "cplane-probe: <what>\nTry 'cplane-probe --help' ...".
  [[noreturn]] void exitError(kj::StringPtr message) override {
    std::string text = message.cStr();
    std::cerr << text.substr(0, text.find('\n')) << " (see --help)\n";
    throw Exit{2};
  }
  [[noreturn]] void exitInfo(kj::StringPtr message) override {
    std::cout << message.cStr();
    if (!message.endsWith("\n")) std::cout << '\n';
    throw Exit{0};
  }
  void increaseLoggingVerbosity() override {}

 private:
  kj::StringPtr program_;
};

class Main {
 public:
  explicit Main(kj::ProcessContext& context) : context_(context) {}

  kj::MainFunc main() {
    using V = kj::MainBuilder::Validity;
    return kj::MainBuilder(
               context_, "cplane-probe 0.1.0",
               "Proves the store under real contention: separate worker processes on one "
               "database file. Prints one name=value per line, then PASS or FAIL; exits 0 only "
               "when every count is exactly right. A usage error exits 2.",
               "Scenarios: concurrent-queue (default 16 workers, 10000 items), "
               "kill-and-reclaim (4, 500), lease-storm (16, 2000), crash-writes (8, 2000), "
               "combiner-kill (16, 10000; SQLite only), assign-race (16 sessions racing for 4 "
               "items), allocate-race (16 sessions allocating 2000 items), retry-storm (16, "
               "2000; 3 attempts each, 40% failing, workers killed holding items), cron-race (16 "
               "workers, 200 occurrences of one schedule fired by tick and claim), key-race (16, "
               "2000 over 10 concurrency keys limited to 1..3, workers stalled past their lease "
               "and killed), fair-share (16 workers; 100000 items of project A, then 100 of B).")
        .addOptionWithArg({"store"}, [this](kj::StringPtr s) -> V {
                            if (s.size() == 0) return "--store takes a non-empty path";
                            config_.store = s.cStr();
                            worker_.store = s.cStr();
                            return true;
                          },
                          "<path>", "the database file (created if missing)")
        .addOptionWithArg({"scenario"}, [this](kj::StringPtr s) -> V {
                            for (const auto& scenario : kScenarios) {
                              if (s == scenario.name) {
                                config_.scenario = scenario.name;
                                return true;
                              }
                            }
                            return "no such scenario: expected concurrent-queue, "
                                   "kill-and-reclaim, lease-storm, crash-writes, combiner-kill, "
                                   "assign-race, allocate-race, retry-storm, cron-race, key-race "
                                   "or fair-share";
                          },
                          "<name>",
                          "concurrent-queue, kill-and-reclaim, lease-storm, crash-writes, "
                          "combiner-kill, assign-race, allocate-race, retry-storm, cron-race, "
                          "key-race, fair-share")
        .addOptionWithArg({"workers"}, [this](kj::StringPtr s) -> V {
                            auto v = integer<int>(s);
                            if (!v || *v <= 0) return "--workers takes a positive integer";
                            // Each worker is a process: a typo must not fork-bomb the machine.
                            if (*v > kMaxWorkers) {
                              return kj::str("--workers is at most ", kMaxWorkers);
                            }
                            config_.workers = *v;
                            return true;
                          },
                          "<n>", "worker processes")
        .addOptionWithArg({"items"}, [this](kj::StringPtr s) -> V {
                            auto v = integer<std::int64_t>(s);
                            if (!v || *v <= 0) return "--items takes a positive integer";
                            config_.items = *v;
                            return true;
                          },
                          "<m>", "work items (assign-race: the items raced for at once)")
        .addOptionWithArg({"timeout"}, [this](kj::StringPtr s) -> V {
                            auto v = number(s);
                            if (!v || *v <= 0) return "--timeout takes a positive number of seconds";
                            config_.timeout = *v;
                            return true;
                          },
                          "<s>", "give up (FAIL) after this many seconds (default 600)")
        .addOption({"json"}, [this]() -> V { config_.json = true; return true; },
                   "print one JSON object instead of name=value lines")
        .addOptionWithArg({"combine"}, [this](kj::StringPtr s) -> V {
                            if (s != "on" && s != "off") return "--combine takes on or off";
                            config_.combine = worker_.combine = s == "on";
                            return true;
                          },
                          "<on|off>",
                          "key-race: SQLite's group commit in every process of the run "
                          "(default on; off: one transaction per command)")
        .addOptionWithArg({"durability"}, [this](kj::StringPtr s) -> V {
                            try {
                              config_.durability = worker_.durability = parse_durability(s.cStr());
                            } catch (const InvalidArgument&) {
                              return "--durability takes full, fenced or normal";
                            }
                            return true;
                          },
                          "<full|fenced|normal>",
                          "the drain workers' stores (concurrent-queue, kill-and-reclaim, "
                          "lease-storm, crash-writes, combiner-kill; default fenced)")
        // Internal: how the probe starts its workers.
        .addOptionWithArg({"worker"}, [this](kj::StringPtr s) -> V {
                            if (s != "drain" && s != "hold" && s != "assign" && s != "allocate" &&
                                s != "storm" && s != "cron" && s != "keys") {
                              return "--worker takes drain, hold, assign, allocate, storm, cron or "
                                     "keys";
                            }
                            worker_.role = s.cStr();
                            return true;
                          },
                          "<role>", "(internal)")
        .addOptionWithArg({"project"}, [this](kj::StringPtr s) -> V { worker_.project = s.cStr(); return true; }, "<id>", "(internal)")
        .addOptionWithArg({"owner"}, [this](kj::StringPtr s) -> V { worker_.owner = s.cStr(); return true; }, "<id>", "(internal)")
        .addOptionWithArg({"record"}, [this](kj::StringPtr s) -> V { worker_.record = s.cStr(); return true; }, "<path>", "(internal)")
        .addOptionWithArg({"gate-fd"}, [this](kj::StringPtr s) -> V {
                            auto v = integer<int>(s);
                            if (!v || *v < 0) return "--gate-fd takes a file descriptor";
                            worker_.gate_fd = *v;
                            return true;
                          },
                          "<fd>", "(internal)")
        .addOptionWithArg({"lease"}, [this](kj::StringPtr s) -> V {
                            auto v = number(s);
                            if (!v || *v <= 0) return "--lease takes a positive number of seconds";
                            worker_.lease = *v;
                            return true;
                          },
                          "<s>", "(internal)")
        .addOptionWithArg({"stall-probability"}, [this](kj::StringPtr s) -> V {
                            auto v = number(s);
                            if (!v || *v < 0 || *v > 1) return "--stall-probability takes a number from 0 to 1";
                            worker_.stall_probability = *v;
                            return true;
                          },
                          "<p>", "(internal)")
        .addOptionWithArg({"stall"}, [this](kj::StringPtr s) -> V {
                            auto v = number(s);
                            if (!v || *v < 0) return "--stall takes a number of seconds";
                            worker_.stall = *v;
                            return true;
                          },
                          "<s>", "(internal)")
        .addOptionWithArg({"flags"}, [this](kj::StringPtr s) -> V { worker_.flags = s.cStr(); return true; }, "<path>", "(internal)")
        .addOptionWithArg({"session"}, [this](kj::StringPtr s) -> V { worker_.session = s.cStr(); return true; }, "<id>", "(internal)")
        .addOptionWithArg({"slots"}, [this](kj::StringPtr s) -> V { worker_.slots = s.cStr(); return true; }, "<path>", "(internal)")
        .addOptionWithArg({"duration"}, [this](kj::StringPtr s) -> V {
                            auto v = number(s);
                            if (!v || *v <= 0) return "--duration takes a positive number of seconds";
                            worker_.duration = *v;
                            return true;
                          },
                          "<s>", "(internal)")
        .addOptionWithArg({"from"}, [this](kj::StringPtr s) -> V {
                            auto v = integer<std::int64_t>(s);
                            if (!v || *v <= 0) return "--from takes a positive integer";
                            worker_.from = *v;
                            return true;
                          },
                          "<minute>", "(internal)")
        .addOptionWithArg({"ahead"}, [this](kj::StringPtr s) -> V {
                            auto v = integer<std::int64_t>(s);
                            if (!v || *v < 0) return "--ahead takes a number of minutes";
                            worker_.ahead = *v;
                            return true;
                          },
                          "<minutes>", "(internal)")
        .addOptionWithArg({"slot"}, [this](kj::StringPtr s) -> V {
                            auto v = integer<int>(s);
                            if (!v || *v < 0 || *v >= 4096) return "--slot takes an integer from 0 to 4095";
                            worker_.slot = *v;
                            return true;
                          },
                          "<n>", "(internal)")
        .callAfterParsing([this]() -> V {
          if (config_.store.empty()) return "--store PATH is required";
          if (worker_.role.empty() && config_.scenario.empty()) return "--scenario NAME is required";
          if (worker_.role.empty() && !config_.combine && config_.scenario != "key-race") {
            return "--combine off is for key-race only";
          }
          throw Exit{run()};
        })
        .build();
  }

  int run() {
    try {
      if (worker_.role == "assign") {
        return race::run_session({.store = worker_.store,
                                  .project = worker_.project,
                                  .session = worker_.session,
                                  .journal = worker_.record,
                                  .gate_fd = worker_.gate_fd,
                                  .lease = worker_.lease,
                                  .stall_probability = worker_.stall_probability,
                                  .slots = worker_.slots,
                                  .duration = worker_.duration});
      }
      if (worker_.role == "allocate") {
        return alloc::run_session({.store = worker_.store,
                                   .project = worker_.project,
                                   .session = worker_.session,
                                   .journal = worker_.record,
                                   .gate_fd = worker_.gate_fd,
                                   .lease = worker_.lease,
                                   .abandon_probability = worker_.stall_probability,
                                   .abandon_lease = worker_.stall,
                                   .give_up = worker_.duration});
      }
      if (worker_.role == "storm") {
        return storm::run_worker({.store = worker_.store,
                                  .project = worker_.project,
                                  .owner = worker_.owner,
                                  .journal = worker_.record,
                                  .gate_fd = worker_.gate_fd,
                                  .lease = worker_.lease,
                                  .flags = worker_.flags,
                                  .slot = worker_.slot,
                                  .stall_probability = worker_.stall_probability,
                                  .stall_cap = worker_.stall});
      }
      if (worker_.role == "cron") {
        return cron::run_worker({.store = worker_.store,
                                 .project = worker_.project,
                                 .owner = worker_.owner,
                                 .journal = worker_.record,
                                 .gate_fd = worker_.gate_fd,
                                 .id = worker_.slot,
                                 .first_minute = worker_.from,
                                 .occurrences = config_.items.value_or(200),
                                 .ahead = worker_.ahead});
      }
      if (worker_.role == "keys") {
        return keys::run_worker({.store = worker_.store,
                                 .project = worker_.project,
                                 .owner = worker_.owner,
                                 .journal = worker_.record,
                                 .gate_fd = worker_.gate_fd,
                                 .flags = worker_.flags,
                                 .slot = worker_.slot,
                                 .combine = worker_.combine});
      }
      if (!worker_.role.empty()) {  // drain or hold
        return drain::run_worker({.hold = worker_.role == "hold",
                                  .store = worker_.store,
                                  .project = worker_.project,
                                  .owner = worker_.owner,
                                  .record = worker_.record,
                                  .gate_fd = worker_.gate_fd,
                                  .lease = worker_.lease,
                                  .stall_probability = worker_.stall_probability,
                                  .stall = worker_.stall,
                                  .flags = worker_.flags,
                                  .slot = worker_.slot,
                                  .durability = worker_.durability});
      }
      Probe probe(config_);
      return probe.run();
    } catch (const std::exception& e) {
      std::cerr << "cplane-probe: " << e.what() << '\n';
      return 1;
    }
  }

 private:
  // The whole of `s` as a decimal integer that fits in Int, else nullopt.
  template <class Int>
  static std::optional<Int> integer(kj::StringPtr s) {
    Int value{};
    const char* end = s.begin() + s.size();
    auto [p, ec] = std::from_chars(s.begin(), end, value);
    if (s.size() == 0 || ec != std::errc() || p != end) return std::nullopt;
    return value;
  }

  // The whole of `s` as a finite number, else nullopt.
  static std::optional<double> number(kj::StringPtr s) {
    char* end = nullptr;
    const double value = std::strtod(s.cStr(), &end);
    if (s.size() == 0 || end != s.cStr() + s.size() || !std::isfinite(value)) return std::nullopt;
    return value;
  }

  kj::ProcessContext& context_;
  Config config_;
  WorkerArgs worker_;
};

}  // namespace
}  // namespace cplane::probe

int main(int argc, char** argv) {
  using namespace cplane::probe;
  ProbeContext context(argc > 0 ? argv[0] : "cplane-probe");
  int code = 0;
  try {
    Main main(context);
    auto func = main.main();
    // "--workers -1" is a value, refused for what it is, not a missing one.
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const bool takes_value = a == "--store" || a == "--scenario" || a == "--workers" ||
                               a == "--items" || a == "--timeout" || a == "--combine";
      if (takes_value && i + 1 < argc) {
        args.push_back(a + "=" + argv[++i]);
      } else {
        args.push_back(a);
      }
    }
    std::vector<kj::StringPtr> params;
    for (const auto& a : args) params.emplace_back(a.c_str());
    func("cplane-probe", kj::arrayPtr(params.data(), params.size()));
  } catch (const Exit& e) {
    code = e.code;
  } catch (const std::exception& e) {
    std::cerr << "cplane-probe: " << e.what() << '\n';
    code = 1;
  }
  std::cout.flush();
  return code;
}
