// The SQLite engine's items table (engine.hpp): reads and writes of a row,
// the claim's candidates (each an index seek per project, claim_queries),
// the allocator's walk (allocation_query), listings by status and session,
// and the counts by status.
#include "storage/sqlite/engine.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/sqlite/row_codec.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "storage/stored_text.hpp"

namespace cplane::storage::sqlite {
namespace {

class ItemStatementCursor final : public Cursor<ScannedItem> {
 public:
  ItemStatementCursor(sqlite3* db, const std::string& sql) : stmt_(db, sql.c_str()) { stmt_.bind(); }
  bool next(ScannedItem& item) override {
    if (!stmt_.step()) return false;
    fill_item(stmt_, item);
    return true;
  }

 private:
  Statement stmt_;
};

// A walk of the allocation statement (kAllocationColumns), reset when done.
class AllocationCursor final : public Cursor<ItemRow> {
 public:
  explicit AllocationCursor(Statement& s) : stmt_(s) {}
  ~AllocationCursor() override { stmt_.reset(); }
  bool next(ItemRow& row) override {
    if (!stmt_.step()) return false;
    row = ItemRow{};
    stmt_.text_into(0, row.item_id);
    stmt_.text_into(1, row.project_id);
    row.status = parse_item_status(stmt_.text(2)).value_or(ItemStatus::ready);
    stmt_.text_into(3, row.session);
    row.lease_expires_at = stmt_.i64(4);
    row.review = parse_review_text(stmt_.text(5)).value_or(ReviewState::none);
    stmt_.text_into(6, row.author);
    // The walk's order is SQL's, on the raw columns: a value the engine
    // never writes would rank the row otherwise than the planner does.
    const std::int64_t priority = stmt_.i64(8);
    if (stmt_.type(8) != SQLITE_INTEGER || priority < std::numeric_limits<std::int32_t>::min() ||
        priority > std::numeric_limits<std::int32_t>::max() ||
        (stmt_.type(7) != SQLITE_NULL &&
         (stmt_.type(7) != SQLITE_INTEGER || stmt_.i64(7) == 0))) {
      const std::string id = row.item_id;
      stmt_.reset();
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("item {} has a priority or terminal_since stored as cplane "
                                     "never writes it (edited behind cplane's back?): run cplane "
                                     "verify, then cplane rebuild",
                                     quote_id(id)));
    }
    row.terminal_since = stmt_.i64(7);
    row.priority = static_cast<std::int32_t>(priority);
    row.queued_seq = stmt_.i64(9);
    row.run_at = stmt_.i64(10);
    row.attempts = static_cast<std::uint32_t>(stmt_.i64(11));
    row.attempt_limit = static_cast<std::uint32_t>(stmt_.i64(12));
    stmt_.text_into(13, row.concurrency_key);
    return true;
  }

 private:
  Statement& stmt_;
};

std::optional<ItemRow> one_item(Statement& s) {
  std::optional<ItemRow> out;
  if (s.step()) out = read_item(s);
  s.reset();
  return out;
}

}  // namespace

std::optional<ItemRow> SqliteBackend::find_item(std::string_view item_id) {
  return one_item(stmts_.find_item.bind(item_id));
}

std::optional<ItemRow> SqliteBackend::find_item_by_key(const std::string& project_id,
                                                       std::string_view key) {
  return one_item(stmts_.find_item_by_key.bind(project_id, key));
}

void SqliteBackend::insert_item(const ItemRow& r) {
  try {
    bind_item(stmts_.insert_item, r).run();
  } catch (const StorageError& e) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_PRIMARYKEY) {
      throw StorageError(StorageError::Category::io,
                         fmt::format("item id {} is already taken", r.item_id));
    }
    throw;
  }
}

void SqliteBackend::put_item(const ItemRow& r) { bind_item(stmts_.put_item, r).run(); }

void SqliteBackend::delete_item(std::string_view item_id) {
  stmts_.delete_item.bind(item_id).run();
}

std::optional<ItemRow> SqliteBackend::oldest_ready(const std::string& project_id) {
  return one_item(stmts_.oldest_ready.bind(project_id));
}

std::optional<ItemRow> SqliteBackend::earliest_lapsed(Micros now, const std::string& project_id) {
  return one_item(stmts_.earliest_lapsed.bind(project_id, now));
}

std::optional<ItemRow> SqliteBackend::earliest_due(Micros now, const std::string& project_id) {
  return one_item(stmts_.earliest_due.bind(project_id, now));
}

std::vector<ItemRow> SqliteBackend::lapsed_items(Micros now, const std::string& project_id) {
  std::vector<ItemRow> out;
  Statement s(db_, fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id = "
                               "?1 AND lease_expires_at <= ?2 ORDER BY lease_expires_at, "
                               "queued_seq",
                               kItemColumns)
                       .c_str());
  s.bind(project_id, now);
  while (s.step()) out.push_back(read_item(s));
  return out;
}

std::optional<Micros> SqliteBackend::next_lapse(const std::string& project_id) {
  Statement s(db_, "SELECT min(t) FROM (SELECT min(lease_expires_at) AS t FROM items WHERE "
                   "status = 'claimed' AND project_id = ?1 UNION ALL SELECT min(run_at) FROM "
                   "items WHERE status = 'scheduled' AND project_id = ?1)");
  s.bind(project_id);
  if (!s.step() || s.type(0) == SQLITE_NULL) return std::nullopt;
  return s.i64(0);
}

std::vector<ItemRow> SqliteBackend::items_in_status(const std::string& project_id,
                                                    ItemStatus status, std::size_t limit) {
  Statement s(db_, fmt::format("SELECT {} FROM items WHERE project_id = ?1 AND status = '{}' "
                               "ORDER BY {} LIMIT ?2",
                               kItemColumns, to_string(status), status_order(status))
                       .c_str());
  s.bind(project_id, static_cast<std::int64_t>(limit));
  std::vector<ItemRow> out;
  while (s.step()) out.push_back(read_item(s));
  return out;
}

std::vector<ItemRow> SqliteBackend::session_items(std::string_view session_id) {
  auto& s = stmts_.session_items.bind(session_id);
  std::vector<ItemRow> out;
  while (s.step()) out.push_back(read_item(s));
  s.reset();
  return out;
}

std::unique_ptr<Cursor<ScannedItem>> SqliteBackend::scan_items() {
  return std::make_unique<ItemStatementCursor>(
      db_, fmt::format("SELECT {} FROM items ORDER BY item_id", kItemColumns));
}

std::unique_ptr<Cursor<ItemRow>> SqliteBackend::scan_allocatable(const std::string& project_id) {
  // The statement is prepared once per connection; one walk at a time.
  return std::make_unique<AllocationCursor>(stmts_.allocation.bind(project_id));
}

std::array<std::int64_t, kItemStatuses + 1> SqliteBackend::status_counts(
    const std::string* project_id) {
  Statement s(db_, project_id == nullptr
                       ? "SELECT status, count(*) FROM items GROUP BY status"
                       : "SELECT status, count(*) FROM items WHERE project_id = ?1 GROUP BY status");
  if (project_id == nullptr) {
    s.bind();
  } else {
    s.bind(*project_id);
  }
  std::array<std::int64_t, kItemStatuses + 1> out{};
  while (s.step()) {
    if (auto status = parse_item_status(s.text(0))) {
      out[static_cast<int>(*status)] = s.i64(1);
    } else {
      out[kItemStatuses] += s.i64(1);
    }
  }
  return out;
}

}  // namespace cplane::storage::sqlite

namespace cplane::storage {

std::vector<std::string> claim_queries() {
  return {
      fmt::format("SELECT {} FROM items WHERE status = 'ready' AND project_id = ?1 "
                  "ORDER BY priority DESC, queued_seq LIMIT 1",
                  sqlite::kItemColumns),
      fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id = ?1 "
                  "AND lease_expires_at <= ?2 ORDER BY lease_expires_at, queued_seq LIMIT 1",
                  sqlite::kItemColumns),
      fmt::format("SELECT {} FROM items WHERE status = 'scheduled' AND project_id = ?1 "
                  "AND run_at <= ?2 ORDER BY run_at, queued_seq LIMIT 1",
                  sqlite::kItemColumns),
  };
}

std::string allocation_query() {
  return fmt::format("SELECT {} FROM items WHERE project_id = ?1 AND (status IN ('ready', "
                     "'claimed') OR status = 'scheduled') ORDER BY (terminal_since IS NOT NULL) DESC, priority DESC, "
                     "queued_seq",
                     sqlite::kAllocationColumns);
}

}  // namespace cplane::storage
