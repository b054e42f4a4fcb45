// The SQLite engine's flow control: limit rows, live leases counted from
// the claimed rows (an index range, items_live_key), and the first item of
// each key group of a project (a seek per group: items_*_key).

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/sqlite/engine.hpp"
#include "storage/sqlite/row_codec.hpp"

namespace cplane::storage::sqlite {

std::optional<LimitRow> SqliteBackend::find_limit(std::string_view key) {
  auto& s = stmts_.find_limit.bind(key);
  std::optional<LimitRow> out;
  if (s.step()) out = read_limit(s);
  s.reset();
  return out;
}

void SqliteBackend::put_limit(const LimitRow& l) {
  stmts_.put_limit
      .bind(l.key, static_cast<std::int64_t>(l.concurrency), static_cast<std::int64_t>(l.rate_count),
            l.rate_period, static_cast<std::int64_t>(l.burst), l.tat,
            static_cast<std::int64_t>(l.removed ? 1 : 0), l.created_at, l.updated_at, l.last_seq)
      .run();
}

void SqliteBackend::delete_limit(std::string_view key) {
  Statement s(db_, "DELETE FROM limits WHERE key = ?1");
  s.bind(key).run();
}

std::int64_t SqliteBackend::live_leases(std::string_view key, Micros now) {
  auto& s = stmts_.live_leases.bind(key, now);
  const std::int64_t n = s.step() ? s.i64(0) : 0;
  s.reset();
  return n;
}

std::vector<ItemRow> SqliteBackend::key_holders(std::string_view key, Micros now,
                                                std::size_t limit) {
  Statement s(db_, fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND "
                               "concurrency_key = ?1 AND concurrency_key <> '' AND "
                               "lease_expires_at > ?2 ORDER BY lease_expires_at, item_id LIMIT ?3",
                               kItemColumns)
                       .c_str());
  s.bind(key, now, static_cast<std::int64_t>(limit));
  std::vector<ItemRow> out;
  while (s.step()) out.push_back(read_item(s));
  return out;
}

std::vector<ItemRow> SqliteBackend::key_heads(const std::string& project_id, ItemStatus status,
                                              std::size_t limit) {
  key_group_order(status);  // refuses another status
  const int i = status == ItemStatus::ready ? 0 : status == ItemStatus::scheduled ? 1 : 2;
  // The next key after the last one: one seek on items_*_key each, with
  // statements prepared once per connection.
  Statement& first = stmts_.key_first[i];
  Statement& next = stmts_.key_next[i];
  Statement& head = stmts_.key_head[i];
  std::vector<ItemRow> out;
  first.bind(project_id);
  const bool any = first.step() && first.type(0) != SQLITE_NULL;
  std::string key = any ? first.text(0) : std::string();
  first.reset();
  if (!any) return out;
  while (out.size() < limit) {
    head.bind(project_id, key);
    if (head.step()) out.push_back(read_item(head));
    head.reset();
    next.bind(project_id, key);
    const bool more = next.step();
    if (more) key = next.text(0);
    next.reset();
    if (!more) break;
  }
  return out;
}

std::int64_t SqliteBackend::ready_ahead(const ItemRow& row) {
  Statement s(db_, "SELECT count(*) FROM items WHERE status = 'ready' AND project_id = ?1 AND "
                   "(priority > ?2 OR (priority = ?2 AND queued_seq < ?3))");
  s.bind(row.project_id, static_cast<std::int64_t>(row.priority), row.queued_seq);
  return s.step() ? s.i64(0) : 0;
}

}  // namespace cplane::storage::sqlite
