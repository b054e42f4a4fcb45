// The PostgreSQL engine's items: locking reads, deferred writes, and the
// claim's candidates (FOR UPDATE SKIP LOCKED).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/rows.hpp"

namespace cplane::storage::postgres {

std::optional<ItemRow> PostgresBackend::one_item(const Result& r) {
  if (r.rows() == 0) return std::nullopt;
  return read_item(r, 0);
}

std::string item_taken_sql(std::string_view item_id) {
  return fmt::format(
      "SELECT i.*, i.item_id IS NULL AND EXISTS (SELECT 1 FROM items WHERE item_id = {0}) FROM "
      "(SELECT 1) x LEFT JOIN LATERAL (SELECT {1} FROM items WHERE item_id = {0} FOR UPDATE SKIP "
      "LOCKED) i ON true",
      item_id, kItemColumns);
}

std::optional<ItemRow> PostgresBackend::find_item(std::string_view item_id) {
  // (Taking the item's head and a seq in this statement saved a finish a
  // round trip, but a refused report then moved the sequence, so log_end
  // grew on a refusal: left out.)
  static const std::string sql =
      fmt::format("SELECT {} FROM items WHERE item_id = $1", kItemColumns);
  if (writing_ && !wait_for_rows_) {
    // Taken without waiting, with the BEGIN (expect_first_read) or here;
    // held by another: read again below, waiting (timed by locking()).
    std::optional<ItemRow> row;
    bool held = false;
    if (prefetched_ && !prefetched_->claim && prefetched_->item_id == item_id) {
      row = std::move(prefetched_->row);
      held = prefetched_->held;
      prefetched_.reset();
    } else {
      static const std::string kTake = item_taken_sql("$1");
      Result r = run(kTake, Params().text(item_id));
      if (!r.null(0, 0)) row = read_item(r, 0);
      held = r.text(0, kItemColumnCount) == "t";
    }
    if (row || !held) return row;
  }
  return one_item(locking([&] { return run(sql + lock(), Params().text(item_id)); }));
}

std::vector<std::optional<ItemRow>> PostgresBackend::find_items(
    const std::vector<std::string>& item_ids) {
  static const std::string sql = fmt::format(
      "SELECT {} FROM items WHERE item_id = ANY($1::text[]) ORDER BY item_id", kItemColumns);
  const std::string ids = array_literal(item_ids);
  std::optional<Result> r;
  if (writing_ && !wait_for_rows_) {
    // Taken without waiting, and read: one statement when every row is
    // there and free (a finish's own items). Fewer rows: those missing
    // (an enqueue's new ids), or held by another, as the count without
    // locks tells. (A claim that met a row as another claim took it holds
    // that row until it ends, whatever it returns.) Held: the command runs
    // again and waits for them all in id order; waiting here, holding the
    // rest, two batches of the same items deadlocked (1 s each).
    r = run(sql + " FOR UPDATE SKIP LOCKED", Params().text(ids));
    if (r->rows() != static_cast<int>(item_ids.size()) &&
        run("SELECT count(*) FROM items WHERE item_id = ANY($1::text[])", Params().text(ids))
                .i64(0, 0) != r->rows()) {
      wait_next_attempt_ = true;
      throw Conflict("another transaction holds some of these items: deciding again, waiting");
    }
  } else if (writing_) {
    // Locked in id order, waiting (the wait timed by locking()), by a read
    // of their ids alone (a batch of payloads near the 1 MiB limit is a
    // read of many megabytes, whose transfer is no wait on another's
    // lock); then read.
    wait_next_attempt_ = true;  // given up on (Conflict): the next attempt waits too
    locking([&] { return run("SELECT item_id" + sql.substr(sql.find(" FROM")) + " FOR UPDATE",
                             Params().text(ids)); });
    wait_next_attempt_ = false;
  }
  if (!r) r = run(sql, Params().text(ids));
  std::vector<std::optional<ItemRow>> out(item_ids.size());
  for (int i = 0; i < r->rows(); ++i) {
    ItemRow row = read_item(*r, i);
    for (std::size_t k = 0; k < item_ids.size(); ++k) {
      if (item_ids[k] == row.item_id) out[k] = row;
    }
  }
  return out;
}

std::optional<ItemRow> PostgresBackend::find_item_by_key(const std::string& project_id,
                                                         std::string_view key) {
  return one_item(run(fmt::format("SELECT {} FROM items WHERE project_id = $1 AND idem_key = $2{}",
                                  kItemColumns, lock()),
                      Params().text(project_id).text(key)));
}

void PostgresBackend::insert_item(const ItemRow& r) {
  defer(fmt::format("INSERT INTO items ({}) VALUES ({})", kItemColumns, kItemValues),
        item_params(r));
}

void PostgresBackend::put_item(const ItemRow& r) {
  defer(fmt::format("INSERT INTO items ({}) VALUES ({}) ON CONFLICT (item_id) DO UPDATE SET {}",
                    kItemColumns, kItemValues, kItemUpdate),
        item_params(r));
}

void PostgresBackend::update_item(const ItemRow& r) {
  prefetched_.reset();  // a row read after this write must be read again
  // The row is held (FOR UPDATE) since the command read it, so it is
  // there: a plain UPDATE, without the upsert's speculative insertion and
  // its probe of the primary key. Held back until the next statement, so
  // that a run of them is one statement.
  updates_.push_back(item_params(r));
}

void PostgresBackend::defer_updates() {
  if (updates_.empty()) return;
  std::vector<Params> rows;
  rows.swap(updates_);
  for (auto& run : runs_of(std::move(rows), kRunBytes)) defer_update_run(std::move(run));
}

void PostgresBackend::defer_update_run(std::vector<Params> rows) {
  if (rows.size() == 1) {
    defer(fmt::format("UPDATE items SET {} WHERE item_id = $1", kItemSet), std::move(rows[0]));
    return;
  }
  // kItemColumns' types, in order.
  static const std::string kBatch = fmt::format(
      "UPDATE items AS i SET ({0}) = ({1}) FROM unnest($1::text[], $2::text[], $3::text[], "
      "$4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], "
      "$10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[], $15::text[], "
      "$16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[], "
      "$22::text[], $23::bigint[], $24::integer[], $25::bigint[], $26::text[], $27::text[], "
      "$28::bigint[], $29::text[], $30::bigint[], $31::bigint[], $32::bigint[], $33::text[]) "
      "AS u({2}) WHERE i.item_id = u.item_id COLLATE \"C\"",
      kItemColumns + std::string_view("item_id, ").size(), [] {
        std::string out;  // u.project_id, ..., u.concurrency_key: all but the id
        std::string_view rest = kItemColumns + std::string_view("item_id, ").size();
        while (!rest.empty()) {
          const auto comma = rest.find(", ");
          out += out.empty() ? "u." : ", u.";
          out += rest.substr(0, comma);
          rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 2);
        }
        return out;
      }(),
      kItemColumns);
  Params batch;
  for (int c = 0; c < kItemColumnCount; ++c) batch.text(column_array(rows, c));
  defer(kBatch, std::move(batch));
}

void PostgresBackend::delete_item(std::string_view item_id) {
  // Sent with the next statement (every read flushes what waits first).
  defer("DELETE FROM items WHERE item_id = $1", Params().text(item_id));
}

std::optional<ItemRow> PostgresBackend::oldest_ready(const std::string& project_id) {
  return one_item(run(fmt::format("SELECT {} FROM items WHERE status = 'ready' AND project_id = "
                                  "$1 ORDER BY priority DESC, queued_seq LIMIT 1{}",
                                  kItemColumns, claim_lock()),
                      Params().text(project_id)));
}

std::optional<ItemRow> PostgresBackend::earliest_lapsed(Micros now, const std::string& project_id) {
  return one_item(run(fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id "
                                  "= $1 AND lease_expires_at <= $2 ORDER BY lease_expires_at, "
                                  "queued_seq LIMIT 1{}",
                                  kItemColumns, claim_lock()),
                      Params().text(project_id).i64(now)));
}

std::optional<ItemRow> PostgresBackend::earliest_due(Micros now, const std::string& project_id) {
  return one_item(run(fmt::format("SELECT {} FROM items WHERE status = 'scheduled' AND "
                                  "project_id = $1 AND run_at <= $2 ORDER BY run_at, "
                                  "queued_seq LIMIT 1{}",
                                  kItemColumns, claim_lock()),
                      Params().text(project_id).i64(now)));
}

std::vector<std::string> PostgresBackend::claimable_project_ids(const std::string* actor) {
  Result r = actor == nullptr
                 ? run("SELECT project_id FROM projects WHERE NOT paused ORDER BY project_id")
                 : run("SELECT a.project_id FROM project_actors a JOIN projects p ON "
                       "p.project_id = a.project_id WHERE a.actor = $1 AND NOT p.paused "
                       "ORDER BY a.project_id",
                       Params().text(*actor));
  std::vector<std::string> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
  return out;
}

std::vector<ItemRow> PostgresBackend::items_in_status(const std::string& project_id,
                                                      ItemStatus status, std::size_t limit) {
  Result r = run(fmt::format("SELECT {} FROM items WHERE project_id = $1 AND status = '{}' "
                             "ORDER BY {} LIMIT $2{}",
                             kItemColumns, to_string(status), status_order(status), lock()),
                 Params().text(project_id).i64(static_cast<std::int64_t>(limit)));
  std::vector<ItemRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
  return out;
}

std::string candidates_sql(std::string_view now, std::string_view actor, std::string_view limit) {
  const std::string ready = fmt::format(
      "SELECT {} FROM items WHERE status = 'ready' AND project_id = p.project_id ORDER BY "
      "priority DESC, queued_seq LIMIT {} FOR UPDATE SKIP LOCKED",
      kItemColumns, limit);
  const std::string lapsed = fmt::format(
      "SELECT {} FROM items WHERE status = 'claimed' AND project_id = p.project_id AND "
      "lease_expires_at <= {} ORDER BY lease_expires_at, queued_seq LIMIT {} FOR UPDATE "
      "SKIP LOCKED",
      kItemColumns, now, limit);
  const std::string due = fmt::format(
      "SELECT {} FROM items WHERE status = 'scheduled' AND project_id = p.project_id AND "
      "run_at <= {} ORDER BY run_at, queued_seq LIMIT {} FOR UPDATE SKIP LOCKED",
      kItemColumns, now, limit);
  return fmt::format(
      "WITH p AS (SELECT project_id FROM projects WHERE {0}::text IS NULL AND NOT paused "
      "UNION ALL SELECT a.project_id FROM project_actors a JOIN projects j ON j.project_id = "
      "a.project_id WHERE a.actor = {0}::text AND NOT j.paused) "
      "SELECT r.*, 'r' || p.project_id FROM p CROSS JOIN LATERAL ({1}) r UNION ALL "
      "SELECT l.*, 'l' || p.project_id FROM p CROSS JOIN LATERAL ({2}) l UNION ALL "
      "SELECT d.*, 'd' || p.project_id FROM p CROSS JOIN LATERAL ({3}) d",
      actor, ready, lapsed, due);
}

std::vector<Backend::CandidateList> candidate_lists(const Result& r, std::size_t limit) {
  std::vector<Backend::CandidateList> out;
  std::string list;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.null(i, kItemColumnCount)) continue;  // none, beside the BEGIN's clock
    std::string key = r.text(i, kItemColumnCount);  // the list's tag, after the row
    if (out.empty() || key != list) {
      out.emplace_back();
      list = std::move(key);
    }
    out.back().rows.push_back(read_item(r, i));
  }
  for (auto& l : out) l.more = l.rows.size() >= limit;
  return out;
}

std::vector<Backend::CandidateList> PostgresBackend::claim_candidates(Micros now,
                                                                      const std::string* actor,
                                                                      std::size_t limit) {
  if (!writing_) return Backend::claim_candidates(now, actor, limit);
  if (prefetched_ && prefetched_->claim && now == tx_now_ && limit == prefetched_->want &&
      (actor == nullptr ? !prefetched_->actor : prefetched_->actor == *actor)) {
    auto lists = std::move(prefetched_->lists);  // read with the BEGIN (expect_first_read)
    prefetched_.reset();
    return lists;
  }
  static const std::string kSql = candidates_sql("$1", "$2", "$3");
  Params params;
  params.i64(now);
  if (actor != nullptr) {
    params.text(*actor);
  } else {
    params.null();
  }
  params.i64(static_cast<std::int64_t>(limit));
  return candidate_lists(run(kSql, std::move(params)), limit);
}

std::vector<ItemRow> PostgresBackend::lapsed_items(Micros now, const std::string& project_id) {
  Result r = run(fmt::format("SELECT {} FROM items WHERE status = 'claimed' AND project_id = $1 "
                             "AND lease_expires_at <= $2 ORDER BY lease_expires_at, queued_seq{}",
                             kItemColumns, claim_lock()),
                 Params().text(project_id).i64(now));
  std::vector<ItemRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
  return out;
}

std::optional<Micros> PostgresBackend::next_lapse(const std::string& project_id) {
  Result r = run("SELECT least((SELECT min(lease_expires_at) FROM items WHERE status = "
                 "'claimed' AND project_id = $1), (SELECT min(run_at) FROM items WHERE status "
                 "= 'scheduled' AND project_id = $1))",
                 Params().text(project_id));
  if (r.null(0, 0)) return std::nullopt;
  return r.i64(0, 0);
}

std::unique_ptr<Cursor<ScannedItem>> PostgresBackend::scan_items() {
  return cursor<ScannedItem>(fmt::format("SELECT {} FROM items ORDER BY item_id", kItemColumns),
                             Params(), fill_item);
}

std::unique_ptr<Cursor<ItemRow>> PostgresBackend::scan_allocatable(const std::string& project_id) {
  return cursor<ItemRow>(
      fmt::format("SELECT {} FROM items WHERE project_id = $1 AND status IN ('ready', "
                  "'claimed', 'scheduled') ORDER BY (terminal_since IS NOT NULL) DESC, priority DESC, "
                  "queued_seq",
                  kAllocationColumns),
      Params().text(project_id), fill_allocatable);
}

}  // namespace cplane::storage::postgres
