// The cron-race scenario: its workers, their journals and the judgement
// (cplane-probe --scenario cron-race).
//
// One project, one schedule `* * * * *` (every minute, UTC) with catch-up
// all and overlap allow, added at the fixed clock kT0 (a whole minute), so
// that its occurrences are kT0 + m minutes, m = 1, 2, ... W worker processes
// (default 16), released together by the start gate, each walk a simulated
// clock: for minute m = 1..M (default 200), a worker calls, at its `now`
// within that minute, either tick(now) or claim(now) (then finishes what it
// claimed, done), at random, and one worker in kSecondTickEvery ticks a
// second time in the same minute. Nobody waits for anybody: a worker may be
// minutes ahead of another, and a worker ahead fires every occurrence it
// finds due at once (catch-up all). Any claim (and tick) fires the due
// occurrences first, in its own transaction; each fire is an enqueue keyed
// schedule_item_key(name, occurrence), so the racing processes must make
// exactly one item per occurrence. The probe SIGKILLs a few workers mid-run
// and starts each replacement minutes ahead of the last occurrence fired
// (its first call fires them all at once); once every worker is done
// it ticks once more itself, at kT0 + M minutes + kFinalOffset.
//
// Every call's `now` says who made it: kT0 + m minutes + offset, where the
// offset (under a minute) is
//   worker id + 1000 * call + 10'000 * r     (r random, 0..kJitterSteps-1)
// with call 0 for a worker's first call of the minute and 1 for its second
// tick; the probe's last tick is at offset kFinalOffset (id 999, call 9).
// A fire is stamped with the `now` of the call that made it, so every
// schedule_fired event names its call: what each tick reported can be held
// to the fires it made, and what each claim fired is known, though a claim
// does not say.
//
// Each worker keeps a journal, appended one line per answer with a single
// write(2), so that a killed worker's journal holds every answer it had.
// Every line has the same eight fields, separated by one space; "-" stands
// for an empty text:
//
//   kind minute call now made item fence result
//
//   O  the worker started: item is its owner, minute the first minute it walks
//   T  tick(now): made the items it said it queued; result ok or busy
//   C  claim(now): result claimed (item, fence), none, or busy
//   F  finish(item, fence, done, now): result accepted, a FenceRejected
//      reason, or busy
//   E  the worker walked every minute up to M and exited
#pragma once

#include "probe/scenario.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <cplane/cplane.hpp>

namespace cplane::probe::cron {

inline constexpr const char* kCron = "* * * * *";
inline constexpr Micros kT0 = 1'800'000'000'000'000;  // 2027-01-15 08:00:00 UTC, a whole minute
inline constexpr Micros kMinute = 60'000'000;
inline constexpr std::int64_t kJitterSteps = 5'000;   // offsets up to 50 s into the minute
inline constexpr Micros kFinalOffset = kMinute - 1;   // the probe's own last tick: id 999, call 9
inline constexpr int kMaxWorkerId = 998;              // ids 0..998 fit the offset's last three digits
inline constexpr int kSecondTickEvery = 4;            // workers whose id % 4 == 0 tick twice a minute
inline constexpr double kTickProbability = 0.5;       // else a claim

// The `now` of worker `id`'s call `call` in minute `minute`, draw `r`.
inline Micros call_now(std::int64_t minute, int id, int call, std::int64_t r) {
  return kT0 + minute * kMinute + id + 1'000 * call + 10'000 * r;
}
// Who made the call stamped `at`: its minute, worker id and call.
struct CallOf {
  std::int64_t minute = 0;
  int id = 0;
  int call = 0;
};
inline CallOf call_of(Micros at) {
  const Micros offset = (at - kT0) % kMinute;
  return {(at - kT0) / kMinute, static_cast<int>(offset % 1'000),
          static_cast<int>((offset / 1'000) % 10)};
}

enum class EntryKind : char {
  opened = 'O',
  ticked = 'T',
  claimed = 'C',
  finished = 'F',
  exited = 'E',
};

struct Entry {
  EntryKind kind = EntryKind::ticked;
  std::int64_t minute = 0;
  int call = 0;
  Micros now = 0;
  std::int64_t made = 0;  // T: what the tick said it queued
  std::string item;       // O: the owner; C, F: the item
  Fence fence = 0;
  std::string result;     // T: ok or busy; C: claimed, none or busy; F: accepted, a reason or busy
};

struct Journal {
  std::string owner;
  std::vector<Entry> entries;  // in the order the worker made its calls
  std::int64_t malformed_lines = 0;
  // The last minute it made a call in (before its first minute if none).
  std::int64_t last_minute() const;
};

// Reads a journal, however far it got (an absent file is an empty journal).
Journal read_journal(const std::string& path);

// One worker's process (cplane-probe --worker cron).
struct WorkerConfig {
  std::string store;
  std::string project;  // its actor, and the schedule's name
  std::string owner;
  std::string journal;  // appended to
  int gate_fd = -1;     // the start gate (fleet::StartGate), if any
  int id = 0;           // 0..kMaxWorkerId: in every `now` it passes
  std::int64_t first_minute = 1;
  std::int64_t occurrences = 200;  // M: the last minute it walks
  // A replacement's jump: when positive, it starts (once its connection is
  // open) no earlier than `ahead` minutes past the last occurrence fired,
  // so that its first call fires `ahead` occurrences at once, unless
  // somebody gets there first.
  std::int64_t ahead = 0;
};
// 0 once it has walked minute M; 1 when a call failed otherwise (the
// journal says how far it got).
int run_worker(const WorkerConfig& config);

// What the store holds once the race is over.
struct Ledger {
  std::string name;                    // the schedule
  std::vector<StoredEvent> schedule;   // its stream, oldest first
  std::optional<ScheduleRow> row;      // after the probe's last tick
  std::vector<ItemRow> rows;           // every item row of the project
  std::map<std::string, std::vector<StoredEvent>> items;  // each one's events, by id
};

// Every count the scenario reports; the probe decides PASS from them.
struct Findings {
  // The schedule's stream.
  std::int64_t created_events = 0, fired_events = 0, skipped_events = 0, other_events = 0;
  std::int64_t distinct_occurrences = 0;
  std::int64_t fires_out_of_order = 0;   // an occurrence not after the one fired before it
  std::int64_t fires_off_grid = 0;       // not kT0 + m minutes for some m in 1..M
  std::int64_t fires_before_due = 0;     // stamped before its occurrence
  std::int64_t next_at_mismatches = 0;   // next_at not the occurrence + a minute
  std::int64_t missed_nonzero = 0;       // catch-up all passes over nothing
  std::int64_t fires_naming_wrong_item = 0;  // not the item keyed to its occurrence, or named twice
  // The items, by key.
  std::int64_t items = 0, keys_missing = 0, keys_duplicated = 0, items_unkeyed = 0;
  std::int64_t items_not_queued_once = 0;  // not exactly one queued event, or its key not the row's
  std::int64_t items_claimed_twice = 0;
  std::int64_t claim_events = 0, done_events = 0;
  // Who fired what: each fire by the `now` it is stamped with.
  std::int64_t fires_by_ticks = 0, fires_by_claims = 0, fires_by_busy_calls = 0;
  std::int64_t fires_by_killed_last_call = 0, fires_by_final_tick = 0;
  std::int64_t fires_untold = 0;   // stamped with a call nobody journaled (bar a killed worker's last)
  std::int64_t tick_made_mismatches = 0;   // a tick's count not the fires stamped with its now
  std::int64_t max_fired_by_one_call = 0;
  std::int64_t calls_firing = 0;           // calls that fired at least one occurrence
  // The journals.
  std::int64_t journals = 0, journals_incomplete = 0, malformed_lines = 0;
  std::int64_t journals_misnamed = 0;      // an entry whose now is not its own call's
  std::int64_t ticks = 0, second_ticks = 0, tick_made_total = 0, max_tick_made = 0;
  std::int64_t claims = 0, claims_got = 0, claims_empty = 0;
  std::int64_t finishes = 0, finishes_accepted = 0, finishes_refused = 0, busy_told = 0;
  // The journals against the log.
  std::int64_t unledgered_claims = 0;    // told claimed, no such claim in the log
  std::int64_t unledgered_finishes = 0;  // told accepted, no such done in the log
  std::int64_t claims_of_unfired = 0;    // claimed an item no fire names
  std::int64_t claims_unfinished = 0;    // told claimed, never finished (bar a killed worker's last)
  std::int64_t untold_claims = 0;        // a claim in the log its worker was not told (bar a killed one's last)
  std::int64_t untold_last_of_killed = 0;
};

// `killed`: the owners the probe SIGKILLed; `owner_of`: worker id -> owner.
Findings judge(const std::vector<Journal>& journals, const Ledger& ledger,
               std::int64_t occurrences, const std::set<std::string>& killed,
               const std::map<int, std::string>& owner_of);

// The probe's side: sets up the project and its schedule, runs the fleet
// and its kills, ticks once more, judges, and removes the schedule (so that
// a store it ran in is not fired into afterwards). Everything it reports,
// in print order, and its checks; the caller adds verify's (and
// integrity_check's).
struct ScenarioConfig {
  std::string store;
  std::string project;  // created here; the schedule has its name
  std::string scratch;  // a directory for the journals
  int workers = 16;
  std::int64_t occurrences = 200;
  double deadline = 0;  // fleet::seconds_now() after which the run gives up (FAIL)
};
using Result = ScenarioResult;  // probe/scenario.hpp
// Throws what the store throws while setting up; a worker's failure is a
// failed check. Every process it started is gone when it returns.
Result run(const ScenarioConfig& config);

}  // namespace cplane::probe::cron
