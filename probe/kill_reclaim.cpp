#include "probe/kill_reclaim.hpp"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <variant>

#include <cplane/cplane.hpp>

#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::reclaim {
namespace {

using fleet::seconds_now;
using fleet::sleep_for;

struct Victim {
  std::string item;
  Fence fence = 0;
};

// The dead worker's late report, while the survivor holds its item: true
// when it is refused for its fence, not because the item is terminal or
// free.
bool late_report_refused(ControlStore& store, const Victim& victim) {
  try {
    store.finish(victim.item, victim.fence, Outcome::done);
  } catch (const FenceRejected& e) {
    if (e.reason() == FenceRejected::Reason::stale_fence) return true;
    std::cerr << "cplane-probe: the late report was refused as " << to_string(e.reason())
              << ", not as stale_fence: " << e.what() << '\n';
  }
  return false;
}

}  // namespace

ScenarioResult run(const RunConfig& run) {
  ScenarioResult out;
  const double lease = 1.0;
  Workers processes(run);
  // Two items at first (the victim's and the competitor's); the rest are
  // queued once the victim's lease has lapsed, so that the lapsed item is
  // the one available earliest (a claim takes that one first).
  auto ids = drain::setup(run, std::min<std::int64_t>(run.items, 2));
  const pid_t victim_pid = processes.spawn("hold", 999, nullptr, lease);
  while (!std::filesystem::exists(processes.record_path(999))) {
    if (seconds_now() > run.deadline) throw std::runtime_error("the victim never claimed");
    sleep_for(0.005);
  }
  const auto held = fleet::read_record(processes.record_path(999)).claimed_ids.at(0);
  const Victim victim{held.substr(0, held.find(':')),
                      std::stoull(held.substr(held.find(':') + 1))};
  const int status = processes.kill(victim_pid);
  out.count("victim_killed_by_signal", status == 128 + SIGKILL ? SIGKILL : 0);
  out.check(status == 128 + SIGKILL, "the victim died of SIGKILL while holding its item");
  out.count("victim_fence", static_cast<std::int64_t>(victim.fence));
  std::int64_t probe_claims = 0;
  {
    // Before the lease lapses a claim must take another item, never the
    // one the dead worker holds.
    ControlStore store{run.store};
    auto other = store.claim("probe-competitor", {.actor = run.project, .lease = Seconds{30}});
    out.check(other.has_value() || run.items == 1, "a competing claim found work");
    if (other) {
      out.check(other->item_id != victim.item,
                "the held item is not handed out before its lease lapses");
      store.finish(other->item_id, other->fence, Outcome::done);
      ++probe_claims;
    }
    out.check(store.item(victim.item).owner == "probe-worker-999",
              "the item stays with the victim");
  }
  sleep_for(lease + 0.1);
  if (run.items > 2) {
    ControlStore store{run.store};
    const auto more = drain::enqueue_more(store, run.project, 2, run.items - 2);
    ids.insert(ids.end(), more.begin(), more.end());
  }

  // The survivor reclaims the lapsed item (available since its lease
  // lapsed, before every item queued since) and holds it while the dead
  // worker's late report arrives:
  // the item is claimed and live, so only the fence can refuse that report.
  std::int64_t survivor_claims = 0;
  bool refused = false;
  {
    ControlStore store{run.store};
    auto survivor = store.claim("probe-survivor", {.actor = run.project, .lease = Seconds{30}});
    out.check(survivor && survivor->item_id == victim.item,
              "the survivor's claim reclaims the dead worker's item");
    if (survivor) ++survivor_claims;
    refused = late_report_refused(store, victim);
    const ItemRow row = store.item(victim.item);
    out.check(row.status == ItemStatus::claimed && row.owner == "probe-survivor",
              "the survivor still holds the item after the late report");
    if (survivor) {
      try {
        store.finish(survivor->item_id, survivor->fence, Outcome::done);
      } catch (const FenceRejected& e) {
        std::cerr << "cplane-probe: the survivor's report was refused: " << e.what() << '\n';
        out.check(false, "the survivor's report under the current fence is accepted");
      }
    }
  }

  fleet::StartGate gate;
  for (int w = 0; w < run.workers; ++w) processes.spawn("drain", w, &gate, 30);
  gate.release();
  int failures = 0;
  const bool finished = processes.wait_all(run.deadline, failures);
  out.count("workers", run.workers);
  const drain::Stats stats =
      drain::worker_stats(out, processes.records(0, run.workers), run.items);
  out.check(finished && failures == 0, "the survivors drained the queue");

  ControlStore store{run.store};
  Fence reclaim_fence = 0;
  int terminals = 0;
  for (const auto& e : store.events(victim.item)) {
    if (auto* c = std::get_if<ItemClaimed>(&e.event.body)) reclaim_fence = c->fence;
    if (std::holds_alternative<ItemFinished>(e.event.body)) ++terminals;
  }
  out.count("reclaim_fence", static_cast<std::int64_t>(reclaim_fence));
  out.count("killed_token_refused", refused ? 1 : 0);
  out.count("victim_item_terminal_events", terminals);
  out.check(reclaim_fence > victim.fence, "the item was reclaimed under a higher fence");
  out.check(refused, "the killed worker's token is refused as stale while the item is held");
  out.check(terminals == 1, "the victim's item has exactly one terminal event");
  out.count("competitor_claims", probe_claims);
  out.count("survivor_claims", survivor_claims);
  out.check(stats.claimed + probe_claims + survivor_claims == run.items,
            "every item claimed once by the survivors (and the competitor)");
  check_ledger(out, run.store, ids);
  return out;
}

}  // namespace cplane::probe::reclaim
