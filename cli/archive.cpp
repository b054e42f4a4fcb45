// cplane archive: retention (docs/retention.md).
#include <cstdio>
#include <cstring>
#include <ctime>

#include "cli/cli.hpp"

namespace cplane::cli {

namespace {

// TIME as the CLI takes times: microseconds since the epoch, or an
// ISO-8601 time (2026-01-31T12:00:00Z, or with an offset +01:00,
// optionally with a fraction of a second, or a date alone: its midnight,
// UTC).
std::optional<Micros> parse_time(std::string_view text) {
  if (auto micros = parse_int<Micros>(kj::StringPtr(std::string(text).c_str()))) return micros;
  std::tm tm{};
  int fraction_digits = 0;
  Micros fraction = 0;
  std::int64_t offset = 0;  // seconds ahead of UTC
  const std::string s(text);
  const char* rest = ::strptime(s.c_str(), "%Y-%m-%d", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == 'T' || *rest == ' ') {
    rest = ::strptime(rest + 1, "%H:%M:%S", &tm);
    if (rest == nullptr) return std::nullopt;
    if (*rest == '.') {
      ++rest;
      while (*rest >= '0' && *rest <= '9') {
        if (fraction_digits < 6) {
          fraction = fraction * 10 + (*rest - '0');
          ++fraction_digits;
        }
        ++rest;
      }
      if (fraction_digits == 0) return std::nullopt;
      for (int i = fraction_digits; i < 6; ++i) fraction *= 10;
    }
    if (*rest == 'Z') {
      ++rest;
    } else if ((*rest == '+' || *rest == '-') && std::strlen(rest) == 6 && rest[3] == ':') {
      // An offset, +HH:MM or -HH:MM: the time is that far ahead of UTC.
      const int sign = *rest == '+' ? 1 : -1;
      int hours = 0, minutes = 0;
      if (std::sscanf(rest + 1, "%2d:%2d", &hours, &minutes) != 2 || hours > 23 || minutes > 59) {
        return std::nullopt;
      }
      offset = sign * (hours * 3600 + minutes * 60);
      rest += 6;
    }
  }
  if (*rest != '\0') return std::nullopt;
  const std::tm parsed = tm;
  const std::time_t seconds = ::timegm(&tm);  // normalises tm: 2026-02-31 would become March 3
  if (seconds < 0 || tm.tm_mday != parsed.tm_mday || tm.tm_mon != parsed.tm_mon ||
      tm.tm_year != parsed.tm_year || tm.tm_sec != parsed.tm_sec) {
    return std::nullopt;
  }
  return (static_cast<Micros>(seconds) - offset) * 1'000'000 + fraction;
}

std::string redacted_note(const ArchiveOptions& options, const ArchiveReport& report) {
  std::string out;
  if (options.redact_payloads) out = fmt::format(", {} payload(s) redacted", report.redacted);
  if (options.forget_keys) {
    out += fmt::format(", {} key(s) {}", report.keys_released,
                       report.dry_run ? "to release" : "released");
  }
  return out;
}

// " (3 items, 1 session, 2 schedules)" when not all are items; the items left live.
std::string kinds_note(const ArchiveReport& report) {
  std::string out;
  if (report.sessions != 0 || report.schedules != 0) {
    out = fmt::format(" ({} item(s), {} session(s), {} schedule(s))", report.items,
                      report.sessions, report.schedules);
  }
  if (report.kept_live != 0) {
    out += fmt::format(" ({} ended item(s) kept live: each holds its project's fair-share pass)",
                       report.kept_live);
  }
  return out;
}

}  // namespace

kj::MainFunc Cli::archive_command() {
  return globals(kj::MainBuilder(
                     context_, kVersionLine,
                     "Move every stream that ended before TIME (an item done, failed, closed "
                     "or cancelled; a closed session; a removed schedule) out of the live log into a segment FILE (the export format: "
                     "`cplane audit FILE` reads it), leaving an anchor per stream that verify "
                     "checks like a head. TIME: microseconds since the epoch, or ISO-8601 UTC "
                     "(2026-01-31T12:00:00Z); never in the future. FILE must not exist; it is "
                     "written as FILE.tmp, synced and renamed before one transaction swaps the "
                     "events for their anchors: all or nothing. With --verify-only FILE...: "
                     "check segments against the store's anchors, change nothing (exit 6 on a "
                     "problem)."))
      .addOptionWithArg({"before"}, KJ_BIND_METHOD(*this, set_before), "<time>",
                        "archive streams that ended before this time")
      .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                        "only this project's items and schedules (no session: a session is no "
                        "project's)")
      .addOptionWithArg({"to"}, KJ_BIND_METHOD(*this, set_to), "<file>",
                        "the segment file to write (must not exist)")
      .addOption({"dry-run"}, KJ_BIND_METHOD(*this, set_dry_run),
                 "count what would be archived, write nothing")
      .addOption({"redact-payloads"}, KJ_BIND_METHOD(*this, set_redact_payloads),
                 "write each payload as its digest: the segment's chain is still checked, its "
                 "payloads cannot be read back (events written before chain 2 are refused)")
      .addOption({"forget-keys"}, KJ_BIND_METHOD(*this, set_forget_keys),
                 "release the archived items' idempotency keys (key_released): an enqueue "
                 "with one makes a new item from then on. Without it an archived key "
                 "deduplicates for the life of the store. A schedule occurrence's key is kept")
      .addOption({"verify-only"}, KJ_BIND_METHOD(*this, set_verify_only),
                 "check the segment FILE(s) against this store, change nothing")
      .expectZeroOrMoreArgs("FILE", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_archive))
      .build();
}

Validity Cli::set_before(kj::StringPtr text) {
  const auto at = parse_time(std::string_view(text.cStr(), text.size()));
  if (!at || *at < 1 || *at > kMaxNow) {
    return "--before takes microseconds since the epoch or an ISO-8601 UTC time "
           "(2026-01-31T12:00:00Z)";
  }
  before_ = *at;
  return true;
}

Validity Cli::set_redact_payloads() {
  redact_payloads_ = true;
  return true;
}

Validity Cli::set_forget_keys() {
  forget_keys_ = true;
  return true;
}

Validity Cli::set_verify_only() {
  verify_only_ = true;
  return true;
}

Validity Cli::run_archive() {
  return run([&] {
    if (verify_only_) {
      if (args_.empty()) throw InvalidArgument("--verify-only needs at least one segment FILE");
      if (before_ || to_ || project_ || dry_run_ || redact_payloads_ || forget_keys_) {
        throw InvalidArgument(InvalidArgument::Reason::conflict,
                              "--verify-only takes segment files only, not --before, --to, "
                              "--project, --dry-run, --redact-payloads or --forget-keys");
      }
      run_verify_segments();
      return;
    }
    if (!args_.empty()) {
      throw InvalidArgument("archive takes --to FILE; segment files as arguments go with "
                            "--verify-only");
    }
    if (!before_) throw InvalidArgument("archive needs --before TIME");
    if (!to_ && !dry_run_) throw InvalidArgument("archive needs --to FILE (or --dry-run)");
    ArchiveOptions options;
    options.before = *before_;
    options.project = project_;
    options.file = to_.value_or("");
    options.dry_run = dry_run_;
    options.now = now_;
    options.redact_payloads = redact_payloads_;
    options.forget_keys = forget_keys_;
    auto store = open(Access::write);
    const auto report = archive(store, options);
    changed_ = !report.dry_run;
    if (json_) {
      print(JsonObject()
                .boolean("dry_run", report.dry_run)
                .num("streams", report.streams)
                .num("items", report.items)
                .num("sessions", report.sessions)
                .num("schedules", report.schedules)
                .num("kept_live", report.kept_live)
                .num("clocks_carried", report.clocks_carried)
                .boolean("forget_keys", options.forget_keys)
                .num("keys_released", report.keys_released)
                .num("events", report.events)
                .num("bytes", report.bytes)
                .boolean("redact_payloads", options.redact_payloads)
                .num("redacted", report.redacted)
                .str("file", options.file)
                .str("segment_id", report.segment_id)
                .str("digest", report.digest)
                .done());
    } else if (report.dry_run) {
      print(fmt::format("would archive {} stream(s){}, {} event(s){}; nothing written",
                        report.streams, kinds_note(report), report.events,
                        redacted_note(options, report)));
    } else {
      print(fmt::format("archived {} stream(s){}, {} event(s) to {} ({} bytes){}; segment {} "
                        "digest {}",
                        report.streams, kinds_note(report), report.events,
                        escape_invisible(options.file),
                        report.bytes,
                        redacted_note(options, report), report.segment_id, report.digest));
    }
  });
}

void Cli::run_verify_segments() {
  auto store = open(Access::read);
  std::int64_t bad = 0;
  for (const auto& file : args_) {
    const auto check = verify_segment(store, file);
    if (json_) {
      print(JsonObject()
                .str("file", file)
                .boolean("ok", check.problems.empty())
                .str("segment_id", check.segment_id)
                .num("streams", check.streams)
                .num("events", check.events)
                .raw("problems", problems_json(check.problems))
                .done());
    } else {
      print_problems(check.problems);
      print(check.problems.empty()
                ? fmt::format("ok: {} is segment {} of this store: {} stream(s), {} event(s), "
                              "each as its anchor promises",
                              escape_invisible(file), check.segment_id, check.streams,
                              check.events)
                : fmt::format("{}: {} problem(s)", escape_invisible(file),
                              check.problems.size()));
    }
    if (!check.problems.empty()) ++bad;
  }
  if (bad > 0) throw Exit{kProblemsFound};
}

}  // namespace cplane::cli
