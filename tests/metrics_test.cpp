// cplane metrics (issue 24) on every backend: the families' exact values
// after a known sequence of commands, a scrape that reads only the events
// since the previous one, the state that carries a collector over to the
// next process, the exposition's escaping, the activity series, and the
// CLI with its state file and its bad input.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include <cplane/cplane.hpp>

#include <sqlite3.h>

#include "commands/testing.hpp"
#include "storage/backend_wrapper.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/engine.hpp"
#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::run_cli;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

constexpr Micros T0 = 1'800'000'000'000'000;  // a whole minute
constexpr Micros kSecond = 1'000'000;
constexpr Micros at(double seconds) { return T0 + static_cast<Micros>(seconds * kSecond); }

// A family's samples as "label=value,label=value" -> value.
using Series = std::map<std::string, double>;
Series series(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const auto& f : families) {
    if (f.name != name) continue;
    Series out;
    for (const auto& s : f.samples) {
      std::string key;
      for (const auto& [label, value] : s.labels) key += (key.empty() ? "" : ",") + label + "=" + value;
      out[key] = s.value;
    }
    return out;
  }
  FAIL("no family " << name);
  return {};
}
// The series of a family that are not zero.
Series nonzero(const std::vector<MetricFamily>& families, const std::string& name) {
  Series out;
  for (const auto& [k, v] : series(families, name)) {
    if (v != 0) out[k] = v;
  }
  return out;
}

// Counts what the store reads from the log: the events read_final hands
// out, and every call that walks a whole stream kind or table.
class CountingBackend : public storage::BackendWrapper {
 public:
  using BackendWrapper::BackendWrapper;
  std::int64_t events_read = 0;
  std::int64_t whole_scans = 0;
  std::vector<storage::RawEvent> read_final(Seq after, std::size_t max, const StreamRef* stream) override {
    auto out = BackendWrapper::read_final(after, max, stream);
    events_read += static_cast<std::int64_t>(out.size());
    return out;
  }
  std::unique_ptr<storage::Cursor<storage::RawEvent>> scan_stream(StreamKind kind) override {
    ++whole_scans;
    return BackendWrapper::scan_stream(kind);
  }
  std::unique_ptr<storage::Cursor<storage::RawEvent>> scan_after(Seq after) override {
    ++whole_scans;
    return BackendWrapper::scan_after(after);
  }
  std::unique_ptr<storage::Cursor<storage::ScannedItem>> scan_items() override {
    ++whole_scans;
    return BackendWrapper::scan_items();
  }
  std::int64_t event_count() override {
    ++whole_scans;
    return BackendWrapper::event_count();
  }
};

// Matches an InvalidArgument of one reason (CHECK_THROWS_MATCHES).
class RefusedAs : public Catch::MatcherBase<InvalidArgument> {
 public:
  explicit RefusedAs(InvalidArgument::Reason reason) : reason_(reason) {}
  bool match(const InvalidArgument& e) const override { return e.reason() == reason_; }
  std::string describe() const override {
    return std::string("is refused as ") + to_string(reason_);
  }

 private:
  InvalidArgument::Reason reason_;
};

}  // namespace

TEST_CASE("metrics: every family holds exact values after claims finishes a release a lapse "
          "reclaimed an expiry a cancel and a retry",
          "[metrics]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "m.db")};
  store.create_project("alpha", "A", "open", at(0));
  store.create_project("beta", "B", "open", at(0));
  MetricsCollector collector(store);
  // The first scrape starts the counters at zero at the log's end.
  auto first = collector.collect(at(0.5));
  CHECK(nonzero(first, "cplane_events_total").empty());
  CHECK(series(first, "cplane_claims_total") ==
        Series{{"project=alpha,via=assign", 0}, {"project=alpha,via=claim", 0},
               {"project=beta,via=assign", 0}, {"project=beta,via=claim", 0}});

  std::vector<std::string> a;
  for (int i = 0; i < 5; ++i) a.push_back(store.enqueue("alpha", "{}", {}, at(1 + i)));
  a.push_back(store.enqueue("alpha", "{}",
                            ControlStore::EnqueueOptions{.now = at(6), .run_at = at(3600)}));
  const auto lease = [](double s) { return Seconds{s}; };
  auto c = store.claim("w1", {.lease = lease(100), .now = at(10)});
  REQUIRE(c->item_id == a[0]);
  store.finish(a[0], c->fence, Outcome::done, "", at(11));
  c = store.claim("w1", {.lease = lease(100), .now = at(12)});
  REQUIRE(c->item_id == a[1]);
  store.finish(a[1], c->fence, Outcome::failed, "", at(13));
  c = store.claim("w2", {.lease = lease(100), .now = at(14)});
  REQUIRE(c->item_id == a[2]);
  store.release(a[2], c->fence, "", {.now = at(15)});
  store.cancel(a[3], "", {.now = at(16)});
  c = store.claim("w3", {.lease = lease(10), .now = at(17)});
  REQUIRE(c->item_id == a[2]);
  CHECK(store.expire_leases(at(30)) == 1);
  c = store.claim("w4", {.lease = lease(100), .now = at(31)});
  REQUIRE(c->item_id == a[4]);
  c = store.claim("w5", {.lease = lease(100), .now = at(32)});  // a[2]'s lapsed lease
  REQUIRE(c->item_id == a[2]);
  CHECK(c->fence == 3);
  const auto b1 = store.enqueue("beta", "{}", {}, at(39));
  c = store.claim("w6", {.lease = lease(5), .now = at(40)});
  REQUIRE(c->item_id == b1);
  store.retry(a[1], {}, {.now = at(40.5)});
  const auto b2 = store.enqueue("beta", "{}", {}, at(41));
  const auto b3 = store.enqueue("beta", "{}", {}, at(41.5));
  store.open_session("s1", {}, at(42));
  store.open_session("s2", {}, at(43));
  store.close_session("s2", at(44));
  const auto assigned = store.assign_and_lease("s1", b3, {"push"}, {}, at(45));
  REQUIRE(assigned.is_assigned());
  REQUIRE(store.record_mutation("s1", b3, assigned.fence, "push", {}, at(46)).allowed());
  (void)b2;

  const auto m = collector.collect(at(50));
  CHECK(series(m, "cplane_items") ==
        Series{{"project=alpha,status=claimed", 2}, {"project=alpha,status=ready", 1},
               {"project=alpha,status=scheduled", 1}, {"project=beta,status=claimed", 2},
               {"project=beta,status=ready", 1}, {"project=beta,status=scheduled", 0}});
  CHECK(series(m, "cplane_items_due") == Series{{"project=alpha", 0}, {"project=beta", 0}});
  // alpha: a[1] ready again since its retry (40.5 s); beta: b2 ready since
  // 41 s, b1's lease lapsed at 45 s: the longer wait wins.
  CHECK(series(m, "cplane_oldest_available_age_seconds") ==
        Series{{"project=alpha", 9.5}, {"project=beta", 9}});
  CHECK(series(m, "cplane_leases") ==
        Series{{"project=alpha,state=lapsed", 0}, {"project=alpha,state=live", 2},
               {"project=beta,state=lapsed", 1}, {"project=beta,state=live", 1}});
  CHECK(series(m, "cplane_project_paused") == Series{{"project=alpha", 0}, {"project=beta", 0}});
  CHECK(series(m, "cplane_sessions_open") == Series{{"", 1}});
  CHECK(series(m, "cplane_log_seq") == Series{{"", double(store.log_end())}});
  CHECK(nonzero(m, "cplane_events_total") ==
        Series{{"type=assigned", 1}, {"type=cancelled", 1}, {"type=claimed", 7},
               {"type=done", 1}, {"type=failed", 1}, {"type=lease_expired", 1},
               {"type=mutation_recorded", 1}, {"type=queued", 9}, {"type=released", 1},
               {"type=retried", 1}, {"type=session_closed", 1}, {"type=session_opened", 2}});
  CHECK(series(m, "cplane_scrape_events_read") == Series{{"", 27}});
  CHECK(series(m, "cplane_enqueued_total") == Series{{"project=alpha", 6}, {"project=beta", 3}});
  CHECK(series(m, "cplane_claims_total") ==
        Series{{"project=alpha,via=assign", 0}, {"project=alpha,via=claim", 6},
               {"project=beta,via=assign", 1}, {"project=beta,via=claim", 1}});
  CHECK(series(m, "cplane_reclaims_total") == Series{{"project=alpha", 1}, {"project=beta", 0}});
  CHECK(series(m, "cplane_finishes_total") ==
        Series{{"project=alpha,outcome=done", 1}, {"project=alpha,outcome=failed", 1},
               {"project=beta,outcome=done", 0}, {"project=beta,outcome=failed", 0}});
  CHECK(series(m, "cplane_lease_expiries_total") == Series{{"project=alpha", 1}, {"project=beta", 0}});
  CHECK(series(m, "cplane_releases_total") == Series{{"project=alpha", 1}, {"project=beta", 0}});
  CHECK(series(m, "cplane_cancels_total") == Series{{"project=alpha", 1}, {"project=beta", 0}});
  CHECK(series(m, "cplane_retries_total") == Series{{"project=alpha", 1}, {"project=beta", 0}});
  CHECK(series(m, "cplane_attempt_failures_total") ==
        Series{{"project=alpha", 0}, {"project=beta", 0}});
  CHECK(series(m, "cplane_reschedules_total") == Series{{"project=alpha", 0}, {"project=beta", 0}});
  CHECK(series(m, "cplane_closes_total") ==
        Series{{"project=alpha,reason=closed", 0}, {"project=alpha,reason=merged", 0},
               {"project=beta,reason=closed", 0}, {"project=beta,reason=merged", 0}});
  CHECK(series(m, "cplane_mutations_recorded_total") == Series{{"project=beta,action=push", 1}});
  CHECK(series(m, "cplane_schedule_fires_total").empty());
  CHECK(series(m, "cplane_schedule_skips_total").empty());

  // A pause shows, and a scrape with nothing new reads nothing.
  store.pause_project("alpha", "", {.now = at(51)});
  const auto paused = collector.collect(at(52));
  CHECK(series(paused, "cplane_project_paused") == Series{{"project=alpha", 1}, {"project=beta", 0}});
  CHECK(series(paused, "cplane_scrape_events_read") == Series{{"", 1}});
  CHECK(series(collector.collect(at(53)), "cplane_scrape_events_read") == Series{{"", 0}});
}

TEST_CASE("metrics: a second scrape reads only the events appended since the first", "[metrics]") {
  TempDir dir;
  const auto url = test_context().fresh_store(dir, "m.db");
  auto counting = std::make_unique<CountingBackend>(storage::open_store(url));
  CountingBackend& reads = *counting;
  ControlStore store = testing::store_over(std::move(counting));
  store.create_project("p", "P", "open", at(0));
  std::vector<std::string> payloads(300, "{}");
  store.enqueue_batch("p", payloads, {}, at(1));
  auto claimed = store.claim_batch("w", 100, {.now = at(2)});
  std::vector<ControlStore::Report> reports;
  for (const auto& c : claimed) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
  store.finish_batch(reports, {}, at(3));

  // From the start: the first scrape folds the whole log once.
  MetricsCollector collector(store, {.from_start = true});
  reads.events_read = 0;
  auto m = collector.collect(at(4));
  const std::int64_t log_length = 1 + 300 + 100 + 100;
  CHECK(collector.events_read() == log_length);
  CHECK(reads.events_read >= log_length);
  CHECK(series(m, "cplane_finishes_total")["project=p,outcome=done"] == 100);

  // Five events later, the next scrape reads those five and no more.
  for (int i = 0; i < 5; ++i) store.enqueue("p", "{}", {}, at(5 + i));
  reads.events_read = 0;
  reads.whole_scans = 0;
  m = collector.collect(at(20));
  CHECK(collector.events_read() == log_length + 5);
  CHECK(series(m, "cplane_scrape_events_read") == Series{{"", 5}});
  CHECK(reads.events_read == 5);
  CHECK(reads.whole_scans == 0);
  CHECK(series(m, "cplane_enqueued_total")["project=p"] == 305);
  CHECK(series(m, "cplane_items")["project=p,status=ready"] == 205);

  // A collector that starts at the end reads no event of the past at all.
  MetricsCollector late(store);
  reads.events_read = 0;
  m = late.collect(at(21));
  CHECK(late.events_read() == 0);
  CHECK(reads.events_read == 0);
  CHECK(reads.whole_scans == 0);
  CHECK(nonzero(m, "cplane_enqueued_total").empty());
  CHECK(series(m, "cplane_items")["project=p,status=ready"] == 205);
}

TEST_CASE("metrics: a collector seeded with items already claimed tells their reclaim",
          "[metrics]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "m.db")};
  store.create_project("p", "P", "open", at(0));
  const auto held = store.enqueue("p", "{}", {}, at(1));
  REQUIRE(store.claim("w1", {.lease = Seconds{10}, .now = at(3)})->item_id == held);
  MetricsCollector collector(store);  // held is claimed when it starts
  collector.collect(at(4));
  REQUIRE(store.claim("w2", {.lease = Seconds{100}, .now = at(20)})->item_id == held);
  const auto m = collector.collect(at(21));
  CHECK(series(m, "cplane_reclaims_total") == Series{{"project=p", 1}});
  CHECK(series(m, "cplane_claims_total")["project=p,via=claim"] == 1);
}

// A log's end read before events that the seed's snapshot then holds (a
// commit between the two reads, or PostgreSQL's out-of-order seqs): the
// claims among them are judged from their items' own events.
class LaggingHorizon : public storage::BackendWrapper {
 public:
  using BackendWrapper::BackendWrapper;
  std::optional<Seq> once;
  Seq final_horizon() override {
    if (once) return *std::exchange(once, std::nullopt);
    return BackendWrapper::final_horizon();
  }
};

TEST_CASE("metrics: claims committed between the log's end and the seed's snapshot are judged "
          "from their items' events",
          "[metrics]") {
  TempDir dir;
  auto lagging = std::make_unique<LaggingHorizon>(
      storage::open_store(test_context().fresh_store(dir, "m.db")));
  LaggingHorizon& horizon = *lagging;
  ControlStore store = testing::store_over(std::move(lagging));
  store.create_project("p", "P", "open", at(0));
  const auto x = store.enqueue("p", "{}", {}, at(1));
  const auto y = store.enqueue("p", "{}", {}, at(2));
  auto cx = store.claim("w", {.lease = Seconds{100}, .now = at(3)});
  REQUIRE(cx->item_id == x);
  auto cy = store.claim("w", {.lease = Seconds{5}, .now = at(4)});
  REQUIRE(cy->item_id == y);
  store.release(x, cx->fence, "", {.now = at(5)});
  // The two claims below are past the end the collector reads, yet in its
  // snapshot: y's lapsed lease taken over (a reclaim), x claimed again
  // after its release (not one), though both are claimed in the seed.
  const auto again = store.claim("w2", {.lease = Seconds{100}, .now = at(10)});
  REQUIRE(again->item_id == x);
  REQUIRE(store.claim("w3", {.lease = Seconds{100}, .now = at(11)})->item_id == y);
  const auto log = store.read_log(0, 100).events;
  REQUIRE(log.size() >= 3);
  horizon.once = log[log.size() - 3].seq;
  MetricsCollector collector(store);
  const auto m = collector.collect(at(12));
  CHECK(collector.events_read() == 2);
  CHECK(series(m, "cplane_claims_total")["project=p,via=claim"] == 2);
  CHECK(series(m, "cplane_reclaims_total") == Series{{"project=p", 1}});
  // After the overlap the set is exact: a release and a claim of x are no reclaim.
  store.release(x, again->fence, "", {.now = at(13)});
  REQUIRE(store.claim("w4", {.lease = Seconds{100}, .now = at(14)})->item_id == x);
  CHECK(series(collector.collect(at(15)), "cplane_reclaims_total") == Series{{"project=p", 1}});
}

TEST_CASE("metrics: the saved state lets the next collector go on where the last one stopped",
          "[metrics]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "m.db")};
  store.create_project("p", "P", "open", at(0));
  MetricsCollector running(store);
  MetricsCollector first(store);
  running.collect(at(0.5));
  first.collect(at(0.5));
  const auto x = store.enqueue("p", "{}", {}, at(1));
  const auto c = store.claim("w", {.lease = Seconds{5}, .now = at(2)});
  first.collect(at(3));
  const std::string saved = first.save_state();

  store.open_session("s", {}, at(4));
  store.enqueue("p", "{}", {}, at(8));  // after x's lease lapsed (7 s): x goes first
  REQUIRE(store.claim("w2", {.lease = Seconds{5}, .now = at(10)})->item_id == x);  // a reclaim
  MetricsCollector next(store);
  next.load_state(saved);
  const auto resumed = next.collect(at(11));
  CHECK(next.events_read() == 3);
  const auto reference = running.collect(at(11));
  for (const auto& family : reference) {
    if (family.name == "cplane_scrape_events_read") continue;
    INFO(family.name);
    CHECK(series(resumed, family.name) == series(reference, family.name));
  }
  CHECK(series(resumed, "cplane_reclaims_total") == Series{{"project=p", 1}});
  CHECK(series(resumed, "cplane_sessions_open") == Series{{"", 1}});
  (void)c;

  // A state saved before any scrape carries nothing: the loader seeds itself.
  MetricsCollector fresh(store);
  MetricsCollector loader(store);
  loader.load_state(fresh.save_state());
  CHECK(nonzero(loader.collect(at(12)), "cplane_events_total").empty());
}

TEST_CASE("metrics: a malformed state or one from another database is refused and changes nothing",
          "[metrics]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "m.db")};
  ControlStore other{test_context().fresh_store(dir, "other.db")};
  store.create_project("p", "P", "open", at(0));
  other.create_project("p", "P", "open", at(0));
  MetricsCollector collector(store);
  collector.collect(at(1));
  store.enqueue("p", "{}", {}, at(2));
  collector.collect(at(3));
  const std::string before = collector.save_state();
  const std::string id = collector.database_id();
  const std::string head = "cplane-metrics-state\t1\ndatabase\t" + id + "\n";
  const std::vector<std::string> malformed = {
      "",
      "garbage\n",
      "cplane-metrics-state\t2\n",
      "cplane-metrics-state\t1",
      head + "seq\t5\n",                                    // no overlap line
      head + "seq\t-1\noverlap\t0\n",
      head + "seq\tfive\noverlap\t0\n",
      head + "seq\t1\noverlap\t0\ncounter\tcplane_nonsense_total\t1\tp\n",
      head + "seq\t1\noverlap\t0\ncounter\tcplane_enqueued_total\t1\n",     // no label
      head + "seq\t1\noverlap\t0\ncounter\tcplane_enqueued_total\t1\tp\tq\n",
      head + "seq\t1\noverlap\t0\ncounter\tcplane_enqueued_total\t1\tp\n"
             "counter\tcplane_enqueued_total\t2\tp\n",
      head + "seq\t1\noverlap\t0\nclaimed\tbad\\qescape\n",
      head + "seq\t1\noverlap\t0\nsomething\telse\n",
      "cplane-metrics-state\t1\nseq\t1\n",                    // no database first
      head + "seq\t1\noverlap\t0\ndatabase\tagain\n",
  };
  for (const auto& text : malformed) {
    INFO(text);
    CHECK_THROWS_MATCHES(collector.load_state(text), InvalidArgument,
                         RefusedAs(InvalidArgument::Reason::invalid_input));
    CHECK(collector.save_state() == before);
  }
  MetricsCollector foreign(other);
  foreign.collect(at(1));
  CHECK_THROWS_MATCHES(collector.load_state(foreign.save_state()), InvalidArgument,
                       RefusedAs(InvalidArgument::Reason::conflict));
  CHECK(collector.save_state() == before);
}

TEST_CASE("metrics: label values and help are escaped as the exposition format says",
          "[metrics]") {
  const std::vector<MetricFamily> families = {
      {"cplane_x", MetricType::gauge, "a \\ help\nwith \"quotes\"",
       {{{{"project", "a\"b\\c\nd"}, {"status", "ready"}}, 2.5}, {{}, 3}}},
      {"cplane_y_total", MetricType::counter, "y", {}},
  };
  CHECK(to_prometheus_text(families) ==
        "# HELP cplane_x a \\\\ help\\nwith \"quotes\"\n"
        "# TYPE cplane_x gauge\n"
        "cplane_x{project=\"a\\\"b\\\\c\\nd\",status=\"ready\"} 2.5\n"
        "cplane_x 3\n"
        "# HELP cplane_y_total y\n"
        "# TYPE cplane_y_total counter\n");

  // Ids allow quotes and backslashes (not newlines): a scrape escapes them.
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "m.db")};
  store.create_project("we\"ird\\one", "W", "open", at(0));
  store.enqueue("we\"ird\\one", "{}", {}, at(1));
  MetricsCollector collector(store);
  const auto text = collector.scrape(at(2));
  CHECK(text.find("cplane_items{project=\"we\\\"ird\\\\one\",status=\"ready\"} 1\n") !=
        std::string::npos);
}

TEST_CASE("metrics: the activity series counts each minute and the longest claim wait",
          "[metrics][activity]") {
  TempDir dir;
  ControlStore store{test_context().fresh_store(dir, "m.db")};
  store.create_project("p", "P", "open", at(0));
  const auto x1 = store.enqueue("p", "{}", {}, at(1));
  const auto x2 = store.enqueue("p", "{}", {}, at(10));
  auto c1 = store.claim("w", {.lease = Seconds{30}, .now = at(70)});
  auto c2 = store.claim("w", {.lease = Seconds{30}, .now = at(75)});
  REQUIRE(c1->item_id == x1);
  REQUIRE(c2->item_id == x2);
  store.finish(x1, c1->fence, Outcome::done, "", at(80));
  store.finish(x2, c2->fence, Outcome::failed, "", at(130));
  const auto x3 = store.enqueue("p", "{}", {}, at(130));
  // x3 is claimed after its first claim's lease lapsed: it waited since then.
  auto c3 = store.claim("w", {.lease = Seconds{5}, .now = at(131)});
  REQUIRE(c3->item_id == x3);
  auto c4 = store.claim("w", {.lease = Seconds{5}, .now = at(170)});
  REQUIRE(c4->item_id == x3);

  const auto minute = [](Micros start, std::int64_t enq, std::int64_t claimed, std::int64_t done,
                         std::int64_t failed, Micros wait) {
    return ActivityMinute{start, enq, claimed, done, failed, wait};
  };
  const Micros m = kMinuteMicros;
  CHECK(recent_activity(store, 3 * m, at(175)) ==
        std::vector<ActivityMinute>{minute(T0 - m, 0, 0, 0, 0, 0),
                                    minute(T0, 2, 0, 0, 0, 0),
                                    minute(T0 + m, 0, 2, 1, 0, 69 * kSecond),
                                    minute(T0 + 2 * m, 1, 2, 0, 1, 34 * kSecond)});
  // Nothing after `now` counts.
  CHECK(recent_activity(store, m, at(100)) ==
        std::vector<ActivityMinute>{minute(T0, 2, 0, 0, 0, 0),
                                    minute(T0 + m, 0, 2, 1, 0, 69 * kSecond)});
  // A window that starts after the items were queued reads their history
  // to learn how long they waited.
  CHECK(recent_activity(store, m, at(125)) ==
        std::vector<ActivityMinute>{minute(T0 + m, 0, 2, 1, 0, 69 * kSecond),
                                    minute(T0 + 2 * m, 0, 0, 0, 0, 0)});
  CHECK_THROWS_MATCHES(recent_activity(store, kSecond, at(100)), InvalidArgument,
                       RefusedAs(InvalidArgument::Reason::invalid_input));
  CHECK_THROWS_MATCHES(recent_activity(store, kMaxActivityWindow + 1, at(100)), InvalidArgument,
                       RefusedAs(InvalidArgument::Reason::invalid_input));
}

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

cplane::test::CliResult metrics_cli(const std::string& db, std::vector<std::string> extra,
                                    Micros now, const std::vector<std::string>& env = {}) {
  std::vector<std::string> args = {"--db", db, "metrics", "--now", std::to_string(now)};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args, env);
}

}  // namespace

TEST_CASE("cplane metrics: a run goes on from its state file and folds only the new events",
          "[cli][metrics]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "m.db");
  const auto state = dir.file("m.state");
  REQUIRE_EXIT(cplane::test::cli_at(db, {"project", "create", "p", "P"}, at(0)), 0);
  for (int i = 0; i < 3; ++i) {
    REQUIRE_EXIT(cplane::test::cli_at(db, {"enqueue", "p", "{}"}, at(1 + i)), 0);
  }
  auto r = metrics_cli(db, {"--state", state, "--from-start"}, at(5));
  REQUIRE_EXIT(r, 0);
  CHECK(has(r.out, "# HELP cplane_items Open items by project and status"));
  CHECK(has(r.out, "# TYPE cplane_items gauge\n"));
  CHECK(has(r.out, "cplane_items{project=\"p\",status=\"ready\"} 3\n"));
  CHECK(has(r.out, "# TYPE cplane_enqueued_total counter\n"));
  CHECK(has(r.out, "cplane_enqueued_total{project=\"p\"} 3\n"));
  CHECK(has(r.out, "cplane_scrape_events_read 4\n"));
  CHECK(has(r.out, "cplane_oldest_available_age_seconds{project=\"p\"} 4\n"));
  REQUIRE(has(read_file(state), "cplane-metrics-state\t1\n"));

  REQUIRE_EXIT(cplane::test::cli_at(db, {"enqueue", "p", "{}"}, at(6)), 0);
  REQUIRE_EXIT(cplane::test::cli_at(db, {"claim", "--owner", "w"}, at(7)), 0);
  r = metrics_cli(db, {"--state", state}, at(8));
  REQUIRE_EXIT(r, 0);
  CHECK(has(r.out, "cplane_scrape_events_read 2\n"));
  CHECK(has(r.out, "cplane_enqueued_total{project=\"p\"} 4\n"));
  CHECK(has(r.out, "cplane_claims_total{project=\"p\",via=\"claim\"} 1\n"));
  CHECK(has(r.out, "cplane_leases{project=\"p\",state=\"live\"} 1\n"));

  // --json: the same samples.
  r = metrics_cli(db, {"--state", state, "--json"}, at(9));
  REQUIRE_EXIT(r, 0);
  CHECK(has(r.out, R"({"name":"cplane_enqueued_total","type":"counter","help":"Items queued.",)"
                   R"("samples":[{"labels":{"project":"p"},"value":4}]})"));
  CHECK(has(r.out, R"({"name":"cplane_scrape_events_read","type":"gauge",)"));
}

TEST_CASE("cplane metrics: the default state file is under the cache folder and named by the "
          "database id",
          "[cli][metrics]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "m.db");
  const std::vector<std::string> env = {"XDG_CACHE_HOME=" + dir.file("cache")};
  REQUIRE_EXIT(cplane::test::cli_at(db, {"project", "create", "p", "P"}, at(0)), 0);
  auto r = metrics_cli(db, {}, at(1), env);
  REQUIRE_EXIT(r, 0);
  CHECK(has(r.out, "cplane_scrape_events_read 0\n"));  // counters start at the end
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("cache/cplane/metrics"))) {
    files.push_back(e.path().filename().string());
  }
  REQUIRE(files.size() == 1);
  CHECK(files[0].ends_with(".state"));
  REQUIRE_EXIT(cplane::test::cli_at(db, {"enqueue", "p", "{}"}, at(2)), 0);
  r = metrics_cli(db, {}, at(3), env);
  REQUIRE_EXIT(r, 0);
  CHECK(has(r.out, "cplane_scrape_events_read 1\n"));
  CHECK(has(r.out, "cplane_enqueued_total{project=\"p\"} 1\n"));
}

TEST_CASE("cplane metrics: a malformed state file or one from another database exits 2 and "
          "writes nothing",
          "[cli][metrics]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "m.db");
  const auto other = test_context().fresh_store(dir, "other.db");
  REQUIRE_EXIT(cplane::test::cli_at(db, {"project", "create", "p", "P"}, at(0)), 0);
  REQUIRE_EXIT(cplane::test::cli_at(other, {"project", "create", "p", "P"}, at(0)), 0);
  const auto state = dir.file("bad.state");
  for (const std::string text : {"not a state\n", "cplane-metrics-state\t1\ndatabase\tx\nseq\tq\n"}) {
    { std::ofstream(state, std::ios::binary) << text; }
    const auto r = metrics_cli(db, {"--state", state}, at(1));
    CHECK_EXIT(r, 2);
    CHECK(has(r.err, "the metrics state is malformed at line"));
    CHECK(r.out.empty());
    CHECK(read_file(state) == text);
  }
  const auto theirs = dir.file("theirs.state");
  REQUIRE_EXIT(metrics_cli(other, {"--state", theirs}, at(1)), 0);
  const std::string saved = read_file(theirs);
  auto r = metrics_cli(db, {"--state", theirs, "--json"}, at(2));
  CHECK_EXIT(r, 2);
  CHECK(has(r.err, R"("kind":"invalid_argument","reason":"conflict")"));
  CHECK(has(r.err, "was saved from database"));
  CHECK(read_file(theirs) == saved);
  // A missing store is not created by a read.
  r = metrics_cli(dir.file("missing.db"), {"--state", dir.file("x.state")}, at(2));
  CHECK(r.exit_code != 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("missing.db")));
  CHECK_FALSE(std::filesystem::exists(dir.file("x.state")));
}

TEST_CASE("cplane metrics: an empty file as --db is refused and stays empty", "[cli][metrics][sqlite]") {
  TempDir dir;
  const auto db = dir.file("empty.db");
  { std::ofstream touch(db); }
  const auto r = metrics_cli(db, {"--state", dir.file("e.state")}, at(1));
  CHECK(r.exit_code != 0);
  CHECK_FALSE(r.err.empty());
  CHECK(r.out.empty());
  CHECK(std::filesystem::file_size(db) == 0);
  CHECK_FALSE(std::filesystem::exists(dir.file("e.state")));
}

TEST_CASE("metrics: the gauges are reads of the partial indexes, never a scan of the items",
          "[metrics][sqlite]") {
  TempDir dir;
  const auto db = dir.file("m.db");
  { ControlStore store{db}; }
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  std::vector<std::string> plans;
  for (const auto& query : storage::sqlite::SqliteBackend::gauge_queries()) {
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(handle, ("EXPLAIN QUERY PLAN " + query).c_str(), -1, &stmt,
                               nullptr) == SQLITE_OK);
    std::string plan;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      plan += (plan.empty() ? "" : " | ") +
              std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3)));
    }
    sqlite3_finalize(stmt);
    plans.push_back(plan);
  }
  sqlite3_close(handle);
  REQUIRE(plans.size() == 5);
  CHECK(plans[0] == "SEARCH items USING COVERING INDEX items_listing (project_id=? AND status=?)");
  CHECK(plans[1] == "SEARCH items USING INDEX items_due (project_id=? AND run_at<?)");
  CHECK(plans[2] == "SEARCH items USING INDEX items_lease (project_id=? AND lease_expires_at<?)");
  CHECK(plans[3] == "SEARCH items USING INDEX items_listing (project_id=? AND status=?)");
  CHECK(plans[4] == "SEARCH items USING COVERING INDEX items_listing_all (status=?)");
}
