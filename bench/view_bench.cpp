#include "bench/view_bench.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

namespace {

constexpr Micros kStart = 1'700'000'000'000'000;

void fill(const std::string& db, std::int64_t items) {
  ControlStore store{db, {.durability = Durability::normal}};
  store.create_project("bench", "Benchmark", "open", kStart);
  store.create_project("other", "Other", "open", kStart);
  std::vector<std::string> payloads;
  for (std::int64_t done = 0; done < items;) {
    const auto n = std::min<std::int64_t>(1000, items - done);
    payloads.assign(static_cast<std::size_t>(n), R"({"task":"benchmark item"})");
    store.enqueue_batch(done % 2000 == 0 ? "bench" : "other", payloads, std::nullopt,
                        kStart + done);
    done += n;
  }
  // A few hundred claimed, some of them finished: every status has rows.
  for (int i = 0; i < 300; ++i) {
    const auto c = store.claim("bench-worker", ClaimOptions{.now = kStart + items + i});
    if (!c) throw std::runtime_error("list: a claim found nothing");
    if (i % 2 == 0) {
      store.finish(c->item_id, c->fence, i % 4 == 0 ? Outcome::done : Outcome::failed,
                   ControlStore::FinishOptions{.now = kStart + items + i});
    }
  }
}

struct Listing {
  const char* name;
  ControlStore::ItemQuery query;
  int depth;  // pages walked behind the cursor before the timed one
};

// Median microseconds of one page of `l`, over `rounds` reads.
double page_us(ControlStore& store, const Listing& l, int rounds) {
  ControlStore::ItemQuery q = l.query;
  for (int i = 0; i < l.depth; ++i) {
    const auto page = store.list_items(q);
    if (!page.next) break;
    q.after = page.next;
    q.after_seq = page.next_seq;
  }
  std::vector<double> us;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = fleet::seconds_now();
    const auto page = store.list_items(q);
    us.push_back(1e6 * (fleet::seconds_now() - t0));
    if (page.items.empty()) throw std::runtime_error(fmt::format("list: {} is empty", l.name));
  }
  return fleet::percentile(us, 50);
}

}  // namespace

void list_scenario(const std::string& dir, std::int64_t deep, std::int64_t shallow,
                   Durability durability, const std::function<void(const std::string&)>& emit) {
  const std::string deep_db = dir + "/deep.db", shallow_db = dir + "/shallow.db";
  const double t0 = fleet::seconds_now();
  fill(deep_db, deep);
  const double fill_s = fleet::seconds_now() - t0;
  fill(shallow_db, shallow);
  ControlStore big{deep_db, {.durability = durability}};
  ControlStore small{shallow_db, {.durability = durability}};
  using Q = ControlStore::ItemQuery;
  std::vector<Listing> listings;
  listings.push_back({"newest", Q{}, 0});
  {
    Q q;
    q.order = Q::Order::oldest;
    listings.push_back({"oldest", q, 0});
  }
  {
    Q q;
    q.statuses = {ItemStatus::ready};
    listings.push_back({"ready", q, 0});
  }
  {
    Q q;
    q.project = "bench";
    q.statuses = {ItemStatus::done, ItemStatus::failed};
    listings.push_back({"project-finished", q, 0});
  }
  listings.push_back({"newest-page-20", Q{}, 19});
  constexpr int kRounds = 41;
  std::vector<double> ratios;
  for (const auto& l : listings) {
    // Interleaved: small, big, small, big (a warm cache for both).
    double s = 0, b = 0;
    for (int pass = 0; pass < 2; ++pass) {
      s = page_us(small, l, kRounds);
      b = page_us(big, l, kRounds);
    }
    ratios.push_back(b / s);
    emit(JsonObject()
             .str("scenario", "list")
             .str("listing", l.name)
             .num("deep_items", deep)
             .num("shallow_items", shallow)
             .num("limit", static_cast<std::int64_t>(l.query.limit))
             .fixed("deep_page_us", b, 1)
             .fixed("shallow_page_us", s, 1)
             .fixed("deep_over_shallow", b / s, 2)
             .done());
  }
  // The baseline a listing without its index would pay: one pass over
  // every row (what `stats` does), on the deep store.
  std::vector<double> pass_us;
  for (int r = 0; r < 3; ++r) {
    const double p0 = fleet::seconds_now();
    big.status_counts();
    pass_us.push_back(1e6 * (fleet::seconds_now() - p0));
  }
  emit(JsonObject()
           .str("scenario", "list")
           .str("listing", "summary")
           .num("deep_items", deep)
           .fixed("fill_s", fill_s, 1)
           .fixed("max_deep_over_shallow", *std::max_element(ratios.begin(), ratios.end()), 2)
           .fixed("full_pass_us", fleet::percentile(pass_us, 50), 1)
           .done());
}

}  // namespace cplane::bench
