// cplane: the command-line tool. One subcommand per store command, plus
// verify and rebuild. See README.md for the contract; exit codes:
//   0 done, 1 failure (storage, corruption, I/O), 2 usage or invalid input,
//   3 nothing to claim, 4 FenceRejected, 5 ScopeDenied, 6 verify found
//   problems, 7 no such item or project.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <kj/main.h>

#include <cplane/cplane.hpp>

#include "cli/json_writer.hpp"
#include "storage/sqlite_backend.hpp"

namespace cplane::cli {
namespace {

enum ExitCode : int {
  kOk = 0,
  kFailure = 1,
  kUsage = 2,
  kNothingToClaim = 3,
  kFenceRejected = 4,
  kScopeDenied = 5,
  kProblemsFound = 6,
  kNotFound = 7,
};

// Thrown to leave the command with an exit status; caught in main().
struct Exit {
  int code;
};

// KJ's argument parser reports through a ProcessContext: ours maps usage
// errors to exit status 2 and keeps KJ from calling exit() itself.
class CliContext final : public kj::ProcessContext {
 public:
  explicit CliContext(const char* program) : program_(program) {}
  kj::StringPtr getProgramName() override { return program_; }
  [[noreturn]] void exit() override { throw Exit{kOk}; }
  void warning(kj::StringPtr message) override { std::cerr << message.cStr() << '\n'; }
  void error(kj::StringPtr message) override { std::cerr << message.cStr() << '\n'; }
  // KJ's message is "cplane claim: <what>\nTry 'cplane claim --help' ...":
  // keep its first line, one sentence.
  [[noreturn]] void exitError(kj::StringPtr message) override {
    std::string text = message.cStr();
    text = text.substr(0, text.find('\n'));
    report_error("usage", "usage", text + " (see --help)");
    throw Exit{kUsage};
  }

  // One error on stderr: a sentence, or with --json one object
  // {"error": {"kind", "reason", "message"}} so that scripts need not parse
  // English. stdout is left alone.
  void report_error(std::string_view kind, std::string_view reason, const std::string& message) {
    if (json) {
      std::cerr << "{\"error\":"
                << JsonObject().str("kind", kind).str("reason", reason).str("message", message).done()
                << "}\n";
    } else {
      std::cerr << message << '\n';
    }
  }
  [[noreturn]] void exitInfo(kj::StringPtr message) override {
    output += message.cStr();
    if (!message.endsWith("\n")) output += '\n';
    throw Exit{kOk};
  }
  void increaseLoggingVerbosity() override { verbose = true; }

  // Writes `output` to standard output. False, with errno set, if any of it
  // could not be written (a full disk, /dev/full, a closed pipe, EFBIG).
  bool flush_output() {
    std::size_t at = 0;
    while (at < output.size()) {
      const ssize_t n = ::write(STDOUT_FILENO, output.data() + at, output.size() - at);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      at += static_cast<std::size_t>(n);
    }
    return true;
  }

  bool json = false;     // --json anywhere on the command line: errors as JSON too
  bool verbose = false;  // --verbose: say what was opened and how long each step took
  bool changed = false;  // the command committed a change (for the output-failure message)
  std::string output;    // what goes to stdout, written once the command is done

 private:
  kj::StringPtr program_;
};

using Validity = kj::MainBuilder::Validity;

constexpr const char* kVersion = "cplane 0.1.0";

template <class Int>
std::optional<Int> parse_int(kj::StringPtr text) {
  Int value{};
  const char* end = text.begin() + text.size();
  auto [p, ec] = std::from_chars(text.begin(), end, value);
  if (ec != std::errc() || p != end || text.size() == 0) return std::nullopt;
  return value;
}

// Digits alone, but too many for the type: say so, not "not a number".
bool out_of_range(kj::StringPtr text) {
  const std::string_view t(text.cStr(), text.size());
  const std::size_t from = !t.empty() && t[0] == '-' ? 1 : 0;
  return t.size() > from &&
         t.find_first_not_of("0123456789", from) == std::string_view::npos;
}

// A decimal number, as people write one: digits with an optional sign,
// fraction and exponent; no hex, no surrounding space, no "inf" or "nan".
std::optional<double> parse_decimal(kj::StringPtr text) {
  const std::string_view t(text.cStr(), text.size());
  if (t.empty()) return std::nullopt;
  std::size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  const std::size_t digits_from = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  std::size_t digits = i - digits_from;
  if (i < t.size() && t[i] == '.') {
    const std::size_t from = ++i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    digits += i - from;
  }
  if (digits == 0) return std::nullopt;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    const std::size_t from = i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    if (i == from) return std::nullopt;
  }
  if (i != t.size()) return std::nullopt;
  double value = 0;
  const char* begin = t.data() + (t[0] == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(begin, t.data() + t.size(), value);
  if (ec == std::errc::result_out_of_range) return std::numeric_limits<double>::infinity();
  if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  return value;
}

// A number of seconds for --lock-timeout: 0 or more, at most a day.
std::optional<std::chrono::milliseconds> parse_timeout(kj::StringPtr text) {
  auto v = parse_decimal(text);
  if (!v || !std::isfinite(*v) || *v < 0 || *v > 86'400) return std::nullopt;
  return std::chrono::milliseconds{static_cast<std::int64_t>(std::llround(*v * 1000))};
}

// Where the database lives when neither --db nor $CPLANE_DB says: control.db
// in cplane/ inside the user's cache folder ($XDG_CACHE_HOME, else
// ~/.cache). Only a command that writes creates anything, and then only
// cplane/ (and ~/.cache inside an existing HOME), never HOME or above it.
std::string default_db_path(bool create_folder) {
  if (const char* env = std::getenv("CPLANE_DB"); env != nullptr && *env != '\0') return env;
  namespace fs = std::filesystem;
  fs::path cache;
  fs::path must_exist;  // the folder we never create
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg != nullptr && *xdg == '/') {  // relative values are ignored (XDG spec)
    cache = fs::path(xdg).lexically_normal();
    if (!cache.has_filename()) cache = cache.parent_path();
    must_exist = cache.parent_path();
  } else if (home != nullptr && *home != '\0') {
    must_exist = home;
    cache = must_exist / ".cache";
  } else {
    throw StorageError(StorageError::Category::unavailable,
                       "no database given, and neither XDG_CACHE_HOME nor HOME is set to find "
                       "the default: pass --db PATH or set CPLANE_DB");
  }
  const fs::path db = cache / "cplane" / "control.db";
  if (!create_folder) return db.string();
  std::error_code ec;
  if (!fs::is_directory(must_exist, ec)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{} ({}) is not an existing folder, so the default database "
                                   "{} cannot be created: pass --db PATH or set CPLANE_DB",
                                   must_exist == cache.parent_path() && xdg != nullptr && *xdg == '/'
                                       ? "the folder above XDG_CACHE_HOME"
                                       : "HOME",
                                   must_exist.string(), db.string()));
  }
  for (const fs::path& dir : {cache, cache / "cplane"}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("cannot create {} for the default database {}: {}",
                                     dir.string(), db.string(), std::strerror(errno)));
    }
  }
  return db.string();
}

// Options that take a value, so that "--now -5" reads as "--now=-5" rather
// than as a missing value followed by an unknown option "-5".
constexpr std::array kValueOptions = {"--db",     "--now",   "--durability", "--lock-timeout",
                                      "--actor",  "--owner", "--lease",      "--max",
                                      "--fence",  "--status", "--detail",    "--project",
                                      "--batch"};

std::vector<std::string> join_option_values(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (; i < argc; ++i) out.emplace_back(argv[i]);
      break;
    }
    const bool takes_value =
        std::find(kValueOptions.begin(), kValueOptions.end(), arg) != kValueOptions.end();
    if (takes_value && i + 1 < argc) {
      out.push_back(arg + "=" + argv[++i]);
    } else {
      out.push_back(std::move(arg));
    }
  }
  return out;
}

// Reads a payload argument: "-" is standard input, "@FILE" a file, anything
// else the JSON itself. Files and stdin are read up to just over the limit.
std::string read_payload_argument(const std::string& arg) {
  if (arg != "-" && !arg.starts_with("@")) return arg;
  if (arg == "@") throw InvalidArgument("@ needs a file name: @FILE reads the payload from FILE");
  constexpr std::size_t kCap = (1 << 20) + 1;
  std::string text;
  auto read_all = [&](std::istream& in, const std::string& name) {
    char buffer[65536];
    while (text.size() < kCap && in.read(buffer, sizeof buffer).gcount() > 0) {
      text.append(buffer, static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) throw InvalidArgument(fmt::format("cannot read the payload from {}", name));
  };
  if (arg == "-") {
    read_all(std::cin, "standard input");
  } else {
    const std::string path = arg.substr(1);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      throw InvalidArgument(
          fmt::format("cannot read the payload file {}: {}", path, std::strerror(errno)));
    }
    read_all(in, path);
  }
  // A file usually ends with a newline; it is not part of the payload.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// How a command opens the store.
enum class Access {
  create,  // writes; creates the database (and the default folder) if missing
  write,   // writes; the database must exist (rebuild)
  read,    // reads one snapshot: no lock, nothing created or written
};

class Cli {
 public:
  explicit Cli(CliContext& context) : context_(context) {}

  kj::MainFunc main() {
    auto builder = kj::MainBuilder(
        context_, kVersion,
        "A durable control plane for a fleet of workers: projects, work items, atomic claims "
        "with fenced leases, and an append-only ledger of every transition.",
        "The database is --db PATH, else $CPLANE_DB, else control.db under the user's cache "
        "directory. Exit status: 0 done, 1 failure, 2 usage or invalid input, 3 nothing to "
        "claim, 4 fence rejected, 5 scope denied, 6 verify found problems, 7 no such item or "
        "project.");
    globals(builder);
    return builder
        .addSubCommand("project", KJ_BIND_METHOD(*this, project_command),
                       "create a project or assign an actor to it")
        .addSubCommand("projects", KJ_BIND_METHOD(*this, projects_command),
                       "list the projects (an actor's, with --actor)")
        .addSubCommand("enqueue", KJ_BIND_METHOD(*this, enqueue_command),
                       "queue a work item with a JSON payload")
        .addSubCommand("claim", KJ_BIND_METHOD(*this, claim_command),
                       "claim the oldest available item")
        .addSubCommand("finish", KJ_BIND_METHOD(*this, finish_command),
                       "report a claimed item done or failed")
        .addSubCommand("item", KJ_BIND_METHOD(*this, item_command), "show an item's row")
        .addSubCommand("events", KJ_BIND_METHOD(*this, events_command),
                       "show an item's events, oldest first")
        .addSubCommand("verify", KJ_BIND_METHOD(*this, verify_command),
                       "replay the log and compare it with the rows")
        .addSubCommand("rebuild", KJ_BIND_METHOD(*this, rebuild_command),
                       "rewrite the rows from the log")
        .addSubCommand("stats", KJ_BIND_METHOD(*this, stats_command),
                       "count items by status (one project with --project)")
        .addSubCommand("migrate", KJ_BIND_METHOD(*this, migrate_command),
                       "upgrade an existing database to this cplane's schema")
        .build();
  }

 private:
  // --db, --json, --now, --durability, --lock-timeout are accepted before
  // or after the subcommand and its arguments.
  kj::MainBuilder& globals(kj::MainBuilder& b) {
    return b
        .addOptionWithArg({"lock-timeout"}, KJ_BIND_METHOD(*this, set_lock_timeout), "<seconds>",
                          "how long a write waits for the write lock before it fails as busy "
                          "(default 30; 0: do not wait)")
        .addOptionWithArg({"db"}, KJ_BIND_METHOD(*this, set_db), "<path>",
                          "the database file (default: $CPLANE_DB, else the cache directory)")
        .addOption({"json"}, KJ_BIND_METHOD(*this, set_json), "print machine-readable JSON")
        .addOptionWithArg({"now"}, KJ_BIND_METHOD(*this, set_now), "<micros>",
                          "the command's clock, in microseconds since the epoch")
        .addOptionWithArg({"durability"}, KJ_BIND_METHOD(*this, set_durability),
                          "<full|fenced|normal>",
                          "which commits wait for the disk (default fenced: claims and "
                          "enqueues do, finishes do not)");
  }

  // For a subcommand's parser: globals(kj::MainBuilder(...)).add...().build().
  // The builder is a temporary that lives until its chain ends with build().
  kj::MainBuilder& globals(kj::MainBuilder&& b) { return globals(b); }

  Validity set_db(kj::StringPtr path) {
    if (path.size() == 0) return "--db needs a path";
    db_ = std::string(path.cStr());
    return true;
  }
  Validity set_json() {
    json_ = true;
    return true;
  }
  Validity set_now(kj::StringPtr text) {
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
  Validity set_lock_timeout(kj::StringPtr text) {
    auto v = parse_timeout(text);
    if (!v) return "--lock-timeout takes a decimal number of seconds from 0 to 86400";
    lock_timeout_ = *v;
    return true;
  }
  Validity set_durability(kj::StringPtr text) {
    try {
      durability_ = parse_durability(text.cStr());
    } catch (const InvalidArgument& e) {
      return kj::str(e.what());
    }
    return true;
  }
  // Names are checked as they are read, so that nothing is opened for a
  // name the store would refuse.
  static Validity check_name(kj::StringPtr text, const char* what) {
    try {
      require_name(std::string_view(text.cStr(), text.size()), what);
    } catch (const InvalidArgument& e) {
      return kj::str(e.what());
    }
    return true;
  }
  Validity set_actor(kj::StringPtr text) {
    if (text.size() == 0) return "--actor needs a name";
    KJ_IF_MAYBE(error, check_name(text, "actor").releaseError()) { return kj::mv(*error); }
    actor_ = std::string(text.cStr());
    return true;
  }
  Validity set_positional(kj::StringPtr text) {
    args_.emplace_back(text.cStr());
    return true;
  }

  // Reads never create anything: a mistyped path is an error (exit 1), not
  // a new, empty, "clean" store. Arguments are checked before this is called.
  ControlStore open(Access access = Access::create) {
    StoreOptions options;
    options.durability = durability_;
    options.lock_timeout = lock_timeout_;
    options.create = access == Access::create;
    options.read_only = access == Access::read;
    const std::string path = db_ ? *db_ : default_db_path(access == Access::create);
    if (path == ":memory:") {
      throw InvalidArgument("--db :memory: would keep nothing past this command: give a file");
    }
    const auto start = std::chrono::steady_clock::now();
    ControlStore store(path, options);
    if (context_.verbose) {
      std::cerr << fmt::format(
          "cplane: opened {} for {} in {:.1f} ms (durability {}, lock timeout {} ms)\n", path,
          access == Access::read ? "reading (one snapshot, no lock)" : "writing",
          elapsed_ms(start), to_string(durability_), lock_timeout_.count());
    }
    return store;
  }

  static double elapsed_ms(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  }

  // ---- project ------------------------------------------------------------
  kj::MainFunc project_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Create a project, or grant an actor one."))
        .addSubCommand("create", KJ_BIND_METHOD(*this, project_create_command),
                       "create a project")
        .addSubCommand("grant", KJ_BIND_METHOD(*this, project_grant_command),
                       "let a scoped actor see a project")
        .addSubCommand("assign", KJ_BIND_METHOD(*this, project_grant_command),
                       "the old name of grant, kept for one release")
        .build();
  }

  kj::MainFunc project_create_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Create project ID with TITLE. Refused (exit 2) if ID is taken."))
        .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_status), "<status>",
                          "the project's status (default: open)")
        .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
        .expectArg("TITLE", KJ_BIND_METHOD(*this, set_positional))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_project_create))
        .build();
  }
  Validity set_status(kj::StringPtr text) {
    status_ = std::string(text.cStr());
    status_set_ = true;
    return true;
  }
  Validity run_project_create() {
    return run([&] {
      require_name(args_[0], "project id");
      if (status_.empty()) throw InvalidArgument("a project status must not be empty");
      auto store = open();
      store.create_project(args_[0], args_[1], status_, now_);
      changed_ = true;
      print(json_ ? JsonObject().str("project_id", args_[0]).str("title", args_[1])
                        .str("status", status_).done()
                  : args_[0]);
    });
  }

  kj::MainFunc project_grant_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Grant ACTOR project ID (alias: project assign, kept for one release): the actor may then see it, enqueue into it and "
               "claim from it."))
        .expectArg("ID", KJ_BIND_METHOD(*this, set_positional))
        .expectArg("ACTOR", KJ_BIND_METHOD(*this, set_positional))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_project_grant))
        .build();
  }
  Validity run_project_grant() {
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

  // ---- projects -------------------------------------------------------------
  kj::MainFunc projects_command() {
    return globals(kj::MainBuilder(context_, kVersion, "List project ids, sorted: all of them, or those assigned to --actor."))
        .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                          "only the projects this actor is assigned to")
        .callAfterParsing(KJ_BIND_METHOD(*this, run_projects))
        .build();
  }
  Validity run_projects() {
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

  // ---- enqueue --------------------------------------------------------------
  kj::MainFunc enqueue_command() {
    return globals(kj::MainBuilder(
               context_, kVersion,
               "Queue a work item in PROJECT with a JSON payload (at most 1 MiB); prints the new "
               "item id. PAYLOAD_JSON may be - (read standard input) or @FILE (read FILE). With "
               "--batch FILE (or - for standard input), queue one payload per line (blank lines "
               "are skipped) in one transaction, all or nothing, and print the ids in order."))
        .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                          "enqueue as this scoped actor")
        .addOptionWithArg({"batch"}, KJ_BIND_METHOD(*this, set_batch), "<file|->",
                          "one JSON payload per line, queued in one transaction")
        .expectArg("PROJECT", KJ_BIND_METHOD(*this, set_positional))
        .expectOptionalArg("PAYLOAD_JSON", KJ_BIND_METHOD(*this, set_positional))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_enqueue))
        .build();
  }
  Validity set_batch(kj::StringPtr text) {
    if (text.size() == 0) return "--batch needs a file (or - for standard input)";
    if (batch_) return "--batch is given twice: queue one batch at a time";
    batch_ = std::string(text.cStr());
    return true;
  }
  // The payloads of --batch, checked line by line before anything is opened.
  std::vector<std::string> read_batch() const {
    std::ifstream file;
    if (*batch_ != "-") {
      file.open(*batch_, std::ios::binary);
      if (!file) {
        throw InvalidArgument(
            fmt::format("cannot read the batch file {}: {}", *batch_, std::strerror(errno)));
      }
    }
    std::istream& in = *batch_ == "-" ? std::cin : file;
    std::vector<std::string> payloads;
    std::string line;
    // A line is read up to just over the payload limit, never whole: a
    // file without newlines (/dev/zero) is refused, not read into memory.
    constexpr std::size_t kLineCap = (1 << 20) + 2;
    auto next_line = [&](std::string& out) {
      out.clear();
      char c;
      bool any = false;
      while (in.get(c)) {
        any = true;
        if (c == '\n') return true;
        if (out.size() >= kLineCap) return true;  // require_payload refuses it
        out.push_back(c);
      }
      return any;
    };
    for (std::size_t number = 1; next_line(line); ++number) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      try {
        require_payload(line);
      } catch (const InvalidArgument& e) {
        throw InvalidArgument(fmt::format("line {} of {}: {}", number,
                                          *batch_ == "-" ? "standard input" : *batch_, e.what()));
      }
      payloads.push_back(std::move(line));
    }
    if (in.bad()) throw InvalidArgument(fmt::format("cannot read the batch {}", *batch_));
    if (payloads.empty()) {
      throw InvalidArgument(fmt::format("the batch {} holds no payload", *batch_));
    }
    return payloads;
  }
  Validity run_enqueue() {
    if (batch_ && args_.size() > 1) return "enqueue takes PAYLOAD_JSON or --batch, not both";
    if (!batch_ && args_.size() < 2) {
      return "enqueue needs PAYLOAD_JSON (JSON text, - for standard input, @FILE), or --batch";
    }
    return run([&] {
      require_name(args_[0], "project id");
      if (batch_) {
        const auto payloads = read_batch();
        auto store = open();
        const auto ids = store.enqueue_batch(args_[0], payloads, actor_, now_);
        changed_ = true;
        std::string out = json_ ? "[" : "";
        for (std::size_t i = 0; i < ids.size(); ++i) {
          out += json_ ? (i ? "," : "") +
                             JsonObject().str("item_id", ids[i]).str("project_id", args_[0]).done()
                       : (i ? "\n" : "") + ids[i];
        }
        print(json_ ? out + "]" : out);
        return;
      }
      const std::string payload = read_payload_argument(args_[1]);
      require_payload(payload);
      auto store = open();
      auto id = store.enqueue(args_[0], payload, actor_, now_);
      changed_ = true;
      print(json_ ? JsonObject().str("item_id", id).str("project_id", args_[0]).done() : id);
    });
  }

  // ---- claim ----------------------------------------------------------------
  kj::MainFunc claim_command() {
    return globals(kj::MainBuilder(
               context_, kVersion,
               "Claim the oldest available item (ready, or with a lapsed lease) for OWNER. With "
               "--max N, claim up to N items in one transaction (JSON: an array). Exit 3 when "
               "there is nothing to claim."))
        .addOptionWithArg({"owner"}, KJ_BIND_METHOD(*this, set_owner), "<owner>",
                          "the worker that will hold the item (required)")
        .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                          "claim only from this scoped actor's projects")
        .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                          "how long the claim holds (default 900)")
        .addOptionWithArg({"max"}, KJ_BIND_METHOD(*this, set_max), "<n>",
                          "claim up to n items in one transaction")
        .callAfterParsing(KJ_BIND_METHOD(*this, run_claim))
        .build();
  }
  Validity set_owner(kj::StringPtr text) {
    if (text.size() == 0) return "--owner needs a name";
    KJ_IF_MAYBE(error, check_name(text, "owner").releaseError()) { return kj::mv(*error); }
    owner_ = std::string(text.cStr());
    return true;
  }
  Validity set_lease(kj::StringPtr text) {
    auto v = parse_decimal(text);
    if (!v) return "--lease takes a decimal number of seconds (such as 30 or 0.5)";
    try {
      require_lease(Seconds{*v});
    } catch (const InvalidArgument& e) {
      return kj::str(e.what());
    }
    lease_ = *v;
    return true;
  }
  Validity set_max(kj::StringPtr text) {
    auto v = parse_int<std::size_t>(text);
    if (!v && out_of_range(text) && text[0] != '-') return "--max is too large";
    if (!v || *v == 0) return "--max takes a positive integer";
    max_ = *v;
    return true;
  }
  ClaimOptions claim_options() const {
    ClaimOptions options{actor_, {}, now_};
    if (lease_) options.lease = Seconds{*lease_};
    return options;
  }
  std::string claimed_json(const ClaimedItem& c) const {
    return JsonObject()
        .str("item_id", c.item_id)
        .str("project_id", c.project_id)
        .raw("payload", json_raw_or_string(c.payload))
        .num("fence", static_cast<std::int64_t>(c.fence))
        .num("attempts", c.attempts)
        .num("lease_expires_at", c.lease_expires_at)
        .str("owner", *owner_)
        .done();
  }
  static std::string claimed_text(const ClaimedItem& c) {
    return fmt::format("item_id: {}\nproject_id: {}\nfence: {}\nattempts: {}\n"
                       "lease_expires_at: {}\npayload: {}",
                       c.item_id, c.project_id, c.fence, c.attempts, c.lease_expires_at,
                       c.payload);
  }
  [[noreturn]] void nothing_to_claim(const char* message, const char* empty_json = "null") {
    if (json_) print(empty_json);
    context_.report_error("nothing_to_claim", "empty", message);
    throw Exit{kNothingToClaim};
  }
  Validity run_claim() {
    if (!owner_) return "claim needs --owner OWNER";
    return run([&] {
      auto store = open();
      if (max_) {
        auto batch = store.claim_batch(*owner_, *max_, claim_options());
        changed_ = !batch.empty();
        if (batch.empty()) nothing_to_claim("nothing to claim", "[]");
        std::string out = json_ ? "[" : "";
        for (std::size_t i = 0; i < batch.size(); ++i) {
          out += json_ ? (i ? "," : "") + claimed_json(batch[i])
                       : (i ? "\n\n" : "") + claimed_text(batch[i]);
        }
        print(json_ ? out + "]" : out);
        return;
      }
      auto claimed = store.claim(*owner_, claim_options());
      changed_ = claimed.has_value();
      if (!claimed) nothing_to_claim("nothing to claim");
      print(json_ ? claimed_json(*claimed) : claimed_text(*claimed));
    });
  }

  // ---- finish ---------------------------------------------------------------
  kj::MainFunc finish_command() {
    return globals(kj::MainBuilder(
               context_, kVersion,
               "Report ITEM done or failed under its current fence. Several items may be "
               "given, each with its own --fence in the same order: all are finished in one "
               "transaction, or (exit 4) none. With --next --owner OWNER, also claim OWNER's "
               "next item in the same transaction (exit 3 if there is none). Exit 4 if a fence "
               "is stale or an item is not claimed."))
        .addOptionWithArg({"fence"}, KJ_BIND_METHOD(*this, set_fence), "<n>",
                          "the fence the claim returned (required; once per ITEM)")
        .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_status), "<done|failed>",
                          "the outcome (required)")
        .addOptionWithArg({"detail"}, KJ_BIND_METHOD(*this, set_detail), "<text>",
                          "a note kept with the outcome")
        .addOption({"next"}, KJ_BIND_METHOD(*this, set_next),
                   "also claim the next item for --owner, in the same transaction")
        .addOptionWithArg({"owner"}, KJ_BIND_METHOD(*this, set_owner), "<owner>",
                          "with --next: the worker that claims the next item")
        .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                          "report as this scoped actor (exit 5 outside its projects); with "
                          "--next, claim only from its projects")
        .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                          "with --next: the next claim's lease (default 900)")
        .expectOneOrMoreArgs("ITEM", KJ_BIND_METHOD(*this, set_positional))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_finish))
        .build();
  }
  Validity set_fence(kj::StringPtr text) {
    auto v = parse_int<Fence>(text);
    if (!v && out_of_range(text) && text[0] != '-') {
      return "--fence is larger than any fence (the largest is 18446744073709551615)";
    }
    if (!v) return "--fence takes a non-negative integer";
    fences_.push_back(*v);
    return true;
  }
  Validity set_detail(kj::StringPtr text) {
    detail_ = std::string(text.cStr());
    return true;
  }
  Validity set_next() {
    next_ = true;
    return true;
  }
  Validity run_finish() {
    if (fences_.empty()) return "finish needs --fence N";
    if (fences_.size() != args_.size()) return "finish needs one --fence per ITEM, in order";
    if (!status_set_) return "finish needs --status done|failed";
    if (next_ && !owner_) return "finish --next needs --owner OWNER";
    if (next_ && args_.size() != 1) return "finish --next takes one ITEM";
    return run([&] {
      const Outcome outcome = parse_outcome(status_);
      for (const auto& id : args_) require_name(id, "item id");
      if (detail_.size() > (64 << 10)) {
        throw InvalidArgument(fmt::format("the detail is {} bytes; the limit is {}",
                                          detail_.size(), 64 << 10));
      }
      auto store = open();
      if (next_) {
        auto next = store.finish_and_claim(args_[0], fences_[0], outcome, *owner_,
                                           claim_options(), detail_);
        changed_ = true;
        if (!next) nothing_to_claim("finished; nothing to claim next");
        print(json_ ? claimed_json(*next) : claimed_text(*next));
        return;
      }
      // The store refuses a scoped actor's report outside its projects
      // (exit 5), whether or not the item exists.
      if (args_.size() == 1) {
        store.finish(args_[0], fences_[0], outcome,
                     {.detail = detail_, .actor = actor_, .now = now_});
      } else {
        std::vector<ControlStore::Report> reports;
        for (std::size_t i = 0; i < args_.size(); ++i) {
          reports.push_back({args_[i], fences_[i], outcome, detail_});
        }
        store.finish_batch(reports, now_, actor_);
      }
      changed_ = true;
      std::string out = json_ && args_.size() > 1 ? "[" : "";
      for (std::size_t i = 0; i < args_.size(); ++i) {
        if (json_) {
          out += (i ? "," : "") + JsonObject()
                                      .str("item_id", args_[i])
                                      .str("status", to_string(outcome))
                                      .num("fence", static_cast<std::int64_t>(fences_[i]))
                                      .done();
        } else {
          out += fmt::format("{}{} {}", i ? "\n" : "", args_[i], to_string(outcome));
        }
      }
      print(json_ && args_.size() > 1 ? out + "]" : out);
    });
  }

  // ---- item / events --------------------------------------------------------
  kj::MainFunc item_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Show ITEM's row. A scoped --actor sees only its projects' items."))
        .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                          "read as this scoped actor")
        .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_item))
        .build();
  }
  Validity run_item() {
    return run([&] {
      auto store = open(Access::read);
      const Item row = store.item(args_[0], actor_);
      if (json_) {
        print(JsonObject()
                  .str("item_id", row.item_id)
                  .str("project_id", row.project_id)
                  .str("status", to_string(row.status))
                  .str_or_null("owner", row.owner)
                  .num("fence", static_cast<std::int64_t>(row.fence))
                  .num("attempts", row.attempts)
                  .num_or_null("lease_expires_at", row.lease_expires_at)
                  .raw("payload", json_raw_or_string(row.payload))
                  .str_or_null("detail", row.detail)
                  .num("queued_at", row.queued_at)
                  .num("updated_at", row.updated_at)
                  .num("last_seq", row.last_seq)
                  .done());
      } else {
        print(fmt::format("item_id: {}\nproject_id: {}\nstatus: {}\nowner: {}\nfence: {}\n"
                          "attempts: {}\nlease_expires_at: {}\npayload: {}\ndetail: {}",
                          row.item_id, row.project_id, to_string(row.status), row.owner,
                          row.fence, row.attempts, row.lease_expires_at, row.payload,
                          row.detail));
      }
    });
  }

  kj::MainFunc events_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Show ITEM's events, oldest first."))
        .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                          "read as this scoped actor")
        .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_events))
        .build();
  }
  Validity run_events() {
    return run([&] {
      auto store = open(Access::read);
      auto events = store.events(args_[0], actor_);
      std::string out = json_ ? "[" : "";
      bool first = true;
      for (const auto& stored : events) {
        const Event& e = stored.event;
        if (json_) {
          JsonObject o;
          o.num("seq", stored.seq)
              .str("type", type_name(e.body))
              .str("actor", e.actor)
              .num("fence", static_cast<std::int64_t>(fence_of(e.body).value_or(0)))
              .num("at", e.at)
              .str("item_id", e.item_id)
              .str("project_id", e.project_id);
          if (auto* q = std::get_if<ItemQueued>(&e.body)) {
            o.raw("payload", json_raw_or_string(q->payload));
          } else if (auto* c = std::get_if<ItemClaimed>(&e.body)) {
            o.str("owner", c->owner).num("lease_expires_at", c->lease_expires_at)
                .num("attempt", c->attempt);
          } else if (auto* f = std::get_if<ItemFinished>(&e.body)) {
            o.str("outcome", to_string(f->outcome)).str("detail", f->detail);
          }
          out += (first ? "" : ",") + o.done();
        } else {
          out += fmt::format("{}{} {} actor={} fence={} at={}", first ? "" : "\n", stored.seq,
                             type_name(e.body), e.actor, fence_of(e.body).value_or(0), e.at);
        }
        first = false;
      }
      if (json_) out += "]";
      if (json_ || !events.empty()) print(out);
    });
  }

  // ---- stats ------------------------------------------------------------------
  kj::MainFunc stats_command() {
    return globals(kj::MainBuilder(context_, kVersion,
                                   "Count items by status: ready, claimed, done, failed. Reads "
                                   "every item row of the scope: for operators, not hot loops."))
        .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                          "only this project's items")
        .callAfterParsing(KJ_BIND_METHOD(*this, run_stats))
        .build();
  }
  Validity set_project(kj::StringPtr text) {
    project_ = std::string(text.cStr());
    return true;
  }
  Validity run_stats() {
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
        std::cerr << fmt::format("cplane: {} item row(s) have a status that is none of the four "
                                 "and are not counted: run cplane verify\n",
                                 c.invalid);
      }
      if (json_) {
        print(JsonObject()
                  .num("ready", c.ready)
                  .num("claimed", c.claimed)
                  .num("done", c.done)
                  .num("failed", c.failed)
                  .done());
      } else {
        print(fmt::format("ready: {}\nclaimed: {}\ndone: {}\nfailed: {}", c.ready, c.claimed,
                          c.done, c.failed));
      }
    });
  }

  // ---- migrate ----------------------------------------------------------------
  kj::MainFunc migrate_command() {
    return globals(kj::MainBuilder(context_, kVersion,
                                   "Upgrade an existing database to the schema this cplane writes "
                                   "(opening it to write does the same). Reads never migrate: an "
                                   "older database is refused by them until this has run. Never "
                                   "creates a database."))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_migrate))
        .build();
  }
  Validity run_migrate() {
    return run([&] {
      auto store = open(Access::write);
      changed_ = true;
      print(json_ ? JsonObject().num("schema_version", storage::kSqliteSchemaVersion).done()
                  : fmt::format("schema version {}", storage::kSqliteSchemaVersion));
    });
  }

  // ---- verify / rebuild -----------------------------------------------------
  kj::MainFunc verify_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Replay the whole log through the projection and compare it with the stored "
               "rows. Exit 6 if any problem is found; each names its item."))
        .callAfterParsing(KJ_BIND_METHOD(*this, run_verify))
        .build();
  }
  Validity run_verify() {
    return run([&] {
      auto store = open(Access::read);
      auto problems = verify_ledger(store, progress("verify"));
      end_progress();
      if (json_) {
        std::string out = "[";
        for (size_t i = 0; i < problems.size(); ++i) {
          const auto& p = problems[i];
          out += (i ? "," : "") + JsonObject()
                                      .str("kind", p.kind)
                                      .str_or_null("item_id", p.item_id)
                                      .str_or_null("project_id", p.project_id)
                                      .str("detail", p.detail)
                                      .done();
        }
        print(out + "]");
      } else if (problems.empty()) {
        print("ok: the rows agree with the log");
      } else {
        for (const auto& p : problems) {
          print(fmt::format("{} {}: {}", p.kind, p.item_id.empty() ? p.project_id : p.item_id,
                            p.detail));
        }
      }
      if (!problems.empty()) {
        if (!json_) std::cerr << problems.size() << " problem(s) found\n";
        throw Exit{kProblemsFound};
      }
    });
  }

  kj::MainFunc rebuild_command() {
    return globals(kj::MainBuilder(context_, kVersion, "Rewrite the projected rows from the log in one transaction. With --dry-run, "
               "list each row that would change and how, and write nothing."))
        .addOption({"dry-run"}, KJ_BIND_METHOD(*this, set_dry_run),
                   "show what would change; write nothing")
        .callAfterParsing(KJ_BIND_METHOD(*this, run_rebuild))
        .build();
  }
  Validity set_dry_run() {
    dry_run_ = true;
    return true;
  }
  Validity run_rebuild() {
    return run([&] {
      auto store = open(dry_run_ ? Access::read : Access::write);
      auto report = rebuild(store, dry_run_, progress("rebuild"));
      changed_ = !dry_run_ && !report.changes.empty();
      end_progress();
      if (json_) {
        std::string changes = "[";
        for (size_t i = 0; i < report.changes.size(); ++i) {
          const auto& c = report.changes[i];
          std::string fields = "[";
          for (size_t j = 0; j < c.fields.size(); ++j) {
            fields += (j ? "," : "") + json_string(c.fields[j]);
          }
          JsonObject o;
          o.str("table", c.table).str("key", c.key).str("action", c.action);
          if (c.table == "items") o.str("item_id", c.key);
          changes += (i ? "," : "") + o.raw("fields", fields + "]").done();
        }
        print(JsonObject()
                  .boolean("dry_run", report.dry_run)
                  .num("events", report.events)
                  .num("items", report.items)
                  .raw("changes", changes + "]")
                  .done());
      } else {
        for (const auto& c : report.changes) {
          std::string line = fmt::format("{} {} {}", c.action, c.table, c.key);
          for (const auto& f : c.fields) line += "\n    " + f;
          print(line);
        }
        print(fmt::format("{} {} row(s) from {} events ({} items){}",
                          report.dry_run ? "would change" : "changed", report.changes.size(),
                          report.events, report.items, report.dry_run ? "; nothing written" : ""));
      }
    });
  }

  // ---- plumbing -------------------------------------------------------------
  void print(const std::string& line) {
    context_.output += line;
    context_.output += '\n';
  }

  Progress progress(const char* what) {
    if (json_ || !::isatty(STDERR_FILENO)) return {};
    progress_shown_ = true;
    return [what](std::int64_t done, std::int64_t total) {
      const int percent = total > 0 ? static_cast<int>(100 * done / total) : 100;
      const int width = 30;
      const int filled = width * std::min(percent, 100) / 100;
      std::cerr << fmt::format("\r{} [{}{}] {:3}% {}/{} events", what, std::string(filled, '#'),
                               std::string(width - filled, '.'), percent, done, total)
                << std::flush;
    };
  }
  void end_progress() {
    if (progress_shown_) std::cerr << '\n';
  }

  template <class F>
  Validity run(F&& body) {
    const auto start = std::chrono::steady_clock::now();
    struct Report {
      Cli& cli;
      std::chrono::steady_clock::time_point start;
      ~Report() {
        if (cli.context_.verbose) {
          std::cerr << fmt::format("cplane: the command took {:.1f} ms{}\n", elapsed_ms(start),
                                   cli.context_.changed ? " (committed)" : "");
        }
      }
    } report{*this, start};
    try {
      body();
    } catch (const Exit&) {
      throw;
    } catch (const FenceRejected& e) {
      fail(kFenceRejected, "fence_rejected", to_string(e.reason()),
           std::string("fence rejected: ") + e.what());
    } catch (const ScopeDenied& e) {
      fail(kScopeDenied, "scope_denied", "out_of_scope", e.what());
    } catch (const NotFound& e) {
      fail(kNotFound, "not_found", to_string(e.reason()), e.what());
    } catch (const InvalidArgument& e) {
      fail(kUsage, "invalid_argument", "invalid_input", std::string("invalid input: ") + e.what());
    } catch (const StorageError& e) {
      fail(kFailure, "storage_error", to_string(e.category()),
           fmt::format("storage error ({}): {}", to_string(e.category()), e.what()));
    } catch (const InternalError& e) {
      fail(kFailure, "internal_error", "invariant",
           fmt::format("internal error: {} (a bug in cplane, or rows edited behind its back: "
                       "run cplane verify)",
                       e.what()));
    } catch (const std::exception& e) {
      fail(kFailure, "error", "unexpected", std::string("error: ") + e.what());
    }
    return true;
  }

  [[noreturn]] void fail(int code, std::string_view kind, std::string_view reason,
                         const std::string& message) {
    end_progress();
    context_.report_error(kind, reason, "cplane: " + message);
    throw Exit{code};
  }

  CliContext& context_;
  bool& changed_ = context_.changed;
  std::optional<std::string> db_;
  std::chrono::milliseconds lock_timeout_{30'000};
  std::optional<std::string> batch_;
  bool json_ = false;
  std::optional<Micros> now_;
  Durability durability_ = Durability::fenced;
  std::optional<std::string> actor_;
  std::optional<std::string> owner_;
  std::optional<std::string> project_;
  std::optional<double> lease_;
  std::vector<Fence> fences_;
  std::optional<std::size_t> max_;
  bool next_ = false;
  std::string status_ = "open";
  bool status_set_ = false;
  std::string detail_;
  bool dry_run_ = false;
  bool progress_shown_ = false;
  std::vector<std::string> args_;
};

}  // namespace
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
