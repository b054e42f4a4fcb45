// Cron schedules: their pure decisions (declared in commands/decide.hpp),
// then the commands that read the rows, evaluate the cron expression in its
// time zone (commands/cron.hpp: the one impure input, so every event
// carries the occurrence it computed) and append what was decided.
#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "commands/combine.hpp"
#include "commands/control_store.hpp"
#include "commands/cron.hpp"
#include "commands/decide.hpp"
#include "commands/internal.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"

namespace cplane {

using namespace detail;
using storage::Transaction;

// ---- the decisions ------------------------------------------------------------------

Event decide_add_schedule(const std::optional<ScheduleRow>& existing,
                          const std::string& archived_in, const ProjectRow& project,
                          const std::string& name, const ControlStore::ScheduleSpec& spec,
                          Micros next_at, Micros now) {
  if (existing || !archived_in.empty()) {
    throw InvalidArgument(
        InvalidArgument::Reason::already_exists,
        fmt::format("schedule {} already exists{}", quote_id(name),
                    existing ? (existing->removed ? " (removed: names are not reused)" : "")
                             : fmt::format(" (removed and archived in segment {}: names are not "
                                           "reused)",
                                           archived_in)));
  }
  if (spec.catch_up < ControlStore::kCatchUpAll) {
    throw InvalidArgument(fmt::format("catch-up {} is none of none (0), all or a count of at "
                                      "least 1",
                                      spec.catch_up));
  }
  return Event{now,
               "",
               project.project_id,
               "",
               ScheduleCreated{name, spec.cron, spec.zone, spec.payload,
                               spec.overlap == ControlStore::Overlap::skip, spec.catch_up,
                               next_at}};
}

std::vector<FireStep> plan_fires(const ScheduleRow& row, const std::vector<Micros>& due,
                                 std::int64_t count, Micros next_after, bool previous_open) {
  std::vector<FireStep> out;
  if (due.empty()) return out;
  std::size_t first = 0;
  std::int64_t missed = 0;
  if (row.catch_up != ControlStore::kCatchUpAll) {
    // The latest (none), or the last N, of every occurrence due.
    const auto keep = static_cast<std::size_t>(row.catch_up == 0 ? 1 : row.catch_up);
    first = due.size() > keep ? due.size() - keep : 0;
    missed = count - static_cast<std::int64_t>(due.size() - first);
  }
  bool open = previous_open;
  for (std::size_t i = first; i < due.size(); ++i) {
    FireStep step{due[i], row.overlap_skip && open, i == first ? missed : 0,
                  i + 1 < due.size() ? due[i + 1] : next_after};
    if (!step.skip) open = true;
    out.push_back(step);
  }
  return out;
}

// ---- the public calls -------------------------------------------------------------

void ControlStore::add_schedule(const std::string& name, const ScheduleSpec& spec) {
  Impl::of(*this).add_schedule(name, spec);
}
bool ControlStore::pause_schedule(const std::string& name, std::optional<Micros> now) {
  return Impl::of(*this).change_schedule(name, cmd::ScheduleChange::pause, now);
}
bool ControlStore::resume_schedule(const std::string& name, std::optional<Micros> now) {
  return Impl::of(*this).change_schedule(name, cmd::ScheduleChange::resume, now);
}
bool ControlStore::remove_schedule(const std::string& name, std::optional<Micros> now) {
  return Impl::of(*this).change_schedule(name, cmd::ScheduleChange::remove, now);
}
std::vector<ScheduleRow> ControlStore::schedules() { return Impl::of(*this).schedules(); }
std::int64_t ControlStore::tick(std::optional<Micros> now) { return Impl::of(*this).tick(now); }

// ---- the commands -----------------------------------------------------------------

namespace {

// The next occurrence strictly after `after`, kMaxNow for none.
Micros next_or_never(const CronSchedule& cron, Micros after) {
  return next_fire(cron, after).value_or(kMaxNow);
}

ScheduleRow require_schedule(storage::Backend& backend, const std::string& name) {
  auto row = backend.find_schedule(name);
  if (!row) {
    throw NotFound(NotFound::Reason::unknown_schedule,
                   fmt::format("no such schedule: {}", quote_id(name)));
  }
  return std::move(*row);
}

// How many due schedules one transaction looks at (the rest: the next).
constexpr std::size_t kSchedulesPerClaim = 16;

}  // namespace

void ControlStore::Impl::add_schedule(const std::string& name, const ScheduleSpec& given) {
  const InUse in_use(*this);
  ScheduleSpec spec = given;
  if (spec.zone.empty()) spec.zone = "UTC";  // one spelling for the default
  require_name(name, "schedule name");
  require_name(spec.project_id, "project id");
  require_payload(spec.payload);
  parse_cron(spec.cron, spec.zone);  // refuses an expression or zone that does not parse
  if (spec.overlap != Overlap::allow && spec.overlap != Overlap::skip) {
    throw InvalidArgument("unknown overlap: expected allow or skip");
  }
  if (spec.catch_up < kCatchUpAll || spec.catch_up > kMaxCatchUp) {
    throw InvalidArgument(fmt::format("catch-up is none (0), all (-1) or a count from 1 to {}",
                                      kMaxCatchUp));
  }
  if (spec.now) require_now(*spec.now);
  CommandRunner::run(*this, cmd::ScheduleChange{.sync = sync_for_claims(),
                                                .kind = cmd::ScheduleChange::add,
                                                .name = name,
                                                .spec = spec});
}

bool ControlStore::Impl::change_schedule(const std::string& name, std::uint8_t kind,
                                         std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(name, "schedule name");
  if (now) require_now(*now);
  ScheduleSpec spec;
  spec.now = now;
  return CommandRunner::run(*this,
                            cmd::ScheduleChange{.sync = sync_for_claims(),
                                                .kind = static_cast<cmd::ScheduleChange::Kind>(kind),
                                                .name = name,
                                                .spec = spec});
}

bool CommandRunner::exec(ControlStore::Impl& s, const cmd::ScheduleChange& c) {
  const Micros at = s.clock(c.spec.now);
  auto& backend = *s.backend_;
  std::optional<Event> event;
  ScheduleRow before;
  if (c.kind == cmd::ScheduleChange::add) {
    const auto project = backend.find_project(c.spec.project_id);
    if (!project) {
      throw NotFound(NotFound::Reason::unknown_project,
                     fmt::format("no such project: {}", quote_id(c.spec.project_id)));
    }
    const Micros next = next_or_never(parse_cron(c.spec.cron, c.spec.zone), at);
    if (next == kMaxNow) {
      throw InvalidArgument(fmt::format("cron {} never fires (within five years of now)",
                                        quote_id(c.spec.cron)));
    }
    const auto existing = backend.find_schedule(c.name);
    const auto archived =
        existing ? std::nullopt : backend.find_anchor({StreamKind::schedule, c.name});
    event = decide_add_schedule(existing, archived ? archived->segment_id : std::string(),
                                *project, c.name, c.spec, next, at);
  } else {
    // Removed and archived since: removed already (a retried remove is
    // answered as before the archive), and nothing else can change it.
    if (const auto archived = backend.find_schedule(c.name)
                                  ? std::nullopt
                                  : backend.find_anchor({StreamKind::schedule, c.name})) {
      if (c.kind == cmd::ScheduleChange::remove) return false;
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            fmt::format("schedule {} was removed and archived (segment {})",
                                        quote_id(c.name), archived->segment_id));
    }
    before = require_schedule(backend, c.name);
    if (before.removed) {
      if (c.kind == cmd::ScheduleChange::remove) return false;
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            fmt::format("schedule {} was removed", quote_id(c.name)));
    }
    switch (c.kind) {
      case cmd::ScheduleChange::pause:
        if (before.paused) return false;
        event = Event{at, "", before.project_id, "", SchedulePaused{c.name}};
        break;
      case cmd::ScheduleChange::resume:
        if (!before.paused) return false;
        // Occurrences while it was paused are not fired: the next from now.
        event = Event{at, "", before.project_id, "",
                      ScheduleResumed{c.name, next_or_never(parse_cron(before.cron, before.zone),
                                                            at)}};
        break;
      case cmd::ScheduleChange::remove:
        event = Event{at, "", before.project_id, "", ScheduleRemoved{c.name}};
        break;
      case cmd::ScheduleChange::add: break;
    }
  }
  const Seq seq = backend.append(*event);
  backend.put_schedule(apply(before, StoredEvent{seq, *event}));
  // A waiting claim's deadline counts the next occurrence: it looks again.
  backend.announce_work();
  return true;
}

std::int64_t ControlStore::Impl::fire_due_schedules(Micros at, std::size_t budget) {
  std::int64_t made = 0;
  bool fired_any = false;
  for (auto& row : backend_->due_schedules(at, kSchedulesPerClaim)) {
    if (budget == 0) break;  // the rest: the next claim or tick
    // A schedule whose expression or zone no longer parses (a zone gone
    // from the tz database, a row edited behind cplane's back: verify names
    // it) fires nothing, and never fails the claim that found it due.
    std::optional<CronSchedule> parsed;
    try {
      parsed = parse_cron(row.cron, row.zone);
    } catch (const InvalidArgument&) {
      continue;
    }
    // Nor does one that was archived (its row put back outside cplane:
    // verify names it, rebuild removes it): its stream ended, and a fire
    // would append to a stream whose history is in a segment.
    if (backend_->find_anchor({StreamKind::schedule, row.name})) continue;
    const CronSchedule& cron = *parsed;
    // The occurrences due: the first kMaxFiresPerTick under catch-up all,
    // else the last N of every one (counted, not kept).
    const std::size_t keep = row.catch_up == kCatchUpAll ? budget
                             : row.catch_up == 0        ? 1
                                                        : static_cast<std::size_t>(row.catch_up);
    std::deque<Micros> window;
    std::int64_t count = 0;
    Micros occurrence = row.next_at;
    while (occurrence <= at) {
      if (row.catch_up == kCatchUpAll && window.size() == keep) break;
      window.push_back(occurrence);
      if (window.size() > keep) window.pop_front();
      ++count;
      occurrence = next_or_never(cron, occurrence);
    }
    const std::vector<Micros> due(window.begin(), window.end());
    std::optional<ItemRow> last;
    if (!row.last_item.empty()) last = backend_->find_item(row.last_item);
    const bool open = last && !is_terminal(last->status);
    const auto project = backend_->find_project(row.project_id);
    if (!project) {
      throw InternalError(fmt::format("schedule {} names project {}, which has no row",
                                      quote_id(row.name), quote_id(row.project_id)));
    }
    const auto steps = plan_fires(row, due, count, occurrence, open);
    // Over the budget: left for the next transaction, unless it is this
    // one's first (at most kMaxCatchUp steps), so that every schedule fires.
    if (steps.size() > budget && fired_any) break;
    budget -= std::min(budget, steps.size());
    fired_any = true;
    for (const FireStep& step : steps) {
      Event event;
      if (step.skip) {
        event = Event{at, "", row.project_id, "",
                      ScheduleSkipped{row.name, step.occurrence, "overlap", step.next_at}};
      } else {
        // One item per (schedule, occurrence), however many fire it.
        const std::string key = schedule_item_key(row.name, step.occurrence);
        std::string item_id;
        if (auto earlier = backend_->find_item_by_key(row.project_id, key)) {
          item_id = earlier->item_id;
        } else if (auto archived = backend_->find_anchor_by_key(row.project_id, key)) {
          item_id = archived->stream_id;  // made, ended and archived: never made again
        } else {
          const EnqueueOptions options{.key = key};
          item_id = enqueue_in_tx(*project, row.payload, std::string("schedule:") + row.name, at,
                                  &options);
          ++made;
        }
        event = Event{at, "", row.project_id, "",
                      ScheduleFired{row.name, step.occurrence, item_id, step.missed,
                                    step.next_at}};
      }
      const Seq seq = backend_->append(event);
      row = apply(std::move(row), StoredEvent{seq, event});
    }
    backend_->put_schedule(row);
  }
  return made;
}

std::int64_t ControlStore::Impl::tick(std::optional<Micros> now) {
  const InUse in_use(*this);
  if (now) require_now(*now);
  std::int64_t made = 0;
  // Bounded transactions: a tick never holds the lock for long.
  for (int round = 0; round < 1000; ++round) {
    const Micros n = CommandRunner::run(*this, cmd::Tick{.sync = sync_for_claims(), .now = now});
    made += n;
    auto tx = Transaction::read(*backend_);
    const bool more = !backend_->due_schedules(clock(now), 1).empty();
    tx.commit();
    if (!more) break;
  }
  return made;
}

Micros CommandRunner::exec(ControlStore::Impl& s, const cmd::Tick& c) {
  return s.fire_due_schedules(s.clock(c.now), ControlStore::Impl::kFiresPerTick);
}

std::vector<ScheduleRow> ControlStore::Impl::schedules() {
  const InUse in_use(*this);
  auto tx = Transaction::read(*backend_);
  std::vector<ScheduleRow> out;
  auto cursor = backend_->scan_schedules();
  ScheduleRow row;
  while (cursor->next(row)) out.push_back(row);
  tx.commit();
  return out;
}

}  // namespace cplane
