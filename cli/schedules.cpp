// cplane schedule add|list|pause|resume|remove, and tick: cron schedules
// that queue one item per occurrence, fired by any claim (or tick).
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

kj::MainFunc Cli::schedule_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Cron schedules: each queues one item per occurrence, fired by "
                                 "any claim or by `cplane tick`, with no daemon."))
      .addSubCommand("add", KJ_BIND_METHOD(*this, schedule_add_command), "add a schedule")
      .addSubCommand("list", KJ_BIND_METHOD(*this, schedule_list_command), "list the schedules")
      .addSubCommand("pause", KJ_BIND_METHOD(*this, schedule_pause_command),
                     "stop firing a schedule (occurrences meanwhile are not fired)")
      .addSubCommand("resume", KJ_BIND_METHOD(*this, schedule_resume_command),
                     "fire a paused schedule again, from its next occurrence")
      .addSubCommand("remove", KJ_BIND_METHOD(*this, schedule_remove_command),
                     "remove a schedule for good (its name is not reused)")
      .build();
}

Validity Cli::set_cron(kj::StringPtr text) {
  cron_ = std::string(text.cStr(), text.size());
  return true;
}
Validity Cli::set_schedule_payload(kj::StringPtr text) {
  schedule_payload_ = std::string(text.cStr(), text.size());
  return true;
}
Validity Cli::set_tz(kj::StringPtr text) {
  tz_ = std::string(text.cStr(), text.size());
  return true;
}
Validity Cli::set_overlap(kj::StringPtr text) {
  const std::string_view v(text.cStr(), text.size());
  if (v == "skip") {
    overlap_ = ControlStore::Overlap::skip;
  } else if (v == "allow") {
    overlap_ = ControlStore::Overlap::allow;
  } else {
    return "--overlap is skip or allow";
  }
  return true;
}
Validity Cli::set_catch_up(kj::StringPtr text) {
  const std::string_view v(text.cStr(), text.size());
  if (v == "none") {
    catch_up_ = 0;
  } else if (v == "all") {
    catch_up_ = ControlStore::kCatchUpAll;
  } else {
    const auto n = parse_int<std::int64_t>(text);
    if (!n || *n < 1 || *n > ControlStore::kMaxCatchUp) {
      return "--catch-up is none, all or a count from 1 to 1000";
    }
    catch_up_ = *n;
  }
  return true;
}

kj::MainFunc Cli::schedule_add_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Add schedule NAME: an item of --payload in --project at each occurrence of --cron "
             "(five fields: minute hour day-of-month month day-of-week, with *, lists, ranges "
             "and steps; or @yearly, @monthly, @weekly, @daily, @hourly), in --tz (default "
             "UTC). Exit 2 for an expression or zone that does not parse, or a name taken."))
      .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                        "the project its items go to (required)")
      .addOptionWithArg({"cron"}, KJ_BIND_METHOD(*this, set_cron), "<expr>",
                        "when it fires (required)")
      .addOptionWithArg({"payload"}, KJ_BIND_METHOD(*this, set_schedule_payload), "<json>",
                        "each item's payload (default {})")
      .addOptionWithArg({"tz"}, KJ_BIND_METHOD(*this, set_tz), "<zone>",
                        "a tz database zone, such as Europe/Berlin (default UTC)")
      .addOptionWithArg({"overlap"}, KJ_BIND_METHOD(*this, set_overlap), "<skip|allow>",
                        "skip: record schedule_skipped while the previous item is open "
                        "(default allow)")
      .addOptionWithArg({"catch-up"}, KJ_BIND_METHOD(*this, set_catch_up), "<none|all|N>",
                        "after downtime, which missed occurrences fire: the latest only "
                        "(none, the default), all, or the last N")
      .expectArg("NAME", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_schedule_add))
      .build();
}

Validity Cli::run_schedule_add() {
  if (!project_) return "schedule add needs --project P";
  if (!cron_) return "schedule add needs --cron EXPR";
  return run([&] {
    require_name(args_[0], "schedule name");
    const std::string payload = schedule_payload_ ? read_payload_argument(*schedule_payload_) : "{}";
    require_payload(payload);
    auto store = open();
    store.add_schedule(args_[0], {.project_id = *project_,
                                  .cron = *cron_,
                                  .payload = payload,
                                  .zone = tz_.value_or("UTC"),
                                  .overlap = overlap_,
                                  .catch_up = catch_up_,
                                  .now = now_});
    changed_ = true;
    for (const auto& s : store.schedules()) {
      if (s.name != args_[0]) continue;
      print(json_ ? schedule_json(s) : fmt::format("{} next {}", args_[0], s.next_at));
    }
  });
}

std::string Cli::schedule_json(const ScheduleRow& s) {
  return JsonObject()
      .str("name", s.name)
      .str("project_id", s.project_id)
      .str("cron", s.cron)
      .str("zone", s.zone)
      .raw("payload", json_raw_or_string(s.payload))
      .str("overlap", s.overlap_skip ? "skip" : "allow")
      .str("catch_up", s.catch_up == 0                            ? std::string("none")
                       : s.catch_up == ControlStore::kCatchUpAll ? std::string("all")
                                                                 : std::to_string(s.catch_up))
      .str("state", s.removed ? "removed" : s.paused ? "paused" : "active")
      .num("next_at", s.next_at)
      .num("fired", s.fired)
      .str_or_null("last_item", s.last_item)
      .num_or_null("last_occurrence", s.last_occurrence)
      .done();
}

kj::MainFunc Cli::schedule_list_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "List every schedule by name: its cron, zone, state, next "
                                 "occurrence and how many items it made."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_schedule_list))
      .build();
}

Validity Cli::run_schedule_list() {
  return run([&] {
    auto store = open(Access::read);
    const auto rows = store.schedules();
    if (json_) {
      std::string out = "[";
      for (std::size_t i = 0; i < rows.size(); ++i) out += (i ? "," : "") + schedule_json(rows[i]);
      print(out + "]");
      return;
    }
    for (const auto& s : rows) {
      print(fmt::format("{} {} '{}' {} {} next {} fired {}", escape_invisible(s.name), s.project_id,
                        escape_invisible(s.cron), s.zone,
                        s.removed ? "removed" : s.paused ? "paused" : "active", s.next_at,
                        s.fired));
    }
  });
}

kj::MainFunc Cli::schedule_pause_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Pause schedule NAME."))
      .expectArg("NAME", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_schedule_pause))
      .build();
}
kj::MainFunc Cli::schedule_resume_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Resume schedule NAME from its next occurrence."))
      .expectArg("NAME", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_schedule_resume))
      .build();
}
kj::MainFunc Cli::schedule_remove_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Remove schedule NAME for good: it fires no more, and its name "
                                 "is not reused. Its items stay."))
      .expectArg("NAME", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_schedule_remove))
      .build();
}

Validity Cli::run_schedule_change(const char* done) {
  return run([&] {
    require_name(args_[0], "schedule name");
    auto store = open();
    const std::string_view what(done);
    changed_ = what == "paused"    ? store.pause_schedule(args_[0], now_)
               : what == "resumed" ? store.resume_schedule(args_[0], now_)
                                   : store.remove_schedule(args_[0], now_);
    print(json_ ? JsonObject().str("name", args_[0]).str("state", what).boolean("changed", changed_)
                      .done()
                : fmt::format("{} {}{}", args_[0], what, changed_ ? "" : " (already)"));
  });
}
Validity Cli::run_schedule_pause() { return run_schedule_change("paused"); }
Validity Cli::run_schedule_resume() { return run_schedule_change("resumed"); }
Validity Cli::run_schedule_remove() { return run_schedule_change("removed"); }

kj::MainFunc Cli::tick_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Fire every schedule occurrence that is due (what any claim does "
                                 "first), in bounded transactions; prints how many items it "
                                 "queued."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_tick))
      .build();
}

Validity Cli::run_tick() {
  return run([&] {
    auto store = open();
    const auto made = store.tick(now_);
    changed_ = made > 0;
    print(json_ ? JsonObject().num("queued", made).done() : fmt::format("queued {}", made));
  });
}

}  // namespace cplane::cli
