// verify's checks of one event, per stream kind (internal to verify/):
// what the log must say on its own, whatever the rows (creation first,
// nothing after the terminal event, fences that rise, leases that run
// forward, ...).
//
// One visitor per stream kind, each with one call per event kind of its
// stream; audit_event (verify/audit.cpp) visits the event's body with all
// of them at once. There is no catch-all: an event kind no visitor takes
// does not compile, nor does one that two take.
//   ItemChecks      verify/audit_item.cpp
//   ProjectChecks   verify/audit_project.cpp
//   SessionChecks   verify/audit_session.cpp
//   ScheduleChecks  verify/audit_schedule.cpp
//   LimitChecks     verify/audit_schedule.cpp (with the schedules: both
//                   are a small stream kind of their own)
//   SegmentChecks   verify/audit_schedule.cpp (one event a stream)
//   IncidentChecks  here (an incident_linked is the link whole: the fold
//                   is the check)
#pragma once

#include <cstdint>
#include <string>

#include "events/event.hpp"
#include "verify/stream_audit.hpp"

namespace cplane::verify_detail {

// One event under check: its stream's audit so far, the event, and what
// the streams replayed before it showed.
struct EventCheck {
  StreamAudit& a;
  const Event& e;
  Seq seq;
  const LogFacts& facts;

  // Adds a problem about the event's stream.
  void problem(ProblemKind kind, std::string detail) const {
    a.problems.push_back(a.problem(kind, e.project_id, std::move(detail)));
  }
};

struct ItemChecks : EventCheck {
  // What the event must show against the other streams, before its own
  // checks: no closed session still holds the item, and the item's
  // project was created before it.
  void cross_stream() const;

  void operator()(const ItemQueued& queued) const;
  void operator()(const ItemClaimed& claimed) const;
  void operator()(const ItemAssigned& assigned) const;
  void operator()(const HeadMoved&) const;
  void operator()(const ReviewChanged&) const;
  void operator()(const ItemClosed&) const;
  void operator()(const MutationRecorded& m) const;
  void operator()(const TerminalPathEntered&) const;
  void operator()(const TerminalPathLeft&) const;
  void operator()(const ItemFinished& finished) const;
  void operator()(const LeaseExtended& extended) const;
  void operator()(const LeaseExpired& expired) const;
  void operator()(const ItemReleased& released) const;
  void operator()(const AttemptFailed& failed) const;
  void operator()(const ItemRetried&) const;
  void operator()(const KeyReleased& released) const;
  void operator()(const ItemRescheduled&) const;
  void operator()(const ItemCancelled& cancelled) const;

 private:
  // Every event but the first needs the item queued, and none but a retry
  // follows a terminal one.
  void item_created_first() const;
  // A claim, by a worker or by a session: the same fence counter and rules.
  void audit_claim(const std::string& owner, Fence fence, std::uint32_t attempt,
                   Micros lease_expires_at) const;
  // A forge fact (head, review) only on a pr.
  void forge_fact() const;
};

struct ProjectChecks : EventCheck {
  void operator()(const ProjectCreated&) const;
  void operator()(const ActorAssigned& granted) const;
  void operator()(const RetryPolicySet&) const;
  void operator()(const ProjectPaused&) const;
  void operator()(const ProjectResumed&) const;
  void operator()(const ProjectWeightSet&) const;

 private:
  void project_created_first() const;
};

// A limit's stream: limit_set first (the limit whole each time), then
// limit_removed or more limit_set; an archive's limit_clock_carried after
// limit_set.
struct LimitChecks : EventCheck {
  void operator()(const LimitSet&) const;
  void operator()(const LimitRemoved&) const;
  void operator()(const LimitClockCarried&) const;

 private:
  void limit_set_first(std::string_view kind) const;
};

// A segment's stream: one segment_archived, the record whole.
struct SegmentChecks : EventCheck {
  void operator()(const SegmentArchived&) const;
};

struct SessionChecks : EventCheck {
  void operator()(const SessionOpened&) const;
  void operator()(const SessionSeen&) const;
  void operator()(const SessionClosed&) const;

 private:
  // Every event but the first needs the session opened, and none follows
  // its close.
  void session_open_first() const;
};

struct ScheduleChecks : EventCheck {
  void operator()(const ScheduleCreated&) const;
  void operator()(const ScheduleFired& fired) const;
  void operator()(const ScheduleSkipped& skipped) const;
  void operator()(const SchedulePaused&) const;
  void operator()(const ScheduleResumed&) const;
  void operator()(const ScheduleRemoved&) const;

 private:
  // Every event but the first needs the schedule created, and none follows
  // its removal.
  void schedule_created_first() const;
};

struct IncidentChecks : EventCheck {
  void operator()(const IncidentLinked&) const {}  // the link whole: the fold is the check
};

}  // namespace cplane::verify_detail
