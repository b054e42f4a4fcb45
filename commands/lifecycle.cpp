// The job lifecycle's decisions: retry policies and their backoff, the dead
// end, redrive, delays, cancel and pause. Pure, as every decision is: the
// rows in, the event out (declared in commands/decide.hpp).
#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "commands/decide.hpp"
#include "events/errors.hpp"
#include "projections/rules.hpp"

namespace cplane {

namespace {

[[noreturn]] void bad_backoff(std::string_view spec, std::string_view why) {
  throw InvalidArgument(fmt::format(
      "backoff {}: {} (expected none, fixed:DURATION or exponential:BASE[:CAP], with durations "
      "such as 500ms, 30s, 10m, 2h)",
      quote_id(spec), why));
}

[[noreturn]] void unknown_item(std::string_view item_id) {
  throw NotFound(NotFound::Reason::unknown_item,
                 fmt::format("item {} does not exist", quote_id(item_id)));
}

// A stable 64-bit hash (FNV-1a) of the item id and the attempt: the jitter's
// source, the same on every host and in every build.
std::uint64_t jitter_hash(std::string_view item_id, std::uint32_t attempt) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](unsigned char byte) {
    h ^= byte;
    h *= 0x100000001b3ULL;
  };
  for (const char c : item_id) mix(static_cast<unsigned char>(c));
  for (int i = 0; i < 4; ++i) mix(static_cast<unsigned char>(attempt >> (8 * i)));
  return h;
}

}  // namespace

Micros parse_duration(std::string_view text) {
  auto bad = [&](std::string_view why) -> Micros {
    throw InvalidArgument(fmt::format("duration {}: {} (expected a positive number with a unit: "
                                      "ms, s, m, h or d, as in 500ms, 30s, 10m, 2h)",
                                      quote_id(text), why));
  };
  std::int64_t number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || end == text.data()) return bad("it does not start with a number");
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::int64_t scale = 0;
  if (unit == "ms") scale = 1000;
  else if (unit == "s") scale = 1000000;
  else if (unit == "m") scale = 60LL * 1000000;
  else if (unit == "h") scale = 3600LL * 1000000;
  else if (unit == "d") scale = 86400LL * 1000000;
  else return bad(unit.empty() ? "it has no unit" : "its unit is none of ms, s, m, h, d");
  if (number <= 0) return bad("it is not positive");
  // At most about 100 years: anything longer is a mistake, not a plan.
  if (number > 36500LL * 86400 * 1000000 / scale) return bad("it is longer than 100 years");
  return number * scale;
}

Backoff parse_backoff(std::string_view spec) {
  if (spec.empty() || spec == "none") return {};
  const auto colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  if (colon == std::string_view::npos) {
    bad_backoff(spec, kind == "fixed" || kind == "exponential" ? "it needs a duration"
                                                               : "unknown kind");
  }
  std::string_view rest = spec.substr(colon + 1);
  auto duration = [&](std::string_view text) {
    try {
      return parse_duration(text);
    } catch (const InvalidArgument& e) {
      bad_backoff(spec, e.what());
    }
  };
  if (kind == "fixed") {
    if (rest.find(':') != std::string_view::npos) bad_backoff(spec, "fixed takes one duration");
    return Backoff{Backoff::fixed, duration(rest), 0};
  }
  if (kind != "exponential") bad_backoff(spec, "unknown kind");
  const auto second = rest.find(':');
  Backoff out{Backoff::exponential, duration(rest.substr(0, second)), 3600LL * 1000000};
  if (second != std::string_view::npos) out.cap = duration(rest.substr(second + 1));
  if (out.cap < out.base) bad_backoff(spec, "its cap is below its base");
  return out;
}

Micros backoff_wait(const Backoff& backoff, std::string_view item_id, std::uint32_t attempt) {
  switch (backoff.kind) {
    case Backoff::none: return 0;
    case Backoff::fixed: return backoff.base;
    case Backoff::exponential: break;
  }
  const std::uint32_t doublings = attempt == 0 ? 0 : std::min<std::uint32_t>(attempt - 1, 62);
  Micros wait = backoff.cap;
  if (doublings < 62 && backoff.base <= (backoff.cap >> doublings)) wait = backoff.base << doublings;
  // A jitter in [-10%, +10%], in 2001 steps of 0.01%.
  const auto step = static_cast<std::int64_t>(jitter_hash(item_id, attempt) % 2001) - 1000;
  const long double jittered = static_cast<long double>(wait) * (1.0L + step / 10000.0L);
  return std::max<Micros>(1, static_cast<Micros>(std::llround(jittered)));
}

Micros retry_at(const ItemRow& row, Micros now) {
  const Micros wait = backoff_wait(parse_backoff(row.backoff), row.item_id, row.attempts);
  return wait > kMaxNow - now ? kMaxNow : now + wait;
}

RetryPolicy resolve_policy(const ProjectRow& project, const std::optional<RetryPolicy>& own) {
  if (own && own->max_attempts > 0) return *own;
  return RetryPolicy{project.max_attempts, project.backoff};
}

Event decide_exhaust(const ItemRow& row, Micros now) {
  if (!lapsed_exhausted(row, now)) {
    throw InternalError(fmt::format("item {} was offered as exhausted but has attempts left or a "
                                    "live lease",
                                    quote_id(row.item_id)));
  }
  return Event{now, "", row.project_id, row.item_id,
               ItemFinished{Outcome::failed, row.fence, std::string(kExhaustedDetail)}};
}

std::optional<Event> decide_set_policy(const ProjectRow& project, const RetryPolicy& policy,
                                       Micros now) {
  parse_backoff(policy.backoff);  // refuses a SPEC that does not parse
  // "" and "none" are one backoff, spelled "none"; no policy has none.
  const std::string backoff =
      policy.max_attempts == 0 ? "" : policy.backoff.empty() ? "none" : policy.backoff;
  if (policy.max_attempts == project.max_attempts && backoff == project.backoff) {
    return std::nullopt;
  }
  return Event{now, "", project.project_id, "", RetryPolicySet{policy.max_attempts, backoff}};
}

std::optional<Event> decide_pause(const ProjectRow& project, const std::string& reason,
                                  const std::string& actor, Micros now) {
  if (project.paused) return std::nullopt;
  return Event{now, actor, project.project_id, "", ProjectPaused{reason}};
}

std::optional<Event> decide_resume(const ProjectRow& project, const std::string& actor,
                                   Micros now) {
  if (!project.paused) return std::nullopt;
  return Event{now, actor, project.project_id, "", ProjectResumed{}};
}

Event decide_retry(const std::optional<ItemRow>& row, std::string_view item_id,
                   std::optional<std::uint32_t> attempts, const std::string& actor,
                   const std::string& operation, Micros now) {
  if (!row) unknown_item(item_id);
  if (row->status != ItemStatus::failed && row->status != ItemStatus::cancelled) {
    throw InvalidArgument(
        InvalidArgument::Reason::conflict,
        fmt::format("item {} is {}: only a failed or cancelled item can be retried",
                    quote_id(item_id), to_string(row->status)));
  }
  if (attempts && *attempts == 0) {
    throw InvalidArgument("a retry's attempts must be at least 1");
  }
  return Event{now, actor, row->project_id, row->item_id,
               ItemRetried{attempts.value_or(row->max_attempts), operation}};
}

Event decide_reschedule(const std::optional<ItemRow>& row, std::string_view item_id,
                        Micros run_at, const std::string& actor, Micros now) {
  if (!row) unknown_item(item_id);
  if (row->status != ItemStatus::ready && row->status != ItemStatus::scheduled) {
    throw InvalidArgument(
        InvalidArgument::Reason::conflict,
        fmt::format("item {} is {}: only a ready or scheduled item can be rescheduled{}",
                    quote_id(item_id), to_string(row->status),
                    row->status == ItemStatus::claimed ? " (its holder may release it first)"
                                                       : ""));
  }
  return Event{now, actor, row->project_id, row->item_id, ItemRescheduled{run_at}};
}

Event decide_cancel(const std::optional<ItemRow>& row, std::string_view item_id,
                    const std::string& reason, const std::string& actor,
                    const std::string& operation, Micros now) {
  if (!row) unknown_item(item_id);
  if (is_terminal(row->status)) {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          fmt::format("item {} is already {}: a terminal item cannot be cancelled",
                                      quote_id(item_id), to_string(row->status)));
  }
  const Fence fence = row->status == ItemStatus::claimed ? row->fence : 0;
  return Event{now, actor, row->project_id, row->item_id, ItemCancelled{fence, reason, operation}};
}

}  // namespace cplane
