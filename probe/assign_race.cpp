// The assign-race scenario's journal format and its judgement
// (probe/assign_race.hpp; the sessions and the probe's side are in
// assign_race_run.cpp).
#include "probe/assign_race.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "projections/apply.hpp"

namespace cplane::probe::race {
namespace {

std::string field(const std::string& text) { return text.empty() ? "-" : text; }
std::string unfield(const std::string& text) { return text == "-" ? "" : text; }

constexpr GateReason kReasons[] = {GateReason::no_live_lease, GateReason::stale_fence,
                                   GateReason::work_terminal, GateReason::action_not_allowed,
                                   GateReason::head_drift};

std::string verdict_text(const std::optional<GateReason>& refusal) {
  return refusal ? to_string(*refusal) : "allowed";
}

bool lease_live_at(const ItemRow& row, Micros at) {
  return row.status == ItemStatus::claimed && row.lease_expires_at > at;
}

// One session's hold on one item, as its journal tells it.
struct Belief {
  std::string session;
  Fence fence = 0;
  Micros start = 0;  // t1 of the answer that gave it
  Micros end = 0;    // the lease end last told, or t0 of the call that gave it back
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

// An item's state after each of its events.
struct State {
  Seq seq = 0;
  Micros at = 0;
  ItemRow row;
  bool moved_since_pinned = false;
};

struct AssignedRecord {
  std::string session;
  Micros lease_end = 0;
  std::string head;
  bool told = false;
};

}  // namespace

std::optional<GateReason> expected_refusal(const ItemRow& row, bool moved_since_pinned,
                                           const std::string& session, Fence fence,
                                           const std::string& action, const std::string& head,
                                           Micros at) {
  if (row.session.empty() || row.session != session) return GateReason::no_live_lease;
  const bool terminal = is_terminal(row.status);
  if (!terminal && !lease_live_at(row, at)) return GateReason::no_live_lease;
  if (fence != row.fence) return GateReason::stale_fence;
  if (terminal) return GateReason::work_terminal;
  if (std::find(row.actions.begin(), row.actions.end(), action) == row.actions.end()) {
    return GateReason::action_not_allowed;
  }
  if (moved_since_pinned || row.head != row.expected_head ||
      (!head.empty() && head != row.expected_head)) {
    return GateReason::head_drift;
  }
  return std::nullopt;
}

void write_journal(const std::string& path, const Journal& journal) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << journal.session << ' ' << journal.entries.size() << '\n';
    for (const auto& e : journal.entries) {
      out << static_cast<char>(e.kind) << ' ' << field(e.item) << ' ' << field(e.result) << ' '
          << e.fence << ' ' << e.lease_end << ' ' << e.until << ' ' << field(e.head) << ' '
          << (e.write ? 1 : 0) << ' ' << field(e.purpose) << ' ' << field(e.action) << ' '
          << e.seen_seq << ' ' << e.t0 << ' ' << e.t1 << '\n';
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
    int write = 0;
    if (!(in >> kind >> e.item >> e.result >> e.fence >> e.lease_end >> e.until >> e.head >>
          write >> e.purpose >> e.action >> e.seen_seq >> e.t0 >> e.t1)) {
      throw std::runtime_error("journal " + path + " is truncated");
    }
    e.kind = static_cast<EntryKind>(kind);
    e.item = unfield(e.item);
    e.result = unfield(e.result);
    e.head = unfield(e.head);
    e.purpose = unfield(e.purpose);
    e.action = unfield(e.action);
    e.write = write != 0;
  }
  return journal;
}

Findings judge(const std::vector<Journal>& journals,
               const std::map<std::string, std::vector<StoredEvent>>& ledger,
               const std::vector<Observation>& observations,
               const std::vector<WriterStall>& writer_stalls) {
  Findings f;
  // The writer stall a write started during, if any: it decided after
  // `letting_go`.
  auto stalled_behind = [&](Micros t0, const std::string& item) -> const WriterStall* {
    for (const auto& stall : writer_stalls) {
      if (stall.held < t0 && t0 < stall.letting_go && (stall.item.empty() || stall.item == item)) {
        return &stall;
      }
    }
    return nullptr;
  };
  for (GateReason reason : kReasons) f.denials[to_string(reason)] = 0;

  // ---- the ledger, folded item by item ----------------------------------------
  std::map<std::string, std::vector<State>> states;
  std::map<std::pair<std::string, Fence>, AssignedRecord> assignments;
  std::set<std::tuple<std::string, Micros, std::string>> lease_ends;  // item, end, session
  Tally<std::pair<std::string, Micros>> extensions;                   // item, new end
  Tally<std::pair<std::string, Fence>> releases;                      // by release()
  Tally<std::string> session_releases;                                // by close_session
  Tally<std::tuple<std::string, std::string, Fence, std::string, std::string>> mutations;
  std::map<std::string, Micros> closed_at;
  f.items = static_cast<std::int64_t>(ledger.size());
  for (const auto& [item, events] : ledger) {
    ItemRow row;
    bool moved_since_pinned = false;
    // Every assignment of the item, in log order: who, under which fence,
    // until when, and whether it was given back (released or closed).
    struct Holder {
      std::string session;
      Micros lease_end = 0;
      bool ended = false;
    };
    std::vector<Holder> holders;
    auto& item_states = states[item];
    for (const auto& stored : events) {
      const Event& e = stored.event;
      if (!item_states.empty() && e.at < item_states.back().at) ++f.stamps_out_of_order;
      std::visit(
          Overloaded{
              [&](const ItemAssigned& a) {
                ++f.assigned_events;
                if (is_terminal(row.status)) ++f.assigned_after_terminal;
                if (a.fence != row.fence + 1) ++f.fence_violations;
                if (lease_live_at(row, e.at)) ++f.assigned_over_live_lease;
                if (row.status == ItemStatus::claimed) ++f.handovers_by_lapse;
                if (row.status == ItemStatus::ready && row.fence > 0) ++f.handovers_after_release;
                std::int64_t live = 1;
                for (const auto& h : holders) {
                  if (!h.ended && h.lease_end > e.at) ++live;
                }
                f.max_concurrent_holders = std::max(f.max_concurrent_holders, live);
                holders.push_back({a.session, a.lease_expires_at, false});
                moved_since_pinned = false;
                assignments[{item, a.fence}] = {a.session, a.lease_expires_at, a.expected_head};
                lease_ends.emplace(item, a.lease_expires_at, a.session);
              },
              [&](const LeaseExtended& x) {
                ++f.extended_events;
                if (x.fence != row.fence || row.session.empty() || !lease_live_at(row, e.at)) {
                  ++f.extensions_of_dead_leases;
                }
                if (!holders.empty()) holders.back().lease_end = x.lease_expires_at;
                extensions.add({item, x.lease_expires_at});
                lease_ends.emplace(item, x.lease_expires_at, row.session);
              },
              [&](const ItemReleased& r) {
                ++f.released_events;
                if (r.fence != row.fence) ++f.fence_violations;
                if (!holders.empty()) holders.back().ended = true;
                if (r.reason == "session closed") {
                  session_releases.add(item);
                } else {
                  releases.add({item, r.fence});
                }
              },
              [&](const ItemClosed&) {
                ++f.closes;
                if (!holders.empty()) holders.back().ended = true;
                closed_at[item] = e.at;
              },
              [&](const HeadMoved&) {
                ++f.head_moves;
                moved_since_pinned = true;
              },
              [&](const MutationRecorded& m) {
                ++f.mutations_recorded;
                if (expected_refusal(row, moved_since_pinned, m.session, m.fence, m.action,
                                     m.head, e.at)) {
                  ++f.mutations_against_rules;
                }
                mutations.add({item, m.session, m.fence, m.action, m.head});
              },
              [&](const ItemQueued&) {},
              [&](const ItemClaimed&) { ++f.foreign_events; },
              [&](const ItemFinished&) { ++f.foreign_events; },
              [&](const LeaseExpired&) { ++f.foreign_events; },
              [&](const ReviewChanged&) { ++f.foreign_events; },
              [&](const ProjectCreated&) { ++f.foreign_events; },
              [&](const ActorAssigned&) { ++f.foreign_events; },
              [&](const SessionOpened&) { ++f.foreign_events; },
              [&](const SessionSeen&) { ++f.foreign_events; },
              [&](const SessionClosed&) { ++f.foreign_events; },
              [&](const TerminalPathEntered&) { ++f.foreign_events; },
              [&](const TerminalPathLeft&) { ++f.foreign_events; },
              [&](const IncidentLinked&) { ++f.foreign_events; },
              [&](const AttemptFailed&) { ++f.foreign_events; },
              [&](const ItemRetried&) { ++f.foreign_events; },
              [&](const ItemRescheduled&) { ++f.foreign_events; },
              [&](const ItemCancelled&) { ++f.foreign_events; },
              [&](const RetryPolicySet&) { ++f.foreign_events; },
              [&](const ProjectPaused&) { ++f.foreign_events; },
              [&](const ProjectResumed&) { ++f.foreign_events; },
              [&](const ScheduleCreated&) { ++f.foreign_events; },
              [&](const ScheduleFired&) { ++f.foreign_events; },
              [&](const ScheduleSkipped&) { ++f.foreign_events; },
              [&](const SchedulePaused&) { ++f.foreign_events; },
              [&](const ScheduleResumed&) { ++f.foreign_events; },
              [&](const ScheduleRemoved&) { ++f.foreign_events; },
              [&](const ProjectWeightSet&) { ++f.foreign_events; },
              [&](const LimitSet&) { ++f.foreign_events; },
              [&](const LimitRemoved&) { ++f.foreign_events; },
              [&](const LimitClockCarried&) { ++f.foreign_events; },
              [&](const SegmentArchived&) { ++f.foreign_events; },
              [&](const KeyReleased&) { ++f.foreign_events; },
          },
          e.body);
      row = apply(std::move(row), stored);
      item_states.push_back({stored.seq, e.at, row, moved_since_pinned});
    }
  }

  // What the control plane was told against what the log holds.
  std::int64_t heads_told = 0, closes_told = 0;
  std::map<std::string, Micros> close_returned;
  for (const auto& o : observations) {
    if (!o.changed) continue;
    if (o.kind == Observation::Kind::head) {
      ++heads_told;
    } else {
      ++closes_told;
      close_returned[o.item] = o.t1;
    }
  }
  f.observation_mismatches = std::abs(heads_told - f.head_moves) + std::abs(closes_told - f.closes);

  // ---- each journal, against the ledger and the states ----------------------
  std::map<std::string, std::vector<Belief>> beliefs;  // by item
  struct Allowed {
    std::string session, item;
    Fence fence = 0;
    Micros t1 = 0;
  };
  std::vector<Allowed> allowed_gates;
  for (const auto& journal : journals) {
    const std::string& session = journal.session;
    std::map<std::string, std::size_t> holding;  // item -> index in beliefs[item], while held
    auto give_back = [&](const std::string& item, Micros when) {
      auto it = holding.find(item);
      if (it == holding.end()) return;
      auto& b = beliefs[item][it->second];
      b.end = std::min(b.end, when);
      holding.erase(it);
    };
    for (const auto& e : journal.entries) {
      switch (e.kind) {
        case EntryKind::answer: {
          ++f.rounds;
          if (e.result == "wait") {
            ++f.wait;
            bool backed = false;
            for (auto it = lease_ends.lower_bound({e.item, e.until, ""});
                 it != lease_ends.end() && std::get<0>(*it) == e.item &&
                 std::get<1>(*it) == e.until;
                 ++it) {
              if (std::get<2>(*it) != session) backed = true;
            }
            if (!backed || e.until <= e.t0) ++f.waits_unbacked;
          } else if (e.result == "no_safe_work") {
            ++f.no_safe_work;
            auto closed = closed_at.find(e.item);
            if (closed == closed_at.end() || closed->second > e.t1) ++f.no_safe_work_unbacked;
            break;
          } else if (e.result == "assigned") {
            const std::pair<std::string, Fence> key{e.item, e.fence};
            auto it = holding.find(e.item);
            const bool renewal = it != holding.end() && beliefs[e.item][it->second].fence == e.fence;
            if (renewal) {
              ++f.renewals;
              auto& b = beliefs[e.item][it->second];
              if (auto* stall = stalled_behind(e.t0, e.item); stall && b.end < stall->letting_go) {
                ++f.renewed_after_lapse;
              }
              if (e.lease_end < b.end) ++f.lease_shortened;
              b.end = e.lease_end;
              if (!extensions.take({e.item, e.lease_end})) ++f.unledgered_answers;
            } else {
              ++f.assigned;
              give_back(e.item, e.t0);
              // Told once, to the session the log gave it to, as logged.
              auto record = assignments.find(key);
              if (record == assignments.end() || record->second.told ||
                  record->second.session != session || record->second.lease_end != e.lease_end ||
                  record->second.head != e.head) {
                ++f.unledgered_answers;
              } else {
                record->second.told = true;
              }
              holding[e.item] = beliefs[e.item].size();
              beliefs[e.item].push_back({session, e.fence, e.t1, e.lease_end});
            }
          } else {
            ++f.unledgered_answers;  // an outcome the API does not have
          }
          if (auto closed = close_returned.find(e.item);
              closed != close_returned.end() && closed->second < e.t0) {
            ++f.answered_after_close;
          }
          break;
        }
        case EntryKind::extended: {
          ++f.extensions_told;
          if (!extensions.take({e.item, e.lease_end})) ++f.unledgered_extensions;
          if (auto it = holding.find(e.item); it != holding.end()) {
            auto& b = beliefs[e.item][it->second];
            if (auto* stall = stalled_behind(e.t0, e.item); stall && b.end < stall->letting_go) {
              ++f.renewed_after_lapse;
            }
            if (e.lease_end < b.end) ++f.lease_shortened;
            b.end = e.lease_end;
          }
          break;
        }
        case EntryKind::released: {
          give_back(e.item, e.t0);
          if (e.result == "ok") {
            ++f.releases_ok;
            if (!releases.take({e.item, e.fence})) ++f.release_mismatches;
          } else {
            ++f.releases_refused;
          }
          break;
        }
        case EntryKind::session_closed: {
          ++f.released_by_close;
          give_back(e.item, e.t0);
          if (!session_releases.take(e.item)) ++f.release_mismatches;
          break;
        }
        case EntryKind::gate: {
          ++f.gate_calls;
          const bool allowed = e.result == "allowed";
          if (const WriterStall* stall = e.write ? stalled_behind(e.t0, e.item) : nullptr) {
            ++f.gates_behind_writer_stall;
            auto it = holding.find(e.item);
            const bool lapsed = it == holding.end() ||
                                beliefs[e.item][it->second].fence != e.fence ||
                                beliefs[e.item][it->second].end < stall->letting_go;
            if (allowed && lapsed) ++f.allowed_on_lapsed_lease;
          }
          if (allowed) {
            ++f.allowed;
            allowed_gates.push_back({session, e.item, e.fence, e.t1});
            if (e.write) {
              ++f.allowed_writes;
              if (!mutations.take({e.item, session, e.fence, e.action, e.head})) {
                ++f.mutation_mismatches;
              }
            }
          } else {
            ++f.denials[e.result];
          }
          if (e.purpose == "stall") {
            ++f.stall_presentations;
            if (allowed) ++f.stall_allowed;
          } else if (e.purpose == "stale") {
            ++f.stale_presentations;
            if (e.result == to_string(GateReason::stale_fence)) ++f.stale_denied_as_stale_fence;
          } else if (e.purpose == "lost") {
            ++f.lost_presentations;
            if (allowed) ++f.lost_allowed;
          } else if (e.purpose == "merge") {
            ++f.merge_presentations;
          }
          // The verdict against every state the item was in while the
          // call ran: from the one read just before it, up to the last
          // event whose time is not after t1 (an event is stamped before
          // it commits, so a later stamp was not yet there).
          const auto& item_states = states[e.item];
          auto first = std::lower_bound(
              item_states.begin(), item_states.end(), e.seen_seq,
              [](const State& s, Seq seq) { return s.seq < seq; });
          if (first == item_states.end() || first->seq != e.seen_seq) {
            ++f.unplaced_verdicts;
            break;
          }
          if (first->moved_since_pinned && first->row.head == first->row.expected_head &&
              first->row.session == session) {
            ++f.verdicts_on_head_moved_back;
          }
          std::set<std::string> possible;
          for (auto s = first; s != item_states.end() && (s == first || s->at <= e.t1); ++s) {
            for (Micros at : {e.t0, e.t1}) {
              possible.insert(verdict_text(expected_refusal(
                  s->row, s->moved_since_pinned, session, e.fence, e.action, e.head, at)));
            }
          }
          if (possible.count(e.result) == 0) {
            ++f.verdict_mismatches;
          } else if (possible.size() == 1) {
            ++f.verdicts_exact;
          } else {
            ++f.verdicts_ambiguous;
          }
          break;
        }
      }
    }
  }
  f.untold_assignments = 0;
  for (const auto& [key, record] : assignments) {
    if (!record.told) ++f.untold_assignments;
  }
  f.untold_extensions = extensions.left();
  f.release_mismatches += releases.left() + session_releases.left();
  f.mutation_mismatches += mutations.left();

  // ---- R2 in real time: no two sessions hold one item at one moment --------
  for (const auto& g : allowed_gates) {
    for (const auto& b : beliefs[g.item]) {
      if (b.session == g.session && b.fence == g.fence && g.t1 > b.end) {
        ++f.allowed_after_lease_end;
        f.latest_allowed_ms = std::max(f.latest_allowed_ms, (g.t1 - b.end) / 1e3);
      }
      if (b.session != g.session && b.start < g.t1 && g.t1 < b.end) ++f.allowed_during_other_hold;
    }
  }
  bool any_gap = false;
  for (auto& [item, all] : beliefs) {
    std::vector<Belief> list;
    for (const auto& b : all) {
      if (b.end > b.start) list.push_back(b);  // else told only once its lease had ended
    }
    std::vector<std::pair<Micros, int>> edges;  // an end before a start at the same time
    for (const auto& b : list) {
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

}  // namespace cplane::probe::race
