// cplane-bench --scenario metrics: what a scrape costs at a large log. It
// fills a store with about `events` events (batches of queued, claimed and
// done), then times, in one run: a full pass over the log (read_log from
// the first event to the last, the cost of a scraper that re-reads it), a
// collector's first scrape (counters from zero at the end: index reads
// only), a from-start collector's first scrape (the full pass and the
// fold), and an incremental scrape after 1,000 more events.
#pragma once

#include <cstdint>
#include <string>

namespace cplane::bench {

// One JSON object (scenario "metrics") with the times in seconds, the
// events each scrape read and the ratio of the full pass to the
// incremental scrape. `url` names a new store (SQLite file or PostgreSQL).
// Throws std::runtime_error when a scrape reads other than it should.
std::string bench_metrics(const std::string& url, std::int64_t events);

}  // namespace cplane::bench
