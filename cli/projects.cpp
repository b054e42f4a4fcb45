// cplane project create|grant, projects, stats.
#include "cli/cli.hpp"

namespace cplane::cli {

kj::MainFunc Cli::project_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Create a project, or grant an actor one."))
      .addSubCommand("create", KJ_BIND_METHOD(*this, project_create_command),
                     "create a project")
      .addSubCommand("grant", KJ_BIND_METHOD(*this, project_grant_command),
                     "let a scoped actor see a project")
      .addSubCommand("set", KJ_BIND_METHOD(*this, project_set_command),
                     "set a project's retry policy")
      .addSubCommand("pause", KJ_BIND_METHOD(*this, project_pause_command),
                     "hold back a project's items from every claim")
      .addSubCommand("resume", KJ_BIND_METHOD(*this, project_resume_command),
                     "let claims take a paused project's items again")
      .addSubCommand("show", KJ_BIND_METHOD(*this, project_show_command),
                     "show a project's row: its retry policy and pause")
      .addSubCommand("assign", KJ_BIND_METHOD(*this, project_grant_command),
                     "the old name of grant, kept for one release")
      .build();
}

kj::MainFunc Cli::project_create_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Create project ID with TITLE. Refused (exit 2) if ID is taken."))
      .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_status), "<status>",
                        "the project's status (default: open)")
      .addOptionWithArg({"max-attempts"}, KJ_BIND_METHOD(*this, set_max_attempts), "<n>",
                        "a retry policy: at most N attempts per item (default: no policy)")
      .addOptionWithArg({"backoff"}, KJ_BIND_METHOD(*this, set_backoff), "<spec>",
                        "with --max-attempts: none, fixed:DURATION or "
                        "exponential:BASE[:CAP] (default none)")
      .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("TITLE", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_project_create))
      .build();
}

Validity Cli::set_status(kj::StringPtr text) {
  status_ = std::string(text.cStr());
  status_set_ = true;
  return true;
}

Validity Cli::run_project_create() {
  return run([&] {
    require_name(args_[0], "project id");
    if (status_.empty()) throw InvalidArgument("a project status must not be empty");
    if (backoff_ && !max_attempts_) {
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            "--backoff needs --max-attempts N: a backoff is part of a retry "
                            "policy");
    }
    auto store = open();
    store.create_project(args_[0], args_[1],
                         ControlStore::ProjectOptions{.status = status_,
                                                      .max_attempts = max_attempts_.value_or(0),
                                                      .backoff = backoff_.value_or(""),
                                                      .now = now_});
    changed_ = true;
    print(json_ ? JsonObject().str("project_id", args_[0]).str("title", args_[1])
                      .str("status", status_).done()
                : args_[0]);
  });
}

kj::MainFunc Cli::project_grant_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Grant ACTOR project ID (alias: project assign, kept for one release): the actor may then see it, enqueue into it and "
             "claim from it."))
      .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("ACTOR", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_project_grant))
      .build();
}

Validity Cli::run_project_grant() {
  return run([&] {
    require_name(args_[0], "project id");
    require_name(args_[1], "actor");
    auto store = open();
    store.grant(args_[0], args_[1], now_);
    changed_ = true;
    print(json_ ? JsonObject().str("project_id", args_[0]).str("actor", args_[1]).done()
                : fmt::format("{} {}", args_[0], args_[1]));
  });
}

kj::MainFunc Cli::projects_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "List project ids, sorted: all of them, or those assigned to --actor."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "only the projects this actor is assigned to")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_projects))
      .build();
}

Validity Cli::run_projects() {
  return run([&] {
    auto store = open(Access::read);
    auto ids = store.visible_projects(actor_);
    if (json_) {
      std::string out = "[";
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + json_string(ids[i]);
      print(out + "]");
    } else {
      for (const auto& id : ids) print(id);
    }
  });
}

kj::MainFunc Cli::stats_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Count items by status: ready, scheduled, claimed, done, failed, cancelled, closed. Reads "
                                 "every item row of the scope: for operators, not hot loops."))
      .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                        "only this project's items")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_stats))
      .build();
}

Validity Cli::set_project(kj::StringPtr text) {
  // An id no command could have created is invalid input (exit 2), not an
  // unknown project (exit 7).
  KJ_IF_MAYBE(error, check_name(text, "project id").releaseError()) { return kj::mv(*error); }
  project_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::run_stats() {
  return run([&] {
    auto store = open(Access::read);
    if (project_) {
      const auto ids = store.visible_projects();
      if (std::find(ids.begin(), ids.end(), *project_) == ids.end()) {
        throw NotFound(NotFound::Reason::unknown_project, "no such project: " + quote_id(*project_));
      }
    }
    const auto c = store.status_counts(project_);
    if (c.invalid > 0) {
      std::cerr << fmt::format("cplane: {} item row(s) have a status that is none of the seven "
                               "and are not counted: run cplane verify\n",
                               c.invalid);
    }
    // What archives moved out of the live store (every project's), only
    // once there is any: a store that never archived prints what it did.
    const auto segments = archived_segments(store);
    std::int64_t streams = 0, events = 0, bytes = 0;
    for (const auto& seg : segments) {
      streams += seg.streams;
      events += seg.events;
      bytes += std::max<std::int64_t>(seg.bytes, 0);  // -1: restored from an export, unknown
    }
    if (json_) {
      std::string counts = counts_json(c);
      if (!segments.empty() && counts.ends_with("}")) {
        std::string files;
        for (const auto& seg : segments) {
          files += (files.empty() ? "" : ",") + JsonObject()
                                                    .str("segment_id", seg.segment_id)
                                                    .str("file", seg.file)
                                                    .str("project", seg.project_id)
                                                    .num("streams", seg.streams)
                                                    .num("events", seg.events)
                                                    .raw("bytes", seg.bytes >= 0
                                                                      ? std::to_string(seg.bytes)
                                                                      : std::string("null"))
                                                    .raw("redacted", seg.redacted >= 0
                                                                         ? std::to_string(seg.redacted)
                                                                         : std::string("null"))
                                                    .done();
        }
        counts.pop_back();
        counts += ",\"archived\":" + JsonObject()
                                         .num("streams", streams)
                                         .num("events", events)
                                         .num("bytes", bytes)
                                         .raw("segments", "[" + files + "]")
                                         .done() +
                  "}";
      }
      print(counts);
    } else {
      print(fmt::format("ready: {}\nclaimed: {}\ndone: {}\nfailed: {}\nclosed: {}\nscheduled: "
                        "{}\ncancelled: {}",
                        c.ready, c.claimed, c.done, c.failed, c.closed, c.scheduled,
                        c.cancelled));
      if (!segments.empty()) {
        print(fmt::format("archived: {} stream(s), {} event(s), {} byte(s) in {} segment(s) (all "
                          "projects)",
                          streams, events, bytes, segments.size()));
        for (const auto& seg : segments) {
          print(fmt::format("  {}: {} stream(s), {} event(s), {}, segment {}{}",
                            seg.file.empty() ? "(restored from an export: file not recorded)"
                                             : escape_invisible(seg.file),
                            seg.streams, seg.events,
                            seg.bytes >= 0 ? fmt::format("{} byte(s)", seg.bytes)
                                           : std::string("size not recorded"),
                            seg.segment_id,
                            seg.redacted > 0
                                ? fmt::format(", {} payload(s) redacted", seg.redacted)
                                : std::string()));
        }
      }
    }
  });
}

}  // namespace cplane::cli
