#include "bench/flow_bench.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "bench/fleet_run.hpp"
#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

using fleet::seconds_now;

// Concurrency keys (issue 23), two measurements in one run.
// (a) Throughput: --workers processes drain --items items spread over
//     kKeys keys limited to kKeyLimit live leases each (round-robin, so
//     keys rarely fill: the cost of a keyed claim, its live count and
//     the key's limit row), against the same drain of plain items, in
//     kRounds interleaved rounds on fresh files, both filled by one
//     enqueue per item. The ratio is the median of the rounds' keyed /
//     plain items/s.
// (b) A full key ahead: one file holds --max-depth items of one key
//     limited to 1, queued first, the first of them held by a day-long
//     lease, then kProbe plain items behind them; the other file only the
//     kProbe plain items. One process claims + finishes them all, kSlice
//     from one file and kSlice from the other in turn. Every claim of the
//     deep file must pass over the full key to a plain item (exit 1
//     otherwise): one seek per key group, never a walk through the
//     blocked items. The ratio is deep / plain of the p50s.
void keys_scenario(const Options& o, const Emit& emit) {
  constexpr int kRounds = 3, kKeys = 10;
  constexpr std::uint32_t kKeyLimit = 4;
  constexpr std::int64_t kProbe = 2'000, kSlice = 100;
  const std::string payload = R"({"task":"benchmark item"})";
  const std::int64_t blocked = o.max_given ? o.max : 100'000;

  // (a)
  std::vector<double> plain_rate, keyed_rate, ratio;
  for (int round = 0; round < kRounds; ++round) {
    for (const bool keyed : {round % 2 == 1, round % 2 == 0}) {
      ScratchDir dir;
      const auto db = dir.file("bench.db");
      {
        // Both files filled alike, one enqueue per item (there is no
        // batch with a key), so that only the keys differ.
        ControlStore store{db, {.durability = Durability::normal}};
        store.create_project("bench", "Benchmark");
        for (int k = 0; keyed && k < kKeys; ++k) {
          store.set_limit(fmt::format("key-{}", k), {.concurrency = kKeyLimit});
        }
        for (std::int64_t i = 0; i < o.items; ++i) {
          store.enqueue("bench", payload,
                        ControlStore::EnqueueOptions{
                            .concurrency_key = keyed ? fmt::format("key-{}", i % kKeys) : ""});
        }
      }
      const auto r = drain_fleet(o, db, o.workers, Mode::plain, o.durability, o.lock == "flock",
                                 dir.file("worker"));
      if (r.items != o.items) {
        throw std::runtime_error(fmt::format("keys: the drain finished {} of {} items",
                                             r.items, o.items));
      }
      ControlStore check{db};
      if (keyed && !verify_ledger(check).empty()) {
        throw std::runtime_error("keys: verify found problems after the keyed drain");
      }
      (keyed ? keyed_rate : plain_rate).push_back(r.items / r.seconds);
      JsonObject out;
      out.str("scenario", "keys")
          .str("configuration", keyed ? "keyed" : "plain")
          .num("round", round + 1)
          .num("workers", o.workers)
          .num("keys", keyed ? kKeys : 0)
          .num("limit", keyed ? kKeyLimit : 0)
          .str("durability", cplane::to_string(o.durability))
          .boolean("combine", o.combine);
      drain_figures(out, r);
      emit(out.done());
    }
    ratio.push_back(keyed_rate.back() / plain_rate.back());
  }

  // (b)
  ScratchDir dir;
  const auto deep_db = dir.file("blocked.db"), plain_db = dir.file("plain.db");
  const double f0 = seconds_now();
  {
    ControlStore build{deep_db, {.durability = Durability::normal}};
    build.create_project("bench", "Benchmark");
    build.set_limit("full", {.concurrency = 1});
    for (std::int64_t i = 0; i < blocked; ++i) {
      build.enqueue("bench", payload, ControlStore::EnqueueOptions{.concurrency_key = "full"});
    }
    if (!build.claim("holder", ClaimOptions{.lease = Seconds{86'400}})) {
      throw std::runtime_error("keys: the holder found nothing to claim");
    }
  }
  const double fill_s = seconds_now() - f0;
  ControlStore deep{deep_db, {.durability = o.durability}};
  ControlStore plain{plain_db, {.durability = o.durability}};
  plain.create_project("bench", "Benchmark");
  struct Queue {
    ControlStore* store;
    std::set<std::string> queued;
    std::vector<double> claim, claim_finish;
  };
  Queue deep_q{&deep, {}, {}, {}}, plain_q{&plain, {}, {}, {}};
  for (Queue* q : {&deep_q, &plain_q}) {
    std::vector<std::string> payloads;
    for (std::int64_t done = 0; done < kProbe;) {
      const auto k = std::min<std::int64_t>(1'000, kProbe - done);
      payloads.assign(static_cast<std::size_t>(k), payload);
      for (auto& id : q->store->enqueue_batch("bench", payloads)) q->queued.insert(id);
      done += k;
    }
  }
  auto drain_slice = [&](Queue& q) {
    for (std::int64_t i = 0; i < kSlice && !q.queued.empty(); ++i) {
      const double t0 = seconds_now();
      const auto claimed = q.store->claim("bench-worker");
      const double t1 = seconds_now();
      if (!claimed || q.queued.erase(claimed->item_id) != 1) {
        throw std::runtime_error(fmt::format(
            "keys: a claim took {} instead of a plain item ({} left)",
            claimed ? claimed->item_id : "nothing", q.queued.size()));
      }
      q.store->finish(claimed->item_id, claimed->fence, Outcome::done);
      const double t2 = seconds_now();
      q.claim.push_back(t1 - t0);
      q.claim_finish.push_back(t2 - t0);
    }
  };
  while (!deep_q.queued.empty() || !plain_q.queued.empty()) {
    drain_slice(plain_q);
    drain_slice(deep_q);
  }
  if (deep.claim("bench-worker")) {
    throw std::runtime_error("keys: a claim took an item of the full key");
  }
  auto us = [](const std::vector<double>& samples, double p) {
    return 1e6 * fleet::percentile(samples, p);
  };
  for (const Queue* q : {&plain_q, &deep_q}) {
    emit(JsonObject()
             .str("scenario", "keys-blocked")
             .str("configuration", q == &deep_q ? "blocked" : "plain")
             .num("blocked", q == &deep_q ? blocked : 0)
             .num("claims", kProbe)
             .str("durability", cplane::to_string(o.durability))
             .fixed("claim_p50_us", us(q->claim, 50), 1)
             .fixed("claim_p99_us", us(q->claim, 99), 1)
             .fixed("claim_finish_p50_us", us(q->claim_finish, 50), 1)
             .fixed("claim_finish_p99_us", us(q->claim_finish, 99), 1)
             .done());
  }
  auto median = [](std::vector<double> v) { return fleet::percentile(std::move(v), 50); };
  auto list = [](const std::vector<double>& v) {
    std::string out = "[";
    for (std::size_t i = 0; i < v.size(); ++i) out += fmt::format("{}{:.2f}", i ? "," : "", v[i]);
    return out + "]";
  };
  const double keyed_over_plain = median(ratio);
  const double blocked_over_plain =
      us(deep_q.claim_finish, 50) / us(plain_q.claim_finish, 50);
  emit(JsonObject()
           .str("scenario", "keys-ratio")
           .num("workers", o.workers)
           .num("items", o.items)
           .fixed("plain_items_per_s", median(plain_rate), 0)
           .fixed("keyed_items_per_s", median(keyed_rate), 0)
           .fixed("keyed_over_plain", keyed_over_plain, 2)
           .raw("rounds_keyed_over_plain", list(ratio))
           .num("blocked", blocked)
           .fixed("blocked_fill_s", fill_s, 1)
           .fixed("blocked_over_plain_claim_p50", us(deep_q.claim, 50) / us(plain_q.claim, 50), 2)
           .fixed("blocked_over_plain_claim_finish_p50", blocked_over_plain, 2)
           .boolean("keyed_at_least_0_8x", keyed_over_plain >= 0.8)
           .boolean("blocked_within_2x", blocked_over_plain <= 2.0)
           .done());
}

// Fairness across projects (issue 23): project A gets --max-depth items
// (default 100,000), then project B --items (default 100), and
// --workers processes drain both, once with ClaimOptions::fair (the
// default: weighted round-robin, weights 1:1) and once without (the item
// available earliest of any project), each on a fresh file, in one run.
// Every worker notes the moment each claim answered (steady clock, one
// host) and whose item it was; B's wait for an item, in claims, is how
// many claims answered before it (of any worker), and in seconds, since
// the fleet's first claim. Reports B's p50, p99 and last of each, and
// the ratios without / with fairness.
void fair_scenario(const Options& o, const Emit& emit) {
  const std::int64_t depth = o.max_given ? o.max : 100'000;
  const std::int64_t small = o.items_given ? o.items : 100;
  struct Figures {
    double p50 = 0, p99 = 0, last = 0, p50_s = 0, p99_s = 0, items_per_s = 0;
  };
  std::vector<std::pair<bool, Figures>> results;
  for (const bool fair_on : {true, false}) {
    ScratchDir dir;
    const auto db = dir.file("bench.db");
    std::set<std::string> ids_b;
    {
      ControlStore store{db, {.durability = Durability::normal}};
      store.create_project("big", "A: many items");
      store.create_project("small", "B: a few, queued behind");
      std::vector<std::string> payloads;
      for (const auto& [project, n] : {std::pair{"big", depth}, {"small", small}}) {
        for (std::int64_t done = 0; done < n;) {
          const auto k = std::min<std::int64_t>(1'000, n - done);
          payloads.assign(static_cast<std::size_t>(k), R"({"task":"benchmark item"})");
          for (auto& id : store.enqueue_batch(project, payloads)) {
            if (std::string_view(project) == "small") ids_b.insert(id);
          }
          done += k;
        }
      }
    }
    const std::string claims_prefix = dir.file("claims");
    FleetRun run = run_fleet(o.workers, dir.file("worker"), [&](int w) {
      auto store = std::make_shared<ControlStore>(
          db, StoreOptions{.durability = o.durability,
                           .sqlite = {.writer_flock = o.lock == "flock",
                                      .combine = o.combine,
                                      .coalesce_wal_writes = o.coalesce}});
      const std::string path = fmt::format("{}.{}", claims_prefix, w);
      return std::function<fleet::WorkerRecord()>([store, w, fair_on, path] {
        fleet::WorkerRecord r;
        std::ofstream claims(path);
        const std::string owner = fmt::format("worker-{}", w);
        while (true) {
          const double t0 = seconds_now();
          const auto c = store->claim(owner, ClaimOptions{.fair = fair_on});
          const double t1 = seconds_now();
          r.claim_latency.push_back(t1 - t0);
          r.longest_wait = std::max(r.longest_wait, t1 - t0);
          if (!c) break;
          ++r.claims;
          claims << fmt::format("{:.6f} {}\n", t1, c->project_id == "small" ? 1 : 0);
          store->finish(c->item_id, c->fence, Outcome::done);
          r.longest_wait = std::max(r.longest_wait, seconds_now() - t1);
          ++r.finishes;
        }
        return r;
      });
    });
    if (run.finishes != depth + small) {
      throw std::runtime_error(
          fmt::format("fair: the drain finished {} of {} items", run.finishes, depth + small));
    }
    std::vector<std::pair<double, int>> answered;  // (moment, is B)
    for (int w = 0; w < o.workers; ++w) {
      std::ifstream in(fmt::format("{}.{}", claims_prefix, w));
      double t = 0;
      int b = 0;
      while (in >> t >> b) answered.push_back({t, b});
    }
    std::sort(answered.begin(), answered.end());
    std::vector<double> wait, wait_s;
    for (std::size_t i = 0; i < answered.size(); ++i) {
      if (answered[i].second == 0) continue;
      wait.push_back(static_cast<double>(i));
      wait_s.push_back(answered[i].first - answered.front().first);
    }
    if (static_cast<std::int64_t>(wait.size()) != small) {
      throw std::runtime_error(fmt::format("fair: {} of B's {} claims were noted", wait.size(),
                                           small));
    }
    const Figures f{fleet::percentile(wait, 50), fleet::percentile(wait, 99),
                    fleet::percentile(wait, 100), fleet::percentile(wait_s, 50),
                    fleet::percentile(wait_s, 99), run.finishes / run.seconds};
    results.push_back({fair_on, f});
    DrainResult r{run.seconds, run.finishes, run.records};
    JsonObject out;
    out.str("scenario", "fair")
        .boolean("fair_share", fair_on)
        .num("workers", o.workers)
        .num("a_items", depth)
        .num("b_items", small)
        .str("durability", cplane::to_string(o.durability))
        .fixed("b_wait_p50_claims", f.p50, 0)
        .fixed("b_wait_p99_claims", f.p99, 0)
        .fixed("b_last_claims", f.last, 0)
        .fixed("b_wait_p50_s", f.p50_s, 3)
        .fixed("b_wait_p99_s", f.p99_s, 3);
    drain_figures(out, r);
    emit(out.done());
  }
  const Figures& on = results[0].second;
  const Figures& off = results[1].second;
  emit(JsonObject()
           .str("scenario", "fair-ratio")
           .num("a_items", depth)
           .num("b_items", small)
           .fixed("b_wait_p99_claims_fair", on.p99, 0)
           .fixed("b_wait_p99_claims_unfair", off.p99, 0)
           .fixed("unfair_over_fair_p99_claims", off.p99 / on.p99, 1)
           .fixed("b_wait_p99_s_fair", on.p99_s, 3)
           .fixed("b_wait_p99_s_unfair", off.p99_s, 3)
           .fixed("unfair_over_fair_p99_s", off.p99_s / on.p99_s, 1)
           .fixed("fair_over_unfair_items_per_s", on.items_per_s / off.items_per_s, 2)
           .done());
}

}  // namespace cplane::bench
