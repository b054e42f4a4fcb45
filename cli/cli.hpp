// The cplane command-line tool: its context, the Cli class whose members
// parse and run each subcommand (cli/main.cpp: global options and plumbing;
// cli/projects.cpp, cli/items.cpp, cli/audit.cpp: the command groups), and
// the argument helpers they share (cli/args.cpp). Exit codes:
//   0 done, 1 failure (storage, corruption, I/O), 2 usage or invalid input,
//   3 nothing to claim, 4 FenceRejected, 5 ScopeDenied, 6 verify found
//   problems, 7 no such item, project or session, 8 the gate denied, 9 wait
//   (another session holds the item).
#pragma once

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

#include "json/json_writer.hpp"
#include "json/records.hpp"
#include "storage/open.hpp"

#include <array>
#include <cmath>
#include <string_view>

#include <cplane/version.hpp>
#include "events/errors.hpp"

namespace cplane::cli {

enum ExitCode : int {
  kOk = 0,
  kFailure = 1,
  kUsage = 2,
  kNothingToClaim = 3,
  kFenceRejected = 4,
  kScopeDenied = 5,
  kProblemsFound = 6,
  kNotFound = 7,
  kDenied = 8,
  kWait = 9,
};

// Thrown to leave the command with an exit status; caught in main().
struct Exit {
  int code;
};

// `text` as it may be shown on a terminal, whole: control and bidi
// characters, and bytes that are not UTF-8, escaped as quote_id escapes
// them (\x0a, \u202e); everything else unchanged.
std::string escape_invisible(std::string_view text);

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
  // keep what comes before its last "\nTry '", one sentence. <what> may
  // echo an argument whole, newlines and escape sequences included: they
  // are escaped, so that the reason after them stays on the line and
  // nothing raw reaches the terminal.
  [[noreturn]] void exitError(kj::StringPtr message) override {
    std::string_view text(message.cStr(), message.size());
    if (const auto trailer = text.rfind("\nTry '"); trailer != std::string_view::npos) {
      text = text.substr(0, trailer);
    }
    report_error("usage", "usage", escape_invisible(text) + " (see --help)");
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
    if (write_error != 0) {
      errno = write_error;
      return false;
    }
    std::size_t at = 0;
    while (at < output.size()) {
      const ssize_t n = ::write(STDOUT_FILENO, output.data() + at, output.size() - at);
      if (n < 0) {
        if (errno == EINTR) continue;
        write_error = errno;
        output.clear();
        return false;
      }
      at += static_cast<std::size_t>(n);
    }
    output.clear();
    return true;
  }
  // Long output (verify's problems) goes out as it grows, so that memory
  // stays flat; a failure is remembered and reported once, at the end.
  void output_grew() {
    if (output.size() >= kFlushAt && write_error == 0) flush_output();
    if (write_error != 0) output.clear();
  }
  static constexpr std::size_t kFlushAt = 1 << 20;
  int write_error = 0;

  bool json = false;     // --json anywhere on the command line: errors as JSON too
  bool verbose = false;  // --verbose: say what was opened and how long each step took
  bool changed = false;  // the command committed a change (for the output-failure message)
  std::string output;    // what goes to stdout, written once the command is done

 private:
  kj::StringPtr program_;
};

using Validity = kj::MainBuilder::Validity;

constexpr const char* kVersionLine = "cplane " CPLANE_VERSION;

template <class Int>
std::optional<Int> parse_int(kj::StringPtr text) {
  Int value{};
  const char* end = text.begin() + text.size();
  auto [p, ec] = std::from_chars(text.begin(), end, value);
  if (ec != std::errc() || p != end || text.size() == 0) return std::nullopt;
  return value;
}

// Digits alone, but too many for the type: say so, not "not a number".
bool out_of_range(kj::StringPtr text);

// A decimal number, as people write one: digits with an optional sign,
// fraction and exponent; no hex, no surrounding space, no "inf" or "nan".
std::optional<double> parse_decimal(kj::StringPtr text);

// A number of seconds for --lock-timeout: 0 or more, at most a day.
std::optional<std::chrono::milliseconds> parse_timeout(kj::StringPtr text);

// Where the database lives when neither --db nor $CPLANE_DB says (see
// cli/args.cpp); creates its folder only when asked (for writes).
std::string default_db_path(bool create_folder);

// argv without the program name, "--opt VALUE" joined as "--opt=VALUE" for
// options that take a value, so that a value may start with '-'.
std::vector<std::string> join_option_values(int argc, char** argv);

// A payload argument: "-" is standard input, "@FILE" a file, anything else
// the JSON itself.
std::string read_payload_argument(const std::string& arg);

// How a command opens the store.
enum class Access {
  create,  // writes; creates the database (and the default folder) if missing
  write,   // writes; the database must exist (rebuild)
  read,    // reads one snapshot: no lock, nothing created or written
};

class Cli {
 public:
  explicit Cli(CliContext& context) : context_(context) {}

  kj::MainFunc main();

 private:
  // --db, --json, --now, --durability, --lock-timeout are accepted before
  // or after the subcommand and its arguments.
  kj::MainBuilder& globals(kj::MainBuilder& b);

  // For a subcommand's parser: globals(kj::MainBuilder(...)).add...().build().
  // The builder is a temporary that lives until its chain ends with build().
  kj::MainBuilder& globals(kj::MainBuilder&& b) { return globals(b); }

  Validity set_db(kj::StringPtr path);
  Validity set_json();
  Validity set_now(kj::StringPtr text);
  Validity set_lock_timeout(kj::StringPtr text);
  Validity set_durability(kj::StringPtr text);
  // Names are checked as they are read, so that nothing is opened for a
  // name the store would refuse.
  static Validity check_name(kj::StringPtr text, const char* what);
  Validity set_actor(kj::StringPtr text);
  Validity set_positional(kj::StringPtr text);

  // Reads never create anything: a mistyped path is an error (exit 1), not
  // a new, empty, "clean" store. Arguments are checked before this is called.
  ControlStore open(Access access = Access::create);

  static double elapsed_ms(std::chrono::steady_clock::time_point start);

  // ---- project ------------------------------------------------------------
  kj::MainFunc project_command();

  kj::MainFunc project_create_command();
  Validity set_status(kj::StringPtr text);
  Validity run_project_create();

  kj::MainFunc project_grant_command();
  Validity run_project_grant();

  // ---- the job lifecycle (cli/lifecycle.cpp) ----------------------------------
  kj::MainFunc project_set_command();
  Validity run_project_set();
  kj::MainFunc project_pause_command();
  kj::MainFunc project_resume_command();
  Validity run_project_pause();
  Validity run_project_resume();
  kj::MainFunc project_show_command();
  Validity run_project_show();
  kj::MainFunc retry_command();
  Validity run_retry();
  kj::MainFunc cancel_command();
  Validity run_cancel();
  kj::MainFunc reschedule_command();
  Validity run_reschedule();
  void print_bulk(const char* verb, const ControlStore::BulkResult& result);
  Validity set_max_attempts(kj::StringPtr text);
  Validity set_attempts(kj::StringPtr text);
  Validity set_backoff(kj::StringPtr text);
  Validity set_run_at(kj::StringPtr text);
  Validity set_delay(kj::StringPtr text);
  Validity set_no_retry();
  Validity set_statuses(kj::StringPtr text);
  // ---- flow control (cli/limits.cpp) ----------------------------------------------
  kj::MainFunc limit_command();
  kj::MainFunc limit_set_command();
  kj::MainFunc limit_remove_command();
  kj::MainFunc limits_command();
  kj::MainFunc why_command();
  Validity run_limit_set();
  Validity run_limit_remove();
  Validity run_limits();
  Validity run_why();
  Validity set_concurrency(kj::StringPtr text);
  Validity set_rate(kj::StringPtr text);
  Validity set_burst(kj::StringPtr text);
  Validity set_weight(kj::StringPtr text);
  Validity set_concurrency_key(kj::StringPtr text);
  std::string limit_json(const ControlStore::LimitInfo& info);
  // ---- cron schedules (cli/schedules.cpp) ----------------------------------------
  kj::MainFunc schedule_command();
  kj::MainFunc schedule_add_command();
  kj::MainFunc schedule_list_command();
  kj::MainFunc schedule_pause_command();
  kj::MainFunc schedule_resume_command();
  kj::MainFunc schedule_remove_command();
  kj::MainFunc tick_command();
  Validity run_schedule_add();
  Validity run_schedule_list();
  Validity run_schedule_change(const char* done);
  Validity run_schedule_pause();
  Validity run_schedule_resume();
  Validity run_schedule_remove();
  Validity run_tick();
  Validity set_cron(kj::StringPtr text);
  Validity set_schedule_payload(kj::StringPtr text);
  Validity set_tz(kj::StringPtr text);
  Validity set_overlap(kj::StringPtr text);
  Validity set_catch_up(kj::StringPtr text);
  static std::string schedule_json(const ScheduleRow& row);
  // ---- metrics (cli/metrics.cpp) -------------------------------------------------
  kj::MainFunc metrics_command();
  Validity set_state_file(kj::StringPtr text);
  Validity set_from_start();
  Validity run_metrics();
  std::optional<std::string> state_file_;
  bool from_start_ = false;

  // ---- projects -------------------------------------------------------------
  kj::MainFunc projects_command();
  Validity run_projects();

  // ---- enqueue --------------------------------------------------------------
  kj::MainFunc enqueue_command();
  Validity set_batch(kj::StringPtr text);
  // The payloads of --batch, checked line by line before anything is opened.
  std::vector<std::string> read_batch() const;
  Validity run_enqueue();

  // ---- claim ----------------------------------------------------------------
  kj::MainFunc claim_command();
  Validity set_owner(kj::StringPtr text);
  Validity set_lease(kj::StringPtr text);
  Validity set_max(kj::StringPtr text);
  Validity set_key(kj::StringPtr text);
  Validity set_wait(kj::StringPtr text);
  ClaimOptions claim_options() const;
  std::string claimed_json(const ClaimedItem& c) const;
  static std::string claimed_text(const ClaimedItem& c);
  [[noreturn]] void nothing_to_claim(const char* message, const char* empty_json = "null");
  Validity run_claim();

  // ---- finish ---------------------------------------------------------------
  kj::MainFunc finish_command();
  Validity set_fence(kj::StringPtr text);
  Validity set_detail(kj::StringPtr text);
  Validity set_next();
  Validity run_finish();
  kj::MainFunc heartbeat_command();
  Validity run_heartbeat();
  kj::MainFunc expire_command();
  Validity run_expire();
  kj::MainFunc release_command();
  Validity set_reason(kj::StringPtr text);
  Validity run_release();

  // ---- sessions, the forge, assign, gate (cli/sessions.cpp) ------------------
  kj::MainFunc session_command();
  kj::MainFunc session_open_command();
  Validity run_session_open();
  kj::MainFunc session_heartbeat_command();
  Validity run_session_heartbeat();
  kj::MainFunc session_close_command();
  Validity run_session_close();
  kj::MainFunc sessions_command();
  Validity run_sessions();
  kj::MainFunc observe_command();
  kj::MainFunc observe_head_command();
  kj::MainFunc observe_review_command();
  kj::MainFunc observe_close_command();
  Validity run_observe(const char* what);
  kj::MainFunc assign_command();
  Validity set_actions(kj::StringPtr text);
  Validity run_assign();
  kj::MainFunc gate_command();
  Validity set_action(kj::StringPtr text);
  Validity set_head(kj::StringPtr text);
  Validity set_record();
  Validity run_gate();
  // ---- allocate, terminal, incident, migrate-incidents (cli/work.cpp) --------
  kj::MainFunc allocate_command();
  Validity set_apply();
  Validity run_allocate();
  kj::MainFunc terminal_command();
  kj::MainFunc terminal_add_command();
  kj::MainFunc terminal_remove_command();
  kj::MainFunc terminal_list_command();
  Validity run_terminal(bool add);
  Validity run_terminal_list();
  kj::MainFunc incident_command();
  kj::MainFunc incident_link_command();
  kj::MainFunc incident_show_command();
  kj::MainFunc incident_list_command();
  kj::MainBuilder& incident_key_options(kj::MainBuilder& b);
  IncidentKey incident_key() const;
  Validity set_event_count(kj::StringPtr text);
  Validity add_linked_pr(kj::StringPtr text);
  Validity set_incident_target(kj::StringPtr text);
  static std::string incident_json(const IncidentLinkRow& row);
  Validity run_incident_link();
  Validity run_incident_show();
  Validity run_incident_list();
  kj::MainFunc migrate_incidents_command();
  Validity set_from(kj::StringPtr text);
  Validity run_migrate_incidents();
  Validity set_priority(kj::StringPtr text);
  Validity set_kind(kj::StringPtr text);
  Validity set_ref(kj::StringPtr text);
  Validity set_author(kj::StringPtr text);

  // ---- item / events --------------------------------------------------------
  kj::MainFunc item_command();
  Validity run_item();

  // ---- the operator's view (cli/view.cpp) ----------------------------------------
  kj::MainFunc items_command();
  Validity run_items();
  kj::MainFunc tail_command();
  Validity run_tail();
  kj::MainFunc history_command();
  Validity run_history();
  Validity set_session_filter(kj::StringPtr text);
  Validity set_page_limit(kj::StringPtr text);
  Validity set_after_item(kj::StringPtr text);
  Validity set_after_seq(kj::StringPtr text);
  Validity set_order(kj::StringPtr text);
  Validity set_jsonl();
  Validity set_tail_from(kj::StringPtr text);
  Validity set_from_end();
  Validity set_follow();
  Validity set_tail_stream(kj::StringPtr text);
  Validity set_tail_types(kj::StringPtr text);
  void follow_log(ControlStore& store, ControlStore::LogQuery query, bool timeline);
  std::string event_line(const StoredEvent& stored, bool timeline) const;

  kj::MainFunc events_command();
  Validity run_events();

  // ---- stats ------------------------------------------------------------------
  kj::MainFunc stats_command();
  Validity set_project(kj::StringPtr text);
  Validity run_stats();

  // ---- migrate ----------------------------------------------------------------
  kj::MainFunc migrate_command();
  Validity run_migrate();

  // ---- verify / rebuild -----------------------------------------------------
  kj::MainFunc verify_command();
  Validity run_verify();
  // verify's problem list, on stdout: one line each, or a JSON array.
  void print_problems(const std::vector<LedgerProblem>& problems);
  void restore_to_server();
  static std::string problems_json(const std::vector<LedgerProblem>& problems);
  static std::string problem_json(const LedgerProblem& p, bool comma);
  static std::string problem_line(const LedgerProblem& p);

  kj::MainFunc rebuild_command();
  Validity set_dry_run();
  Validity set_redact_payloads();
  Validity set_forget_keys();
  void print_restored(const RestoreReport& report, const std::string& target);
  Validity run_rebuild();

  // ---- export / audit / restore / recover -----------------------------------
  kj::MainFunc export_command();
  Validity set_since(kj::StringPtr text);
  Validity run_export();
  kj::MainFunc audit_command();
  Validity set_against(kj::StringPtr text);
  Validity run_audit();
  void audit_history();
  kj::MainFunc restore_command();
  Validity run_restore();
  kj::MainFunc recover_command();
  Validity set_to(kj::StringPtr text);
  Validity run_recover();
  static std::string storage_file(const std::string& url) { return storage::sqlite_path(url); }

  // ---- archive (cli/archive.cpp) ---------------------------------------------
  kj::MainFunc archive_command();
  Validity set_before(kj::StringPtr text);
  Validity set_verify_only();
  Validity run_archive();
  void run_verify_segments();

  // ---- serve: the web console (cli/serve.cpp) -------------------------------
  kj::MainFunc serve_command();

  // ---- plumbing -------------------------------------------------------------
  void print(const std::string& line) {
    context_.output += line;
    context_.output += '\n';
    context_.output_grew();
  }
  void print_raw(const std::string& text) {
    context_.output += text;
    context_.output_grew();
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
      fail(kUsage, "invalid_argument", to_string(e.reason()),
           std::string("invalid input: ") + e.what());
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
  std::string reason_;
  // enqueue's forge fields; assign's actions; the gate's action, head, --record.
  std::optional<WorkKind> kind_;
  std::optional<std::string> ref_;
  std::optional<std::string> head_;
  std::optional<std::string> author_;
  std::vector<std::string> actions_;
  std::optional<std::string> action_;
  bool record_ = false;
  bool apply_ = false;
  std::optional<std::int32_t> priority_;
  std::optional<std::string> key_;
  std::optional<double> wait_;
  struct {
    std::optional<std::string> provider, fingerprint, org, repo, environment, target, status,
        permalink, first_seen, last_seen;
  } incident_;
  std::optional<std::int64_t> incident_event_count_;
  std::optional<std::vector<std::string>> incident_prs_;
  std::optional<std::string> from_;
  bool dry_run_ = false;
  bool redact_payloads_ = false;
  bool forget_keys_ = false;
  // The lifecycle's options.
  std::optional<std::uint32_t> max_attempts_;
  std::optional<std::uint32_t> attempts_;
  std::optional<std::string> backoff_;
  std::optional<Micros> run_at_;
  std::optional<Micros> delay_;
  bool no_retry_ = false;
  std::vector<ItemStatus> statuses_;
  std::optional<std::string> cron_, schedule_payload_, tz_;
  // Flow control's options.
  std::optional<std::uint32_t> concurrency_;
  std::optional<std::string> rate_;
  std::optional<std::uint32_t> burst_;
  std::optional<std::uint32_t> weight_;
  std::optional<std::string> concurrency_key_;
  // The operator's view's options.
  std::optional<std::string> session_filter_;
  std::size_t page_limit_ = 50;
  std::optional<std::string> after_item_;
  std::optional<Seq> after_seq_;
  bool oldest_first_ = false;
  bool jsonl_ = false;
  std::optional<Seq> tail_from_;
  bool from_end_ = false;
  bool follow_ = false;
  std::optional<StreamRef> tail_stream_;
  std::vector<std::string> tail_types_;
  ControlStore::Overlap overlap_ = ControlStore::Overlap::allow;
  std::int64_t catch_up_ = 0;
  // rebuild, restore, recover: one transaction over the whole database,
  // with a larger page cache (SqliteOptions::cache_mib).
  bool bulk_ = false;
  static constexpr int kBulkCacheMib = 64;
  Seq since_ = 0;
  std::optional<std::string> against_;
  std::optional<std::string> to_;
  std::optional<Micros> before_;
  bool verify_only_ = false;
  bool progress_shown_ = false;
  std::vector<std::string> args_;
};

}  // namespace cplane::cli
