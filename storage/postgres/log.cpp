// The PostgreSQL engine's log: appends chained to their locked stream
// heads, imports, the heads, the sharded digest, and reads of the events.

#include <algorithm>
#include <array>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "storage/postgres/internal.hpp"
#include "storage/postgres/rows.hpp"

namespace cplane::storage::postgres {

namespace {

// log_digest's d0..d3 as a hash (hash_words, backwards).
std::string words_hash(const std::array<std::int64_t, 4>& words) {
  std::string out(32, '\0');
  for (int w = 0; w < 4; ++w) {
    auto v = static_cast<std::uint64_t>(words[static_cast<std::size_t>(w)]);
    for (int b = 7; b >= 0; --b) {
      out[static_cast<std::size_t>(w * 8 + b)] = static_cast<char>(v & 0xff);
      v >>= 8;
    }
  }
  return out;
}

std::string known_kinds_list() {
  std::string list;
  for (auto kind : kStreamKinds) {
    if (!list.empty()) list += ", ";
    list += fmt::format("'{}'", to_string(kind));
  }
  return list;
}

}  // namespace

std::array<std::int64_t, 4> hash_words(const Hash& h) {
  std::array<std::int64_t, 4> out{};
  for (int w = 0; w < 4; ++w) {
    std::uint64_t v = 0;
    for (int b = 0; b < 8; ++b) v = v << 8 | h[static_cast<std::size_t>(w * 8 + b)];
    out[static_cast<std::size_t>(w)] = static_cast<std::int64_t>(v);
  }
  return out;
}

PostgresBackend::LockedHead PostgresBackend::locked_head(const Result& r, int row,
                                                         std::string_view kind,
                                                         std::string_view id, int column) {
  LockedHead h{r.i64(row, column), kNoHash, 0};
  // Column + 3: no head, yet the stream has events (its row deleted).
  if (r.null(row, column + 1) && r.text(row, column + 3) == "t") throw headless_stream(kind, id);
  if (!r.null(row, column + 1)) {
    h.revision = r.i64(row, column + 1);
    if (!hash_from_bytes(r.bytes(row, column + 2), h.prev)) {
      throw StorageError(Category::corruption,
                         fmt::format("the head of stream {} {} holds no hash (edited outside "
                                     "cplane): run cplane verify",
                                     kind, quote_id(id)));
    }
  }
  return h;
}

Seq PostgresBackend::append(const Event& event) {
  const StreamRef stream = stream_of(event);
  const std::string_view kind = to_string(stream.kind);
  // The head is locked before the seq is drawn: within a stream, seqs
  // rise in the order the appends commit.
  Result head = run(
      "SELECT nextval('events_seq'), h.revision, h.hash, h.revision IS NULL AND EXISTS (SELECT 1 "
      "FROM events WHERE stream_kind = $1 AND stream_id = $2) FROM (SELECT 1) x LEFT JOIN "
      "LATERAL (SELECT revision, hash FROM stream_heads WHERE stream_kind = $1 AND "
      "stream_id = $2 FOR UPDATE) h ON true",
      Params().text(kind).text(stream.id));
  return chain(event, locked_head(head, 0, kind, stream.id));
}

std::vector<Seq> PostgresBackend::append_batch(const std::vector<Event>& events) {
  std::vector<std::string> kinds, ids;
  for (const auto& e : events) {
    const StreamRef stream = stream_of(e);
    kinds.emplace_back(to_string(stream.kind));
    ids.push_back(stream.id);
  }
  std::vector<std::pair<std::string, std::string>> distinct;
  for (std::size_t i = 0; i < kinds.size(); ++i) distinct.emplace_back(kinds[i], ids[i]);
  std::sort(distinct.begin(), distinct.end());
  if (events.size() < 2 ||
      std::adjacent_find(distinct.begin(), distinct.end()) != distinct.end()) {
    return Backend::append_batch(events);  // one stream twice: one at a time
  }
  Result heads = run(
      "SELECT nextval('events_seq'), h.revision, h.hash, h.revision IS NULL AND EXISTS (SELECT 1 "
      "FROM events WHERE stream_kind = s.kind AND stream_id = s.id) FROM unnest($1::text[], "
      "$2::text[]) WITH ORDINALITY AS s(kind, id, n) LEFT JOIN LATERAL (SELECT revision, hash "
      "FROM stream_heads WHERE stream_kind = s.kind AND stream_id = s.id FOR UPDATE) h ON true "
      "ORDER BY s.n",
      Params().text(array_literal(kinds)).text(array_literal(ids)));
  if (heads.rows() != static_cast<int>(events.size())) {
    throw InternalError("a batch append locked another number of heads than it has events");
  }
  // The events and their heads in one statement: a row each through
  // unnest(), not a statement each (a claim of 32 sent 32). A head that
  // another transaction created since we looked is not overwritten: fewer
  // heads written than events, 1 / 0, and the command runs again.
  std::vector<Seq> out;
  std::vector<Params> rows;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const LockedHead head = locked_head(heads, static_cast<int>(i), kinds[i], ids[i]);
    out.push_back(head.seq);
    rows.push_back(link(events[i], head));
  }
  for (auto& run : runs_of(std::move(rows), kRunBytes)) {
    Params batch;
    for (int c = 0; c < run.front().size(); ++c) batch.text(column_array(run, c));
    batch.i64(static_cast<std::int64_t>(run.size()));
    defer(
        "WITH v AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], "
        "$5::bigint[], $6::bytea[], $7::text[], $8::text[], $9::bigint[], $10::bytea[]) AS "
        "v(seq, item_id, project_id, type, at, body, kind, id, rev, hash)), "
        "e AS (INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, "
        "stream_id, stream_rev, hash) SELECT seq, item_id, project_id, type, at, body, kind, id, "
        "rev, hash FROM v), "
        "h AS (INSERT INTO stream_heads AS s (stream_kind, stream_id, revision, last_seq, hash) "
        "SELECT kind, id, rev, seq, hash FROM v ON CONFLICT (stream_kind, stream_id) DO UPDATE SET "
        "revision = EXCLUDED.revision, last_seq = EXCLUDED.last_seq, hash = EXCLUDED.hash "
        "WHERE s.revision = EXCLUDED.revision - 1 RETURNING 1) "
        "SELECT 1 / ((SELECT count(*) FROM h) = $11)::integer",
        std::move(batch));
  }
  return out;
}

Seq PostgresBackend::chain(const Event& event, const LockedHead& head) {
  // The event and its stream's new head in one statement, deferred. A
  // head that another transaction created since we looked (no row to lock
  // then) is not overwritten: 1 / 0, and the command runs again.
  defer(
      "WITH e AS (INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, "
      "stream_id, stream_rev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)), "
      "h AS (INSERT INTO stream_heads AS s (stream_kind, stream_id, revision, last_seq, hash) "
      "VALUES ($7, $8, $9, $1, $10) ON CONFLICT (stream_kind, stream_id) DO UPDATE SET "
      "revision = EXCLUDED.revision, last_seq = EXCLUDED.last_seq, hash = EXCLUDED.hash "
      "WHERE s.revision = EXCLUDED.revision - 1 RETURNING 1) "
      "SELECT 1 / (SELECT count(*)::integer FROM h)",
      link(event, head));
  return head.seq;
}

Params PostgresBackend::link(const Event& event, const LockedHead& head) {
  const std::string body = encode(event);
  const StreamRef stream = stream_of(event);
  const std::string_view kind = to_string(stream.kind);
  const Seq seq = head.seq;
  const std::int64_t revision = head.revision + 1;
  const Hash hash = chain_hash(head.prev, seq, revision, kind, stream.id, body);
  if (!delta_) delta_ = Delta{};
  xor_into(delta_->digest, head.prev);
  xor_into(delta_->digest, hash);
  ++delta_->events;
  delta_->last_seq = std::max(delta_->last_seq, seq);
  Params p;
  p.i64(seq)
      .text_or_null(event.item_id)
      .text(event.project_id)
      .text(type_name(event.body))
      .i64(event.at)
      .bytes(body)
      .text(kind)
      .text(stream.id)
      .i64(revision)
      .bytes(as_bytes(hash));
  return p;
}

void PostgresBackend::import_event(const RawEvent& e) {
  run("INSERT INTO events (seq, item_id, project_id, type, at, body, stream_kind, stream_id, "
      "stream_rev, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
      Params()
          .i64(e.seq)
          .text_or_null(e.item_id)
          .text(e.project_id)
          .text(e.type)
          .i64(e.at)
          .bytes(e.body)
          .text(e.stream_kind)
          .text(e.stream_id)
          .i64(e.revision)
          .bytes(e.hash));
  // Seqs handed out later must pass every imported one.
  run("SELECT setval('events_seq', greatest($1, (SELECT last_value FROM events_seq)))",
      Params().i64(e.seq));
}

void PostgresBackend::put_head(const StreamHead& h) {
  run("INSERT INTO stream_heads (stream_kind, stream_id, revision, last_seq, hash) VALUES "
      "($1, $2, $3, $4, $5) ON CONFLICT (stream_kind, stream_id) DO UPDATE SET "
      "revision = EXCLUDED.revision, last_seq = EXCLUDED.last_seq, hash = EXCLUDED.hash",
      Params().text(h.stream_kind).text(h.stream_id).i64(h.revision).i64(h.last_seq).bytes(h.hash));
}

void PostgresBackend::put_log_digest(const LogDigest& d) {
  delta_.reset();
  Hash hash{};
  hash_from_bytes(d.digest, hash);
  const auto w = hash_words(hash);
  run("DELETE FROM log_digest");
  run("INSERT INTO log_digest (shard, events, last_seq, d0, d1, d2, d3) SELECT shard, 0, 0, 0, "
      "0, 0, 0 FROM generate_series(1, 63) AS shard");
  run("INSERT INTO log_digest (shard, events, last_seq, d0, d1, d2, d3) VALUES "
      "(0, $1, $2, $3, $4, $5, $6)",
      Params().i64(d.events).i64(d.last_seq).i64(w[0]).i64(w[1]).i64(w[2]).i64(w[3]));
  run("SELECT setval('events_seq', greatest($1, (SELECT last_value FROM events_seq)))",
      Params().i64(std::max<Seq>(d.last_seq, 1)));
}

std::unique_ptr<Cursor<StreamHead>> PostgresBackend::scan_heads(StreamKind kind) {
  return cursor<StreamHead>(
      "SELECT stream_kind, stream_id, revision, last_seq, hash FROM stream_heads "
      "WHERE stream_kind = $1 ORDER BY stream_id",
      Params().text(to_string(kind)), fill_head);
}

std::vector<StreamHead> PostgresBackend::unfiled_heads() {
  Result r = run(fmt::format("SELECT stream_kind, stream_id, revision, last_seq, hash FROM "
                             "stream_heads WHERE stream_kind NOT IN ({}) ORDER BY stream_kind, "
                             "stream_id",
                             known_kinds_list()));
  std::vector<StreamHead> out(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) fill_head(r, i, out[static_cast<std::size_t>(i)]);
  return out;
}

std::optional<LogDigest> PostgresBackend::log_digest() {
  Result r = run(
      "SELECT count(*), coalesce(sum(events), 0), coalesce(max(last_seq), 0), "
      "coalesce(bit_xor(d0), 0), coalesce(bit_xor(d1), 0), coalesce(bit_xor(d2), 0), "
      "coalesce(bit_xor(d3), 0) FROM log_digest");
  if (r.i64(0, 0) == 0) return std::nullopt;
  return LogDigest{r.i64(0, 1), r.i64(0, 2),
                   words_hash({r.i64(0, 3), r.i64(0, 4), r.i64(0, 5), r.i64(0, 6)})};
}

std::string PostgresBackend::database_id() {
  Result r = run("SELECT value FROM store_info WHERE key = 'database_id'");
  return r.rows() > 0 ? r.text(0, 0) : std::string();
}

std::vector<RawEvent> PostgresBackend::stream_events(const StreamRef& stream) {
  Result r = run(fmt::format("SELECT {} FROM events WHERE stream_kind = $1 AND stream_id = $2 "
                             "ORDER BY seq",
                             kEventColumns),
                 Params().text(to_string(stream.kind)).text(stream.id));
  std::vector<RawEvent> out(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) fill_event(r, i, out[static_cast<std::size_t>(i)]);
  return out;
}

std::vector<std::vector<RawEvent>> PostgresBackend::streams_events(
    StreamKind kind, const std::vector<std::string>& ids) {
  std::vector<std::vector<RawEvent>> out(ids.size());
  if (ids.empty()) return out;
  Result r = run(fmt::format("SELECT {} FROM events WHERE stream_kind = $1 AND stream_id = "
                             "ANY($2::text[]) ORDER BY stream_id, seq",
                             kEventColumns),
                 Params().text(to_string(kind)).text(array_literal(ids)));
  std::unordered_map<std::string_view, std::size_t> at;
  at.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) at.emplace(ids[i], i);
  for (int i = 0; i < r.rows(); ++i) {
    RawEvent e;
    fill_event(r, i, e);
    const auto it = at.find(e.stream_id);
    if (it != at.end()) out[it->second].push_back(std::move(e));
  }
  return out;
}

std::unique_ptr<Cursor<RawEvent>> PostgresBackend::scan_stream(StreamKind kind) {
  return cursor<RawEvent>(
      fmt::format("SELECT {} FROM events WHERE stream_kind = $1 ORDER BY stream_id, seq",
                  kEventColumns),
      Params().text(to_string(kind)), fill_event);
}

std::unique_ptr<Cursor<RawEvent>> PostgresBackend::scan_unfiled() {
  return cursor<RawEvent>(fmt::format("SELECT {} FROM events WHERE stream_kind NOT IN ({})",
                                      kEventColumns, known_kinds_list()),
                          Params(), fill_event);
}

std::int64_t PostgresBackend::event_count() {
  return run("SELECT count(*) FROM events").i64(0, 0);
}

Seq PostgresBackend::last_seq() {
  return run("SELECT coalesce(max(seq), 0) FROM events").i64(0, 0);
}

}  // namespace cplane::storage::postgres
