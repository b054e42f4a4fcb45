#include "commands/flow.hpp"

#include <algorithm>

#include "commands/decide.hpp"
#include "projections/apply.hpp"

namespace cplane::detail {

namespace {

// How many key groups a project's slow path looks at per status: the cost of
// a claim that meets full keys grows with the keys that have waiting items,
// never with the items behind them.
constexpr std::size_t kMaxKeyGroups = 1000;

}  // namespace

// ---- KeyGate ----------------------------------------------------------------------

KeyGate::State& KeyGate::state(const std::string& key) {
  auto [it, inserted] = keys_.try_emplace(key);
  if (inserted) {
    it->second.limit = backend_.find_limit(key);
    if (it->second.limit && it->second.limit->removed) it->second.limit.reset();
  }
  return it->second;
}

const LimitRow* KeyGate::limit(const std::string& key) {
  if (key.empty()) return nullptr;
  State& s = state(key);
  return s.limit ? &*s.limit : nullptr;
}

std::optional<KeyBlock> KeyGate::block(const std::string& key) {
  if (key.empty()) return std::nullopt;
  State& s = state(key);
  if (!s.limit) return std::nullopt;
  if (s.limit->concurrency > 0 && s.live < 0) s.live = backend_.live_leases(key, at_);
  return key_block(&*s.limit, std::max<std::int64_t>(s.live, 0), at_);
}

void KeyGate::claimed(const std::string& key, const StoredEvent& stored) {
  if (key.empty()) return;
  State& s = state(key);
  if (!s.limit) return;
  if (s.live >= 0) ++s.live;
  if (!has_rate(*s.limit)) return;
  s.limit = apply(std::move(*s.limit), stored);
  backend_.put_limit(*s.limit);
}

std::optional<Micros> key_wait_until(storage::Backend& backend, KeyGate& gate, const ItemRow& row,
                                     Micros at) {
  const auto block = gate.block(row.concurrency_key);
  if (!block) return std::nullopt;
  if (block->kind == KeyBlock::Kind::rate_limited) return block->until;
  const auto holders = backend.key_holders(row.concurrency_key, at, 1);
  return holders.empty() ? at : holders.front().lease_expires_at;
}

// ---- ClaimChooser -------------------------------------------------------------------

ClaimChooser::ClaimChooser(ControlStore::Impl& s, KeyGate& gate, Micros at,
                           const std::string* actor, bool fair, std::size_t want,
                           std::function<void()> before_read)
    : s_(s),
      gate_(gate),
      at_(at),
      actor_(actor),
      fair_(fair),
      want_(std::max<std::size_t>(want, 1)),
      before_read_(std::move(before_read)) {}

void ClaimChooser::load() {
  if (before_read_) before_read_();
  std::vector<Project> projects;
  for (auto& list : s_.backend_->claim_candidates(at_, actor_, want_)) {
    if (list.rows.empty()) continue;
    const std::string& id = list.rows.front().project_id;
    auto it = std::find_if(projects.begin(), projects.end(),
                           [&](const Project& p) { return p.id == id; });
    if (it == projects.end()) {
      projects.push_back(Project{.id = id});
      it = projects.end() - 1;
      // Keep the project row read before (its pass may have moved on).
      for (auto& old : projects_) {
        if (old.id == id) it->row = std::move(old.row);
      }
    }
    it->lists.push_back(std::move(list));
    it->next.push_back(0);
  }
  projects_ = std::move(projects);
  loaded_ = true;
}

const ProjectRow& ClaimChooser::project_row(Project& p) {
  if (!p.row) {
    // Read to be written: a claim that moves the pass writes the row back.
    p.row = s_.backend_->lock_project(p.id);
    if (!p.row) p.row = ProjectRow{.project_id = p.id};
  }
  return *p.row;
}

bool ClaimChooser::usable(const ItemRow& row, bool& restart) {
  if (lapsed_exhausted(row, at_)) {
    // A poison item is never handed out again: failed, and look again.
    if (before_read_) before_read_();
    s_.exhaust_in_tx(row, at_);
    restart = true;
    return false;
  }
  return !gate_.block(row.concurrency_key);
}

std::optional<ItemRow> ClaimChooser::best_of(Project& p, bool& stale, bool& restart) {
  std::optional<ItemRow> best;
  for (std::size_t l = 0; l < p.lists.size(); ++l) {
    auto& rows = p.lists[l].rows;
    std::size_t& i = p.next[l];
    while (i < rows.size()) {
      if (usable(rows[i], restart)) break;
      if (restart) return std::nullopt;
      // Blocked by its key: what is behind it in queue order may run, but a
      // list cut at `want` may not show it: the key groups do.
      p.slow = true;
      ++i;
    }
    if (i == rows.size()) {
      if (p.lists[l].more && !p.slow) stale = true;
      continue;
    }
    if (!best || claim_before(rows[i], *best)) best = rows[i];
  }
  if (p.slow) return best_by_key(p, restart);
  return best;
}

std::optional<ItemRow> ClaimChooser::best_by_key(Project& p, bool& restart) {
  if (before_read_) before_read_();
  std::optional<ItemRow> best;
  for (const ItemStatus status : {ItemStatus::ready, ItemStatus::scheduled, ItemStatus::claimed}) {
    for (auto& row : s_.backend_->key_heads(p.id, status, kMaxKeyGroups)) {
      if (!claimable(row, at_) && !lapsed_exhausted(row, at_)) continue;
      if (!usable(row, restart)) {
        if (restart) return std::nullopt;
        continue;
      }
      if (!best || claim_before(row, *best)) best = std::move(row);
    }
  }
  return best;
}

std::optional<ClaimChooser::Choice> ClaimChooser::next() {
  // Each round either answers or changed something (an exhausted item
  // failed, a list read again); the bound only guards against a bug.
  for (int round = 0; round < 100000; ++round) {
    if (!loaded_) load();
    bool stale = false, restart = false;
    struct Pick {
      Project* project;
      ItemRow row;
    };
    std::vector<Pick> picks;
    for (auto& p : projects_) {
      auto best = best_of(p, stale, restart);
      if (restart) break;
      if (best) picks.push_back({&p, std::move(*best)});
    }
    if (restart || stale) {
      loaded_ = false;
      continue;
    }
    if (picks.empty()) return std::nullopt;
    // Several projects with work: the lowest pass (weighted round-robin),
    // ties as claim_before ranks their items. One, or fairness off: the
    // item claim_before ranks first.
    bool share = fair_ && picks.size() > 1;
    if (share) {
      // The rows the choice compares and a claim writes back, read (and on
      // PostgreSQL locked) in id order: two claims never each hold a row
      // the other waits for. A project paused since its items were read
      // is passed over.
      std::vector<Project*> order;
      for (const auto& pick : picks) order.push_back(pick.project);
      std::sort(order.begin(), order.end(),
                [](const Project* a, const Project* b) { return a->id < b->id; });
      for (Project* p : order) project_row(*p);
      std::erase_if(picks, [&](const Pick& pick) { return project_row(*pick.project).paused; });
      if (picks.empty()) return std::nullopt;
      share = picks.size() > 1;
    }
    std::size_t chosen = 0;
    for (std::size_t i = 1; i < picks.size(); ++i) {
      bool better = claim_before(picks[i].row, picks[chosen].row);
      if (share) {
        const auto a = project_row(*picks[i].project).fair_pass;
        const auto b = project_row(*picks[chosen].project).fair_pass;
        if (a != b) better = a < b;
      }
      if (better) chosen = i;
    }
    Choice out{std::move(picks[chosen].row), 0};
    if (share) {
      std::optional<std::int64_t> others_min;
      for (std::size_t i = 0; i < picks.size(); ++i) {
        if (i == chosen) continue;
        const auto pass = project_row(*picks[i].project).fair_pass;
        if (!others_min || pass < *others_min) others_min = pass;
      }
      const ProjectRow& mine = project_row(*picks[chosen].project);
      out.fair_pass = fair_pass_after(mine.fair_pass, mine.weight, *others_min);
      if (out.fair_pass == 0) out.fair_pass = 1;  // 0 means "unchanged" in the event
    }
    // Taken: the next call looks past it.
    Project& p = *picks[chosen].project;
    for (std::size_t l = 0; l < p.lists.size(); ++l) {
      auto& rows = p.lists[l].rows;
      if (p.next[l] < rows.size() && rows[p.next[l]].item_id == out.row.item_id) ++p.next[l];
    }
    return out;
  }
  throw InternalError("a claim's choice went round without end");
}

void ClaimChooser::claimed(const Choice& choice, const StoredEvent& stored) {
  gate_.claimed(choice.row.concurrency_key, stored);
  if (choice.fair_pass == 0) return;
  for (auto& p : projects_) {
    if (p.id != choice.row.project_id) continue;
    p.row = apply(project_row(p), stored);
    s_.backend_->put_project(*p.row);
    return;
  }
}

}  // namespace cplane::detail
