// What a MetricsCollector carries from scrape to scrape, and its text form
// (save_state / load_state): the counters, the last seq folded, the items
// claimed and the sessions open. library/metrics.cpp folds it.
//
// The text, one record a line, fields separated by tabs, each field with
// backslash, tab, newline and carriage return escaped (\\ \t \n \r):
//
//   cplane-metrics-state	1
//   database	ID          the database it was folded from
//   seq	N               the last seq folded
//   overlap	N           claims up to this seq are judged from their item's events
//   claimed	ITEM        one per item claimed
//   session	SESSION     one per session open
//   counter	FAMILY	VALUE	LABEL...   one per series, label values in the family's order
//
// A state with no database line was saved before the first scrape: it
// carries nothing, and the collector that loads it seeds itself.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/events.hpp>

namespace cplane::metrics {

enum class Counter {
  events,
  enqueued,
  claims,
  reclaims,
  finishes,
  attempt_failures,
  lease_expiries,
  releases,
  cancels,
  retries,
  reschedules,
  closes,
  schedule_fires,
  schedule_skips,
  mutations,
};

struct CounterDef {
  const char* name;
  const char* help;
  std::vector<std::string> labels;
};

inline constexpr std::size_t kCounterCount = 15;
inline const std::array<CounterDef, kCounterCount> kCounters = {{
    {"cplane_events_total", "Events appended to the log, by type.", {"type"}},
    {"cplane_enqueued_total", "Items queued.", {"project"}},
    {"cplane_claims_total", "Claims: a worker's claim, or a session's assignment (via).",
     {"project", "via"}},
    {"cplane_reclaims_total",
     "Claims of an item whose previous claim had not ended: a lapsed lease taken over.",
     {"project"}},
    {"cplane_finishes_total", "Finishes by outcome (a lapsed lease with no attempts left is "
                              "a failed finish).",
     {"project", "outcome"}},
    {"cplane_attempt_failures_total",
     "Failed attempts with attempts left: the item waits its backoff, then runs again.",
     {"project"}},
    {"cplane_lease_expiries_total", "Lapsed leases recorded by the sweep (expire).",
     {"project"}},
    {"cplane_releases_total", "Items given back by their holder (or a closed session).",
     {"project"}},
    {"cplane_cancels_total", "Items cancelled.", {"project"}},
    {"cplane_retries_total", "Failed or cancelled items redriven (retry).", {"project"}},
    {"cplane_reschedules_total", "Ready or scheduled items moved to another time.",
     {"project"}},
    {"cplane_closes_total", "Items the forge closed, by reason.", {"project", "reason"}},
    {"cplane_schedule_fires_total", "Cron occurrences fired, each queueing one item.",
     {"project", "schedule"}},
    {"cplane_schedule_skips_total", "Cron occurrences passed over, by reason.",
     {"project", "schedule", "reason"}},
    {"cplane_mutations_recorded_total",
     "Mutations the gate allowed and recorded, by action (denials append nothing).",
     {"project", "action"}},
}};

struct FoldState {
  bool from_start = false;  // the collector's option, not saved
  bool seeded = false;
  std::string database_id;
  Seq seq = 0;
  Seq overlap = 0;
  std::set<std::string> claimed;
  std::set<std::string> sessions;
  std::array<std::map<std::vector<std::string>, std::int64_t>, kCounterCount> counters;
  std::int64_t events_read = 0;  // this process's, not saved

  void add(Counter c, std::vector<std::string> labels) {
    ++counters[static_cast<std::size_t>(c)][std::move(labels)];
  }
};

std::string save(const FoldState& state);
// InvalidArgument (invalid_input) naming the line that is wrong.
FoldState load(std::string_view text);

}  // namespace cplane::metrics
