// One item's claim and availability as its own events move them, read
// from the log without its row: whether it is claimed (a claim of a
// claimed item is a reclaim), and since when it has been claimable (a
// claim's wait). The metrics (library/metrics.cpp) and the activity
// series (library/activity.cpp) fold it; projections/apply.cpp stays the
// one place that knows what an event does to a row.
#pragma once

#include <algorithm>
#include <optional>
#include <variant>

#include <cplane/events.hpp>
#include <cplane/store.hpp>

#include "events/event.hpp"

namespace cplane::metrics {

struct ItemClock {
  // Whether anything is known: every event below but a fact for the
  // history sets the whole state, so one event of an item is enough.
  bool known = false;
  bool claimed = false;
  // When it became, or becomes, claimable: queued (or its run_at), due
  // after a backoff or a reschedule, released, redriven, or the end of
  // the lease it is claimed under (a lapsed lease is taken over). nullopt
  // once it is terminal, or before anything is known of it.
  std::optional<Micros> available_since;

  void apply(const Event& e) {
    std::visit(Overloaded{
                   [&](const ItemQueued& q) { become_available(std::max(e.at, q.run_at)); },
                   [&](const AttemptFailed& f) { become_available(f.retry_at); },
                   [&](const ItemRetried&) { become_available(e.at); },
                   [&](const ItemReleased&) { become_available(e.at); },
                   [&](const ItemRescheduled& r) { become_available(std::max(e.at, r.run_at)); },
                   [&](const ItemClaimed& c) { hold(c.lease_expires_at); },
                   [&](const ItemAssigned& a) { hold(a.lease_expires_at); },
                   [&](const LeaseExtended& x) { hold(x.lease_expires_at); },
                   [&](const ItemFinished&) { end(); },
                   [&](const ItemCancelled&) { end(); },
                   [&](const ItemClosed&) { end(); },
                   [](const auto&) {},
               },
               e.body);
  }

  // How long a claim at `at` found it waiting (0 when nothing is known or
  // it was not yet claimable: a clock behind the log's).
  Micros wait_at(Micros at) const {
    return available_since && *available_since < at ? at - *available_since : 0;
  }

 private:
  void become_available(Micros since) {
    known = true;
    claimed = false;
    available_since = since;
  }
  void hold(Micros lease_end) {
    known = true;
    claimed = true;
    available_since = lease_end;
  }
  void end() {
    known = true;
    claimed = false;
    available_since.reset();
  }
};

// An item's clock just before the event at `seq`, from its own events
// (one index range: for a claim whose history the caller has not seen).
inline ItemClock clock_before(ControlStore& store, const std::string& item_id, Seq seq) {
  ItemClock clock;
  for (const auto& e : store.events(item_id)) {
    if (e.seq >= seq) break;
    clock.apply(e.event);
  }
  return clock;
}

// Whether an event is a claim (a worker's claim or a session's assignment).
inline bool is_claim(const EventBody& body) {
  return std::holds_alternative<ItemClaimed>(body) || std::holds_alternative<ItemAssigned>(body);
}

}  // namespace cplane::metrics
