// Retention on SQLite (docs/retention.md): the anchors of archived streams
// and the record of their segments (tables anchors and segments, schema.cpp,
// version 11). Not a hot path: statements are prepared per call.
#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/sqlite/engine.hpp"
#include "storage/sqlite/row_codec.hpp"

namespace cplane::storage::sqlite {
namespace {

constexpr const char* kAnchorColumns =
    "stream_kind, stream_id, revision, last_seq, hash, events, seqs, project_id, state, fence, "
    "idem_key, ended_at, segment_id, segment_digest";

void fill_anchor(Statement& s, StreamAnchor& a) {
  s.text_into(0, a.stream_kind);
  s.text_into(1, a.stream_id);
  a.revision = s.i64(2);
  a.last_seq = s.i64(3);
  s.blob_into(4, a.hash);
  a.events = s.i64(5);
  s.blob_into(6, a.seqs);
  s.text_into(7, a.project_id);
  s.text_into(8, a.state);
  a.fence = s.i64(9);
  s.text_into(10, a.idem_key);
  a.ended_at = s.i64(11);
  s.text_into(12, a.segment_id);
  s.blob_into(13, a.segment_digest);
}

class AnchorCursor final : public Cursor<StreamAnchor> {
 public:
  AnchorCursor(sqlite3* db, const std::string& sql, const std::string& kind)
      : stmt_(db, sql.c_str()) {
    stmt_.bind(kind);
  }
  bool next(StreamAnchor& a) override {
    if (!stmt_.step()) return false;
    fill_anchor(stmt_, a);
    return true;
  }

 private:
  Statement stmt_;
};

std::optional<StreamAnchor> one_anchor(Statement& s) {
  if (!s.step()) return std::nullopt;
  StreamAnchor a;
  fill_anchor(s, a);
  s.reset();
  return a;
}

}  // namespace

std::unique_ptr<Cursor<StreamAnchor>> SqliteBackend::scan_anchors(StreamKind kind) {
  return std::make_unique<AnchorCursor>(
      db_,
      fmt::format("SELECT {} FROM anchors WHERE stream_kind = ?1 ORDER BY stream_id",
                  kAnchorColumns),
      std::string(to_string(kind)));
}

std::vector<std::string> SqliteBackend::ended_streams(StreamKind kind, Micros before,
                                                      const std::string* project_id,
                                                      std::size_t limit) {
  // A scan of the rows: archive runs seldom, and an index on the end time
  // would cost every finish a b-tree write.
  const char* sql = nullptr;
  switch (kind) {
    case StreamKind::item:
      sql = "SELECT item_id FROM items WHERE (status = 'done' OR status = 'failed' OR "
            "status = 'closed' OR status = 'cancelled') AND updated_at < ?1 AND "
            "(?2 IS NULL OR project_id = ?2) ORDER BY item_id LIMIT ?3";
      break;
    case StreamKind::session:
      if (project_id != nullptr) return {};  // a session is no project's
      sql = "SELECT session_id FROM sessions WHERE closed_at IS NOT NULL AND closed_at < ?1 "
            "AND ?2 IS NULL ORDER BY session_id LIMIT ?3";
      break;
    case StreamKind::schedule:
      sql = "SELECT name FROM schedules WHERE removed <> 0 AND updated_at < ?1 AND "
            "(?2 IS NULL OR project_id = ?2) ORDER BY name LIMIT ?3";
      break;
    default:
      return {};
  }
  Statement s(db_, sql);
  s.bind(before, NullIfEmpty{project_id != nullptr ? *project_id : std::string()},
         static_cast<std::int64_t>(limit));
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

void SqliteBackend::archive_stream(const StreamAnchor& anchor) {
  Statement head(db_, "SELECT revision, last_seq, hash FROM stream_heads WHERE stream_kind = ?1 "
                      "AND stream_id = ?2");
  head.bind(anchor.stream_kind, anchor.stream_id);
  std::string stored_hash;
  const bool headed = head.step();
  if (headed) head.blob_into(2, stored_hash);
  const bool agrees = headed && head.i64(0) == anchor.revision && head.i64(1) == anchor.last_seq &&
                      stored_hash == anchor.hash;
  head.reset();
  Hash head_hash{};
  if (!agrees || !hash_from_bytes(stored_hash, head_hash)) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("the head of {} {} is not where its events end: the log "
                                   "changed under the archive, or was edited outside cplane "
                                   "(run cplane verify); nothing was archived",
                                   anchor.stream_kind, anchor.stream_id));
  }
  Statement drop(db_, "DELETE FROM events WHERE stream_kind = ?1 AND stream_id = ?2");
  drop.bind(anchor.stream_kind, anchor.stream_id).run();
  if (sqlite3_changes(db_) != anchor.events) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("{} {} holds {} event(s), not the {} its segment holds: "
                                   "nothing was archived",
                                   anchor.stream_kind, anchor.stream_id, sqlite3_changes(db_),
                                   anchor.events));
  }
  Statement(db_, "DELETE FROM stream_heads WHERE stream_kind = ?1 AND stream_id = ?2")
      .bind(anchor.stream_kind, anchor.stream_id)
      .run();
  import_anchor(anchor);
  // The anchor stands in the digest where the head stood.
  auto& digest = writing_digest();
  xor_into(digest.digest, head_hash);
  xor_into(digest.digest, anchor_hash(anchor));
}

void SqliteBackend::import_anchor(const StreamAnchor& anchor) {
  Statement(db_, fmt::format("INSERT INTO anchors ({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                             "?9, ?10, ?11, ?12, ?13, ?14)",
                             kAnchorColumns)
                     .c_str())
      .bind(anchor.stream_kind, anchor.stream_id, anchor.revision, anchor.last_seq,
            Blob{anchor.hash}, anchor.events, Blob{anchor.seqs}, anchor.project_id, anchor.state,
            anchor.fence, NullIfEmpty{anchor.idem_key}, anchor.ended_at, anchor.segment_id,
            Blob{anchor.segment_digest})
      .run();
}

void SqliteBackend::delete_anchor(const StreamRef& stream) {
  Statement(db_, "DELETE FROM anchors WHERE stream_kind = ?1 AND stream_id = ?2")
      .bind(std::string(to_string(stream.kind)), stream.id)
      .run();
}

std::optional<StreamAnchor> SqliteBackend::find_anchor(const StreamRef& stream) {
  Statement s(db_, fmt::format("SELECT {} FROM anchors WHERE stream_kind = ?1 AND stream_id = ?2",
                               kAnchorColumns)
                       .c_str());
  s.bind(std::string(to_string(stream.kind)), stream.id);
  return one_anchor(s);
}

std::optional<StreamAnchor> SqliteBackend::find_anchor_by_key(const std::string& project_id,
                                                              std::string_view key) {
  Statement s(db_, fmt::format("SELECT {} FROM anchors WHERE project_id = ?1 AND idem_key = ?2",
                               kAnchorColumns)
                       .c_str());
  s.bind(project_id, key);
  return one_anchor(s);
}

void SqliteBackend::put_segment(const SegmentRecord& r) {
  Statement(db_, "INSERT OR REPLACE INTO segments (segment_id, digest, file, before, project_id, "
                 "streams, events, bytes, archived_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")
      .bind(r.segment_id, Blob{r.digest}, r.file, r.before, r.project_id, r.streams, r.events,
            r.bytes, r.archived_at)
      .run();
}

void SqliteBackend::delete_segment(const std::string& segment_id) {
  Statement(db_, "DELETE FROM segments WHERE segment_id = ?1").bind(segment_id).run();
}

std::set<std::string> SqliteBackend::anchored_segments() {
  Statement s(db_, "SELECT DISTINCT segment_id FROM anchors");
  s.bind();
  std::set<std::string> out;
  while (s.step()) {
    std::string id;
    s.text_into(0, id);
    out.insert(std::move(id));
  }
  return out;
}

std::vector<Backend::SegmentRecord> SqliteBackend::segments() {
  Statement s(db_, "SELECT segment_id, digest, file, before, project_id, streams, events, bytes, "
                   "archived_at FROM segments ORDER BY archived_at, segment_id");
  s.bind();
  std::vector<SegmentRecord> out;
  while (s.step()) {
    SegmentRecord r;
    s.text_into(0, r.segment_id);
    s.blob_into(1, r.digest);
    s.text_into(2, r.file);
    r.before = s.i64(3);
    s.text_into(4, r.project_id);
    r.streams = s.i64(5);
    r.events = s.i64(6);
    r.bytes = s.i64(7);
    r.archived_at = s.i64(8);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace cplane::storage::sqlite
