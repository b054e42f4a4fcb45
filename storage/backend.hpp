// The storage interface: one abstract Backend, implemented by SQLite now and
// PostgreSQL next. It speaks in events and rows, never in SQL, so commands,
// verify and rebuild are written once for every backend.
//
// A Backend is one connection. It is not thread-safe: use one per thread or
// process. All methods throw StorageError (with a category) on failure:
// busy (the write lock was not had within the lock timeout), full (the disk,
// a quota or a file size limit: the transaction was rolled back, nothing was
// written), commit_unknown (only from commit()), corruption, unavailable, io.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/event.hpp"
#include "projections/rows.hpp"

namespace cplane::storage {

// How durable a commit must be before it returns.
enum class Sync {
  normal,  // survives a process crash; a power loss may drop the last commits
  full,    // survives a power loss: the log is on disk before commit returns
};

// An event row as stored: the index columns and the canonical body. Verify
// decodes the body and checks the columns against it.
struct RawEvent {
  Seq seq = 0;
  std::string item_id;     // "" for project events
  std::string project_id;
  std::string type;
  Micros at = 0;
  std::string body;        // encoded event (events/codec.hpp)
};

// An item row as scanned for verify and rebuild. A row whose status column
// holds none of the four statuses (only tampering does that) is still
// returned, so that it can be reported and repaired: `invalid_status` holds
// the stored text and row.status is meaningless.
struct ScannedItem {
  ItemRow row;
  std::string invalid_status;
};

template <class Row>
class Cursor {
 public:
  virtual ~Cursor() = default;
  // Fills `row` with the next row and returns true, or returns false at the end.
  virtual bool next(Row& row) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- transactions -------------------------------------------------------
  // A write transaction takes the write lock before anything is read, so the
  // state a command decides on cannot change under it. `sync` is the
  // durability its commit must have. busy when the lock timeout runs out.
  virtual void begin_write(Sync sync) = 0;
  // A read transaction: one consistent snapshot until commit/rollback. Never
  // waits for a writer.
  virtual void begin_read() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;

  // ---- the log (append-only) ---------------------------------------------
  // Encodes and appends the event; returns its seq.
  virtual Seq append(const Event& event) = 0;
  // The events of one item (or with item_id "" none), oldest first.
  virtual std::vector<RawEvent> item_events(std::string_view item_id) = 0;
  // Every item event, ordered by (item_id, seq).
  virtual std::unique_ptr<Cursor<RawEvent>> scan_item_events() = 0;
  // Every project event (item_id ""), ordered by seq.
  virtual std::unique_ptr<Cursor<RawEvent>> scan_project_events() = 0;

  // ---- items --------------------------------------------------------------
  virtual std::optional<ItemRow> find_item(std::string_view item_id) = 0;
  // Inserts a new item; StorageError if the id is taken (never overwrites).
  virtual void insert_item(const ItemRow& row) = 0;
  virtual void put_item(const ItemRow& row) = 0;  // insert or replace
  virtual void delete_item(std::string_view item_id) = 0;
  // The ready item of a project queued first: an index seek.
  virtual std::optional<ItemRow> oldest_ready(const std::string& project_id) = 0;
  // The claimed item of a project whose lease lapsed first, at or before
  // `now`: an index seek.
  virtual std::optional<ItemRow> earliest_lapsed(Micros now, const std::string& project_id) = 0;
  // Every item row, ordered by item_id (bytewise).
  virtual std::unique_ptr<Cursor<ScannedItem>> scan_items() = 0;

  // ---- projects and scope ---------------------------------------------------
  virtual std::optional<ProjectRow> find_project(std::string_view project_id) = 0;
  virtual void put_project(const ProjectRow& row) = 0;
  virtual void delete_project(std::string_view project_id) = 0;
  virtual bool is_assigned(std::string_view project_id, std::string_view actor) = 0;
  virtual void put_assignment(const ProjectActorRow& row) = 0;
  virtual void delete_assignment(std::string_view project_id, std::string_view actor) = 0;
  // Sorted project ids: all of them, or those assigned to `actor`.
  virtual std::vector<std::string> project_ids(const std::string* actor) = 0;
  virtual std::vector<ProjectRow> all_projects() = 0;
  virtual std::vector<ProjectActorRow> all_assignments() = 0;

  // The seq of the newest event (0 for an empty log): the length of a replay.
  virtual Seq last_seq() = 0;

  // How many items of `project_id` (all, if null) are in each status,
  // indexed by ItemStatus. Reads every such row: for operators, not hot paths.
  virtual std::array<std::int64_t, 4> status_counts(const std::string* project_id) = 0;
};

// RAII guard: rolls back unless committed.
class Transaction {
 public:
  static Transaction write(Backend& backend, Sync sync) {
    backend.begin_write(sync);
    return Transaction(backend);
  }
  static Transaction read(Backend& backend) {
    backend.begin_read();
    return Transaction(backend);
  }
  Transaction(Transaction&& other) noexcept : backend_(other.backend_) { other.backend_ = nullptr; }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction() {
    if (backend_ != nullptr) backend_->rollback();
  }
  void commit() {
    Backend* b = backend_;
    backend_ = nullptr;
    b->commit();
  }

 private:
  explicit Transaction(Backend& backend) : backend_(&backend) {}
  Backend* backend_;
};

}  // namespace cplane::storage
