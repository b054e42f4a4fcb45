// verify's audit of one stream (internal to verify/): the fold of its
// events through `apply`, and what the fold saw that no row can show.
//
// The replay (verify/replay.cpp) reads each event with read_event, which
// checks its index columns against its body, and folds it with fold_event,
// which runs the event's checks (audit_event: one visitor per stream kind,
// verify/event_checks.hpp) and then `apply`. LogFacts carries what one
// stream's audit learns for the streams replayed after it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cplane/ledger.hpp>

#include "events/event.hpp"
#include "projections/rows.hpp"
#include "storage/log_source.hpp"
#include "verify/chain_check.hpp"
#include "verify/flow_check.hpp"

namespace cplane::verify_detail {

// Progress is reported once every this many events.
inline constexpr std::int64_t kProgressEvery = 65536;

// What verify learns across streams: the projects the log created, and the
// streams an event was filed away from by its columns (their folds miss it).
struct LogFacts {
  std::set<std::string> projects;
  std::map<std::string, Seq> project_created_at;  // the seq of each project's creation
  bool project_log_unreadable = false;
  std::set<std::pair<StreamKind, std::string>> incomplete;
  LogChain chain;  // the log as a whole, against its digest
  // What items are checked against, from the streams replayed before them:
  // when each grant was made, and each session's life.
  std::map<std::pair<std::string, std::string>, Seq> grants;  // (project, actor) -> seq
  struct SessionLife {
    Seq opened = 0, closed = 0;  // seqs of session_opened, session_closed (0: open)
    std::string actor;           // "" also for an archived session (its anchor keeps none)
  };
  std::map<std::string, SessionLife> sessions;
  bool session_log_unreadable = false;
  // What schedules are checked against: every item queued under a
  // schedule's key (item id -> key), and those a fire named. Gathered as the
  // audit goes (it sees the facts as read-only otherwise).
  mutable std::map<std::string, std::string> schedule_items;
  mutable std::set<std::string> fired_items;
  // Schedules archived (removed, their fires in a segment): the items they
  // made are checked against their fires by the whole-history audit.
  std::set<std::string> archived_schedules;
  // The latest end of an archived item stream (0: none): claims up to it
  // are not in the flow replay. By segment: the latest end of its items.
  Micros items_archived_until = 0;
  std::map<std::string, Micros> items_archived_in;
  // The latest end of an item archived by an archive that left no
  // segment_archived (a build before archives were events, which did not
  // carry the limits' clocks either); 0: none. Set by note_legacy_archives
  // once the segments' streams were read.
  Micros legacy_archived_until = 0;
  void note_legacy_archives() {
    for (const auto& [segment, until] : items_archived_in) {
      if (!logged_segments.contains(segment)) {
        legacy_archived_until = std::max(legacy_archived_until, until);
      }
    }
  }
  // The events of items with a key and of limits, for the flow replay
  // once every stream was read (verify/flow_check.hpp).
  mutable FlowLog flow;
  bool item_log_unreadable = false;
  // Each segment's record as its segment_archived makes it (replayed last:
  // held against the segments table and the anchors).
  std::map<std::string, SegmentRow> logged_segments;
  bool segment_log_unreadable = false;

  // Why `session` was not open at `seq`, or "" when it was (or the session
  // log cannot say).
  std::string not_open(const std::string& session, Seq seq) const;
};

// The fold of one stream, plus what the fold saw that no row can show.
struct StreamAudit {
  StreamRef stream;
  std::int64_t events = 0;
  Micros first_at = 0, last_at = 0;  // of its readable events
  Seq first_seq = 0, last_seq = 0;
  // What the hash chain says about the stream: reported before the fold's
  // problems, since it names the cause.
  std::vector<LedgerProblem> chain_problems;
  // An event of this stream could not be decoded, or was filed elsewhere by
  // its columns: the fold is not the stream's, so nothing is compared with
  // it, and no check claims what the log lacks.
  bool unreadable = false;
  std::vector<LedgerProblem> problems;
  // Item streams.
  ItemRow item;
  bool created = false;
  bool reported_no_creation = false;
  bool archived = false;  // the stream has an anchor: it ended, its events are in a segment
  bool reported_before_project = false;
  int terminals = 0;
  // Incident streams.
  std::optional<IncidentLinkRow> incident;
  // Session streams.
  std::optional<SessionRow> session;
  Seq opened_seq = 0, closed_seq = 0;
  bool reported_outlived = false;  // an item held past its session's close
  // Project streams.
  std::optional<ProjectRow> project;
  Seq project_created_seq = 0;  // the seq of its project_created
  std::optional<ScheduleRow> schedule;
  std::map<std::string, ProjectActorRow> grants;  // by actor
  // Segment streams.
  std::optional<SegmentRow> segment;

  // The ids a problem names: the item for an item stream, else the project.
  LedgerProblem problem(ProblemKind kind, std::string project_id, std::string detail) const {
    return {kind, stream.kind == StreamKind::item ? stream.id : std::string(),
            std::move(project_id), std::move(detail)};
  }
};

// Decodes a raw event and checks its index columns against its body. Adds
// problems to the audit; returns nullopt when the body cannot be read.
std::optional<StoredEvent> read_event(const storage::RawEvent& raw, StreamAudit& audit,
                                      LogFacts& facts);

// The checks of one event against what its stream's events before it left
// (verify/event_checks.hpp), then its fold. Events of another stream than
// the audit's were filed here by their columns only (read_event reported
// them) and are skipped.
void audit_event(StreamAudit& a, const StoredEvent& stored, const LogFacts& facts);

// Reads one raw event of the audit's stream, counts it and audits it.
void fold_event(StreamAudit& audit, const storage::RawEvent& raw, LogFacts& facts);

// After an item stream's last event: it must not still be held by a
// session that has closed.
void audit_end(StreamAudit& a, const LogFacts& facts);

// What a summary counts of one stream's fold.
void summarize(const StreamAudit& audit, LogSummary& summary);

}  // namespace cplane::verify_detail
