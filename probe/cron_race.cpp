#include "probe/cron_race.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "commands/testing.hpp"
#include "events/codec.hpp"
#include "probe/fleet.hpp"
#include "storage/backend.hpp"

namespace cplane::probe::cron {
namespace {

using fleet::seconds_now;
using fleet::sleep_for;

std::string field(const std::string& text) { return text.empty() ? "-" : text; }
std::string unfield(const std::string& text) { return text == "-" ? "" : text; }

// A journal opened for appending: each entry is one write(2) of one line,
// so a SIGKILL leaves whole lines only.
class JournalFile {
 public:
  explicit JournalFile(const std::string& path) : journal_(path) {}
  void add(const Entry& e) {
    journal_.add(fmt::format("{} {} {} {} {} {} {} {}\n", static_cast<char>(e.kind), e.minute, e.call,
                    e.now, e.made, field(e.item), e.fence, field(e.result)));
  }

 private:
  fleet::Journal journal_;
};

bool is_busy(const StorageError& e) { return e.category() == StorageError::Category::busy; }

// The probe's last tick: id 999, call 9, which no worker's `now` carries.
bool is_final_tick(Micros at) {
  const CallOf who = call_of(at);
  return who.id == 999 && who.call == 9;
}

}  // namespace

// ---- the worker -----------------------------------------------------------------

int run_worker(const WorkerConfig& c) {
  JournalFile journal(c.journal);
  try {
    ControlStore store{c.store};
    std::int64_t first = c.first_minute;
    if (c.ahead > 0) {
      for (const auto& row : store.schedules()) {
        if (row.name == c.project) first = std::max(first, (row.next_at - kT0) / kMinute - 1 + c.ahead);
      }
      first = std::min(first, c.occurrences);
    }
    journal.add({.kind = EntryKind::opened, .minute = first, .item = c.owner});
    if (c.gate_fd >= 0) fleet::StartGate::wait_on(c.gate_fd);
    std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()));
    auto uniform = [&](double low, double high) {
      return std::uniform_real_distribution<double>(low, high)(rng);
    };
    // A lease that outlasts the whole simulated walk (twice over): no claim
    // lapses on anybody's clock, however far ahead it runs.
    const ClaimOptions options{
        .actor = c.project,
        .lease = Seconds{std::min(kMaxLeaseSeconds,
                                  2.0 * static_cast<double>(c.occurrences + 2) * 60.0)}};
    const bool second_tick = c.id % kSecondTickEvery == 0;
    // Workers keep different paces, so that some run minutes ahead.
    const double pace = 0.001 * (c.id % 4);
    auto tick = [&](std::int64_t minute, int call, Micros now) {
      Entry e{.kind = EntryKind::ticked, .minute = minute, .call = call, .now = now};
      try {
        e.made = store.tick(now);
        e.result = "ok";
      } catch (const StorageError& error) {
        if (!is_busy(error)) throw;
        e.made = -1;
        e.result = "busy";
      }
      journal.add(e);
    };
    for (std::int64_t minute = first; minute <= c.occurrences; ++minute) {
      const auto r = std::uniform_int_distribution<std::int64_t>(0, kJitterSteps - 1)(rng);
      const Micros now = call_now(minute, c.id, 0, r);
      if (uniform(0, 1) < kTickProbability) {
        tick(minute, 0, now);
      } else {
        Entry claim{.kind = EntryKind::claimed, .minute = minute, .now = now};
        std::optional<ClaimedItem> item;
        try {
          ClaimOptions at = options;
          at.now = now;
          item = store.claim(c.owner, at);
          claim.result = item ? "claimed" : "none";
        } catch (const StorageError& error) {
          if (!is_busy(error)) throw;
          claim.result = "busy";
        }
        if (item) {
          claim.item = item->item_id;
          claim.fence = item->fence;
        }
        journal.add(claim);
        if (item) {
          Entry finish{.kind = EntryKind::finished, .minute = minute, .now = now,
                       .item = item->item_id, .fence = item->fence};
          try {
            store.finish(item->item_id, item->fence, Outcome::done,
                         ControlStore::FinishOptions{.actor = c.project, .now = now});
            finish.result = "accepted";
          } catch (const FenceRejected& e) {
            finish.result = to_string(e.reason());
          } catch (const StorageError& error) {
            if (!is_busy(error)) throw;
            finish.result = "busy";
          }
          journal.add(finish);
        }
      }
      if (second_tick) tick(minute, 1, call_now(minute, c.id, 1, r));
      if (pace > 0) sleep_for(uniform(0, pace));
    }
    journal.add({.kind = EntryKind::exited, .minute = c.occurrences});
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cplane-probe: cron worker " << c.owner << ": " << e.what() << '\n';
    return 1;
  }
}

std::int64_t Journal::last_minute() const {
  std::int64_t last = 0;
  for (const auto& e : entries) {
    if (e.kind == EntryKind::opened) {
      last = std::max(last, e.minute - 1);
    } else if (e.kind != EntryKind::exited) {
      last = std::max(last, e.minute);
    }
  }
  return last;
}

Journal read_journal(const std::string& path) {
  Journal journal;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Entry e;
    char kind = 0;
    std::string extra;
    if (!(fields >> kind >> e.minute >> e.call >> e.now >> e.made >> e.item >> e.fence >>
          e.result) ||
        (fields >> extra) ||
        (kind != 'O' && kind != 'T' && kind != 'C' && kind != 'F' && kind != 'E')) {
      ++journal.malformed_lines;
      continue;
    }
    e.kind = static_cast<EntryKind>(kind);
    e.item = unfield(e.item);
    e.result = unfield(e.result);
    if (e.kind == EntryKind::opened) journal.owner = e.item;
    journal.entries.push_back(std::move(e));
  }
  return journal;
}

// ---- the judgement --------------------------------------------------------------

Findings judge(const std::vector<Journal>& journals, const Ledger& ledger,
               std::int64_t occurrences, const std::set<std::string>& killed,
               const std::map<int, std::string>& owner_of) {
  Findings f;

  // ---- the schedule's stream ---------------------------------------------------
  std::set<Micros> seen;
  Micros last_occurrence = 0;
  std::map<Micros, std::int64_t> fires_at;              // by the `now` of the call
  std::vector<std::pair<Micros, std::string>> fired;    // occurrence, item named
  std::map<std::string, std::int64_t> times_named;      // item -> fires naming it
  for (const auto& stored : ledger.schedule) {
    const Micros at = stored.event.at;
    if (std::holds_alternative<ScheduleCreated>(stored.event.body)) {
      ++f.created_events;
    } else if (const auto* x = std::get_if<ScheduleFired>(&stored.event.body)) {
      ++f.fired_events;
      seen.insert(x->occurrence);
      if (x->occurrence <= last_occurrence) ++f.fires_out_of_order;
      last_occurrence = std::max(last_occurrence, x->occurrence);
      const Micros since = x->occurrence - kT0;
      if (since % kMinute != 0 || since / kMinute < 1 || since / kMinute > occurrences) {
        ++f.fires_off_grid;
      }
      if (at < x->occurrence) ++f.fires_before_due;
      if (x->next_at != x->occurrence + kMinute) ++f.next_at_mismatches;
      if (x->missed != 0) ++f.missed_nonzero;
      ++fires_at[at];
      fired.emplace_back(x->occurrence, x->item_id);
      ++times_named[x->item_id];
    } else if (std::holds_alternative<ScheduleSkipped>(stored.event.body)) {
      ++f.skipped_events;
    } else {
      ++f.other_events;
    }
  }
  f.distinct_occurrences = static_cast<std::int64_t>(seen.size());

  // ---- the items, by key -------------------------------------------------------
  f.items = static_cast<std::int64_t>(ledger.rows.size());
  std::map<std::string, std::vector<const ItemRow*>> by_key;
  std::map<std::string, const ItemRow*> by_id;
  for (const auto& row : ledger.rows) {
    by_key[row.key].push_back(&row);
    by_id[row.item_id] = &row;
  }
  std::set<std::string> expected;
  for (std::int64_t m = 1; m <= occurrences; ++m) {
    const std::string key = schedule_item_key(ledger.name, kT0 + m * kMinute);
    expected.insert(key);
    const auto it = by_key.find(key);
    const std::size_t n = it == by_key.end() ? 0 : it->second.size();
    if (n == 0) ++f.keys_missing;
    if (n > 1) ++f.keys_duplicated;
  }
  for (const auto& row : ledger.rows) {
    if (expected.count(row.key) == 0) ++f.items_unkeyed;
  }
  for (const auto& [occurrence, item] : fired) {
    const auto it = by_id.find(item);
    if (it == by_id.end() || it->second->key != schedule_item_key(ledger.name, occurrence) ||
        times_named[item] != 1) {
      ++f.fires_naming_wrong_item;
    }
  }
  // Each claim in the log, and whether a done ended it.
  struct Claim {
    std::string owner;
    Seq seq = 0;
    bool done = false;
    bool told = false;
  };
  std::map<std::pair<std::string, Fence>, Claim> claims;
  for (const auto& [id, events] : ledger.items) {
    std::int64_t queued = 0, claimed = 0;
    std::string queued_key;
    for (const auto& stored : events) {
      if (const auto* q = std::get_if<ItemQueued>(&stored.event.body)) {
        ++queued;
        queued_key = q->key;
      } else if (const auto* c = std::get_if<ItemClaimed>(&stored.event.body)) {
        ++claimed;
        ++f.claim_events;
        claims[{id, c->fence}] = Claim{c->owner, stored.seq};
      } else if (const auto* x = std::get_if<ItemFinished>(&stored.event.body)) {
        if (x->outcome == Outcome::done) {
          ++f.done_events;
          auto it = claims.find({id, x->fence});
          if (it != claims.end()) it->second.done = true;
        }
      }
    }
    const auto row = by_id.find(id);
    if (queued != 1 || row == by_id.end() || row->second->key != queued_key) {
      ++f.items_not_queued_once;
    }
    if (claimed > 1) ++f.items_claimed_twice;
  }

  // ---- each journal, and the calls it names ----------------------------------
  std::map<std::string, int> id_of;
  for (const auto& [id, owner] : owner_of) id_of[owner] = id;
  std::set<Micros> told;
  std::map<int, Micros> last_told;  // worker id -> the `now` of its last journaled call
  auto fires_of = [&](Micros now) {
    const auto it = fires_at.find(now);
    return it == fires_at.end() ? std::int64_t{0} : it->second;
  };
  for (const auto& journal : journals) {
    ++f.journals;
    f.malformed_lines += journal.malformed_lines;
    const std::string& owner = journal.owner;
    const bool was_killed = killed.count(owner) != 0;
    const auto id = id_of.find(owner);
    const bool exited =
        !journal.entries.empty() && journal.entries.back().kind == EntryKind::exited;
    if (!exited && !was_killed) ++f.journals_incomplete;
    std::optional<std::pair<std::string, Fence>> open;  // claimed, not yet finished
    for (std::size_t i = 0; i < journal.entries.size(); ++i) {
      const Entry& e = journal.entries[i];
      if (e.kind == EntryKind::ticked || e.kind == EntryKind::claimed) {
        const CallOf who = call_of(e.now);
        if (id == id_of.end() || who.id != id->second || who.minute != e.minute ||
            who.call != e.call || (e.now - kT0) % kMinute >= kJitterSteps * 10'000) {
          ++f.journals_misnamed;
        }
        told.insert(e.now);
        if (id != id_of.end()) last_told[id->second] = e.now;
      }
      if (e.kind == EntryKind::ticked) {
        ++f.ticks;
        if (e.call == 1) ++f.second_ticks;
        if (e.result == "busy") {
          ++f.busy_told;
          f.fires_by_busy_calls += fires_of(e.now);
          continue;
        }
        f.tick_made_total += e.made;
        f.max_tick_made = std::max(f.max_tick_made, e.made);
        f.fires_by_ticks += fires_of(e.now);
        if (e.made != fires_of(e.now)) ++f.tick_made_mismatches;
      } else if (e.kind == EntryKind::claimed) {
        ++f.claims;
        if (e.result == "busy") {
          ++f.busy_told;
          f.fires_by_busy_calls += fires_of(e.now);
          continue;
        }
        f.fires_by_claims += fires_of(e.now);
        if (e.result == "none") {
          ++f.claims_empty;
          continue;
        }
        ++f.claims_got;
        auto it = claims.find({e.item, e.fence});
        if (e.result != "claimed" || it == claims.end() || it->second.owner != owner ||
            it->second.told) {
          ++f.unledgered_claims;
        } else {
          it->second.told = true;
        }
        if (times_named.count(e.item) == 0) ++f.claims_of_unfired;
        if (open) ++f.claims_unfinished;
        open = std::pair{e.item, e.fence};
      } else if (e.kind == EntryKind::finished) {
        ++f.finishes;
        if (open && *open == std::pair{e.item, e.fence}) open.reset();
        if (e.result == "accepted") {
          ++f.finishes_accepted;
          auto it = claims.find({e.item, e.fence});
          if (it == claims.end() || it->second.owner != owner || !it->second.done) {
            ++f.unledgered_finishes;
          }
        } else if (e.result == "busy") {
          ++f.busy_told;
        } else {
          ++f.finishes_refused;
        }
      }
    }
    // A killed worker may hold the claim it was killed after.
    if (open && !was_killed) ++f.claims_unfinished;
  }

  // ---- fires nobody journaled --------------------------------------------------
  // Only a killed worker's last call (killed between its commit and its
  // journal line), after every call it journaled, and the probe's last tick.
  std::map<int, std::set<Micros>> untold_of_killed;
  for (const auto& [at, n] : fires_at) {
    f.max_fired_by_one_call = std::max(f.max_fired_by_one_call, n);
    ++f.calls_firing;
    if (told.count(at) != 0) continue;
    if (is_final_tick(at)) {
      f.fires_by_final_tick += n;
      continue;
    }
    const CallOf who = call_of(at);
    const auto owner = owner_of.find(who.id);
    const auto last = last_told.find(who.id);
    if (owner != owner_of.end() && killed.count(owner->second) != 0 &&
        (last == last_told.end() || at > last->second)) {
      untold_of_killed[who.id].insert(at);
      f.fires_by_killed_last_call += n;
    } else {
      f.fires_untold += n;
    }
  }
  for (const auto& [id, nows] : untold_of_killed) {
    if (nows.size() > 1) {
      for (auto it = std::next(nows.begin()); it != nows.end(); ++it) {
        const auto n = fires_at[*it];
        f.fires_by_killed_last_call -= n;
        f.fires_untold += n;
      }
    }
  }

  // ---- claims nobody was told ----------------------------------------------------
  std::map<std::string, std::vector<const Claim*>> untold_claims;
  std::map<std::string, Seq> last_claim;
  for (const auto& [key, claim] : claims) {
    last_claim[claim.owner] = std::max(last_claim[claim.owner], claim.seq);
    if (!claim.told) untold_claims[claim.owner].push_back(&claim);
  }
  for (const auto& [owner, list] : untold_claims) {
    if (killed.count(owner) != 0 && list.size() == 1 && list.front()->seq == last_claim[owner]) {
      ++f.untold_last_of_killed;
    } else {
      f.untold_claims += static_cast<std::int64_t>(list.size());
    }
  }
  return f;
}

// ---- the probe's side -----------------------------------------------------------

namespace {

// The worker processes: each started by fork + exec of this binary, each
// SIGKILLed and reaped when the fleet goes.
class Workers {
 public:
  explicit Workers(const ScenarioConfig& c) : c_(c) {}

  static std::string owner(const ScenarioConfig& c, int id) {
    return fmt::format("{}-w{}", c.project, id);
  }
  std::string journal_path(int id) const { return fmt::format("{}/cron-{}", c_.scratch, id); }

  pid_t spawn(int id, std::int64_t first_minute, std::int64_t ahead, fleet::StartGate* gate) {
    std::vector<std::string> args = {
        "cplane-probe", "--worker", "cron", "--store", c_.store, "--project", c_.project,
        "--owner", owner(c_, id), "--record", journal_path(id), "--slot", std::to_string(id),
        "--items", std::to_string(c_.occurrences), "--from", std::to_string(first_minute)};
    if (ahead > 0) args.insert(args.end(), {"--ahead", std::to_string(ahead)});
    return processes_.spawn(std::move(args), gate);
  }
  int kill(pid_t pid) { return processes_.kill(pid); }
  std::optional<int> exited(pid_t pid) { return processes_.exited(pid); }

 private:
  const ScenarioConfig& c_;
  fleet::Processes processes_;
};

// The schedule's stream and the project's items, read through the store's
// connection in one snapshot.
Ledger read_ledger(ControlStore& store, const std::string& project, const std::string& name) {
  Ledger ledger;
  ledger.name = name;
  for (auto& row : store.schedules()) {
    if (row.name == name) ledger.row = row;
  }
  storage::Backend& backend = testing::backend(store);
  {
    auto tx = storage::Transaction::read(backend);
    for (const auto& raw : backend.stream_events({StreamKind::schedule, name})) {
      ledger.schedule.push_back(StoredEvent{raw.seq, decode(raw.body)});
    }
    auto cursor = backend.scan_items();
    storage::ScannedItem scanned;
    while (cursor->next(scanned)) {
      if (scanned.row.project_id == project) ledger.rows.push_back(scanned.row);
    }
    tx.commit();
  }
  for (const auto& row : ledger.rows) ledger.items[row.item_id] = store.events(row.item_id);
  return ledger;
}

}  // namespace

Result run(const ScenarioConfig& c) {
  Result out;
  auto count = [&](const std::string& name, std::int64_t value) {
    out.figures.push_back({name, value});
  };
  auto seconds = [&](const std::string& name, double value) {
    out.figures.push_back({name, value});
  };
  auto check = [&](bool ok, const std::string& sentence) { out.checks.push_back({ok, sentence}); };
  const std::int64_t m = c.occurrences;
  const std::string name = c.project;

  ControlStore store{c.store};
  store.create_project(c.project, "cplane probe cron-race");
  store.grant(c.project, c.project);
  store.add_schedule(name, ControlStore::ScheduleSpec{.project_id = c.project,
                                                      .cron = kCron,
                                                      .overlap = ControlStore::Overlap::allow,
                                                      .catch_up = ControlStore::kCatchUpAll,
                                                      .now = kT0});
  Micros first_next_at = 0;
  for (const auto& row : store.schedules()) {
    if (row.name == name) first_next_at = row.next_at;
  }

  Workers workers(c);
  struct Slot {
    pid_t pid = 0;
    int id = 0;
    bool running = true;
  };
  std::vector<Slot> slots;
  std::map<int, std::string> owner_of;
  int next_id = 0;
  auto start = [&](std::int64_t first, std::int64_t ahead, fleet::StartGate* gate) -> Slot {
    if (next_id > kMaxWorkerId) throw std::runtime_error("cron-race: out of worker ids");
    owner_of[next_id] = Workers::owner(c, next_id);
    Slot slot{workers.spawn(next_id, first, ahead, gate), next_id, true};
    ++next_id;
    return slot;
  };
  {
    fleet::StartGate gate;
    for (int w = 0; w < c.workers; ++w) slots.push_back(start(1, 0, &gate));
    sleep_for(0.2);  // let every worker open its connection
    gate.release();
  }
  const double t0 = seconds_now();

  // A few kills, each of a worker in the first half of its walk (minutes
  // M/10 to M/2 by its journal, so that there is room to run ahead), every
  // other one of the worker furthest ahead. Each is replaced by one that
  // continues after the last minute its journal shows, and 3 to
  // max(6, M/5) minutes past the last occurrence fired when it starts: a
  // clock that jumped ahead of everybody's, whose first call fires every
  // occurrence passed over at once.
  const int max_kills = std::clamp(c.workers / 4, 1, 4);
  std::mt19937 rng(std::random_device{}());
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng);
  };
  std::set<std::string> killed;
  int kills = 0, failures = 0;
  bool timed_out = false;
  double next_kill = t0;  // as soon as a worker is in its window
  auto replace = [&](std::size_t s) {
    const std::int64_t last = read_journal(workers.journal_path(slots[s].id)).last_minute();
    const std::int64_t ahead = std::uniform_int_distribution<std::int64_t>(
        3, std::max<std::int64_t>(6, m / 5))(rng);
    slots[s] = start(std::min<std::int64_t>(m, last + 1), ahead, nullptr);
  };
  for (;;) {
    const double now = seconds_now();
    if (now > c.deadline) {
      timed_out = true;
      break;
    }
    bool any = false;
    for (std::size_t s = 0; s < slots.size(); ++s) {
      if (!slots[s].running) continue;
      if (const auto code = workers.exited(slots[s].pid)) {
        slots[s].running = false;
        if (*code != 0) {
          ++failures;
          replace(s);  // the race goes on without it; the failure fails the run
        }
      }
      any = any || slots[s].running;
    }
    if (!any) break;
    if (kills < max_kills && now >= next_kill) {
      auto s = std::uniform_int_distribution<std::size_t>(0, slots.size() - 1)(rng);
      std::int64_t at = read_journal(workers.journal_path(slots[s].id)).last_minute();
      if (kills % 2 == 0) {  // the leader
        for (std::size_t k = 0; k < slots.size(); ++k) {
          if (!slots[k].running) continue;
          const std::int64_t minute = read_journal(workers.journal_path(slots[k].id)).last_minute();
          if (!slots[s].running || minute > at) {
            s = k;
            at = minute;
          }
        }
      }
      if (slots[s].running && at >= m / 10 && at <= m / 2) {
        const int code = workers.kill(slots[s].pid);
        slots[s].running = false;
        if (code == 128 + SIGKILL) {
          killed.insert(Workers::owner(c, slots[s].id));
          ++kills;
          replace(s);
        } else if (code != 0) {
          ++failures;
          replace(s);
        }
        next_kill = seconds_now() + uniform(0.005, 0.02);
      } else {
        next_kill = now + 0.002;
      }
    }
    sleep_for(0.002);
  }
  const double elapsed = seconds_now() - t0;
  for (auto& slot : slots) {
    if (slot.running) workers.kill(slot.pid);
  }

  // The probe's own tick in the last minute, after every worker: nothing
  // is left for it to fire if the workers fired everything.
  const Micros final_now = kT0 + m * kMinute + kFinalOffset;
  const std::int64_t final_made = store.tick(final_now);

  std::vector<Journal> journals;
  for (int id = 0; id < next_id; ++id) {
    if (std::filesystem::exists(workers.journal_path(id))) {
      journals.push_back(read_journal(workers.journal_path(id)));
    }
  }
  const Ledger ledger = read_ledger(store, c.project, name);
  const double j0 = seconds_now();
  const Findings f = judge(journals, ledger, m, killed, owner_of);
  const double judge_seconds = seconds_now() - j0;
  const auto counts = store.status_counts(c.project);
  // Fired no more: a store the probe ran in is not queued into by every
  // claim after T0.
  store.remove_schedule(name, final_now);

  const ScheduleRow row = ledger.row.value_or(ScheduleRow{});
  count("workers", c.workers);
  count("occurrences", m);
  seconds("elapsed_s", elapsed);
  count("workers_started", next_id);
  count("worker_failures", failures);
  count("timed_out", timed_out ? 1 : 0);
  count("kills", kills);
  count("ticks", f.ticks);
  count("second_ticks", f.second_ticks);
  count("claims", f.claims);
  count("claims_got_item", f.claims_got);
  count("claims_empty", f.claims_empty);
  count("finishes_accepted", f.finishes_accepted);
  count("finishes_refused", f.finishes_refused);
  count("busy_errors", f.busy_told);
  count("items_made_by_ticks", f.tick_made_total);
  count("max_made_by_one_tick", f.max_tick_made);
  count("final_tick_made", final_made);
  count("fired_events", f.fired_events);
  count("distinct_occurrences", f.distinct_occurrences);
  count("skipped_events", f.skipped_events);
  count("fires_by_ticks", f.fires_by_ticks);
  count("fires_by_claims", f.fires_by_claims);
  count("fires_by_busy_calls", f.fires_by_busy_calls);
  count("fires_by_killed_last_call", f.fires_by_killed_last_call);
  count("fires_by_final_tick", f.fires_by_final_tick);
  count("fires_untold", f.fires_untold);
  count("calls_firing", f.calls_firing);
  count("max_fired_by_one_call", f.max_fired_by_one_call);
  count("tick_made_mismatches", f.tick_made_mismatches);
  count("items", f.items);
  count("keys_missing", f.keys_missing);
  count("keys_duplicated", f.keys_duplicated);
  count("items_unkeyed", f.items_unkeyed);
  count("items_not_queued_once", f.items_not_queued_once);
  count("items_claimed_twice", f.items_claimed_twice);
  count("fires_out_of_order", f.fires_out_of_order);
  count("fires_off_grid", f.fires_off_grid);
  count("fires_before_due", f.fires_before_due);
  count("next_at_mismatches", f.next_at_mismatches);
  count("missed_nonzero", f.missed_nonzero);
  count("fires_naming_wrong_item", f.fires_naming_wrong_item);
  count("schedule_created_events", f.created_events);
  count("schedule_other_events", f.other_events);
  count("row_fired", row.fired);
  count("row_next_at_minutes", (row.next_at - kT0) / kMinute);
  count("row_last_occurrence_minutes", (row.last_occurrence - kT0) / kMinute);
  count("status_done", counts.done);
  count("status_ready", counts.ready);
  count("status_claimed", counts.claimed);
  count("claim_events", f.claim_events);
  count("done_events", f.done_events);
  count("unledgered_claims", f.unledgered_claims);
  count("unledgered_finishes", f.unledgered_finishes);
  count("claims_of_unfired", f.claims_of_unfired);
  count("claims_unfinished", f.claims_unfinished);
  count("untold_claims", f.untold_claims);
  count("untold_last_of_killed", f.untold_last_of_killed);
  count("journals", f.journals);
  count("journals_incomplete", f.journals_incomplete);
  count("journals_misnamed", f.journals_misnamed);
  count("malformed_journal_lines", f.malformed_lines);
  seconds("judge_s", judge_seconds);

  const std::string last_key = schedule_item_key(name, kT0 + m * kMinute);
  const auto last_item = std::find_if(ledger.rows.begin(), ledger.rows.end(),
                                      [&](const ItemRow& r) { return r.key == last_key; });
  check(!timed_out && failures == 0 && f.journals_incomplete == 0 && f.journals == next_id &&
            f.malformed_lines == 0 && f.journals_misnamed == 0,
        "every worker walked its minutes before --timeout, and none failed");
  check(first_next_at == kT0 + kMinute && f.created_events == 1,
        "the schedule was added once, its first occurrence a minute after T0");
  check(f.keys_missing == 0 && f.keys_duplicated == 0 && f.items_unkeyed == 0 && f.items == m &&
            f.items_not_queued_once == 0 && counts.done + counts.ready + counts.claimed == m,
        "exactly one item per occurrence: for m = 1..M the item keyed "
        "schedule_item_key(name, T0 + m min) exists exactly once, and the project holds no other");
  check(ledger.row && row.fired == m && row.next_at == kT0 + (m + 1) * kMinute &&
            row.last_occurrence == kT0 + m * kMinute && last_item != ledger.rows.end() &&
            row.last_item == last_item->item_id && row.active(),
        "the schedule's row says fired == M and next_at == T0 + (M+1) min, its last item the "
        "last occurrence's");
  check(f.fired_events == m && f.distinct_occurrences == m && f.fires_out_of_order == 0 &&
            f.fires_off_grid == 0 && f.fires_naming_wrong_item == 0 && f.next_at_mismatches == 0 &&
            f.missed_nonzero == 0 && f.other_events == 0,
        "every schedule_fired names a distinct occurrence, in increasing order, each naming the "
        "item of its key, its next_at the next minute, nothing missed");
  check(f.skipped_events == 0, "no schedule_skipped (overlap allow)");
  check(f.fires_before_due == 0, "no occurrence fired before it was due on the firing call's clock");
  check(final_made == 0 && f.fires_by_final_tick == 0,
        "the probe's tick at minute M, after every worker, made nothing: the workers had fired "
        "everything");
  check(f.tick_made_total <= m && f.tick_made_mismatches == 0 &&
            f.fires_by_ticks == f.tick_made_total,
        "every tick reported exactly the items it fired (the fires stamped with its now), and "
        "the ticks never more than M in all");
  check(f.fires_by_ticks + f.fires_by_claims + f.fires_by_busy_calls +
                    f.fires_by_killed_last_call + f.fires_by_final_tick ==
                m &&
            f.fires_untold == 0,
        "the items fired by ticks plus those fired inside claims equal M, each fire by a call "
        "some worker journaled (bar a killed worker's last)");
  check(f.items_claimed_twice == 0 && f.unledgered_claims == 0 && f.unledgered_finishes == 0 &&
            f.claims_of_unfired == 0 && f.claims_unfinished == 0 && f.untold_claims == 0 &&
            f.finishes_refused == 0,
        "every claim took a fired item once, was told and finished done as the log says");
  check(f.busy_told == 0, "no busy or 'database is locked' error reached a worker");
  // Not vacuous: the race happened.
  check(f.tick_made_total > 0 && f.fires_by_claims > 0,
        "both ticks and claims fired occurrences");
  check(f.max_fired_by_one_call > 1, "a call far ahead fired several occurrences at once");
  return out;
}

}  // namespace cplane::probe::cron
