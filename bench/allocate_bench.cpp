#include "bench/allocate_bench.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

using fleet::seconds_now;

// One agent's round trip on one store, item after item: assign_and_lease,
// then record_mutation (the gate that records), then the read-only gate;
// the item then finishes. Each item is first taken the plain way, as the
// baseline with as many write transactions: claim, heartbeat, release.
// Interleaving the two keeps the store's size and the disk's state alike
// for both.
void assign_gate_scenario(const Options& o, const Emit& emit) {
  const std::int64_t items = o.items_given ? o.items : 2'000;
  ScratchDir dir;
  ControlStore store{dir.file("bench.db"), {.durability = o.durability}};
  store.create_project("bench", "Benchmark");
  std::vector<std::string> ids;
  for (std::int64_t i = 0; i < items; ++i) {
    ids.push_back(store.enqueue("bench", R"({"task":"benchmark item"})",
                                ControlStore::EnqueueOptions{.kind = WorkKind::pr,
                                                             .ref = fmt::format("bench/pr#{}", i),
                                                             .head = "head-1",
                                                             .author = "bench-author"}));
  }
  const std::string session = "bench-session";
  store.open_session(session);
  const std::vector<std::string> actions = {"comment", "push"};
  std::vector<double> assign, record, gate, assign_record, claim, heartbeat, claim_heartbeat;
  std::int64_t exact = 0;
  for (const auto& id : ids) {
    // The baseline: the oldest ready item is this one.
    const double b0 = seconds_now();
    const auto claimed = store.claim("bench-worker");
    const double b1 = seconds_now();
    if (!claimed || claimed->item_id != id) throw std::runtime_error("assign-gate: claim took another item");
    store.heartbeat(id, claimed->fence);
    const double b2 = seconds_now();
    store.release(id, claimed->fence);
    claim.push_back(b1 - b0);
    heartbeat.push_back(b2 - b1);
    claim_heartbeat.push_back(b2 - b0);

    const double t0 = seconds_now();
    const Assignment a = store.assign_and_lease(session, id, actions);
    const double t1 = seconds_now();
    const GateVerdict recorded =
        store.record_mutation(session, id, a.fence, "push", a.expected_head);
    const double t2 = seconds_now();
    const GateVerdict checked =
        store.require_valid_assignment(session, id, a.fence, "push", a.expected_head);
    const double t3 = seconds_now();
    store.finish(id, a.fence, Outcome::done);
    assign.push_back(t1 - t0);
    record.push_back(t2 - t1);
    assign_record.push_back(t2 - t0);
    gate.push_back(t3 - t2);
    if (a.is_assigned() && a.fence == claimed->fence + 1 && recorded && checked) ++exact;
  }
  const bool clean = verify_ledger(store).empty();
  if (exact != items || !clean) {
    throw std::runtime_error(fmt::format(
        "assign-gate: {} of {} round trips came out exact; verify {}", exact, items,
        clean ? "clean" : "found problems"));
  }
  auto ms = [](const std::vector<double>& samples, double p) {
    return 1e3 * fleet::percentile(samples, p);
  };
  JsonObject out;
  out.str("scenario", "assign-gate").str("durability", cplane::to_string(o.durability)).num("items", items);
  for (const auto& [name, samples] :
       {std::pair{"assign", &assign}, {"gate", &gate}, {"record", &record},
        {"assign_record", &assign_record}, {"claim", &claim}, {"heartbeat", &heartbeat},
        {"claim_heartbeat", &claim_heartbeat}}) {
    out.fixed(fmt::format("{}_p50_ms", name), ms(*samples, 50), 3)
        .fixed(fmt::format("{}_p99_ms", name), ms(*samples, 99), 3);
  }
  out.fixed("ratio_p50", ms(assign_record, 50) / ms(claim_heartbeat, 50), 2)
      .fixed("ratio_p99", ms(assign_record, 99) / ms(claim_heartbeat, 99), 2);
  emit(out.done());
}

// The allocator's cost against the depth of the queue, with claim +
// finish at the same depths as the baseline. Each depth gets a store of
// its own with that many open items: a tenth issues and prs at priorities
// 1 to 3, spread through the queue, the rest tasks at 0; and on the
// terminal path, kPathFree items the session may take, kPathHeld that
// another session holds and kPathRouted whose changes go back to their
// author, these ten ranked first. So every allocation walks past the same
// ten candidates before it chooses, whatever the depth. Then one session,
// call after call: a preview (apply=false), the allocation (apply=true),
// and a release or a finish, in turn (a finished item is replaced,
// untimed, so the depth and the shape stay). The baseline: claim, then
// finish, each item replaced likewise.
void allocate_scenario(const Options& o, const Emit& emit) {
  constexpr int kPathFree = 10, kPathHeld = 5, kPathRouted = 5;
  const std::int64_t calls = o.items_given ? o.items : 2'000;
  const std::string session = "bench-session", payload = R"({"task":"benchmark item"})";
  struct Figures {
    std::int64_t depth = 0;
    double allocate50 = 0, allocate99 = 0, preview50 = 0, preview99 = 0;
    double claim50 = 0, claim99 = 0, allocate_report50 = 0, claim_finish50 = 0;
  };
  std::vector<Figures> figures;
  auto ms = [](const std::vector<double>& samples, double p) {
    return 1e3 * fleet::percentile(samples, p);
  };
  for (std::int64_t depth : {1'000LL, 10'000LL, 100'000LL, 1'000'000LL}) {
    if (depth > o.max) break;
    ScratchDir dir;
    const auto db = dir.file("bench.db");
    const double b0 = seconds_now();
    std::set<std::string> free_path;  // on the terminal path, free to take
    {
      ControlStore build{db, {.durability = Durability::normal}};
      build.create_project("bench", "Benchmark");
      const std::int64_t plain = depth - kPathFree - kPathHeld - kPathRouted;
      std::vector<std::string> payloads;
      for (std::int64_t queued = 0; queued < plain;) {
        const auto n = std::min<std::int64_t>(900, plain - queued);
        payloads.assign(static_cast<std::size_t>(n), payload);
        build.enqueue_batch("bench", payloads);
        queued += n;
        for (int k = 0; k < 100 && queued < plain; ++k, ++queued) {
          build.enqueue("bench", payload,
                        ControlStore::EnqueueOptions{
                            .kind = k % 2 == 0 ? WorkKind::pr : WorkKind::issue,
                            .ref = fmt::format("bench/r#{}", queued),
                            .priority = 1 + k % 3});
        }
      }
      build.open_session("bench-other");
      for (int k = 0; k < kPathHeld + kPathRouted; ++k) {
        const bool routed = k >= kPathHeld;
        const auto id = build.enqueue(
            "bench", payload,
            ControlStore::EnqueueOptions{.kind = WorkKind::pr,
                                         .ref = fmt::format("bench/top#{}", k),
                                         .head = "head-1",
                                         .author = routed ? "bench-author" : "",
                                         .priority = 5});
        build.enter_terminal_path(id, "bench");
        if (routed) {
          build.observe_review(id, ReviewState::changes_requested);
        } else if (!build.assign_and_lease("bench-other", id, {"push"}, Seconds{86'400})) {
          throw std::runtime_error("allocate: the other session was not given its item");
        }
      }
      for (int k = 0; k < kPathFree; ++k) {
        const auto id = build.enqueue("bench", payload,
                                      ControlStore::EnqueueOptions{.priority = k % 4});
        build.enter_terminal_path(id, "bench");
        free_path.insert(id);
      }
    }
    const double build_s = seconds_now() - b0;

    ControlStore store{db, {.durability = o.durability}};
    store.open_session(session);
    std::vector<double> preview, allocate, allocate_report, claim, claim_finish;
    std::int64_t exact = 0;
    for (std::int64_t i = 0; i < calls; ++i) {
      const double t0 = seconds_now();
      const Allocation p = store.allocate_next(session, AllocateMode::preview);
      const double t1 = seconds_now();
      const Allocation a = store.allocate_next(session, AllocateMode::apply);
      const double t2 = seconds_now();
      const bool finish = i % 2 == 1;
      if (a.outcome == AllocateOutcome::assigned) {
        if (finish) {
          store.finish(a.item_id, a.fence, Outcome::done);
        } else {
          store.release(a.item_id, a.fence, "bench");
        }
      }
      const double t3 = seconds_now();
      preview.push_back(t1 - t0);
      allocate.push_back(t2 - t1);
      allocate_report.push_back(t3 - t1);
      // The choice: a free item on the terminal path, past the ten
      // ranked before it, as the preview said.
      if (p.outcome == AllocateOutcome::preview && a.outcome == AllocateOutcome::assigned &&
          p.item_id == a.item_id && p.fence == a.fence &&
          a.skipped_total == kPathHeld + kPathRouted && free_path.count(a.item_id) == 1) {
        ++exact;
      }
      if (finish && free_path.erase(a.item_id) == 1) {
        const auto id = store.enqueue(
            "bench", payload,
            ControlStore::EnqueueOptions{.priority = store.item(a.item_id).priority});
        store.enter_terminal_path(id, "bench");
        free_path.insert(id);
      }
    }
    for (std::int64_t i = 0; i < calls; ++i) {
      const double t0 = seconds_now();
      const auto c = store.claim("bench-worker");
      const double t1 = seconds_now();
      if (!c) throw std::runtime_error("allocate: the baseline's claim found nothing");
      store.finish(c->item_id, c->fence, Outcome::done);
      const double t2 = seconds_now();
      claim.push_back(t1 - t0);
      claim_finish.push_back(t2 - t0);
      store.enqueue("bench", payload);
    }
    const double v0 = seconds_now();
    const bool clean = verify_ledger(store).empty();
    const double verify_s = seconds_now() - v0;
    const auto counts = store.status_counts("bench");
    const std::int64_t open = counts.ready + counts.claimed;
    if (exact != calls || !clean || open != depth) {
      throw std::runtime_error(fmt::format(
          "allocate: {} of {} allocations came out exact; verify {}; {} open of {}", exact,
          calls, clean ? "clean" : "found problems", open, depth));
    }
    const Figures fig{depth, ms(allocate, 50), ms(allocate, 99), ms(preview, 50),
                      ms(preview, 99), ms(claim, 50), ms(claim, 99),
                      ms(allocate_report, 50), ms(claim_finish, 50)};
    figures.push_back(fig);
    emit(JsonObject()
             .str("scenario", "allocate")
             .num("depth", depth)
             .str("durability", cplane::to_string(o.durability))
             .num("calls", calls)
             .num("skipped_per_call", kPathHeld + kPathRouted)
             .fixed("build_s", build_s, 1)
             .fixed("allocate_p50_ms", fig.allocate50, 3)
             .fixed("allocate_p99_ms", fig.allocate99, 3)
             .fixed("preview_p50_ms", fig.preview50, 3)
             .fixed("preview_p99_ms", fig.preview99, 3)
             .fixed("allocate_report_p50_ms", fig.allocate_report50, 3)
             .fixed("allocate_report_p99_ms", ms(allocate_report, 99), 3)
             .fixed("claim_p50_ms", fig.claim50, 3)
             .fixed("claim_p99_ms", fig.claim99, 3)
             .fixed("claim_finish_p50_ms", fig.claim_finish50, 3)
             .fixed("claim_finish_p99_ms", ms(claim_finish, 99), 3)
             .fixed("verify_s", verify_s, 1)
             .done());
  }
  if (figures.size() < 2) return;
  const Figures& low = figures.front();
  const Figures& high = figures.back();
  emit(JsonObject()
           .str("scenario", "allocate-ratio")
           .num("from_depth", low.depth)
           .num("to_depth", high.depth)
           .fixed("allocate_p50", high.allocate50 / low.allocate50, 2)
           .fixed("allocate_p99", high.allocate99 / low.allocate99, 2)
           .fixed("preview_p50", high.preview50 / low.preview50, 2)
           .fixed("preview_p99", high.preview99 / low.preview99, 2)
           .fixed("claim_p50", high.claim50 / low.claim50, 2)
           .fixed("claim_p99", high.claim99 / low.claim99, 2)
           .fixed("allocate_report_p50", high.allocate_report50 / low.allocate_report50, 2)
           .fixed("claim_finish_p50", high.claim_finish50 / low.claim_finish50, 2)
           .done());
}

}  // namespace cplane::bench
