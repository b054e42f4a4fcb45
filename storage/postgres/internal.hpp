// What the files of storage/postgres/ share and nothing else sees: the
// PostgresBackend class, whose members are defined across the folder (each
// section below names its file), and its scan cursor. The schema is in
// schema.hpp; the libpq wrapper (Params, Result) in statement.hpp.
//
// How the engine meets the contract (storage/backend.hpp) without a global
// write lock:
//
// * begin_write is READ COMMITTED, and every read a command decides on
//   locks what it read: find_item, find_session, find_incident take the
//   row FOR UPDATE; a claim's candidates are taken FOR UPDATE SKIP LOCKED,
//   so claimers never queue behind one another. What a command read cannot
//   change before it commits.
// * append locks the stream's head (FOR UPDATE) before it draws the next
//   seq from events_seq, so that within a stream seqs rise in commit order
//   and the chain has no forks. A new stream's head is inserted only if no
//   other transaction created it meanwhile; else the command is retried
//   (Conflict), as are serialization failures and deadlocks.
// * The log's digest is kept in shards (log_digest.shard: the server
//   kDigestShards rows), each updated by XOR at commit, so commits do not
//   serialise on one row: a commit takes a shard no other transaction
//   holds (SKIP LOCKED, starting from its server process id), since the
//   lock is held through the commit's WAL flush. The digest is their XOR.
// * seqs come from a sequence: they have gaps (a rolled-back transaction
//   takes one), so seqs_dense() is false and verify does not read a gap as
//   a deletion; the chain and the heads still show one.
// * The clock is the server's: begin_write and begin_read read
//   clock_timestamp() in the same round trip as BEGIN.
// * begin_read is REPEATABLE READ, READ ONLY: one snapshot, never waiting
//   for a writer. Scans read through server-side cursors, a page at a time.
//
// Errors: a lost connection is `unavailable` (the next transaction
// reconnects), a connection lost during COMMIT is `commit_unknown`; a lock
// wait longer than the lock timeout is `busy`; a full disk `full`; damaged
// data (XX001, XX002) `corruption`; the server's internal error (XX000, the
// rest of class XX) InternalError. One function maps them:
// throw_for_sqlstate (postgres_backend.hpp).
#pragma once

#include <libpq-fe.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/errors.hpp"
#include "storage/backend.hpp"
#include "storage/open.hpp"
#include "storage/postgres/postgres_backend.hpp"
#include "storage/postgres/statement.hpp"

namespace cplane::storage::postgres {

using Category = StorageError::Category;

// The rows a scan fetches at a time.
inline constexpr int kFetchRows = 1000;

// The 32 bytes of a hash as four big-endian 64-bit integers (log_digest's
// d0..d3, which the server XORs with `#`); log.cpp.
std::array<std::int64_t, 4> hash_words(const Hash& h);

// The claim's candidates (items.cpp): every list of every project in scope,
// with `now`, `actor` and `limit` as SQL expressions (parameters, or a
// column of the BEGIN's clock); and the lists from its result, whose rows
// carry their list's tag after the item's columns.
std::string candidates_sql(std::string_view now, std::string_view actor, std::string_view limit);
std::vector<Backend::CandidateList> candidate_lists(const Result& r, std::size_t limit);
// An item's row taken without waiting (FOR UPDATE SKIP LOCKED), with its id
// as an SQL expression: the row's columns, then whether another
// transaction holds it (no row, yet it is there).
std::string item_taken_sql(std::string_view item_id);

class PostgresBackend;

// A scan through a server-side cursor, kFetchRows at a time.
template <class Row>
class PgCursor final : public Cursor<Row> {
 public:
  using Fill = void (*)(const Result&, int, Row&);
  PgCursor(PostgresBackend& backend, std::string name, Fill fill)
      : backend_(backend), name_(std::move(name)), fill_(fill) {}
  ~PgCursor() override;
  bool next(Row& row) override;

 private:
  PostgresBackend& backend_;
  std::string name_;
  Fill fill_;
  Result page_;
  int at_ = 0;
  bool done_ = false;
  bool fetched_ = false;
  int page_size_ = 0;
};

// The Backend on one libpq connection; not thread-safe, and not usable
// after a fork (it says so: unavailable).
class PostgresBackend final : public Backend {
 public:
  // ---- opening, transactions, the clock, waiting for work (postgres_backend.cpp) ------

  // Connects and identifies (or creates, or migrates) the store.
  PostgresBackend(const std::string& url, const OpenOptions& options);
  ~PostgresBackend() override;
  void begin_write(Sync sync) override;
  void begin_read() override;
  // BEGIN and `clock_sql` in one round trip; the transaction's clock is
  // its first row's `clock_column`.
  Result begin(const char* begin_sql, const std::string& clock_sql, const Params& clock_params,
               int clock_column);
  void commit() override;
  void rollback() noexcept override;
  Micros now() override;

  // Once per transaction, sent with its COMMIT (a NOTIFY is delivered when
  // the transaction commits, and never if it rolls back).
  void announce_work() override { announce_ = true; }
  void wait_for_work(std::chrono::steady_clock::time_point deadline) override;

  // ---- the connection, statements, deferred writes, cursors (connection.cpp) ----------

  void connect();
  // Ends what an earlier failure left on the connection (pipeline mode, an
  // open or aborted transaction) before a new transaction begins.
  void end_left_transaction() noexcept;

  // The connection broke (the server restarted, the network went away):
  // reconnect before the next transaction; unavailable if it cannot.
  void ensure_connected();
  [[noreturn]] void fail(const PGresult* r, const std::string& what);

  // A statement without parameters (and possibly several of them).
  Result simple(const char* sql, const char* what);

  // The name of `sql` prepared on this connection (at its first use).
  const std::string& prepared(const std::string& sql);

  // A prepared statement, run now (after the writes deferred before it).
  Result run(const std::string& sql, Params params = {});

  // Writes whose result the command does not read (an event and its head, an
  // item row) are not sent at once: they go to the server in one pipeline
  // (libpq's pipeline mode) with the next statement that reads, or with the
  // log digest's update and COMMIT, so that a claim or a finish costs four
  // round trips, not six. Their errors surface there: a head taken
  // meanwhile, an idempotency key taken meanwhile (Conflict: the command
  // runs again), an item id taken (io).

  struct Deferred {
    std::string name;  // the prepared statement
    Params params;
  };
  void defer(const std::string& sql, Params params);
  // The item rows update_item holds back, sent as one UPDATE before the
  // next statement (a batch's claims or finishes come in a run).
  void defer_updates();
  void defer_update_run(std::vector<Params> rows);  // one statement

  // Sends what was deferred, then `tail` (statements without parameters,
  // such as the digest's update and COMMIT), in one pipeline; reads every
  // result. Returns the tail's last result; throws for the first failure.
  Result pipeline(const std::vector<std::string>& tail);
  void flush_deferred();

  // A server-side cursor over `sql` (inside the current transaction).
  template <class Row>
  std::unique_ptr<Cursor<Row>> cursor(const std::string& sql, Params params,
                                      typename PgCursor<Row>::Fill fill) {
    if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
      throw InternalError("a scan of a PostgreSQL store must run inside a transaction");
    }
    flush_deferred();
    std::string name = fmt::format("c{}", ++cursors_);
    params.finish();
    const std::string declare = fmt::format("DECLARE {} NO SCROLL CURSOR FOR {}", name, sql);
    Result r(PQexecParams(conn_, declare.c_str(), params.size(), nullptr, params.pointers(),
                          params.lengths(), params.formats(), 0));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) fail(r.get(), "cannot open a scan");
    return std::make_unique<PgCursor<Row>>(*this, std::move(name), fill);
  }
  Result fetch(const std::string& name, int rows);
  void close_cursor(const std::string& name) noexcept;

  // ---- creating and migrating the schema (schema.cpp) ---------------------------------

  void identify_or_create();

  // Takes an older store to this build's version, one step at a time, under
  // the creators' lock (a second process finds it done and does nothing).
  void migrate(int& version);

  // 0 when the schema holds no cplane store (and nothing else of the names
  // cplane uses); throws corruption when it holds a foreign table of them.
  int read_version();

  // ---- the log, its heads and its digest (log.cpp) ------------------------------------

  // What this transaction's appends add to the log's digest (to one shard,
  // with its COMMIT).
  struct Delta {
    std::int64_t events = 0;
    Seq last_seq = 0;
    Hash digest{};
  };

  // A stream's head as locked for an append: the seq drawn after the lock,
  // the previous hash and revision.
  struct LockedHead {
    Seq seq = 0;
    Hash prev = kNoHash;
    std::int64_t revision = 0;
  };
  // The head in columns column (the seq), column + 1 and + 2 of row; column
  // + 3 says whether the stream has events though it has no head (refused).
  LockedHead locked_head(const Result& r, int row, std::string_view kind, std::string_view id,
                         int column = 0);
  Seq append(const Event& event) override;

  // Several events of distinct streams: every head locked and every seq
  // drawn in one round trip, and every event written with its head in one
  // statement.
  std::vector<Seq> append_batch(const std::vector<Event>& events) override;

  // Chains `event` to its locked head and defers its insert (with the new
  // head) to the commit's pipeline.
  Seq chain(const Event& event, const LockedHead& head);
  // The event's hash and the digest's share of it; the parameters of its
  // row (seq, item_id, project_id, type, at, body, kind, id, revision, hash).
  Params link(const Event& event, const LockedHead& head);
  void import_event(const RawEvent& e) override;
  void put_head(const StreamHead& h) override;
  void put_log_digest(const LogDigest& d) override;
  std::unique_ptr<Cursor<StreamHead>> scan_heads(StreamKind kind) override;
  std::vector<StreamHead> unfiled_heads() override;
  std::optional<LogDigest> log_digest() override;

  int schema_version() const noexcept override { return kPostgresSchemaVersion; }
  std::string database_id() override;
  std::vector<RawEvent> stream_events(const StreamRef& stream) override;
  std::vector<std::vector<RawEvent>> streams_events(StreamKind kind,
                                                    const std::vector<std::string>& ids) override;
  std::unique_ptr<Cursor<RawEvent>> scan_stream(StreamKind kind) override;
  std::unique_ptr<Cursor<RawEvent>> scan_unfiled() override;
  std::int64_t event_count() override;
  Seq last_seq() override;

  // ---- items and claims (items.cpp) ---------------------------------------------------

  // A row a write transaction reads is locked until it commits.
  const char* lock() const { return writing_ ? " FOR UPDATE" : ""; }

  // A locking read in a write transaction. The command read the clock when
  // the transaction began; if the read waited for another transaction's
  // row lock, that time is stale (a lease may have lapsed meanwhile), so
  // the command decides again, at the current time (Conflict). On SQLite
  // the clock is read after the write lock is taken; here a decision's
  // clock is at most kStaleClock older than its locks.
  // The network's round trip is not a wait: the read's time is judged
  // against the BEGIN's, which carried the clock over the same link.
  // A read that first took its rows without waiting (find_item,
  // find_items) is not judged: whatever changed them committed before it
  // began, as a change committed between the BEGIN and the read would.
  template <class Read>
  Result locking(Read&& read, std::chrono::milliseconds allowed = kStaleClock) {
    if (!writing_ || patient_) return read();
    const auto start = std::chrono::steady_clock::now();
    Result r = read();
    if (std::chrono::steady_clock::now() - start > begin_round_trip_ + allowed) {
      throw Conflict("waited for a row lock: deciding again at the current time");
    }
    return r;
  }

  static constexpr std::chrono::milliseconds kStaleClock{50};
  // A project's row carries no time a decision judges: a wait for it only
  // makes the command's clock older, which for a claim means a lease up to
  // this much shorter and nothing lapsed or due that was not at its BEGIN.
  // Every fair claim of a scope waits its turn for the same rows, so the
  // item rows' 50 ms made 32 fair claimers fail busy (an adversarial run).
  static constexpr std::chrono::milliseconds kStaleClockForProject{1000};
  void set_patient_reads(bool on) override { patient_ = on; }
  void expect_first_read(const FirstRead& read) override { expected_ = read; }
  std::uint64_t round_trips() noexcept override { return round_trips_; }
  std::uint64_t round_trips_ = 0;
  // What the BEGIN read of expected_: the item's row (none when it was not
  // there or another transaction held it), or the claim's candidates.
  // Used by the first find_item of that id or claim_candidates at the
  // BEGIN's clock, before the transaction wrote anything.
  struct Prefetched : FirstRead {
    std::optional<ItemRow> row;
    bool held = false;  // no row: another transaction holds it
    std::vector<CandidateList> lists;
  };
  // A batch read by id that found rows held by another transaction runs
  // again (Conflict) and then waits for them all in id order (find_items).
  bool wait_for_rows_ = false;
  bool wait_next_attempt_ = false;
  FirstRead expected_;
  std::optional<Prefetched> prefetched_;
  bool patient_ = false;
  std::optional<ItemRow> one_item(const Result& r);
  std::optional<ItemRow> find_item(std::string_view item_id) override;

  // Several items, each locked, in one round trip when none is held by
  // another transaction; else the command runs again (Conflict) and then
  // waits for them all in id order, so that two batches of the same items
  // never hold part each.
  std::vector<std::optional<ItemRow>> find_items(const std::vector<std::string>& item_ids) override;
  std::optional<ItemRow> find_item_by_key(const std::string& project_id,
                                          std::string_view key) override;

  // Deferred: an id taken is io, a key taken meanwhile (another enqueue
  // with it committed) a Conflict, and the command runs again and finds it.
  void insert_item(const ItemRow& r) override;

  // Deferred, as an upsert (rebuild may put a row that does not exist).
  void put_item(const ItemRow& r) override;
  void update_item(const ItemRow& r) override;
  void delete_item(std::string_view item_id) override;

  // A claim's candidates: locked, skipping rows another claim holds.
  const char* claim_lock() const { return writing_ ? " FOR UPDATE SKIP LOCKED" : ""; }
  std::optional<ItemRow> oldest_ready(const std::string& project_id) override;
  std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) override;
  std::optional<ItemRow> earliest_due(Micros now, const std::string& project_id) override;
  std::vector<std::string> claimable_project_ids(const std::string* actor) override;
  std::vector<ItemRow> items_in_status(const std::string& project_id, ItemStatus status,
                                       std::size_t limit) override;

  // Every list of every project in scope, in one statement; each candidate
  // locked, skipping rows another claim holds.
  std::vector<CandidateList> claim_candidates(Micros now, const std::string* actor,
                                              std::size_t limit) override;
  std::vector<ItemRow> lapsed_items(Micros now, const std::string& project_id) override;
  std::optional<Micros> next_lapse(const std::string& project_id) override;
  std::unique_ptr<Cursor<ScannedItem>> scan_items() override;
  std::unique_ptr<Cursor<ItemRow>> scan_allocatable(const std::string& project_id) override;

  // ---- retention: anchors and segments (archive.cpp) ----------------------------------

  std::unique_ptr<Cursor<StreamAnchor>> scan_anchors(StreamKind kind) override;
  std::vector<std::string> ended_streams(StreamKind kind, Micros before,
                                         const std::string* project_id,
                                         std::size_t limit) override;
  void archive_stream(const StreamAnchor& anchor) override;
  void archive_streams(const std::vector<StreamAnchor>& anchors) override;
  void import_anchor(const StreamAnchor& anchor) override;
  void delete_anchor(const StreamRef& stream) override;
  std::optional<StreamAnchor> find_anchor(const StreamRef& stream) override;
  std::optional<StreamAnchor> find_anchor_by_key(const std::string& project_id,
                                                 std::string_view key) override;
  void put_segment(const SegmentRecord& segment) override;
  void delete_segment(const std::string& segment_id) override;
  std::set<std::string> anchored_segments() override;
  std::vector<SegmentRecord> segments() override;

  // ---- the other projected tables (tables.cpp) ----------------------------------------

  void put_terminal_lock(const TerminalLockRow& r) override;
  void delete_terminal_lock(std::string_view item_id) override;
  std::unique_ptr<Cursor<TerminalLockRow>> scan_terminal_locks() override;
  std::optional<IncidentLinkRow> find_incident(std::string_view incident_id) override;
  void put_incident(const IncidentLinkRow& r) override;
  void delete_incident(std::string_view incident_id) override;
  std::unique_ptr<Cursor<IncidentLinkRow>> scan_incidents() override;
  std::vector<IncidentLinkRow> incidents_for(std::string_view target) override;
  std::optional<SessionRow> find_session(std::string_view session_id) override;
  void put_session(const SessionRow& r) override;
  void delete_session(std::string_view session_id) override;
  std::vector<ItemRow> session_items(std::string_view session_id) override;
  std::unique_ptr<Cursor<SessionRow>> scan_sessions() override;
  std::optional<ScheduleRow> find_schedule(std::string_view name) override;
  void put_schedule(const ScheduleRow& s) override;
  void delete_schedule(std::string_view name) override;
  std::unique_ptr<Cursor<ScheduleRow>> scan_schedules() override;
  std::vector<ScheduleRow> due_schedules(Micros now, std::size_t limit) override;
  std::optional<LimitRow> find_limit(std::string_view key) override;
  void put_limit(const LimitRow& row) override;
  void delete_limit(std::string_view key) override;
  std::unique_ptr<Cursor<LimitRow>> scan_limits() override;
  std::int64_t live_leases(std::string_view key, Micros now) override;
  std::vector<ItemRow> key_holders(std::string_view key, Micros now, std::size_t limit) override;
  std::vector<ItemRow> key_heads(const std::string& project_id, ItemStatus status,
                                 std::size_t limit) override;
  std::int64_t ready_ahead(const ItemRow& row) override;
  std::optional<ProjectRow> find_project(std::string_view project_id) override;
  std::optional<ProjectRow> lock_project(std::string_view project_id) override;
  void put_project(const ProjectRow& r) override;
  void delete_project(std::string_view project_id) override;
  bool is_assigned(std::string_view project_id, std::string_view actor) override;
  void put_assignment(const ProjectActorRow& r) override;
  void delete_assignment(std::string_view project_id, std::string_view actor) override;
  std::vector<std::string> project_ids(const std::string* actor) override;
  std::vector<ProjectRow> all_projects() override;
  std::vector<ProjectActorRow> all_assignments() override;
  std::array<std::int64_t, kItemStatuses + 1> status_counts(const std::string* project_id) override;

  // ---- the operator's view (listing.cpp) -----------------------------------------------
  std::vector<ItemRow> list_items(const ItemListing& listing) override;
  std::vector<RawEvent> read_final(Seq after, std::size_t max, const StreamRef* stream) override;
  Seq final_horizon() override;
  void wait_for_commit(std::chrono::steady_clock::time_point deadline) override;
  void wait_for_notice(const char* channel, bool& listening,
                       std::chrono::steady_clock::time_point deadline);
  // The first key of the follower's advisory lock ("cpln"); the second is
  // the schema's hash.
  static constexpr std::int64_t kFollowerLockClass = 0x63706c6e;

  // ---- the metrics gauges (gauges.cpp) -------------------------------------------------
  std::vector<ProjectGauges> project_gauges(Micros now) override;
  std::vector<std::string> claimed_items() override;

  // The SQLSTATE of the last failed statement ("" if none yet).
  std::string last_error_state_;

 private:
  std::string url_;
  OpenOptions options_;
  PGconn* conn_ = nullptr;
  std::string schema_;
  std::unordered_map<std::string, std::string> prepared_;
  int shard_ = 0;
  std::uint64_t cursors_ = 0;
  bool writing_ = false;
  // This write transaction holds the limits' advisory lock (find_limit).
  bool limits_locked_ = false;
  bool listening_ = false;
  bool log_listening_ = false;  // LISTEN cplane_log (wait_for_commit)
  // Whether the log has followers, as last looked up (followed()).
  bool followed();
  bool followers_ = false;
  std::chrono::steady_clock::time_point followers_checked_{};
  std::chrono::steady_clock::time_point last_notice_{};
  static constexpr std::chrono::milliseconds kNoticeGap{50};
  Micros tx_now_ = 0;
  // The earliest active schedule's next_at (none: no active schedule), as
  // this write transaction's BEGIN read it; unknown once the transaction
  // writes a schedule, and outside a write transaction.
  struct EarliestSchedule {
    std::optional<Micros> next_at;
  };
  std::optional<EarliestSchedule> earliest_schedule_;
  std::optional<Delta> delta_;
  std::vector<Deferred> deferred_;
  std::vector<Params> updates_;  // update_item's rows not yet deferred
  static constexpr std::size_t kMaxDeferred = 512;
  bool announce_ = false;  // work became claimable: NOTIFY with the commit
  std::chrono::steady_clock::duration begin_round_trip_{};
  pid_t pid_ = ::getpid();
};

template <class Row>
PgCursor<Row>::~PgCursor() {
  backend_.close_cursor(name_);
}

template <class Row>
bool PgCursor<Row>::next(Row& row) {
  if (!fetched_ || at_ >= page_size_) {
    if (done_) return false;
    page_ = backend_.fetch(name_, kFetchRows);
    fetched_ = true;
    page_size_ = page_.rows();
    at_ = 0;
    if (page_size_ < kFetchRows) done_ = true;
    if (page_size_ == 0) return false;
  }
  fill_(page_, at_++, row);
  return true;
}

}  // namespace cplane::storage::postgres
