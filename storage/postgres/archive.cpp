// Retention on PostgreSQL (docs/retention.md): the anchors of archived
// streams and the record of their segments, as on SQLite (tables anchors and
// segments, schema version 5). Not a hot path.
#include <map>
#include <set>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "storage/postgres/internal.hpp"

namespace cplane::storage::postgres {

namespace {

constexpr const char* kAnchorColumns =
    "stream_kind, stream_id, revision, last_seq, hash, events, seqs, project_id, state, fence, "
    "idem_key, ended_at, segment_id, segment_digest";

void fill_anchor(const Result& r, int i, StreamAnchor& a) {
  a.stream_kind = r.text(i, 0);
  a.stream_id = r.text(i, 1);
  a.revision = r.i64(i, 2);
  a.last_seq = r.i64(i, 3);
  a.hash = r.bytes(i, 4);
  a.events = r.i64(i, 5);
  a.seqs = r.bytes(i, 6);
  a.project_id = r.text(i, 7);
  a.state = r.text(i, 8);
  a.fence = r.i64(i, 9);
  a.idem_key = r.null(i, 10) ? std::string() : r.text(i, 10);
  a.ended_at = r.i64(i, 11);
  a.segment_id = r.text(i, 12);
  a.segment_digest = r.bytes(i, 13);
}

std::optional<StreamAnchor> one_anchor(const Result& r) {
  if (r.rows() == 0) return std::nullopt;
  StreamAnchor a;
  fill_anchor(r, 0, a);
  return a;
}

}  // namespace

std::unique_ptr<Cursor<StreamAnchor>> PostgresBackend::scan_anchors(StreamKind kind) {
  return cursor<StreamAnchor>(
      fmt::format("SELECT {} FROM anchors WHERE stream_kind = $1 ORDER BY stream_id",
                  kAnchorColumns),
      Params().text(to_string(kind)), fill_anchor);
}

std::vector<std::string> PostgresBackend::ended_streams(StreamKind kind, Micros before,
                                                        const std::string* project_id,
                                                        std::size_t limit) {
  // A scan of the rows: archive runs seldom, and an index on the end time
  // would cost every finish an index write.
  const char* select = nullptr;
  switch (kind) {
    case StreamKind::item:
      select = "SELECT item_id FROM items WHERE status IN ('done', 'failed', 'closed', "
               "'cancelled') AND updated_at < $1 AND ($2::text IS NULL OR project_id = $2::text) "
               "ORDER BY item_id";
      break;
    case StreamKind::session:
      if (project_id != nullptr) return {};  // a session is no project's
      select = "SELECT session_id FROM sessions WHERE closed_at IS NOT NULL AND closed_at < $1 "
               "AND $2::text IS NULL ORDER BY session_id";
      break;
    case StreamKind::schedule:
      select = "SELECT name FROM schedules WHERE removed AND updated_at < $1 AND ($2::text IS "
               "NULL OR project_id = $2::text) ORDER BY name";
      break;
    default:
      return {};
  }
  Params params;
  params.i64(before);
  if (project_id != nullptr) {
    params.text(*project_id);
  } else {
    params.null();
  }
  params.i64(static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  // In the archive's transaction the rows are locked here, all at once
  // (waiting for any writer that holds one, as long as it takes): a row a
  // concurrent redrive changed is read again and left out when it no
  // longer matches, and the archive's later reads of each row wait for
  // nothing (a timed wait would abort a large archive on a busy server).
  Result r = run(fmt::format("{} LIMIT $3{}", select, writing_ ? " FOR UPDATE" : ""),
                 std::move(params));
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(r.rows()));
  for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
  return out;
}

void PostgresBackend::archive_stream(const StreamAnchor& anchor) {
  // The head locked: an append to this stream (a redrive of a failed item)
  // waits for the archive and then finds the stream gone.
  Result head = run("SELECT revision, last_seq, hash FROM stream_heads WHERE stream_kind = $1 "
                    "AND stream_id = $2 FOR UPDATE",
                    Params().text(anchor.stream_kind).text(anchor.stream_id));
  const bool agrees = head.rows() == 1 && head.i64(0, 0) == anchor.revision &&
                      head.i64(0, 1) == anchor.last_seq && head.bytes(0, 2) == anchor.hash;
  Hash head_hash{};
  if (!agrees || !hash_from_bytes(anchor.hash, head_hash)) {
    throw StorageError(Category::corruption,
                       fmt::format("the head of {} {} is not where its events end: the log "
                                   "changed under the archive, or was edited outside cplane "
                                   "(run cplane verify); nothing was archived",
                                   anchor.stream_kind, anchor.stream_id));
  }
  Result dropped = run("WITH d AS (DELETE FROM events WHERE stream_kind = $1 AND stream_id = $2 "
                       "RETURNING 1) SELECT count(*) FROM d",
                       Params().text(anchor.stream_kind).text(anchor.stream_id));
  if (dropped.i64(0, 0) != anchor.events) {
    throw StorageError(Category::corruption,
                       fmt::format("{} {} holds {} event(s), not the {} its segment holds: "
                                   "nothing was archived",
                                   anchor.stream_kind, anchor.stream_id, dropped.i64(0, 0),
                                   anchor.events));
  }
  // These two go with the next statement's round trip (the next stream's
  // reads, or the commit).
  defer("DELETE FROM stream_heads WHERE stream_kind = $1 AND stream_id = $2",
        Params().text(anchor.stream_kind).text(anchor.stream_id));
  import_anchor(anchor);
  // The anchor stands in the digest where the head stood (with the
  // commit's digest update; the event count is unchanged).
  if (!delta_) delta_.emplace();
  xor_into(delta_->digest, head_hash);
  xor_into(delta_->digest, anchor_hash(anchor));
}

void PostgresBackend::archive_streams(const std::vector<StreamAnchor>& anchors) {
  // What archive_stream does, for up to kChunk streams of one kind at a
  // time: their heads locked and checked in one statement, their events
  // deleted and counted in another; the heads' delete and the anchors go
  // with the next round trip. (One stream at a time took two round trips
  // each: 10^5 streams, 40 s on a local server.)
  constexpr std::size_t kChunk = 1000;
  std::size_t at = 0;
  while (at < anchors.size()) {
    const std::string& kind = anchors[at].stream_kind;
    std::size_t end = at;
    std::vector<std::string> ids;
    std::map<std::string, const StreamAnchor*, std::less<>> by_id;
    while (end < anchors.size() && end - at < kChunk && anchors[end].stream_kind == kind) {
      ids.push_back(anchors[end].stream_id);
      by_id.emplace(anchors[end].stream_id, &anchors[end]);
      ++end;
    }
    auto refuse = [&](const std::string& id) {
      return StorageError(Category::corruption,
                          fmt::format("the head of {} {} is not where its events end: the log "
                                      "changed under the archive, or was edited outside cplane "
                                      "(run cplane verify); nothing was archived",
                                      kind, id));
    };
    const std::string list = array_literal(ids);
    Result heads = run("SELECT stream_id, revision, last_seq, hash FROM stream_heads WHERE "
                       "stream_kind = $1 AND stream_id = ANY($2::text[]) FOR UPDATE",
                       Params().text(kind).text(list));
    if (heads.rows() != static_cast<int>(ids.size())) {
      std::set<std::string, std::less<>> found;
      for (int i = 0; i < heads.rows(); ++i) found.insert(heads.text(i, 0));
      for (const auto& id : ids) {
        if (!found.contains(id)) throw refuse(id);
      }
    }
    if (!delta_) delta_.emplace();
    for (int i = 0; i < heads.rows(); ++i) {
      const auto it = by_id.find(heads.text(i, 0));
      Hash head_hash{};
      if (it == by_id.end() || heads.i64(i, 1) != it->second->revision ||
          heads.i64(i, 2) != it->second->last_seq || heads.bytes(i, 3) != it->second->hash ||
          !hash_from_bytes(it->second->hash, head_hash)) {
        throw refuse(heads.text(i, 0));
      }
      // The anchor stands in the digest where the head stood (with the
      // commit's digest update; the event count is unchanged).
      xor_into(delta_->digest, head_hash);
      xor_into(delta_->digest, anchor_hash(*it->second));
    }
    Result dropped = run("WITH d AS (DELETE FROM events WHERE stream_kind = $1 AND stream_id = "
                         "ANY($2::text[]) RETURNING stream_id) SELECT stream_id, count(*) FROM d "
                         "GROUP BY stream_id",
                         Params().text(kind).text(list));
    std::size_t counted = 0;
    for (int i = 0; i < dropped.rows(); ++i) {
      const auto it = by_id.find(dropped.text(i, 0));
      if (it != by_id.end() && dropped.i64(i, 1) == it->second->events) ++counted;
    }
    if (counted != ids.size()) {
      throw StorageError(Category::corruption,
                         fmt::format("{} of {} {} stream(s) do not hold the events their "
                                     "segment holds: nothing was archived",
                                     ids.size() - counted, ids.size(), kind));
    }
    defer("DELETE FROM stream_heads WHERE stream_kind = $1 AND stream_id = ANY($2::text[])",
          Params().text(kind).text(list));
    for (std::size_t i = at; i < end; ++i) import_anchor(anchors[i]);
    at = end;
  }
}

void PostgresBackend::import_anchor(const StreamAnchor& anchor) {
  defer(fmt::format("INSERT INTO anchors ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                  "$11, $12, $13, $14)",
                  kAnchorColumns),
      Params()
          .text(anchor.stream_kind)
          .text(anchor.stream_id)
          .i64(anchor.revision)
          .i64(anchor.last_seq)
          .bytes(anchor.hash)
          .i64(anchor.events)
          .bytes(anchor.seqs)
          .text(anchor.project_id)
          .text(anchor.state)
          .i64(anchor.fence)
          .text_or_null(anchor.idem_key)
          .i64(anchor.ended_at)
          .text(anchor.segment_id)
          .bytes(anchor.segment_digest));
}

void PostgresBackend::delete_anchor(const StreamRef& stream) {
  run("DELETE FROM anchors WHERE stream_kind = $1 AND stream_id = $2",
      Params().text(to_string(stream.kind)).text(stream.id));
}

std::optional<StreamAnchor> PostgresBackend::find_anchor(const StreamRef& stream) {
  return one_anchor(
      run(fmt::format("SELECT {} FROM anchors WHERE stream_kind = $1 AND stream_id = $2",
                      kAnchorColumns),
          Params().text(to_string(stream.kind)).text(stream.id)));
}

std::optional<StreamAnchor> PostgresBackend::find_anchor_by_key(const std::string& project_id,
                                                                std::string_view key) {
  return one_anchor(
      run(fmt::format("SELECT {} FROM anchors WHERE project_id = $1 AND idem_key = $2",
                      kAnchorColumns),
          Params().text(project_id).text(key)));
}

void PostgresBackend::put_segment(const SegmentRecord& r) {
  run("INSERT INTO segments (segment_id, digest, file, before, project_id, streams, events, "
      "bytes, archived_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (segment_id) "
      "DO UPDATE SET digest = EXCLUDED.digest, file = EXCLUDED.file, before = EXCLUDED.before, "
      "project_id = EXCLUDED.project_id, streams = EXCLUDED.streams, events = EXCLUDED.events, "
      "bytes = EXCLUDED.bytes, archived_at = EXCLUDED.archived_at",
      Params()
          .text(r.segment_id)
          .bytes(r.digest)
          .text(r.file)
          .i64(r.before)
          .text(r.project_id)
          .i64(r.streams)
          .i64(r.events)
          .i64(r.bytes)
          .i64(r.archived_at));
}

void PostgresBackend::delete_segment(const std::string& segment_id) {
  run("DELETE FROM segments WHERE segment_id = $1", Params().text(segment_id));
}

std::set<std::string> PostgresBackend::anchored_segments() {
  Result r = run("SELECT DISTINCT segment_id FROM anchors");
  std::set<std::string> out;
  for (int i = 0; i < r.rows(); ++i) out.insert(r.text(i, 0));
  return out;
}

std::vector<Backend::SegmentRecord> PostgresBackend::segments() {
  Result r = run("SELECT segment_id, digest, file, before, project_id, streams, events, bytes, "
                 "archived_at FROM segments ORDER BY archived_at, segment_id");
  std::vector<SegmentRecord> out;
  for (int i = 0; i < r.rows(); ++i) {
    SegmentRecord s;
    s.segment_id = r.text(i, 0);
    s.digest = r.bytes(i, 1);
    s.file = r.text(i, 2);
    s.before = r.i64(i, 3);
    s.project_id = r.text(i, 4);
    s.streams = r.i64(i, 5);
    s.events = r.i64(i, 6);
    s.bytes = r.i64(i, 7);
    s.archived_at = r.i64(i, 8);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace cplane::storage::postgres
