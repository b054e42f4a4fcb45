// The SQLite engine's Backend, internal to storage/sqlite/ (the rest of the
// tree opens it through open_sqlite, sqlite_backend.hpp). Its methods are
// defined by responsibility:
//   sqlite_backend.cpp  opening (checks, pragmas, the side files) and
//                       closing a connection, its prepared statements
//   transactions.cpp    begin, commit, rollback, savepoints, the busy
//                       timeout, checkpoints, waiting for work
//   log.cpp             the log: append, import, scans, heads, the digest
//   items.cpp           the items table: claims, the allocator's walk
//   projects.cpp        projects and their actors, sessions, schedules,
//                       the terminal path, incident links
// The on-disk format is described in schema.cpp.
//
// Concurrency: WAL mode, so readers and the writer never block each other.
// Every write command is BEGIN IMMEDIATE: the write lock is held before the
// first read. Writers are first serialised through an exclusive flock(2) on
// a side file (PATH-lock; /proc/locks names its holder): waiting in the
// kernel is fair, where SQLite's busy handler sleeps and lets the current
// holder re-take the lock, starving others under contention. Both waits are
// bounded by one lock timeout. A store opened read-only checks the schema in
// a read transaction and never touches PATH-lock: reads never wait for, and
// never hold off, a writer (even one stopped while holding the lock).
//
// Durability: each transaction states the `synchronous` level its commit
// needs (FULL or NORMAL); the connection switches only when it changes. In
// WAL mode a FULL commit also makes every earlier NORMAL commit durable.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/chain.hpp"
#include "storage/backend.hpp"
#include "storage/open.hpp"
#include "storage/sqlite/combine_area.hpp"
#include "storage/sqlite/statement.hpp"
#include "storage/sqlite/wal_watch.hpp"
#include "storage/sqlite/writer_lock.hpp"

namespace cplane::storage::sqlite {

class SqliteBackend final : public Backend {
 public:
  // sqlite_backend.cpp
  SqliteBackend(const std::string& path, const OpenOptions& options);
  ~SqliteBackend() override;
  int schema_version() const noexcept override;
  std::string database_id() override;
  // The connection's `synchronous` level now (sqlite_synchronous).
  int synchronous_level();

  // transactions.cpp
  void begin_write(Sync sync) override;
  void begin_read() override;
  void commit() override;
  void rollback() noexcept override;
  CombineArea* combine_area() override;
  void savepoint() override;
  void release_savepoint() override;
  bool rollback_to_savepoint() noexcept override;
  void tag_requests(std::uint64_t request_id) override;
  std::uint64_t rows_written() noexcept override;
  bool in_write_transaction() noexcept override;
  void defer_checkpoints(bool on) override;
  void checkpoint_if_due() noexcept override;
  Micros now() override;
  void announce_work() override;
  void wait_for_work(std::chrono::steady_clock::time_point deadline) override;
  std::int64_t data_version();  // SQLite's: moves when another connection commits

  // log.cpp
  std::unique_ptr<Cursor<RawEvent>> scan_after(Seq after) override;
  Seq append(const Event& untagged) override;
  void import_event(const RawEvent& e) override;
  void put_head(const StreamHead& h) override;
  void put_log_digest(const LogDigest& d) override;
  std::unique_ptr<Cursor<StreamHead>> scan_heads(StreamKind kind) override;
  std::vector<StreamHead> unfiled_heads() override;
  std::optional<LogDigest> log_digest() override;
  std::vector<RawEvent> stream_events(const StreamRef& stream) override;
  std::unique_ptr<Cursor<RawEvent>> scan_stream(StreamKind kind) override;
  std::unique_ptr<Cursor<RawEvent>> scan_unfiled() override;
  std::int64_t event_count() override;
  bool seqs_dense() override;
  void put_seqs_sparse() override;
  Seq last_seq() override;

  // items.cpp
  std::optional<ItemRow> find_item(std::string_view item_id) override;
  void insert_item(const ItemRow& r) override;
  void put_item(const ItemRow& r) override;
  std::optional<ItemRow> find_item_by_key(const std::string& project_id,
                                          std::string_view key) override;
  std::optional<Micros> next_lapse(const std::string& project_id) override;
  void delete_item(std::string_view item_id) override;
  std::optional<ItemRow> oldest_ready(const std::string& project_id) override;
  std::vector<ItemRow> lapsed_items(Micros now, const std::string& project_id) override;
  std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) override;
  std::optional<ItemRow> earliest_due(Micros now, const std::string& project_id) override;
  std::vector<ItemRow> items_in_status(const std::string& project_id, ItemStatus status,
                                       std::size_t limit) override;
  std::unique_ptr<Cursor<ScannedItem>> scan_items() override;
  std::vector<ItemRow> session_items(std::string_view session_id) override;
  std::unique_ptr<Cursor<ItemRow>> scan_allocatable(const std::string& project_id) override;
  std::array<std::int64_t, kItemStatuses + 1> status_counts(const std::string* project_id) override;

  // listing.cpp
  std::vector<ItemRow> list_items(const ItemListing& listing) override;
  std::vector<RawEvent> read_final(Seq after, std::size_t max, const StreamRef* stream) override;
  Seq final_horizon() override;
  void wait_for_commit(std::chrono::steady_clock::time_point deadline) override;

  // gauges.cpp: the metrics gauges
  std::vector<ProjectGauges> project_gauges(Micros now) override;
  std::vector<std::string> claimed_items() override;
  // Their statements, as run (?1 the time), for a test's EXPLAIN QUERY PLAN.
  static std::vector<std::string> gauge_queries();

  // projects.cpp
  std::vector<std::string> claimable_project_ids(const std::string* actor) override;
  std::optional<ProjectRow> find_project(std::string_view project_id) override;
  void put_project(const ProjectRow& r) override;
  void delete_project(std::string_view project_id) override;
  bool is_assigned(std::string_view project_id, std::string_view actor) override;
  void put_assignment(const ProjectActorRow& r) override;
  void delete_assignment(std::string_view project_id, std::string_view actor) override;
  std::vector<std::string> project_ids(const std::string* actor) override;
  std::vector<ProjectRow> all_projects() override;
  std::vector<ProjectActorRow> all_assignments() override;
  std::optional<SessionRow> find_session(std::string_view session_id) override;
  void put_session(const SessionRow& r) override;
  void delete_session(std::string_view session_id) override;
  std::unique_ptr<Cursor<SessionRow>> scan_sessions() override;
  std::optional<ScheduleRow> find_schedule(std::string_view name) override;
  void put_schedule(const ScheduleRow& r) override;
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
  void put_terminal_lock(const TerminalLockRow& r) override;
  void delete_terminal_lock(std::string_view item_id) override;
  std::unique_ptr<Cursor<TerminalLockRow>> scan_terminal_locks() override;
  std::optional<IncidentLinkRow> find_incident(std::string_view incident_id) override;
  void put_incident(const IncidentLinkRow& r) override;
  void delete_incident(std::string_view incident_id) override;
  std::unique_ptr<Cursor<IncidentLinkRow>> scan_incidents() override;
  std::vector<IncidentLinkRow> incidents_for(std::string_view target) override;
  // archive.cpp
  std::unique_ptr<Cursor<StreamAnchor>> scan_anchors(StreamKind kind) override;
  std::vector<std::string> ended_streams(StreamKind kind, Micros before,
                                         const std::string* project_id,
                                         std::size_t limit) override;
  void archive_stream(const StreamAnchor& anchor) override;
  void import_anchor(const StreamAnchor& anchor) override;
  void delete_anchor(const StreamRef& stream) override;
  std::optional<StreamAnchor> find_anchor(const StreamRef& stream) override;
  std::optional<StreamAnchor> find_anchor_by_key(const std::string& project_id,
                                                 std::string_view key) override;
  void put_segment(const SegmentRecord& segment) override;
  void delete_segment(const std::string& segment_id) override;
  std::set<std::string> anchored_segments() override;
  std::vector<SegmentRecord> segments() override;

 private:
  // The statements prepared once per connection (prepare()).
  struct Statements {
    Statement begin_immediate, begin_deferred, commit, savepoint, release_savepoint, last_seq;
    Statement append, stream_events, find_head, stream_started, put_head, update_head, put_digest,
        load_digest;
    Statement find_item, find_item_by_key, insert_item, put_item, delete_item;
    Statement find_session, put_session, delete_session, session_items;
    Statement put_terminal_lock, delete_terminal_lock, allocation;
    Statement find_incident, put_incident, delete_incident;
    Statement oldest_ready, earliest_lapsed, earliest_due, all_unpaused_ids, actor_unpaused_ids;
    Statement due_schedules;
    Statement find_project, put_project, delete_project;
    Statement is_assigned, put_assignment, delete_assignment;
    Statement all_project_ids, actor_project_ids;
    Statement find_limit, put_limit, live_leases;
    // key_heads, per status (ready, scheduled, claimed): the first key, the
    // next key after one, a key group's first item.
    Statement key_first[3], key_next[3], key_head[3];
  };

  // The log's digest as this write transaction leaves it: read at its first
  // append, written back once before its commit.
  struct LogDigestState {
    std::int64_t events = 0;
    Seq last_seq = 0;
    Hash digest{};
  };

  // sqlite_backend.cpp
  void prepare();

  // transactions.cpp
  void truncate_wal() noexcept;
  static int after_commit(void* self, sqlite3* db, const char*, int frames);
  static constexpr int kCheckpointFrames = 1000;  // SQLite's own autocheckpoint default
  // Deferred checkpoints leave the WAL growing (it restarts only after a
  // checkpoint that nobody wrote beside): at this many frames a checkpoint
  // runs under the lock again (checkpoint_waiting), and the next write
  // restarts the WAL.
  static constexpr int kDeferredCheckpointFrames = 4 * kCheckpointFrames;
  int checkpoint(int mode) noexcept;  // SQLite's result code
  void checkpoint_waiting() noexcept;
  void check_usable();
  void release_writer() noexcept;
  void set_busy_timeout(std::chrono::milliseconds timeout);
  void begin_immediate(Clock::time_point start, Clock::time_point deadline);

  // log.cpp
  LogDigestState& writing_digest();
  void flush_digest();

  std::string path_;
  std::chrono::milliseconds lock_timeout_;
  bool read_only_ = false;
  sqlite3* db_ = nullptr;
  WriterLock writer_lock_;
  Statements stmts_;
  Sync sync_ = Sync::full;
  bool in_write_ = false;
  bool broken_ = false;
  bool wrote_ = false;  // committed a write: leave the WAL empty on close
  bool defer_checkpoints_ = false;  // defer_checkpoints
  bool checkpoint_due_ = false;
  int backfilled_ = 0;  // WAL frames in the database, as of this connection's last checkpoint
  std::optional<LogDigestState> digest_;  // inside a write transaction that appended
  std::optional<LogDigestState> saved_digest_;  // as it was at the savepoint
  std::uint64_t request_id_ = 0;  // tag_requests
  std::unique_ptr<CombineArea> combine_;
  std::string scratch_;
  pid_t pid_ = ::getpid();
  std::optional<WalWatch> work_watch_;  // armed by the first wait_for_work
  bool announce_ = false;  // announce_work: this transaction made work
  bool waiting_ = false;  // wait_for_work armed its watch (if it could make one)
  bool notices_ = false;  // work_watch_ watches PATH-lock's notices, not every commit
  std::int64_t data_version_ = 0;  // PRAGMA data_version when wait_for_work last returned
  std::optional<WalWatch> log_watch_;   // armed by the first wait_for_commit
};

}  // namespace cplane::storage::sqlite
