// The operator's view on SQLite: the item listing's index walks and the
// log read as a stream. Reads only; none takes the write lock.
#include <fmt/format.h>

#include "storage/sqlite/engine.hpp"
#include "storage/sqlite/row_codec.hpp"

namespace cplane::storage::sqlite {

// One status, one direction, from beyond the cursor: a seek on
// items_listing (with a project) or items_listing_all, walked in queue
// order; the residual filters are checked on the rows the walk meets.
std::vector<ItemRow> SqliteBackend::list_items(const ItemListing& q) {
  check_usable();
  std::string where = "status = ?1 COLLATE NOCASE";
  if (q.project_id != nullptr) where += " AND project_id = ?2";
  if (q.beyond) where += q.newest_first ? " AND queued_seq < ?3" : " AND queued_seq > ?3";
  if (q.owner != nullptr) where += " AND owner = ?4";
  if (q.session != nullptr) where += " AND session = ?5";
  if (q.idem_key != nullptr) where += " AND idem_key = ?6";
  if (q.concurrency_key != nullptr) where += " AND concurrency_key = ?7";
  if (q.kind) where += " AND kind = ?8";
  Statement s(db_, fmt::format("SELECT {} FROM items INDEXED BY {} WHERE {} ORDER BY queued_seq "
                               "{} LIMIT ?9",
                               kItemColumns,
                               q.project_id != nullptr ? "items_listing" : "items_listing_all",
                               where, q.newest_first ? "DESC" : "ASC")
                       .c_str());
  const std::string none;
  s.bind(to_string(q.status), q.project_id != nullptr ? *q.project_id : none,
         q.beyond.value_or(0), q.owner != nullptr ? *q.owner : none,
         q.session != nullptr ? *q.session : none, q.idem_key != nullptr ? *q.idem_key : none,
         q.concurrency_key != nullptr ? *q.concurrency_key : none,
         q.kind ? to_string(*q.kind) : std::string_view(), static_cast<std::int64_t>(q.limit));
  std::vector<ItemRow> out;
  while (s.step()) out.push_back(read_item(s));
  return out;
}

// One writer at a time, and a seq taken inside its transaction: seqs
// commit in order, so every committed event is final.
std::vector<RawEvent> SqliteBackend::read_final(Seq after, std::size_t max,
                                                const StreamRef* stream) {
  check_usable();
  std::vector<RawEvent> out;
  if (stream != nullptr) {
    Statement s(db_, fmt::format("SELECT {} FROM events WHERE stream_kind = ?1 AND stream_id = "
                                 "?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
                                 kEventColumns)
                         .c_str());
    s.bind(to_string(stream->kind), stream->id, after, static_cast<std::int64_t>(max));
    while (s.step()) out.push_back(read_event(s));
    return out;
  }
  Statement s(db_, fmt::format("SELECT {} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                               kEventColumns)
                       .c_str());
  s.bind(after, static_cast<std::int64_t>(max));
  while (s.step()) out.push_back(read_event(s));
  return out;
}

Seq SqliteBackend::final_horizon() {
  check_usable();
  return last_seq();
}

// Every commit writes PATH-wal: the same inotify watch as wait_for_work.
void SqliteBackend::wait_for_commit(std::chrono::steady_clock::time_point deadline) {
  check_usable();
  if (!log_watch_) {
    log_watch_.emplace(path_);
    return;  // the caller looks once more: a commit may have come before the watch
  }
  log_watch_->wait(deadline);
}

}  // namespace cplane::storage::sqlite
