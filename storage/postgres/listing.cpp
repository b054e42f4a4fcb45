// The operator's view on PostgreSQL: the item listing's index walks, and
// the log read as a stream up to what is final.
//
// Seqs come from a sequence, drawn inside each writer's transaction, so
// they commit out of order: a reader can see seq 11 committed while 10 is
// still to come. A tail that resumed after 11 would skip 10 for ever. So a
// read first takes M, the sequence's newest value, then the transactions
// still writing the log (those holding a writer's lock on stream_heads,
// taken before any seq is drawn), waits until they end, and only then
// reads the events after the cursor up to M: every seq up to M was drawn
// before M was read, by a transaction that has now committed or aborted.
#include <thread>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/rows.hpp"

namespace cplane::storage::postgres {

namespace {

// How long a read waits for the log's writers to end before it says so:
// a writer stopped mid-transaction holds back what is final.
constexpr auto kWriterWait = std::chrono::seconds(5);

}  // namespace

std::vector<ItemRow> PostgresBackend::list_items(const ItemListing& q) {
  Params p;
  p.text(to_string(q.status));
  std::string where = "status = $1";
  int n = 1;
  auto add = [&](const char* column, std::string_view value) {
    where += fmt::format(" AND {} = ${}", column, ++n);
    p.text(value);
  };
  if (q.project_id != nullptr) add("project_id", *q.project_id);
  if (q.owner != nullptr) add("owner", *q.owner);
  if (q.session != nullptr) add("session", *q.session);
  if (q.idem_key != nullptr) add("idem_key", *q.idem_key);
  if (q.concurrency_key != nullptr) add("concurrency_key", *q.concurrency_key);
  if (q.kind) add("kind", to_string(*q.kind));
  if (q.beyond) {
    where += fmt::format(" AND queued_seq {} ${}", q.newest_first ? "<" : ">", ++n);
    p.i64(*q.beyond);
  }
  p.i64(static_cast<std::int64_t>(q.limit));
  Result r = run(fmt::format("SELECT {} FROM items WHERE {} ORDER BY queued_seq {} LIMIT ${}",
                             kItemColumns, where, q.newest_first ? "DESC" : "ASC", n + 1),
                 std::move(p));
  std::vector<ItemRow> out;
  for (int i = 0; i < r.rows(); ++i) out.push_back(read_item(r, i));
  return out;
}

Seq PostgresBackend::final_horizon() {
  ensure_connected();
  const Seq horizon =
      run("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM events_seq").i64(0, 0);
  // The transactions writing the log now: a writer's lock on stream_heads
  // (FOR UPDATE or an insert) is taken before its first seq is drawn.
  Result writers = run(
      "SELECT coalesce(array_agg(DISTINCT virtualtransaction)::text, '{}') FROM pg_locks "
      "WHERE locktype = 'relation' AND relation = 'stream_heads'::regclass AND mode IN "
      "('RowShareLock', 'RowExclusiveLock') AND pid <> pg_backend_pid()");
  const std::string in_flight = writers.text(0, 0);
  if (in_flight != "{}") {
    const auto deadline = std::chrono::steady_clock::now() + kWriterWait;
    auto pause = std::chrono::microseconds(200);
    for (;;) {
      Result left = run(
          "SELECT count(*) FROM pg_locks WHERE locktype = 'virtualxid' AND "
          "virtualtransaction = ANY($1::text[])",
          Params().text(in_flight));
      if (left.i64(0, 0) == 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        throw StorageError(Category::busy,
                           fmt::format("the log is not final yet: a transaction that "
                                       "writes it has been open for {} s (a writer stopped "
                                       "mid-command?); read again later",
                                       kWriterWait.count()));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(20000));
    }
  }
  return horizon;
}

std::vector<RawEvent> PostgresBackend::read_final(Seq after, std::size_t max,
                                                  const StreamRef* stream) {
  const Seq horizon = final_horizon();
  if (horizon <= after) return {};
  Params p;
  p.i64(after).i64(horizon).i64(static_cast<std::int64_t>(max));
  std::string where = "seq > $1 AND seq <= $2";
  if (stream != nullptr) {
    where += " AND stream_kind = $4 AND stream_id = $5";
    p.text(to_string(stream->kind)).text(stream->id);
  }
  Result r = run(fmt::format("SELECT {} FROM events WHERE {} ORDER BY seq LIMIT $3",
                             kEventColumns, where),
                 std::move(p));
  std::vector<RawEvent> out(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) fill_event(r, i, out[static_cast<std::size_t>(i)]);
  return out;
}

// A follower says it is there with a shared advisory lock of its session
// (writers NOTIFY cplane_log only while one is: PostgresBackend::followed),
// then LISTENs.
void PostgresBackend::wait_for_commit(std::chrono::steady_clock::time_point deadline) {
  if (!log_listening_) {
    ensure_connected();
    run("SELECT pg_advisory_lock_shared($1::int, hashtext(current_schema()) & 2147483647)",
        Params().i64(kFollowerLockClass));
  }
  wait_for_notice("cplane_log", log_listening_, deadline);
}

}  // namespace cplane::storage::postgres
