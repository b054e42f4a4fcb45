// Metrics of one store for Prometheus, and the per-minute activity the
// console's charts draw, both read from the log and a few index reads.
//
// Gauges (depth by project and status, the oldest available item's age,
// live and lapsed leases, open sessions) are index reads at scrape time.
// Counters (claims, finishes by outcome, reclaims, expiries, releases,
// ...) are folded from the events appended since the previous scrape, read
// a page at a time: a scrape never passes over the whole log.
//
// What the log cannot give: refusals (a stale fence, a scope denial) and
// the gate's denials append nothing (DESIGN.md: a refusal appends nothing),
// so no counter counts them; the gate's allowed verdicts are the
// mutation_recorded events, counted by action. docs/metrics.md lists every
// family.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cplane/events.hpp>
#include <cplane/store.hpp>

namespace cplane {

// ---- the samples, as values ---------------------------------------------------

enum class MetricType { counter, gauge };
// "counter", "gauge": the exposition format's TYPE words.
std::string_view to_string(MetricType type);

struct MetricSample {
  // Label names and values, in the order they are written. A value may hold
  // any bytes; the exposition escapes it.
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
  bool operator==(const MetricSample&) const = default;
};

struct MetricFamily {
  std::string name;  // "cplane_claims_total"; a counter's name ends in _total
  MetricType type = MetricType::gauge;
  std::string help;  // one line
  std::vector<MetricSample> samples;  // sorted by their labels
  bool operator==(const MetricFamily&) const = default;
};

// The Prometheus text exposition format, version 0.0.4: for each family a
// HELP line (backslash and newline escaped), a TYPE line, then its samples;
// label values escaped as the format says (\\, \", \n). A family with no
// samples is written with its HELP and TYPE only. Integral values print
// without a fraction.
std::string to_prometheus_text(const std::vector<MetricFamily>& families);
// The Content-Type a server sends with it.
inline constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// ---- the collector ----------------------------------------------------------------

struct MetricsOptions {
  // Where the counters of a collector that loaded no state start:
  //   false (the default): at zero at the log's end as of its first
  //     collect(): a counter reset, as Prometheus expects of a process that
  //     restarts. The set of claimed items, needed to tell a reclaim, is
  //     seeded from the claimed rows (an index range), not from the log.
  //   true: from the first event: the first collect() folds the whole log
  //     once (a pass, paged), and the counters are totals since the store
  //     was created.
  bool from_start = false;
};

// A Prometheus scraper of one store. It does not own the store, which must
// outlive it. Each collect() is a read: it never takes the write lock and
// writes nothing. Not thread-safe (nor is the store): one thread at a time.
// A collect() made while another thread is in a call on the same store
// throws InvalidArgument (misuse), as any store call does.
class MetricsCollector {
 public:
  explicit MetricsCollector(ControlStore& store, MetricsOptions options = {});
  ~MetricsCollector();
  MetricsCollector(MetricsCollector&&) noexcept;
  MetricsCollector& operator=(MetricsCollector&&) noexcept;

  // Every family, gauges read at `now` (else the store's clock), counters
  // folded up to the newest final event (ControlStore::read_log's
  // guarantee: nothing is folded twice or skipped, on either backend).
  // StorageError as a read; StorageError(corruption) for an event that
  // does not decode.
  std::vector<MetricFamily> collect(std::optional<Micros> now = {});
  // collect() in the exposition format.
  std::string scrape(std::optional<Micros> now = {});

  // What a later collector needs to go on where this one stopped: the
  // database's id, the last seq folded, every counter and the claimed
  // items (with their fences), as text (a versioned line format, see
  // docs/metrics.md). Before the first collect() of a collector that
  // loaded nothing, the state is empty-handed: a collector that loads it
  // starts as this one would have.
  std::string save_state() const;
  // Replaces the collector's state with one save_state() wrote; call it
  // before the first collect(). InvalidArgument (invalid_input) for a
  // malformed state, and (conflict) for a state saved from another
  // database: nothing is changed. Reads the store's database id.
  void load_state(std::string_view state);

  // The last seq folded into the counters (0 before the first collect()).
  Seq folded_seq() const;
  // How many events this collector read from the log, in all (the cost of
  // its scrapes: tests and the bench check it).
  std::int64_t events_read() const;
  // The store's database id: a random id given when it was created (the
  // CLI names its default state file by it).
  std::string database_id();

  class State;  // the counters and claimed set (library/metrics.cpp)

 private:
  ControlStore* store_;
  std::unique_ptr<State> state_;
};

// ---- activity over time -----------------------------------------------------------

// One minute of activity, from the log: items queued, claimed (a claim or
// an assignment), done, and failed (a failed finish or a failed attempt
// that will be retried), and the claim lag: the longest wait, among the
// items claimed that minute, between the moment an item became claimable
// (queued, due, released, redriven, its lease lapsed) and its claim.
struct ActivityMinute {
  Micros start = 0;  // the minute's first microsecond (a whole UTC minute)
  std::int64_t enqueued = 0;
  std::int64_t claimed = 0;
  std::int64_t done = 0;
  std::int64_t failed = 0;
  Micros max_wait = 0;  // 0 when nothing was claimed
  bool operator==(const ActivityMinute&) const = default;
};

inline constexpr Micros kMinuteMicros = 60'000'000;
inline constexpr Micros kMaxActivityWindow = 24 * 60 * kMinuteMicros;  // a day

// Every whole minute that meets [now - window, now], oldest first, empty
// ones included (a chart's x axis). Reads the log from the first event of
// the window (found by a binary search over seq: the log's times rise with
// its seqs, as the store's clock does), so its cost is the window's
// events, not the log's; an item whose first event in the window is its
// claim has its own events read, to learn since when it waited. Events
// after `now` are not counted. InvalidArgument for a window that is not in
// 1 minute ..= kMaxActivityWindow.
std::vector<ActivityMinute> recent_activity(ControlStore& store, Micros window,
                                            std::optional<Micros> now = {});

}  // namespace cplane
