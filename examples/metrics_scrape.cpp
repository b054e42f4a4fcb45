// The scrape of docs/metrics.md, as a program: a collector that goes on
// from the state the previous process saved, so that each run folds only
// the events appended since; and the per-minute activity the console
// draws. The function between the include and main is the block in the
// docs (ctest checks they stay equal). Exits non-zero if anything is off.
//   usage: cplane-example-metrics-scrape DB_PATH
#include <cstdio>
#include <iostream>
#include <string>

#include <cplane/cplane.hpp>

// One scrape: on from `state` (empty the first time), which it replaces
// with what the next process needs. Returns the exposition text.
std::string scrape(cplane::ControlStore& store, std::string& state) {
  cplane::MetricsCollector collector(store);  // does not own the store
  if (!state.empty()) collector.load_state(state);  // InvalidArgument if malformed
  std::string text = collector.scrape();      // the Prometheus text format
  state = collector.save_state();
  return text;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: cplane-example-metrics-scrape DB_PATH\n";
    return 2;
  }
  std::remove(argv[1]);
  cplane::ControlStore store{argv[1]};
  store.create_project("alpha", "Project Alpha");
  std::string state;
  scrape(store, state);  // the counters start here, at zero
  store.enqueue("alpha", R"({"task": "one"})");
  store.enqueue("alpha", R"({"task": "two"})");
  const auto claim = store.claim("worker-1");
  store.finish(claim->item_id, claim->fence, cplane::Outcome::done);
  const std::string text = scrape(store, state);
  for (const char* line : {"cplane_enqueued_total{project=\"alpha\"} 2\n",
                           "cplane_finishes_total{project=\"alpha\",outcome=\"done\"} 1\n",
                           "cplane_items{project=\"alpha\",status=\"ready\"} 1\n",
                           "cplane_scrape_events_read 4\n"}) {
    if (text.find(line) == std::string::npos) {
      std::cerr << "missing: " << line << text;
      return 1;
    }
  }
  const auto minutes = cplane::recent_activity(store, 60 * cplane::kMinuteMicros);
  std::int64_t claimed = 0;
  for (const auto& m : minutes) claimed += m.claimed;
  if (minutes.size() != 61) return 1;  // an hour of whole minutes, the current one included
  if (claimed != 1) return 1;
  std::cout << "scraped twice; the second read 4 events\n";
  return 0;
}
