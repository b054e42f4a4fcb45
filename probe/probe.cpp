// cplane-probe: the substrate probe. Separate worker processes (fork + exec
// of this binary, each with its own connection) hammer one store file on the
// real disk; the probe then checks every count exactly and exits 0 only when
// all of them are right.
//
//   cplane-probe --store PATH --scenario NAME [--workers N] [--items M]
//                [--timeout S] [--json]
//
// Scenarios: concurrent-queue, kill-and-reclaim, lease-storm, crash-writes
// (see README.md, "The probe"). Each run works in a project of its own
// (probe-<scenario>-<pid>-<time>) claimed through a scoped actor, so an
// existing store is never disturbed; verify still checks the whole store.
#include <fcntl.h>
#include <signal.h>
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
#include <vector>

#include <fmt/format.h>
#include <kj/main.h>

#include <cplane/cplane.hpp>

#include "events/clock.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "probe/fleet.hpp"

namespace cplane::probe {
namespace {

using fleet::seconds_now;

void sleep_for(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// ---------------------------------------------------------------------------
// Worker side: the same binary, started with --worker ROLE.

struct WorkerConfig {
  std::string role;  // "drain" or "hold"
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
    values_.emplace_back(name, fmt::format("{}", value));
  }
  void fixed(const std::string& name, double value, int digits = 3) {
    values_.emplace_back(name, fmt::format("{:.{}f}", value, digits));
  }
  void check(bool ok, const std::string& what) {
    if (!ok) failed_.push_back(what);
  }
  bool pass() const { return failed_.empty(); }

  void print(bool json, const std::string& scenario) const {
    if (json) {
      std::string out = fmt::format(R"({{"scenario":"{}")", scenario);
      for (const auto& [name, value] : values_) {
        const bool numeric = !value.empty() && value.find_first_not_of("-0123456789.") == std::string::npos;
        out += fmt::format(R"(,"{}":{})", name, numeric ? value : "\"" + value + "\"");
      }
      out += fmt::format(R"(,"pass":{},"failed_checks":[)", pass() ? "true" : "false");
      for (std::size_t i = 0; i < failed_.size(); ++i) {
        out += fmt::format(R"({}"{}")", i ? "," : "", failed_[i]);
      }
      std::cout << out << "]}" << std::endl;
    } else {
      for (const auto& [name, value] : values_) std::cout << name << '=' << value << '\n';
      std::cout << (pass() ? "PASS" : "FAIL") << std::endl;
    }
    for (const auto& f : failed_) std::cerr << "cplane-probe: check failed: " << f << '\n';
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
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
    } else {
      std::cerr << "cplane-probe: unknown scenario '" << config_.scenario
                << "': expected concurrent-queue, kill-and-reclaim, lease-storm or crash-writes\n";
      return 2;
    }
    report.print(config_.json, config_.scenario);
    return report.pass() ? 0 : 1;
  }

 private:
  // ---- setup and process management ----------------------------------------
  std::vector<std::string> setup(std::int64_t items) {
    ControlStore store{config_.store};
    store.create_project(project_, "cplane probe " + config_.scenario);
    store.grant(project_, project_);
    std::vector<std::string> ids;
    std::vector<std::string> payloads;
    for (std::int64_t i = 0; i < items;) {
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
              double stall_probability = 0, double stall = 0, int slot = -1) {
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

  // Waits for every live worker; false on timeout (all are then killed).
  bool wait_all(double deadline, int& failures) {
    while (!live_.empty()) {
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
      if (live_.empty()) break;
      if (seconds_now() > deadline) {
        for (pid_t pid : live_) ::kill(pid, SIGKILL);
        for (pid_t pid : live_) fleet::wait_exit(pid);
        live_.clear();
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
    const double t0 = seconds_now();
    const auto problems = verify_ledger(store);
    const double verify_seconds = seconds_now() - t0;
    for (std::size_t i = 0; i < std::min<std::size_t>(problems.size(), 10); ++i) {
      std::cerr << "cplane-probe: verify: " << problems[i].kind << ' ' << problems[i].item_id
                << ": " << problems[i].detail << '\n';
    }
    report.count("done", done);
    report.count("lost", lost);
    report.count("claim_events", claim_events);
    report.count("reclaims", reclaims);
    ledger_reclaims_ = reclaims;
    report.count("items_with_two_terminal_events", multiple_terminals);
    report.count("fence_violations", fence_violations);
    report.count("claims_while_leased", claims_while_leased);
    report.count("verify_problems", problems.size());
    report.fixed("verify_seconds", verify_seconds);
    report.check(done == static_cast<std::int64_t>(ids.size()), "done == items");
    report.check(lost == 0, "lost == 0");
    report.check(multiple_terminals == 0, "no item has two terminal events");
    report.check(fence_violations == 0, "fences rise strictly per item");
    report.check(claims_while_leased == 0, "no item was claimed while another lease held it");
    report.check(problems.empty(), "verify finds no problems");
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
    const auto ids = setup(items);
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

    // The survivor reclaims the lapsed item (queued first, it wins over every
    // ready item) and holds it while the dead worker's late report arrives:
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
    int kills = 0, kills_inside = 0;
    ControlStore store{config_.store};
    while (seconds_now() < deadline()) {
      const auto counts = store.status_counts(project_);
      if (counts.ready == 0 && counts.claimed == 0) break;
      sleep_for(std::uniform_real_distribution<double>(0.005, 0.04)(rng));
      if (kills >= max_kills) continue;
      const int slot = std::uniform_int_distribution<int>(0, workers - 1)(rng);
      // Prefer a moment inside a command: wait briefly for the flag.
      for (int spin = 0; spin < 2000 && flags[slot] == 0; ++spin) ::usleep(5);
      const bool inside = flags[slot] != 0;
      auto [pid, id] = slots[slot];
      ::kill(pid, SIGKILL);
      fleet::wait_exit(pid);
      live_.erase(std::remove(live_.begin(), live_.end(), pid), live_.end());
      flags[slot] = 0;
      ++kills;
      if (inside) ++kills_inside;
      slots[slot] = {spawn("drain", next_id, nullptr, lease, 0, 0, slot), next_id};
      ++next_id;
    }
    int failures = 0;
    const bool finished = wait_all(deadline(), failures);
    ::munmap(const_cast<char*>(flags), 4096);
    report.count("workers", workers);
    report.count("items", items);
    report.count("kills", kills);
    report.count("kills_inside_a_command", kills_inside);
    report.count("worker_failures", failures);
    report.check(finished && failures == 0, "the survivors drained the queue");
    report.check(kills_inside > 0, "some kills landed inside a write command");
    check_ledger(report, ids);
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
                                      "crash-writes"};

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
               "kill-and-reclaim (4, 500), lease-storm (16, 2000), crash-writes (8, 2000).")
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
                                   "kill-and-reclaim, lease-storm or crash-writes";
                          },
                          "<name>", "concurrent-queue, kill-and-reclaim, lease-storm, crash-writes")
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
                          "<m>", "work items")
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
                            if (s != "drain" && s != "hold") return "--worker takes drain or hold";
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
