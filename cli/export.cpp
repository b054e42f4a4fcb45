// cplane export, audit, restore: the log on its own, outside any database.
#include <fcntl.h>
#include <stdio.h>

#include "cli/cli.hpp"

namespace cplane::cli {

namespace {

// A file closed (and, when written, synced) on every path out.
struct File {
  std::FILE* f = nullptr;
  bool owned = false;
  File(std::FILE* file, bool own) : f(file), owned(own) {}
  File(File&& o) noexcept : f(o.f), owned(o.owned) { o.f = nullptr; }
  File& operator=(File&&) = delete;
  ~File() {
    if (owned && f != nullptr) std::fclose(f);
  }
};

std::string hex_or_none(const std::string& hex) { return hex.empty() ? "(none)" : hex; }

// A database this command is building, with its side files: removed
// unless the command got to the end.
struct RemoveOnFailure {
  std::string path;
  bool armed = true;
  ~RemoveOnFailure() {
    if (!armed) return;
    ::unlink(path.c_str());
    for (const char* suffix : storage::kSideFileSuffixes) {
      ::unlink((path + suffix).c_str());
    }
  }
};

// restore and recover build a fresh database at a temporary name beside
// the target, and move it into place only once it is complete (with its
// WAL, if the last checkpoint left one): a command killed midway leaves
// `NEW.partial-PID` files, never a database at NEW that looks sound.
void move_into_place(const std::string& partial, const std::string& target) {
  std::error_code ec;
  const std::string wal = partial + "-wal";
  if (std::filesystem::exists(wal, ec) && std::filesystem::file_size(wal, ec) > 0) {
    if (::rename(wal.c_str(), (target + "-wal").c_str()) != 0) {
      throw StorageError(StorageError::Category::io,
                         fmt::format("cannot move {} into place: {}", wal, std::strerror(errno)));
    }
  }
  for (const char* suffix : storage::kSideFileSuffixes) ::unlink((partial + suffix).c_str());
  const bool empty_target = std::filesystem::exists(target, ec);
  const int rc = empty_target ? ::rename(partial.c_str(), target.c_str())
                              : ::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, target.c_str(),
                                            RENAME_NOREPLACE);
  if (rc != 0) {
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot move the new database into place at {}: {}", target,
                                   std::strerror(errno)));
  }
}

// restore and recover build a fresh database and never write over one.
void refuse_existing(const std::string& target, const char* command,
                     const std::string& source = {}) {
  if (auto why = storage::protected_target(target, source)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{}: {} builds a fresh database, and never writes over a "
                                   "database or its side files",
                                   *why, command));
  }
  std::error_code ec;
  // A leftover WAL or journal beside the target would be applied to the
  // new file when it is first opened, and corrupt it; a target that is a
  // side file of another database would be wiped by that database.
  for (const char* suffix : {"-wal", "-journal"}) {
    const std::string side = target + suffix;
    if (std::filesystem::exists(side, ec) && std::filesystem::file_size(side, ec) > 0) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} exists and is not empty: it belongs to an earlier "
                                     "database at {} and would be applied to the new one; "
                                     "remove it (and {}-shm) first",
                                     side, target, target));
    }
  }
  for (const char* suffix : storage::kSideFileSuffixes) {
    const std::string_view t(target);
    if (t.ends_with(suffix) &&
        std::filesystem::exists(std::string(t.substr(0, t.size() - std::strlen(suffix))), ec)) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} is a side file of the database beside it: {} builds "
                                     "a database elsewhere",
                                     target, command));
    }
  }
  if (!std::filesystem::exists(target, ec)) return;
  if (!std::filesystem::is_regular_file(target, ec)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{} is not a regular file: {} builds a database file there, "
                                   "and never replaces anything else",
                                   target, command));
  }
  if (std::filesystem::file_size(target, ec) > 0 ||
      (!source.empty() && std::filesystem::equivalent(target, source, ec))) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{} exists and is not empty: {} builds a fresh database, and "
                                   "never writes over one",
                                   target, command));
  }
}

// An export to read: a file, or standard input for "-".
File open_input(const std::string& source) {
  if (source == "-") return File{stdin, false};
  std::error_code ec;
  if (std::filesystem::is_directory(source, ec)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{} is a directory, not an export", source));
  }
  File in{std::fopen(source.c_str(), "rb"), true};
  if (in.f == nullptr) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("cannot open {}: {}", source, std::strerror(errno)));
  }
  return in;
}

}  // namespace

kj::MainFunc Cli::export_command() {
  return globals(kj::MainBuilder(
                     context_, kVersionLine,
                     "Write the log (one snapshot) to FILE, or to standard output with -, as a "
                     "stream of Cap'n Proto messages (events/export.capnp): a header with the "
                     "chain head, each stream's events and head, a footer with the file's "
                     "hash. A file is written beside FILE and renamed into place once complete. "
                     "Never creates a database."))
      .addOptionWithArg({"since"}, KJ_BIND_METHOD(*this, set_since), "<seq>",
                        "only the events after this seq (an incremental export)")
      .expectArg("FILE", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_export))
      .build();
}

Validity Cli::set_since(kj::StringPtr text) {
  auto v = parse_int<Seq>(text);
  if (!v && out_of_range(text) && text[0] != '-') return "--since is too large";
  if (!v || *v < 0) return "--since takes a non-negative seq";
  since_ = *v;
  return true;
}

Validity Cli::run_export() {
  return run([&] {
    const std::string target = args_.at(0);
    const bool to_stdout = target == "-";
    if (to_stdout && ::isatty(STDOUT_FILENO)) {
      throw InvalidArgument("an export is binary: redirect standard output to a file, or give one");
    }
    // Never over the database itself, its side files, or any database:
    // the rename below would replace it (and a WAL's committed frames).
    struct stat out_stat {};
    const bool stdout_is_file =
        to_stdout && ::fstat(STDOUT_FILENO, &out_stat) == 0 && S_ISREG(out_stat.st_mode);
    if (!to_stdout || stdout_is_file) {
      // Standard output redirected to a file (`1<>FILE`, `>> FILE`) is that
      // file: the same rules.
      const std::string source = db_ ? *db_ : default_db_path(false);
      if (auto why = storage::protected_target(to_stdout ? "/proc/self/fd/1" : target, source)) {
        if (to_stdout) why = "standard output (" + *why + ")";
        throw InvalidArgument(InvalidArgument::Reason::conflict, fmt::format(
            "{}: an export is never written over a database or its side files; give a new "
            "file, or an earlier export",
            *why));
      }
    }
    auto store = open(Access::read);
    ExportOptions options;
    options.since = since_;
    options.progress = progress("export");
    ExportSummary summary;
    // Where it goes: a regular file (or a new one) is written beside and
    // renamed into place; a symbolic link is followed to its target; a
    // pipe or a character device is written in place (renaming over it
    // would replace the device with a file); anything else is refused.
    std::string path = target;
    bool in_place = false;
    if (!to_stdout) {
      std::error_code ec;
      for (int hops = 0; std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec));
           ++hops) {
        const auto to = std::filesystem::read_symlink(path, ec);
        if (ec || hops == 40) {
          throw StorageError(StorageError::Category::unavailable,
                             fmt::format("cannot follow the link {}", target));
        }
        path = (to.is_absolute() ? to : std::filesystem::path(path).parent_path() / to).string();
      }
      const auto st = std::filesystem::status(path, ec);
      if (std::filesystem::is_fifo(st) || std::filesystem::is_character_file(st)) {
        in_place = true;
      } else if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
        throw StorageError(StorageError::Category::unavailable,
                           fmt::format("{} is not a regular file, a pipe or a character device: "
                                       "an export is not written there",
                                       target));
      }
    }
    if (to_stdout) {
      summary = export_log(store, stdout, options);
    } else if (in_place) {
      File out{std::fopen(path.c_str(), "wb"), true};
      if (out.f == nullptr) {
        throw StorageError(StorageError::Category::io,
                           fmt::format("cannot open {}: {}", target, std::strerror(errno)));
      }
      summary = export_log(store, out.f, options);
      if (std::fclose(out.f) != 0) {
        out.f = nullptr;
        throw StorageError(StorageError::Category::io,
                           fmt::format("cannot write {}: {}", target, std::strerror(errno)));
      }
      out.f = nullptr;
    } else {
      // Written beside the target and renamed into place once complete and
      // on disk: a reader never sees half an export under its name.
      const std::string partial = fmt::format("{}.partial-{}", path, ::getpid());
      const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) {
        throw StorageError(StorageError::Category::io,
                           fmt::format("cannot create {}: {}", partial, std::strerror(errno)));
      }
      File out{::fdopen(fd, "wb"), true};
      try {
        summary = export_log(store, out.f, options);
        if (::fsync(::fileno(out.f)) != 0 || std::fclose(out.f) != 0) {
          out.f = nullptr;
          throw StorageError(StorageError::Category::io,
                             fmt::format("cannot write {}: {}", partial, std::strerror(errno)));
        }
        out.f = nullptr;
        if (::rename(partial.c_str(), path.c_str()) != 0) {
          throw StorageError(StorageError::Category::io,
                             fmt::format("cannot rename {} to {}: {}", partial, target,
                                         std::strerror(errno)));
        }
      } catch (...) {
        ::unlink(partial.c_str());
        throw;
      }
    }
    end_progress();
    if (to_stdout) return;  // the data is the output
    print(json_ ? JsonObject()
                      .str("file", target)
                      .num("events", summary.events)
                      .num("heads", summary.heads)
                      .num("anchors", summary.anchors)
                      .num("since", since_)
                      .str("chain_head", summary.chain_head)
                      .done()
                : fmt::format("exported {} event(s) and {} head(s){}{} to {}; chain head {}",
                              summary.events, summary.heads,
                              summary.anchors > 0
                                  ? fmt::format(" and {} archived stream(s)' anchors",
                                                summary.anchors)
                                  : std::string(),
                              since_ > 0 ? fmt::format(" after seq {}", since_) : std::string(),
                              target, hex_or_none(summary.chain_head)));
  });
}

kj::MainFunc Cli::audit_command() {
  return globals(kj::MainBuilder(
                     context_, kVersionLine,
                     "Replay an export (FILE, or - for standard input) with no database: check "
                     "the file's integrity and the hash chain, fold the events and report every "
                     "problem the log shows on its own, then print a summary. With --against "
                     "DB, also compare the fold with that database's rows, as verify does. "
                     "Several FILEs (the export of a store that archived, and its archive "
                     "segments): each is audited on its own, then the whole history as one: "
                     "the segments' streams put back in place of the export's anchors in a "
                     "scratch database (in $TMPDIR, removed after) and verified end to end. "
                     "Exit 6 if any problem is found, 1 if a file is not a whole, readable "
                     "export."))
      .addOptionWithArg({"against"}, KJ_BIND_METHOD(*this, set_against), "<db>",
                        "compare the fold with this database's rows")
      .expectOneOrMoreArgs("FILE", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_audit))
      .build();
}

Validity Cli::set_against(kj::StringPtr text) {
  against_ = std::string(text.cStr());
  return true;
}

Validity Cli::run_audit() {
  return run([&] {
    if (args_.size() > 1) {
      audit_history();
      return;
    }
    const std::string source = args_.at(0);
    File in = open_input(source);
    std::optional<ControlStore> against;
    if (against_) {
      db_ = *against_;
      against.emplace(open(Access::read));
    }
    const auto report = audit_export(in.f, against ? &*against : nullptr, progress("audit"));
    end_progress();
    const auto& s = report.summary;
    if (json_) {
      print(JsonObject()
                .raw("problems", problems_json(report.problems))
                .raw("summary", JsonObject()
                                    .str("source_database", s.source_database)
                                    .str("segment_id", s.segment_id)
                                    .num("since", s.since)
                                    .num("events", s.events)
                                    .num("heads", s.heads)
                                    .num("anchors", s.anchors)
                                    .num("redacted_payloads", s.redacted_payloads)
                                    .num("projects", s.projects)
                                    .raw("items", JsonObject()
                                                      .num("ready", s.items_by_status[0])
                                                      .num("claimed", s.items_by_status[1])
                                                      .num("done", s.items_by_status[2])
                                                      .num("failed", s.items_by_status[3])
                                                      .num("closed", s.items_by_status[4])
                                                      .num("scheduled", s.items_by_status[5])
                                                      .num("cancelled", s.items_by_status[6])
                                                      .done())
                                    .num("first_seq", s.first_seq)
                                    .num("last_seq", s.last_seq)
                                    .num("first_at", s.first_at)
                                    .num("last_at", s.last_at)
                                    .str("chain_head", s.chain_head)
                                    .done())
                .done());
    } else {
      print_problems(report.problems);
      print(fmt::format("{} of database {}{}: {} event(s), {} head(s), seq {}..{}, at {}..{}",
                        s.segment_id.empty() ? "export" : "archive segment " + s.segment_id,
                        s.source_database.empty() ? "(unnamed)" : s.source_database,
                        s.since > 0 ? fmt::format(" (events after seq {} only: the chain was "
                                                  "checked, not the fold)",
                                                  s.since)
                                    : std::string(),
                        s.events, s.heads, s.first_seq, s.last_seq, s.first_at, s.last_at));
      if (s.anchors > 0) {
        print(fmt::format("{} archived stream(s) anchored: their events are in segments "
                          "(cplane archive --verify-only)",
                          s.anchors));
      }
      if (s.redacted_payloads > 0) {
        print(fmt::format("payloads redacted: {} event(s) hold their payload's digest only; "
                          "the chain covers each payload by that digest and was checked",
                          s.redacted_payloads));
      }
      if (s.since == 0) {
        print(fmt::format("{} project(s); items: {} ready, {} claimed, {} done, {} failed, {} "
                          "closed, {} scheduled, {} cancelled",
                          s.projects, s.items_by_status[0], s.items_by_status[1],
                          s.items_by_status[2], s.items_by_status[3], s.items_by_status[4],
                          s.items_by_status[5], s.items_by_status[6]));
      }
      print(fmt::format("chain head {}", hex_or_none(s.chain_head)));
      if (report.problems.empty()) {
        print(against_ ? (s.segment_id.empty()
                              ? "ok: the log passes its own checks and agrees with the rows"
                              : "ok: the segment passes its own checks and is exactly what the "
                                "store's anchors promise")
                       : "ok: the log passes its own checks");
      }
    }
    if (!report.problems.empty()) {
      if (!json_) std::cerr << report.problems.size() << " problem(s) found\n";
      throw Exit{kProblemsFound};
    }
  });
}

namespace {

// A folder of this command's own, removed with what is in it on every path out.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cplane-audit.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw StorageError(StorageError::Category::io,
                         fmt::format("cannot make a scratch folder {}: {}", pattern,
                                     std::strerror(errno)));
    }
    path = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

void add_problems(std::vector<LedgerProblem>& to, std::vector<LedgerProblem> from,
                  const std::string& where) {
  for (auto& p : from) {
    p.detail = fmt::format("{}: {}", where, p.detail);
    to.push_back(std::move(p));
  }
}

}  // namespace

// audit EXPORT SEGMENT...: each file on its own, then the history they make
// together, restored into a scratch store and verified.
void Cli::audit_history() {
  std::optional<ControlStore> against;
  if (against_) {
    db_ = *against_;
    against.emplace(open(Access::read));
  }
  std::vector<LedgerProblem> problems;
  std::optional<std::size_t> export_at;
  std::string files_json = "[";
  std::vector<std::pair<std::string, std::string>> sources;  // each file's database and segment
  for (std::size_t i = 0; i < args_.size(); ++i) {
    const std::string& path = args_[i];
    if (path == "-") {
      throw InvalidArgument("several files are audited from files, not from standard input");
    }
    File in = open_input(path);
    AuditReport report;
    try {
      report = audit_export(in.f, against ? &*against : nullptr);
    } catch (const StorageError& e) {
      throw StorageError(e.category(), fmt::format("{}: {}", path, e.what()));
    }
    const auto& s = report.summary;
    if (s.since > 0) {
      throw InvalidArgument(fmt::format("{} holds only the events after seq {} (--since): the "
                                        "whole history needs a whole export",
                                        path, s.since));
    }
    if (s.segment_id.empty()) {
      if (export_at) {
        throw InvalidArgument(fmt::format("{} and {} are both exports: give one export and its "
                                          "archive segments",
                                          args_[*export_at], path));
      }
      export_at = i;
    }
    add_problems(problems, std::move(report.problems), path);
    sources.emplace_back(s.source_database, s.segment_id);
    if (json_) {
      if (i > 0) files_json += ",";
      files_json += JsonObject()
                        .str("file", path)
                        .str("segment_id", s.segment_id)
                        .str("source_database", s.source_database)
                        .num("events", s.events)
                        .num("heads", s.heads)
                        .num("anchors", s.anchors)
                        .num("redacted_payloads", s.redacted_payloads)
                        .done();
    } else {
      print(fmt::format("{}: {} of database {}: {} event(s), {} head(s){}", path,
                        s.segment_id.empty() ? "export" : "archive segment " + s.segment_id,
                        s.source_database.empty() ? "(unnamed)" : s.source_database, s.events,
                        s.heads,
                        s.anchors > 0 ? fmt::format(", {} anchor(s)", s.anchors) : std::string()));
    }
  }
  files_json += "]";
  bool several_stores = false;
  if (!export_at) {
    // Segments alone: each once (with the export, the restore below checks
    // this and more: which streams each holds, and that they join). Several
    // databases are no proof of a fault (a store restored from an export
    // archives under an id of its own), only of a history that needs its
    // export to be checked as one.
    for (std::size_t i = 1; i < sources.size(); ++i) {
      several_stores = several_stores || sources[i].first != sources[0].first;
      for (std::size_t j = 0; j < i; ++j) {
        if (sources[i].second == sources[j].second) {
          problems.push_back({ProblemKind::event_inserted, "", "",
                              fmt::format("{} and {} are both segment {}", args_[j], args_[i],
                                          sources[i].second)});
        }
      }
    }
  }
  // The whole history: the export with every segment in place of its anchors.
  std::optional<RestoreReport> history;
  if (export_at) {
    ScratchDir scratch;
    const auto saved_db = db_;
    db_ = scratch.path + "/history.db";
    bulk_ = true;
    auto store = open(Access::create);
    db_ = saved_db;
    File in = open_input(args_[*export_at]);
    std::vector<File> segment_files;
    std::vector<std::FILE*> segments;
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (i == *export_at) continue;
      segment_files.push_back(open_input(args_[i]));
      segments.push_back(segment_files.back().f);
    }
    const std::string where = "the whole history";
    try {
      history = restore_export(in.f, store, {}, segments);
      add_problems(problems, verify_ledger(store), where);
    } catch (const InvalidArgument& e) {
      problems.push_back({ProblemKind::head_disagrees, "", "", fmt::format("{}: {}", where, e.what())});
    } catch (const RebuildRefused& refused) {
      add_problems(problems, refused.problems(), where);
    } catch (const StorageError& e) {
      if (e.category() != StorageError::Category::corruption) throw;
      problems.push_back(
          {ProblemKind::event_inserted, "", "", fmt::format("{}: {}", where, e.what())});
    }
  }
  if (json_) {
    print(JsonObject()
              .raw("problems", problems_json(problems))
              .raw("files", files_json)
              .raw("history", history ? JsonObject()
                                            .num("events", history->events)
                                            .num("items", history->items)
                                            .num("segments", static_cast<std::int64_t>(
                                                                 args_.size() - 1))
                                            .done()
                                      : std::string("null"))
              .done());
  } else {
    print_problems(problems);
    if (history) {
      print(fmt::format("the whole history: {} event(s), {} item(s), from one export and {} "
                        "segment(s)",
                        history->events, history->items, args_.size() - 1));
    } else if (!export_at) {
      print(fmt::format("no export given: each segment was checked on its own, not the history "
                        "they make with the live store{}",
                        several_stores ? " (they were written by more than one database)" : ""));
    }
    if (problems.empty()) {
      print(history ? "ok: every file passes its own checks, and the history they make "
                      "together passes verify"
                    : "ok: every file passes its own checks");
    }
  }
  if (!problems.empty()) {
    if (!json_) std::cerr << problems.size() << " problem(s) found\n";
    throw Exit{kProblemsFound};
  }
}

kj::MainFunc Cli::restore_command() {
  return globals(kj::MainBuilder(
                     context_, kVersionLine,
                     "Build a fresh database (--db NEW) from a whole export (FILE, or - for "
                     "standard input): the events with their hashes, the heads and digest, then "
                     "the rows by rebuild; verify on it is clean. Refuses a target that exists "
                     "and is not empty. On any failure, nothing is left at NEW. SEGMENT...: "
                     "archive segments of the exported store (cplane archive), whose streams "
                     "come back whole in place of their anchors: the full history."))
      .expectArg("FILE", KJ_BIND_METHOD(*this, set_positional))
      .expectZeroOrMoreArgs("SEGMENT", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_restore))
      .build();
}

Validity Cli::run_restore() {
  return run([&] {
    if (!db_) throw InvalidArgument("restore needs --db NEW: the database to build");
    if (storage_file(*db_).empty()) {
      restore_to_server();
      return;
    }
    const std::string target = storage_file(*db_);
    refuse_existing(target, "restore");
    const std::string source = args_.at(0);
    File in = open_input(source);
    std::vector<File> segment_files;
    std::vector<std::FILE*> segments;
    for (std::size_t i = 1; i < args_.size(); ++i) {
      segment_files.push_back(open_input(args_[i]));
      segments.push_back(segment_files.back().f);
    }
    const std::string partial = fmt::format("{}.partial-{}", target, ::getpid());
    RemoveOnFailure cleanup{partial};  // whatever this command created goes again if it fails
    RestoreReport report;
    {
      bulk_ = true;
      db_ = partial;
      auto store = open(Access::create);
      try {
        report = restore_export(in.f, store, progress("restore"), segments);
      } catch (const RebuildRefused& refused) {
        end_progress();
        print_problems(refused.problems());
        context_.report_error("restore_refused", "log_fails_checks",
                              "cplane: restore refused, nothing written: the exported log fails "
                              "its own checks (see `cplane audit FILE`)");
        throw Exit{kProblemsFound};
      }
    }
    move_into_place(partial, target);
    cleanup.armed = false;
    changed_ = true;
    end_progress();
    print_restored(report, target);
  });
}

// Restore into a server's store (PostgreSQL: an empty schema). There is no
// file to build aside and rename into place, so the export is audited first
// (read twice: a FILE, not standard input), and nothing is written when it
// fails its own checks.
void Cli::restore_to_server() {
  const std::string source = args_.at(0);
  if (source == "-") {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          "restore into a server reads the export twice (audit, then import): "
                          "give a FILE, not -");
  }
  // The export and each segment audited first: what fails its own checks
  // is refused before anything is written. (How the segments fit the
  // export's anchors is checked inside the import's transaction.)
  for (const auto& file : args_) {
    File check = open_input(file);
    const auto audit = audit_export(check.f, nullptr);
    if (!audit.problems.empty()) {
      print_problems(audit.problems);
      context_.report_error("restore_refused", "log_fails_checks",
                            fmt::format("cplane: restore refused, nothing written: {} fails its "
                                        "own checks (see `cplane audit {}`)",
                                        file, file));
      throw Exit{kProblemsFound};
    }
  }
  File in = open_input(source);
  std::vector<File> segment_files;
  std::vector<std::FILE*> segments;
  for (std::size_t i = 1; i < args_.size(); ++i) {
    segment_files.push_back(open_input(args_[i]));
    segments.push_back(segment_files.back().f);
  }
  bulk_ = true;
  auto store = open(Access::create);
  RestoreReport report;
  try {
    report = restore_export(in.f, store, progress("restore"), segments);
  } catch (const RebuildRefused& refused) {
    // The file changed since it was audited: its events are in, its rows
    // were not built (exit 6 like the audit's refusal above).
    changed_ = true;
    end_progress();
    print_problems(refused.problems());
    context_.report_error("restore_refused", "log_fails_checks",
                          "cplane: restore refused: the exported log fails its own checks (see "
                          "`cplane audit FILE`); its events were imported, no row was built");
    throw Exit{kProblemsFound};
  }
  changed_ = true;
  end_progress();
  print_restored(report, redacted_url(*db_));
}

void Cli::print_restored(const RestoreReport& report, const std::string& target) {
  if (json_) {
    print(JsonObject()
              .str("db", target)
              .num("events", report.events)
              .num("items", report.items)
              .num("kept_anchored", report.kept_anchored)
              .done());
    return;
  }
  print(fmt::format("restored {} event(s) ({} items) into {}", report.events, report.items,
                    target));
  if (report.kept_anchored > 0) {
    print(fmt::format("{} stream(s) of redacted segment(s) stay archived: their payloads cannot "
                      "come back, so their anchors stay, checked against each segment",
                      report.kept_anchored));
  }
}

kj::MainFunc Cli::recover_command() {
  return globals(kj::MainBuilder(
                     context_, kVersionLine,
                     "Salvage a damaged database (--db DAMAGED) into a fresh one (--to NEW): "
                     "every readable event with its hash, the heads and readable rows; then the "
                     "rows are rebuilt from what was salvaged (rows that show the log lost "
                     "events are kept, so no fence is handed out twice) and NEW is verified. "
                     "Says which seqs were lost and which items' histories lost events or could "
                     "not be verified. DAMAGED is never written (the work is done on a copy "
                     "beside NEW). Exit 0 when nothing was lost, 6 when something was, 1 when "
                     "nothing could be read."))
      .addOptionWithArg({"to"}, KJ_BIND_METHOD(*this, set_to), "<new>",
                        "the database to build (must not exist, or be empty)")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_recover))
      .build();
}

Validity Cli::set_to(kj::StringPtr text) {
  to_ = std::string(text.cStr());
  return true;
}

Validity Cli::run_recover() {
  return run([&] {
    if (!db_) throw InvalidArgument("recover needs --db DAMAGED: the database to salvage");
    if (!to_) throw InvalidArgument("recover needs --to NEW: the database to build");
    const std::string damaged = storage_file(*db_);
    const std::string target = storage_file(*to_);
    refuse_existing(target, "recover", damaged);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(damaged, ec)) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("{} is not a file: nothing to recover", damaged));
    }
    const std::string partial = fmt::format("{}.partial-{}", target, ::getpid());
    RemoveOnFailure cleanup{partial};
    RecoverReport report;
    {
      db_ = partial;
      bulk_ = true;
      auto store = open(Access::create);
      report = recover(damaged, store, partial + "-salvage", progress("recover"));
    }
    move_into_place(partial, target);
    cleanup.armed = false;
    changed_ = true;
    end_progress();
    auto ranges_json = [](const std::vector<std::pair<Seq, Seq>>& ranges) {
      std::string out = "[";
      for (std::size_t i = 0; i < ranges.size(); ++i) {
        out += fmt::format("{}[{},{}]", i ? "," : "", ranges[i].first, ranges[i].second);
      }
      return out + "]";
    };
    auto ranges_text = [](const std::vector<std::pair<Seq, Seq>>& ranges) {
      std::string out;
      for (const auto& [a, b] : ranges) {
        out += (out.empty() ? "" : ", ") + (a == b ? fmt::format("{}", a) : fmt::format("{}..{}", a, b));
      }
      return out;
    };
    const bool lost = !report.unreadable.empty() || !report.absent.empty() ||
                      !report.heads_readable || !report.problems.empty();
    if (json_) {
      print(JsonObject()
                .str("db", target)
                .num("events", report.events)
                .num("heads", report.heads)
                .num("rows", report.rows)
                .num("newest_seq", report.newest_seq)
                .boolean("heads_readable", report.heads_readable)
                .boolean("rows_readable", report.rows_readable)
                .boolean("digest_readable", report.digest_readable)
                .raw("unreadable", ranges_json(report.unreadable))
                .raw("absent", ranges_json(report.absent))
                .num("changes_total", report.rebuild.changes_total)
                .num("kept_total", report.rebuild.kept_total)
                .raw("problems", problems_json(report.problems))
                .done());
    } else {
      print(fmt::format("recovered {} event(s) of {} (the log reached seq {}) into {}; {} head(s) "
                        "and {} row(s) salvaged; rows: {} rebuilt, {} kept as they were",
                        report.events, damaged, report.newest_seq, target, report.heads,
                        report.rows, report.rebuild.changes_total, report.rebuild.kept_total));
      if (!report.unreadable.empty()) {
        print("lost, on pages that could not be read: seq " + ranges_text(report.unreadable));
      }
      if (!report.absent.empty()) {
        print("lost, missing from the log: seq " + ranges_text(report.absent));
      }
      if (!report.heads_readable) {
        print("the stream heads could not all be read (unreadable, or rows missing: each put back "
              "from its stream's last event): the newest events of a stream may have been lost "
              "unseen");
      }
      if (!report.rows_readable) print("the item rows could not be read: all were rebuilt from the log");
      if (!report.problems.empty()) {
        print("histories that lost events or could not be verified:");
        print_problems(report.problems);
      }
      if (!lost) print("ok: nothing was lost, and the new database verifies");
    }
    if (lost) throw Exit{kProblemsFound};
  });
}

}  // namespace cplane::cli
