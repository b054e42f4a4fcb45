// What verify and rebuild report: problems in the ledger, rows rebuild
// changed. Plain values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cplane/errors.hpp>
#include <cplane/events.hpp>
#include <cplane/rows.hpp>

namespace cplane {

// ---- problem kinds ----------------------------------------------------------
// Every kind of problem verify, audit, rebuild and recover report, once: the
// enumerator is the stable snake_case name (to_string gives it; `cplane
// verify --json` prints it as "kind"), the text says what it means. The enum
// and kProblemKinds are made from this one list, so a kind cannot be added
// without its name and meaning; a test checks that the README's table of
// kinds gives every one of them.
#define CPLANE_PROBLEM_KINDS(X)                                                                    \
  /* An item's history, and its row against it. */                                                 \
  X(no_creation_event,                                                                             \
    "a row, or a stream's events, without its creation event (queued, session_opened)")            \
  X(duplicate_creation_event,                                                                      \
    "two creation events (queued, project_created, session_opened) for one stream")                \
  X(orphan_events, "events of an item that has no row")                                            \
  X(two_terminal_events, "more than one terminal event (done, failed, closed) for an item")        \
  X(event_after_terminal,                                                                          \
    "an event after the item's terminal event, or after its session's close")                      \
  X(terminal_without_event, "the row is done/failed, the log has no terminal event")               \
  X(terminal_events_disagree, "the row is done and the log says failed, or the reverse")           \
  X(event_without_terminal, "the log has a terminal event, the row is not terminal")               \
  X(ready_after_claim, "the row is ready but the log says it was claimed")                         \
  X(status_disagrees, "any other status mismatch, or a stored status that is none of the five")    \
  X(fence_not_monotonic, "a claim whose fence is not above every earlier fence")                   \
  X(stale_fence_accepted,                                                                          \
    "a finish, extension, release or expiry whose fence was not the current one")                  \
  X(fence_disagrees, "the row's fence is not the log's")                                           \
  X(owner_disagrees, "the row's owner is not the log's")                                           \
  X(attempts_disagrees, "the row's attempts is not the log's")                                     \
  X(lease_disagrees, "the row's lease_expires_at is not the log's")                                \
  X(project_disagrees, "the row's project_id is not the log's")                                    \
  X(payload_disagrees, "the row's payload is not the log's")                                       \
  X(key_disagrees, "the row's key is not the log's")                                               \
  X(detail_disagrees, "the row's detail is not the log's")                                         \
  X(queued_disagrees, "the row's queued_seq or queued_at is not the log's")                        \
  X(last_seq_disagrees, "the row's last_seq or updated_at is not the log's")                       \
  X(forge_disagrees, "the row's kind, ref, head, review, author or close reason is not the log's") \
  X(assignment_disagrees,                                                                          \
    "the row's session, actions, pinned head or drift flag is not the log's")                      \
  X(routing_disagrees, "the row's priority or terminal path is not the log's")                     \
  X(item_in_unknown_project, "an item queued into a project the log never created")                \
  X(undecodable_event, "an event body that cannot be decoded")                                     \
  X(unknown_event_type, "an event of a type this build does not know")                             \
  X(index_disagrees,                                                                               \
    "an event's stream, item_id, project_id, type or at column is not its body's")                 \
  X(claim_while_leased, "a claim made while another worker's lease had not lapsed")                \
  /* The other projected rows against the log. */                                                  \
  X(project_row_missing, "a project the log created has no row")                                   \
  X(project_row_without_event, "a project row with no project_created event")                      \
  X(project_row_disagrees, "a field of a project's row, or of a grant's, is not the log's")        \
  X(assignment_missing, "a grant (actor_assigned) with no project_actors row")                     \
  X(assignment_without_event, "a project_actors row with no actor_assigned event")                 \
  X(session_row_missing, "a session with events and no row")                                       \
  X(session_row_without_event, "a session row with no session_opened event")                       \
  X(session_row_disagrees, "a field of a session's row is not the log's")                          \
  X(terminal_lock_missing, "an item on the terminal path with no terminal_locks row")              \
  X(terminal_lock_without_event, "a terminal_locks row that the item's log does not make")         \
  X(terminal_lock_disagrees, "a field of an item's terminal_locks row is not the log's")           \
  X(incident_link_missing, "an incident with events and no incident_links row")                    \
  X(incident_link_without_event, "an incident_links row with no incident_linked event")            \
  X(incident_link_disagrees, "a field of an incident's row is not the log's")                      \
  /* More of what the log must say on its own, whatever the rows. */                               \
  X(fence_skipped, "a claim whose fence is more than one above the last: claims are missing")      \
  X(attempt_not_rising, "a claim whose attempt is not one more than the claims before")            \
  X(lease_before_claim, "a claim or extension whose lease does not end after it was made")         \
  X(event_before_project, "an item event before its project's creation")                           \
  X(grant_without_project, "a grant (actor_assigned) before its project's creation")               \
  X(invalid_payload, "a queued payload that is not JSON or is over 1 MiB")                         \
  X(expired_while_leased, "a lease_expired before the lease ended, or naming another lease")       \
  X(mutation_without_assignment, "a mutation_recorded the gate would have denied at its time")     \
  X(assignment_not_allowed, "an assigned event assign_and_lease would not have made")              \
  X(forge_fact_invalid, "a head, review or author on an item that is not a pr")                    \
  X(session_closed_while_holding, "a session closed while an item was still assigned to it")       \
  X(schedule_disagrees, "the row's run_at, retry policy or attempt limit is not the log's")       \
  X(schedule_row_missing, "a schedule with events and no row")                                      \
  X(schedule_row_without_event, "a schedules row with no schedule_created event")                  \
  X(schedule_row_disagrees, "a field of a schedule's row is not the log's")                        \
  X(schedule_fire_unmatched,                                                                       \
    "a schedule_fired whose item is not the one its occurrence made, an occurrence fired twice, "  \
    "or an item keyed to a schedule that no fire names")                                           \
  X(lifecycle_not_allowed,                                                                         \
    "an attempt_failed, retried, rescheduled or cancelled the item's state did not allow, a "      \
    "claim of an item not due yet or with no attempts left, or a key_released of an item that "    \
    "has not ended or of a key it does not hold (or a schedule occurrence's)")                     \
  X(concurrency_exceeded,                                                                          \
    "a claim or assignment made while its concurrency key's live leases were at the limit")        \
  X(rate_exceeded, "a claim or assignment made before its concurrency key's rate had a token")     \
  X(limit_row_missing, "a limit with events and no row")                                           \
  X(limit_row_without_event, "a limits row with no limit_set event")                               \
  X(limit_row_disagrees,                                                                           \
    "a field of a limit's row is not the log's (its rate state: the claims that name its key)")    \
  X(limit_clock_disagrees,                                                                         \
    "a limit_clock_carried whose clock is not the one the claims before it make")                  \
  /* The hash chain: each names the stream and the seq. */                                         \
  X(event_edited, "an event whose body, seq, stream or revision is not what was hashed")           \
  X(event_missing, "revisions missing inside a stream: events deleted")                            \
  X(event_inserted, "a second event at one revision, or one never chained")                        \
  X(event_reordered, "a revision that goes back in seq order")                                     \
  X(tail_missing, "a stream that ends before its head: its newest events cut off")                 \
  X(stream_missing, "a head whose stream has no events: a whole history deleted")                  \
  X(head_missing, "a stream with events and no head")                                              \
  X(head_disagrees, "a head that is not its stream's last event")                                  \
  X(digest_disagrees,                                                                              \
    "the log's digest is gone or does not fold from its heads: a stream removed with its "         \
    "head, a head edited")                                                                         \
  X(seq_gap, "seqs missing while every chain is intact: events removed, heads rewritten")         \
  X(segment_disagrees,                                                                             \
    "a segment's record (table segments) is missing, extra or not what its segment_archived or "  \
    "its anchors say")

enum class ProblemKind : std::uint8_t {
#define CPLANE_PROBLEM_KIND_ENUMERATOR(name, meaning) name,
  CPLANE_PROBLEM_KINDS(CPLANE_PROBLEM_KIND_ENUMERATOR)
#undef CPLANE_PROBLEM_KIND_ENUMERATOR
};

struct ProblemKindInfo {
  ProblemKind kind;
  std::string_view name;     // stored and printed; never changes once released
  std::string_view meaning;  // one line, for a person
};

// Every kind, in the enum's order (kProblemKinds[i].kind is ProblemKind(i)).
inline constexpr ProblemKindInfo kProblemKinds[] = {
#define CPLANE_PROBLEM_KIND_INFO(name, meaning) {ProblemKind::name, #name, meaning},
    CPLANE_PROBLEM_KINDS(CPLANE_PROBLEM_KIND_INFO)
#undef CPLANE_PROBLEM_KIND_INFO
};

// "no_creation_event", "fence_skipped", ...: the kind's stored name.
constexpr std::string_view to_string(ProblemKind kind) {
  return kProblemKinds[static_cast<std::size_t>(kind)].name;
}

// The kind of that stored name; nullopt for any other text.
constexpr std::optional<ProblemKind> parse_problem_kind(std::string_view name) {
  for (const auto& info : kProblemKinds) {
    if (info.name == name) return info.kind;
  }
  return std::nullopt;
}

// One disagreement. `item_id` names the item ("" for a problem of another
// stream's row), `project_id` the project where known; `detail` is a
// sentence giving both values.
struct LedgerProblem {
  ProblemKind kind{};
  std::string item_id;
  std::string project_id;
  std::string detail;
};

// Called now and then with the events read so far and the total.
using Progress = std::function<void(std::int64_t done, std::int64_t total)>;

// One row that rebuild changed (or would change).
struct RowChange {
  std::string table;     // "items", "projects" or "project_actors"
  std::string key;       // item id, project id, or "project/actor"
  std::string action;    // "insert", "update" or "delete"
  std::vector<std::string> fields;  // for an update: "status: ready -> claimed", ...
};

// How many changes (and kept rows) a report lists; the totals count them all.
inline constexpr std::size_t kMaxListedChanges = 1000;

struct RebuildReport {
  // The first kMaxListedChanges changes, in the order they were made.
  std::vector<RowChange> changes;
  std::int64_t changes_total = 0;
  // Rows rebuild left alone (action "keep") because they show that the log
  // lost events: a fence above the log's, a last event newer than the
  // log's, a row with no history at all. Writing the fold over them could
  // hand a fence out twice, or destroy the last copy of an item.
  std::vector<RowChange> kept;
  std::int64_t kept_total = 0;
  std::int64_t events = 0;  // events replayed
  std::int64_t items = 0;   // items in the fold
  bool dry_run = false;
};

// ---- export, audit, restore (cplane export / audit / restore) -------------

struct ExportOptions {
  Seq since = 0;  // only events after this seq (0: the whole log)
  Progress progress;
};

struct ExportSummary {
  std::int64_t events = 0;
  std::int64_t heads = 0;
  std::int64_t anchors = 0;  // archived streams' anchors (docs/retention.md)
  std::string chain_head;  // the log's digest, hex
};

// What a replay learns besides the problems (audit prints it).
struct LogSummary {
  std::int64_t events = 0;
  std::int64_t heads = 0;
  std::int64_t anchors = 0;  // archived streams, each in a segment
  std::int64_t projects = 0;
  std::array<std::int64_t, kItemStatuses> items_by_status{};  // by ItemStatus
  Micros first_at = 0, last_at = 0;
  Seq first_seq = 0, last_seq = 0;
  std::string chain_head;       // the log's digest, hex, as the file's header gives it
  std::string source_database;  // the exporting database's id
  Seq since = 0;                // a partial export: only the chain was checked
  std::string segment_id;       // an archive segment's id ("" for an export)
  std::int64_t redacted_payloads = 0;  // events whose payload is its digest only
};

struct AuditReport {
  std::vector<LedgerProblem> problems;
  LogSummary summary;
};

struct RestoreReport {
  std::int64_t events = 0;
  std::int64_t items = 0;
  // Streams of segments whose payloads are redacted: their events cannot
  // come back into a live log, so they stay anchored (checked against the
  // segment's heads and digest).
  std::int64_t kept_anchored = 0;
};

// ---- retention (cplane archive, docs/retention.md) --------------------------

struct ArchiveOptions {
  Micros before = 0;              // streams that ended before this time (not in the future)
  std::optional<std::string> project;  // only this project's (else every project's)
  std::string file;               // the segment to write: must not exist; FILE.tmp beside it
  bool dry_run = false;           // count what would go, write nothing
  std::optional<Micros> now;      // the time "the future" is judged by (default: the store's clock)
  // Each payload in the segment replaced by its digest (events/chain.hpp):
  // the chain is still checked, the payloads cannot be read back. Refused
  // for events written before chain 2.
  bool redact_payloads = false;
  // Release each archived item's idempotency key (a key_released event on
  // its stream, in the segment): from the commit on, an enqueue with it
  // makes a new item. By default an archived key deduplicates for the
  // life of the store (its anchor keeps it). A schedule occurrence's key
  // is never released: the schedule's catch-up finds its item by it.
  bool forget_keys = false;
};

struct ArchiveReport {
  std::int64_t streams = 0;       // streams archived (or, dry run, that would be)
  std::int64_t items = 0;         //   of them: item streams (done, failed, closed, cancelled)
  std::int64_t sessions = 0;      //   closed sessions
  std::int64_t schedules = 0;     //   removed schedules
  // Ended items left live: of each project's, the one with the latest
  // fair-share claim (its pass is the project's, which verify reads from
  // the live log). Archived once a later claim of the project takes over.
  std::int64_t kept_live = 0;
  // Limits with a rate whose clock (tat) the archive carried past the
  // claims it took away, as limit_clock_carried events (or, dry run,
  // would): each, when items are archived.
  std::int64_t clocks_carried = 0;
  // Idempotency keys released (forget_keys), or, dry run, that would be.
  std::int64_t keys_released = 0;
  std::int64_t events = 0;        // their events, now in the segment
  std::int64_t redacted = 0;      // payloads left out (redact_payloads)
  std::int64_t bytes = 0;         // the segment file's size
  std::string segment_id;         // hex
  std::string digest;             // BLAKE2b-256 of the file, hex
  bool dry_run = false;
};

// One segment an archive wrote, as the store recorded it (cplane stats).
struct ArchivedSegment {
  std::string segment_id;
  std::string digest;        // hex
  std::string file;          // the absolute path it was written to
  std::string project_id;    // "" every project
  Micros before = 0;
  Micros archived_at = 0;
  std::int64_t streams = 0;
  std::int64_t events = 0;
  std::int64_t bytes = 0;
  // Payloads kept as their digest in it (archive --redact-payloads), as its
  // segment_archived says; -1: not known (archived before archives were
  // events).
  std::int64_t redacted = -1;
};

// What verify_segment found of one segment file.
struct SegmentCheck {
  std::string segment_id;       // the store's id of it (from its header)
  std::int64_t streams = 0;     // streams the file holds
  std::int64_t events = 0;
  std::vector<LedgerProblem> problems;  // empty: the file is exactly what the anchors promise
};

// What cplane recover salvaged from a damaged database, and what it lost.
struct RecoverReport {
  std::int64_t events = 0;       // events copied, with their hashes
  std::int64_t heads = 0;        // stream heads copied
  std::int64_t rows = 0;         // item rows copied (kept where ahead of the log)
  Seq newest_seq = 0;            // how far the damaged log reached
  // false: some heads were unreadable or missing, and the salvaged tips
  // stand in (a tail cut with them is unseen)
  bool heads_readable = false;
  bool rows_readable = false;
  bool digest_readable = false;
  // Seq ranges [first, last] lost: on pages that could not be read, and
  // missing from pages that could.
  std::vector<std::pair<Seq, Seq>> unreadable;
  std::vector<std::pair<Seq, Seq>> absent;
  RebuildReport rebuild;         // the rows the recovered log gave
  // verify on the new database: each names a stream (an item's history)
  // that lost events or could not be checked.
  std::vector<LedgerProblem> problems;
};

// rebuild (or restore) refused to run, changing nothing: the log fails its
// own checks (a broken chain, index columns that disagree with bodies, a
// fence that does not rise, ...), so rows folded from it would be wrong.
// `problems()` lists why (at most kMaxListedChanges of them). A refusal, not
// a storage failure: the database was read and is readable, so it is no
// StorageError (a caller that sorts those by category must not take it for a
// broken disk). The tool for a damaged log is `cplane recover`, or a restore
// from an export.
class RebuildRefused : public Error {
 public:
  RebuildRefused(std::vector<LedgerProblem> problems, std::int64_t total);
  const std::vector<LedgerProblem>& problems() const { return problems_; }
  std::int64_t total() const { return total_; }

 private:
  std::vector<LedgerProblem> problems_;
  std::int64_t total_ = 0;
};

}  // namespace cplane
