// cplane-bench --scenario metrics (bench/metrics_bench.hpp).
#include "bench/metrics_bench.hpp"

#include <chrono>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "json/json_writer.hpp"

namespace cplane::bench {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

constexpr std::size_t kBatch = 1000;

}  // namespace

std::string bench_metrics(const std::string& url, std::int64_t events) {
  ControlStore store{url, {.durability = Durability::normal}};
  store.create_project("p", "metrics bench");
  const std::vector<std::string> payloads(kBatch, "{}");
  // Three events per item (queued, claimed, done), a thousand items a batch.
  const auto fill_start = Clock::now();
  const std::int64_t rounds = std::max<std::int64_t>(1, events / (3 * kBatch));
  for (std::int64_t r = 0; r < rounds; ++r) {
    store.enqueue_batch("p", payloads);
    const auto claimed = store.claim_batch("bench", kBatch);
    std::vector<ControlStore::Report> reports;
    reports.reserve(claimed.size());
    for (const auto& c : claimed) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
    store.finish_batch(reports);
  }
  const double fill_s = since(fill_start);
  const Seq end = store.log_end();

  // The baseline: every event, read once, as a scraper without state would.
  auto start = Clock::now();
  std::int64_t passed = 0;
  for (Seq after = 0;;) {
    const auto page = store.read_log(after, 5000);
    passed += static_cast<std::int64_t>(page.events.size());
    if (page.events.empty()) break;
    after = page.next;
  }
  const double full_pass_s = since(start);

  start = Clock::now();
  MetricsCollector collector(store);
  collector.scrape();
  const double first_s = since(start);
  if (collector.events_read() != 0) throw std::runtime_error("the first scrape read events");

  start = Clock::now();
  MetricsCollector from_start(store, {.from_start = true});
  from_start.scrape();
  const double from_start_s = since(start);

  store.enqueue_batch("p", payloads);  // 1,000 more events
  start = Clock::now();
  const std::string text = collector.scrape();
  const double incremental_s = since(start);
  if (collector.events_read() != static_cast<std::int64_t>(kBatch)) {
    throw std::runtime_error(fmt::format("the incremental scrape read {} events, not {}",
                                         collector.events_read(), kBatch));
  }
  if (text.find("cplane_enqueued_total{project=\"p\"} 1000\n") == std::string::npos) {
    throw std::runtime_error("the incremental scrape did not count the new items");
  }
  return JsonObject()
      .str("scenario", "metrics")
      .num("last_seq", end)
      .fixed("fill_s", fill_s, 2)
      .num("full_pass_events", passed)
      .fixed("full_pass_s", full_pass_s, 4)
      .fixed("first_scrape_s", first_s, 4)
      .fixed("from_start_scrape_s", from_start_s, 4)
      .num("incremental_events", collector.events_read())
      .fixed("incremental_scrape_s", incremental_s, 4)
      .fixed("full_pass_over_incremental", full_pass_s / incremental_s, 1)
      .done();
}

}  // namespace cplane::bench
