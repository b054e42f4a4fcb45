// cplane-probe: the substrate probe. Separate worker processes (fork + exec
// of this binary, each with its own connection) hammer one store file on the
// real disk; the probe then checks every count exactly and exits 0 only when
// all of them are right.
//
//   cplane-probe --store PATH --scenario NAME [--workers N] [--items M]
//                [--timeout S] [--json]
//
// Scenarios: concurrent-queue, kill-and-reclaim, lease-storm, crash-writes,
// combiner-kill, assign-race, allocate-race, retry-storm, cron-race (see README.md,
// "The probe").
// Each run works in a project of its own (probe-<scenario>-<pid>-<time>)
// claimed through a scoped actor, so an existing store is never disturbed;
// verify (and, on SQLite, PRAGMA integrity_check) still checks the whole
// store.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <kj/main.h>

#include <cplane/cplane.hpp>

#include "events/clock.hpp"
#include "json/json_writer.hpp"
#include "commands/testing.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "probe/allocate_race.hpp"
#include "probe/assign_race.hpp"
#include "probe/cron_race.hpp"
#include "probe/fleet.hpp"
#include "probe/retry_storm.hpp"
#include "storage/backend.hpp"
#include "storage/sqlite/combine_area.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/sqlite_backend.hpp"

namespace cplane::probe {
namespace {

using fleet::seconds_now;

void sleep_for(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// ---------------------------------------------------------------------------
// Worker side: the same binary, started with --worker ROLE.

struct WorkerConfig {
  std::string role;  // "drain", "hold", "assign", "allocate", "storm" or "cron"
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
};

class CommandFlag {
 public:
  CommandFlag(const std::string& path, int slot) {
    if (path.empty() || slot < 0) return;
    int fd = ::open(path.c_str(), O_RDWR);
    if (fd < 0) return;
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p != MAP_FAILED) byte_ = static_cast<volatile char*>(p) + slot;
  }
  void set(bool inside) {
    if (byte_ != nullptr) *byte_ = inside ? 1 : 0;
  }

 private:
  volatile char* byte_ = nullptr;
};

int run_worker(const WorkerConfig& c) {
  ControlStore store{c.store};
  if (c.gate_fd >= 0) fleet::StartGate::wait_on(c.gate_fd);
  CommandFlag flag(c.flags, c.slot);
  fleet::WorkerRecord r;
  const ClaimOptions options{c.project, Seconds{c.lease}, {}};
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()));
  std::uniform_real_distribution<double> uniform(0, 1);

  if (c.role == "hold") {
    auto claimed = store.claim(c.owner, options);
    if (!claimed) return 3;
    r.claims = 1;
    r.claimed_ids.push_back(fmt::format("{}:{}", claimed->item_id, claimed->fence));
    fleet::write_record(c.record, r);
    while (true) ::pause();  // hold the item until killed
  }

  while (true) {
    std::optional<ClaimedItem> claimed;
    try {
      flag.set(true);
      const double t0 = seconds_now();
      claimed = store.claim(c.owner, options);
      const double dt = seconds_now() - t0;
      flag.set(false);
      r.claim_latency.push_back(dt);
      r.longest_wait = std::max(r.longest_wait, dt);
    } catch (const StorageError& e) {
      flag.set(false);
      if (e.category() != StorageError::Category::busy) throw;
      ++r.busy_errors;
      continue;
    }
    if (!claimed) {
      // Nothing available now; stop only when nothing is left in flight
      // (a stalled or dead holder's lease may still lapse).
      const auto counts = store.status_counts(c.project);
      if (counts.ready == 0 && counts.claimed == 0) break;
      sleep_for(std::min(0.05, c.lease / 4));
      continue;
    }
    ++r.claims;
    r.claimed_ids.push_back(claimed->item_id);
    if (c.stall_probability > 0 && uniform(rng) < c.stall_probability) sleep_for(c.stall);
    try {
      flag.set(true);
      const double t0 = seconds_now();
      store.finish(claimed->item_id, claimed->fence, Outcome::done);
      r.longest_wait = std::max(r.longest_wait, seconds_now() - t0);
      flag.set(false);
      ++r.finishes;
    } catch (const FenceRejected&) {
      flag.set(false);
      ++r.refused;  // a stale report: someone reclaimed the item
    } catch (const StorageError& e) {
      flag.set(false);
      if (e.category() != StorageError::Category::busy) throw;
      ++r.busy_errors;
    }
  }
  fleet::write_record(c.record, r);
  return 0;
}

// ---- assign-race: one session per process -----------------------------------
// The session asks for one of a few items over and over. Given one, it makes
// a few mutations through the gate, then gives the item back, keeps it for a
// while (its heartbeats renew the lease), or stalls past its lease and
// presents the old fence, which must be refused. Every answer goes to its
// journal (probe/assign_race.hpp), which the probe holds to the ledger.

const std::vector<std::string> kRaceActions = {"comment", "push"};

std::vector<std::string> read_slots(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> ids;
  for (std::string id; in >> id;) ids.push_back(id);
  if (ids.empty()) throw std::runtime_error("no items in " + path);
  return ids;
}

class RaceSession {
 public:
  explicit RaceSession(const WorkerConfig& c)
      : c_(c),
        store_(c.store),
        lease_us_(static_cast<Micros>(c.lease * 1e6)),
        rng_(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())) {
    journal_.session = c.session;
  }

  // 0 when every call went through; the journal is written either way.
  int run() {
    int code = 0;
    try {
      store_.open_session(c_.session, c_.project);
      if (c_.gate_fd >= 0) fleet::StartGate::wait_on(c_.gate_fd);
      slots_ = read_slots(c_.slots);
      ask_until(seconds_now() + c_.duration);
      race::Entry e;
      e.t0 = now_micros();
      const auto released = store_.close_session(c_.session);
      e.t1 = now_micros();
      e.kind = race::EntryKind::session_closed;
      for (const auto& item : released) {
        e.item = item;
        journal_.entries.push_back(e);
      }
    } catch (const std::exception& e) {
      std::cerr << "cplane-probe: session " << c_.session << ": " << e.what() << '\n';
      code = 1;
    }
    race::write_journal(c_.record, journal_);
    return code;
  }

 private:
  struct Held {
    Fence fence = 0;
    std::string head;  // pinned when it was assigned
    Micros lease_end = 0;
    double since = 0;  // seconds_now() when assigned
  };

  double uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }

  void ask_until(double end) {
    double last_heartbeat = seconds_now();
    std::int64_t round = 0;
    while (seconds_now() < end) {
      if (!held_.empty() && seconds_now() - last_heartbeat > c_.lease / 3) {
        heartbeat();
        last_heartbeat = seconds_now();
      }
      give_back_kept();
      if (++round % 16 == 0) slots_ = read_slots(c_.slots);
      const std::string item = slots_[rng_() % slots_.size()];
      const Assignment a = ask(item);
      if (a.outcome == AssignOutcome::no_safe_work) {
        slots_ = read_slots(c_.slots);  // closed: the control plane has replaced it
        continue;
      }
      if (a.outcome == AssignOutcome::wait) {
        sleep_for(uniform(0.0005, 0.002));
        continue;
      }
      const auto it = held_.find(item);
      const bool renewal = it != held_.end() && it->second.fence == a.fence;
      held_[item] = {a.fence, a.expected_head, a.lease_expires_at,
                     renewal ? it->second.since : seconds_now()};
      if (!renewal) ++fresh_;
      if (!work(item)) continue;
      const double r = uniform(0, 1);
      // Every session stalls on its second fresh assignment, and now and then.
      if ((!renewal && fresh_ == 2) || r < c_.stall_probability) {
        stall(item);
      } else if (r < 0.6) {
        give_back(item);
      }  // else keep it: heartbeats renew it until give_back_kept
    }
  }

  Assignment ask(const std::string& item) {
    race::Entry e;
    e.kind = race::EntryKind::answer;
    e.item = item;
    e.t0 = now_micros();
    const Assignment a = store_.assign_and_lease(c_.session, item, kRaceActions, Seconds{c_.lease});
    e.t1 = now_micros();
    e.result = std::string(to_string(a.outcome));
    e.fence = a.fence;
    e.lease_end = a.lease_expires_at;
    e.until = a.until;
    e.head = a.expected_head;
    journal_.entries.push_back(std::move(e));
    return a;
  }

  // The gate: record_mutation when `write`, else require_valid_assignment.
  // `head` "" presents none.
  GateVerdict present(bool write, const char* purpose, const std::string& item, Fence fence,
                      const std::string& action, const std::string& head) {
    race::Entry e;
    e.kind = race::EntryKind::gate;
    e.item = item;
    e.fence = fence;
    e.head = head;
    e.write = write;
    e.purpose = purpose;
    e.action = action;
    e.seen_seq = store_.item(item).last_seq;
    const std::optional<std::string> presented =
        head.empty() ? std::nullopt : std::optional<std::string>(head);
    e.t0 = now_micros();
    const GateVerdict v =
        write ? store_.record_mutation(c_.session, item, fence, action, presented)
              : store_.require_valid_assignment(c_.session, item, fence, action, presented);
    e.t1 = now_micros();
    e.result = v ? "allowed" : to_string(v.reason());
    journal_.entries.push_back(std::move(e));
    return v;
  }

  // A few mutations under the item's assignment; false (and the item given
  // up) at the first denial.
  bool work(const std::string& item) {
    const Held h = held_.at(item);
    if (fresh_ % 4 == 0) present(false, "merge", item, h.fence, "merge", h.head);
    if (uniform(0, 1) < 0.3) present(false, "check", item, h.fence, "push", h.head);
    const int mutations = 1 + static_cast<int>(rng_() % 3);
    for (int i = 0; i < mutations; ++i) {
      const std::string head = rng_() % 5 == 0 ? "" : h.head;
      const GateVerdict v = present(true, "work", item, h.fence, kRaceActions[i % 2], head);
      if (!v) {
        // The head moved under a live lease: give the item back for a new
        // assignment to pin the new head. Otherwise it is gone already.
        if (v.reason() == GateReason::head_drift) {
          give_back(item);
        } else {
          held_.erase(item);
        }
        return false;
      }
      sleep_for(uniform(0.001, 0.003));
    }
    return true;
  }

  void give_back(const std::string& item) {
    const Fence fence = held_.at(item).fence;
    held_.erase(item);
    race::Entry e;
    e.kind = race::EntryKind::released;
    e.item = item;
    e.fence = fence;
    e.t0 = now_micros();
    try {
      store_.release(item, fence, "probe gives it back");
      e.result = "ok";
    } catch (const FenceRejected& x) {
      e.result = std::string(to_string(x.reason()));
    }
    e.t1 = now_micros();
    journal_.entries.push_back(std::move(e));
  }

  // Kept items go back after half a lease, with one last mutation first.
  void give_back_kept() {
    std::vector<std::string> due;
    for (const auto& [item, h] : held_) {
      if (seconds_now() - h.since > c_.lease / 2) due.push_back(item);
    }
    for (const auto& item : due) {
      const Held h = held_.at(item);
      present(true, "final", item, h.fence, "comment", h.head);
      give_back(item);
    }
  }

  void heartbeat() {
    race::Entry e;
    e.kind = race::EntryKind::extended;
    e.t0 = now_micros();
    const auto extended = store_.session_heartbeat(c_.session, Seconds{c_.lease});
    e.t1 = now_micros();
    std::set<std::string> live;
    for (const auto& [item, end] : extended) {
      e.item = item;
      e.lease_end = end;
      journal_.entries.push_back(e);
      live.insert(item);
      if (auto it = held_.find(item); it != held_.end()) it->second.lease_end = end;
    }
    // What it did not extend was lapsed, taken over or closed: the old
    // fence, presented once more, must be refused.
    std::vector<std::string> lost;
    for (const auto& [item, h] : held_) {
      if (live.count(item) == 0) lost.push_back(item);
    }
    for (const auto& item : lost) {
      const Held h = held_.at(item);
      held_.erase(item);
      present(true, "lost", item, h.fence, "push", h.head);
    }
  }

  // Sleeps until half a lease past the lease's end (by the store's clock),
  // presents the old fence, then asks for the item again: under a fresh
  // fence of its own the old one is stale.
  void stall(const std::string& item) {
    const Held h = held_.at(item);
    held_.erase(item);
    const Micros wake = h.lease_end + lease_us_ / 2;
    for (Micros now = now_micros(); now < wake; now = now_micros()) sleep_for((wake - now) / 1e6);
    present(true, "stall", item, h.fence, "push", h.head);
    const double give_up = seconds_now() + 2 * c_.lease;
    while (seconds_now() < give_up) {
      const Assignment a = ask(item);
      if (a.outcome == AssignOutcome::no_safe_work) return;
      if (a.outcome == AssignOutcome::wait) {
        sleep_for(std::clamp((a.until - now_micros()) / 1e6, 0.001, 0.02));
        continue;
      }
      held_[item] = {a.fence, a.expected_head, a.lease_expires_at, seconds_now()};
      ++fresh_;
      if (a.fence != h.fence) present(true, "stale", item, h.fence, "push", h.head);
      if (work(item)) give_back(item);
      return;
    }
  }

  const WorkerConfig& c_;
  ControlStore store_;
  Micros lease_us_;
  std::mt19937_64 rng_;
  std::vector<std::string> slots_;
  std::map<std::string, Held> held_;
  std::int64_t fresh_ = 0;  // fresh assignments so far
  race::Journal journal_;
};

// ---------------------------------------------------------------------------
// Probe side.

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
};

// Counts in print order, and the checks that decide PASS.
class Report {
 public:
  template <class T>
  void count(const std::string& name, T value) {
    values_.push_back({name, fmt::format("{}", value), std::is_arithmetic_v<T>});
  }
  void fixed(const std::string& name, double value, int digits = 3) {
    values_.push_back({name, fmt::format("{:.{}f}", value, digits), std::isfinite(value)});
  }
  void check(bool ok, const std::string& what) {
    if (!ok) failed_.push_back(what);
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

class Probe {
 public:
  explicit Probe(const Config& config) : config_(config) {
    project_ = fmt::format("probe-{}-{}-{}", config.scenario, ::getpid(), now_micros() / 1000);
    scratch_ = (std::filesystem::temp_directory_path() / project_).string();
    std::filesystem::create_directories(scratch_);
  }
  ~Probe() {
    for (pid_t pid : live_) ::kill(pid, SIGKILL);
    for (pid_t pid : live_) fleet::wait_exit(pid);
    std::error_code ec;
    std::filesystem::remove_all(scratch_, ec);
  }

  int run() {
    Report report;
    if (config_.scenario == "concurrent-queue") {
      concurrent_queue(report);
    } else if (config_.scenario == "kill-and-reclaim") {
      kill_and_reclaim(report);
    } else if (config_.scenario == "lease-storm") {
      lease_storm(report);
    } else if (config_.scenario == "crash-writes") {
      crash_writes(report);
    } else if (config_.scenario == "combiner-kill") {
      combiner_kill(report);
    } else if (config_.scenario == "assign-race") {
      assign_race(report);
    } else if (config_.scenario == "allocate-race") {
      allocate_race(report);
    } else if (config_.scenario == "retry-storm") {
      retry_storm(report);
    } else if (config_.scenario == "cron-race") {
      cron_race(report);
    } else {
      std::cerr << "cplane-probe: unknown scenario '" << config_.scenario
                << "': expected concurrent-queue, kill-and-reclaim, lease-storm, crash-writes, "
                   "combiner-kill, assign-race, allocate-race, retry-storm or cron-race\n";
      return 2;
    }
    report.print(config_.json, config_.scenario, config_.store);
    return report.pass() ? 0 : 1;
  }

 private:
  // ---- setup and process management ----------------------------------------
  std::vector<std::string> setup(std::int64_t items) {
    ControlStore store{config_.store};
    store.create_project(project_, "cplane probe " + config_.scenario);
    store.grant(project_, project_);
    return enqueue_more(store, 0, items);
  }

  // Queues items first .. first + count - 1 (payload {"n": i}).
  std::vector<std::string> enqueue_more(ControlStore& store, std::int64_t first,
                                        std::int64_t count) {
    std::vector<std::string> ids;
    std::vector<std::string> payloads;
    const std::int64_t items = first + count;
    for (std::int64_t i = first; i < items;) {
      const auto n = std::min<std::int64_t>(1000, items - i);
      payloads.clear();
      for (std::int64_t k = 0; k < n; ++k) payloads.push_back(fmt::format(R"({{"n":{}}})", i + k));
      auto batch = store.enqueue_batch(project_, payloads);
      ids.insert(ids.end(), batch.begin(), batch.end());
      i += n;
    }
    return ids;
  }

  std::string record_path(int id) const { return fmt::format("{}/worker-{}", scratch_, id); }

  pid_t spawn(const std::string& role, int id, fleet::StartGate* gate, double lease,
              double stall_probability = 0, double stall = 0, int slot = -1,
              const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {
        "cplane-probe", "--worker", role, "--store", config_.store, "--project", project_,
        "--owner", fmt::format("probe-worker-{}", id), "--record", record_path(id),
        "--lease", fmt::format("{}", lease), "--stall-probability",
        fmt::format("{}", stall_probability), "--stall", fmt::format("{}", stall)};
    if (gate != nullptr) {
      args.push_back("--gate-fd");
      args.push_back(std::to_string(gate->read_fd()));
    }
    if (slot >= 0) {
      args.insert(args.end(), {"--flags", flags_path(), "--slot", std::to_string(slot)});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      if (gate != nullptr) gate->prepare_exec();
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      ::_exit(127);
    }
    live_.push_back(pid);
    return pid;
  }

  std::string flags_path() const { return scratch_ + "/flags"; }

  // Reaps the workers that have exited (counting those that failed); true
  // while any is still running.
  bool any_running(int& failures) {
    for (auto it = live_.begin(); it != live_.end();) {
      int status = 0;
      pid_t done = ::waitpid(*it, &status, WNOHANG);
      if (done == *it) {
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) ++failures;
        it = live_.erase(it);
      } else {
        ++it;
      }
    }
    return !live_.empty();
  }

  void kill_all() {
    for (pid_t pid : live_) ::kill(pid, SIGKILL);
    for (pid_t pid : live_) fleet::wait_exit(pid);
    live_.clear();
  }

  // SIGKILLs one live worker and reaps it: its exit code, 128 + SIGKILL
  // unless it had exited already (0 when it drained, else it failed).
  int kill_worker(pid_t pid) {
    ::kill(pid, SIGKILL);
    const int code = fleet::wait_exit(pid);
    live_.erase(std::remove(live_.begin(), live_.end(), pid), live_.end());
    return code;
  }

  // ---- the combiner (SQLite group commit) --------------------------------------
  // The store's group-commit area (storage/sqlite/combine_area.hpp), or nullptr:
  // PostgreSQL, or SQLite with group commit off or unavailable.
  static storage::CombineArea* combine_area(ControlStore& store) {
    return testing::backend(store).combine_area();
  }

  // Where the combiner's batch stands, as its slots show it: `running` while
  // some request it took has no answer yet (its transaction is open, before
  // COMMIT), `staged` once every one has (committing, or committed and not
  // yet handed out), `none` between batches.
  enum class BatchPhase { none, running, staged };

  static BatchPhase batch_phase(const storage::CombineArea& area) {
    bool staged = false;
    for (std::uint32_t i = 0; i < storage::CombineArea::kSlots; ++i) {
      const auto state = area.state(i);
      if (state == storage::CombineArea::kTaken) return BatchPhase::running;
      if (state == storage::CombineArea::kStaged) staged = true;
    }
    return staged ? BatchPhase::staged : BatchPhase::none;
  }

  struct Combiner {
    int slot = -1;  // the combiner's slot in the fleet, -1 when no worker combines
    BatchPhase phase = BatchPhase::none;
  };

  // Watches the area for up to `patience` seconds until it names one of the
  // workers in `slots` as the combiner with its batch in phase `aim`; else
  // what it showed last (possibly no worker).
  static Combiner await_combiner(const storage::CombineArea& area,
                                 const std::vector<std::pair<pid_t, int>>& slots,
                                 BatchPhase aim, double patience) {
    const double give_up = seconds_now() + patience;
    Combiner seen;
    do {
      seen = {};
      const pid_t pid = area.combiner();
      for (std::size_t i = 0; pid != 0 && i < slots.size(); ++i) {
        if (slots[i].first == pid) seen = {static_cast<int>(i), batch_phase(area)};
      }
      if (seen.slot >= 0 && seen.phase == aim) return seen;
      ::usleep(20);
    } while (seconds_now() < give_up);
    return seen;
  }

  // Waits for every live worker; false on timeout (all are then killed).
  bool wait_all(double deadline, int& failures) {
    while (any_running(failures)) {
      if (seconds_now() > deadline) {
        kill_all();
        return false;
      }
      sleep_for(0.005);
    }
    return true;
  }

  std::vector<fleet::WorkerRecord> records(int first, int count) {
    std::vector<fleet::WorkerRecord> out;
    for (int i = first; i < first + count; ++i) {
      if (std::filesystem::exists(record_path(i))) out.push_back(fleet::read_record(record_path(i)));
    }
    return out;
  }

  // ---- the checks every scenario ends with -----------------------------------
  // Per item: exactly one terminal event, status done, claim fences strictly
  // rising, the finish under the last claim's fence. Then verify the store.
  void check_ledger(Report& report, const std::vector<std::string>& ids) {
    ControlStore store{config_.store};
    std::int64_t done = 0, lost = 0, multiple_terminals = 0, fence_violations = 0,
                 reclaims = 0, claim_events = 0, claims_while_leased = 0;
    for (const auto& id : ids) {
      const auto events = store.events(id);
      int terminals = 0;
      bool fences_ok = true;
      // The fold the commands use, judged by the rules they use
      // (projections/rules.hpp): the probe, verify and decide agree by
      // construction on what a claim and a report may do.
      ItemRow row;
      for (const auto& e : events) {
        if (auto* c = std::get_if<ItemClaimed>(&e.event.body)) {
          ++claim_events;
          if (row.status == ItemStatus::claimed && !claimable(row, e.event.at)) {
            ++claims_while_leased;  // two holders at once
          }
          if (c->attempt > 1) ++reclaims;
          if (!fence_rises(row.fence, c->fence)) fences_ok = false;
        } else if (auto* f = std::get_if<ItemFinished>(&e.event.body)) {
          ++terminals;
          if (fence_refusal(&row, f->fence)) fences_ok = false;
        }
        row = apply(std::move(row), e);
      }
      if (terminals > 1) ++multiple_terminals;
      if (!fences_ok) ++fence_violations;
      if (store.item(id).status == ItemStatus::done && terminals == 1) {
        ++done;
      } else {
        ++lost;
      }
    }
    report.count("done", done);
    report.count("lost", lost);
    report.count("claim_events", claim_events);
    report.count("reclaims", reclaims);
    ledger_reclaims_ = reclaims;
    report.count("items_with_two_terminal_events", multiple_terminals);
    report.count("fence_violations", fence_violations);
    report.count("claims_while_leased", claims_while_leased);
    report.check(done == static_cast<std::int64_t>(ids.size()), "done == items");
    report.check(lost == 0, "lost == 0");
    report.check(multiple_terminals == 0, "no item has two terminal events");
    report.check(fence_violations == 0, "fences rise strictly per item");
    report.check(claims_while_leased == 0, "no item was claimed while another lease held it");
    check_verify(report, store);
  }

  // Verifies the whole store: its rows against the fold of its log; on
  // SQLite, its file too (PRAGMA integrity_check).
  void check_verify(Report& report, ControlStore& store) {
    const double t0 = seconds_now();
    const auto problems = verify_ledger(store);
    const double verify_seconds = seconds_now() - t0;
    for (std::size_t i = 0; i < std::min<std::size_t>(problems.size(), 10); ++i) {
      std::cerr << "cplane-probe: verify: " << to_string(problems[i].kind) << ' '
                << problems[i].item_id << ": " << problems[i].detail << '\n';
    }
    report.count("verify_problems", problems.size());
    report.fixed("verify_seconds", verify_seconds);
    report.check(problems.empty(), "verify finds no problems");
    const std::string path = storage::sqlite_path(config_.store);
    if (path.empty()) return;  // a server checks its own pages
    const auto complaints = storage::sqlite_integrity_check(path);
    for (std::size_t i = 0; i < std::min<std::size_t>(complaints.size(), 10); ++i) {
      std::cerr << "cplane-probe: integrity_check: " << complaints[i] << '\n';
    }
    report.count("integrity_check", complaints.empty() ? "ok" : "failed");
    report.check(complaints.empty(), "PRAGMA integrity_check is ok");
  }

  // `reclaims_expected`: a claim of an item already claimed is a reclaim
  // (lease-storm), not a duplicate.
  void worker_stats(Report& report, const std::vector<fleet::WorkerRecord>& rs,
                    std::int64_t items, bool reclaims_expected = false) {
    std::int64_t claimed = 0, busy = 0, refused = 0, min_claims = -1, max_claims = 0;
    std::set<std::string> distinct;
    std::vector<double> latency;
    double longest = 0;
    for (const auto& r : rs) {
      claimed += r.claims;
      busy += r.busy_errors;
      refused += r.refused;
      min_claims = min_claims < 0 ? r.claims : std::min(min_claims, r.claims);
      max_claims = std::max(max_claims, r.claims);
      distinct.insert(r.claimed_ids.begin(), r.claimed_ids.end());
      latency.insert(latency.end(), r.claim_latency.begin(), r.claim_latency.end());
      longest = std::max(longest, r.longest_wait);
    }
    report.count("items", items);
    report.count("claimed", claimed);
    report.count("distinct", distinct.size());
    report.count(reclaims_expected ? "repeat_claims" : "duplicate_claims",
                 claimed - static_cast<std::int64_t>(distinct.size()));
    report.count("busy_errors", busy);
    report.count("stale_reports_refused", refused);
    report.count("worker_min_claims", std::max<std::int64_t>(min_claims, 0));
    report.count("worker_max_claims", max_claims);
    report.fixed("claim_p50_ms", 1e3 * fleet::percentile(latency, 50));
    report.fixed("claim_p99_ms", 1e3 * fleet::percentile(latency, 99));
    report.fixed("claim_max_ms", 1e3 * fleet::percentile(latency, 100));
    report.fixed("longest_wait_ms", 1e3 * longest);
    report.check(busy == 0, "no busy or 'database is locked' error reached a worker");
    stats_claimed_ = claimed;
    stats_distinct_ = static_cast<std::int64_t>(distinct.size());
    stats_refused_ = refused;
  }

  int workers_or(int fallback) const { return config_.workers.value_or(fallback); }
  std::int64_t items_or(std::int64_t fallback) const { return config_.items.value_or(fallback); }
  double deadline() const { return start_ + config_.timeout; }

  // ---- scenarios -------------------------------------------------------------
  void concurrent_queue(Report& report) {
    const int workers = workers_or(16);
    const std::int64_t items = items_or(10'000);
    const auto ids = setup(items);
    fleet::StartGate gate;
    for (int w = 0; w < workers; ++w) spawn("drain", w, &gate, 60);
    sleep_for(0.2);  // let every worker open its connection
    const double t0 = seconds_now();
    gate.release();
    int failures = 0;
    const bool finished = wait_all(deadline(), failures);
    const double elapsed = seconds_now() - t0;
    const auto rs = records(0, workers);
    report.count("workers", workers);
    worker_stats(report, rs, items);
    report.fixed("elapsed_s", elapsed);
    report.fixed("items_per_s", items / elapsed, 0);
    report.count("worker_failures", failures);
    report.count("timed_out", finished ? 0 : 1);
    report.check(finished, "the drain finished before --timeout");
    report.check(failures == 0, "every worker exited cleanly");
    report.check(stats_claimed_ == items, "claimed == items");
    report.check(stats_distinct_ == items, "distinct == items");
    report.check(stats_claimed_ == stats_distinct_, "no duplicate claims");
    check_ledger(report, ids);
  }

  void kill_and_reclaim(Report& report) {
    const int workers = workers_or(4);
    const std::int64_t items = items_or(500);
    const double lease = 1.0;
    // Two items at first (the victim's and the competitor's); the rest are
    // queued once the victim's lease has lapsed, so that the lapsed item is
    // the one available earliest (a claim takes that one first).
    auto ids = setup(std::min<std::int64_t>(items, 2));
    const pid_t victim = spawn("hold", 999, nullptr, lease);
    while (!std::filesystem::exists(record_path(999))) {
      if (seconds_now() > deadline()) throw std::runtime_error("the victim never claimed");
      sleep_for(0.005);
    }
    const auto held = fleet::read_record(record_path(999)).claimed_ids.at(0);
    const std::string item = held.substr(0, held.find(':'));
    const Fence fence = std::stoull(held.substr(held.find(':') + 1));
    ::kill(victim, SIGKILL);
    live_.erase(std::find(live_.begin(), live_.end(), victim));
    const int status = fleet::wait_exit(victim);
    report.count("victim_killed_by_signal", status == 128 + SIGKILL ? SIGKILL : 0);
    report.check(status == 128 + SIGKILL, "the victim died of SIGKILL while holding its item");
    report.count("victim_fence", fence);
    std::int64_t probe_claims = 0;
    {
      // Before the lease lapses a claim must take another item, never the
      // one the dead worker holds.
      ControlStore store{config_.store};
      auto other = store.claim("probe-competitor", {.actor = project_, .lease = Seconds{30}});
      report.check(other.has_value() || items == 1, "a competing claim found work");
      if (other) {
        report.check(other->item_id != item, "the held item is not handed out before its lease lapses");
        store.finish(other->item_id, other->fence, Outcome::done);
        ++probe_claims;
      }
      report.check(store.item(item).owner == "probe-worker-999", "the item stays with the victim");
    }
    sleep_for(lease + 0.1);
    if (items > 2) {
      ControlStore store{config_.store};
      const auto more = enqueue_more(store, 2, items - 2);
      ids.insert(ids.end(), more.begin(), more.end());
    }

    // The survivor reclaims the lapsed item (available since its lease
    // lapsed, before every item queued since) and holds it while the dead
    // worker's late report arrives:
    // the item is claimed and live, so only the fence can refuse that report.
    std::int64_t survivor_claims = 0;
    bool refused = false;
    {
      ControlStore store{config_.store};
      auto survivor = store.claim("probe-survivor", {.actor = project_, .lease = Seconds{30}});
      report.check(survivor && survivor->item_id == item,
                   "the survivor's claim reclaims the dead worker's item");
      if (survivor) ++survivor_claims;
      try {
        store.finish(item, fence, Outcome::done);  // the dead worker's late report
      } catch (const FenceRejected& e) {
        // Refused for its fence, not because the item is terminal or free.
        refused = e.reason() == FenceRejected::Reason::stale_fence;
        if (!refused) {
          std::cerr << "cplane-probe: the late report was refused as " << to_string(e.reason())
                    << ", not as stale_fence: " << e.what() << '\n';
        }
      }
      const ItemRow row = store.item(item);
      report.check(row.status == ItemStatus::claimed && row.owner == "probe-survivor",
                   "the survivor still holds the item after the late report");
      if (survivor) {
        try {
          store.finish(survivor->item_id, survivor->fence, Outcome::done);
        } catch (const FenceRejected& e) {
          std::cerr << "cplane-probe: the survivor's report was refused: " << e.what() << '\n';
          report.check(false, "the survivor's report under the current fence is accepted");
        }
      }
    }

    fleet::StartGate gate;
    for (int w = 0; w < workers; ++w) spawn("drain", w, &gate, 30);
    gate.release();
    int failures = 0;
    const bool finished = wait_all(deadline(), failures);
    report.count("workers", workers);
    worker_stats(report, records(0, workers), items);
    report.check(finished && failures == 0, "the survivors drained the queue");

    ControlStore store{config_.store};
    Fence reclaim_fence = 0;
    int terminals = 0;
    for (const auto& e : store.events(item)) {
      if (auto* c = std::get_if<ItemClaimed>(&e.event.body)) reclaim_fence = c->fence;
      if (std::holds_alternative<ItemFinished>(e.event.body)) ++terminals;
    }
    report.count("reclaim_fence", reclaim_fence);
    report.count("killed_token_refused", refused ? 1 : 0);
    report.count("victim_item_terminal_events", terminals);
    report.check(reclaim_fence > fence, "the item was reclaimed under a higher fence");
    report.check(refused, "the killed worker's token is refused as stale while the item is held");
    report.check(terminals == 1, "the victim's item has exactly one terminal event");
    report.count("competitor_claims", probe_claims);
    report.count("survivor_claims", survivor_claims);
    report.check(stats_claimed_ + probe_claims + survivor_claims == items,
                 "every item claimed once by the survivors (and the competitor)");
    check_ledger(report, ids);
  }

  void lease_storm(Report& report) {
    const int workers = workers_or(16);
    const std::int64_t items = items_or(2'000);
    const double lease = 0.2, stall = 0.35, stall_probability = 0.05;
    const auto ids = setup(items);
    fleet::StartGate gate;
    for (int w = 0; w < workers; ++w) spawn("drain", w, &gate, lease, stall_probability, stall);
    sleep_for(0.2);
    const double t0 = seconds_now();
    gate.release();
    int failures = 0;
    const bool finished = wait_all(deadline(), failures);
    report.count("workers", workers);
    report.fixed("lease_s", lease);
    report.fixed("stall_s", stall);
    worker_stats(report, records(0, workers), items, true);
    report.fixed("elapsed_s", seconds_now() - t0);
    report.check(finished && failures == 0, "every worker finished before --timeout");
    check_ledger(report, ids);
    report.check(ledger_reclaims_ > 0, "lapsed leases were reclaimed (the storm happened)");
    report.check(stats_refused_ > 0, "stale reports were refused (the storm happened)");
  }

  // Kills of the combiner, by where its batch stood (batch_phase) just
  // before the SIGKILL.
  struct CombinerKills {
    std::int64_t total = 0, running = 0, staged = 0;
    void add(BatchPhase phase) {
      ++total;
      if (phase == BatchPhase::running) ++running;
      if (phase == BatchPhase::staged) ++staged;
    }
    void print(Report& report) const {
      report.count("combiner_kills", total);
      report.count("combiner_kills_before_commit", running);
      report.count("combiner_kills_all_staged", staged);
    }
  };

  // Workers SIGKILLed at random moments, most inside a command, each
  // replaced at once. On SQLite with group commit every other kill aims at
  // the combiner in the middle of its batch: alternately while its requests
  // run (before COMMIT) and once every answer is staged (at or after COMMIT,
  // before they are handed out).
  void crash_writes(Report& report) {
    const int workers = workers_or(8);
    const std::int64_t items = items_or(2'000);
    const double lease = 0.5;
    const int max_kills = 40;
    const auto ids = setup(items);
    {
      std::ofstream flags(flags_path(), std::ios::binary);
      flags << std::string(4096, '\0');
    }
    int fd = ::open(flags_path().c_str(), O_RDWR);
    auto* flags = static_cast<volatile char*>(
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
    if (flags == MAP_FAILED) throw std::runtime_error("mmap failed");

    std::vector<std::pair<pid_t, int>> slots;  // live worker per slot, with its id
    int next_id = 0;
    for (int w = 0; w < workers; ++w) {
      slots.emplace_back(spawn("drain", next_id, nullptr, lease, 0, 0, w), next_id);
      ++next_id;
    }
    std::mt19937 rng(std::random_device{}());
    int kills = 0, kills_inside = 0, failures = 0;
    CombinerKills combiner_kills;
    ControlStore store{config_.store};
    const storage::CombineArea* area = combine_area(store);
    while (seconds_now() < deadline()) {
      const auto counts = store.status_counts(project_);
      if (counts.ready == 0 && counts.claimed == 0) break;
      sleep_for(std::uniform_real_distribution<double>(0.005, 0.04)(rng));
      if (kills >= max_kills) continue;
      Combiner combiner;
      if (area != nullptr && kills % 2 == 1) {
        const auto aim = kills % 4 == 1 ? BatchPhase::running : BatchPhase::staged;
        combiner = await_combiner(*area, slots, aim, 0.02);
      }
      int slot = combiner.slot;
      if (slot < 0) {
        slot = std::uniform_int_distribution<int>(0, workers - 1)(rng);
        // Prefer a moment inside a command: wait briefly for the flag.
        for (int spin = 0; spin < 2000 && flags[slot] == 0; ++spin) ::usleep(5);
      }
      const bool inside = flags[slot] != 0;
      const int code = kill_worker(slots[slot].first);
      flags[slot] = 0;
      if (code == 128 + SIGKILL) {
        ++kills;
        if (inside) ++kills_inside;
        if (combiner.slot >= 0) combiner_kills.add(combiner.phase);
      } else if (code != 0) {
        ++failures;  // it had failed on its own before the kill
      }
      slots[slot] = {spawn("drain", next_id, nullptr, lease, 0, 0, slot), next_id};
      ++next_id;
    }
    const bool finished = wait_all(deadline(), failures);
    ::munmap(const_cast<char*>(flags), 4096);
    report.count("workers", workers);
    report.count("items", items);
    report.count("kills", kills);
    report.count("kills_inside_a_command", kills_inside);
    if (area != nullptr) combiner_kills.print(report);
    report.count("worker_failures", failures);
    report.check(finished && failures == 0, "the survivors drained the queue");
    report.check(kills_inside > 0, "some kills landed inside a write command");
    if (area != nullptr) {
      report.check(combiner_kills.total > 0, "some kills landed on the combiner");
    }
    check_ledger(report, ids);
  }

  // A drain (16 processes by default) on SQLite with group commit while the
  // probe SIGKILLs whichever worker holds the combiner's lock, again and
  // again (each replaced at once), alternately while its batch's requests
  // run (before COMMIT) and once every answer is staged (at or after
  // COMMIT, before they are handed out). The next holder of the lock
  // recovers each dead combiner's batch (commands/combine.cpp): no item may
  // be lost or finished twice, no survivor may fail or wait out its lock
  // timeout, and the store must verify clean.
  void combiner_kill(Report& report) {
    const int workers = workers_or(16);
    const std::int64_t items = items_or(10'000);
    const double lease = 0.5;  // a dead worker's item comes back soon
    const int max_kills = 60;
    ControlStore store{config_.store};
    const storage::CombineArea* area = combine_area(store);
    report.count("workers", workers);
    report.count("items", items);
    if (area == nullptr) {
      std::cerr << "cplane-probe: combiner-kill needs a SQLite store with group commit on (its "
                   "area, PATH-combine); this store has none (PostgreSQL, or group commit off "
                   "or unavailable)\n";
      report.check(false, "the store has a group-commit area (SQLite)");
      return;
    }
    const auto ids = setup(items);
    std::vector<std::pair<pid_t, int>> slots;  // live worker per slot, with its id
    int next_id = 0;
    for (int w = 0; w < workers; ++w) {
      slots.emplace_back(spawn("drain", next_id, nullptr, lease), next_id);
      ++next_id;
    }
    std::mt19937 rng(std::random_device{}());
    CombinerKills kills;
    int failures = 0, looks_without_combiner = 0;
    const double t0 = seconds_now();
    double next_count = t0;
    while (seconds_now() < deadline()) {
      if (seconds_now() >= next_count) {  // counting reads every item: not each round
        const auto counts = store.status_counts(project_);
        if (counts.ready == 0 && counts.claimed == 0) break;
        next_count = seconds_now() + 0.1;
      }
      sleep_for(std::uniform_real_distribution<double>(0.002, 0.03)(rng));
      if (kills.total >= max_kills) continue;
      const auto aim = kills.total % 2 == 0 ? BatchPhase::running : BatchPhase::staged;
      const Combiner combiner = await_combiner(*area, slots, aim, 0.05);
      if (combiner.slot < 0) {
        ++looks_without_combiner;
        continue;
      }
      const int code = kill_worker(slots[combiner.slot].first);
      if (code == 128 + SIGKILL) {
        kills.add(combiner.phase);
      } else if (code != 0) {
        ++failures;  // it had failed on its own before the kill
      }
      slots[combiner.slot] = {spawn("drain", next_id, nullptr, lease), next_id};
      ++next_id;
    }
    const bool finished = wait_all(deadline(), failures);
    const double elapsed = seconds_now() - t0;
    // The records of the workers that finished (the killed left none).
    std::int64_t busy = 0, refused = 0;
    for (const auto& r : records(0, next_id)) {
      busy += r.busy_errors;
      refused += r.refused;
    }
    report.count("workers_started", next_id);
    kills.print(report);
    report.count("looks_without_a_worker_combining", looks_without_combiner);
    report.count("worker_failures", failures);
    report.count("timed_out", finished ? 0 : 1);
    report.count("busy_errors", busy);
    report.count("stale_reports_refused", refused);
    report.fixed("elapsed_s", elapsed);
    report.check(finished && failures == 0,
                 "every worker exited cleanly (none failed or hung) before --timeout");
    report.check(busy == 0, "no worker waited out its lock timeout (busy)");
    report.check(kills.total > 0, "the combiner was killed (the area named a worker combining)");
    check_ledger(report, ids);
  }

  // S sessions, each in its own process, race for a few pr items with
  // assign_and_lease while the control plane (this process) moves heads,
  // closes held items (replacing each with a new item) and three times holds
  // the write lock past a lease's length. R2: no two sessions ever hold one
  // item at one moment. See probe/assign_race.hpp for the journals and every
  // check made of them.
  void assign_race(Report& report) {
    const int workers = workers_or(16);
    const auto slot_count = static_cast<std::size_t>(items_or(4));
    const double lease = 0.3, stall_probability = 0.03;
    const auto lease_us = static_cast<Micros>(lease * 1e6);
    const double run_s = workers <= 4 ? 3.0 : 6.0;
    const int closes_planned = 10;

    ControlStore store{config_.store};
    store.create_project(project_, "cplane probe assign-race");
    store.grant(project_, project_);
    std::int64_t prs = 0, heads = 0;
    auto enqueue_pr = [&] {
      ++prs;
      return store.enqueue(project_, fmt::format(R"({{"pr":{}}})", prs),
                           ControlStore::EnqueueOptions{.kind = WorkKind::pr,
                                                        .ref = fmt::format("probe/race#{}", prs),
                                                        .head = fmt::format("h{}", ++heads),
                                                        .author = "probe-author"});
    };
    std::vector<std::string> slots, items;
    for (std::size_t k = 0; k < slot_count; ++k) {
      slots.push_back(enqueue_pr());
      items.push_back(slots.back());
    }
    const std::string slots_path = scratch_ + "/slots";
    auto publish = [&] {
      {
        std::ofstream out(slots_path + ".tmp", std::ios::trunc);
        for (const auto& id : slots) out << id << '\n';
      }
      std::filesystem::rename(slots_path + ".tmp", slots_path);
    };
    publish();

    auto session_of = [&](int w) { return fmt::format("{}-s{}", project_, w); };
    fleet::StartGate gate;
    for (int w = 0; w < workers; ++w) {
      spawn("assign", w, &gate, lease, stall_probability, 0, -1,
            {"--session", session_of(w), "--slots", slots_path, "--duration",
             fmt::format("{}", run_s)});
    }
    sleep_for(0.3);  // let every session open
    const double t0 = seconds_now();
    const double stop = t0 + run_s;
    gate.release();

    // The control plane: moves heads (mostly of held items, so that their
    // holders meet head_drift), closes a held item every run_s / 10 and
    // stalls the writers.
    std::vector<race::Observation> observations;
    auto observe = [&](race::Observation::Kind kind, const std::string& item, auto&& call) {
      race::Observation o{kind, item, false, now_micros(), 0};
      o.changed = call();
      o.t1 = now_micros();
      observations.push_back(o);
    };
    std::mt19937 rng(std::random_device{}());
    auto uniform = [&](double low, double high) {
      return std::uniform_real_distribution<double>(low, high)(rng);
    };
    double next_close = t0 + run_s / closes_planned;
    // The writer lock every write transaction queues on (StoreOptions: a
    // flock on the store's "-lock" file), held as a writer stopped inside
    // a transaction would hold it. Each is taken, once due, as soon as an
    // item was just assigned: its holder is then at work.
    std::vector<race::WriterStall> writer_stalls;
    std::vector<double> writer_stall_at = {t0 + 0.25 * run_s, t0 + 0.5 * run_s, t0 + 0.75 * run_s};
    // A row lock stalls one item's writers, not all: more of them, so that
    // some gate call surely queues behind one.
    const bool row_locks = config_.store.rfind("postgres", 0) == 0;
    if (row_locks) {
      writer_stall_at.clear();
      for (int i = 1; i <= 8; ++i) writer_stall_at.push_back(t0 + i * run_s / 9);
    }
    const std::string lock_path =
        (config_.store.rfind("sqlite:", 0) == 0 ? config_.store.substr(7) : config_.store) + "-lock";
    // On PostgreSQL writers lock rows, not the store: the stall holds the
    // row lock of the item just assigned, as a writer stopped inside a
    // transaction that read it would.
    auto stall_writers = [&](const std::string& item) {
      if (row_locks) {
        ControlStore staller{config_.store};
        auto& backend = testing::backend(staller);
        for (;;) {
          backend.begin_write(storage::Sync::normal);
          try {
            backend.find_item(item);
            break;
          } catch (const storage::Conflict&) {
            backend.rollback();  // waited behind another writer: take it afresh
          }
        }
        race::WriterStall stall{now_micros(), 0, item};
        sleep_for(1.5 * lease);
        stall.letting_go = now_micros();
        backend.rollback();  // lets go
        writer_stalls.push_back(stall);
        return;
      }
      const int fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) throw std::runtime_error("cannot open the store's writer lock " + lock_path);
      if (::flock(fd, LOCK_EX) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot take the store's writer lock " + lock_path);
      }
      race::WriterStall stall{now_micros(), 0, ""};
      sleep_for(1.5 * lease);
      stall.letting_go = now_micros();
      ::close(fd);  // lets go
      writer_stalls.push_back(stall);
    };
    bool merge = true;
    int failures = 0;
    bool timed_out = false;
    while (any_running(failures)) {
      if (seconds_now() > deadline()) {
        kill_all();
        timed_out = true;
        break;
      }
      if (seconds_now() < stop) {
        const std::size_t slot = rng() % slots.size();
        const std::string item = slots[slot];
        const ItemRow row = store.item(item);
        const Micros now = now_micros();
        const bool held = row.status == ItemStatus::claimed && row.lease_expires_at > now;
        const bool just_assigned = held && row.lease_expires_at - now > lease_us - 20'000;
        const bool stall_due = !writer_stall_at.empty() && seconds_now() >= writer_stall_at.front();
        if (stall_due && (just_assigned || seconds_now() >= writer_stall_at.front() + 0.5)) {
          writer_stall_at.erase(writer_stall_at.begin());
          stall_writers(item);
        } else if (held && seconds_now() >= next_close) {
          const CloseReason reason = merge ? CloseReason::merged : CloseReason::closed;
          merge = !merge;
          observe(race::Observation::Kind::close, item,
                  [&] { return store.observe_close(item, reason); });
          slots[slot] = enqueue_pr();
          items.push_back(slots[slot]);
          publish();
          next_close += run_s / closes_planned;
        } else if (uniform(0, 1) < (held ? 0.35 : 0.05)) {
          const std::string head = fmt::format("h{}", ++heads);
          observe(race::Observation::Kind::head, item,
                  [&] { return store.observe_head(item, head); });
          // Now and then it moves straight back (a force-push undone): the
          // head moved since it was pinned all the same.
          if (uniform(0, 1) < 0.2) {
            observe(race::Observation::Kind::head, item,
                    [&] { return store.observe_head(item, row.head); });
          }
        }
      }
      sleep_for(uniform(0.003, 0.012));
    }
    const double elapsed = seconds_now() - t0;

    std::vector<race::Journal> journals;
    for (int w = 0; w < workers; ++w) {
      if (std::filesystem::exists(record_path(w))) {
        journals.push_back(race::read_journal(record_path(w)));
      }
    }
    std::map<std::string, std::vector<StoredEvent>> ledger;
    for (const auto& id : items) ledger[id] = store.events(id);
    const race::Findings f = race::judge(journals, ledger, observations, writer_stalls);

    // Every session closed, holding nothing.
    std::int64_t sessions_open = 0, sessions_holding = 0, sessions_seen = 0;
    for (const auto& info : store.sessions()) {
      if (info.row.session_id.rfind(project_ + "-s", 0) != 0) continue;
      ++sessions_seen;
      if (info.row.is_open()) ++sessions_open;
      if (!info.items.empty()) ++sessions_holding;
    }

    report.count("workers", workers);
    report.count("items", slot_count);
    report.count("items_created", f.items);
    report.fixed("lease_s", lease);
    report.fixed("run_s", run_s);
    report.fixed("elapsed_s", elapsed);
    report.count("worker_failures", failures);
    report.count("timed_out", timed_out ? 1 : 0);
    report.count("rounds", f.rounds);
    report.count("assigned", f.assigned);
    report.count("renewals", f.renewals);
    report.count("wait", f.wait);
    report.count("no_safe_work", f.no_safe_work);
    report.count("extensions", f.extensions_told);
    report.count("releases", f.releases_ok);
    report.count("releases_refused", f.releases_refused);
    report.count("released_by_session_close", f.released_by_close);
    report.count("gate_calls", f.gate_calls);
    report.count("allowed", f.allowed);
    for (const auto& [reason, n] : f.denials) report.count("denied_" + reason, n);
    report.count("mutations_allowed", f.allowed_writes);
    report.count("mutations_recorded", f.mutations_recorded);
    report.count("stall_presentations", f.stall_presentations);
    report.count("stall_allowed", f.stall_allowed);
    report.count("stale_presentations", f.stale_presentations);
    report.count("stale_denied_as_stale_fence", f.stale_denied_as_stale_fence);
    report.count("lost_presentations", f.lost_presentations);
    report.count("lost_allowed", f.lost_allowed);
    report.count("head_moves", f.head_moves);
    report.count("closes", f.closes);
    report.count("handovers_by_lapse", f.handovers_by_lapse);
    report.count("handovers_after_release", f.handovers_after_release);
    report.count("handovers_observed", f.handovers_observed);
    report.fixed("tightest_handover_ms", f.tightest_handover_ms);
    report.count("writer_stalls", writer_stalls.size());
    report.count("gates_behind_writer_stall", f.gates_behind_writer_stall);
    report.count("allowed_on_lapsed_lease", f.allowed_on_lapsed_lease);
    report.count("renewed_after_lapse", f.renewed_after_lapse);
    report.count("allowed_after_lease_end", f.allowed_after_lease_end);
    report.count("allowed_during_other_hold", f.allowed_during_other_hold);
    report.fixed("latest_allowed_after_lease_end_ms", f.latest_allowed_ms);
    report.count("stamps_out_of_order", f.stamps_out_of_order);
    report.count("max_concurrent_holders", f.max_concurrent_holders);
    report.count("max_concurrent_believers", f.max_concurrent_believers);
    report.count("fence_violations", f.fence_violations);
    report.count("assigned_over_live_lease", f.assigned_over_live_lease);
    report.count("assigned_after_terminal", f.assigned_after_terminal);
    report.count("extensions_of_dead_leases", f.extensions_of_dead_leases);
    report.count("lease_shortened", f.lease_shortened);
    report.count("unledgered_answers", f.unledgered_answers);
    report.count("untold_assignments", f.untold_assignments);
    report.count("unledgered_extensions", f.unledgered_extensions);
    report.count("untold_extensions", f.untold_extensions);
    report.count("release_mismatches", f.release_mismatches);
    report.count("mutation_mismatches", f.mutation_mismatches);
    report.count("mutations_against_rules", f.mutations_against_rules);
    report.count("observation_mismatches", f.observation_mismatches);
    report.count("foreign_events", f.foreign_events);
    report.count("verdicts_exact", f.verdicts_exact);
    report.count("verdicts_ambiguous", f.verdicts_ambiguous);
    report.count("verdict_mismatches", f.verdict_mismatches);
    report.count("unplaced_verdicts", f.unplaced_verdicts);
    report.count("verdicts_on_head_moved_back", f.verdicts_on_head_moved_back);
    report.count("waits_unbacked", f.waits_unbacked);
    report.count("no_safe_work_unbacked", f.no_safe_work_unbacked);
    report.count("answered_after_close", f.answered_after_close);
    report.count("sessions_open_after", sessions_open);
    report.count("sessions_holding_after", sessions_holding);

    report.check(!timed_out && failures == 0, "every session process exited cleanly before --timeout");
    report.check(static_cast<int>(journals.size()) == workers && sessions_seen == workers,
                 "every session left a journal and a session row");
    // R2, by the ledger and by the sessions' own clocks.
    report.check(f.max_concurrent_holders == 1, "the ledger never has two live holders of one item");
    report.check(f.max_concurrent_believers == 1,
                 "no two sessions were told they held one item at one moment");
    report.check(f.assigned_over_live_lease == 0 && f.assigned_after_terminal == 0,
                 "no assignment took a live or terminal item");
    report.check(f.fence_violations == 0, "each assignment's fence is one above the item's last");
    report.check(f.extensions_of_dead_leases == 0 && f.lease_shortened == 0,
                 "only live leases were extended, and never shortened");
    // The journals and the ledger, one to one.
    report.check(f.unledgered_answers == 0 && f.untold_assignments == 0 &&
                     f.assigned == f.assigned_events,
                 "every assignment told is in the ledger with its fence, and every one there was told");
    report.check(f.unledgered_extensions == 0 && f.untold_extensions == 0,
                 "every renewal and heartbeat extension told is in the ledger, and only those");
    report.check(f.release_mismatches == 0, "every release told is in the ledger, and only those");
    report.check(f.mutation_mismatches == 0 && f.allowed_writes == f.mutations_recorded,
                 "each allowed record_mutation is exactly one mutation_recorded; no denial is");
    report.check(f.mutations_against_rules == 0, "every recorded mutation passes the gate's rules");
    report.check(f.observation_mismatches == 0 && f.foreign_events == 0,
                 "the ledger holds the control plane's observations and nothing else");
    // Every answer and verdict is one the rules give.
    report.check(f.verdict_mismatches == 0 && f.unplaced_verdicts == 0,
                 "every gate verdict is the rules' for a state the item was in meanwhile");
    report.check(f.stall_allowed == 0 && f.lost_allowed == 0,
                 "an old fence presented after its lease lapsed is always denied");
    report.check(f.allowed_on_lapsed_lease == 0,
                 "no record_mutation is allowed under a lease that ended before it decided");
    report.check(f.waits_unbacked == 0, "every wait names another session's live lease end");
    report.check(f.no_safe_work_unbacked == 0 && f.answered_after_close == 0,
                 "no_safe_work exactly for closed items");
    report.check(sessions_open == 0 && sessions_holding == 0,
                 "every session closed and holds nothing");
    // Not vacuous: the race, the stalls and the control plane all happened.
    report.check(f.assigned > 0 && f.renewals > 0 && f.allowed_writes > 0,
                 "sessions were assigned, renewed and mutated");
    report.check(workers <= static_cast<int>(slot_count) || f.wait > 0,
                 "sessions were told to wait (more sessions than items)");
    report.check(f.no_safe_work > 0 && f.closes > 0 && f.head_moves > 0,
                 "the control plane closed items and moved heads, and closed items were no_safe_work");
    report.check(f.handovers_by_lapse > 0 && f.handovers_after_release > 0,
                 "items changed hands both by lapse and after a release");
    report.check(f.stall_presentations > 0 && f.stale_denied_as_stale_fence > 0,
                 "stalled sessions presented old fences, some as stale_fence");
    report.check(f.gates_behind_writer_stall > 0, "mutations queued behind a stalled writer");
    for (const auto& [reason, n] : f.denials) {
      report.check(n > 0, "some gate call was denied " + reason);
    }
    check_verify(report, store);
  }

  // S sessions, each in its own process, drain one project through
  // allocate_next(apply): each finishes what it is given, gives some back
  // and abandons a few to their leases. Meanwhile the control plane (this
  // process) moves items onto the terminal path and off, and requests
  // changes on the pull requests of one session, the author (or approves
  // them). See probe/allocate_race.hpp for the journals and every check
  // made of them.
  void allocate_race(Report& report) {
    const int workers = workers_or(16);
    const std::int64_t items = items_or(2'000);
    const double lease = 30, abandon_lease = 0.25, abandon_probability = 0.02;
    auto session_of = [&](int w) { return fmt::format("{}-s{}", project_, w); };
    const std::string author = session_of(0);

    // The control plane's connection: what it writes are observations,
    // which a power loss may drop without breaking any fence.
    ControlStore store{config_.store, {.durability = Durability::normal}};
    store.create_project(project_, "cplane probe allocate-race");
    store.grant(project_, project_);
    std::mt19937 rng(std::random_device{}());
    auto uniform = [&](double low, double high) {
      return std::uniform_real_distribution<double>(low, high)(rng);
    };
    std::vector<alloc::Observation> observations;
    std::vector<std::string> put_on_path;
    std::int64_t path_refused = 0;
    auto observe = [&](alloc::Observation::Kind kind, const std::string& item, ReviewState review) {
      alloc::Observation o{kind, item, review, false, now_micros(), 0};
      try {
        if (kind == alloc::Observation::Kind::enter_path) {
          o.changed = store.enter_terminal_path(item, "probe: ready to merge");
          if (o.changed) put_on_path.push_back(item);
        } else if (kind == alloc::Observation::Kind::leave_path) {
          o.changed = store.leave_terminal_path(item);
        } else {
          o.changed = store.observe_review(item, review);
        }
      } catch (const InvalidArgument&) {
        ++path_refused;  // finished meanwhile: only an open item goes on the path
        return;
      }
      o.t1 = now_micros();
      observations.push_back(o);
    };

    // The queue: tasks, issues and pull requests over five priorities; a
    // third of the pull requests are the author's.
    constexpr std::int32_t kPriorities[] = {-1, 0, 0, 0, 0, 0, 1, 1, 2, 5};
    std::vector<std::string> ids, authored, other_prs;
    for (std::int64_t i = 0; i < items; ++i) {
      ControlStore::EnqueueOptions o{.priority = kPriorities[rng() % std::size(kPriorities)]};
      const double kind = uniform(0, 1);
      if (kind < 0.4) {
        o.kind = WorkKind::pr;
        o.ref = fmt::format("probe/alloc#{}", i);
        o.head = fmt::format("h{}", i);
        o.author = uniform(0, 1) < 0.35 ? author : fmt::format("someone-{}", i % 7);
      } else if (kind < 0.6) {
        o.kind = WorkKind::issue;
        o.ref = fmt::format("probe/alloc#{}", i);
      }
      // The first item is the author's, on the terminal path with changes
      // requested: every other session skips it until the author takes it.
      if (i == 0) {
        o = {.kind = WorkKind::pr, .ref = "probe/alloc#0", .head = "h0", .author = author,
             .priority = 5};
      }
      ids.push_back(store.enqueue(project_, fmt::format(R"({{"n":{}}})", i), o));
      if (o.author == author) {
        authored.push_back(ids.back());
      } else if (o.kind == WorkKind::pr) {
        other_prs.push_back(ids.back());
      }
    }
    using Kind = alloc::Observation::Kind;
    observe(Kind::enter_path, ids[0], ReviewState::none);
    observe(Kind::review, ids[0], ReviewState::changes_requested);
    for (std::size_t i = 1; i < ids.size(); ++i) {
      if (uniform(0, 1) < 0.03) observe(Kind::enter_path, ids[i], ReviewState::none);
    }
    for (std::size_t i = 1; i < authored.size(); ++i) {
      if (uniform(0, 1) < 0.4) observe(Kind::review, authored[i], ReviewState::changes_requested);
    }
    for (const auto& id : other_prs) {
      // Approved is no routing; the others' prs are never changes_requested
      // (their authors are no sessions: nobody could take them).
      if (uniform(0, 1) < 0.1) observe(Kind::review, id, ReviewState::approved);
    }
    const std::size_t setup_observations = observations.size();

    fleet::StartGate gate;
    for (int w = 0; w < workers; ++w) {
      spawn("allocate", w, &gate, lease, abandon_probability, abandon_lease, -1,
            {"--session", session_of(w), "--duration", fmt::format("{}", config_.timeout)});
    }
    sleep_for(0.3);  // let every session open
    const double t0 = seconds_now();
    gate.release();

    // The control plane, while the sessions drain: open items go onto the
    // terminal path and off (held ones too), the author's prs get changes
    // requested or approved (held ones too: routing decides the next
    // allocation, not who holds it now).
    auto open_item = [&](const std::vector<std::string>& from) -> std::optional<std::string> {
      for (int tries = 0; tries < 8 && !from.empty(); ++tries) {
        const std::string& id = from[rng() % from.size()];
        const auto status = store.item(id).status;
        if (status == ItemStatus::ready || status == ItemStatus::claimed) return id;
      }
      return std::nullopt;
    };
    int failures = 0;
    bool timed_out = false;
    while (any_running(failures)) {
      if (seconds_now() > deadline()) {
        kill_all();
        timed_out = true;
        break;
      }
      sleep_for(uniform(0.001, 0.004));
      const double r = uniform(0, 1);
      if (r < 0.35) {
        if (auto id = open_item(ids)) observe(Kind::enter_path, *id, ReviewState::none);
      } else if (r < 0.55) {
        if (auto id = open_item(put_on_path)) observe(Kind::leave_path, *id, ReviewState::none);
      } else if (auto id = open_item(authored)) {
        observe(Kind::review, *id,
                r < 0.85 ? ReviewState::changes_requested : ReviewState::approved);
      }
    }
    const double elapsed = seconds_now() - t0;

    std::vector<alloc::Journal> journals;
    for (int w = 0; w < workers; ++w) {
      if (std::filesystem::exists(record_path(w))) {
        journals.push_back(alloc::read_journal(record_path(w)));
      }
    }
    std::map<std::string, std::vector<StoredEvent>> ledger;
    for (const auto& id : ids) ledger[id] = store.events(id);
    const double j0 = seconds_now();
    const alloc::Findings f =
        alloc::judge(journals, ledger, observations, static_cast<Micros>(lease * 1e6),
                     static_cast<Micros>(abandon_lease * 1e6));
    const double judge_seconds = seconds_now() - j0;

    std::int64_t during_run = 0;
    for (std::size_t i = setup_observations; i < observations.size(); ++i) {
      if (observations[i].changed) ++during_run;
    }
    const auto counts = store.status_counts(project_);
    const std::set<std::string> id_set(ids.begin(), ids.end());
    std::int64_t left_on_path = 0;
    for (const auto& lock : store.terminal_path()) left_on_path += id_set.count(lock.item_id);
    std::int64_t sessions_open = 0, sessions_holding = 0, sessions_seen = 0;
    for (const auto& info : store.sessions()) {
      if (info.row.session_id.rfind(project_ + "-s", 0) != 0) continue;
      ++sessions_seen;
      if (info.row.is_open()) ++sessions_open;
      if (!info.items.empty()) ++sessions_holding;
    }

    report.count("workers", workers);
    report.count("items", items);
    report.count("author_prs", authored.size());
    report.fixed("lease_s", lease);
    report.fixed("abandon_lease_s", abandon_lease);
    report.fixed("elapsed_s", elapsed);
    report.fixed("allocations_per_s", f.rounds / elapsed, 0);
    report.count("worker_failures", failures);
    report.count("timed_out", timed_out ? 1 : 0);
    report.count("rounds", f.rounds);
    report.count("assigned", f.assigned);
    report.count("wait", f.wait);
    report.count("no_safe_work", f.no_safe_work);
    report.count("previews", f.previews);
    report.count("finishes", f.finishes_ok);
    report.count("finishes_refused", f.finishes_refused);
    report.count("releases", f.releases_ok);
    report.count("releases_refused", f.releases_refused);
    report.count("abandoned", f.abandoned);
    report.count("released_by_session_close", f.released_by_close);
    report.count("contended_assignments", f.contended_assignments);
    report.count("told_routed_skips", f.told_routed_skips);
    report.count("told_foreign_skips", f.told_foreign_skips);
    report.count("control_plane_changes_during_run", during_run);
    report.count("control_plane_refused", path_refused);
    report.count("terminal_path_entered", f.terminal_path_entered);
    report.count("terminal_path_left", f.terminal_path_left);
    report.count("review_changes", f.review_changes);
    report.count("assigned_events", f.assigned_events);
    report.count("released_events", f.released_events);
    report.count("finished_done", f.finished_done);
    report.count("items_done_once", f.items_done_once);
    report.count("items_not_done", f.items_not_done);
    report.count("items_finished_twice", f.items_finished_twice);
    report.count("items_never_assigned", f.items_never_assigned);
    report.count("finished_by_non_holder", f.finished_by_non_holder);
    report.count("handovers_by_lapse", f.handovers_by_lapse);
    report.count("handovers_after_release", f.handovers_after_release);
    report.count("handovers_observed", f.handovers_observed);
    report.fixed("tightest_handover_ms", f.tightest_handover_ms);
    report.count("max_concurrent_believers", f.max_concurrent_believers);
    report.count("assigned_over_live_lease", f.assigned_over_live_lease);
    report.count("assigned_after_terminal", f.assigned_after_terminal);
    report.count("fence_violations", f.fence_violations);
    report.count("routed_assignments", f.routed_assignments);
    report.count("routing_violations", f.routing_violations);
    report.count("plans_checked", f.plans_checked);
    report.count("choice_mismatches", f.choice_mismatches);
    report.count("skip_mismatches", f.skip_mismatches);
    report.count("lease_mismatches", f.lease_mismatches);
    report.count("assigned_on_terminal_path", f.assigned_on_terminal_path);
    report.count("terminal_skipped_for_another", f.terminal_skipped_for_another);
    report.count("chosen_below_skipped_priority", f.chosen_below_skipped_priority);
    report.count("idle_exact", f.idle_exact);
    report.count("idle_unexplained", f.idle_unexplained);
    report.count("idle_while_work_stood_by", f.idle_while_work_stood_by);
    report.count("previews_explained", f.previews_explained);
    report.count("previews_unexplained", f.previews_unexplained);
    report.count("unledgered_answers", f.unledgered_answers);
    report.count("untold_assignments", f.untold_assignments);
    report.count("finish_mismatches", f.finish_mismatches);
    report.count("release_mismatches", f.release_mismatches);
    report.count("observation_mismatches", f.observation_mismatches);
    report.count("malformed_answers", f.malformed_answers);
    report.count("foreign_events", f.foreign_events);
    report.count("stamps_out_of_order", f.stamps_out_of_order);
    report.count("left_on_terminal_path", left_on_path);
    report.count("sessions_open_after", sessions_open);
    report.count("sessions_holding_after", sessions_holding);
    report.fixed("judge_seconds", judge_seconds);

    report.check(!timed_out && failures == 0, "every session process exited cleanly before --timeout");
    report.check(static_cast<int>(journals.size()) == workers && sessions_seen == workers,
                 "every session left a journal and a session row");
    // Every item, exactly once.
    report.check(f.items == items && f.items_done_once == items && f.finished_done == items &&
                     counts.done == items,
                 "every item was finished exactly once, done (done == items)");
    report.check(f.items_never_assigned == 0 && f.items_not_done == 0 &&
                     f.items_finished_twice == 0 && counts.ready + counts.claimed +
                     counts.failed + counts.closed + counts.invalid == 0,
                 "no item was left open, never assigned or finished twice");
    report.check(f.finished_by_non_holder == 0, "every finish was its holder's, under its fence");
    // Never two holders.
    report.check(f.assigned_over_live_lease == 0 && f.assigned_after_terminal == 0,
                 "no assignment took a live or terminal item");
    report.check(f.max_concurrent_believers == 1,
                 "no two sessions were told they held one item at one moment");
    report.check(f.fence_violations == 0, "each assignment's fence is one above the item's last");
    // The allocator's order and routing, exactly.
    report.check(f.routing_violations == 0,
                 "no changes_requested item was assigned to anyone but its author");
    report.check(f.plans_checked == f.assigned_events && f.choice_mismatches == 0,
                 "every assignment is the rules' first eligible item at its place in the log");
    report.check(f.skip_mismatches == 0,
                 "every assignment listed the candidates the rules skip, in rank order");
    report.check(f.lease_mismatches == 0, "every lease is the one asked for, from the event's time");
    report.check(f.idle_unexplained == 0 && f.idle_while_work_stood_by == 0,
                 "every wait and no_safe_work is the rules' answer for a state in its call");
    // The journals and the ledger, one to one.
    report.check(f.unledgered_answers == 0 && f.untold_assignments == 0 &&
                     f.assigned == f.assigned_events,
                 "every assignment told is in the ledger, and every one there was told");
    report.check(f.finish_mismatches == 0 && f.finishes_ok == items,
                 "every finish told is in the ledger, and only those");
    report.check(f.release_mismatches == 0 && f.releases_ok + f.released_by_close == f.released_events,
                 "every release told is in the ledger, and only those");
    report.check(f.finishes_refused == 0 && f.releases_refused == 0,
                 "no finish or release under a live lease was refused");
    report.check(f.observation_mismatches == 0 && f.foreign_events == 0,
                 "the ledger holds the control plane's changes and nothing else");
    report.check(f.malformed_answers == 0, "every answer is one the API has");
    report.check(left_on_path == 0, "finishing took every item off the terminal path");
    report.check(sessions_open == 0 && sessions_holding == 0,
                 "every session closed and holds nothing");
    // Not vacuous: the race, the routing and the terminal path all happened.
    report.check(workers == 1 || (f.told_foreign_skips > 0 && f.told_routed_skips > 0),
                 "sessions were told of foreign leases and routed items they skipped");
    report.check(f.routed_assignments > 0, "the author was given its changes_requested prs");
    report.check(f.assigned_on_terminal_path > 0 && during_run > 0,
                 "terminal-path items were allocated; the control plane changed things meanwhile");
    report.check(f.handovers_after_release > 0 && f.handovers_by_lapse > 0,
                 "items changed hands both after a release and by lapse");
    check_verify(report, store);
  }

  // A scenario's figures and checks into the report, then verify.
  void report_scenario(Report& report, const ScenarioResult& result) {
    for (const auto& figure : result.figures) {
      if (const auto* n = std::get_if<std::int64_t>(&figure.value)) {
        report.count(figure.name, *n);
      } else {
        report.fixed(figure.name, std::get<double>(figure.value));
      }
    }
    for (const auto& c : result.checks) report.check(c.ok, c.sentence);
    ControlStore store{config_.store};
    check_verify(report, store);
  }

  // Workers drain a queue under a retry policy of 3 attempts while attempts
  // fail and workers are SIGKILLed holding items (probe/retry_storm.hpp).
  void retry_storm(Report& report) {
    const storm::Result result =
        storm::run({.store = config_.store, .project = project_, .scratch = scratch_,
                    .workers = workers_or(16), .items = items_or(2'000), .deadline = deadline()});
    report_scenario(report, result);
  }

  // Workers race to fire one schedule's occurrences, on clocks of their own,
  // by tick and by claim (probe/cron_race.hpp).
  void cron_race(Report& report) {
    const cron::Result result = cron::run({.store = config_.store, .project = project_,
                                           .scratch = scratch_, .workers = workers_or(16),
                                           .occurrences = items_or(200), .deadline = deadline()});
    report_scenario(report, result);
  }

  Config config_;
  std::string project_;
  std::string scratch_;
  std::vector<pid_t> live_;
  double start_ = seconds_now();
  std::int64_t stats_claimed_ = 0, stats_distinct_ = 0, stats_refused_ = 0;
  std::int64_t ledger_reclaims_ = 0;
};

// ---------------------------------------------------------------------------

constexpr const char* kScenarios[] = {"concurrent-queue", "kill-and-reclaim", "lease-storm",
                                      "crash-writes",     "combiner-kill",    "assign-race",
                                      "allocate-race",    "retry-storm",      "cron-race"};

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
               "workers, 200 occurrences of one schedule fired by tick and claim).")
        .addOptionWithArg({"store"}, [this](kj::StringPtr s) -> V {
                            if (s.size() == 0) return "--store takes a non-empty path";
                            config_.store = s.cStr();
                            worker_.store = s.cStr();
                            return true;
                          },
                          "<path>", "the database file (created if missing)")
        .addOptionWithArg({"scenario"}, [this](kj::StringPtr s) -> V {
                            for (const char* name : kScenarios) {
                              if (s == name) {
                                config_.scenario = name;
                                return true;
                              }
                            }
                            return "no such scenario: expected concurrent-queue, "
                                   "kill-and-reclaim, lease-storm, crash-writes, combiner-kill, "
                                   "assign-race, allocate-race, retry-storm or cron-race";
                          },
                          "<name>",
                          "concurrent-queue, kill-and-reclaim, lease-storm, crash-writes, "
                          "combiner-kill, assign-race, allocate-race, retry-storm, cron-race")
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
        // Internal: how the probe starts its workers.
        .addOptionWithArg({"worker"}, [this](kj::StringPtr s) -> V {
                            if (s != "drain" && s != "hold" && s != "assign" && s != "allocate" &&
                                s != "storm" && s != "cron") {
                              return "--worker takes drain, hold, assign, allocate, storm or cron";
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
          throw Exit{run()};
        })
        .build();
  }

  int run() {
    try {
      if (worker_.role == "assign") return RaceSession(worker_).run();
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
      if (!worker_.role.empty()) return run_worker(worker_);
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
  WorkerConfig worker_;
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
                               a == "--items" || a == "--timeout";
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
