// The PostgreSQL engine's flow control: limit rows (locked by a writing
// transaction, so that claims of one key take turns), live leases counted
// from the claimed rows, and the first item of each key group (a loose
// index scan: one index seek per group, in one round trip).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/rows.hpp"

namespace cplane::storage::postgres {

std::optional<LimitRow> PostgresBackend::find_limit(std::string_view key) {
  // A writing transaction that meets a key takes one advisory lock for all
  // limits, once: two claims of keyed items take turns here, and the second
  // counts the first's lease once it committed (READ COMMITTED reads what
  // committed before each statement). One lock, not a row lock per key: a
  // claim meets its keys in no fixed order, and row locks taken in two
  // orders deadlock.
  if (writing_ && !limits_locked_) {
    run("SELECT pg_advisory_xact_lock(hashtext('cplane:limits:' || current_schema()))");
    limits_locked_ = true;
  }
  Result r = run(fmt::format("SELECT {} FROM limits WHERE key = $1", kLimitColumns),
                 Params().text(key));
  if (r.rows() == 0) return std::nullopt;
  return read_limit(r, 0);
}

void PostgresBackend::put_limit(const LimitRow& l) {
  run(fmt::format("INSERT INTO limits ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
                  "ON CONFLICT (key) DO UPDATE SET concurrency = EXCLUDED.concurrency, "
                  "rate_count = EXCLUDED.rate_count, rate_period = EXCLUDED.rate_period, "
                  "burst = EXCLUDED.burst, tat = EXCLUDED.tat, removed = EXCLUDED.removed, "
                  "created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, "
                  "last_seq = EXCLUDED.last_seq",
                  kLimitColumns),
      Params()
          .text(l.key)
          .i64(l.concurrency)
          .i64(l.rate_count)
          .i64(l.rate_period)
          .i64(l.burst)
          .i64(l.tat)
          .text(l.removed ? "true" : "false")
          .i64(l.created_at)
          .i64(l.updated_at)
          .i64(l.last_seq));
}

std::unique_ptr<Cursor<LimitRow>> PostgresBackend::scan_limits() {
  return cursor<LimitRow>(fmt::format("SELECT {} FROM limits ORDER BY key", kLimitColumns),
                          Params(),
                          [](const Result& r, int i, LimitRow& row) { row = read_limit(r, i); });
}

void PostgresBackend::delete_limit(std::string_view key) {
  run("DELETE FROM limits WHERE key = $1", Params().text(key));
}

std::int64_t PostgresBackend::live_leases(std::string_view key, Micros now) {
  Result r = run("SELECT count(*) FROM items WHERE status = 'claimed' AND concurrency_key = $1 "
                 "AND concurrency_key <> '' AND lease_expires_at > $2",
                 Params().text(key).i64(now));
  return r.i64(0, 0);
}

std::vector<ItemRow> PostgresBackend::key_holders(std::string_view key, Micros now,
                                                  std::size_t limit) {
  Result r = run(fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND concurrency_key = "
                             "$1 AND concurrency_key <> '' AND lease_expires_at > $2 ORDER BY "
                             "lease_expires_at, item_id LIMIT $3",
                             kItemColumns),
                 Params().text(key).i64(now).i64(static_cast<std::int64_t>(limit)));
  std::vector<ItemRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
  return out;
}

std::vector<ItemRow> PostgresBackend::key_heads(const std::string& project_id, ItemStatus status,
                                                std::size_t limit) {
  const char* order = key_group_order(status);
  const std::string where =
      fmt::format("status = '{}' AND project_id = $1", to_string(status));
  // The distinct keys by a loose index scan (each step one seek past the
  // last key), then each group's first in its order.
  Result r = run(
      fmt::format("WITH RECURSIVE k(key) AS ("
                  "(SELECT concurrency_key FROM items WHERE {0} ORDER BY concurrency_key LIMIT 1) "
                  "UNION ALL SELECT (SELECT concurrency_key FROM items WHERE {0} AND "
                  "concurrency_key > k.key ORDER BY concurrency_key LIMIT 1) FROM k WHERE k.key "
                  "IS NOT NULL) "
                  "SELECT h.* FROM (SELECT key FROM k WHERE key IS NOT NULL LIMIT $2) g CROSS "
                  "JOIN LATERAL (SELECT {1} FROM items WHERE {0} AND concurrency_key = g.key "
                  "ORDER BY {2} LIMIT 1{3}) h ORDER BY h.concurrency_key",
                  where, kItemColumns, order, claim_lock()),
      Params().text(project_id).i64(static_cast<std::int64_t>(limit)));
  std::vector<ItemRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
  return out;
}

std::int64_t PostgresBackend::ready_ahead(const ItemRow& row) {
  Result r = run("SELECT count(*) FROM items WHERE status = 'ready' AND project_id = $1 AND "
                 "(priority > $2 OR (priority = $2 AND queued_seq < $3))",
                 Params().text(row.project_id).i64(row.priority).i64(row.queued_seq));
  return r.i64(0, 0);
}

}  // namespace cplane::storage::postgres
