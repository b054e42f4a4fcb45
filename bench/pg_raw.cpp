// The raw baseline speaks libpq itself: it is what cplane's PostgreSQL
// backend would be with every layer above the statements taken away, so it
// has no backend to go through. No other file of the bench includes
// libpq-fe.h, and no libpq type leaves this file.
//
// The tables mirror cplane's item rows and event log, in a schema of their
// own (cplane_raw_<pid>):
//
//   items   one row per item; a claim sets status 'claimed', owner, lease,
//           fence + 1, attempts + 1; a finish sets 'done' under the fence.
//           items_ready is the queue: a claim is one seek on it.
//   events  one row per transition (claimed, done): a 100-byte body and a
//           32-byte hash, as cplane writes an encoded event and its link in
//           the hash chain. Each item's row names its last event (last_seq),
//           drawn from the events' sequence before the event is written, so
//           both variants write the same rows.
//
// Each claim and each finish is one transaction, under the server's
// synchronous_commit (on, unless the server says otherwise: it is reported).
#include "bench/pg_raw.hpp"

#include "bench/fleet_run.hpp"

#include <unistd.h>

#if CPLANE_WITH_POSTGRES
#include <libpq-fe.h>
#endif

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <cplane/errors.hpp>

namespace cplane::bench {

RawClaim parse_raw_claim(std::string_view text) {
  if (text == "one-statement") return RawClaim::one_statement;
  if (text == "multi-statement") return RawClaim::multi_statement;
  throw InvalidArgument(
      fmt::format("unknown claim '{}': expected one-statement or multi-statement", text));
}

std::string_view to_string(RawClaim claim) {
  switch (claim) {
    case RawClaim::one_statement: return "one-statement";
    case RawClaim::multi_statement: return "multi-statement";
  }
  return "?";
}

#if CPLANE_WITH_POSTGRES
namespace {

using fleet::seconds_now;

constexpr const char* kProject = "bench";
constexpr const char* kPayload = R"({"task":"benchmark item"})";
constexpr std::int64_t kLeaseMicros = 900'000'000;  // cplane's default lease
constexpr std::int64_t kEnqueueBatch = 1'000;

const char* const kSchema = R"sql(
CREATE TABLE items (
  item_id          text COLLATE "C" PRIMARY KEY,
  project_id       text,
  payload          text,
  status           text,
  owner            text,
  fence            bigint,
  attempts         int,
  lease_expires_at bigint,
  queued_seq       bigint,
  updated_at       bigint,
  last_seq         bigint
);
CREATE INDEX items_ready ON items (project_id, queued_seq) WHERE status = 'ready';
CREATE TABLE events (
  seq         bigserial PRIMARY KEY,
  item_id     text,
  project_id  text,
  type        text,
  at          bigint,
  body        bytea,
  stream_kind text,
  stream_id   text,
  stream_rev  bigint,
  hash        bytea
);
)sql";

// Items [$1, $2] of the queue, in queue order; ids as long as a UUID.
const char* const kEnqueue = R"sql(
INSERT INTO items (item_id, project_id, payload, status, fence, attempts, lease_expires_at,
                   queued_seq, updated_at, last_seq)
SELECT 'item-' || lpad(g::text, 31, '0'), $3, $4, 'ready', 0, 0, 0, g, $5::bigint, 0
FROM generate_series($1::bigint, $2::bigint) AS g
)sql";

// multi-statement: BEGIN; pick; claim; event; COMMIT and BEGIN; finish;
// event; COMMIT.
const char* const kPick = R"sql(
SELECT item_id FROM items WHERE project_id = $1 AND status = 'ready'
ORDER BY queued_seq LIMIT 1 FOR UPDATE SKIP LOCKED
)sql";
const char* const kClaim = R"sql(
UPDATE items SET status = 'claimed', owner = $2, fence = fence + 1, attempts = attempts + 1,
                 lease_expires_at = $3, updated_at = $4, last_seq = nextval('events_seq_seq')
WHERE item_id = $1
RETURNING project_id, fence, last_seq
)sql";
const char* const kFinish = R"sql(
UPDATE items SET status = 'done', updated_at = $3, last_seq = nextval('events_seq_seq')
WHERE item_id = $1 AND fence = $2 AND status = 'claimed'
RETURNING project_id, fence, last_seq
)sql";
const char* const kEvent = R"sql(
INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, stream_id,
                    stream_rev, hash)
VALUES ($1, $2, $3, $4, $5, $6, 'item', $2, $7, $8)
)sql";

// one-statement: each in autocommit. stream_rev counts the item's events,
// queued being the first (the bench claims each item once).
const char* const kClaimOne = R"sql(
WITH c AS MATERIALIZED (
  SELECT item_id FROM items WHERE project_id = $1 AND status = 'ready'
  ORDER BY queued_seq LIMIT 1 FOR UPDATE SKIP LOCKED
), u AS (
  UPDATE items SET status = 'claimed', owner = $2, fence = fence + 1, attempts = attempts + 1,
                   lease_expires_at = $3::bigint, updated_at = $4::bigint,
                   last_seq = nextval('events_seq_seq')
  FROM c WHERE items.item_id = c.item_id
  RETURNING items.item_id, items.project_id, items.fence, items.last_seq
), e AS (
  INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, stream_id,
                      stream_rev, hash)
  SELECT last_seq, item_id, project_id, 'claimed', $4::bigint, $5::bytea, 'item', item_id,
         2 * fence, $6::bytea
  FROM u
  RETURNING seq
)
SELECT item_id, fence FROM u
)sql";
const char* const kFinishOne = R"sql(
WITH u AS (
  UPDATE items SET status = 'done', updated_at = $3::bigint, last_seq = nextval('events_seq_seq')
  WHERE item_id = $1 AND fence = $2::bigint AND status = 'claimed'
  RETURNING item_id, project_id, fence, last_seq
), e AS (
  INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, stream_id,
                      stream_rev, hash)
  SELECT last_seq, item_id, project_id, 'done', $3::bigint, $4::bytea, 'item', item_id,
         2 * fence + 1, $5::bytea
  FROM u
  RETURNING seq
)
SELECT seq FROM e
)sql";

// Each item is done once, and has one claimed and one done event.
const char* const kCheck = R"sql(
SELECT (SELECT count(*) FROM items WHERE status = 'done'),
       (SELECT count(*) FROM items WHERE status = 'done' AND fence = 1 AND attempts = 1),
       (SELECT count(*) FROM events),
       (SELECT count(*) FROM (SELECT item_id FROM events GROUP BY item_id
                              HAVING count(*) FILTER (WHERE type = 'claimed') = 1
                                 AND count(*) FILTER (WHERE type = 'done') = 1) AS exact)
)sql";

std::int64_t wall_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

// A bigint parameter in text form, without allocating.
class Number {
 public:
  explicit Number(std::int64_t v) {
    const auto end = std::to_chars(text_.data(), text_.data() + text_.size() - 1, v).ptr;
    *end = '\0';
  }
  const char* c_str() const { return text_.data(); }

 private:
  std::array<char, 24> text_{};
};

// A bytea parameter, sent in binary.
struct Bytes {
  std::string_view bytes;
};

// One parameter of a prepared statement: text, or bytes.
struct Param {
  Param(const char* text) : value(text) {}
  Param(const std::string& text) : value(text.c_str()) {}
  Param(const Number& n) : value(n.c_str()) {}
  Param(Bytes b) : value(b.bytes.data()), length(static_cast<int>(b.bytes.size())), format(1) {}
  const char* value;
  int length = 0;
  int format = 0;
};

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

// One libpq connection, its errors turned into std::runtime_error.
class Connection {
 public:
  explicit Connection(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (conn_ == nullptr) throw std::runtime_error("PostgreSQL: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string message = cplane::redacted_message(PQerrorMessage(conn_), url);
      PQfinish(conn_);
      throw std::runtime_error("PostgreSQL: " + message);
    }
  }
  ~Connection() { PQfinish(conn_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Result exec(const std::string& sql) { return check(PQexec(conn_, sql.c_str()), sql); }

  void prepare(const char* name, const char* sql) {
    check(PQprepare(conn_, name, sql, 0, nullptr), name);
  }

  Result run(const char* name, std::initializer_list<Param> params) {
    constexpr std::size_t kMax = 8;
    std::array<const char*, kMax> values{};
    std::array<int, kMax> lengths{}, formats{};
    std::size_t n = 0;
    for (const auto& p : params) {
      values[n] = p.value;
      lengths[n] = p.length;
      formats[n] = p.format;
      ++n;
    }
    return check(PQexecPrepared(conn_, name, static_cast<int>(n), values.data(), lengths.data(),
                                formats.data(), 0),
                 name);
  }

 private:
  Result check(PGresult* raw, std::string_view what) {
    Result result(raw, &PQclear);
    const auto status = PQresultStatus(raw);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      throw std::runtime_error(fmt::format("PostgreSQL ({}): {}", what.substr(0, 60),
                                           PQerrorMessage(conn_)));
    }
    return result;
  }

  PGconn* conn_;
};

std::int64_t number_at(const Result& r, int row, int column) {
  return std::strtoll(PQgetvalue(r.get(), row, column), nullptr, 10);
}

// A worker's connection: the schema on its search path, its statements
// prepared.
void open_worker(Connection& conn, const std::string& schema, RawClaim claim) {
  conn.exec("SET search_path TO " + schema);
  conn.prepare("begin", "BEGIN");
  conn.prepare("commit", "COMMIT");
  if (claim == RawClaim::multi_statement) {
    conn.prepare("pick", kPick);
    conn.prepare("claim", kClaim);
    conn.prepare("finish", kFinish);
    conn.prepare("event", kEvent);
  } else {
    conn.prepare("claim_one", kClaimOne);
    conn.prepare("finish_one", kFinishOne);
  }
}

// Claims and finishes until a claim finds nothing. Every transaction is
// timed, as bench.cpp's drain times cplane's.
fleet::WorkerRecord drain(Connection& conn, const std::string& owner, RawClaim claim) {
  const std::string body(100, 'b'), hash(32, 'h');
  fleet::WorkerRecord r;
  std::string item_id;
  while (true) {
    const double t0 = seconds_now();
    const std::int64_t now = wall_micros();
    const Number at(now), lease(now + kLeaseMicros);
    std::int64_t fence = 0;
    if (claim == RawClaim::multi_statement) {
      conn.run("begin", {});
      const Result picked = conn.run("pick", {kProject});
      if (PQntuples(picked.get()) == 1) {
        item_id = PQgetvalue(picked.get(), 0, 0);
        const Result claimed = conn.run("claim", {item_id, owner, lease, at});
        fence = number_at(claimed, 0, 1);
        conn.run("event", {PQgetvalue(claimed.get(), 0, 2), item_id,
                           PQgetvalue(claimed.get(), 0, 0), "claimed", at, Bytes{body},
                           Number(2 * fence), Bytes{hash}});
      }
      conn.run("commit", {});
    } else {
      const Result claimed =
          conn.run("claim_one", {kProject, owner, lease, at, Bytes{body}, Bytes{hash}});
      if (PQntuples(claimed.get()) == 1) {
        item_id = PQgetvalue(claimed.get(), 0, 0);
        fence = number_at(claimed, 0, 1);
      }
    }
    const double t1 = seconds_now();
    r.claim_latency.push_back(t1 - t0);
    r.longest_wait = std::max(r.longest_wait, t1 - t0);
    if (fence == 0) break;
    ++r.claims;

    const Number done_at(wall_micros()), claimed_fence(fence);
    bool finished = false;
    if (claim == RawClaim::multi_statement) {
      conn.run("begin", {});
      const Result done = conn.run("finish", {item_id, claimed_fence, done_at});
      finished = PQntuples(done.get()) == 1;
      if (finished) {
        conn.run("event", {PQgetvalue(done.get(), 0, 2), item_id, PQgetvalue(done.get(), 0, 0),
                           "done", done_at, Bytes{body}, Number(2 * fence + 1), Bytes{hash}});
      }
      conn.run("commit", {});
    } else {
      const Result done =
          conn.run("finish_one", {item_id, claimed_fence, done_at, Bytes{body}, Bytes{hash}});
      finished = PQntuples(done.get()) == 1;
    }
    r.longest_wait = std::max(r.longest_wait, seconds_now() - t1);
    if (finished) {
      ++r.finishes;
    } else {
      ++r.refused;
    }
  }
  return r;
}

// The schema of one drain, dropped with everything in it when this goes.
class Scratch {
 public:
  Scratch(Connection& conn, std::string name) : conn_(conn), name_(std::move(name)) {
    conn_.exec("CREATE SCHEMA " + name_);
  }
  ~Scratch() {
    try {
      conn_.exec("DROP SCHEMA " + name_ + " CASCADE");
    } catch (const std::exception& e) {
      std::cerr << "cplane-bench: " << name_ << " was not dropped: " << e.what() << '\n';
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const std::string& name() const { return name_; }

 private:
  Connection& conn_;
  std::string name_;
};

void fill(Connection& conn, std::int64_t items) {
  conn.prepare("enqueue", kEnqueue);
  const Number now(wall_micros());
  conn.exec("BEGIN");
  for (std::int64_t first = 1; first <= items; first += kEnqueueBatch) {
    const Number from(first), to(std::min(items, first + kEnqueueBatch - 1));
    conn.run("enqueue", {from, to, kProject, kPayload, now});
  }
  conn.exec("COMMIT");
  conn.exec("ANALYZE items");
}

}  // namespace

RawDrain drain_raw(const std::string& url, int workers, std::int64_t items, RawClaim claim,
                   const std::string& record_prefix) {
  Connection conn{url};
  conn.exec("SET client_min_messages TO warning");  // not the notices of DROP ... CASCADE
  Scratch schema{conn, fmt::format("cplane_raw_{}", ::getpid())};
  conn.exec("SET search_path TO " + schema.name());
  conn.exec(kSchema);
  fill(conn, items);

  RawDrain result;
  result.synchronous_commit = PQgetvalue(conn.exec("SHOW synchronous_commit").get(), 0, 0);
  FleetRun run = run_fleet(workers, record_prefix, [&](int w) {
    auto worker = std::make_shared<Connection>(url);
    open_worker(*worker, schema.name(), claim);
    return std::function<fleet::WorkerRecord()>(
        [worker, w, claim] { return drain(*worker, fmt::format("worker-{}", w), claim); });
  });
  result.seconds = run.seconds;
  result.workers = std::move(run.records);

  const std::int64_t claims = run.claims, refused = run.refused;
  result.items = run.finishes;
  const Result check = conn.exec(kCheck);
  const std::int64_t done = number_at(check, 0, 0), once = number_at(check, 0, 1),
                     events = number_at(check, 0, 2), exact = number_at(check, 0, 3);
  if (claims != items || result.items != items || refused != 0 || done != items ||
      once != items || events != 2 * items || exact != items) {
    throw std::runtime_error(fmt::format(
        "pg-raw {}: of {} items, {} claims, {} finishes, {} refused; {} done rows, {} claimed "
        "once, {} events, {} items with exactly one claimed and one done event",
        to_string(claim), items, claims, result.items, refused, done, once, events, exact));
  }
  return result;
}

std::int64_t schema_bytes(const std::string& url) {
  PGconn* conn = PQconnectdb(url.c_str());
  std::int64_t out = -1;
  if (PQstatus(conn) == CONNECTION_OK) {
    PGresult* r = PQexec(conn,
                         "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                         "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = "
                         "current_schema() AND c.relkind = 'r'");
    if (PQresultStatus(r) == PGRES_TUPLES_OK) out = std::stoll(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  PQfinish(conn);
  return out;
}

#else  // a cplane built without PostgreSQL (CPLANE_WITH_POSTGRES=OFF)

RawDrain drain_raw(const std::string&, int, std::int64_t, RawClaim, const std::string&) {
  throw InvalidArgument("this cplane was built without PostgreSQL support: no pg-raw baseline");
}

std::int64_t schema_bytes(const std::string&) { return -1; }

#endif

}  // namespace cplane::bench
