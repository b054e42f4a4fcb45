// Flow control's commands: limits on concurrency keys, project weights, and
// `why`. Each checks its input, runs through the CommandRunner (so that
// group commit can take it) and decides in a pure decide_* below.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "commands/combine.hpp"
#include "commands/control_store.hpp"
#include "commands/decide.hpp"
#include "commands/flow.hpp"
#include "commands/internal.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"

namespace cplane {

using namespace detail;
using storage::Transaction;

// ---- input --------------------------------------------------------------------------

void require_concurrency_key(std::string_view key) { require_name(key, "concurrency key"); }

Rate parse_rate(std::string_view text) {
  auto bad = [&](std::string_view why) -> Rate {
    throw InvalidArgument(fmt::format("rate {}: {} (expected N/PERIOD: N claims from 1 to "
                                      "1000000 per s, m, h, d or a duration such as 30s: "
                                      "10/s, 100/m, 5/30s)",
                                      quote_id(text), why));
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return bad("it has no '/'");
  const std::string_view count_text = text.substr(0, slash);
  std::string_view period_text = text.substr(slash + 1);
  std::int64_t count = 0;
  const auto [end, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
  if (ec != std::errc() || end != count_text.data() + count_text.size() || count_text.empty()) {
    return bad("its count is not a whole number");
  }
  if (count < 1 || count > 1000000) return bad("its count is not between 1 and 1000000");
  static constexpr std::pair<std::string_view, std::string_view> kWords[] = {
      {"second", "1s"}, {"sec", "1s"}, {"minute", "1m"}, {"min", "1m"},
      {"hour", "1h"},   {"day", "1d"}};
  std::string period(period_text);
  for (const auto& [word, duration] : kWords) {
    if (period_text == word) period = duration;
  }
  if (!period.empty() && period.front() >= 'a' && period.front() <= 'z') period = "1" + period;
  Micros micros = 0;
  try {
    micros = parse_duration(period);
  } catch (const InvalidArgument&) {
    return bad("its period is not a unit or a duration");
  }
  return Rate{static_cast<std::uint32_t>(count), micros};
}

// ---- decisions ----------------------------------------------------------------------

std::optional<Event> decide_set_limit(const std::optional<LimitRow>& existing, const LimitSet& set,
                                      const std::string& actor, Micros now) {
  if (set.concurrency == 0 && set.rate_count == 0) {
    throw InvalidArgument("a limit needs a concurrency of at least 1, a rate, or both");
  }
  if (set.burst != 0 && set.rate_count == 0) {
    throw InvalidArgument(InvalidArgument::Reason::conflict, "a burst needs a rate");
  }
  if (existing && !existing->removed && existing->concurrency == set.concurrency &&
      existing->rate_count == set.rate_count && existing->rate_period == set.rate_period &&
      existing->burst == set.burst) {
    return std::nullopt;  // the limit already
  }
  return Event{now, actor, "", "", set};
}

std::optional<Event> decide_remove_limit(const std::optional<LimitRow>& existing,
                                         const std::string& key, const std::string& actor,
                                         Micros now) {
  if (!existing) {
    throw NotFound(NotFound::Reason::unknown_limit,
                   fmt::format("no limit on concurrency key {}", quote_id(key)));
  }
  if (existing->removed) return std::nullopt;
  return Event{now, actor, "", "", LimitRemoved{key}};
}

std::optional<Event> decide_set_weight(const ProjectRow& project, std::uint32_t weight,
                                       const std::string& actor, Micros now) {
  if (weight < 1 || weight > kMaxWeight) {
    throw InvalidArgument(fmt::format("a weight must be between 1 and {}, not {}", kMaxWeight,
                                      weight));
  }
  if (project.weight == weight) return std::nullopt;
  return Event{now, actor, project.project_id, "", ProjectWeightSet{weight}};
}

// ---- the public calls -------------------------------------------------------------------

std::string_view to_string(ControlStore::WhyKind kind) {
  using K = ControlStore::WhyKind;
  switch (kind) {
    case K::terminal: return "terminal";
    case K::running: return "running";
    case K::scheduled: return "scheduled";
    case K::project_paused: return "project_paused";
    case K::key_full: return "key_full";
    case K::rate_limited: return "rate_limited";
    case K::behind: return "behind";
    case K::out_of_scope: return "out_of_scope";
    case K::exhausted: return "exhausted";
  }
  return "unknown";
}

bool ControlStore::set_limit(const std::string& key, const LimitSpec& spec) {
  return Impl::of(*this).set_limit(key, spec);
}
bool ControlStore::remove_limit(const std::string& key, const LifecycleOptions& options) {
  return Impl::of(*this).remove_limit(key, options);
}
std::vector<ControlStore::LimitInfo> ControlStore::limits(std::optional<Micros> now) {
  return Impl::of(*this).limits(now);
}
bool ControlStore::set_weight(const std::string& project_id, std::uint32_t weight,
                              const LifecycleOptions& options) {
  return Impl::of(*this).set_weight(project_id, weight, options);
}
ControlStore::Explanation ControlStore::explain(const std::string& item_id,
                                                const std::optional<std::string>& actor,
                                                std::optional<Micros> now) {
  return Impl::of(*this).explain(item_id, actor, now);
}

bool ControlStore::Impl::set_limit(const std::string& key, const LimitSpec& spec) {
  const InUse in_use(*this);
  require_concurrency_key(key);
  require_actor(spec.actor);
  if (spec.now) require_now(*spec.now);
  Rate rate;
  if (!spec.rate.empty()) rate = parse_rate(spec.rate);
  if (spec.concurrency == 0 && spec.rate.empty()) {
    throw InvalidArgument("a limit needs a concurrency of at least 1, a rate, or both");
  }
  if (spec.burst != 0 && spec.rate.empty()) {
    throw InvalidArgument(InvalidArgument::Reason::conflict, "a burst needs a rate");
  }
  if (spec.burst > 1000000) throw InvalidArgument("a burst must be at most 1000000");
  return CommandRunner::run(*this, cmd::LimitChange{.sync = sync_for_claims(),
                                                    .kind = cmd::LimitChange::set,
                                                    .key = key,
                                                    .concurrency = spec.concurrency,
                                                    .rate_count = rate.count,
                                                    .rate_period = rate.period,
                                                    .burst = rate.count == 0
                                                                 ? 0
                                                                 : std::max<std::uint32_t>(spec.burst, 1),
                                                    .actor = spec.actor,
                                                    .now = spec.now});
}

bool ControlStore::Impl::remove_limit(const std::string& key, const LifecycleOptions& options) {
  const InUse in_use(*this);
  require_concurrency_key(key);
  require_actor(options.actor);
  if (options.now) require_now(*options.now);
  return CommandRunner::run(*this, cmd::LimitChange{.sync = sync_for_claims(),
                                                    .kind = cmd::LimitChange::remove,
                                                    .key = key,
                                                    .actor = options.actor,
                                                    .now = options.now});
}

bool CommandRunner::exec(ControlStore::Impl& s, const cmd::LimitChange& c) {
  const Micros at = s.clock(c.now);
  const auto existing = s.backend_->find_limit(c.key);
  const std::string by = c.actor.value_or(kControlPlane);
  const auto event =
      c.kind == cmd::LimitChange::set
          ? decide_set_limit(existing, LimitSet{c.key, c.concurrency, c.rate_count, c.rate_period,
                                                c.burst},
                             by, at)
          : decide_remove_limit(existing, c.key, by, at);
  if (!event) return false;
  const Seq seq = s.backend_->append(*event);
  s.backend_->put_limit(apply(existing.value_or(LimitRow{}), StoredEvent{seq, *event}));
  // A raised or removed limit may make items claimable: wake waiting claims.
  s.backend_->announce_work();
  return true;
}

std::vector<ControlStore::LimitInfo> ControlStore::Impl::limits(std::optional<Micros> now) {
  const InUse in_use(*this);
  if (now) require_now(*now);
  auto tx = Transaction::read(*backend_);
  const Micros at = clock(now);
  std::vector<LimitInfo> out;
  auto cursor = backend_->scan_limits();
  LimitRow row;
  while (cursor->next(row)) {
    if (row.removed) continue;
    LimitInfo info{row, backend_->live_leases(row.key, at), {}, gcra_next_token(row)};
    for (const auto& held : backend_->key_holders(row.key, at, kMaxHoldersListed)) {
      info.holders.push_back({held.item_id, held.project_id, held.fence, held.lease_expires_at});
    }
    out.push_back(std::move(info));
  }
  tx.commit();
  return out;
}

bool ControlStore::Impl::set_weight(const std::string& project_id, std::uint32_t weight,
                                    const LifecycleOptions& options) {
  const InUse in_use(*this);
  require_name(project_id, "project id");
  require_actor(options.actor);
  if (weight < 1 || weight > kMaxWeight) {
    throw InvalidArgument(fmt::format("a weight must be between 1 and {}, not {}", kMaxWeight,
                                      weight));
  }
  if (options.now) require_now(*options.now);
  return CommandRunner::run(*this, cmd::ProjectChange{.sync = sync_for_claims(),
                                                      .kind = cmd::ProjectChange::weight,
                                                      .project_id = project_id,
                                                      .max_attempts = weight,
                                                      .actor = options.actor,
                                                      .now = options.now});
}

// ---- why ------------------------------------------------------------------------------

namespace {

using WhyKind = ControlStore::WhyKind;
using WhyReason = ControlStore::WhyReason;

std::string when(Micros at) { return fmt::format("{}", at); }

}  // namespace

ControlStore::Explanation ControlStore::Impl::explain(const std::string& item_id,
                                                      const std::optional<std::string>& actor,
                                                      std::optional<Micros> now) {
  const InUse in_use(*this);
  require_name(item_id, "item id");
  require_actor(actor);
  if (now) require_now(*now);
  auto tx = Transaction::read(*backend_);
  const Micros at = clock(now);
  const auto row = backend_->find_item(item_id);
  if (!row) {
    throw NotFound(NotFound::Reason::unknown_item,
                   fmt::format("item {} does not exist", quote_id(item_id)));
  }
  Explanation out{row->item_id, row->project_id, row->status, at, false, {}};
  auto add = [&](WhyReason reason) { out.reasons.push_back(std::move(reason)); };
  if (actor && !backend_->is_assigned(row->project_id, *actor)) {
    add({.kind = WhyKind::out_of_scope,
         .message = fmt::format("actor {} may not claim from project {}: grant it the project",
                                quote_id(*actor), quote_id(row->project_id))});
  }
  if (is_terminal(row->status)) {
    add({.kind = WhyKind::terminal,
         .message = fmt::format("it is {}: nothing will claim it (retry redrives a failed or "
                                "cancelled item)",
                                to_string(row->status))});
    tx.commit();
    return out;
  }
  if (lease_live(*row, at)) {
    add({.kind = WhyKind::running,
         .message = fmt::format("it is claimed by {} (fence {}) until {}: it runs", quote_id(row->owner),
                                row->fence, when(row->lease_expires_at)),
         .until = row->lease_expires_at});
  } else if (lapsed_exhausted(*row, at)) {
    add({.kind = WhyKind::exhausted,
         .message = "its lease lapsed with no attempts left: the next claim or expire fails it"});
  } else if (row->status == ItemStatus::scheduled && row->run_at > at) {
    add({.kind = WhyKind::scheduled,
         .message = fmt::format("it is scheduled: not before {} (reschedule changes it)",
                                when(row->run_at)),
         .until = row->run_at});
  }
  const auto project = backend_->find_project(row->project_id);
  if (project && project->paused) {
    add({.kind = WhyKind::project_paused,
         .message = fmt::format("project {} is paused{}: resume it", quote_id(row->project_id),
                                project->pause_reason.empty() ? "" : " (" + project->pause_reason + ")")});
  }
  if (!row->concurrency_key.empty() && !lease_live(*row, at)) {
    if (auto limit = backend_->find_limit(row->concurrency_key); limit && !limit->removed) {
      const std::int64_t live = backend_->live_leases(row->concurrency_key, at);
      if (auto block = key_block(&*limit, live, at)) {
        WhyReason reason{.key = row->concurrency_key, .limit = limit->concurrency, .live = live};
        if (block->kind == KeyBlock::Kind::key_full) {
          reason.kind = WhyKind::key_full;
          for (const auto& held : backend_->key_holders(row->concurrency_key, at, kMaxHoldersListed)) {
            reason.holders.push_back(
                {held.item_id, held.project_id, held.fence, held.lease_expires_at});
          }
          reason.until = reason.holders.empty() ? 0 : reason.holders.front().lease_expires_at;
          reason.message = fmt::format(
              "concurrency key {} is full ({}/{}): a slot frees when a holder finishes, "
              "releases or its lease lapses (first at {}), or raise the limit",
              quote_id(row->concurrency_key), live, limit->concurrency, when(reason.until));
        } else {
          reason.kind = WhyKind::rate_limited;
          reason.until = block->until;
          reason.message = fmt::format("concurrency key {} is rate-limited ({} per {} us): "
                                       "the next token is at {}",
                                       quote_id(row->concurrency_key), limit->rate_count,
                                       limit->rate_period, when(block->until));
        }
        add(std::move(reason));
      }
    }
  }
  if (claimable(*row, at)) {
    const std::int64_t ahead = backend_->ready_ahead(*row);
    std::int64_t competing = 0;
    for (const auto& id : backend_->claimable_project_ids(actor ? &*actor : nullptr)) {
      if (backend_->oldest_ready(id)) ++competing;
    }
    if (ahead > 0) {
      add({.kind = WhyKind::behind,
           .message = fmt::format("{} item{} of project {} come{} first (priority, then age); "
                                  "its project has weight {} among {} project{} with work",
                                  ahead, ahead == 1 ? "" : "s", quote_id(row->project_id),
                                  ahead == 1 ? "s" : "", project ? project->weight : 1, competing,
                                  competing == 1 ? "" : "s"),
           .ahead = ahead,
           .weight = project ? project->weight : 1,
           .competing = competing});
    }
  }
  out.claimable = std::all_of(out.reasons.begin(), out.reasons.end(),
                              [](const WhyReason& r) { return r.kind == WhyKind::behind; }) &&
                  claimable(*row, at);
  tx.commit();
  return out;
}

}  // namespace cplane
