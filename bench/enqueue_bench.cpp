#include "bench/enqueue_bench.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

using fleet::seconds_now;

void enqueue_scenario(const Options& o, const Emit& emit) {
  ScratchDir dir;
  // A fresh SQLite file, or the store --db names (PostgreSQL: an empty
  // schema), where the project is made when there is none.
  const auto db = o.db ? *o.db : dir.file("bench.db");
  ControlStore store{db, {.durability = o.durability}};
  if (store.visible_projects().empty()) store.create_project("bench", "Benchmark");
  const std::string payload = R"({"task":"benchmark item"})";
  const double t0 = seconds_now();
  if (o.batch <= 1) {
    for (std::int64_t i = 0; i < o.items; ++i) store.enqueue("bench", payload);
  } else {
    std::vector<std::string> payloads;
    for (std::int64_t done = 0; done < o.items;) {
      const auto n = std::min<std::int64_t>(o.batch, o.items - done);
      payloads.assign(static_cast<std::size_t>(n), payload);
      store.enqueue_batch("bench", payloads);
      done += n;
    }
  }
  const double dt = seconds_now() - t0;
  emit(JsonObject()
           .str("scenario", "enqueue")
           .str("store", store_kind(db))
           .num("batch", o.batch)
           .str("durability", cplane::to_string(o.durability))
           .num("items", o.items)
           .fixed("seconds", dt, 3)
           .fixed("items_per_s", o.items / dt, 0)
           .done());
}

void single_scenario(const Options& o, const Emit& emit) {
  ScratchDir dir;
  const auto db = dir.file("bench.db");
  ControlStore store{db, {.durability = o.durability}};
  store.create_project("bench", "Benchmark");
  const double t0 = seconds_now();
  for (std::int64_t i = 0; i < o.items; ++i) store.enqueue("bench", R"({"task":"benchmark item"})");
  const double t1 = seconds_now();
  auto r = drain(store, "worker-1", o.mode, o.claim_batch);
  const double t2 = seconds_now();
  auto problems = verify_ledger(store);
  const double t3 = seconds_now();
  auto report = rebuild(store);
  const double t4 = seconds_now();
  if (r.finishes != o.items || !problems.empty() || !report.changes.empty()) {
    throw std::runtime_error("single: the run did not come out exact");
  }
  emit(JsonObject()
           .str("scenario", "single")
           .str("mode", to_string(o.mode))
           .str("durability", cplane::to_string(o.durability))
           .num("items", o.items)
           .fixed("enqueue_s", t1 - t0, 3)
           .fixed("drain_s", t2 - t1, 3)
           .fixed("total_s", t2 - t0, 3)
           .fixed("drain_items_per_s", o.items / (t2 - t1), 0)
           .fixed("verify_s", t3 - t2, 3)
           .fixed("rebuild_s", t4 - t3, 3)
           .done());
}

}  // namespace cplane::bench
