// cplane verify, rebuild, migrate: the ledger and its schema.
#include "cli/cli.hpp"

namespace cplane::cli {

kj::MainFunc Cli::migrate_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Upgrade an existing database to the schema this cplane writes "
                                 "(opening it to write does the same). Reads never migrate: an "
                                 "older database is refused by them until this has run. Never "
                                 "creates a database."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_migrate))
      .build();
}

Validity Cli::run_migrate() {
  return run([&] {
    auto store = open(Access::write);
    changed_ = true;
    const int version = store.schema_version();  // the backend's own numbering
    print(json_ ? JsonObject().num("schema_version", version).done()
                : fmt::format("schema version {}", version));
  });
}

kj::MainFunc Cli::verify_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Replay the whole log through the projection and compare it with the stored "
             "rows. Exit 6 if any problem is found; each names its item."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_verify))
      .build();
}

Validity Cli::run_verify() {
  return run([&] {
    auto store = open(Access::read);
    // Streamed: however many problems there are, memory stays flat.
    bool progress_done = false;
    std::int64_t printed = 0;
    const auto found = verify_ledger_each(
        store,
        [&](const LedgerProblem& p) {
          if (!progress_done) {
            end_progress();
            progress_done = true;
            if (json_) print_raw("[");
          }
          if (json_) {
            print_raw(problem_json(p, printed++ > 0));
          } else {
            print(problem_line(p));
          }
        },
        progress("verify"));
    if (!progress_done) end_progress();
    if (found == 0) {
      print(json_ ? "[]" : "ok: the rows agree with the log");
      return;
    }
    if (json_) print("]");
    if (!json_) std::cerr << found << " problem(s) found\n";
    throw Exit{kProblemsFound};
  });
}

std::string Cli::problem_json(const LedgerProblem& p, bool comma) {
  return (comma ? "," : "") + cplane::problem_json(p);
}

std::string Cli::problems_json(const std::vector<LedgerProblem>& problems) {
  std::string out = "[";
  for (size_t i = 0; i < problems.size(); ++i) out += problem_json(problems[i], i > 0);
  return out + "]";
}

// "kind ID: detail", naming the item (else the project); a problem of a
// session or incident stream names it in its detail: "kind: detail".
std::string Cli::problem_line(const LedgerProblem& p) {
  const std::string& id = p.item_id.empty() ? p.project_id : p.item_id;
  return id.empty() ? fmt::format("{}: {}", to_string(p.kind), p.detail)
                    : fmt::format("{} {}: {}", to_string(p.kind), id, p.detail);
}

void Cli::print_problems(const std::vector<LedgerProblem>& problems) {
  if (json_) {
    print(problems_json(problems));
    return;
  }
  for (const auto& p : problems) {
    print(problem_line(p));
  }
}

kj::MainFunc Cli::rebuild_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Rewrite the projected rows from the log in one transaction. With --dry-run, "
             "list each row that would change and how, and write nothing."))
      .addOption({"dry-run"}, KJ_BIND_METHOD(*this, set_dry_run),
                 "show what would change; write nothing")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_rebuild))
      .build();
}

Validity Cli::set_dry_run() {
  dry_run_ = true;
  return true;
}

Validity Cli::run_rebuild() {
  return run([&] {
    bulk_ = true;
    auto store = open(dry_run_ ? Access::read : Access::write);
    RebuildReport report;
    try {
      report = rebuild(store, {.dry_run = dry_run_}, progress("rebuild"));
    } catch (const RebuildRefused& refused) {
      // Exit 6 like verify, the reasons on stdout (JSON: the problems
      // array, as verify prints it), the refusal on stderr (JSON: the
      // error object every command prints).
      end_progress();
      print_problems(refused.problems());
      context_.report_error(
          "rebuild_refused", "log_fails_checks",
          fmt::format("cplane: rebuild refused, nothing changed: the log fails its own checks "
                      "({} problem(s){}). Rows folded from it would be wrong. See `cplane "
                      "verify`; salvage with `cplane recover --db DAMAGED --to NEW`, or `cplane "
                      "restore` an export",
                      refused.total(),
                      static_cast<std::int64_t>(refused.problems().size()) < refused.total()
                          ? fmt::format(", the first {} listed", refused.problems().size())
                          : std::string()));
      throw Exit{kProblemsFound};
    }
    changed_ = !dry_run_ && report.changes_total > 0;
    end_progress();
    auto json_changes = [](const std::vector<RowChange>& list) {
      std::string out = "[";
      for (size_t i = 0; i < list.size(); ++i) {
        const auto& c = list[i];
        std::string fields = "[";
        for (size_t j = 0; j < c.fields.size(); ++j) {
          fields += (j ? "," : "") + json_string(c.fields[j]);
        }
        JsonObject o;
        o.str("table", c.table).str("key", c.key).str("action", c.action);
        if (c.table == "items") o.str("item_id", c.key);
        out += (i ? "," : "") + o.raw("fields", fields + "]").done();
      }
      return out + "]";
    };
    if (json_) {
      print(JsonObject()
                .boolean("dry_run", report.dry_run)
                .num("events", report.events)
                .num("items", report.items)
                .num("changes_total", report.changes_total)
                .raw("changes", json_changes(report.changes))
                .num("kept_total", report.kept_total)
                .raw("kept", json_changes(report.kept))
                .done());
    } else {
      for (const auto* list : {&report.changes, &report.kept}) {
        for (const auto& c : *list) {
          std::string line = fmt::format("{} {} {}", c.action, c.table, c.key);
          for (const auto& f : c.fields) line += "\n    " + f;
          print(line);
        }
      }
      if (report.changes_total + report.kept_total >
          static_cast<std::int64_t>(report.changes.size() + report.kept.size())) {
        print(fmt::format("... and {} more (the first {} of each are listed)",
                          report.changes_total + report.kept_total -
                              static_cast<std::int64_t>(report.changes.size() + report.kept.size()),
                          kMaxListedChanges));
      }
      print(fmt::format("{} {} row(s) from {} events ({} items){}{}",
                        report.dry_run ? "would change" : "changed", report.changes_total,
                        report.events, report.items,
                        report.kept.empty()
                            ? std::string()
                            : fmt::format("; left {} row(s) alone (the log lost events: "
                                          "cplane verify names them)",
                                          report.kept_total),
                        report.dry_run ? "; nothing written" : ""));
    }
  });
}

}  // namespace cplane::cli
