#include "probe/fair_share.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/fleet.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::fair {
namespace {

// An item's first claim in the log: its seq and its time.
struct FirstClaim {
  Seq seq = 0;
  Micros at = 0;
};

std::optional<FirstClaim> first_claim(ControlStore& store, const std::string& id) {
  for (const auto& e : store.events(id)) {
    if (std::holds_alternative<ItemClaimed>(e.event.body)) return FirstClaim{e.seq, e.event.at};
  }
  return std::nullopt;
}

}  // namespace

ScenarioResult run(const RunConfig& run) {
  ScenarioResult out;
  const auto ids_a = drain::setup(run, run.items);
  const std::string project_b = run.project + "-b";
  ControlStore store{run.store};
  store.create_project(project_b, "cplane probe " + run.scenario + " (B)");
  store.grant(project_b, run.project);
  const auto ids_b = drain::enqueue_more(store, project_b, 0, kSmallItems);
  const std::uint32_t weight_a = store.project(run.project).weight;
  const std::uint32_t weight_b = store.project(project_b).weight;

  Workers workers(run);
  {
    fleet::StartGate gate;
    for (int w = 0; w < run.workers; ++w) workers.spawn("drain", w, &gate, 30);
    fleet::sleep_for(0.2);  // let every worker open its connection
    gate.release();
  }
  const double t0 = fleet::seconds_now();
  int failures = 0;
  const bool finished = workers.wait_all(run.deadline, failures);
  const double elapsed = fleet::seconds_now() - t0;

  // B's claims, then A's in queue order until well past B's last.
  std::vector<FirstClaim> claims_b;
  std::int64_t b_unclaimed = 0;
  for (const auto& id : ids_b) {
    if (auto c = first_claim(store, id)) {
      claims_b.push_back(*c);
    } else {
      ++b_unclaimed;
    }
  }
  std::sort(claims_b.begin(), claims_b.end(),
            [](const FirstClaim& x, const FirstClaim& y) { return x.seq < y.seq; });
  const Seq b_last = claims_b.empty() ? 0 : claims_b.back().seq;
  std::vector<Seq> seqs_a;
  std::optional<Micros> drain_start;
  if (!claims_b.empty()) drain_start = claims_b.front().at;
  std::int64_t a_out_of_order = 0, a_read = 0, past = 0;
  // On SQLite writers take turns, so A's claims come in queue order. On
  // PostgreSQL a claim takes the oldest item no other claim holds and
  // claims commit in any order (docs/postgresql.md, "FIFO under SKIP
  // LOCKED"): A's order is reported there, not checked, and A is read
  // further past B's last so that a later item claimed early is counted.
  const bool serial_writers = run.store.rfind("postgres", 0) != 0;
  const std::int64_t margin = (serial_writers ? 1 : 8) * run.workers + 10;
  for (const auto& id : ids_a) {
    const auto c = first_claim(store, id);
    ++a_read;
    if (!c) continue;
    if (!seqs_a.empty() && c->seq < seqs_a.back()) ++a_out_of_order;
    seqs_a.push_back(c->seq);
    if (!drain_start || c->at < *drain_start) drain_start = c->at;
    past = c->seq > b_last ? past + 1 : 0;
    if (past >= margin) break;
  }
  std::vector<Seq> sorted_a = seqs_a;
  std::sort(sorted_a.begin(), sorted_a.end());
  std::vector<double> wait_claims, wait_seconds;
  for (std::size_t j = 0; j < claims_b.size(); ++j) {
    const auto a_before = std::lower_bound(sorted_a.begin(), sorted_a.end(), claims_b[j].seq) -
                          sorted_a.begin();
    wait_claims.push_back(static_cast<double>(j) + static_cast<double>(a_before));
    wait_seconds.push_back((claims_b[j].at - drain_start.value_or(claims_b[j].at)) / 1e6);
  }
  const double share = static_cast<double>(weight_a + weight_b) / weight_b;
  const auto bound = static_cast<std::int64_t>(std::ceil(kSmallItems * share * kSlack)) +
                     run.workers;
  const double last_wait = wait_claims.empty() ? 0 : wait_claims.back();

  out.count("workers", run.workers);
  out.count("items_a", run.items);
  out.count("items_b", kSmallItems);
  out.count("weight_a", weight_a);
  out.count("weight_b", weight_b);
  out.fixed("elapsed_s", elapsed);
  out.fixed("items_per_s", (run.items + kSmallItems) / elapsed, 0);
  out.count("worker_failures", failures);
  out.count("b_wait_p50_claims", static_cast<std::int64_t>(fleet::percentile(wait_claims, 50)));
  out.count("b_wait_p99_claims", static_cast<std::int64_t>(fleet::percentile(wait_claims, 99)));
  out.count("b_last_start_claims", static_cast<std::int64_t>(last_wait));
  out.count("b_last_start_bound_claims", bound);
  out.fixed("b_wait_p50_s", fleet::percentile(wait_seconds, 50));
  out.fixed("b_wait_p99_s", fleet::percentile(wait_seconds, 99));
  out.count("a_claims_read", a_read);
  out.count("a_out_of_queue_order", a_out_of_order);
  out.check(finished && failures == 0, "the drain finished before --timeout and no worker failed");
  out.check(b_unclaimed == 0, "every item of B was claimed");
  out.check(static_cast<std::int64_t>(last_wait) <= bound,
            fmt::format("B's last item started within {} claims of the drain's first (its "
                        "share {}:{}, with a tenth of slack, plus the workers)",
                        bound, weight_b, weight_a));
  if (serial_writers) out.check(a_out_of_order == 0, "A's items were claimed in queue order");
  check_ledger(out, run.store, [&] {
    std::vector<std::string> all = ids_a;
    all.insert(all.end(), ids_b.begin(), ids_b.end());
    return all;
  }());
  return out;
}

}  // namespace cplane::probe::fair
