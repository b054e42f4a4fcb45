// The SQLite engine's log (engine.hpp): appending an event with its chain
// hash and its stream's head, importing a restored log, the scans by seq
// and by stream, the heads, the log's digest, and store_info's facts about
// the seqs.
#include "storage/sqlite/engine.hpp"

#include <algorithm>
#include <iterator>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "events/codec.hpp"
#include "events/errors.hpp"
#include "storage/sqlite/row_codec.hpp"

namespace cplane::storage::sqlite {
namespace {

class StatementCursor final : public Cursor<RawEvent> {
 public:
  StatementCursor(sqlite3* db, const std::string& sql) : stmt_(db, sql.c_str()) { stmt_.bind(); }
  template <class... A>
  void bind(const A&... args) {
    stmt_.bind(args...);
  }
  bool next(RawEvent& row) override {
    if (!stmt_.step()) return false;
    fill_event(stmt_, row);
    return true;
  }

 private:
  Statement stmt_;
};

class HeadCursor final : public Cursor<StreamHead> {
 public:
  HeadCursor(sqlite3* db, const char* sql) : stmt_(db, sql) { stmt_.bind(); }
  template <class... A>
  void bind(const A&... args) {
    stmt_.bind(args...);
  }
  bool next(StreamHead& h) override {
    if (!stmt_.step()) return false;
    stmt_.text_into(0, h.stream_kind);
    stmt_.text_into(1, h.stream_id);
    h.revision = stmt_.i64(2);
    h.last_seq = stmt_.i64(3);
    stmt_.blob_into(4, h.hash);
    return true;
  }

 private:
  Statement stmt_;
};

// `select` once per gap around the known kinds' names, in sorted order:
// "... WHERE stream_kind < ?1 UNION ALL ... > ?1 AND < ?2 ... > ?N".
std::string around_known_kinds(const std::string& select) {
  const std::size_t n = std::size(kStreamKinds);
  std::string sql = select + " WHERE stream_kind < ?1";
  for (std::size_t i = 1; i < n; ++i) {
    sql += fmt::format(" UNION ALL {} WHERE stream_kind > ?{} AND stream_kind < ?{}", select, i,
                       i + 1);
  }
  return sql + fmt::format(" UNION ALL {} WHERE stream_kind > ?{}", select, n);
}

template <class C>
void bind_known_kinds(C& cursor) {
  std::array<std::string_view, std::size(kStreamKinds)> names;
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = to_string(kStreamKinds[i]);
  std::sort(names.begin(), names.end());
  std::apply([&](const auto&... name) { cursor.bind(name...); }, names);
}

}  // namespace

Seq SqliteBackend::append(const Event& untagged) {
  Event tagged;
  if (request_id_ != 0 && untagged.request_id != request_id_) {
    tagged = untagged;
    tagged.request_id = request_id_;
  }
  const Event& event = request_id_ != 0 ? tagged : untagged;
  const std::string body = encode(event);
  const StreamRef stream = stream_of(event);
  const std::string_view kind = to_string(stream.kind);
  LogDigestState& digest = writing_digest();
  Hash prev = kNoHash;
  std::int64_t revision = 0;
  auto& head = stmts_.find_head.bind(kind, stream.id);
  if (head.step()) {
    revision = head.i64(0);
    head.blob_into(1, scratch_);
    if (!hash_from_bytes(scratch_, prev)) {
      head.reset();
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("the head of stream {} {} holds no hash (edited outside "
                                     "cplane): run cplane verify",
                                     kind, quote_id(stream.id)));
    }
  } else {
    head.reset();
    // No head: a new stream, unless its head row was deleted behind
    // cplane's back. Appending then would fork its chain (a second event
    // of revision 1): refused, as a head without a hash is.
    auto& started = stmts_.stream_started.bind(kind, stream.id);
    const bool has_events = started.step();
    started.reset();
    if (has_events) throw headless_stream(kind, stream.id);
  }
  head.reset();
  const Seq seq = digest.last_seq + 1;
  ++revision;
  const Hash hash = chain_hash(prev, seq, revision, kind, stream.id, body);
  stmts_.append
      .bind(seq, NullIfEmpty{event.item_id}, event.project_id, type_name(event.body), event.at,
            Blob{body}, kind, stream.id, revision, Blob{as_bytes(hash)})
      .run();
  // An existing head is updated in place (INSERT OR REPLACE would delete
  // and reinsert it); a new stream's is inserted.
  if (revision > 1) {
    stmts_.update_head.bind(kind, stream.id, revision, seq, Blob{as_bytes(hash)}).run();
  }
  if (revision == 1 || sqlite3_changes(db_) == 0) {
    stmts_.put_head.bind(kind, stream.id, revision, seq, Blob{as_bytes(hash)}).run();
  }
  xor_into(digest.digest, prev);
  xor_into(digest.digest, hash);
  ++digest.events;
  digest.last_seq = seq;
  return seq;
}

void SqliteBackend::import_event(const RawEvent& e) {
  stmts_.append
      .bind(e.seq, NullIfEmpty{e.item_id}, e.project_id, e.type, e.at, Blob{e.body},
            e.stream_kind, e.stream_id, e.revision, Blob{e.hash})
      .run();
}

SqliteBackend::LogDigestState& SqliteBackend::writing_digest() {
  if (digest_) return *digest_;
  std::optional<LogDigest> stored;
  Seq newest_event = 0;
  auto& load = stmts_.load_digest.bind();
  if (load.step()) {
    stored = LogDigest{load.i64(0), load.i64(1), {}};
    load.blob_into(2, stored->digest);
    newest_event = load.i64(3);
  }
  load.reset();
  Hash hash{};
  if (!stored || !hash_from_bytes(stored->digest, hash)) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("{}: the log's digest (table log_digest) is missing or "
                                   "damaged: the log was edited outside cplane. Nothing was "
                                   "written; run cplane verify",
                                   path_));
  }
  // A seq is never handed out twice, not even one whose event was cut off
  // (the digest remembers it), nor one a foreign insert took.
  const Seq newest = std::max(stored->last_seq, newest_event);
  digest_ = LogDigestState{stored->events, newest, hash};
  return *digest_;
}

void SqliteBackend::flush_digest() {
  if (!digest_) return;
  stmts_.put_digest.bind(digest_->events, digest_->last_seq, Blob{as_bytes(digest_->digest)}).run();
  digest_.reset();
}

void SqliteBackend::put_head(const StreamHead& h) {
  stmts_.put_head.bind(h.stream_kind, h.stream_id, h.revision, h.last_seq, Blob{h.hash}).run();
}

void SqliteBackend::put_log_digest(const LogDigest& d) {
  digest_.reset();
  Statement(db_, "INSERT OR REPLACE INTO log_digest (shard, events, last_seq, digest) "
                 "VALUES (0, ?1, ?2, ?3)")
      .bind(d.events, d.last_seq, Blob{d.digest})
      .run();
}

std::optional<LogDigest> SqliteBackend::log_digest() {
  Statement s(db_, "SELECT events, last_seq, digest FROM log_digest WHERE shard = 0");
  s.bind();
  if (!s.step()) return std::nullopt;
  LogDigest d{s.i64(0), s.i64(1), {}};
  s.blob_into(2, d.digest);
  return d;
}

Seq SqliteBackend::last_seq() {
  auto& newest = stmts_.last_seq.bind();
  const Seq seq = newest.step() ? newest.i64(0) : 0;
  newest.reset();
  return seq;
}

std::int64_t SqliteBackend::event_count() { return query_int(db_, "SELECT count(*) FROM events"); }

std::unique_ptr<Cursor<RawEvent>> SqliteBackend::scan_after(Seq after) {
  auto cursor = std::make_unique<StatementCursor>(
      db_, fmt::format("SELECT {} FROM events WHERE seq > ?1 ORDER BY seq", kEventColumns));
  cursor->bind(after);
  return cursor;
}

std::vector<RawEvent> SqliteBackend::stream_events(const StreamRef& stream) {
  std::vector<RawEvent> out;
  auto& s = stmts_.stream_events.bind(to_string(stream.kind), stream.id);
  while (s.step()) out.push_back(read_event(s));
  s.reset();
  return out;
}

std::unique_ptr<Cursor<RawEvent>> SqliteBackend::scan_stream(StreamKind kind) {
  auto cursor = std::make_unique<StatementCursor>(
      db_, fmt::format("SELECT {} FROM events WHERE stream_kind = ?1 ORDER BY stream_id, seq",
                       kEventColumns));
  cursor->bind(to_string(kind));
  return cursor;
}

std::unique_ptr<Cursor<RawEvent>> SqliteBackend::scan_unfiled() {
  // Range seeks on events_by_stream around the known kinds (a NOT IN, or
  // an ORDER BY seq, would read the whole log). Integers sort before text
  // and blobs after it, so tampered types are found too.
  auto cursor = std::make_unique<StatementCursor>(
      db_, around_known_kinds(fmt::format("SELECT {} FROM events", kEventColumns)));
  bind_known_kinds(*cursor);
  return cursor;
}

std::unique_ptr<Cursor<StreamHead>> SqliteBackend::scan_heads(StreamKind kind) {
  auto cursor = std::make_unique<HeadCursor>(
      db_, "SELECT stream_kind, stream_id, revision, last_seq, hash FROM stream_heads "
           "WHERE stream_kind = ?1 ORDER BY stream_id");
  cursor->bind(to_string(kind));
  return cursor;
}

std::vector<StreamHead> SqliteBackend::unfiled_heads() {
  // Range seeks around the known kinds on the primary key (NOT IN would
  // read every head).
  HeadCursor cursor(db_, around_known_kinds(
                             "SELECT stream_kind, stream_id, revision, last_seq, hash FROM "
                             "stream_heads")
                             .c_str());
  bind_known_kinds(cursor);
  std::vector<StreamHead> out;
  StreamHead h;
  while (cursor.next(h)) out.push_back(h);
  return out;
}

// Dense, unless the log was restored from a backend whose seqs have gaps.
bool SqliteBackend::seqs_dense() {
  Statement q(db_, "SELECT 1 FROM store_info WHERE key = 'seqs' AND value = 'sparse'");
  q.bind();
  return !q.step();
}

void SqliteBackend::put_seqs_sparse() {
  Statement(db_, "INSERT OR REPLACE INTO store_info (key, value) VALUES ('seqs', 'sparse')")
      .bind()
      .run();
}

}  // namespace cplane::storage::sqlite
