#include "verify/flow_check.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "storage/backend.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

namespace {

// The key a claim or an assignment names, or nullptr for another event.
const std::string* claim_key(const EventBody& body) {
  if (const auto* c = std::get_if<ItemClaimed>(&body)) return &c->concurrency_key;
  if (const auto* a = std::get_if<ItemAssigned>(&body)) return &a->concurrency_key;
  return nullptr;
}

std::string describe(const LimitRow& l) {
  return fmt::format("concurrency {} rate {}/{}us burst {} tat {} removed {} updated_at {} "
                     "last_seq {}",
                     l.concurrency, l.rate_count, l.rate_period, l.burst, l.tat, l.removed,
                     l.updated_at, l.last_seq);
}

}  // namespace

void FlowLog::observe(const StoredEvent& stored, const ItemRow& item) {
  const EventBody& body = stored.event.body;
  const StreamKind kind = stream_kind_of(body);
  if (kind == StreamKind::limit) {
    events_.push_back(stored);
    return;
  }
  if (kind != StreamKind::item) return;
  if (const auto* c = std::get_if<ItemClaimed>(&body); c && c->fair_pass != 0) {
    auto& [seq, pass] = passes_[stored.event.project_id];
    if (stored.seq > seq) {
      seq = stored.seq;
      pass = c->fair_pass;
    }
  }
  const std::string* key = claim_key(body);
  if (!item.concurrency_key.empty() || (key != nullptr && !key->empty())) {
    events_.push_back(stored);
  }
}

FlowLog::Fold FlowLog::fold(bool history_whole) const {
  Fold out;
  for (const auto& [project, pass] : passes_) out.passes[project] = pass.second;
  std::vector<const StoredEvent*> order;
  order.reserve(events_.size());
  for (const auto& e : events_) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const StoredEvent* a, const StoredEvent* b) { return a->seq < b->seq; });
  std::map<std::string, ItemRow> items;                  // items with a key, folded so far
  std::map<std::string, std::set<std::string>> claimed;  // key -> its items in status claimed
  for (const StoredEvent* stored : order) {
    const StoredEvent& e = *stored;
    const EventBody& body = e.event.body;
    if (const auto* set = std::get_if<LimitSet>(&body)) {
      out.limits[set->key] = apply(std::move(out.limits[set->key]), e);
      continue;
    }
    if (const auto* removed = std::get_if<LimitRemoved>(&body)) {
      out.limits[removed->key] = apply(std::move(out.limits[removed->key]), e);
      continue;
    }
    if (const auto* carried = std::get_if<LimitClockCarried>(&body)) {
      LimitRow& limit = out.limits[carried->key];
      if (carried->tat < limit.tat || (history_whole && carried->tat != limit.tat)) {
        out.problems.push_back(
            {ProblemKind::limit_clock_disagrees, "", "",
             fmt::format("limit_clock_carried seq {} carries limit {}'s clock as {}, yet the "
                         "claims before it make it {}{}",
                         e.seq, quoted(carried->key), carried->tat, limit.tat,
                         history_whole ? "" : " (archived claims can only make it later)")});
      }
      limit = apply(std::move(limit), e);
      out.carried.insert(carried->key);
      continue;
    }
    ItemRow& item = items[e.event.item_id];
    // A lapsed lease renewed takes its key's slot again: as a claim does.
    if (std::holds_alternative<LeaseExtended>(body) && lease_lapsed(item, e.event.at) &&
        !item.concurrency_key.empty()) {
      const auto limit = out.limits.find(item.concurrency_key);
      if (limit != out.limits.end() && !limit->second.removed && limit->second.concurrency > 0) {
        std::int64_t live = 0;
        for (const auto& other : claimed[item.concurrency_key]) {
          if (other != e.event.item_id && lease_live(items[other], e.event.at)) ++live;
        }
        if (live >= static_cast<std::int64_t>(limit->second.concurrency)) {
          out.problems.push_back(
              {ProblemKind::concurrency_exceeded, e.event.item_id, e.event.project_id,
               fmt::format("lease_extended seq {} renewed its lapsed lease while concurrency key "
                           "{} had {} live lease(s), the limit",
                           e.seq, quoted(item.concurrency_key), live)});
        }
      }
    }
    if (const std::string* key = claim_key(body); key != nullptr && !key->empty()) {
      const auto limit = out.limits.find(*key);
      if (limit != out.limits.end() && !limit->second.removed) {
        std::int64_t live = 0;
        for (const auto& other : claimed[*key]) {
          if (other != e.event.item_id && lease_live(items[other], e.event.at)) ++live;
        }
        const LimitRow& l = limit->second;
        if (const auto block = key_block(&l, live, e.event.at)) {
          if (block->kind == KeyBlock::Kind::key_full) {
            out.problems.push_back(
                {ProblemKind::concurrency_exceeded, e.event.item_id, e.event.project_id,
                 fmt::format("{} seq {} started it while concurrency key {} had {} live "
                             "lease(s), the limit",
                             type_name(body), e.seq, quoted(*key), live)});
          } else {
            out.problems.push_back(
                {ProblemKind::rate_exceeded, e.event.item_id, e.event.project_id,
                 fmt::format("{} seq {} started it at {}, before concurrency key {}'s next "
                             "token at {}",
                             type_name(body), e.seq, e.event.at, quoted(*key), block->until)});
          }
        }
        limit->second = apply(std::move(limit->second), e);
      }
    }
    item = apply(std::move(item), e);
    if (!item.concurrency_key.empty()) {
      if (item.status == ItemStatus::claimed) {
        claimed[item.concurrency_key].insert(item.item_id);
      } else {
        claimed[item.concurrency_key].erase(item.item_id);
      }
    }
  }
  return out;
}

namespace {

// The fold's row, with the stored tat where claims archived before archives
// carried the clock may explain it (for a key no archive carried since).
LimitRow allowing_archived(LimitRow folded, const LimitRow& stored, Micros archived_until,
                           bool clock_carried) {
  if (clock_carried || archived_until <= 0 || stored.tat <= folded.tat || gcra_interval(folded) == 0) {
    return folded;
  }
  const Micros reach = std::max<Micros>(1, folded.burst) * gcra_interval(folded);
  if (stored.tat <= archived_until + reach) folded.tat = stored.tat;
  return folded;
}

}  // namespace

void check_flow_rows(const FlowLog::Fold& fold, storage::RowSource& rows, Micros legacy_until,
                     std::vector<LedgerProblem>& problems) {
  std::set<std::string> seen;
  auto cursor = rows.scan_limits();
  LimitRow row;
  while (cursor->next(row)) {
    seen.insert(row.key);
    const auto it = fold.limits.find(row.key);
    if (it == fold.limits.end()) {
      problems.push_back({ProblemKind::limit_row_without_event, "", "",
                          fmt::format("limit {} has a row and no limit_set event",
                                      quoted(row.key))});
    } else if (const LimitRow folded = allowing_archived(it->second, row, legacy_until,
                                                                fold.carried.contains(row.key));
               !(folded == row)) {
      problems.push_back({ProblemKind::limit_row_disagrees, "", "",
                          fmt::format("limit {}: the row says {}, the log {}", quoted(row.key),
                                      describe(row), describe(folded))});
    }
  }
  for (const auto& [key, limit] : fold.limits) {
    if (!seen.contains(key)) {
      problems.push_back({ProblemKind::limit_row_missing, "", "",
                          fmt::format("limit {} has events and no row", quoted(key))});
    }
  }
  for (const auto& project : rows.all_projects()) {
    const auto it = fold.passes.find(project.project_id);
    const std::int64_t expected = it == fold.passes.end() ? 0 : it->second;
    if (project.fair_pass != expected) {
      problems.push_back({ProblemKind::project_row_disagrees, "", project.project_id,
                          fmt::format("project {}: fair_pass is {} in the row but its last "
                                      "claim recorded {}",
                                      quoted(project.project_id), project.fair_pass, expected)});
    }
  }
}

void rebuild_flow_rows(const FlowLog::Fold& fold, storage::Backend& backend, bool write,
                       Micros archived_until, std::vector<RowChange>& changes,
                       std::int64_t& changes_total) {
  auto note = [&](RowChange change) {
    ++changes_total;
    if (changes.size() < kMaxListedChanges) changes.push_back(std::move(change));
  };
  std::vector<std::string> unexplained;
  {
    auto cursor = backend.scan_limits();
    LimitRow row;
    while (cursor->next(row)) {
      if (!fold.limits.contains(row.key)) unexplained.push_back(row.key);
    }
  }
  for (const auto& key : unexplained) {
    note({"limits", key, "delete", {}});
    if (write) backend.delete_limit(key);
  }
  for (const auto& [key, folded] : fold.limits) {
    const auto stored = backend.find_limit(key);
    const LimitRow limit = stored ? allowing_archived(folded, *stored, archived_until,
                                                                   fold.carried.contains(key))
                                : folded;
    if (stored && *stored == limit) continue;
    note({"limits", key, stored ? "update" : "insert",
          stored ? std::vector<std::string>{fmt::format("{} -> {}", describe(*stored),
                                                        describe(limit))}
                 : std::vector<std::string>{}});
    if (write) backend.put_limit(limit);
  }
  for (auto project : backend.all_projects()) {
    const auto it = fold.passes.find(project.project_id);
    const std::int64_t expected = it == fold.passes.end() ? 0 : it->second;
    if (project.fair_pass == expected) continue;
    note({"projects", project.project_id, "update",
          {fmt::format("fair_pass: {} -> {}", project.fair_pass, expected)}});
    project.fair_pass = expected;
    if (write) backend.put_project(project);
  }
}

}  // namespace cplane::verify_detail
