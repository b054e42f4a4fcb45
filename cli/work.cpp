// cplane allocate, terminal add|remove|list, incident link|show|list,
// migrate-incidents: routing work, and the incidents that are never work.
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

// ---- allocate ------------------------------------------------------------------

kj::MainFunc Cli::allocate_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Choose SESSION's next item: open items of its actor's projects, on the terminal "
             "path first, then by priority, then queue order; a changes_requested item only for "
             "its author; items under another's live lease skipped. Without --apply, a preview "
             "that writes nothing. Exit 0 preview or assigned, 3 no_safe_work, 9 wait, 7 for an "
             "unknown or closed session."))
      .addOption({"apply"}, KJ_BIND_METHOD(*this, set_apply),
                 "reserve the choice (assign + lease) in the same transaction")
      .addOptionWithArg({"actions"}, KJ_BIND_METHOD(*this, set_actions), "<action[,action...]>",
                        "what the session may do on the forge (default: nothing)")
      .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                        "how long the lease holds (default 900)")
      .expectArg("SESSION", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_allocate))
      .build();
}

Validity Cli::set_apply() {
  apply_ = true;
  return true;
}

Validity Cli::run_allocate() {
  return run([&] {
    require_name(args_[0], "session id");
    auto store = open(apply_ ? Access::write : Access::read);
    const Allocation a = store.allocate_next(
        args_[0], apply_ ? AllocateMode::apply : AllocateMode::preview, actions_,
        lease_ ? std::optional<Seconds>(Seconds{*lease_}) : std::nullopt, now_);
    changed_ = a.outcome == AllocateOutcome::assigned;
    if (json_) {
      std::string skipped = "[";
      for (std::size_t i = 0; i < a.skipped.size(); ++i) {
        skipped += (i ? "," : "") + JsonObject()
                                        .str("item_id", a.skipped[i].item_id)
                                        .str("reason", to_string(a.skipped[i].reason))
                                        .done();
      }
      print(JsonObject()
                .str("outcome", to_string(a.outcome))
                .str_or_null("item_id", a.item_id)
                .num_or_null("fence", static_cast<std::int64_t>(a.fence))
                .num_or_null("lease_expires_at", a.lease_expires_at)
                .num_or_null("until", a.until)
                .raw("skipped", skipped + "]")
                .num("skipped_total", a.skipped_total)
                .str_or_null("expected_head", a.expected_head)
                .raw("actions", json_strings(a.actions))
                .done());
    } else {
      std::string out;
      switch (a.outcome) {
        case AllocateOutcome::preview:
        case AllocateOutcome::assigned:
          out = fmt::format("{} {} fence: {} lease_expires_at: {}", to_string(a.outcome),
                            a.item_id, a.fence, a.lease_expires_at);
          break;
        case AllocateOutcome::wait: out = fmt::format("wait until: {}", a.until); break;
        case AllocateOutcome::no_safe_work: out = "no_safe_work"; break;
      }
      for (const auto& s : a.skipped) {
        out += fmt::format("\nskipped {} {}", s.item_id, to_string(s.reason));
      }
      if (a.skipped_total > static_cast<std::int64_t>(a.skipped.size())) {
        out += fmt::format("\n... {} skipped in all", a.skipped_total);
      }
      print(out);
    }
    if (a.outcome == AllocateOutcome::wait) throw Exit{kWait};
    if (a.outcome == AllocateOutcome::no_safe_work) throw Exit{kNothingToClaim};
  });
}

// ---- terminal -------------------------------------------------------------------

kj::MainFunc Cli::terminal_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "The terminal path: open items the allocator routes first (a "
                                 "pull request approved and waiting to merge, say)."))
      .addSubCommand("add", KJ_BIND_METHOD(*this, terminal_add_command),
                     "put an open item on the terminal path")
      .addSubCommand("remove", KJ_BIND_METHOD(*this, terminal_remove_command),
                     "take an item off the terminal path")
      .addSubCommand("list", KJ_BIND_METHOD(*this, terminal_list_command),
                     "the items on the terminal path")
      .build();
}

kj::MainFunc Cli::terminal_add_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Put ITEM (open) on the terminal path. JSON: {item_id, changed}. "
                                 "Exit 7 for an unknown item, 2 for one that is terminal."))
      .addOptionWithArg({"reason"}, KJ_BIND_METHOD(*this, set_reason), "<text>",
                        "why (kept in the event and the index)")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing([this]() { return run_terminal(true); })
      .build();
}

kj::MainFunc Cli::terminal_remove_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Take ITEM off the terminal path. JSON: {item_id, changed}."))
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing([this]() { return run_terminal(false); })
      .build();
}

Validity Cli::run_terminal(bool add) {
  return run([&] {
    require_name(args_[0], "item id");
    auto store = open(Access::write);
    const bool changed = add ? store.enter_terminal_path(args_[0], reason_, now_)
                             : store.leave_terminal_path(args_[0], now_);
    changed_ = changed;
    print(json_ ? JsonObject().str("item_id", args_[0]).boolean("changed", changed).done()
                : fmt::format("{} {}", args_[0], changed ? "changed" : "unchanged"));
  });
}

kj::MainFunc Cli::terminal_list_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "The items on the terminal path, by item id. JSON: [{item_id, "
                                 "since, reason}]."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_terminal_list))
      .build();
}

Validity Cli::run_terminal_list() {
  return run([&] {
    auto store = open(Access::read);
    const auto locks = store.terminal_path();
    std::string out = json_ ? "[" : "";
    for (std::size_t i = 0; i < locks.size(); ++i) {
      out += json_ ? (i ? "," : "") + JsonObject()
                                          .str("item_id", locks[i].item_id)
                                          .num("since", locks[i].since)
                                          .str("reason", locks[i].reason)
                                          .done()
                   : fmt::format("{}{} since={} reason={}", i ? "\n" : "", locks[i].item_id,
                                 locks[i].since, locks[i].reason);
    }
    if (json_) out += "]";
    if (json_ || !locks.empty()) print(out);
  });
}

// ---- incident ------------------------------------------------------------------

kj::MainFunc Cli::incident_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Monitoring incidents, linked to the forge issues that track "
                                 "them. Incidents are never work items."))
      .addSubCommand("link", KJ_BIND_METHOD(*this, incident_link_command),
                     "link an incident to its issue (an upsert)")
      .addSubCommand("show", KJ_BIND_METHOD(*this, incident_show_command), "one incident's link")
      .addSubCommand("list", KJ_BIND_METHOD(*this, incident_list_command),
                     "every link, or one target's")
      .build();
}

kj::MainBuilder& Cli::incident_key_options(kj::MainBuilder& b) {
  auto setter = [this](std::optional<std::string>& field, const char* what) {
    return [this, &field, what](kj::StringPtr text) -> Validity {
      if (text.size() > 0) {
        KJ_IF_MAYBE(error, check_name(text, what).releaseError()) { return kj::mv(*error); }
      }
      field = std::string(text.cStr(), text.size());
      return true;
    };
  };
  return b
      .addOptionWithArg({"provider"}, setter(incident_.provider, "provider"), "<name>",
                        "the monitoring tool (required)")
      .addOptionWithArg({"fingerprint"}, setter(incident_.fingerprint, "fingerprint"), "<id>",
                        "the incident's fingerprint (required)")
      .addOptionWithArg({"org"}, setter(incident_.org, "org"), "<org>", "scope: organisation")
      .addOptionWithArg({"repo"}, setter(incident_.repo, "repo"), "<repo>", "scope: repository")
      .addOptionWithArg({"environment"}, setter(incident_.environment, "environment"), "<env>",
                        "scope: environment");
}

IncidentKey Cli::incident_key() const {
  if (!incident_.provider || incident_.provider->empty()) {
    throw InvalidArgument("--provider is required");
  }
  if (!incident_.fingerprint || incident_.fingerprint->empty()) {
    throw InvalidArgument("--fingerprint is required");
  }
  return IncidentKey{*incident_.provider, *incident_.fingerprint, incident_.org.value_or(""),
                     incident_.repo.value_or(""), incident_.environment.value_or("")};
}

kj::MainFunc Cli::incident_link_command() {
  auto text = [this](std::optional<std::string>& field) {
    return [&field](kj::StringPtr v) -> Validity {
      field = std::string(v.cStr(), v.size());
      return true;
    };
  };
  kj::MainBuilder b(context_, kVersionLine,
                    "Link an incident (provider, fingerprint, optional scope) to the issue that "
                    "tracks it: an item id or an external reference. An upsert: the given "
                    "observation fields replace the stored ones, the others stay; an unchanged "
                    "link records nothing. JSON: the link and {changed}.");
  globals(incident_key_options(b))
      .addOptionWithArg({"target"}, text(incident_.target), "<item|ref>",
                        "the tracking issue (required)")
      .addOptionWithArg({"status"}, text(incident_.status), "<status>", "as the tool reports it")
      .addOptionWithArg({"event-count"}, KJ_BIND_METHOD(*this, set_event_count), "<n>",
                        "how many events the tool counted")
      .addOptionWithArg({"permalink"}, text(incident_.permalink), "<url>", "the tool's page")
      .addOptionWithArg({"first-seen"}, text(incident_.first_seen), "<time>",
                        "as the tool reports it")
      .addOptionWithArg({"last-seen"}, text(incident_.last_seen), "<time>",
                        "as the tool reports it")
      .addOptionWithArg({"pr"}, KJ_BIND_METHOD(*this, add_linked_pr), "<ref>",
                        "a linked pull request (repeat for several; replaces the list)")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_incident_link));
  return b.build();
}

Validity Cli::set_event_count(kj::StringPtr text) {
  auto v = parse_int<std::int64_t>(text);
  if (!v || *v < 0) return "--event-count takes a non-negative integer";
  incident_event_count_ = *v;
  return true;
}

Validity Cli::add_linked_pr(kj::StringPtr text) {
  if (!incident_prs_) incident_prs_.emplace();
  incident_prs_->emplace_back(text.cStr(), text.size());
  return true;
}

std::string Cli::incident_json(const IncidentLinkRow& r) {
  auto opt = [](JsonObject& o, const char* key, const std::optional<std::string>& v) {
    if (v) {
      o.str(key, *v);
    } else {
      o.raw(key, "null");
    }
  };
  JsonObject o;
  o.str("provider", r.provider)
      .str("fingerprint", r.fingerprint)
      .str("org", r.org)
      .str("repo", r.repo)
      .str("environment", r.environment)
      .str("target", r.target);
  opt(o, "status", r.status);
  if (r.event_count) {
    o.num("event_count", *r.event_count);
  } else {
    o.raw("event_count", "null");
  }
  opt(o, "permalink", r.permalink);
  opt(o, "first_seen", r.first_seen);
  opt(o, "last_seen", r.last_seen);
  o.raw("linked_prs", r.linked_prs ? json_strings(split_list(*r.linked_prs)) : "null")
      .num("linked_at", r.linked_at)
      .num("updated_at", r.updated_at)
      .num("last_seq", r.last_seq);
  return o.done();
}

Validity Cli::run_incident_link() {
  return run([&] {
    const IncidentKey key = incident_key();
    if (!incident_.target || incident_.target->empty()) {
      throw InvalidArgument("--target is required (an item id or a reference)");
    }
    const IncidentObservation observation{incident_.status,     incident_event_count_,
                                          incident_.permalink,  incident_.first_seen,
                                          incident_.last_seen,  incident_prs_};
    auto store = open();
    const bool changed = store.link_incident(key, *incident_.target, observation, now_);
    changed_ = changed;
    const auto row = store.incident(key);
    if (json_) {
      std::string json = incident_json(row);
      json.pop_back();
      print(json + ",\"changed\":" + (changed ? "true" : "false") + "}");
    } else {
      print(fmt::format("{} {} -> {} ({})", row.provider, row.fingerprint, row.target,
                        changed ? "changed" : "unchanged"));
    }
  });
}

kj::MainFunc Cli::incident_show_command() {
  kj::MainBuilder b(context_, kVersionLine,
                    "Show one incident's link. Exit 7 if there is none for that key.");
  globals(incident_key_options(b)).callAfterParsing(KJ_BIND_METHOD(*this, run_incident_show));
  return b.build();
}

Validity Cli::run_incident_show() {
  return run([&] {
    const IncidentKey key = incident_key();
    auto store = open(Access::read);
    const auto row = store.incident(key);
    print(json_ ? incident_json(row)
                : fmt::format("{} {} org={} repo={} environment={} -> {} status={}", row.provider,
                              row.fingerprint, row.org, row.repo, row.environment, row.target,
                              row.status.value_or("-")));
  });
}

kj::MainFunc Cli::incident_list_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Every incident link, or those of one --target. JSON: an "
                                 "array of links."))
      .addOptionWithArg({"target"}, KJ_BIND_METHOD(*this, set_incident_target), "<item|ref>",
                        "only the links to this issue")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_incident_list))
      .build();
}

Validity Cli::set_incident_target(kj::StringPtr text) {
  KJ_IF_MAYBE(error, check_name(text, "target").releaseError()) { return kj::mv(*error); }
  incident_.target = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::run_incident_list() {
  return run([&] {
    auto store = open(Access::read);
    const auto rows = store.incidents(incident_.target);
    std::string out = json_ ? "[" : "";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out += json_ ? (i ? "," : "") + incident_json(rows[i])
                   : fmt::format("{}{} {} -> {}", i ? "\n" : "", rows[i].provider,
                                 rows[i].fingerprint, rows[i].target);
    }
    if (json_) out += "]";
    if (json_ || !rows.empty()) print(out);
  });
}

// ---- migrate-incidents ---------------------------------------------------------

kj::MainFunc Cli::migrate_incidents_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Import an older control plane's incident_links table from LEGACY (only read). "
             "Rows that differ only by NULL versus '' in their scope collapse into one link, "
             "only when their targets and metadata agree; any conflict imports nothing (exit "
             "6) and lists every conflicting group. --dry-run reports and writes nothing."))
      .addOptionWithArg({"from"}, KJ_BIND_METHOD(*this, set_from), "<legacy.db>",
                        "the legacy database (required)")
      .addOption({"dry-run"}, KJ_BIND_METHOD(*this, set_dry_run), "write nothing")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_migrate_incidents))
      .build();
}

Validity Cli::set_from(kj::StringPtr text) {
  if (text.size() == 0) return "--from needs a path";
  from_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::run_migrate_incidents() {
  if (!from_) return "migrate-incidents needs --from LEGACY.db";
  return run([&] {
    const auto rows = read_legacy_incident_links(*from_);
    // Conflicts are found before anything is opened for writing, so that a
    // refused import leaves the target as it was (not even created): a dry
    // run against the store if it exists, else against an empty one.
    const std::string path = db_ ? *db_ : default_db_path(false);
    struct stat st {};
    const bool exists = ::stat(storage_file(path).c_str(), &st) == 0;
    IncidentImport report;
    {
      ControlStore check = exists ? open(Access::read) : ControlStore(":memory:");
      report = check.import_incident_links(rows, {.dry_run = true, .now = now_});
    }
    if (report.conflicts.empty() && !dry_run_) {
      auto store = open(Access::create);
      report = store.import_incident_links(rows, {.now = now_});
    }
    report.dry_run = dry_run_;
    changed_ = !dry_run_ && report.imported > 0;
    if (json_) {
      std::string conflicts = "[";
      for (std::size_t i = 0; i < report.conflicts.size(); ++i) {
        const auto& c = report.conflicts[i];
        std::string rowids = "[";
        for (std::size_t j = 0; j < c.rowids.size(); ++j) {
          rowids += (j ? "," : "") + std::to_string(c.rowids[j]);
        }
        std::string fields = "{";
        for (std::size_t j = 0; j < c.fields.size(); ++j) {
          fields += (j ? "," : "") + json_string(c.fields[j].first) + ":" +
                    json_strings(c.fields[j].second);
        }
        conflicts += (i ? "," : "") + JsonObject()
                                          .str("provider", c.key.provider)
                                          .str("fingerprint", c.key.fingerprint)
                                          .str("org", c.key.org)
                                          .str("repo", c.key.repo)
                                          .str("environment", c.key.environment)
                                          .raw("rowids", rowids + "]")
                                          .raw("fields", fields + "}")
                                          .done();
      }
      print(JsonObject()
                .boolean("dry_run", report.dry_run)
                .num("rows", report.rows)
                .num("links", report.links)
                .num("imported", report.imported)
                .num("unchanged", report.unchanged)
                .num("collapsed", report.collapsed)
                .raw("conflicts", conflicts + "]")
                .done());
    } else {
      for (const auto& c : report.conflicts) {
        std::string rowids;
        for (auto id : c.rowids) rowids += (rowids.empty() ? "" : ",") + std::to_string(id);
        print(fmt::format("conflict: {} {} org={} repo={} environment={} (legacy rows {})",
                          c.key.provider, c.key.fingerprint, quote_id(c.key.org),
                          quote_id(c.key.repo), quote_id(c.key.environment), rowids));
        for (const auto& [field, values] : c.fields) {
          std::string all;
          for (const auto& v : values) all += (all.empty() ? "" : " | ") + v;
          print(fmt::format("  {}: {}", field, all));
        }
      }
      print(fmt::format("{}{} row(s), {} link(s): {} imported, {} unchanged, {} row(s) collapsed, "
                        "{} conflict(s)",
                        report.dry_run ? "dry run: " : "", report.rows, report.links,
                        report.imported, report.unchanged, report.collapsed,
                        report.conflicts.size()));
    }
    if (!report.conflicts.empty()) {
      if (!json_) std::cerr << "cplane: conflicts found: nothing was imported\n";
      throw Exit{kProblemsFound};
    }
  });
}

}  // namespace cplane::cli
