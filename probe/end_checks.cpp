#include "probe/end_checks.hpp"

#include <algorithm>
#include <iostream>
#include <variant>

#include "probe/fleet.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/sqlite_backend.hpp"

namespace cplane::probe {

std::int64_t check_ledger(ScenarioResult& out, const std::string& store_url,
                          const std::vector<std::string>& ids) {
  ControlStore store{store_url};
  std::int64_t done = 0, lost = 0, multiple_terminals = 0, fence_violations = 0,
               reclaims = 0, claim_events = 0, claims_while_leased = 0;
  for (const auto& id : ids) {
    const auto events = store.events(id);
    int terminals = 0;
    bool fences_ok = true;
    // The fold the commands use, judged by the rules they use
    // (projections/rules.hpp): the probe, verify and decide agree by
    // construction on what a claim and a report may do.
    ItemRow row;
    for (const auto& e : events) {
      if (auto* c = std::get_if<ItemClaimed>(&e.event.body)) {
        ++claim_events;
        if (row.status == ItemStatus::claimed && !claimable(row, e.event.at)) {
          ++claims_while_leased;  // two holders at once
        }
        if (c->attempt > 1) ++reclaims;
        if (!fence_rises(row.fence, c->fence)) fences_ok = false;
      } else if (auto* f = std::get_if<ItemFinished>(&e.event.body)) {
        ++terminals;
        if (fence_refusal(&row, f->fence)) fences_ok = false;
      }
      row = apply(std::move(row), e);
    }
    if (terminals > 1) ++multiple_terminals;
    if (!fences_ok) ++fence_violations;
    if (store.item(id).status == ItemStatus::done && terminals == 1) {
      ++done;
    } else {
      ++lost;
    }
  }
  out.count("done", done);
  out.count("lost", lost);
  out.count("claim_events", claim_events);
  out.count("reclaims", reclaims);
  out.count("items_with_two_terminal_events", multiple_terminals);
  out.count("fence_violations", fence_violations);
  out.count("claims_while_leased", claims_while_leased);
  out.check(done == static_cast<std::int64_t>(ids.size()), "done == items");
  out.check(lost == 0, "lost == 0");
  out.check(multiple_terminals == 0, "no item has two terminal events");
  out.check(fence_violations == 0, "fences rise strictly per item");
  out.check(claims_while_leased == 0, "no item was claimed while another lease held it");
  check_verify(out, store, store_url);
  return reclaims;
}

void check_verify(ScenarioResult& out, ControlStore& store, const std::string& store_url) {
  const double t0 = fleet::seconds_now();
  const auto problems = verify_ledger(store);
  const double verify_seconds = fleet::seconds_now() - t0;
  for (std::size_t i = 0; i < std::min<std::size_t>(problems.size(), 10); ++i) {
    std::cerr << "cplane-probe: verify: " << to_string(problems[i].kind) << ' '
              << problems[i].item_id << ": " << problems[i].detail << '\n';
  }
  out.count("verify_problems", static_cast<std::int64_t>(problems.size()));
  out.fixed("verify_seconds", verify_seconds);
  out.check(problems.empty(), "verify finds no problems");
  const std::string path = storage::sqlite_path(store_url);
  if (path.empty()) return;  // a server checks its own pages
  const auto complaints = storage::sqlite_integrity_check(path);
  for (std::size_t i = 0; i < std::min<std::size_t>(complaints.size(), 10); ++i) {
    std::cerr << "cplane-probe: integrity_check: " << complaints[i] << '\n';
  }
  out.text("integrity_check", complaints.empty() ? "ok" : "failed");
  out.check(complaints.empty(), "PRAGMA integrity_check is ok");
}

SessionsLeft sessions_left(ControlStore& store, const std::string& project) {
  SessionsLeft left;
  for (const auto& info : store.sessions()) {
    if (info.row.session_id.rfind(project + "-s", 0) != 0) continue;
    ++left.seen;
    if (info.row.is_open()) ++left.open;
    if (!info.items.empty()) ++left.holding;
  }
  return left;
}

}  // namespace cplane::probe
