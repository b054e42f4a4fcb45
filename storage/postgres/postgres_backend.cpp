// The PostgreSQL backend's life: opening a store, its transactions (the
// server's clock read with BEGIN, the log digest's shard and NOTIFY sent
// with COMMIT), and waiting for work. The schema is in schema.hpp, the
// class and how it meets the contract in internal.hpp.

#include "storage/postgres/postgres_backend.hpp"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/rows.hpp"

namespace cplane::storage::postgres {

PostgresBackend::PostgresBackend(const std::string& url, const OpenOptions& options)
    : url_(url), options_(options) {
  connect();
  identify_or_create();
}

PostgresBackend::~PostgresBackend() {
  PQfinish(conn_);
}

void PostgresBackend::begin_write(Sync sync) {
  if (options_.read_only) {
    throw InvalidArgument(InvalidArgument::Reason::read_only,
                          fmt::format("{} was opened for reading: it cannot write",
                                      redacted_url(url_)));
  }
  ensure_connected();
  // Every commit waits for its WAL flush (synchronous_commit = on, the
  // server's default), whatever `sync` asks: an asynchronous commit is
  // lost by a crash of the server, not only by a power loss (it found
  // acknowledged finishes gone after a SIGKILL of the postmaster), which
  // is weaker than Sync::normal promises.
  (void)sync;
  // The earliest active schedule's time comes with the clock (a seek on
  // schedules_due), so that a command's look for due schedules needs no
  // round trip of its own when none is due (due_schedules).
  static const std::string kClock =
      "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now_us, "
      "(SELECT min(next_at) FROM schedules WHERE NOT paused AND NOT removed) AS next_at";
  // With what the command reads first (expect_first_read), taken without
  // waiting, before the clock's columns: the same round trip. The claim's
  // candidates are judged at this clock.
  static const std::string kClockAndItem =
      fmt::format("SELECT t.*, c.* FROM ({}) c, ({}) t", kClock, item_taken_sql("$1"));
  static const std::string kClockAndCandidates = fmt::format(
      "WITH c AS MATERIALIZED ({}) SELECT k.*, c.* FROM c LEFT JOIN LATERAL ({}) k ON true",
      kClock, candidates_sql("c.now_us", "$1", "$2"));
  prefetched_.reset();
  // Consumed here, before anything can fail: a flag left over would make
  // an unrelated transaction wait.
  wait_for_rows_ = std::exchange(wait_next_attempt_, false);
  const char* begin_sql = "BEGIN ISOLATION LEVEL READ COMMITTED";
  int clock = 0;
  Result r;
  if (expected_.claim) {
    Params params;
    if (expected_.actor) {
      params.text(*expected_.actor);
    } else {
      params.null();
    }
    params.i64(static_cast<std::int64_t>(expected_.want));
    clock = kItemColumnCount + 1;
    r = begin(begin_sql, kClockAndCandidates, params, clock);
    prefetched_ = Prefetched{expected_, {}, false, candidate_lists(r, expected_.want)};
  } else if (!expected_.item_id.empty()) {
    clock = kItemColumnCount + 1;
    r = begin(begin_sql, kClockAndItem, Params().text(expected_.item_id), clock);
    prefetched_ = Prefetched{expected_,
                             r.null(0, 0) ? std::nullopt : std::optional<ItemRow>(read_item(r, 0)),
                             r.text(0, kItemColumnCount) == "t", {}};
  } else {
    r = begin(begin_sql, kClock, {}, clock);
  }
  earliest_schedule_ = EarliestSchedule{r.null(0, clock + 1) ? std::nullopt
                                                             : std::optional<Micros>(r.i64(0, clock + 1))};
  writing_ = true;
  limits_locked_ = false;
}

void PostgresBackend::begin_read() {
  ensure_connected();
  prefetched_.reset();
  begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
        "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint", {}, 0);
  writing_ = false;
}

Result PostgresBackend::begin(const char* begin_sql, const std::string& clock_sql,
                              const Params& clock_params, int clock_column) {
  // BEGIN and the clock's statement, both prepared once per connection, in
  // one pipeline: one round trip, and no parse or plan of the clock's
  // subquery at every transaction (a simple query is planned each time).
  const auto start = std::chrono::steady_clock::now();
  end_left_transaction();
  const auto attempt = [&] {
    deferred_.clear();
    updates_.clear();
    defer(begin_sql, {});
    return run(clock_sql, clock_params);
  };
  Result r;
  try {
    try {
      r = attempt();
    } catch (const StorageError& e) {
      // A connection that broke while idle (the server restarted, or
      // crashed: then libpq still says CONNECTION_OK until a read fails,
      // and only the send's failure tells): one reconnect, then the
      // transaction once more.
      if (PQstatus(conn_) == CONNECTION_OK && e.category() != Category::unavailable) throw;
      connect();
      r = attempt();
    }
  } catch (const std::exception&) {
    deferred_.clear();
    updates_.clear();
    if (PQstatus(conn_) == CONNECTION_OK) PQclear(PQexec(conn_, "ROLLBACK"));
    throw;
  }
  // The link's round trip, which locking() allows a read beside its 50 ms:
  // a BEGIN that also read (expect_first_read) took the read's time too,
  // so it only lowers the figure.
  const auto took = std::chrono::steady_clock::now() - start;
  if (clock_params.size() == 0 || took < begin_round_trip_) begin_round_trip_ = took;
  tx_now_ = r.i64(0, clock_column);
  delta_.reset();
  deferred_.clear();
  announce_ = false;
  earliest_schedule_.reset();
  return r;
}

void PostgresBackend::end_left_transaction() noexcept {
  // A failure can leave the connection in pipeline mode or inside an
  // aborted transaction (an adversarial run: after a commit that failed on
  // a lock timeout with 40 writers, the next BEGIN met "current transaction
  // is aborted", and the worker died). Both are ended before a new
  // transaction: ROLLBACK, and a connection still in pipeline mode or that
  // cannot roll back is replaced by a new one.
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK) return;
  bool sound = PQpipelineStatus(conn_) == PQ_PIPELINE_OFF;
  if (sound && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
    PQclear(PQexec(conn_, "ROLLBACK"));
    sound = PQtransactionStatus(conn_) == PQTRANS_IDLE;
  }
  if (sound) return;
  try {
    connect();
  } catch (const std::exception&) {
    // The BEGIN that follows fails unavailable, and reconnects once.
  }
}

void PostgresBackend::commit() {
  prefetched_.reset();
  earliest_schedule_.reset();
  std::vector<std::string> tail;
  const bool appended = delta_.has_value();
  if (delta_) {
    // The shard: this connection's own when it is free, else the next free
    // one in ring order, else its own (then the commit waits for it). It is
    // chosen in a materialized CTE before the UPDATE: chosen in the
    // UPDATE's own WHERE, a commit that found every shard held and waited
    // for its own updated no row when the holder committed (an adversarial
    // run: 31-37 of 100 clients failed), and read as a missing digest.
    // The own shard must be there (created with the schema): a digest row
    // deleted behind cplane's back stops every writer whose shard it is,
    // as on SQLite (sqrt(-1) when the UPDATE finds no row), rather than
    // passing it by. Its own shard is looked up by its key first: the walk
    // over every shard visits each row's dead versions too (the table is
    // updated at every commit): 16 against 35 us per commit. Prepared once
    // per connection and sent with the commit's pipeline.
    const auto w = hash_words(delta_->digest);
    defer("WITH s AS MATERIALIZED (SELECT CASE WHEN EXISTS (SELECT 1 FROM log_digest WHERE "
          "shard = $1) THEN coalesce((SELECT shard FROM log_digest WHERE shard = $1 FOR UPDATE "
          "SKIP LOCKED), (SELECT shard FROM log_digest ORDER BY (shard + 64 - $1) % 64 LIMIT 1 "
          "FOR UPDATE SKIP LOCKED), $1) END AS shard), "
          "u AS (UPDATE log_digest AS d SET events = events + $2, "
          "last_seq = greatest(last_seq, $3), d0 = d0 # $4, d1 = d1 # $5, d2 = d2 # $6, "
          "d3 = d3 # $7 FROM s WHERE d.shard = s.shard RETURNING 1) "
          "SELECT sqrt((SELECT count(*) FROM u) - 1)",
          Params()
              .i64(shard_)
              .i64(delta_->events)
              .i64(delta_->last_seq)
              .i64(w[0])
              .i64(w[1])
              .i64(w[2])
              .i64(w[3]));
    delta_.reset();
  }
  if (announce_) tail.emplace_back("SELECT pg_notify('cplane_work', current_schema())");
  // A commit that appended wakes the log's followers (tail --follow), when
  // there are any. Not from inside the transaction: PostgreSQL serialises
  // the commits of notifying transactions under one lock held through the
  // commit's WAL flush, which cost a 16-worker drain 3.5x with a NOTIFY in
  // every commit (and 3x at one per 50 ms per connection). So the notice
  // is a transaction of its own after the commit (no WAL to flush: the lock
  // is held for microseconds), at most every kNoticeGap per connection; a
  // commit left unannounced is found by the next notice of any writer or by
  // the follower's look once a second. One that notifies for work pays the
  // lock already, and tells the followers in the same breath.
  bool notice_after = false;
  if (appended && announce_) {
    tail.emplace_back("SELECT pg_notify('cplane_log', current_schema())");
  } else if (appended && followed() &&
             std::chrono::steady_clock::now() - last_notice_ >= kNoticeGap) {
    last_notice_ = std::chrono::steady_clock::now();
    notice_after = true;
  }
  announce_ = false;
  tail.emplace_back("COMMIT");
  Result r;
  try {
    r = pipeline(tail);
  } catch (const Conflict&) {
    PQclear(PQexec(conn_, "ROLLBACK"));
    throw;
  } catch (const InternalError&) {  // the server's own bug (class XX)
    PQclear(PQexec(conn_, "ROLLBACK"));
    throw;
  } catch (const InvalidArgument&) {  // text the server's encoding refuses
    PQclear(PQexec(conn_, "ROLLBACK"));
    throw;
  } catch (const StorageError& e) {
    if (PQstatus(conn_) != CONNECTION_OK || e.category() == Category::unavailable) {
      // Without the hint an unavailable error carries ("did not commit:
      // retry"), which is what cannot be known here.
      std::string cause = e.what();
      if (const auto hint = cause.find(" (the connection to PostgreSQL was lost;");
          hint != std::string::npos) {
        cause.resize(hint);
      }
      throw StorageError(Category::commit_unknown,
                         fmt::format("commit outcome unknown: the connection to PostgreSQL was "
                                     "lost during COMMIT ({}); do not retry blindly: read the "
                                     "item's events to see whether it happened",
                                     cause));
    }
    PQclear(PQexec(conn_, "ROLLBACK"));  // a digest shard missing is corruption (pipeline)
    throw;
  }
  if (r.get() == nullptr || std::strcmp(PQcmdStatus(r.get()), "COMMIT") != 0) {
    throw StorageError(Category::io, "the transaction failed and was rolled back");
  }
  // Best effort: a notice lost is a follower's wait of at most a second.
  if (notice_after) {
    ++round_trips_;
    PQclear(PQexec(conn_, "SELECT pg_notify('cplane_log', current_schema())"));
  }
}

void PostgresBackend::rollback() noexcept {
  prefetched_.reset();
  delta_.reset();
  earliest_schedule_.reset();
  deferred_.clear();
  updates_.clear();
  announce_ = false;
  writing_ = false;
  if (PQstatus(conn_) != CONNECTION_OK) return;
  if (PQtransactionStatus(conn_) == PQTRANS_IDLE) return;
  PQclear(PQexec(conn_, "ROLLBACK"));
}

Micros PostgresBackend::now() {
  if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_INTRANS) {
    return tx_now_;
  }
  ensure_connected();
  Result r = simple("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint",
                    "cannot read the server's clock");
  return r.i64(0, 0);
}

// Whether a follower of the log (wait_for_commit) holds its shared advisory
// lock in this schema: looked up at most once a second per connection, so a
// new follower is told of commits within a second (and looks once a second
// meanwhile: nothing is missed, only later).
bool PostgresBackend::followed() {
  const auto now = std::chrono::steady_clock::now();
  if (now - followers_checked_ < std::chrono::seconds(1)) return followers_;
  followers_checked_ = now;
  followers_ = run("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND "
                   "classid = $1::oid AND objid = (hashtext(current_schema()) & 2147483647)::oid "
                   "AND objsubid = 2)",
                   Params().i64(kFollowerLockClass))
                   .text(0, 0) == "t";
  return followers_;
}

void PostgresBackend::wait_for_work(std::chrono::steady_clock::time_point deadline) {
  wait_for_notice("cplane_work", listening_, deadline);
}

// A NOTIFY on `channel` naming this schema, or the deadline. The first call
// only starts listening: the caller looks once more, as something may have
// come before LISTEN.
void PostgresBackend::wait_for_notice(const char* channel, bool& listening,
                                      std::chrono::steady_clock::time_point deadline) {
  ensure_connected();
  if (!listening) {
    simple(fmt::format("LISTEN {}", channel).c_str(), "cannot listen for commits");
    listening = true;
    return;
  }
  for (;;) {
    if (PQconsumeInput(conn_) == 0) {
      throw StorageError(Category::unavailable,
                         fmt::format("lost the connection to PostgreSQL while waiting for work: {}",
                                     trimmed(PQerrorMessage(conn_))));
    }
    bool woken = false;
    while (PGnotify* n = PQnotifies(conn_)) {
      woken = woken || (schema_ == n->extra && std::strcmp(n->relname, channel) == 0);
      PQfreemem(n);
    }
    if (woken) return;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd p{PQsocket(conn_), POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
    if (rc < 0 && errno != EINTR) {
      throw StorageError(Category::io, fmt::format("poll failed: {}", std::strerror(errno)));
    }
  }
}

}  // namespace cplane::storage::postgres

namespace cplane::storage {

std::unique_ptr<Backend> open_postgres(const std::string& url, const OpenOptions& options) {
  return std::make_unique<postgres::PostgresBackend>(url, options);
}

}  // namespace cplane::storage
