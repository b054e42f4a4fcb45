// The allocate-race scenario's journal format and its judgement
// (probe/allocate_race.hpp; the sessions and the probe's side are in
// allocate_race_run.cpp).
#include "probe/allocate_race.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "projections/apply.hpp"

namespace cplane::probe::alloc {
namespace {

std::string field(const std::string& text) { return text.empty() ? "-" : text; }
std::string unfield(const std::string& text) { return text == "-" ? "" : text; }

std::string skipped_text(const std::vector<Skip>& skipped) {
  std::string out;
  for (const auto& s : skipped) {
    if (!out.empty()) out += ',';
    out += s.item;
    out += ':';
    out += s.reason;
  }
  return field(out);
}

std::vector<Skip> parse_skipped(const std::string& text) {
  std::vector<Skip> out;
  if (text == "-") return out;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    const auto colon = part.rfind(':');
    if (colon == std::string::npos || colon + 2 != part.size()) {
      throw std::runtime_error("malformed skipped candidate: " + part);
    }
    out.push_back({part.substr(0, colon), part[colon + 1]});
  }
  return out;
}

// ---- the rules, restated ------------------------------------------------------
// As store.hpp states them (allocate_next), so that the probe judges the
// allocator instead of agreeing with it by construction.

bool is_open(const ItemRow& row) {
  return row.queued_seq != 0 && (row.status == ItemStatus::ready || row.status == ItemStatus::claimed);
}

bool lease_live_at(const ItemRow& row, Micros at) {
  return row.status == ItemStatus::claimed && row.lease_expires_at > at;
}

enum class Fate { take, routed, foreign, own };

// What the session holds is no candidate at all; then a change requested
// goes to its author only (a pr with no author is routed as any item);
// then another's live lease is skipped.
Fate fate_of(const ItemRow& row, const std::string& session, Micros at) {
  const bool live = lease_live_at(row, at);
  if (live && row.session == session) return Fate::own;
  if (row.review == ReviewState::changes_requested && !row.author.empty() &&
      row.author != session) {
    return Fate::routed;
  }
  return live ? Fate::foreign : Fate::take;
}

// On the terminal path first, then higher priority, then queued first.
using RankKey = std::tuple<int, std::int64_t, Seq, std::string>;
RankKey rank_key(const ItemRow& row) {
  return {row.terminal_since != 0 ? 0 : 1, -static_cast<std::int64_t>(row.priority),
          row.queued_seq, row.item_id};
}

struct Plan {
  const ItemRow* chosen = nullptr;
  std::vector<Skip> skipped;  // the first kMaxSkippedListed
  std::int64_t total = 0;
  Micros until = 0;  // wait: the earliest foreign lease end skipped
  bool path_skipped = false;  // a terminal-path item was skipped
  std::int32_t highest_skipped_priority = std::numeric_limits<std::int32_t>::min();
};

bool answers(const Plan& plan, const Entry& e) {
  if (plan.chosen != nullptr) {
    const char* outcome = e.kind == EntryKind::preview ? "preview" : "assigned";
    if (e.result != outcome || e.item != plan.chosen->item_id ||
        e.fence != plan.chosen->fence + 1) {
      return false;
    }
  } else if (plan.until != 0) {
    if (e.result != "wait" || e.until != plan.until) return false;
  } else if (e.result != "no_safe_work") {
    return false;
  }
  return e.skipped_total == plan.total && e.skipped == plan.skipped;
}

// The project's items folded event by event, with the open ones in the
// allocator's order.
class Projection {
 public:
  void apply_event(const StoredEvent& stored) {
    ItemRow& row = rows_[stored.event.item_id];
    if (is_open(row)) ranked_.erase(rank_key(row));
    row = cplane::apply(std::move(row), stored);
    if (is_open(row)) ranked_.insert(rank_key(row));
  }

  const ItemRow& row(const std::string& item) { return rows_[item]; }

  Plan plan(const std::string& session, Micros at) const {
    Plan plan;
    for (const auto& key : ranked_) {
      const ItemRow& row = rows_.at(std::get<3>(key));
      const Fate fate = fate_of(row, session, at);
      if (fate == Fate::own) continue;
      if (fate == Fate::take) {
        plan.chosen = &row;
        break;
      }
      ++plan.total;
      if (row.terminal_since != 0) plan.path_skipped = true;
      plan.highest_skipped_priority = std::max(plan.highest_skipped_priority, row.priority);
      if (fate == Fate::foreign && (plan.until == 0 || row.lease_expires_at < plan.until)) {
        plan.until = row.lease_expires_at;
      }
      if (plan.skipped.size() < kMaxSkippedListed) {
        plan.skipped.push_back({row.item_id, fate == Fate::routed ? 'r' : 'f'});
      }
    }
    if (plan.chosen != nullptr) plan.until = 0;
    return plan;
  }

  // An open item `session` may take at `at` whose next event comes after
  // `until` (or never): it stood by, untouched, all along.
  bool work_stands_by(const std::string& session, Micros at, Micros until,
                      const std::map<std::string, std::vector<Micros>>& times,
                      const std::map<std::string, std::size_t>& applied) const {
    for (const auto& key : ranked_) {
      const std::string& item = std::get<3>(key);
      if (fate_of(rows_.at(item), session, at) != Fate::take) continue;
      const auto& t = times.at(item);
      const std::size_t next = applied.at(item);
      if (next >= t.size() || t[next] > until) return true;
    }
    return false;
  }

 private:
  std::map<std::string, ItemRow> rows_;
  std::set<RankKey> ranked_;
};

// Multisets keyed by tuples: what the ledger holds, consumed by what the
// journals say, so that both leftovers count.
template <class Key>
class Tally {
 public:
  void add(const Key& key) { ++counts_[key]; }
  bool take(const Key& key) {
    auto it = counts_.find(key);
    if (it == counts_.end() || it->second == 0) return false;
    --it->second;
    return true;
  }
  std::int64_t left() const {
    std::int64_t n = 0;
    for (const auto& [key, count] : counts_) n += count;
    return n;
  }

 private:
  std::map<Key, std::int64_t> counts_;
};

// One session's hold on one item, as its journal tells it.
struct Belief {
  std::string session;
  Micros start = 0;  // t1 of the answer that gave it
  Micros end = 0;    // the lease end as told, or t0 of the call that gave it back
};

// A wait, no_safe_work or preview, to be placed among the states the
// project was in while it ran.
struct Window {
  const Entry* entry = nullptr;
  const std::string* session = nullptr;
  Micros start = 0, end = 0;
  std::vector<Micros> clocks;  // t0, t1 and every lease end between
  bool matched = false, exact = false, stood_by = false;
};

}  // namespace

void write_journal(const std::string& path, const Journal& journal) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << journal.session << ' ' << journal.entries.size() << '\n';
    for (const auto& e : journal.entries) {
      out << static_cast<char>(e.kind) << ' ' << field(e.item) << ' ' << field(e.result) << ' '
          << e.fence << ' ' << e.lease_end << ' ' << e.until << ' ' << e.skipped_total << ' '
          << skipped_text(e.skipped) << ' ' << e.t0 << ' ' << e.t1 << '\n';
    }
    if (!out.flush()) throw std::runtime_error("cannot write journal " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename journal into " + path);
  }
}

Journal read_journal(const std::string& path) {
  std::ifstream in(path);
  Journal journal;
  std::size_t count = 0;
  if (!(in >> journal.session >> count)) {
    throw std::runtime_error("journal " + path + " is missing or truncated");
  }
  journal.entries.resize(count);
  for (auto& e : journal.entries) {
    char kind = 0;
    std::string skipped;
    if (!(in >> kind >> e.item >> e.result >> e.fence >> e.lease_end >> e.until >>
          e.skipped_total >> skipped >> e.t0 >> e.t1)) {
      throw std::runtime_error("journal " + path + " is truncated");
    }
    e.kind = static_cast<EntryKind>(kind);
    e.item = unfield(e.item);
    e.result = unfield(e.result);
    e.skipped = parse_skipped(skipped);
  }
  return journal;
}

Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::vector<Observation>& observations, Micros lease,
               Micros abandon_lease) {
  Findings f;
  f.items = static_cast<std::int64_t>(ledger.size());

  // ---- what the ledger holds, to be consumed by what was told -----------------
  struct AssignedRecord {
    std::string session;
    Micros at = 0, lease_end = 0;
    bool told = false;
  };
  std::map<std::pair<std::string, Fence>, AssignedRecord> assignments;
  Tally<std::pair<std::string, Fence>> finishes, releases;
  Tally<std::string> session_releases;
  Tally<std::tuple<std::string, int, int>> changes;  // item, observation kind, review
  std::vector<const StoredEvent*> log;
  std::map<std::string, std::vector<Micros>> times;  // each item's event stamps, in order
  std::vector<Micros> lease_ends;
  for (const auto& [item, events] : ledger) {
    auto& t = times[item];
    for (const auto& stored : events) {
      log.push_back(&stored);
      t.push_back(stored.event.at);
      const EventBody& body = stored.event.body;
      if (const auto* a = std::get_if<ItemAssigned>(&body)) {
        assignments[{item, a->fence}] = {a->session, stored.event.at, a->lease_expires_at, false};
        lease_ends.push_back(a->lease_expires_at);
      } else if (const auto* x = std::get_if<ItemFinished>(&body)) {
        finishes.add({item, x->fence});
      } else if (const auto* r = std::get_if<ItemReleased>(&body)) {
        if (r->reason == "session closed") {
          session_releases.add(item);
        } else {
          releases.add({item, r->fence});
        }
      } else if (std::holds_alternative<TerminalPathEntered>(body)) {
        changes.add({item, static_cast<int>(Observation::Kind::enter_path), 0});
      } else if (std::holds_alternative<TerminalPathLeft>(body)) {
        changes.add({item, static_cast<int>(Observation::Kind::leave_path), 0});
      } else if (const auto* v = std::get_if<ReviewChanged>(&body)) {
        changes.add({item, static_cast<int>(Observation::Kind::review), static_cast<int>(v->review)});
      }
    }
  }
  std::sort(log.begin(), log.end(),
            [](const StoredEvent* a, const StoredEvent* b) { return a->seq < b->seq; });
  std::sort(lease_ends.begin(), lease_ends.end());

  // What the control plane was told against what the log holds.
  for (const auto& o : observations) {
    if (!o.changed) continue;
    if (!changes.take({o.item, static_cast<int>(o.kind),
                       o.kind == Observation::Kind::review ? static_cast<int>(o.review) : 0})) {
      ++f.observation_mismatches;
    }
  }
  f.observation_mismatches += changes.left();

  // ---- each journal, against the ledger ------------------------------------
  std::map<std::pair<std::string, Fence>, const Entry*> told_assigned;
  std::map<std::string, std::vector<Belief>> beliefs;  // by item
  std::vector<Window> windows;
  auto window = [&](const Entry& e, const std::string& session, Micros start) {
    Window w{&e, &session, start, e.t1, {e.t0, e.t1}};
    for (auto it = std::upper_bound(lease_ends.begin(), lease_ends.end(), e.t0);
         it != lease_ends.end() && *it <= e.t1; ++it) {
      w.clocks.push_back(*it);
    }
    windows.push_back(std::move(w));
  };
  for (const auto& journal : journals) {
    const std::string& session = journal.session;
    std::map<std::string, std::size_t> holding;  // item -> index in beliefs[item]
    auto give_back = [&](const std::string& item, Micros when) {
      auto it = holding.find(item);
      if (it == holding.end()) return;
      auto& b = beliefs[item][it->second];
      b.end = std::min(b.end, when);
      holding.erase(it);
    };
    for (std::size_t i = 0; i < journal.entries.size(); ++i) {
      const Entry& e = journal.entries[i];
      switch (e.kind) {
        case EntryKind::applied: {
          ++f.rounds;
          for (const auto& s : e.skipped) {
            if (s.reason == 'r') ++f.told_routed_skips;
            else if (s.reason == 'f') ++f.told_foreign_skips;
            else ++f.malformed_answers;
          }
          if (e.result == "assigned") {
            ++f.assigned;
            if (e.skipped_total > 0) ++f.contended_assignments;
            give_back(e.item, e.t0);
            auto record = assignments.find({e.item, e.fence});
            if (record == assignments.end() || record->second.told ||
                record->second.session != session || record->second.lease_end != e.lease_end) {
              ++f.unledgered_answers;
            } else {
              record->second.told = true;
              told_assigned[{e.item, e.fence}] = &e;
              const bool abandons = i + 1 < journal.entries.size() &&
                                    journal.entries[i + 1].kind == EntryKind::abandoned;
              if (e.lease_end - record->second.at != (abandons ? abandon_lease : lease)) {
                ++f.lease_mismatches;
              }
            }
            holding[e.item] = beliefs[e.item].size();
            beliefs[e.item].push_back({session, e.t1, e.lease_end});
          } else if (e.result == "wait" || e.result == "no_safe_work") {
            ++(e.result == "wait" ? f.wait : f.no_safe_work);
            window(e, session, e.t0);
          } else {
            ++f.malformed_answers;
          }
          break;
        }
        case EntryKind::preview: {
          ++f.previews;
          if (e.result == "preview" || e.result == "wait" || e.result == "no_safe_work") {
            // A snapshot taken without the write lock may miss a write
            // stamped a little before t0 that had not committed yet.
            window(e, session, e.t0 - 1'000'000);
          } else {
            ++f.malformed_answers;
          }
          break;
        }
        case EntryKind::finished:
        case EntryKind::released: {
          const bool finish = e.kind == EntryKind::finished;
          give_back(e.item, e.t0);
          if (e.result == "ok") {
            ++(finish ? f.finishes_ok : f.releases_ok);
            if (!(finish ? finishes : releases).take({e.item, e.fence})) {
              ++(finish ? f.finish_mismatches : f.release_mismatches);
            }
          } else {
            ++(finish ? f.finishes_refused : f.releases_refused);
          }
          break;
        }
        case EntryKind::abandoned:
          ++f.abandoned;  // held, as told, until its lease ends
          holding.erase(e.item);
          break;
        case EntryKind::session_closed:
          ++f.released_by_close;
          give_back(e.item, e.t0);
          if (!session_releases.take(e.item)) ++f.release_mismatches;
          break;
        default:
          ++f.malformed_answers;
      }
    }
  }
  for (const auto& [key, record] : assignments) {
    if (!record.told) ++f.untold_assignments;
  }
  f.finish_mismatches += finishes.left();
  f.release_mismatches += releases.left() + session_releases.left();

  // ---- the whole log in order: every choice against the rules ----------------
  std::sort(windows.begin(), windows.end(),
            [](const Window& a, const Window& b) { return a.start < b.start; });
  Projection projection;
  std::map<std::string, std::size_t> applied;  // events applied, per item
  std::map<std::string, std::int64_t> assigned_count, finish_count;
  for (const auto& [item, events] : ledger) applied[item] = 0;
  std::vector<Window*> active;
  std::size_t next_window = 0;
  auto evaluate = [&](Window& w) {
    for (Micros at : w.clocks) {
      if (answers(projection.plan(*w.session, at), *w.entry)) return true;
    }
    return false;
  };
  // Opens every window whose start is before `before`: every event stamped
  // at or before its start is applied.
  auto open_windows = [&](Micros before) {
    for (; next_window < windows.size() && windows[next_window].start < before; ++next_window) {
      Window& w = windows[next_window];
      w.matched = w.exact = evaluate(w);
      if (w.entry->kind == EntryKind::applied) {
        w.stood_by = projection.work_stands_by(*w.session, w.entry->t0, w.end, times, applied);
      }
      if (!w.matched) active.push_back(&w);
    }
  };
  Micros last_at = 0;
  for (const StoredEvent* stored : log) {
    const Event& e = stored->event;
    const std::string& item = e.item_id;
    if (e.at < last_at) ++f.stamps_out_of_order;
    last_at = std::max(last_at, e.at);
    open_windows(e.at);
    const ItemRow& row = projection.row(item);
    std::visit(
        Overloaded{
            [&](const ItemAssigned& a) {
              ++f.assigned_events;
              ++assigned_count[item];
              if (is_terminal(row.status)) ++f.assigned_after_terminal;
              if (a.fence != row.fence + 1) ++f.fence_violations;
              if (lease_live_at(row, e.at)) ++f.assigned_over_live_lease;
              if (row.status == ItemStatus::claimed) ++f.handovers_by_lapse;
              if (row.status == ItemStatus::ready && row.fence > 0) ++f.handovers_after_release;
              if (row.review == ReviewState::changes_requested) {
                ++(a.session == row.author ? f.routed_assignments : f.routing_violations);
              }
              // The allocator's choice, at its place in the log.
              ++f.plans_checked;
              const Plan plan = projection.plan(a.session, e.at);
              if (plan.chosen == nullptr || plan.chosen->item_id != item) ++f.choice_mismatches;
              if (auto told = told_assigned.find({item, a.fence}); told != told_assigned.end()) {
                if (told->second->skipped_total != plan.total ||
                    told->second->skipped != plan.skipped) {
                  ++f.skip_mismatches;
                }
              }
              if (row.terminal_since != 0) {
                ++f.assigned_on_terminal_path;
              } else if (plan.path_skipped) {
                ++f.terminal_skipped_for_another;
              }
              if (plan.highest_skipped_priority > row.priority) ++f.chosen_below_skipped_priority;
            },
            [&](const ItemFinished& x) {
              ++finish_count[item];
              if (x.outcome == Outcome::done) ++f.finished_done;
              if (row.status != ItemStatus::claimed || x.fence != row.fence) {
                ++f.finished_by_non_holder;
              }
            },
            [&](const ItemReleased&) { ++f.released_events; },
            [&](const TerminalPathEntered&) { ++f.terminal_path_entered; },
            [&](const TerminalPathLeft&) { ++f.terminal_path_left; },
            [&](const ReviewChanged&) { ++f.review_changes; },
            [&](const ItemQueued&) {},
            [&](const auto&) { ++f.foreign_events; },
        },
        e.body);
    projection.apply_event(*stored);
    ++applied[item];
    // The state after this event belongs to every window still open by then.
    for (auto it = active.begin(); it != active.end();) {
      Window& w = **it;
      if (e.at > w.end) {
        it = active.erase(it);
      } else if (evaluate(w)) {
        w.matched = true;
        it = active.erase(it);
      } else {
        ++it;
      }
    }
  }
  open_windows(std::numeric_limits<Micros>::max());
  for (const auto& w : windows) {
    if (w.entry->kind == EntryKind::preview) {
      ++(w.matched ? f.previews_explained : f.previews_unexplained);
    } else {
      if (w.exact) ++f.idle_exact;
      if (!w.matched) ++f.idle_unexplained;
      if (w.stood_by) ++f.idle_while_work_stood_by;
    }
  }
  for (const auto& [item, events] : ledger) {
    const ItemRow& row = projection.row(item);
    const std::int64_t n = finish_count[item];
    if (assigned_count[item] == 0) ++f.items_never_assigned;
    if (n > 1) ++f.items_finished_twice;
    if (row.status == ItemStatus::done && n == 1) {
      ++f.items_done_once;
    } else if (row.status != ItemStatus::done) {
      ++f.items_not_done;
    }
  }

  // ---- exclusivity in real time: no two sessions hold one item at once ------
  bool any_gap = false;
  for (auto& [item, all] : beliefs) {
    std::vector<std::pair<Micros, int>> edges;  // an end before a start at the same time
    std::vector<Belief> list;
    for (const auto& b : all) {
      if (b.end <= b.start) continue;  // told only once it had ended
      list.push_back(b);
      edges.emplace_back(b.start, +1);
      edges.emplace_back(b.end, -1);
    }
    std::sort(edges.begin(), edges.end());
    std::int64_t holding = 0;
    for (const auto& [time, step] : edges) {
      holding += step;
      f.max_concurrent_believers = std::max(f.max_concurrent_believers, holding);
    }
    std::sort(list.begin(), list.end(),
              [](const Belief& a, const Belief& b) { return a.start < b.start; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (list[i].session == list[i - 1].session) continue;
      ++f.handovers_observed;
      const double gap_ms = (list[i].start - list[i - 1].end) / 1e3;
      if (!any_gap || gap_ms < f.tightest_handover_ms) f.tightest_handover_ms = gap_ms;
      any_gap = true;
    }
  }
  return f;
}

}  // namespace cplane::probe::alloc
