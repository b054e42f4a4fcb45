// cplane: the command-line tool's entry point, global options and the
// plumbing every subcommand shares. See cli/cli.hpp for the layout and
// README.md for the contract.
#include "cli/cli.hpp"
#include "storage/open.hpp"

namespace cplane::cli {

kj::MainFunc Cli::main() {
  auto builder = kj::MainBuilder(
      context_, kVersionLine,
      "A durable control plane for a fleet of workers: projects, work items, atomic claims "
      "with fenced leases, and an append-only ledger of every transition.",
      "The database is --db PATH (SQLite) or URL (postgresql://...), else $CPLANE_DB, else "
      "control.db under the user's cache "
      "directory. Exit status: 0 done, 1 failure, 2 usage or invalid input, 3 nothing to "
      "claim (assign: no safe work), 4 fence rejected, 5 scope denied, 6 verify found problems, 7 "
      "no such item, project or session, 8 the gate denied, 9 wait (another session holds the "
      "item).");
  globals(builder);
  return builder
      .addSubCommand("project", KJ_BIND_METHOD(*this, project_command),
                     "create a project or grant an actor one")
      .addSubCommand("projects", KJ_BIND_METHOD(*this, projects_command),
                     "list the projects (an actor's, with --actor)")
      .addSubCommand("enqueue", KJ_BIND_METHOD(*this, enqueue_command),
                     "queue a work item with a JSON payload")
      .addSubCommand("claim", KJ_BIND_METHOD(*this, claim_command),
                     "claim the oldest available item")
      .addSubCommand("finish", KJ_BIND_METHOD(*this, finish_command),
                     "report a claimed item done or failed")
      .addSubCommand("heartbeat", KJ_BIND_METHOD(*this, heartbeat_command),
                     "extend a claimed item's lease")
      .addSubCommand("release", KJ_BIND_METHOD(*this, release_command),
                     "give a claimed item back to the queue")
      .addSubCommand("expire", KJ_BIND_METHOD(*this, expire_command),
                     "record the leases that have lapsed (lease_expired events)")
      .addSubCommand("session", KJ_BIND_METHOD(*this, session_command),
                     "open a session, keep its leases alive, close it")
      .addSubCommand("sessions", KJ_BIND_METHOD(*this, sessions_command),
                     "list the sessions and the items they hold")
      .addSubCommand("observe", KJ_BIND_METHOD(*this, observe_command),
                     "record what the forge shows: a head moved, a review, a close")
      .addSubCommand("assign", KJ_BIND_METHOD(*this, assign_command),
                     "give a session an item with a lease, atomically (exit 9: wait)")
      .addSubCommand("gate", KJ_BIND_METHOD(*this, gate_command),
                     "may this session mutate this item now? (exit 8: denied)")
      .addSubCommand("allocate", KJ_BIND_METHOD(*this, allocate_command),
                     "choose a session's next item; --apply reserves it (exit 9: wait)")
      .addSubCommand("terminal", KJ_BIND_METHOD(*this, terminal_command),
                     "the terminal path: items routed first")
      .addSubCommand("incident", KJ_BIND_METHOD(*this, incident_command),
                     "link monitoring incidents to the issues that track them")
      .addSubCommand("migrate-incidents", KJ_BIND_METHOD(*this, migrate_incidents_command),
                     "import an older control plane's incident links")
      .addSubCommand("schedule", KJ_BIND_METHOD(*this, schedule_command),
                     "cron schedules: add, list, pause, resume, remove")
      .addSubCommand("tick", KJ_BIND_METHOD(*this, tick_command),
                     "fire the schedule occurrences that are due")
      .addSubCommand("limit", KJ_BIND_METHOD(*this, limit_command),
                     "limits on concurrency keys: set, remove")
      .addSubCommand("limits", KJ_BIND_METHOD(*this, limits_command),
                     "list the limits and what holds them")
      .addSubCommand("why", KJ_BIND_METHOD(*this, why_command),
                     "say why an item is not being claimed now")
      .addSubCommand("retry", KJ_BIND_METHOD(*this, retry_command),
                     "redrive a failed or cancelled item (or a project's, in bulk)")
      .addSubCommand("cancel", KJ_BIND_METHOD(*this, cancel_command),
                     "cancel an item (or a project's, in bulk)")
      .addSubCommand("reschedule", KJ_BIND_METHOD(*this, reschedule_command),
                     "run a ready or scheduled item at another time")
      .addSubCommand("item", KJ_BIND_METHOD(*this, item_command), "show an item's row")
      .addSubCommand("items", KJ_BIND_METHOD(*this, items_command),
                     "list items: filters, newest or oldest first, a cursor for paging")
      .addSubCommand("tail", KJ_BIND_METHOD(*this, tail_command),
                     "the log as a stream, oldest first (--follow: wait for more)")
      .addSubCommand("history", KJ_BIND_METHOD(*this, history_command),
                     "one item's events as a timeline (--follow: wait for more)")
      .addSubCommand("events", KJ_BIND_METHOD(*this, events_command),
                     "show an item's events, oldest first")
      .addSubCommand("verify", KJ_BIND_METHOD(*this, verify_command),
                     "replay the log and compare it with the rows")
      .addSubCommand("rebuild", KJ_BIND_METHOD(*this, rebuild_command),
                     "rewrite the rows from the log")
      .addSubCommand("export", KJ_BIND_METHOD(*this, export_command),
                     "write the log to a file, for audits and restores")
      .addSubCommand("audit", KJ_BIND_METHOD(*this, audit_command),
                     "replay an export with no database (--against DB: and its rows)")
      .addSubCommand("restore", KJ_BIND_METHOD(*this, restore_command),
                     "build a fresh database (--db NEW) from an export")
      .addSubCommand("recover", KJ_BIND_METHOD(*this, recover_command),
                     "salvage a damaged database (--db) into a fresh one (--to)")
      .addSubCommand("archive", KJ_BIND_METHOD(*this, archive_command),
                     "move ended streams into a checked segment file, leaving anchors")
      .addSubCommand("stats", KJ_BIND_METHOD(*this, stats_command),
                     "count items by status (one project with --project)")
      .addSubCommand("migrate", KJ_BIND_METHOD(*this, migrate_command),
                     "upgrade an existing database to this cplane's schema")
      .addSubCommand("serve", KJ_BIND_METHOD(*this, serve_command),
                     "serve the web console, /metrics and /api over HTTP")
      .addSubCommand("metrics", KJ_BIND_METHOD(*this, metrics_command), "the Prometheus text format: depth, lag, leases, counters from the log")
      .build();
}

kj::MainBuilder& Cli::globals(kj::MainBuilder& b) {
  return b
      .addOptionWithArg({"lock-timeout"}, KJ_BIND_METHOD(*this, set_lock_timeout), "<seconds>",
                        "how long a write waits for the write lock before it fails as busy "
                        "(default 30; 0: do not wait)")
      .addOptionWithArg({"db"}, KJ_BIND_METHOD(*this, set_db), "<path|url>",
                        "the database: a file (SQLite) or a postgresql:// URL (default: "
                        "$CPLANE_DB, else a file in the cache directory)")
      .addOption({"json"}, KJ_BIND_METHOD(*this, set_json), "print machine-readable JSON")
      .addOptionWithArg({"now"}, KJ_BIND_METHOD(*this, set_now), "<micros>",
                        "the command's clock, in microseconds since the epoch")
      .addOptionWithArg({"durability"}, KJ_BIND_METHOD(*this, set_durability),
                        "<full|fenced|normal>",
                        "which commits wait for the disk (default fenced: claims and "
                        "enqueues do, finishes do not)");
}

Validity Cli::set_db(kj::StringPtr path) {
  if (path.size() == 0) return "--db needs a path";
  db_ = std::string(path.cStr());
  return true;
}

Validity Cli::set_json() {
  json_ = true;
  return true;
}

Validity Cli::set_now(kj::StringPtr text) {
  auto v = parse_int<Micros>(text);
  if (!v) {
    return "--now takes an integer number of microseconds since the epoch (decimal digits, "
           "within the 64-bit range)";
  }
  try {
    now_ = require_now(*v);
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  return true;
}

Validity Cli::set_lock_timeout(kj::StringPtr text) {
  auto v = parse_timeout(text);
  if (!v) return "--lock-timeout takes a decimal number of seconds from 0 to 86400";
  lock_timeout_ = *v;
  return true;
}

Validity Cli::set_durability(kj::StringPtr text) {
  try {
    durability_ = parse_durability(text.cStr());
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  return true;
}

Validity Cli::check_name(kj::StringPtr text, const char* what) {
  try {
    require_name(std::string_view(text.cStr(), text.size()), what);
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  return true;
}

Validity Cli::set_actor(kj::StringPtr text) {
  if (text.size() == 0) return "--actor needs a name";
  KJ_IF_MAYBE(error, check_name(text, "actor").releaseError()) { return kj::mv(*error); }
  actor_ = std::string(text.cStr());
  return true;
}

Validity Cli::set_positional(kj::StringPtr text) {
  args_.emplace_back(text.cStr());
  return true;
}

ControlStore Cli::open(Access access) {
  StoreOptions options;
  options.durability = durability_;
  options.lock_timeout = lock_timeout_;
  options.create = access == Access::create;
  options.read_only = access == Access::read;
  options.sqlite.cache_mib = bulk_ ? kBulkCacheMib : 0;
  // A bulk command (rebuild, restore, recover) runs alone: no group-commit
  // area is made for it (restore and recover would leave one beside NEW).
  if (bulk_) options.sqlite.combine = false;
  const std::string path = db_ ? *db_ : default_db_path(access == Access::create);
  const std::string file = storage::sqlite_path(path);
  if (file == ":memory:") {
    throw InvalidArgument(fmt::format("--db {} would keep nothing past this command: give a file",
                                      quote_id(path)));
  }
  const auto start = std::chrono::steady_clock::now();
  ControlStore store(path, options);
  if (context_.verbose) {
    std::cerr << fmt::format(
        "cplane: opened {} for {} in {:.1f} ms (durability {}, lock timeout {} ms)\n",
        redacted_url(path),
        access == Access::read ? "reading (one snapshot, no lock)" : "writing",
        elapsed_ms(start), to_string(durability_), lock_timeout_.count());
  }
  return store;
}

double Cli::elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace cplane::cli


int main(int argc, char** argv) {
  using namespace cplane::cli;
  // A write past the file size limit, or to a closed pipe, fails with EFBIG
  // or EPIPE and is reported, instead of killing the process silently after
  // a commit whose result the caller then never sees.
  ::signal(SIGXFSZ, SIG_IGN);
  ::signal(SIGPIPE, SIG_IGN);
  CliContext context(argc > 0 ? argv[0] : "cplane");
  int code = kOk;
  try {
    Cli cli(context);
    auto func = cli.main();
    const std::vector<std::string> args = join_option_values(argc, argv);
    for (const auto& a : args) {
      if (a == "--") break;
      if (a == "--json") context.json = true;
    }
    std::vector<kj::StringPtr> params;
    for (const auto& a : args) params.emplace_back(a.c_str());
    func("cplane", kj::arrayPtr(params.data(), params.size()));
  } catch (const Exit& e) {
    code = e.code;
  } catch (const std::exception& e) {
    std::cerr << "cplane: error: " << e.what() << '\n';
    code = kFailure;
  } catch (...) {
    std::cerr << "cplane: unexpected failure\n";
    code = kFailure;
  }
  if (!context.flush_output()) {
    const int error = errno;
    context.report_error(
        "output_error", context.changed ? "committed" : "not_committed",
        context.changed ? fmt::format("cplane: the command took effect (its change is "
                                      "committed), but its output could not be written: {}",
                                      std::strerror(error))
                        : fmt::format("cplane: the output could not be written: {}",
                                      std::strerror(error)));
    code = kFailure;
  }
  return code;
}
