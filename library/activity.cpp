// Per-minute activity over a recent window, from the log
// (include/cplane/metrics.hpp): what the console's overview charts draw.
// The window's first event is found by a binary search over seq (the log's
// times rise with its seqs), then the window's events are read in pages;
// each item's claimability is followed by an ItemClock, and an item whose
// first event in the window is a claim has its earlier events read to
// learn since when it waited.
#include <unordered_map>

#include <fmt/format.h>

#include <cplane/metrics.hpp>

#include "commands/backend_access.hpp"
#include "library/item_clock.hpp"

namespace cplane {

namespace {

constexpr std::size_t kPage = 5000;

Micros floor_minute(Micros t) {
  const Micros m = t / kMinuteMicros * kMinuteMicros;
  return m > t ? m - kMinuteMicros : m;  // toward the past for negative times
}

// The `after` from which read_log returns the first event at or after `from`.
Seq window_start(ControlStore& store, Micros from) {
  Seq lo = 0;
  Seq hi = store.log_end();
  while (lo < hi) {
    const Seq mid = lo + (hi - lo) / 2;
    const auto page = store.read_log(mid, 1);
    if (page.events.empty() || page.events.front().event.at >= from) {
      hi = mid;
    } else {
      lo = std::min(hi, std::max(mid + 1, page.events.front().seq));
    }
  }
  return lo;
}

}  // namespace

std::vector<ActivityMinute> recent_activity(ControlStore& store, Micros window,
                                            std::optional<Micros> now) {
  if (window < kMinuteMicros || window > kMaxActivityWindow) {
    throw InvalidArgument(fmt::format("an activity window is 1 minute to 24 hours, not {} "
                                      "microseconds",
                                      window));
  }
  if (now) require_now(*now);
  const Micros at =
      now ? *now : BackendAccess::with(store, [](storage::Backend& b) { return b.now(); });
  const Micros first = floor_minute(at - window);
  const Micros last = floor_minute(at);
  std::vector<ActivityMinute> out;
  for (Micros m = first; m <= last; m += kMinuteMicros) out.push_back({.start = m});

  std::unordered_map<std::string, metrics::ItemClock> clocks;
  Seq after = window_start(store, first);
  for (bool more = true; more;) {
    const auto page = store.read_log(after, kPage);
    more = page.events.size() == kPage;
    after = page.next;
    for (const auto& s : page.events) {
      const Event& e = s.event;
      if (e.at > at) {  // the log's times rise: nothing later is in the window
        more = false;
        break;
      }
      if (e.item_id.empty()) continue;
      auto& clock = clocks[e.item_id];
      const bool claim = metrics::is_claim(e.body);
      if (claim && !clock.known) clock = metrics::clock_before(store, e.item_id, s.seq);
      if (e.at >= first) {
        auto& minute = out[static_cast<std::size_t>((e.at - first) / kMinuteMicros)];
        if (claim) {
          ++minute.claimed;
          minute.max_wait = std::max(minute.max_wait, clock.wait_at(e.at));
        } else if (std::holds_alternative<ItemQueued>(e.body)) {
          ++minute.enqueued;
        } else if (const auto* f = std::get_if<ItemFinished>(&e.body)) {
          ++(f->outcome == Outcome::done ? minute.done : minute.failed);
        } else if (std::holds_alternative<AttemptFailed>(e.body)) {
          ++minute.failed;
        }
      }
      clock.apply(e);
    }
  }
  return out;
}

}  // namespace cplane
