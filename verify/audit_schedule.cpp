// verify's checks of a schedule stream's events (verify/event_checks.hpp):
// created once and first, nothing after its removal, each occurrence
// fired or skipped once and in order, each fire naming the one item it
// made.
#include <fmt/format.h>

#include "verify/event_checks.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

void ScheduleChecks::schedule_created_first() const {
  if (!a.schedule && !a.reported_no_creation) {
    a.reported_no_creation = true;
    problem(ProblemKind::no_creation_event,
            fmt::format("schedule {} has a {} event (seq {}) before schedule_created",
                        quoted(a.stream.id), type_name(e.body), seq));
  }
  if (a.schedule && a.schedule->removed) {
    problem(ProblemKind::event_after_terminal,
            fmt::format("event seq {} ({}) follows the removal of schedule {}", seq,
                        type_name(e.body), quoted(a.stream.id)));
  }
}

void ScheduleChecks::operator()(const ScheduleCreated&) const {
  if (a.schedule) {
    problem(ProblemKind::duplicate_creation_event,
            fmt::format("schedule {} is created again by event seq {}",
                        quoted(a.stream.id), seq));
  }
}

void ScheduleChecks::operator()(const ScheduleFired& fired) const {
  schedule_created_first();
  if (!a.schedule) return;
  if (!a.schedule->active()) {
    problem(ProblemKind::lifecycle_not_allowed,
            fmt::format("schedule_fired seq {} fires schedule {} while it is {}", seq,
                        quoted(a.stream.id), a.schedule->removed ? "removed" : "paused"));
  }
  if (fired.occurrence <= a.schedule->last_occurrence) {
    problem(ProblemKind::schedule_fire_unmatched,
            fmt::format("schedule_fired seq {} fires occurrence {} of schedule {}, not "
                        "after its last ({}): an occurrence fired twice",
                        seq, fired.occurrence, quoted(a.stream.id),
                        a.schedule->last_occurrence));
  }
  if (facts.item_log_unreadable) return;
  const auto made = facts.schedule_items.find(fired.item_id);
  const std::string key = schedule_item_key(a.stream.id, fired.occurrence);
  if (made == facts.schedule_items.end() || made->second != key) {
    problem(ProblemKind::schedule_fire_unmatched,
            fmt::format("schedule_fired seq {} names item {} for occurrence {} of "
                        "schedule {}, but {}",
                        seq, quoted(fired.item_id), fired.occurrence,
                        quoted(a.stream.id),
                        made == facts.schedule_items.end()
                            ? std::string("no item was queued under that schedule")
                            : fmt::format("that item is keyed {}", quoted(made->second))));
  } else if (!facts.fired_items.insert(fired.item_id).second) {
    problem(ProblemKind::schedule_fire_unmatched,
            fmt::format("schedule_fired seq {} names item {}, which another fire named "
                        "already",
                        seq, quoted(fired.item_id)));
  }
}

void ScheduleChecks::operator()(const ScheduleSkipped& skipped) const {
  schedule_created_first();
  if (a.schedule && skipped.occurrence <= a.schedule->last_occurrence) {
    problem(ProblemKind::schedule_fire_unmatched,
            fmt::format("schedule_skipped seq {} passes over occurrence {} of schedule "
                        "{}, not after its last ({})",
                        seq, skipped.occurrence, quoted(a.stream.id),
                        a.schedule->last_occurrence));
  }
}

void ScheduleChecks::operator()(const SchedulePaused&) const { schedule_created_first(); }

void ScheduleChecks::operator()(const ScheduleResumed&) const { schedule_created_first(); }

void ScheduleChecks::operator()(const ScheduleRemoved&) const { schedule_created_first(); }

void LimitChecks::operator()(const LimitSet&) const { a.created = true; }

void LimitChecks::operator()(const LimitRemoved&) const { limit_set_first("limit_removed"); }

void LimitChecks::operator()(const LimitClockCarried&) const {
  limit_set_first("limit_clock_carried");
}

void SegmentChecks::operator()(const SegmentArchived&) const {
  if (a.created) {
    problem(ProblemKind::segment_disagrees,
            fmt::format("segment {} has a second segment_archived (seq {}): an archive writes "
                        "one segment once",
                        a.stream.id, seq));
  }
  a.created = true;
}

void LimitChecks::limit_set_first(std::string_view kind) const {
  if (!a.created && !a.reported_no_creation) {
    a.reported_no_creation = true;
    problem(ProblemKind::no_creation_event,
            fmt::format("limit {} has a {} event (seq {}) before limit_set", a.stream.id, kind,
                        seq));
  }
}

}  // namespace cplane::verify_detail
