// The storage contract: one abstract Backend, implemented by SQLite
// (storage/sqlite/) and PostgreSQL (storage/postgres/). It speaks
// in events, streams and rows, never in SQL, so commands, verify and rebuild
// are written once for every backend. Each backend meets this contract, and
// the conformance suite (tests/) checks it against both:
//
// * One connection. A Backend is not thread-safe: one per thread or process.
// * Ids order bytewise. Every scan that is ordered by an id (a stream id, an
//   item id, a project id) orders it as memcmp does (SQLite's BINARY
//   collation; PostgreSQL's COLLATE "C"): verify's merge joins depend on it.
// * seq is monotonic per log, possibly with gaps (a PostgreSQL sequence
//   leaves gaps on rollback). Nothing may assume that the newest seq is the
//   number of events: event_count() is.
// * begin_read() is one consistent snapshot until commit/rollback, and never
//   waits for a writer.
// * begin_write() makes the decide step safe: what a command reads inside
//   it cannot change under it before it commits. On SQLite that is the
//   database's write lock; a backend may use row locks instead (PostgreSQL),
//   so callers must not assume a global lock, only that the rows they read
//   inside the transaction stay as read.
// * The clock: now() is the time a command runs at when the caller gives
//   none. SQLite answers the process's clock; a server backend may answer
//   its own (hosts' clocks drift).
// * Errors: every call may throw StorageError. Its category says what the
//   caller may do:
//     begin_write   busy (lock timeout), unavailable, io;
//                   InvalidArgument (read_only) on a read-only store
//     begin_read    unavailable, io, corruption
//     commit        commit_unknown (the outcome is unknown: never retry
//                   blindly), full (rolled back, nothing written), busy, io
//     rollback      never throws; a connection that cannot roll back refuses
//                   every later call (io)
//     reads         corruption (a row or file that is not what it should be),
//                   io, unavailable
//     writes        full (nothing of the transaction will be written), io
//   incompatible is raised when a newer cplane wrote the database.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "events/errors.hpp"
#include "events/event.hpp"
#include "projections/rows.hpp"
#include "storage/log_source.hpp"

namespace cplane::storage {

class CombineArea;  // storage/sqlite/combine_area.hpp

// A write transaction lost a race another one won: a serialization failure,
// a deadlock, a stream head or idempotency key taken meanwhile (PostgreSQL,
// where writers lock rows, not the database). Nothing was written; the
// command runs its whole decide step again, re-reading. Category busy, so a
// caller that sees it once the retries ran out retries later.
class Conflict : public StorageError {
 public:
  explicit Conflict(const std::string& message) : StorageError(Category::busy, message) {}
};

// How durable a commit must be before it returns.
enum class Sync {
  normal,  // survives a process crash; a power loss may drop the last commits
  full,    // survives a power loss: the log is on disk before commit returns
};

// The ORDER BY of items_in_status for `status`: the order of its index.
// InternalError for a status that has none.
inline const char* status_order(ItemStatus status) {
  switch (status) {
    case ItemStatus::ready: return "queued_seq";
    case ItemStatus::scheduled: return "run_at, queued_seq";
    case ItemStatus::claimed: return "lease_expires_at, queued_seq";
    case ItemStatus::failed:
    case ItemStatus::cancelled: return "item_id";
    default: break;
  }
  throw InternalError("items are listed by status only when ready, scheduled, claimed, failed "
                      "or cancelled");
}

// The log's and the rows' reads (LogSource, RowSource) are declared in
// storage/log_source.hpp; here, everything else a command needs.
// The order of one key group's items in `status` (key_heads): ready by
// priority then queue order, scheduled by run_at, claimed by lease end.
// InternalError for another status.
inline const char* key_group_order(ItemStatus status) {
  switch (status) {
    case ItemStatus::ready: return "priority DESC, queued_seq";
    case ItemStatus::scheduled: return "run_at, queued_seq";
    case ItemStatus::claimed: return "lease_expires_at, queued_seq";
    default: break;
  }
  throw InternalError("key groups are read only for ready, scheduled or claimed items");
}

// One index walk of the operator's item listing: the items of one status
// (of one project, or of all), in queue order (queued_seq), from beyond a
// cursor; the other filters narrow the walk. An index seek per call on
// both engines (items_listing, items_listing_all).
struct ItemListing {
  const std::string* project_id = nullptr;  // null: every project
  ItemStatus status = ItemStatus::ready;
  bool newest_first = true;
  std::optional<Seq> beyond;                // only queued_seqs past this one, in that order
  const std::string* owner = nullptr;       // null: any (and the same below)
  const std::string* session = nullptr;
  const std::string* idem_key = nullptr;
  const std::string* concurrency_key = nullptr;
  std::optional<WorkKind> kind;
  std::size_t limit = 50;
};

class Backend : public LogSource, public RowSource {
 public:
  virtual ~Backend() = default;

  // ---- transactions -------------------------------------------------------
  // A write transaction takes the write lock before anything is read, so the
  // state a command decides on cannot change under it. `sync` is the
  // durability its commit must have. busy when the lock timeout runs out.
  // It ends with commit() or rollback(), as a read transaction
  // (LogSource::begin_read) does.
  virtual void begin_write(Sync sync) = 0;

  // ---- the log (append-only) ---------------------------------------------
  // Encodes and appends the event, filed under its stream and chained to its
  // head: the next revision, hash = chain_hash(head's hash, ...); the head
  // and the log's digest follow it in the same transaction. Returns its seq,
  // never one an earlier event had (even one cut off since).
  virtual Seq append(const Event& event) = 0;
  // Several events, each as append() would, in order; a server backend
  // locks their heads in one round trip when their streams are distinct.
  virtual std::vector<Seq> append_batch(const std::vector<Event>& events) {
    std::vector<Seq> out;
    for (const auto& e : events) out.push_back(append(e));
    return out;
  }
  // Restore and recover: an event exactly as another log stored it (seq,
  // revision, hash and all), without chaining; heads and the digest are
  // then put as that log had them.
  virtual void import_event(const RawEvent& event) = 0;
  virtual void put_head(const StreamHead& head) = 0;
  virtual void put_log_digest(const LogDigest& digest) = 0;
  // The schema version of the open database, in this backend's own numbering
  // (SQLite's and PostgreSQL's count apart): the one this build writes, since
  // an open store is at it (an older one was migrated or refused, a newer
  // one refused). 0 for a backend that is no database. Never throws.
  virtual int schema_version() const noexcept { return 0; }
  // The events of one stream, oldest first.
  virtual std::vector<RawEvent> stream_events(const StreamRef& stream) = 0;
  // The events of several streams of one kind, each oldest first, in the
  // order asked; a server backend reads them in one round trip.
  virtual std::vector<std::vector<RawEvent>> streams_events(StreamKind kind,
                                                            const std::vector<std::string>& ids) {
    std::vector<std::vector<RawEvent>> out;
    out.reserve(ids.size());
    for (const auto& id : ids) out.push_back(stream_events({kind, id}));
    return out;
  }

  // ---- items --------------------------------------------------------------
  virtual std::optional<ItemRow> find_item(std::string_view item_id) = 0;
  // Several items by id, each as find_item() would (nullopt if missing), in
  // the order asked; a server backend reads (and locks) them in one round
  // trip.
  virtual std::vector<std::optional<ItemRow>> find_items(const std::vector<std::string>& item_ids) {
    std::vector<std::optional<ItemRow>> out;
    for (const auto& id : item_ids) out.push_back(find_item(id));
    return out;
  }
  // The item of a project enqueued under the idempotency key `key`.
  virtual std::optional<ItemRow> find_item_by_key(const std::string& project_id,
                                                  std::string_view key) = 0;
  // Inserts a new item; StorageError if the id is taken (never overwrites).
  virtual void insert_item(const ItemRow& row) = 0;
  virtual void put_item(const ItemRow& row) = 0;  // insert or replace
  // Writes back an item this transaction read and holds (a command's
  // change to its row): put_item, where a backend has nothing cheaper.
  virtual void update_item(const ItemRow& row) { put_item(row); }
  virtual void delete_item(std::string_view item_id) = 0;
  // The ready item of a project a claim takes first (higher priority, then
  // queued first): an index seek.
  virtual std::optional<ItemRow> oldest_ready(const std::string& project_id) = 0;
  // The claimed item of a project whose lease lapsed first, at or before
  // `now`: an index seek.
  virtual std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) = 0;
  // The scheduled item of a project due first (run_at at or before `now`):
  // an index seek, however many are scheduled for later.
  virtual std::optional<ItemRow> earliest_due(Micros now, const std::string& project_id) = 0;
  // The projects a claim may take from: as project_ids(actor), less the paused.
  virtual std::vector<std::string> claimable_project_ids(const std::string* actor) {
    std::vector<std::string> out;
    for (auto& id : project_ids(actor)) {
      const auto project = find_project(id);
      if (project && !project->paused) out.push_back(std::move(id));
    }
    return out;
  }
  // A claim's candidates in the unpaused projects `actor` may claim from
  // (all, if null): per project, the ready items in queue order, the lapsed
  // ones in lapse order and the due scheduled ones in run_at order, each
  // list the first `limit` or fewer. `more` is set on a list that may go on
  // past its rows (a batch claim that took them all asks again). The
  // default answers one of each (oldest_ready, earliest_lapsed,
  // earliest_due); a server backend answers all in one round trip.
  struct CandidateList {
    std::vector<ItemRow> rows;
    bool more = false;
  };
  virtual std::vector<CandidateList> claim_candidates(Micros now, const std::string* actor,
                                                      std::size_t limit) {
    (void)limit;
    std::vector<CandidateList> out;
    for (const auto& project : claimable_project_ids(actor)) {
      for (auto row :
           {oldest_ready(project), earliest_lapsed(now, project), earliest_due(now, project)}) {
        if (row) out.push_back({{std::move(*row)}, true});
      }
    }
    return out;
  }
  // The first `limit` items of a project in `status` (ready, scheduled,
  // claimed, failed or cancelled), in that status's index order: queue
  // order, run_at, lease end, item id. Bulk cancel and retry take a batch
  // at a time, each batch moving its items out of the status. An index
  // range; InternalError for another status.
  virtual std::vector<ItemRow> items_in_status(const std::string& project_id, ItemStatus status,
                                               std::size_t limit) = 0;
  // Every claimed item of a project whose lease lapsed at or before `now`,
  // lapsed first (the sweep, expire_leases): an index range.
  virtual std::vector<ItemRow> lapsed_items(Micros now, const std::string& project_id) = 0;
  // When the next of a project's items becomes claimable by time alone: the
  // earliest lease end of its claimed items or run_at of its scheduled ones;
  // nullopt when there is none.
  virtual std::optional<Micros> next_lapse(const std::string& project_id) = 0;

  // The open items (ready, claimed or scheduled) of a project in the allocator's order:
  // on the terminal path first, then higher priority, then queued first. An
  // index walk: the caller stops at the first it can take. Rows carry only
  // what the allocator ranks and judges by (item and project id, status,
  // session, lease end, review, author, terminal_since, priority,
  // queued_seq, run_at, attempts, attempt_limit): read the chosen one whole
  // with find_item. One walk at a
  // time per connection.
  virtual std::unique_ptr<Cursor<ItemRow>> scan_allocatable(const std::string& project_id) = 0;

  // ---- the terminal path (terminal_locks) -------------------------------------
  virtual void put_terminal_lock(const TerminalLockRow& row) = 0;  // insert or replace
  virtual void delete_terminal_lock(std::string_view item_id) = 0;

  // ---- incident links ---------------------------------------------------------
  virtual std::optional<IncidentLinkRow> find_incident(std::string_view incident_id) = 0;
  virtual void put_incident(const IncidentLinkRow& row) = 0;  // insert or replace
  virtual void delete_incident(std::string_view incident_id) = 0;
  virtual std::vector<IncidentLinkRow> incidents_for(std::string_view target) = 0;

  // ---- sessions -------------------------------------------------------------
  virtual std::optional<SessionRow> find_session(std::string_view session_id) = 0;
  virtual void put_session(const SessionRow& row) = 0;  // insert or replace
  virtual void delete_session(std::string_view session_id) = 0;
  // The claimed items whose assignment is this session's, by item id (an
  // index range; lapsed leases included).
  virtual std::vector<ItemRow> session_items(std::string_view session_id) = 0;

  // ---- cron schedules -------------------------------------------------------
  virtual std::optional<ScheduleRow> find_schedule(std::string_view name) = 0;
  virtual void put_schedule(const ScheduleRow& row) = 0;  // insert or replace
  virtual void delete_schedule(std::string_view name) = 0;
  // The active schedules whose next occurrence is at or before `now`, the
  // earliest first, at most `limit`: an index seek (a claim makes it), so
  // that a thousand idle schedules cost nothing. A server backend locks
  // them, skipping those another transaction is firing.
  virtual std::vector<ScheduleRow> due_schedules(Micros now, std::size_t limit) = 0;

  // ---- limits and concurrency keys -------------------------------------------
  virtual std::optional<LimitRow> find_limit(std::string_view key) = 0;
  virtual void put_limit(const LimitRow& row) = 0;  // insert or replace
  virtual void delete_limit(std::string_view key) = 0;  // rebuild: a row no event made
  // (scan_limits, every limit row: RowSource's.)
  // How many items of `key` (of any project) are claimed under a lease
  // that has not lapsed at `now` (it ends after `now`): an index range
  // count inside the caller's transaction. A slot is this, never a counter.
  virtual std::int64_t live_leases(std::string_view key, Micros now) = 0;
  // Those items, the lease ending first first, at most `limit`.
  virtual std::vector<ItemRow> key_holders(std::string_view key, Micros now,
                                           std::size_t limit) = 0;
  // Per concurrency-key group of a project's items in `status` (ready,
  // scheduled or claimed; "" is a group too), the group's first in that
  // status's claim order: ready by priority (higher first) then queue
  // order; scheduled by run_at; claimed by lease end. Groups in key order
  // (bytewise), at most `limit`: one index seek per group, however many
  // items each holds. The caller judges whether each is due or lapsed.
  virtual std::vector<ItemRow> key_heads(const std::string& project_id, ItemStatus status,
                                         std::size_t limit) = 0;
  // How many ready items of `row`'s project a claim takes before it: a
  // higher priority, or the same and queued earlier. An index range count.
  virtual std::int64_t ready_ahead(const ItemRow& row) = 0;

  // ---- projects and scope ---------------------------------------------------
  virtual std::optional<ProjectRow> find_project(std::string_view project_id) = 0;
  // The project's row for a command that will write it (put_project): on a
  // backend whose writers run side by side (PostgreSQL) it stays locked
  // until the transaction ends, so that two writers of one row (a fair
  // claim's pass, a pause) never write back what the other changed. Where
  // writers take turns (SQLite) every read is already that.
  virtual std::optional<ProjectRow> lock_project(std::string_view project_id) {
    return find_project(project_id);
  }
  virtual void put_project(const ProjectRow& row) = 0;
  virtual void delete_project(std::string_view project_id) = 0;
  virtual bool is_assigned(std::string_view project_id, std::string_view actor) = 0;
  virtual void put_assignment(const ProjectActorRow& row) = 0;
  virtual void delete_assignment(std::string_view project_id, std::string_view actor) = 0;
  // Sorted project ids: all of them, or those assigned to `actor`.
  virtual std::vector<std::string> project_ids(const std::string* actor) = 0;

  // ---- retention (recovery/archive.cpp, docs/retention.md) --------------------
  // A backend that cannot archive yet refuses the writes and ended_items with
  // InvalidArgument, before anything is written; its reads answer none.
  //
  // The ids of the streams of `kind` (of one project, or of all) that
  // ended before `before`, by id, at most `limit`: items done, failed,
  // closed or cancelled (their row's updated_at); sessions closed (their
  // closed_at; a session is no project's, so none with `project_id`);
  // schedules removed (their updated_at). None of any other kind. On a
  // server the rows are locked (FOR UPDATE) inside a write transaction.
  virtual std::vector<std::string> ended_streams(StreamKind kind, Micros before,
                                                 const std::string* project_id,
                                                 std::size_t limit);
  // Moves a stream out of the live log: deletes its events and head and
  // stores `anchor`, whose anchor_hash replaces the head's hash in the log's
  // digest (its event count and last seq are unchanged: the events still
  // count, in their segment). The caller deletes the stream's rows. Inside
  // a write transaction.
  virtual void archive_stream(const StreamAnchor& anchor);
  // archive_stream of each, in order (a server backend: a few round trips
  // for many streams). The same refusals; the caller's transaction rolls
  // back whatever was done before one.
  virtual void archive_streams(const std::vector<StreamAnchor>& anchors) {
    for (const auto& a : anchors) archive_stream(a);
  }
  // Restore: an anchor exactly as another store had it (the digest is put
  // as that store had it, put_log_digest).
  virtual void import_anchor(const StreamAnchor& anchor);
  // Restore with a segment: the stream's anchor goes (its events and head
  // were imported from the segment).
  virtual void delete_anchor(const StreamRef& stream);
  // The anchor of an archived stream, or of the archived item of a project
  // enqueued under `key`; nullopt when there is none.
  virtual std::optional<StreamAnchor> find_anchor(const StreamRef& stream);
  virtual std::optional<StreamAnchor> find_anchor_by_key(const std::string& project_id,
                                                         std::string_view key);
  // The archive's record of one segment file: written with its anchors.
  // (SegmentRow: the fold of the segment's segment_archived.)
  using SegmentRecord = SegmentRow;
  virtual void put_segment(const SegmentRecord& segment);  // insert or replace
  virtual void delete_segment(const std::string& segment_id);
  // The segments some anchor names (the others' streams are live again).
  virtual std::set<std::string> anchored_segments();
  // Every segment recorded, oldest first.
  virtual std::vector<SegmentRecord> segments();
  std::optional<std::vector<RecordedSegment>> recorded_segments() override;

  // The seq of the newest event (0 for an empty log). Seqs may have gaps.
  virtual Seq last_seq() = 0;
  // Restore: the log imported came from a backend whose seqs have gaps
  // (PostgreSQL), so a gap here is no evidence either. Kept with the store.
  virtual void put_seqs_sparse() {}
  // A server backend may refuse (Conflict) a read that waited long for a
  // row lock, so that a command decides again at the current time. A bulk
  // job that takes no decision by the clock (archive) turns that off for
  // its transaction; while on, reads wait as long as a lock is held.
  virtual void set_patient_reads(bool on) { (void)on; }
  // What the next write transactions read first, for as long as it is set,
  // so that a server backend may read it with the BEGIN, in the same round
  // trip: a report's item (find_item) or a claim's candidates
  // (claim_candidates at the transaction's clock). Default: nothing.
  struct FirstRead {
    std::string item_id;
    bool claim = false;
    std::optional<std::string> actor;
    std::size_t want = 0;
  };
  virtual void expect_first_read(const FirstRead& read) { (void)read; }

  // Waiting for work (claim --wait). A write transaction that makes an item
  // claimable, or gives back a slot of a concurrency key, calls
  // announce_work() before it commits; wait_for_work()
  // returns when such a commit may have happened since the previous call,
  // or at `deadline`, whichever comes first. It may return early (a wake-up
  // that finds nothing): the caller claims again and waits again. The first
  // call only arms the wake-up and returns at once, so that work committed
  // between the caller's last look and the arming is not missed.
  virtual void announce_work() = 0;
  virtual void wait_for_work(std::chrono::steady_clock::time_point deadline) = 0;

  // ---- group commit (SQLite) -------------------------------------------------
  // The shared area where processes queue commands for whichever of them
  // holds the combiner's lock (storage/sqlite/combine_area.hpp), or nullptr: every
  // command then runs in a transaction of its own. SQLite's only.
  virtual CombineArea* combine_area() { return nullptr; }
  // One level of savepoint inside a write transaction, so that one command
  // of a batch can be undone without the others: savepoint() marks,
  // release_savepoint() keeps what followed, rollback_to_savepoint() undoes
  // it and answers whether the transaction is still open (false: the
  // engine ended it, as SQLite does on some I/O errors, so the batch is
  // lost). InternalError where there is no group commit.
  virtual void savepoint();
  virtual void release_savepoint();
  virtual bool rollback_to_savepoint() noexcept { return false; }
  // How many rows this connection has written so far (a command that
  // failed having written none needs no savepoint to undo it), and whether
  // a write transaction is still open (an engine may end one itself on an
  // I/O error).
  virtual std::uint64_t rows_written() noexcept { return 0; }
  // Round trips to a server so far on this connection (0: an embedded
  // engine has none).
  virtual std::uint64_t round_trips() noexcept { return 0; }
  virtual bool in_write_transaction() noexcept { return false; }
  // Events appended from now on record this request id (0: none).
  virtual void tag_requests(std::uint64_t request_id) { (void)request_id; }
  // While on, the engine puts off the upkeep that copies its log into the
  // database (SQLite's WAL checkpoint) that would otherwise run inside a
  // commit; checkpoint_if_due() runs what came due, outside any transaction,
  // once the combiner's lock is let go.
  virtual void defer_checkpoints(bool on) { (void)on; }
  virtual void checkpoint_if_due() noexcept {}
  // Every event whose seq is above `after`, in seq order: an index range.
  virtual std::unique_ptr<Cursor<RawEvent>> scan_after(Seq after);

  // The time a command runs at when its caller gives none, microseconds
  // since the epoch: the process's clock here, a server's own elsewhere.
  virtual Micros now() = 0;

  // How many items of `project_id` (all, if null) are in each status,
  // indexed by ItemStatus; [kItemStatuses] counts rows whose status is none of the five
  // (tampering). Reads every such row: for operators, not hot paths.
  virtual std::array<std::int64_t, kItemStatuses + 1> status_counts(const std::string* project_id) = 0;

  // ---- the operator's view (any read transaction; never the write lock) ------
  virtual std::vector<ItemRow> list_items(const ItemListing& listing) = 0;
  // At most `max` events with a seq above `after` (of one stream, if given),
  // in seq order, every one final: no event with a lower seq is still to
  // commit. SQLite: every committed event (one writer, seqs in commit
  // order). PostgreSQL: the transactions that were in flight when the read
  // began are waited for, then the read is repeated up to the seq it saw.
  virtual std::vector<RawEvent> read_final(Seq after, std::size_t max,
                                           const StreamRef* stream) = 0;
  // A seq at or below which every event is final (committed, or never to
  // be): tail --from-end starts after it. Outside a transaction, as read_final.
  virtual Seq final_horizon() = 0;
  // Like wait_for_work, for any commit that appended events: returns when
  // one may have happened since the previous call, or at `deadline`; the
  // first call only arms the wake-up and returns at once.
  virtual void wait_for_commit(std::chrono::steady_clock::time_point deadline) = 0;

  // ---- metrics gauges (storage/sqlite/gauges.cpp, storage/postgres/gauges.cpp)
  // What `cplane metrics` reads at each scrape, inside a read transaction:
  // index reads of the open items only (ready, scheduled, claimed), never
  // of the terminal rows. Each engine says which indexes (SQLite: ranges of
  // items_listing for the counts; PostgreSQL: the partial indexes
  // items_ready, items_due, items_lease); the due and lapsed ones are
  // ranges of items_due and items_lease that end at `now`.
  struct ProjectGauges {
    std::string project_id;
    std::int64_t ready = 0;
    std::int64_t scheduled = 0;
    std::int64_t due = 0;            // scheduled, run_at at or before `now`
    std::int64_t claimed = 0;
    std::int64_t lapsed = 0;         // claimed, the lease ended at or before `now`
    Micros oldest_ready_at = 0;      // queued_at of its first ready item in queue order; 0: none
    Micros earliest_due = 0;         // the earliest run_at of its due items; 0: none
    Micros earliest_lapse = 0;       // the earliest lease end of its lapsed items; 0: none
    bool operator==(const ProjectGauges&) const = default;
  };
  // The projects with a ready, scheduled or claimed item, by project id.
  virtual std::vector<ProjectGauges> project_gauges(Micros now) = 0;
  // Every claimed item's id, in no order: a covering index range (the
  // collector's seed of what is claimed).
  virtual std::vector<std::string> claimed_items() = 0;
};

// RAII guard: rolls back unless committed.
class Transaction {
 public:
  static Transaction write(Backend& backend, Sync sync) {
    backend.begin_write(sync);
    return Transaction(backend);
  }
  static Transaction read(LogSource& source) {
    source.begin_read();
    return Transaction(source);
  }
  Transaction(Transaction&& other) noexcept : source_(other.source_) { other.source_ = nullptr; }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (source_ != nullptr) source_->rollback();
  }
  void commit() {
    LogSource* s = source_;
    source_ = nullptr;
    s->commit();
  }

 private:
  explicit Transaction(LogSource& source) : source_(&source) {}
  LogSource* source_;
};

}  // namespace cplane::storage
