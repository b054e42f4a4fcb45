#include "projections/apply.hpp"

#include "events/names.hpp"
#include "projections/rules.hpp"

namespace cplane {

std::string_view to_string(ItemStatus status) { return name_of(status); }

std::optional<ItemStatus> parse_item_status(std::string_view text) {
  return enum_named<ItemStatus>(text);
}

// Each fold visits the event exhaustively: one case per event kind, no
// catch-all, so that a new kind that is not decided on here fails to compile.
// Events of another stream leave the row as it is.

ItemRow apply(ItemRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  const bool changed = std::visit(
      Overloaded{
          [&](const ItemQueued& queued) {
            row.item_id = e.item_id;
            row.project_id = e.project_id;
            row.payload = queued.payload;
            row.status = ItemStatus::ready;
            row.queued_seq = stored.seq;
            row.queued_at = e.at;
            row.kind = queued.kind;
            row.ref = queued.ref;
            row.head = queued.head;
            row.author = queued.author;
            row.priority = queued.priority;
            row.key = queued.key;
            row.max_attempts = queued.max_attempts;
            row.backoff = queued.backoff;
            row.attempt_limit = queued.max_attempts;
            row.concurrency_key = queued.concurrency_key;
            // Delayed: scheduled until run_at; a run_at already past is no delay.
            if (queued.run_at > e.at) {
              row.status = ItemStatus::scheduled;
              row.run_at = queued.run_at;
            }
            return true;
          },
          [&](const AttemptFailed& failed) {
            // The attempt ended; the item waits its backoff, then a claim
            // takes it under a higher fence. Nobody holds it meanwhile.
            row.status = ItemStatus::scheduled;
            row.run_at = failed.retry_at;
            row.ended_fence = failed.fence;
            row.lease_expires_at = 0;
            row.detail = failed.detail;
            row.session.clear();
            row.actions.clear();
            row.expected_head.clear();
            row.head_moved = false;
            return true;
          },
          [&](const ItemRetried& retried) {
            // Redriven: ready at the back of the queue, with more attempts.
            // The attempt that failed last stays refused (stale_fence).
            row.status = ItemStatus::ready;
            row.ended_fence = row.fence;
            row.queued_seq = stored.seq;
            row.queued_at = e.at;
            row.run_at = 0;
            row.attempt_limit = retried.attempts == 0 ? 0 : row.attempts + retried.attempts;
            row.detail.clear();
            row.close_reason.clear();
            row.session.clear();
            row.actions.clear();
            row.expected_head.clear();
            row.head_moved = false;
            return true;
          },
          [&](const ItemRescheduled& rescheduled) {
            const bool later = rescheduled.run_at > e.at;
            row.status = later ? ItemStatus::scheduled : ItemStatus::ready;
            row.run_at = later ? rescheduled.run_at : 0;
            return true;
          },
          [&](const ItemCancelled& cancelled) {
            // Terminal; who held it (owner, session, fence) stays on record,
            // so that its holder is told why its reports are refused.
            row.status = ItemStatus::cancelled;
            row.lease_expires_at = 0;
            row.run_at = 0;
            row.detail = cancelled.reason;
            row.terminal_since = 0;
            row.terminal_reason.clear();
            return true;
          },
          [&](const ItemClaimed& claimed) {
            row.status = ItemStatus::claimed;
            row.run_at = 0;
            row.ended_fence = 0;
            row.owner = claimed.owner;
            row.fence = claimed.fence;
            row.attempts = claimed.attempt;
            row.lease_expires_at = claimed.lease_expires_at;
            // A worker's claim is no session's assignment.
            row.session.clear();
            row.actions.clear();
            row.expected_head.clear();
            row.head_moved = false;
            return true;
          },
          [&](const ItemAssigned& assigned) {
            // A claim by a session: the same fence counter, plus what it
            // may do and the head it was given.
            row.status = ItemStatus::claimed;
            row.run_at = 0;
            row.ended_fence = 0;
            row.owner = assigned.session;
            row.session = assigned.session;
            row.fence = assigned.fence;
            row.attempts = assigned.attempt;
            row.lease_expires_at = assigned.lease_expires_at;
            row.actions = assigned.actions;
            row.expected_head = assigned.expected_head;
            row.head_moved = false;
            return true;
          },
          [&](const HeadMoved& moved) {
            row.head = moved.head;
            if (!row.session.empty()) row.head_moved = true;  // a pinned head no longer holds
            return true;
          },
          [&](const ReviewChanged& changed) {
            row.review = changed.review;
            return true;
          },
          [&](const ItemClosed& closed) {
            // Terminal for everyone; who held it (owner, session, fence)
            // stays on record.
            row.status = ItemStatus::closed;
            row.close_reason = std::string(to_string(closed.reason));
            row.lease_expires_at = 0;
            row.run_at = 0;
            row.terminal_since = 0;
            row.terminal_reason.clear();
            return true;
          },
          [&](const MutationRecorded&) {
            // A fact for the history: the assignment stands as it was.
            return true;
          },
          [&](const TerminalPathEntered& entered) {
            row.terminal_since = e.at;
            row.terminal_reason = entered.reason;
            return true;
          },
          [&](const TerminalPathLeft&) {
            row.terminal_since = 0;
            row.terminal_reason.clear();
            return true;
          },
          [&](const ItemFinished& finished) {
            row.status = finished.outcome == Outcome::done ? ItemStatus::done : ItemStatus::failed;
            row.lease_expires_at = 0;
            row.run_at = 0;
            row.terminal_since = 0;  // off the terminal path: the work ended
            row.terminal_reason.clear();
            row.detail = finished.detail;
            return true;
          },
          [&](const LeaseExtended& extended) {
            row.lease_expires_at = extended.lease_expires_at;
            return true;
          },
          [&](const LeaseExpired&) {
            // A fact for the history: the row stays claimed and lapsed.
            return true;
          },
          [&](const KeyReleased&) {
            // The key deduplicates no more. The item ended when its
            // terminal event says (updated_at stays: an archive's --before
            // goes by it), only its last event is this one.
            row.key.clear();
            row.last_seq = stored.seq;
            return false;
          },
          [&](const ItemReleased&) {
            // Ready again, in its place in the queue; the fence stays, so
            // the next claim takes a higher one. The owner is kept, as
            // after a finish: who held it last.
            row.status = ItemStatus::ready;
            row.lease_expires_at = 0;
            // A release gives the attempt back: under a policy its limit
            // moves with it, so that what counts is attempts that failed or
            // lapsed, and a ready item always has one left.
            if (row.attempt_limit != 0) ++row.attempt_limit;
            row.session.clear();
            row.actions.clear();
            row.expected_head.clear();
            row.head_moved = false;
            return true;
          },
          OfOtherStreams<StreamKind::item, bool>{},
      },
      e.body);
  if (changed) {
    row.updated_at = e.at;
    row.last_seq = stored.seq;
  }
  return row;
}

ProjectRow apply(ProjectRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  std::visit(Overloaded{
                 [&](const ProjectCreated& created) {
                   row.project_id = e.project_id;
                   row.title = created.title;
                   row.status = created.status;
                   row.created_at = e.at;
                   row.last_seq = stored.seq;
                 },
                 [&](const RetryPolicySet& policy) {
                   row.max_attempts = policy.max_attempts;
                   row.backoff = policy.backoff;
                   row.last_seq = stored.seq;
                 },
                 [&](const ProjectPaused& paused) {
                   row.paused = true;
                   row.pause_reason = paused.reason;
                   row.last_seq = stored.seq;
                 },
                 [&](const ProjectResumed&) {
                   row.paused = false;
                   row.pause_reason.clear();
                   row.last_seq = stored.seq;
                 },
                 [&](const ProjectWeightSet& set) {
                   row.weight = set.weight;
                   row.last_seq = stored.seq;
                 },
                 // The round-robin's state: an item's claim, not a project
                 // event (last_seq stays the project stream's).
                 [&](const ItemClaimed& claimed) {
                   if (claimed.fair_pass != 0) row.fair_pass = claimed.fair_pass;
                 },
                 [](const ActorAssigned&) {},  // an assignment row's, not the project's
                 OfOtherStreams<StreamKind::project>{},
             },
             e.body);
  return row;
}

ProjectActorRow apply(ProjectActorRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  std::visit(Overloaded{
                 [&](const ActorAssigned& assigned) {
                   row.project_id = e.project_id;
                   row.actor = assigned.actor;
                   row.assigned_at = e.at;
                   row.last_seq = stored.seq;
                 },
                 [](const ProjectCreated&) {},  // the project's row, not an assignment
                 [](const RetryPolicySet&) {},
                 [](const ProjectPaused&) {},
                 [](const ProjectResumed&) {},
                 [](const ProjectWeightSet&) {},
                 OfOtherStreams<StreamKind::project>{},
             },
             e.body);
  return row;
}

SessionRow apply(SessionRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  const bool changed = std::visit(
      Overloaded{
          [&](const SessionOpened& opened) {
            row.session_id = opened.session;
            row.actor = opened.actor;
            row.opened_at = e.at;
            return true;
          },
          [](const SessionSeen&) { return true; },
          [&](const SessionClosed&) {
            row.closed_at = e.at;
            return true;
          },
          OfOtherStreams<StreamKind::session, bool>{},
      },
      e.body);
  if (changed) {
    row.last_seen_at = e.at;
    row.last_seq = stored.seq;
  }
  return row;
}

ScheduleRow apply(ScheduleRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  const bool changed = std::visit(
      Overloaded{
          [&](const ScheduleCreated& created) {
            row.name = created.name;
            row.project_id = e.project_id;
            row.cron = created.cron;
            row.zone = created.zone;
            row.payload = created.payload;
            row.overlap_skip = created.overlap_skip;
            row.catch_up = created.catch_up;
            row.next_at = created.next_at;
            row.created_at = e.at;
            return true;
          },
          [&](const ScheduleFired& fired) {
            row.last_item = fired.item_id;
            row.last_occurrence = fired.occurrence;
            row.next_at = fired.next_at;
            ++row.fired;
            return true;
          },
          [&](const ScheduleSkipped& skipped) {
            row.last_occurrence = skipped.occurrence;
            row.next_at = skipped.next_at;
            return true;
          },
          [&](const SchedulePaused&) {
            row.paused = true;
            return true;
          },
          [&](const ScheduleResumed& resumed) {
            row.paused = false;
            row.next_at = resumed.next_at;
            return true;
          },
          [&](const ScheduleRemoved&) {
            row.removed = true;
            return true;
          },
          OfOtherStreams<StreamKind::schedule, bool>{},
      },
      e.body);
  if (changed) {
    row.updated_at = e.at;
    row.last_seq = stored.seq;
  }
  return row;
}

LimitRow apply(LimitRow row, const StoredEvent& stored) {
  const Event& e = stored.event;
  // A claim of an item with the key: the rate's next arrival moves on.
  const auto claim = [&](const std::string& key) {
    if (key != row.key || row.removed) return;
    row.tat = gcra_advance(row, e.at);
  };
  std::visit(Overloaded{
                 [&](const LimitSet& set) {
                   if (row.last_seq == 0 || row.removed) row.created_at = e.at;
                   row.key = set.key;
                   row.concurrency = set.concurrency;
                   row.rate_count = set.rate_count;
                   row.rate_period = set.rate_period;
                   row.burst = set.burst;
                   row.removed = false;
                   row.updated_at = e.at;
                   row.last_seq = stored.seq;
                 },
                 [&](const LimitRemoved&) {
                   row.removed = true;
                   row.concurrency = 0;
                   row.rate_count = 0;
                   row.rate_period = 0;
                   row.burst = 0;
                   row.tat = 0;
                   row.updated_at = e.at;
                   row.last_seq = stored.seq;
                 },
                 // Claims went to a segment: the clock they left, as of here.
                 [&](const LimitClockCarried& carried) {
                   row.tat = carried.tat;
                   row.last_seq = stored.seq;
                 },
                 [&](const ItemClaimed& claimed) { claim(claimed.concurrency_key); },
                 [&](const ItemAssigned& assigned) { claim(assigned.concurrency_key); },
                 OfOtherStreams<StreamKind::limit>{},
             },
             e.body);
  return row;
}

namespace {

// "0a1b..." -> its bytes; "" for text that is not hex of whole bytes.
std::string bytes_of_hex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  if (hex.size() % 2 != 0) return out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

}  // namespace

SegmentRow apply(SegmentRow row, const StoredEvent& stored) {
  const auto* archived = std::get_if<SegmentArchived>(&stored.event.body);
  if (archived == nullptr) return row;  // every other kind belongs to other streams
  row.segment_id = archived->segment_id;
  row.digest = bytes_of_hex(archived->digest);
  row.file = archived->file;
  row.before = archived->before;
  row.project_id = archived->project_id;
  row.streams = archived->streams;
  row.events = archived->events;
  row.bytes = archived->bytes;
  row.archived_at = stored.event.at;
  return row;
}

IncidentLinkRow apply(IncidentLinkRow row, const StoredEvent& stored) {
  const auto* linked = std::get_if<IncidentLinked>(&stored.event.body);
  if (linked == nullptr) return row;  // every other kind belongs to other streams
  if (row.last_seq == 0) row.linked_at = stored.event.at;
  row.incident_id = incident_stream_id(linked->provider, linked->fingerprint, linked->org,
                                       linked->repo, linked->environment);
  row.provider = linked->provider;
  row.fingerprint = linked->fingerprint;
  row.org = linked->org;
  row.repo = linked->repo;
  row.environment = linked->environment;
  row.target = linked->target;
  row.status = linked->status;
  row.event_count = linked->event_count;
  row.permalink = linked->permalink;
  row.first_seen = linked->first_seen;
  row.last_seen = linked->last_seen;
  row.linked_prs = linked->linked_prs;
  row.updated_at = stored.event.at;
  row.last_seq = stored.seq;
  return row;
}

}  // namespace cplane
