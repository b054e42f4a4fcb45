// The fold: the one place that knows what an event means for a row.
//
// `apply` is pure (no I/O, no clock) and total: it never throws. Commands call
// it inline on the events they have just appended; verify and rebuild call it
// offline over the whole log. Both therefore agree by construction, and any
// disagreement between the log and the stored rows is damage, not drift.
#pragma once

#include <vector>

#include <range/v3/algorithm/fold_left.hpp>

#include "events/event.hpp"
#include "projections/rows.hpp"

namespace cplane {

// Folds one item-stream event (queued, claimed, done, failed) into the item's
// row. Any other event leaves the row unchanged.
ItemRow apply(ItemRow row, const StoredEvent& event);

// Folds a project's events (created, retry policy, pause, weight) into its
// row, and a claimed event's fair_pass (a claim of one of its items that
// chose among several projects; the caller passes only its own project's).
ProjectRow apply(ProjectRow row, const StoredEvent& event);

// Folds an actor_assigned event into the assignment row.
ProjectActorRow apply(ProjectActorRow row, const StoredEvent& event);

// Folds a session's events (opened, heartbeat, closed) into its row.
SessionRow apply(SessionRow row, const StoredEvent& event);

// Folds an incident's links (each incident_linked is the link whole).
IncidentLinkRow apply(IncidentLinkRow row, const StoredEvent& event);

// Folds a schedule's events (created, fired, skipped, paused, resumed, removed).
ScheduleRow apply(ScheduleRow row, const StoredEvent& event);

// Folds a limit's events (limit_set, limit_removed, limit_clock_carried) and the claims of its
// key (claimed, assigned naming it: the rate's state moves on). The claims
// are the caller's to route: it passes only those whose key is the row's.
LimitRow apply(LimitRow row, const StoredEvent& event);

// Folds a segment's event (segment_archived, the record whole).
SegmentRow apply(SegmentRow row, const StoredEvent& event);

// The row a stream of events folds to, starting from an empty row.
template <class Row, class Events>
Row fold(Events&& events, Row initial = {}) {
  return ranges::fold_left(std::forward<Events>(events), std::move(initial),
                           [](Row row, const StoredEvent& e) { return apply(std::move(row), e); });
}

}  // namespace cplane
