// What verify and rebuild report: problems in the ledger, rows rebuild
// changed. Plain values.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/errors.hpp>
#include <cplane/events.hpp>
#include <cplane/rows.hpp>

namespace cplane {

// One disagreement. `kind` is a stable snake_case name (see kProblemKinds);
// `item_id` names the item ("" for a problem of a project row), `project_id`
// the project where known; `detail` is a sentence giving both values.
struct LedgerProblem {
  std::string kind;
  std::string item_id;
  std::string project_id;
  std::string detail;
};

// Every kind verify can report, with its meaning:
//   no_creation_event        an item row, or an item's events, without a queued event
//   duplicate_creation_event two queued (or project_created) events for one stream
//   orphan_events            events of an item that has no row
//   two_terminal_events      more than one done/failed event for an item
//   event_after_terminal     an event after the item's terminal event
//   terminal_without_event   the row is done/failed, the log has no terminal event
//   terminal_events_disagree the row is done and the log says failed, or the reverse
//   event_without_terminal   the log has a terminal event, the row is not terminal
//   ready_after_claim        the row is ready but the log says it was claimed
//   status_disagrees         any other status mismatch
//   fence_not_monotonic      a claim whose fence is not above every earlier fence
//   stale_fence_accepted     a finish whose fence is not the item's current fence
//   fence_disagrees          the row's fence is not the log's
//   owner_disagrees, attempts_disagrees, lease_disagrees, project_disagrees,
//   payload_disagrees, detail_disagrees, queued_disagrees (queued_seq/at),
//   last_seq_disagrees (last_seq/updated_at)
//                            that field of the row is not the log's
//   item_in_unknown_project  an item queued into a project the log never created
//   undecodable_event        an event body that cannot be decoded
//   unknown_event_type       an event of a type this build does not know
//   index_disagrees          an event's item_id/project_id/type/at column is not its body's
//   claim_while_leased       a claim made while another worker's lease had not lapsed
//   project_row_missing, project_row_without_event, project_row_disagrees,
//   assignment_missing, assignment_without_event
//                            the same checks for projects and assignments
// What the log must say on its own, whatever the rows:
//   fence_skipped            a claim whose fence is more than one above the last
//   attempt_not_rising       a claim whose attempt is not one more than the claims before
//   lease_before_claim       a claim whose lease does not end after it was made
//   event_before_project     an item event before its project's creation
//   grant_without_project    a grant (actor_assigned) before its project's creation
//   invalid_payload          a queued payload that is not JSON or is over 1 MiB
// The hash chain (each names the stream and the seq):
//   event_edited             an event whose body, seq, stream or revision is not what its
//                            hash was computed over
//   event_missing            revisions missing inside a stream: events deleted
//   event_inserted           a second event at one revision, or one never chained
//   event_reordered          a revision that goes back in seq order
//   tail_missing             a stream that ends before its head: its newest events cut off
//   stream_missing           a head whose stream has no events: a whole history deleted
//   head_missing             a stream with events and no head
//   head_disagrees           a head that is not its stream's last event
//   digest_disagrees         the log's digest does not fold from its heads, or counts
//                            other events: a stream removed with its head, a head edited
//   seq_gap                  seqs missing while every chain is intact
// The lease lifecycle:
//   expired_while_leased     a lease_expired event before the lease ended, or naming
//                            another lease than the current one
extern const std::vector<std::string> kProblemKinds;

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
  std::string chain_head;  // the log's digest, hex
};

// What a replay learns besides the problems (audit prints it).
struct LogSummary {
  std::int64_t events = 0;
  std::int64_t heads = 0;
  std::int64_t projects = 0;
  std::array<std::int64_t, kItemStatuses> items_by_status{};  // by ItemStatus
  Micros first_at = 0, last_at = 0;
  Seq first_seq = 0, last_seq = 0;
  std::string chain_head;       // the log's digest, hex, as the file's header gives it
  std::string source_database;  // the exporting database's id
  Seq since = 0;                // a partial export: only the chain was checked
};

struct AuditReport {
  std::vector<LedgerProblem> problems;
  LogSummary summary;
};

struct RestoreReport {
  std::int64_t events = 0;
  std::int64_t items = 0;
};

// What cplane recover salvaged from a damaged database, and what it lost.
struct RecoverReport {
  std::int64_t events = 0;       // events copied, with their hashes
  std::int64_t heads = 0;        // stream heads copied
  std::int64_t rows = 0;         // item rows copied (kept where ahead of the log)
  Seq newest_seq = 0;            // how far the damaged log reached
  bool heads_readable = false;   // false: the salvaged tips stand in (a cut tail is unseen)
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

// rebuild refused to run, changing nothing: the log fails its own checks
// (a broken chain, index columns that disagree with bodies, a fence that
// does not rise, ...), so rows folded from it would be wrong. `problems()`
// lists why (at most kMaxListedChanges of them). The tool for a damaged log
// is `cplane recover`, or a restore from an export.
class RebuildRefused : public UnreadableEvent {
 public:
  RebuildRefused(std::vector<LedgerProblem> problems, std::int64_t total);
  const std::vector<LedgerProblem>& problems() const { return problems_; }
  std::int64_t total() const { return total_; }

 private:
  std::vector<LedgerProblem> problems_;
  std::int64_t total_ = 0;
};

}  // namespace cplane
