// The PostgreSQL engine's connection: connecting, statements prepared once
// per connection, writes deferred to one pipeline, server-side cursors, and
// the one SQLSTATE mapping (throw_for_sqlstate).

#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "storage/postgres/internal.hpp"
#include "storage/postgres/postgres_backend.hpp"
#include "storage/postgres/schema.hpp"

namespace cplane::storage::postgres {

void PostgresBackend::connect() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = PQconnectdb(url_.c_str());
  prepared_.clear();
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    throw StorageError(Category::unavailable,
                       fmt::format("cannot connect to PostgreSQL at {}: {}", redacted_url(url_),
                                   redacted_message(message, url_)));
  }
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  // What cplane reads and promises does not bend to the role's, the
  // database's or the environment's settings: bytea in hex, UTF-8 text,
  // every commit flushed, no statement timeout (a wait is bounded by
  // --lock-timeout, and a timeout would read as a lock's). Every statement
  // is prepared once per connection and its plan kept: the server's custom
  // plans for each execution were about a fifth of its time per item
  // (docs/benchmarks.md). No JIT: a
  // kept plan's estimate grows with the table (the claim's LIMIT is a
  // parameter), and past jit_above_cost every execution compiled its
  // expressions anew, about 0.4 s of server CPU per claim once a store held
  // some 80,000 items.
  PQsetClientEncoding(conn_, "UTF8");
  std::string setup = fmt::format(
      "SET lock_timeout = {}; SET idle_in_transaction_session_timeout = 0; "
      "SET client_min_messages = warning; SET bytea_output = hex; "
      "SET client_encoding = 'UTF8'; SET synchronous_commit = on; "
      "SET default_transaction_isolation = 'read committed'; "
      "SET plan_cache_mode = force_generic_plan; SET jit = off; SET statement_timeout = 0",
      std::max<std::int64_t>(options_.lock_timeout.count(), 1));
  // Nor does an idle session end (PostgreSQL 14 and later): a claim that
  // waits for work is idle on LISTEN for as long as its --wait.
  if (PQserverVersion(conn_) >= 140000) setup += "; SET idle_session_timeout = 0";
  if (options_.read_only) setup += "; SET default_transaction_read_only = on";
  simple(setup.c_str(), "cannot set up the connection");
  shard_ = PQbackendPID(conn_) % kDigestShards;
  listening_ = false;
}

void PostgresBackend::ensure_connected() {
  if (::getpid() != pid_) {  // not the cached pid: _Fork() runs no atfork handler
    throw StorageError(Category::unavailable,
                       "this store was opened in another process (before fork): open a new one");
  }
  if (PQstatus(conn_) == CONNECTION_OK) return;
  connect();
}

[[noreturn]] void PostgresBackend::fail(const PGresult* r, const std::string& what) {
  const std::string state = sqlstate(r);
  last_error_state_ = state;
  std::string message = r != nullptr ? PQresultErrorMessage(r) : "";
  if (message.empty()) message = PQerrorMessage(conn_);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const std::string text = fmt::format("{}: {}", what, message);
  if (state == "25006" && !options_.read_only) {
    // A store opened to write, on a server that refuses writes: not the
    // caller's input (read_only would say it opened the store to read).
    throw StorageError(Category::io,
                       text + " (the server refuses writes: a hot standby, or "
                              "default_transaction_read_only set for this role or database; "
                              "nothing was written)");
  }
  // A connection that is gone says so even where the SQLSTATE does not.
  throw_for_sqlstate(PQstatus(conn_) != CONNECTION_OK ? "08006" : state, text, url_);
}

Result PostgresBackend::simple(const char* sql, const char* what) {
  ++round_trips_;
  Result r(PQexec(conn_, sql));
  const auto status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail(r.get(), what);
  return r;
}

const std::string& PostgresBackend::prepared(const std::string& sql) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    std::string name = fmt::format("s{}", prepared_.size());
    ++round_trips_;
    Result p(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr));
    if (PQresultStatus(p.get()) != PGRES_COMMAND_OK) fail(p.get(), "cannot prepare a statement");
    it = prepared_.emplace(sql, std::move(name)).first;
  }
  return it->second;
}

Result PostgresBackend::run(const std::string& sql, Params params) {
  defer_updates();
  if (!deferred_.empty()) {
    // The writes waiting to be sent, and this statement after them, in one
    // pipeline: one round trip, not two.
    defer(sql, std::move(params));
    return pipeline({});
  }
  const std::string& name = prepared(sql);
  params.finish();
  ++round_trips_;
  Result r(PQexecPrepared(conn_, name.c_str(), params.size(), params.pointers(),
                          params.lengths(), params.formats(), 0));
  const auto status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) fail(r.get(), "statement failed");
  return r;
}

void PostgresBackend::defer(const std::string& sql, Params params) {
  if (writing_) prefetched_.reset();  // a row read after a write must be read again
  defer_updates();  // in the order they were made
  deferred_.push_back(Deferred{prepared(sql), std::move(params)});
  // A long run of writes (a restore's anchors) goes in pipelines of a
  // bounded size, not all at the commit.
  if (deferred_.size() >= kMaxDeferred) pipeline({});
}

Result PostgresBackend::pipeline(const std::vector<std::string>& tail) {
  defer_updates();
  std::vector<Deferred> sending;
  sending.swap(deferred_);
  if (PQenterPipelineMode(conn_) == 0) fail(nullptr, "cannot enter pipeline mode");
  ++round_trips_;
  struct Leave {
    PGconn* conn;
    ~Leave() { PQexitPipelineMode(conn); }
  } leave{conn_};
  bool sent = true;
  for (auto& d : sending) {
    d.params.finish();  // pointers into its values, which have moved since
    sent = sent && PQsendQueryPrepared(conn_, d.name.c_str(), d.params.size(), d.params.pointers(),
                                       d.params.lengths(), d.params.formats(), 0) == 1;
  }
  for (const auto& sql : tail) {
    sent = sent && PQsendQueryParams(conn_, sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  }
  sent = sent && PQpipelineSync(conn_) == 1;
  Result first_error, last;
  const std::size_t queries = sending.size() + tail.size();
  for (std::size_t q = 0; sent && q < queries; ++q) {
    PGresult* raw = PQgetResult(conn_);
    if (raw == nullptr) {
      sent = false;
      break;
    }
    Result r(raw);
    const auto status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
        status != PGRES_PIPELINE_ABORTED && first_error.get() == nullptr) {
      first_error = std::move(r);
    } else if (q + 1 == queries) {
      last = std::move(r);
    }
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);  // the NULL after each
  }
  // The sync point.
  while (sent) {
    PGresult* raw = PQgetResult(conn_);
    if (raw == nullptr) break;
    const bool sync = PQresultStatus(raw) == PGRES_PIPELINE_SYNC;
    PQclear(raw);
    if (sync) break;
  }
  if (!sent) {
    throw StorageError(Category::unavailable,
                       fmt::format("the connection to PostgreSQL was lost: {}",
                                   trimmed(PQerrorMessage(conn_))));
  }
  if (first_error.get() != nullptr) {
    const std::string state = sqlstate(first_error.get());
    last_error_state_ = state;
    const char* constraint = PQresultErrorField(first_error.get(), PG_DIAG_CONSTRAINT_NAME);
    if (state == "22012") {
      throw Conflict("a stream was appended to by another transaction meanwhile");
    }
    if (state == "2201F") {  // sqrt(-1): the commit's digest UPDATE found no shard row
      throw StorageError(Category::corruption,
                         "the log's digest (table log_digest) is missing: the log was edited "
                         "outside cplane. Nothing was written; run cplane verify");
    }
    if (state == "23505" && constraint != nullptr && std::string(constraint) == "items_by_key") {
      throw Conflict("an idempotency key was taken meanwhile");
    }
    if (state == "23505" && constraint != nullptr && std::string(constraint) == "items_pkey") {
      throw StorageError(Category::io, "an item id is already taken");
    }
    fail(first_error.get(), "a write failed");
  }
  return last;
}

void PostgresBackend::flush_deferred() {
  if (!deferred_.empty() || !updates_.empty()) pipeline({});
}

Result PostgresBackend::fetch(const std::string& name, int rows) {
  flush_deferred();
  ++round_trips_;
  Result r(PQexec(conn_, fmt::format("FETCH {} FROM {}", rows, name).c_str()));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) fail(r.get(), "scan failed");
  return r;
}

void PostgresBackend::close_cursor(const std::string& name) noexcept {
  if (PQstatus(conn_) != CONNECTION_OK || PQtransactionStatus(conn_) != PQTRANS_INTRANS) return;
  PQclear(PQexec(conn_, fmt::format("CLOSE {}", name).c_str()));
}

}  // namespace cplane::storage::postgres

namespace cplane::storage {

using Category = StorageError::Category;

void throw_for_sqlstate(std::string_view state, const std::string& text, const std::string& url) {
  if (state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03") {
    throw StorageError(Category::unavailable,
                       text + " (the connection to PostgreSQL was lost; the transaction did "
                              "not commit: retry, cplane reconnects)");
  }
  if (state == "40001" || state == "40P01") throw Conflict(text);
  if (state == "55P03" || state == "57014") {
    throw StorageError(Category::busy,
                       text + " (a row this command needs stayed locked past the lock timeout: "
                              "retry, or raise --lock-timeout)");
  }
  if (state == "53100") {
    throw StorageError(Category::full,
                       text + " (the server's disk is full; nothing of the transaction was "
                              "written: free space and retry)");
  }
  // Class XX: damaged data is corruption; anything else in it is the
  // server's own bug (XX000 internal_error), never the caller's input.
  if (state == "XX001" || state == "XX002") throw StorageError(Category::corruption, text);
  if (state.starts_with("XX")) {
    throw InternalError(text + fmt::format(" (PostgreSQL reported an internal error, SQLSTATE {})",
                                           state));
  }
  if (state == "22021") {  // a byte sequence not valid in UTF-8, in text the caller gave
    throw InvalidArgument(text + " (a text field is not valid UTF-8: nothing was written)");
  }
  if (state == "25006") {
    throw InvalidArgument(InvalidArgument::Reason::read_only,
                          fmt::format("{} was opened for reading: it cannot write",
                                      redacted_url(url)));
  }
  throw StorageError(Category::io, text);
}

}  // namespace cplane::storage
