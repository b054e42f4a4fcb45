#include "probe/key_race.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "events/clock.hpp"
#include "probe/end_checks.hpp"
#include "probe/await_workers.hpp"
#include "probe/fleet.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"

namespace cplane::probe::keys {
namespace {

using fleet::seconds_now;
using fleet::sleep_for;

std::string field(const std::string& text) { return text.empty() ? "-" : text; }
std::string unfield(const std::string& text) { return text == "-" ? "" : text; }

// What a worker is doing, as the probe reads it from the shared flag file.
enum class Doing : unsigned char { nothing = 0, working = 1, working_long = 2 };

// The flag file every worker and the probe map: byte `slot` says what its
// worker is doing.
class FlagFile {
 public:
  static constexpr std::size_t kSize = 4096;

  // Maps `path` (creating it, zeroed, when `create`); nothing when `path`
  // is empty or cannot be mapped (a worker then runs without a flag).
  FlagFile(const std::string& path, bool create) {
    if (path.empty()) return;
    if (create) {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << std::string(kSize, '\0');
    }
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      if (create) throw std::runtime_error("cannot open the flag file " + path);
      return;
    }
    void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) {
      if (create) throw std::runtime_error("cannot map the flag file " + path);
      return;
    }
    bytes_ = static_cast<unsigned char*>(p);
  }
  ~FlagFile() {
    if (bytes_ != nullptr) ::munmap(bytes_, kSize);
  }
  FlagFile(const FlagFile&) = delete;
  FlagFile& operator=(const FlagFile&) = delete;

  void set(int slot, Doing doing) {
    if (valid(slot)) byte(slot).store(static_cast<unsigned char>(doing));
  }
  Doing get(int slot) const {
    return valid(slot) ? static_cast<Doing>(byte(slot).load()) : Doing::nothing;
  }

 private:
  bool valid(int slot) const {
    return bytes_ != nullptr && slot >= 0 && static_cast<std::size_t>(slot) < kSize;
  }
  std::atomic_ref<unsigned char> byte(std::size_t i) const {
    return std::atomic_ref<unsigned char>(bytes_[i]);
  }
  unsigned char* bytes_ = nullptr;
};

class JournalFile {
 public:
  explicit JournalFile(const std::string& path) : journal_(path) {}
  void add(const Entry& e) {
    journal_.add(fmt::format("{} {} {} {} {} {} {} {}\n", static_cast<char>(e.kind),
                             field(e.item), field(e.key), e.fence, e.lease_end, field(e.result),
                             e.t0, e.t1));
  }

 private:
  fleet::Journal journal_;
};

// The payload names the item's key index and whether it works long:
// {"n":N,"k":K,"long":L}.
std::string payload_of(std::int64_t n) {
  const int key = key_of_item(n);
  const bool long_work = n % kLongEvery == kLongEvery - 1;
  return fmt::format(R"({{"n":{},"k":{},"long":{}}})", n, key, long_work ? 1 : 0);
}

// The integer after "name": in a payload this scenario wrote; -1 if absent.
std::int64_t payload_field(const std::string& payload, const std::string& name) {
  const std::string tag = "\"" + name + "\":";
  const auto at = payload.find(tag);
  if (at == std::string::npos) return -1;
  return std::strtoll(payload.c_str() + at + tag.size(), nullptr, 10);
}

std::string refusal(const FenceRejected& e) { return to_string(e.reason()); }

}  // namespace

std::string key_name(const std::string& project, int key) {
  return fmt::format("{}/k{}", project, key);
}

Journal read_journal(const std::string& path) {
  Journal j;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, item, key, result;
    Entry e;
    if (!(fields >> kind >> item >> key >> e.fence >> e.lease_end >> result >> e.t0 >> e.t1) ||
        kind.size() != 1 || std::string("OCHFE").find(kind[0]) == std::string::npos) {
      ++j.malformed_lines;
      continue;
    }
    e.kind = static_cast<EntryKind>(kind[0]);
    e.item = unfield(item);
    e.key = unfield(key);
    e.result = unfield(result);
    if (e.kind == EntryKind::opened) j.owner = e.item;
    j.entries.push_back(std::move(e));
  }
  return j;
}

// ---- the worker -------------------------------------------------------------------

int run_worker(const WorkerConfig& c) {
  ControlStore store{c.store, StoreOptions{.sqlite = {.combine = c.combine}}};
  if (c.gate_fd >= 0) fleet::StartGate::wait_on(c.gate_fd);
  FlagFile flags(c.flags, false);
  JournalFile journal(c.journal);
  journal.add({.kind = EntryKind::opened, .item = c.owner});
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()));
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  const ClaimOptions options{.actor = c.project, .lease = Seconds{kLease}};
  const ControlStore::LeaseOptions lease{.lease = Seconds{kLease}, .actor = c.project};
  const std::string prefix = c.project + "/k";

  while (true) {
    std::optional<ClaimedItem> claimed;
    Entry claim{.kind = EntryKind::claimed};
    claim.t0 = now_micros();
    try {
      claimed = store.claim(c.owner, options);
    } catch (const StorageError& e) {
      if (e.category() != StorageError::Category::busy) throw;
      claim.t1 = now_micros();
      claim.result = "busy";
      journal.add(claim);
      continue;
    }
    claim.t1 = now_micros();
    if (!claimed) {
      const auto counts = store.status_counts(c.project);
      if (counts.ready + counts.claimed + counts.scheduled == 0) break;
      sleep_for(uniform(0.002, 0.008));
      continue;
    }
    const bool long_work = payload_field(claimed->payload, "long") == 1;
    flags.set(c.slot, long_work ? Doing::working_long : Doing::working);
    claim.item = claimed->item_id;
    claim.key = prefix + std::to_string(payload_field(claimed->payload, "k"));
    claim.fence = claimed->fence;
    claim.lease_end = claimed->lease_expires_at;
    claim.result = "claimed";
    journal.add(claim);

    // Work, heartbeating as a timer would: whenever a third of the lease
    // has passed since the claim or the last renewal (so a worker woken
    // from a stall renews first). A refused heartbeat means the item is
    // someone else's now: abandon it.
    bool abandoned = false;
    const double work = long_work ? kLongWork * kLease : uniform(0.002, 0.010);
    const double work_end = seconds_now() + work;
    Micros renewed = claim.t1;
    auto renew_if_due = [&] {
      if (now_micros() - renewed < static_cast<Micros>(kLease / 3 * 1e6)) return;
      Entry h{.kind = EntryKind::heartbeat, .item = claim.item, .key = claim.key,
              .fence = claim.fence};
      // Not "working" while inside the store: the probe stalls a worker
      // outside any call only.
      const Doing doing = flags.get(c.slot);
      flags.set(c.slot, Doing::nothing);
      h.t0 = now_micros();
      try {
        h.lease_end = store.heartbeat(claim.item, claim.fence, lease);
        h.result = "accepted";
        renewed = h.t0;
      } catch (const FenceRejected& e) {
        h.result = refusal(e);
        abandoned = true;
      } catch (const StorageError& e) {
        if (e.category() != StorageError::Category::busy) throw;
        h.result = "busy";
      }
      h.t1 = now_micros();
      flags.set(c.slot, doing);
      journal.add(h);
    };
    for (double left = work; left > 0 && !abandoned; left = work_end - seconds_now()) {
      sleep_for(std::min(left, kLease / 6));
      renew_if_due();
    }
    if (!abandoned) renew_if_due();
    flags.set(c.slot, Doing::nothing);
    if (abandoned) continue;
    Entry f{.kind = EntryKind::finished, .item = claim.item, .key = claim.key,
            .fence = claim.fence};
    f.t0 = now_micros();
    try {
      store.finish(claim.item, claim.fence, Outcome::done, {.actor = c.project});
      f.result = "accepted";
    } catch (const FenceRejected& e) {
      f.result = refusal(e);
    } catch (const StorageError& e) {
      if (e.category() != StorageError::Category::busy) throw;
      f.result = "busy";
    }
    f.t1 = now_micros();
    journal.add(f);
  }
  journal.add({.kind = EntryKind::exited, .item = c.owner});
  return 0;
}

// ---- the judgement -----------------------------------------------------------------

namespace {

// A stretch of time in which a worker held an item of `key` under a lease
// the store had not let lapse: [from, to).
struct Stretch {
  std::string key;
  std::string item;
  std::string owner;
  Micros from = 0, to = 0;
};

}  // namespace

Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::map<std::string, std::uint32_t>& limits) {
  Findings f;
  std::vector<Stretch> stretches;
  std::map<std::string, std::int64_t> accepted_per_item;
  // The log's claims (item, owner, fence) and done fences, for the journals.
  std::set<std::tuple<std::string, std::string, Fence>> logged_claims;
  std::map<std::string, std::set<Fence>> logged_done;
  for (const auto& [item, events] : ledger) {
    for (const auto& e : events) {
      if (const auto* c = std::get_if<ItemClaimed>(&e.event.body)) {
        logged_claims.insert({item, c->owner, c->fence});
      } else if (const auto* d = std::get_if<ItemFinished>(&e.event.body);
                 d && d->outcome == Outcome::done) {
        logged_done[item].insert(d->fence);
      }
    }
  }

  // ---- the journals: what each worker held, and when --------------------------------
  for (const auto& j : journals) {
    ++f.journals;
    f.malformed_lines += j.malformed_lines;
    if (j.entries.empty() || j.entries.back().kind != EntryKind::exited) ++f.journals_incomplete;
    std::optional<Stretch> open;
    Micros lease_end = 0;
    auto close = [&](Micros at) {
      if (!open) return;
      open->to = std::min(at, lease_end);
      if (open->from < open->to) stretches.push_back(*open);
      open.reset();
    };
    for (const auto& e : j.entries) {
      if (e.result == "busy") {
        ++f.busy_told;
        continue;  // nothing was done
      }
      switch (e.kind) {
        case EntryKind::claimed:
          close(lease_end);
          ++f.claims_told;
          f.claim_latency.push_back((e.t1 - e.t0) / 1e6);
          if (e.t1 >= e.lease_end) {
            if (f.first_lapsed_claim.empty()) {
              f.first_lapsed_claim =
                  fmt::format("{} claimed {} (key {}) in {} us, its lease ending {} us before "
                              "the answer",
                              j.owner, e.item, e.key, e.t1 - e.t0, e.t1 - e.lease_end);
            }
            ++f.claims_answered_lapsed;
          }
          if (logged_claims.count({e.item, j.owner, e.fence}) == 0) ++f.claims_not_logged;
          open = Stretch{e.key, e.item, j.owner, e.t1, 0};
          lease_end = e.lease_end;
          break;
        case EntryKind::heartbeat:
          if (e.result == "accepted") {
            ++f.heartbeats_accepted;
            if (open && e.t1 > lease_end) {
              // Answered after the lease it extends ended: it may have been
              // lapsed in between, and held again from the answer on.
              ++f.late_heartbeats_accepted;
              const Stretch resumed{open->key, open->item, open->owner, e.t1, 0};
              close(lease_end);
              open = resumed;
            }
            lease_end = e.lease_end;
          } else {
            ++f.heartbeats_refused;
            close(lease_end);
          }
          break;
        case EntryKind::finished:
          if (e.result == "accepted") {
            ++f.finishes_accepted;
            if (e.t0 > lease_end) ++f.late_finishes_accepted;
            if (++accepted_per_item[e.item] == 2) ++f.finishes_told_twice;
            if (logged_done[e.item].count(e.fence) == 0) ++f.accepts_not_logged;
          } else {
            ++f.finishes_refused;
          }
          close(e.t0);
          break;
        case EntryKind::opened:
        case EntryKind::exited:
          break;
      }
    }
    close(lease_end);  // a killed worker's last claim: held until its lease ended
  }

  // Per key, the most stretches at once: a sweep over their ends and
  // starts, ends first at the same time (a stretch is half open).
  std::map<std::string, std::vector<const Stretch*>> by_key;
  for (const auto& s : stretches) by_key[s.key].push_back(&s);
  for (const auto& [key, list] : by_key) {
    const auto it = limits.find(key);
    const std::int64_t limit = it == limits.end() ? 0 : it->second;
    std::vector<std::pair<Micros, const Stretch*>> starts, ends;
    for (const Stretch* s : list) {
      starts.push_back({s->from, s});
      ends.push_back({s->to, s});
    }
    std::sort(starts.begin(), starts.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::sort(ends.begin(), ends.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::int64_t held = 0, most = 0;
    std::set<const Stretch*> holding;
    std::size_t e = 0;
    for (const auto& [at, s] : starts) {
      while (e < ends.size() && ends[e].first <= at) {
        holding.erase(ends[e].second);
        --held;
        ++e;
      }
      ++held;
      holding.insert(s);
      most = std::max(most, held);
      if (held > limit) {
        ++f.journal_overlaps;
        if (f.first_overlap.empty()) {
          std::string who;
          for (const Stretch* h : holding) {
            who += fmt::format(" [{} by {}: {}..{}]", h->item, h->owner, h->from, h->to);
          }
          f.first_overlap = fmt::format("key {} (limit {}) held {} times at {}:{}", key, limit,
                                        held, at, who);
        }
      }
    }
    f.journal_max_held[key] = most;
  }

  // ---- the log: live leases per key after each claim and extension -----------------
  std::vector<const StoredEvent*> order;
  for (const auto& [item, events] : ledger) {
    for (const auto& e : events) order.push_back(&e);
  }
  std::sort(order.begin(), order.end(),
            [](const StoredEvent* a, const StoredEvent* b) { return a->seq < b->seq; });
  std::map<std::string, ItemRow> rows;
  std::map<std::string, std::set<std::string>> claimed;  // key -> its items in status claimed
  for (const StoredEvent* stored : order) {
    const StoredEvent& e = *stored;
    ItemRow& row = rows[e.event.item_id];
    row = apply(std::move(row), e);
    const std::string& key = row.concurrency_key;
    if (key.empty()) continue;
    if (row.status == ItemStatus::claimed) {
      claimed[key].insert(row.item_id);
    } else {
      claimed[key].erase(row.item_id);
    }
    const bool starts_or_extends = std::holds_alternative<ItemClaimed>(e.event.body) ||
                                   std::holds_alternative<LeaseExtended>(e.event.body) ||
                                   std::holds_alternative<ItemAssigned>(e.event.body);
    if (!starts_or_extends) continue;
    std::int64_t live = 0;
    std::string who;
    for (const auto& id : claimed[key]) {
      if (lease_live(rows[id], e.event.at)) {
        ++live;
        who += fmt::format(" [{} fence {} until {}]", id, rows[id].fence,
                           rows[id].lease_expires_at);
      }
    }
    auto& most = f.log_max_live[key];
    most = std::max(most, live);
    const auto it = limits.find(key);
    if (it != limits.end() && live > it->second) {
      ++f.log_over_limit;
      if (f.first_log_over.empty()) {
        f.first_log_over = fmt::format("{} seq {} of {} at {}: key {} (limit {}) had {} live:{}",
                                       type_name(e.event.body), e.seq, e.event.item_id,
                                       e.event.at, key, it->second, live, who);
      }
    }
  }
  return f;
}

// ---- the probe's side -----------------------------------------------------------------

namespace {

// Waits (up to 50 ms) until `pid` shows as stopped in /proc.
void wait_stopped(pid_t pid) {
  const std::string path = fmt::format("/proc/{}/stat", pid);
  for (int i = 0; i < 500; ++i) {
    std::ifstream in(path);
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) return;  // gone
    const char state = stat[paren + 2];
    if (state == 'T' || state == 't' || state == 'Z' || state == 'X') return;
    ::usleep(100);
  }
}

class Fleet {
 public:
  explicit Fleet(const ScenarioConfig& c) : c_(c) {}

  static std::string owner(const ScenarioConfig& c, int id) {
    return fmt::format("{}-w{}", c.project, id);
  }
  std::string journal_path(int id) const { return fmt::format("{}/keys-{}", c_.scratch, id); }
  std::string flags_path() const { return c_.scratch + "/keys-flags"; }

  pid_t spawn(int id, int slot, fleet::StartGate* gate) {
    std::vector<std::string> args = {
        "cplane-probe", "--worker", "keys", "--store", c_.store, "--project", c_.project,
        "--owner", owner(c_, id), "--record", journal_path(id), "--flags", flags_path(),
        "--slot", std::to_string(slot), "--combine", c_.combine ? "on" : "off"};
    return processes_.spawn(std::move(args), gate);
  }
  int kill(pid_t pid) { return processes_.kill(pid); }
  std::optional<int> exited(pid_t pid) { return processes_.exited(pid); }
  bool empty() const { return processes_.empty(); }

 private:
  const ScenarioConfig& c_;
  fleet::Processes processes_;
};

}  // namespace

ScenarioResult run(const ScenarioConfig& c) {
  ScenarioResult out;
  const StoreOptions store_options{.durability = Durability::normal,
                                   .sqlite = {.combine = c.combine}};
  ControlStore store{c.store, store_options};
  store.create_project(c.project, "cplane probe key-race");
  store.grant(c.project, c.project);
  std::map<std::string, std::uint32_t> limits;
  for (int k = 0; k < kKeys; ++k) {
    limits[key_name(c.project, k)] = limit_of(k);
    store.set_limit(key_name(c.project, k), {.concurrency = limit_of(k)});
  }
  std::vector<std::string> ids;
  std::map<std::string, std::string> key_of;  // item -> its key
  for (std::int64_t n = 0; n < c.items; ++n) {
    const std::string key = key_name(c.project, key_of_item(n));
    ids.push_back(store.enqueue(c.project, payload_of(n),
                                ControlStore::EnqueueOptions{.concurrency_key = key}));
    key_of[ids.back()] = key;
  }

  Fleet workers(c);
  FlagFile flags(workers.flags_path(), true);
  struct Slot {
    pid_t pid = 0;
    int id = 0;
    bool running = true;
    double wake_at = 0;  // > 0 while SIGSTOPped
  };
  std::vector<Slot> slots;
  int next_id = 0;
  {
    fleet::StartGate gate;
    for (int w = 0; w < c.workers; ++w) {
      slots.push_back({workers.spawn(next_id, w, &gate), next_id});
      ++next_id;
    }
    sleep_for(0.2);  // let every worker open its connection
    gate.release();
  }
  const double t0 = seconds_now();

  const auto max_stalls = static_cast<int>(std::clamp<std::int64_t>(c.items / 50, 8, 40));
  const auto max_kills = static_cast<int>(std::clamp<std::int64_t>(c.items / 200, 2, 10));
  constexpr int kStalledAtOnce = 2;
  std::mt19937 rng(std::random_device{}());
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  int stalls = 0, stalls_long = 0, stalls_let_go = 0, kills = 0, failures = 0;
  int limit_samples = 0;
  std::map<std::string, std::int64_t> sampled_max;  // limits(now).live, per key
  std::int64_t samples_over = 0;
  std::string first_sample_over;
  bool drained = false, timed_out = false;
  double next_stall = t0 + uniform(0.03, 0.1), next_kill = t0 + uniform(0.1, 0.3);
  double next_count = t0, next_sample = t0;
  auto replace = [&](std::size_t s) {
    slots[s] = {workers.spawn(next_id, static_cast<int>(s), nullptr), next_id};
    ++next_id;
  };
  auto stalled_now = [&] {
    return static_cast<int>(std::count_if(slots.begin(), slots.end(),
                                          [](const Slot& s) { return s.wake_at > 0; }));
  };
  // A running, not stopped worker doing `want` (any work when nullopt).
  auto pick = [&](std::optional<Doing> want) -> std::optional<std::size_t> {
    const auto first = std::uniform_int_distribution<std::size_t>(0, slots.size() - 1)(rng);
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const std::size_t s = (first + k) % slots.size();
      if (!slots[s].running || slots[s].wake_at > 0) continue;
      const Doing d = flags.get(static_cast<int>(s));
      if (want ? d == *want : d != Doing::nothing) return s;
    }
    return std::nullopt;
  };
  while (!drained) {
    const double now = seconds_now();
    if (now > c.deadline) {
      timed_out = true;
      break;
    }
    if (now >= next_sample) {
      const Micros at = now_micros();
      for (const auto& info : store.limits(at)) {
        const auto it = limits.find(info.row.key);
        if (it == limits.end()) continue;
        auto& most = sampled_max[info.row.key];
        most = std::max(most, info.live);
        if (info.live > it->second) {
          ++samples_over;
          if (first_sample_over.empty()) {
            first_sample_over = fmt::format("limits({}): key {} (limit {}) live {}", at,
                                            info.row.key, it->second, info.live);
          }
        }
      }
      ++limit_samples;
      next_sample = now + 0.01;
    }
    if (now >= next_count) {
      const auto counts = store.status_counts(c.project);
      drained = counts.ready + counts.claimed + counts.scheduled == 0;
      next_count = now + 0.05;
    }
    for (std::size_t s = 0; s < slots.size(); ++s) {
      if (slots[s].wake_at > 0 && now >= slots[s].wake_at) {
        ::kill(slots[s].pid, SIGCONT);
        slots[s].wake_at = 0;
      }
      if (!slots[s].running || slots[s].wake_at > 0) continue;
      if (const auto code = workers.exited(slots[s].pid)) {
        slots[s].running = false;
        flags.set(static_cast<int>(s), Doing::nothing);
        if (*code != 0) {
          ++failures;
          replace(s);  // the race goes on without it; the failure fails the run
        }
      }
    }
    // Stalls: past the lease of the item it holds (claimed at most then).
    if (!drained && stalls < max_stalls && now >= next_stall && stalled_now() < kStalledAtOnce) {
      const bool aim_long = stalls % 2 == 0;
      auto target = pick(aim_long ? std::optional<Doing>(Doing::working_long) : std::nullopt);
      if (target) {
        // Stalled outside any store call: once it is stopped its flag
        // must still say it works (it clears it before each call), else
        // it is let go at once and the stall does not count.
        const pid_t pid = slots[*target].pid;
        ::kill(pid, SIGSTOP);
        wait_stopped(pid);
        const Doing doing = flags.get(static_cast<int>(*target));
        if (doing == Doing::nothing) {
          ::kill(pid, SIGCONT);
          ++stalls_let_go;
        } else {
          slots[*target].wake_at = seconds_now() + kLease + uniform(0.1, 0.3);
          ++stalls;
          if (doing == Doing::working_long) ++stalls_long;
          next_stall = seconds_now() + uniform(0.05, 0.2);
        }
      }
    }
    if (!drained && kills < max_kills && now >= next_kill) {
      if (auto target = pick(std::nullopt)) {
        const int code = workers.kill(slots[*target].pid);
        flags.set(static_cast<int>(*target), Doing::nothing);
        if (code == 128 + SIGKILL) {
          ++kills;
        } else if (code != 0) {
          ++failures;
        }
        replace(*target);
        next_kill = seconds_now() + uniform(0.1, 0.4);
      }
    }
    sleep_for(0.001);
  }
  for (auto& slot : slots) {
    if (slot.wake_at > 0) {
      ::kill(slot.pid, SIGCONT);
      slot.wake_at = 0;
    }
  }
  // The workers stop by themselves once nothing is left.
  const double elapsed = await_workers(workers, slots, c.deadline, timed_out, failures) - t0;

  std::vector<Journal> journals;
  for (int id = 0; id < next_id; ++id) {
    if (std::filesystem::exists(workers.journal_path(id))) {
      journals.push_back(read_journal(workers.journal_path(id)));
    }
  }
  std::map<std::string, std::vector<StoredEvent>> ledger;
  for (const auto& id : ids) ledger[id] = store.events(id);
  const double j0 = seconds_now();
  const Findings f = judge(journals, ledger, limits);
  const double judge_seconds = seconds_now() - j0;
  // Every key's items all done.
  std::map<std::string, std::int64_t> queued_per_key, done_per_key;
  for (const auto& id : ids) {
    ++queued_per_key[key_of[id]];
    if (store.item(id).status == ItemStatus::done) ++done_per_key[key_of[id]];
  }
  std::int64_t keys_not_drained = 0;
  for (const auto& [key, n] : queued_per_key) {
    if (done_per_key[key] != n) ++keys_not_drained;
  }

  out.count("workers", c.workers);
  out.count("keys", kKeys);
  out.text("limits", "1,2,3,1,2,3,1,2,3,1");
  out.text("combine", c.combine ? "on" : "off");
  out.fixed("lease_s", kLease);
  out.fixed("elapsed_s", elapsed);
  out.fixed("items_per_s", c.items / elapsed, 0);
  out.count("workers_started", next_id);
  out.count("worker_failures", failures);
  out.count("timed_out", timed_out ? 1 : 0);
  out.count("stalls", stalls);
  out.count("stalls_of_long_work", stalls_long);
  out.count("stalls_let_go", stalls_let_go);
  out.count("kills", kills);
  out.count("claims_told", f.claims_told);
  out.count("heartbeats_accepted", f.heartbeats_accepted);
  out.count("late_heartbeats_accepted", f.late_heartbeats_accepted);
  out.count("heartbeats_refused", f.heartbeats_refused);
  out.count("finishes_accepted", f.finishes_accepted);
  out.count("late_finishes_accepted", f.late_finishes_accepted);
  out.count("finishes_refused", f.finishes_refused);
  out.count("busy_errors", f.busy_told);
  out.fixed("claim_p50_ms", 1e3 * fleet::percentile(f.claim_latency, 50));
  out.fixed("claim_p99_ms", 1e3 * fleet::percentile(f.claim_latency, 99));
  out.fixed("claim_max_ms", 1e3 * fleet::percentile(f.claim_latency, 100));
  out.count("claims_answered_lapsed", f.claims_answered_lapsed);
  std::string journal_max, log_max, sampled;
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = key_name(c.project, k);
    auto get = [&](const std::map<std::string, std::int64_t>& m) {
      const auto it = m.find(key);
      return it == m.end() ? 0 : it->second;
    };
    const char* sep = k == 0 ? "" : ",";
    journal_max += fmt::format("{}{}", sep, get(f.journal_max_held));
    log_max += fmt::format("{}{}", sep, get(f.log_max_live));
    sampled += fmt::format("{}{}", sep, get(sampled_max));
  }
  out.text("journal_max_held_per_key", journal_max);
  out.text("log_max_live_per_key", log_max);
  out.text("sampled_max_live_per_key", sampled);
  out.count("journal_overlaps_over_limit", f.journal_overlaps);
  out.count("log_events_over_limit", f.log_over_limit);
  out.count("limit_samples", limit_samples);
  out.count("limit_samples_over_limit", samples_over);
  out.count("keys_not_drained", keys_not_drained);
  out.count("claims_not_logged", f.claims_not_logged);
  out.count("accepts_not_logged", f.accepts_not_logged);
  out.count("finishes_told_twice", f.finishes_told_twice);
  out.count("journals", f.journals);
  out.count("journals_incomplete", f.journals_incomplete);
  out.count("malformed_journal_lines", f.malformed_lines);
  out.fixed("judge_s", judge_seconds);

  if (!f.first_overlap.empty()) out.text("first_journal_overlap", f.first_overlap);
  if (!f.first_log_over.empty()) out.text("first_log_over_limit", f.first_log_over);
  if (!first_sample_over.empty()) out.text("first_sample_over_limit", first_sample_over);
  if (!f.first_lapsed_claim.empty()) out.text("first_claim_answered_lapsed", f.first_lapsed_claim);

  out.check(drained && !timed_out && failures == 0,
            "the race drained before --timeout and no worker failed");
  out.check(f.journal_overlaps == 0,
            "the workers' journals: no key was ever held by more workers at once than its limit");
  out.check(f.log_over_limit == 0,
            "the log: after every claim and lease extension, no key had more live leases than "
            "its limit");
  out.check(samples_over == 0, "limits(now) never showed a key with more live leases than its "
                               "limit");
  out.check(keys_not_drained == 0, "every key's items are all done");
  out.check(f.claims_answered_lapsed == 0,
            "every claim's lease was still live when its worker was told it");
  out.check(f.claims_not_logged == 0 && f.accepts_not_logged == 0 && f.finishes_told_twice == 0,
            "every claim told is in the log, every finish told accepted is the item's done, and "
            "no item was told done twice");
  out.check(f.journals == next_id && f.journals_incomplete == kills &&
                f.malformed_lines == 0,
            "every worker left a journal, and only the killed ones left it unfinished");
  out.check(f.busy_told == 0, "no busy or 'database is locked' error reached a worker");
  // Not vacuous: the race happened.
  out.check(stalls > 0 && kills > 0, "workers were stalled past their lease and killed");
  // Whether every key fills is chance at small sizes (6 workers for 19
  // slots): a key of each limit must.
  std::set<std::uint32_t> limits_filled;
  for (const auto& [key, limit] : limits) {
    const auto it = f.log_max_live.find(key);
    if (it != f.log_max_live.end() && it->second >= static_cast<std::int64_t>(limit)) {
      limits_filled.insert(limit);
    }
  }
  out.check(limits_filled.size() == 3,
            "a key of each limit (1, 2, 3) was at its limit at some moment (the log)");
  check_ledger(out, c.store, ids);
  return out;
}

}  // namespace cplane::probe::keys
