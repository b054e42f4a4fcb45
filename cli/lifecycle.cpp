// The job lifecycle from the command line: project set|pause|resume|show,
// retry, reschedule, cancel (one item, or a project's in bulk), and the
// options enqueue and finish gain (--max-attempts, --backoff, --run-at,
// --delay, --no-retry).
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

// ---- options ------------------------------------------------------------------------

Validity Cli::set_max_attempts(kj::StringPtr text) {
  const auto v = parse_int<std::int64_t>(text);
  if (!v || *v < 1 || *v > 1'000'000) {
    return "--max-attempts takes a whole number of attempts from 1 to 1000000";
  }
  max_attempts_ = static_cast<std::uint32_t>(*v);
  return true;
}

Validity Cli::set_attempts(kj::StringPtr text) {
  const auto v = parse_int<std::int64_t>(text);
  if (!v || *v < 1 || *v > 1'000'000) {
    return "--attempts takes a whole number of attempts from 1 to 1000000";
  }
  attempts_ = static_cast<std::uint32_t>(*v);
  return true;
}

Validity Cli::set_backoff(kj::StringPtr text) {
  try {
    require_backoff(std::string_view(text.cStr(), text.size()));
  } catch (const InvalidArgument& e) {
    return kj::str(escape_invisible(e.what()).c_str());
  }
  backoff_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_run_at(kj::StringPtr text) {
  const auto v = parse_int<Micros>(text);
  if (!v || *v < 1 || *v > kMaxNow) {
    return kj::str("--run-at takes microseconds since the epoch, from 1 to ", kMaxNow);
  }
  if (run_at_ || delay_) return "give --run-at or --delay, once";
  run_at_ = *v;
  return true;
}

Validity Cli::set_delay(kj::StringPtr text) {
  try {
    const Micros d = parse_duration(std::string_view(text.cStr(), text.size()));
    if (run_at_ || delay_) return "give --run-at or --delay, once";
    delay_ = d;
  } catch (const InvalidArgument& e) {
    return kj::str("--delay: ", escape_invisible(e.what()).c_str());
  }
  return true;
}

Validity Cli::set_no_retry() {
  no_retry_ = true;
  return true;
}

Validity Cli::set_statuses(kj::StringPtr text) {
  std::string_view rest(text.cStr(), text.size());
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view name = rest.substr(0, comma);
    const auto status = parse_item_status(name);
    if (!status) {
      return kj::str("--status: unknown status '", escape_invisible(name).c_str(),
                     "' (ready, scheduled, claimed, done, failed, closed, cancelled)");
    }
    statuses_.push_back(*status);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return true;
}

// ---- project set, pause, resume, show -------------------------------------------------

kj::MainFunc Cli::project_set_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Set project ID's retry policy for the items queued from now "
                                 "on: at most --max-attempts attempts, waiting --backoff between "
                                 "them (none, fixed:30s, exponential:1s[:1h])."))
      .addOptionWithArg({"max-attempts"}, KJ_BIND_METHOD(*this, set_max_attempts), "<n>",
                        "attempts per item, at least 1")
      .addOptionWithArg({"backoff"}, KJ_BIND_METHOD(*this, set_backoff), "<spec>",
                        "none, fixed:DURATION or exponential:BASE[:CAP] (CAP 1h by default)")
      .addOptionWithArg({"weight"}, KJ_BIND_METHOD(*this, set_weight), "<w>",
                        "its share of the claims that choose among several projects, 1 to "
                        "1000 (default 1): weighted round-robin")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who sets it, recorded in the event")
      .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_project_set))
      .build();
}

Validity Cli::run_project_set() {
  if (!max_attempts_ && !backoff_ && !weight_) {
    return "project set needs --max-attempts N, --backoff SPEC or --weight W";
  }
  return run([&] {
    require_name(args_[0], "project id");
    auto store = open();
    const ProjectRow before = store.project(args_[0]);
    if (!max_attempts_ && !backoff_) {
      changed_ = store.set_weight(args_[0], *weight_, {.actor = actor_, .now = now_});
      print(json_ ? JsonObject()
                        .str("project_id", args_[0])
                        .num("weight", *weight_)
                        .boolean("changed", changed_)
                        .done()
                  : fmt::format("{} weight {}", args_[0], *weight_));
      return;
    }
    const std::uint32_t attempts = max_attempts_.value_or(before.max_attempts);
    if (attempts == 0) {
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            fmt::format("project {} has no retry policy: give --max-attempts N "
                                        "with --backoff",
                                        quote_id(args_[0])));
    }
    const std::string backoff = backoff_.value_or(before.backoff.empty() ? "none" : before.backoff);
    // The weight first: a refused weight changes nothing, the policy included.
    bool weight_changed = false;
    if (weight_) {
      if (*weight_ < 1 || *weight_ > kMaxWeight) {
        throw InvalidArgument(fmt::format("a weight must be between 1 and {}, not {}", kMaxWeight,
                                          *weight_));
      }
    }
    changed_ = store.set_retry_policy(args_[0], attempts, backoff, now_);
    if (weight_) weight_changed = store.set_weight(args_[0], *weight_, {.actor = actor_, .now = now_});
    changed_ = changed_ || weight_changed;
    const std::uint32_t weight = weight_.value_or(before.weight);
    print(json_ ? JsonObject()
                      .str("project_id", args_[0])
                      .num("max_attempts", attempts)
                      .str("backoff", backoff)
                      .num("weight", weight)
                      .boolean("changed", changed_)
                      .done()
                : fmt::format("{} max_attempts {} backoff {}{}", args_[0], attempts, backoff,
                              weight_ ? fmt::format(" weight {}", weight) : std::string()));
  });
}

kj::MainFunc Cli::project_pause_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Pause project ID: no claim, assign or allocate takes its items "
                                 "until it is resumed. Claimed work runs on; enqueue still "
                                 "queues."))
      .addOptionWithArg({"reason"}, KJ_BIND_METHOD(*this, set_reason), "<text>",
                        "why, kept in the project_paused event")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who pauses it, recorded in the event")
      .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_project_pause))
      .build();
}

kj::MainFunc Cli::project_resume_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Resume project ID: claims take its items again."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who resumes it, recorded in the event")
      .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_project_resume))
      .build();
}

Validity Cli::run_project_pause() {
  return run([&] {
    require_name(args_[0], "project id");
    auto store = open();
    changed_ = store.pause_project(args_[0], reason_, {.actor = actor_, .now = now_});
    print(json_ ? JsonObject()
                      .str("project_id", args_[0])
                      .boolean("paused", true)
                      .boolean("changed", changed_)
                      .done()
                : fmt::format("{} paused{}", args_[0], changed_ ? "" : " (already)"));
  });
}

Validity Cli::run_project_resume() {
  return run([&] {
    require_name(args_[0], "project id");
    auto store = open();
    changed_ = store.resume_project(args_[0], {.actor = actor_, .now = now_});
    print(json_ ? JsonObject()
                      .str("project_id", args_[0])
                      .boolean("paused", false)
                      .boolean("changed", changed_)
                      .done()
                : fmt::format("{} resumed{}", args_[0], changed_ ? "" : " (was not paused)"));
  });
}

kj::MainFunc Cli::project_show_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Show project ID: its title, status, retry policy and pause."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "read as this scoped actor")
      .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_project_show))
      .build();
}

Validity Cli::run_project_show() {
  return run([&] {
    require_name(args_[0], "project id");
    auto store = open(Access::read);
    const ProjectRow p = store.project(args_[0], actor_);
    if (json_) {
      print(project_json(p));
    } else {
      print(fmt::format("project_id: {}\ntitle: {}\nstatus: {}\nmax_attempts: {}\nbackoff: {}\n"
                        "paused: {}{}",
                        p.project_id, escape_invisible(p.title), escape_invisible(p.status),
                        p.max_attempts == 0 ? std::string("none (no retry policy)")
                                            : std::to_string(p.max_attempts),
                        p.backoff.empty() ? "none" : p.backoff, p.paused ? "yes" : "no",
                        p.paused && !p.pause_reason.empty()
                            ? " (" + escape_invisible(p.pause_reason) + ")"
                            : ""));
      print(fmt::format("weight: {}", p.weight));
    }
  });
}

// ---- retry, reschedule, cancel --------------------------------------------------------

kj::MainFunc Cli::retry_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Redrive ITEM, failed or cancelled: ready again at the back of the queue, with "
             "--attempts more attempts (default: its policy's). With --project P instead of "
             "ITEM, every item of P in --status (default failed), in bounded transactions; "
             "--dry-run prints the count and the first ids and writes nothing."))
      .addOptionWithArg({"attempts"}, KJ_BIND_METHOD(*this, set_attempts), "<n>",
                        "more attempts, at least 1")
      .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                        "every matching item of this project")
      .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_statuses), "<s,...>",
                        "with --project: failed, cancelled (default failed)")
      .addOption({"dry-run"}, KJ_BIND_METHOD(*this, set_dry_run),
                 "with --project: count, list the first ids, write nothing")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who redrives it, recorded in the event")
      .expectOptionalArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_retry))
      .build();
}

kj::MainFunc Cli::cancel_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Cancel ITEM (ready, scheduled or claimed): terminal; its holder's next finish, "
             "heartbeat or release is refused (exit 4, reason cancelled). Exit 2 for an item "
             "already terminal. With --project P instead of ITEM, every item of P in --status "
             "(default ready,scheduled,claimed), in bounded transactions; --dry-run prints the "
             "count and the first ids and writes nothing."))
      .addOptionWithArg({"reason"}, KJ_BIND_METHOD(*this, set_reason), "<text>",
                        "why, kept in the cancelled event and the item's detail")
      .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                        "every matching item of this project")
      .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_statuses), "<s,...>",
                        "with --project: ready, scheduled, claimed (default all three)")
      .addOption({"dry-run"}, KJ_BIND_METHOD(*this, set_dry_run),
                 "with --project: count, list the first ids, write nothing")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who cancels it, recorded in the event")
      .expectOptionalArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_cancel))
      .build();
}

kj::MainFunc Cli::reschedule_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Run ITEM (ready or scheduled) at --run-at MICROS, or after "
                                 "--delay DURATION from now, instead. Exit 2 for a claimed or "
                                 "terminal item."))
      .addOptionWithArg({"run-at"}, KJ_BIND_METHOD(*this, set_run_at), "<micros>",
                        "when it may be claimed, microseconds since the epoch")
      .addOptionWithArg({"delay"}, KJ_BIND_METHOD(*this, set_delay), "<duration>",
                        "how long from now: 500ms, 30s, 10m, 2h, 1d")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "who moves it, recorded in the event")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_reschedule))
      .build();
}

void Cli::print_bulk(const char* verb, const ControlStore::BulkResult& r) {
  if (json_) {
    print(JsonObject()
              .str("operation", r.operation)
              .num("count", r.count)
              .boolean("dry_run", dry_run_)
              .raw("first_ids", json_strings(r.first_ids))
              .done());
    return;
  }
  print(dry_run_ ? fmt::format("would {} {} item(s); nothing written", verb, r.count)
                 : fmt::format("{} {} item(s) (operation {})", verb == std::string_view("cancel")
                                                                    ? "cancelled"
                                                                    : "retried",
                               r.count, r.operation));
  for (const auto& id : r.first_ids) print(id);
}

Validity Cli::run_retry() {
  if (project_ && !args_.empty()) return "retry takes ITEM or --project P, not both";
  if (!project_ && args_.empty()) return "retry needs ITEM, or --project P";
  if (!project_ && (dry_run_ || !statuses_.empty())) {
    return "--status and --dry-run go with --project";
  }
  return run([&] {
    auto store = open();
    if (project_) {
      const auto r = store.retry_matching(*project_, {.statuses = statuses_,
                                                      .attempts = attempts_,
                                                      .dry_run = dry_run_,
                                                      .actor = actor_,
                                                      .now = now_});
      changed_ = !dry_run_ && r.count > 0;
      print_bulk("retry", r);
      return;
    }
    require_name(args_[0], "item id");
    store.retry(args_[0], attempts_, {.actor = actor_, .now = now_});
    changed_ = true;
    print(json_ ? JsonObject().str("item_id", args_[0]).str("status", "ready").done()
                : fmt::format("{} ready", args_[0]));
  });
}

Validity Cli::run_cancel() {
  if (project_ && !args_.empty()) return "cancel takes ITEM or --project P, not both";
  if (!project_ && args_.empty()) return "cancel needs ITEM, or --project P";
  if (!project_ && (dry_run_ || !statuses_.empty())) {
    return "--status and --dry-run go with --project";
  }
  return run([&] {
    auto store = open();
    if (project_) {
      const auto r = store.cancel_matching(*project_, {.statuses = statuses_,
                                                       .reason = reason_,
                                                       .dry_run = dry_run_,
                                                       .actor = actor_,
                                                       .now = now_});
      changed_ = !dry_run_ && r.count > 0;
      print_bulk("cancel", r);
      return;
    }
    require_name(args_[0], "item id");
    store.cancel(args_[0], reason_, {.actor = actor_, .now = now_});
    changed_ = true;
    print(json_ ? JsonObject().str("item_id", args_[0]).str("status", "cancelled").done()
                : fmt::format("{} cancelled", args_[0]));
  });
}

Validity Cli::run_reschedule() {
  if (!run_at_ && !delay_) return "reschedule needs --run-at MICROS or --delay DURATION";
  return run([&] {
    require_name(args_[0], "item id");
    auto store = open();
    // A delay counts from the command's own time (--now, else the store's clock).
    if (run_at_) {
      store.reschedule(args_[0], *run_at_, {.actor = actor_, .now = now_});
    } else {
      store.reschedule_in(args_[0], *delay_, {.actor = actor_, .now = now_});
    }
    changed_ = true;
    const Item row = store.item(args_[0]);
    print(json_ ? JsonObject()
                      .str("item_id", args_[0])
                      .str("status", to_string(row.status))
                      .num_or_null("run_at", row.run_at)
                      .done()
                : fmt::format("{} {}{}", args_[0], to_string(row.status),
                              row.run_at != 0 ? fmt::format(" until {}", row.run_at) : ""));
  });
}

}  // namespace cplane::cli
