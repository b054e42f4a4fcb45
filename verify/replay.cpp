// The replay of verify and rebuild (verify/replay.hpp): each stream kind's
// events, heads and rows merged on the stream id, each stream audited and
// each of its projections reconciled with the stored rows.
#include "verify/replay.hpp"

#include <algorithm>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "verify/chain_check.hpp"
#include "verify/descriptors.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

namespace {

// The differences of one row, each as "field: stored -> folded".
std::vector<std::string> describe(const std::vector<FieldDiff>& diffs) {
  std::vector<std::string> out;
  for (const auto& d : diffs) {
    out.push_back(fmt::format("{}: {} -> {}", d.field, d.stored, d.folded));
  }
  return out;
}

// One projection's side of the merge: its row cursor, the current row.
template <class P>
class RowSide {
 public:
  // `rows` null: a side with no rows.
  explicit RowSide(storage::RowSource* rows)
      : cursor_(rows != nullptr ? P::scan(*rows) : std::make_unique<NoRows>()) {
    advance();
  }

  const std::string* next_stream() const { return have_ ? &P::stream_id(row_) : nullptr; }

  // The stored rows of `stream_id` (the cursor must be at or past it).
  std::vector<typename P::Stored> take(const std::string& stream_id) {
    std::vector<typename P::Stored> out;
    while (have_ && P::stream_id(row_) == stream_id) {
      last_.assign(P::stream_id(row_));
      out.push_back(std::move(row_));
      advance();
    }
    return out;
  }

 private:
  struct NoRows final : storage::Cursor<typename P::Stored> {
    bool next(typename P::Stored&) override { return false; }
  };

  void advance() {
    have_ = cursor_->next(row_);
    // The merge needs ids in bytewise order (the backend contract). An id
    // stored as a BLOB (only by tampering) sorts elsewhere: stop rather
    // than report false problems.
    if (have_ && !last_.empty() && P::stream_id(row_) < last_) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{} rows are out of order near '{}': an id is stored with a "
                                     "type other than TEXT",
                                     P::table, P::stream_id(row_)));
    }
  }

  std::unique_ptr<storage::Cursor<typename P::Stored>> cursor_;
  typename P::Stored row_{};
  bool have_ = false;
  std::string last_;  // the stream id of the last row taken
};

void note(std::vector<RowChange>& list, std::int64_t& total, RowChange change) {
  ++total;
  if (list.size() < kMaxListedChanges) list.push_back(std::move(change));
}

template <class P>
void reconcile(RowSide<P>& side, StreamAudit& audit, const LogFacts& facts, const Reconcile& r) {
  auto stored = side.take(audit.stream.id);
  const std::size_t first_problem = r.problems != nullptr ? r.problems->size() : 0;
  if (r.problems != nullptr && audit.stream.kind == P::stream) {
    P::cross_check(audit, facts, *r.problems);
  }
  if (!r.compare_rows) {
    if (r.about != nullptr) {
      for (std::size_t i = first_problem; i < r.problems->size(); ++i) {
        r.about->emplace_back(audit.stream.kind, audit.stream.id);
      }
    }
    return;
  }
  const bool comparable = P::comparable(audit);
  const bool creates = P::creates(audit);
  // Rows per stream are few (one, or one per grant): match them by key in
  // place, without maps.
  std::vector<typename P::Row> folded = P::folded(audit);
  std::vector<bool> matched(folded.size(), false);
  for (auto& row : stored) {
    std::size_t at = 0;
    while (at < folded.size() && !P::same(row, folded[at])) ++at;
    const bool found = at < folded.size();
    if (found) matched[at] = true;
    if (r.problems != nullptr) {
      if (!found) {
        if (auto p = P::unexplained(row, audit)) r.problems->push_back(std::move(*p));
      } else if (comparable) {
        for (auto& p : P::disagree(row, folded[at], audit)) r.problems->push_back(std::move(p));
      }
    }
    if (r.report != nullptr) {
      if (!found && (P::erasable(audit) || audit.archived)) {
        // (An archived stream's anchor proves it ended: a row of it was put
        // back outside cplane, and would hand out its old fences again.)
        // A row its stream's whole, readable history does not make.
        note(r.report->changes, r.report->changes_total,
             {P::table, P::stored_key(row), "delete", {}});
        if (r.write_to != nullptr) P::erase(*r.write_to, row);
      } else if (!found) {
        // No history at all. The row may be the last copy of an item whose
        // history was lost (the heads and digest are plain values: removing
        // a stream and fixing them needs no hashing), or it was made up
        // outside cplane: rebuild cannot tell, so it never destroys it.
        // verify keeps naming it; delete it by hand if it was made up.
        note(r.report->kept, r.report->kept_total,
             {P::table, P::stored_key(row), "keep",
              {std::string(P::no_creation) + ": no history in the log, so the row may be the "
                                              "last copy; left alone"}});
      } else if (auto loss = P::evidence_of_loss(row, folded[at]); !loss.empty()) {
        note(r.report->kept, r.report->kept_total,
             {P::table, P::key(folded[at]), "keep", {std::move(loss)}});
      } else if (!creates) {
        // Events without their creation: the log fails its own checks and
        // rebuild refuses (see rebuild below); nothing to decide here.
      } else if (auto d = P::diff(row, folded[at]); !d.empty()) {
        note(r.report->changes, r.report->changes_total,
             {P::table, P::key(folded[at]), "update", describe(d)});
        if (r.write_to != nullptr) P::put(*r.write_to, folded[at]);
      }
    }
  }
  // Folded rows with no stored counterpart.
  for (std::size_t at = 0; at < folded.size(); ++at) {
    if (matched[at]) continue;
    if (r.problems != nullptr) {
      if (auto p = P::missing(folded[at], audit)) r.problems->push_back(std::move(*p));
    }
    if (r.report != nullptr && creates) {
      note(r.report->changes, r.report->changes_total,
           {P::table, P::key(folded[at]), "insert", {}});
      if (r.write_to != nullptr) P::put(*r.write_to, folded[at]);
    }
  }
  if (r.about != nullptr) {
    for (std::size_t i = first_problem; i < r.problems->size(); ++i) {
      r.about->emplace_back(audit.stream.kind, audit.stream.id);
    }
  }
}

// rebuild: each segment's record as its segment_archived makes it; a record
// with neither an event nor an anchor goes. A record with anchors and no
// event (an archive before archives were events) is left as it is, or,
// when it is gone, made again from its anchors (as a restore without the
// segments records it: no file, no size).
void rebuild_segment_rows(const LogFacts& facts, const std::vector<SegmentRow>& recorded,
                          storage::Backend& target, bool write, RebuildReport& report) {
  auto note = [&](RowChange change) {
    ++report.changes_total;
    if (report.changes.size() < kMaxListedChanges) report.changes.push_back(std::move(change));
  };
  std::map<std::string, const SegmentRow*> by_id;
  for (const auto& row : recorded) by_id.emplace(row.segment_id, &row);
  for (const auto& [id, logged] : facts.logged_segments) {
    const auto found = by_id.find(id);
    if (found != by_id.end() && *found->second == logged) continue;
    note({"segments", id, found == by_id.end() ? "insert" : "update", {}});
    if (write) target.put_segment(logged);
  }
  for (const auto& row : recorded) {
    if (facts.logged_segments.contains(row.segment_id) ||
        facts.chain.anchors_segment(row.segment_id)) {
      continue;
    }
    note({"segments", row.segment_id, "delete", {}});
    if (write) target.delete_segment(row.segment_id);
  }
  for (auto& row : facts.chain.records_from_anchors()) {
    if (by_id.contains(row.segment_id) || facts.logged_segments.contains(row.segment_id)) continue;
    note({"segments", row.segment_id, "insert", {}});
    if (write) target.put_segment(row);
  }
}

// What an archived stream's anchor still tells the streams checked after
// it: an item a schedule made is still the one its fire names; a closed
// session lived from its first seq to its last (its events name no actor
// here: the grant check of its assignments is the whole-history audit's);
// a removed schedule's fires are in its segment.
void note_archived(const storage::StreamAnchor& anchor, StreamKind kind, LogFacts& facts) {
  const std::string& sid = anchor.stream_id;
  if (kind == StreamKind::item) {
    facts.items_archived_until = std::max(facts.items_archived_until, anchor.ended_at);
    Micros& until = facts.items_archived_in[anchor.segment_id];
    until = std::max(until, anchor.ended_at);
  }
  if (kind == StreamKind::item && anchor.idem_key.rfind("schedule:", 0) == 0) {
    facts.schedule_items.emplace(sid, anchor.idem_key);
  } else if (kind == StreamKind::session) {
    std::vector<Seq> seqs;
    if (storage::unpack_seqs(anchor.seqs, seqs) && !seqs.empty()) {
      facts.sessions[sid] = {seqs.front(), anchor.last_seq, ""};
    } else {
      facts.session_log_unreadable = true;  // the digest names the edited anchor
    }
  } else if (kind == StreamKind::schedule) {
    facts.archived_schedules.insert(sid);
  }
}

// Replays every stream of `kind` and reconciles each of the projections
// with it. `on_stream(audit)` sees each stream's audit after its fold.
template <class... P, class OnStream>
void replay(storage::LogSource& log, storage::RowSource* rows, StreamKind kind, LogFacts& facts,
            const Reconcile& r, std::int64_t& events_read, std::int64_t total,
            const Progress& progress, OnStream&& on_stream) {
  auto events = log.scan_stream(kind);
  auto heads = log.scan_heads(kind);
  auto anchors = log.scan_anchors(kind);
  std::tuple<RowSide<P>...> sides{RowSide<P>(rows)...};
  (void)rows;  // a kind with no projection of its own (limits) reads no rows here
  storage::RawEvent raw;
  storage::StreamHead head;
  bool have_event = events->next(raw);
  bool have_head = heads->next(head);
  storage::StreamAnchor anchor;
  bool have_anchor = anchors->next(anchor);
  const std::string kind_name(to_string(kind));
  std::string previous;
  bool first = true;
  for (;;) {
    // The next stream id: the least of the event side, the heads and every
    // row side.
    const std::string* next = have_event ? &raw.stream_id : nullptr;
    if (have_head && (next == nullptr || head.stream_id < *next)) next = &head.stream_id;
    if (have_anchor && (next == nullptr || anchor.stream_id < *next)) next = &anchor.stream_id;
    std::apply(
        [&](auto&... side) {
          ((side.next_stream() != nullptr && (next == nullptr || *side.next_stream() < *next)
                ? void(next = side.next_stream())
                : void()),
           ...);
        },
        sides);
    if (next == nullptr) break;
    std::string id = *next;
    if (!first && id <= previous) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("stream ids are out of order near '{}': an id is stored "
                                     "with a type other than TEXT",
                                     id));
    }
    first = false;
    previous.assign(id);
    StreamAudit audit;
    audit.stream = {kind, std::move(id)};
    const std::string& sid = audit.stream.id;
    if (!facts.incomplete.empty() && facts.incomplete.contains({kind, sid})) {
      audit.unreadable = true;
      audit.reported_no_creation = true;
    }
    const bool anchored = have_anchor && anchor.stream_id == sid;
    const bool live = (have_event && raw.stream_id == sid) || (have_head && head.stream_id == sid);
    if (anchored) note_archived(anchor, kind, facts);
    if (anchored && !live) {
      // An archived stream and nothing else of it: its anchor folds into
      // the log's checks, and no row may be left of it (a row side at this
      // id goes through the fold below, which names a row without events).
      bool row = false;
      std::apply([&](auto&... side) { ((row = row || (side.next_stream() != nullptr &&
                                                       *side.next_stream() == sid)), ...); },
                 sides);
      if (!row) {
        facts.chain.anchor(anchor);
        have_anchor = anchors->next(anchor);
        continue;
      }
    }
    StreamChain chain(kind_name, sid);
    if (anchored) {
      audit.archived = true;
      facts.chain.anchor(anchor);
      if (live) {
        // An archived stream's events went to its segment: any here were
        // put back, or written outside cplane.
        audit.chain_problems.push_back(
            {ProblemKind::head_disagrees, kind == StreamKind::item ? sid : std::string(),
             anchor.project_id,
             fmt::format("{} {} was archived (segment {}, revision {} at seq {}), yet the live "
                         "log holds events or a head of it: they were put back, or its anchor "
                         "written, outside cplane",
                         kind_name, quoted(sid), anchor.segment_id, anchor.revision,
                         anchor.last_seq)});
        facts.chain.stream_broken();
      }
      have_anchor = anchors->next(anchor);
    }
    while (have_event && raw.stream_id == sid) {
      chain.add(raw, audit.chain_problems);
      facts.chain.event(raw.seq);
      fold_event(audit, raw, facts);
      if (++events_read % kProgressEvery == 0 && progress) progress(events_read, total);
      have_event = events->next(raw);
    }
    const bool headed = have_head && head.stream_id == sid;
    if (headed) facts.chain.head(head);
    chain.finish(headed ? &head : nullptr, audit.chain_problems);
    if (r.bounds != nullptr && kind == StreamKind::item) {
      const auto& unbounded = r.bounds->unbounded;
      if (std::binary_search(unbounded.begin(), unbounded.end(), sid)) {
        // Its head was lost with the page it was on: any of the lost events
        // may have been its claims.
        audit.item.fence += r.bounds->lost_events;
      } else if (chain.broken() && headed) {
        // recover, over a stream that lost events: a lost claim may have
        // handed out a fence above the fold's. Every claim is one event, so
        // the head's revision bounds every fence the item ever had: the row
        // takes it, and the next claim goes above it.
        audit.item.fence = std::max<Fence>(audit.item.fence, static_cast<Fence>(head.revision));
      }
    }
    if (headed) have_head = heads->next(head);
    if (chain.broken()) facts.chain.stream_broken();
    if (kind == StreamKind::item) audit_end(audit, facts);
    on_stream(audit);
    std::apply([&](auto&... side) { (reconcile(side, audit, facts, r), ...); }, sides);
  }
}

// Events whose stream_kind column names no kind: each is an index fault (its
// body says where it belongs), and no stream's scan sees it. (Scanned last,
// so the streams they belong to are already reconciled.)
void audit_unfiled(storage::LogSource& log, StreamAudit& audit, LogFacts& facts,
                   std::int64_t& events_read) {
  auto events = log.scan_unfiled();
  storage::RawEvent raw;
  while (events->next(raw)) {
    ++events_read;
    facts.chain.event(raw.seq);
    read_event(raw, audit, facts);  // reports the stream_kind column, or the body
  }
  for (const auto& head : log.unfiled_heads()) facts.chain.head(head);
}

}  // namespace

void replay_all(storage::LogSource& log, storage::RowSource* rows, const Reconcile& r,
                LogFacts& facts, std::int64_t& events_read, const Progress& progress,
                const std::function<void(StreamAudit&)>& on_stream) {
  // The total is for a progress display only: counting reads the log once
  // more, so only when someone is watching.
  const std::int64_t total = progress ? log.event_count() : 0;
  if (log.partial_history()) {
    facts.project_log_unreadable = true;
    facts.session_log_unreadable = true;
    facts.item_log_unreadable = true;
  }
  replay<ProjectsProjection, GrantsProjection>(
      log, rows, StreamKind::project, facts, r, events_read, total, progress,
      [&](StreamAudit& audit) {
        if (audit.project) {
          facts.projects.insert(audit.stream.id);
          facts.project_created_at.emplace(audit.stream.id, audit.project_created_seq);
        }
        for (const auto& [actor, grant] : audit.grants) {
          facts.grants.emplace(std::pair{audit.stream.id, actor}, grant.last_seq);
        }
        if (audit.unreadable) facts.project_log_unreadable = true;
        on_stream(audit);
      });
  replay<SessionsProjection>(log, rows, StreamKind::session, facts, r, events_read, total,
                             progress, [&](StreamAudit& audit) {
                               if (audit.session) {
                                 facts.sessions[audit.stream.id] = {
                                     audit.opened_seq, audit.closed_seq, audit.session->actor};
                               }
                               if (audit.unreadable) facts.session_log_unreadable = true;
                               on_stream(audit);
                             });
  // An event filed under another project or session by its columns: which
  // projects the log created, or when sessions lived, is no longer known
  // for sure.
  for (const auto& [kind, id] : facts.incomplete) {
    if (kind == StreamKind::project) facts.project_log_unreadable = true;
    if (kind == StreamKind::session) facts.session_log_unreadable = true;
  }
  replay<TerminalLocksProjection, ItemsProjection>(
      log, rows, StreamKind::item, facts, r, events_read, total, progress,
      [&](StreamAudit& audit) {
        // An unreadable item may be a schedule's: which items schedules
        // made is then no longer known for sure.
        if (audit.unreadable) facts.item_log_unreadable = true;
        on_stream(audit);
      });
  replay<IncidentsProjection>(log, rows, StreamKind::incident, facts, r, events_read, total,
                              progress, on_stream);
  replay<SchedulesProjection>(log, rows, StreamKind::schedule, facts, r, events_read, total,
                              progress, on_stream);
  // Segments: each record is its segment_archived (checked with the
  // anchors at the end, once the digest has counted them). Read before the
  // flow replay: which archives carried the limits' clocks.
  replay<>(log, rows, StreamKind::segment, facts, r, events_read, total, progress,
           [&](StreamAudit& audit) {
             if (audit.unreadable) facts.segment_log_unreadable = true;
             if (audit.segment) facts.logged_segments[audit.stream.id] = *audit.segment;
             on_stream(audit);
           });
  facts.note_legacy_archives();
  // Limits: their rows are the flow replay's, once every stream was read.
  replay<>(log, rows, StreamKind::limit, facts, r, events_read, total, progress, on_stream);
  {
    StreamAudit flow;
    flow.stream = {StreamKind::limit, ""};
    const FlowLog::Fold fold = facts.flow.fold(facts.items_archived_until == 0);
    flow.problems = fold.problems;
    if (rows != nullptr && r.problems != nullptr && r.compare_rows && !facts.item_log_unreadable) {
      const std::size_t first = r.problems->size();
      check_flow_rows(fold, *rows, facts.legacy_archived_until, *r.problems);
      if (r.about != nullptr) {
        for (std::size_t i = first; i < r.problems->size(); ++i) {
          r.about->emplace_back(StreamKind::limit, (*r.problems)[i].project_id);
        }
      }
    }
    if (r.report != nullptr) {
      storage::Backend* target = r.write_to;
      if (target == nullptr) target = dynamic_cast<storage::Backend*>(rows);
      if (target != nullptr) {
        rebuild_flow_rows(fold, *target, r.write_to != nullptr, facts.legacy_archived_until,
                          r.report->changes, r.report->changes_total);
      }
    }
    if (!flow.problems.empty()) on_stream(flow);
  }
  // Every item a schedule made is named by exactly one fire.
  {
    StreamAudit orphans;
    orphans.stream = {StreamKind::schedule, ""};
    if (!facts.item_log_unreadable) {
      for (const auto& [item, key] : facts.schedule_items) {
        if (facts.fired_items.contains(item)) continue;
        // schedule:NAME@OCCURRENCE, of a schedule archived: its fires are
        // in a segment.
        const auto at = key.rfind('@');
        constexpr std::size_t kPrefix = sizeof("schedule:") - 1;
        if (at != std::string::npos && at > kPrefix &&
            facts.archived_schedules.contains(key.substr(kPrefix, at - kPrefix))) {
          continue;
        }
        orphans.problems.push_back({ProblemKind::schedule_fire_unmatched, item, "",
                                    fmt::format("item {} is keyed {}, but no schedule_fired "
                                                "names it",
                                                quoted(item), quoted(key))});
      }
    }
    if (!orphans.problems.empty()) on_stream(orphans);
  }
  StreamAudit unfiled;
  audit_unfiled(log, unfiled, facts, events_read);
  // What no stream could show: a stream removed with its head, a head
  // edited, seqs missing.
  facts.chain.finish(log.log_digest(), log.seqs_dense(), unfiled.chain_problems);
  const auto recorded = log.recorded_segments();
  const bool segments_known = !facts.segment_log_unreadable;
  if (r.problems != nullptr) {
    facts.chain.check_segments(recorded, segments_known ? &facts.logged_segments : nullptr,
                               unfiled.chain_problems);
  }
  if (r.report != nullptr && recorded && segments_known) {
    storage::Backend* target = r.write_to;
    if (target == nullptr) target = dynamic_cast<storage::Backend*>(rows);
    if (target != nullptr) {
      rebuild_segment_rows(facts, *recorded, *target, r.write_to != nullptr, *r.report);
    }
  }
  on_stream(unfiled);
  if (progress) progress(events_read, total);
}

}  // namespace cplane::verify_detail
