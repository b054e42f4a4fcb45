// Salvage: every readable event, head and row of a damaged SQLite store,
// copied into a fresh store. It works on a private copy of the damaged file
// (and its WAL), so the damaged file is never written, not even by a WAL
// recovery. Events are read by seq through the table's own b-tree (never an
// index, which may be the damaged part), a range at a time, and one seq at a
// time around a range that fails: a damaged page costs the events on it,
// not the rest of the log.
#include "storage/sqlite/sqlite_salvage.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/errors.hpp"
#include "events/json.hpp"
#include "storage/sqlite/statement.hpp"

namespace cplane::storage {

namespace {

namespace fs = std::filesystem;

constexpr Seq kChunk = 4096;
constexpr int kEmptyChunksPastEnd = 8;  // when the newest seq cannot be read

class Connection {
 public:
  explicit Connection(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("cannot open the copy of the damaged database: {}", message));
    }
    // Checks each cell's size against its page as it is read: garbage in a
    // page is an error, not a wild read.
    sqlite3_exec(db_, "PRAGMA cell_size_check=ON", nullptr, nullptr, nullptr);
  }
  ~Connection() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// Every failure reading the damaged copy is damage: corruption, with
// SQLite's own message (attempt() below skips what it cannot read).
[[noreturn]] void throw_damaged(sqlite3* db, int, const std::string&) {
  throw StorageError(StorageError::Category::corruption, sqlite3_errmsg(db));
}

// One statement on the damaged copy; step() is false at the end, throws on
// any error. Prepared for one use, not kept.
class Query : public sqlite::Statement {
 public:
  Query(sqlite3* db, const char* sql) : Statement(db, sql, throw_damaged, 0) {}
};

RawEvent read_event(const Query& q) {
  RawEvent e;
  e.seq = q.i64(0);
  e.stream_kind = q.text(1);
  e.stream_id = q.text(2);
  e.item_id = q.text(3);
  e.project_id = q.text(4);
  e.type = q.text(5);
  e.at = q.i64(6);
  e.body = q.text(7);
  e.revision = q.i64(8);
  e.hash = q.text(9);
  return e;
}

constexpr const char* kEvents =
    "SELECT seq, stream_kind, stream_id, item_id, project_id, type, at, body, stream_rev, hash "
    "FROM events ";

// Adds [from, to] to a list of seq ranges, merging with the last one.
void note_range(std::vector<std::pair<Seq, Seq>>& ranges, Seq from, Seq to) {
  if (!ranges.empty() && ranges.back().second + 1 == from) {
    ranges.back().second = to;
  } else {
    ranges.emplace_back(from, to);
  }
}

template <class F>
bool attempt(F&& f) {
  try {
    f();
    return true;
  } catch (const StorageError&) {
    return false;
  }
}

}  // namespace

SalvageReport salvage_sqlite(const std::string& damaged, const std::string& scratch,
                             Backend& fresh, const Progress& progress) {
  SalvageReport report;
  std::error_code ec;
  if (!fs::is_regular_file(damaged, ec)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{} is not a file: nothing to recover", damaged));
  }
  // The copy: the damaged file is only ever read.
  struct Scratch {
    std::string path;
    ~Scratch() {
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
    }
  } copy{scratch};
  fs::copy_file(damaged, scratch, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot copy {} to {}: {}", damaged, scratch, ec.message()));
  }
  if (fs::exists(damaged + "-wal", ec)) {
    // Committed transactions may live only in the WAL: a WAL that cannot be
    // copied is a loss nobody would see, so it stops the recovery.
    fs::copy_file(damaged + "-wal", scratch + "-wal", fs::copy_options::overwrite_existing, ec);
    if (ec) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("cannot copy {}-wal (it may hold committed events): {}",
                                     damaged, ec.message()));
    }
  }
  Connection db(scratch);

  bool chained = false;
  attempt([&] {
    Query q(db.get(), "SELECT count(*) FROM pragma_table_info('events') WHERE name = 'hash'");
    chained = q.step() && q.i64(0) == 1;
  });
  if (!chained) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("{}: no events table with a hash chain could be read (the "
                                   "file is not a cplane database of schema 4 or later, or its "
                                   "first pages are damaged): nothing to recover",
                                   damaged));
  }

  // How far the log reaches: its newest seq, else the digest's, else read
  // on until several ranges in a row are empty.
  Seq newest = 0;
  report.newest_readable = attempt([&] {
    Query q(db.get(), "SELECT coalesce(max(seq), 0) FROM events");
    if (q.step()) newest = q.i64(0);
  });
  attempt([&] {
    Query q(db.get(), "SELECT events, last_seq, digest FROM log_digest WHERE shard = 0");
    if (q.step()) {
      report.digest = LogDigest{q.i64(0), q.i64(1), q.text(2)};
      newest = std::max(newest, report.digest->last_seq);
    }
  });

  auto tx = Transaction::write(fresh, Sync::full);
  if (fresh.event_count() != 0) {
    throw InvalidArgument(InvalidArgument::Reason::conflict,
                          "the target database already holds events: recover builds a fresh one");
  }
  Seq max_found = 0;
  auto take = [&](const Query& q) {
    RawEvent e = read_event(q);
    fresh.import_event(e);
    ++report.events;
    max_found = std::max(max_found, e.seq);
  };
  // Seq by seq: a seq whose lookup fails is unreadable, one that is not
  // there is absent.
  auto probe = [&](Seq first, Seq last) {
    for (Seq seq = first; seq <= last; ++seq) {
      bool present = false;
      const bool read = attempt([&] {
        Query q(db.get(), (std::string(kEvents) + "WHERE seq = ?1").c_str());
        q.bind(seq);
        if (q.step()) {
          take(q);
          present = true;
        }
      });
      if (!read) {
        note_range(report.unreadable, seq, seq);
      } else if (!present) {
        note_range(report.absent, seq, seq);
      }
    }
  };
  // The next seq the table holds at or after `from` (a seek: what lies
  // between is absent), 0 when none, nullopt when the seek itself fails.
  auto next_present = [&](Seq from) -> std::optional<Seq> {
    std::optional<Seq> out;
    attempt([&] {
      Query q(db.get(), "SELECT seq FROM events WHERE seq >= ?1 ORDER BY seq LIMIT 1");
      q.bind(from);
      out = q.step() ? q.i64(0) : 0;
    });
    return out;
  };
  int failed_seeks = 0;
  for (Seq next = 1;;) {
    if (newest > 0 && next > newest) break;
    const Seq end = newest > 0 ? std::min(next + kChunk - 1, newest) : next + kChunk - 1;
    // A range in one scan; a seq it skips is looked up on its own.
    const Seq start = next;
    attempt([&] {
      Query q(db.get(), (std::string(kEvents) + "WHERE seq >= ?1 AND seq <= ?2 ORDER BY seq").c_str());
      q.bind(start, end);
      while (q.step()) {
        const Seq seq = q.i64(0);
        if (seq < next || seq > end) continue;  // not in order: damage; looked up below
        if (seq > next) probe(next, seq - 1);
        take(q);
        next = seq + 1;
      }
    });
    if (progress) progress(report.events, 0);
    if (next > end) continue;
    // The scan failed, or stopped short (a damaged page can end one without
    // an error). Seek to the next seq the table holds: the rest of the log
    // goes on from there, however far a (damaged) digest said it reached.
    const auto found = next_present(next);
    if (!found) {
      // The seek fails too: one range seq by seq, then on.
      probe(next, end);
      next = end + 1;
      if (newest == 0 && ++failed_seeks > kEmptyChunksPastEnd) break;
      continue;
    }
    failed_seeks = 0;
    // A short gap is looked up seq by seq (a seq on a damaged page is then
    // unreadable, not absent); a long one, past what a page holds, is absent.
    auto gap = [&](Seq first, Seq last) {
      if (last - first < kChunk) {
        probe(first, last);
      } else {
        note_range(report.absent, first, last);
      }
    };
    if (*found == 0) {  // nothing further
      if (newest > 0 && next <= newest) gap(next, newest);
      break;
    }
    if (*found <= next) {  // there, but the scan did not return it
      probe(next, next);
      next = next + 1;
      continue;
    }
    gap(next, *found - 1);
    next = *found;
  }
  // Seqs absent past the last event found, when the end was not known, are
  // not losses: the log ended there. (Unreadable ones stay: what they held
  // is unknown.)
  if (newest == 0) {
    while (!report.absent.empty() && report.absent.back().first > max_found) report.absent.pop_back();
    if (!report.absent.empty() && report.absent.back().second > max_found) {
      report.absent.back().second = max_found;
    }
  }
  report.newest_seq = std::max(newest, max_found);
  report.heads_readable = attempt([&] {
    Query q(db.get(), "SELECT stream_kind, stream_id, revision, last_seq, hash FROM stream_heads");
    while (q.step()) {
      fresh.put_head({q.text(0), q.text(1), q.i64(2), q.i64(3), q.text(4)});
      ++report.heads;
    }
  });
  // The anchors of archived streams and the record of their segments, as
  // they were (a store before schema 11 has neither): without them the
  // archived keys would stop deduplicating, the archived seqs would look
  // lost, and the segments would belong to no store.
  std::vector<Seq> archived;
  attempt([&] {
    Query q(db.get(), "SELECT stream_kind, stream_id, revision, last_seq, hash, events, seqs, "
                      "project_id, state, fence, idem_key, ended_at, segment_id, segment_digest "
                      "FROM anchors");
    while (q.step()) {
      StreamAnchor a{q.text(0), q.text(1),  q.i64(2),  q.i64(3),  q.text(4),
                     q.i64(5),  q.text(6),  q.text(7), q.text(8), q.i64(9),
                     q.text(10), q.i64(11), q.text(12), q.text(13)};
      std::vector<Seq> seqs;
      if (unpack_seqs(a.seqs, seqs)) archived.insert(archived.end(), seqs.begin(), seqs.end());
      fresh.import_anchor(a);
    }
  });
  attempt([&] {
    Query q(db.get(), "SELECT segment_id, digest, file, before, project_id, streams, events, "
                      "bytes, archived_at FROM segments");
    while (q.step()) {
      fresh.put_segment({q.text(0), q.text(1), q.text(2), q.i64(3), q.text(4), q.i64(5),
                         q.i64(6), q.i64(7), q.i64(8)});
    }
  });
  if (!archived.empty()) {
    // An archived seq is in its segment, not lost.
    std::sort(archived.begin(), archived.end());
    std::vector<std::pair<Seq, Seq>> kept;
    for (auto [first, last] : report.absent) {
      auto it = std::lower_bound(archived.begin(), archived.end(), first);
      for (; it != archived.end() && *it <= last; ++it) {
        if (*it > first) kept.emplace_back(first, *it - 1);
        first = *it + 1;
      }
      if (first <= last) kept.emplace_back(first, last);
    }
    report.absent = std::move(kept);
  }
  {
    // For a stream with events and no head read (the table unreadable, or
    // the row deleted: a writer then refuses the stream), the chain's tip
    // as salvaged stands in (a cut tail can then no longer be seen; the
    // report says so). A head that was read is kept: it bounds the
    // stream's fences. Heads and events are merged on the stream id.
    for (const StreamKind kind : kStreamKinds) {
      std::vector<StreamHead> tips;  // written after the scans end
      {
        auto events = fresh.scan_stream(kind);
        auto heads = fresh.scan_heads(kind);
        StreamHead have;
        bool more_heads = heads->next(have);
        RawEvent e;
        std::optional<StreamHead> tip;
        auto close = [&] {
          if (!tip) return;
          while (more_heads && have.stream_id < tip->stream_id) more_heads = heads->next(have);
          if (!(more_heads && have.stream_id == tip->stream_id)) {
            tips.push_back(*tip);
            if (kind == StreamKind::item) report.guessed_heads.push_back(tip->stream_id);
          }
        };
        while (events->next(e)) {
          if (tip && tip->stream_id != e.stream_id) close();
          tip = StreamHead{e.stream_kind, e.stream_id, e.revision, e.seq, e.hash};
        }
        close();
      }
      for (const auto& t : tips) fresh.put_head(t);
      // A head put back from its stream's tip cannot show a tail cut with
      // it: the report says the heads were not all read (recover exits 6).
      if (!tips.empty()) report.heads_readable = false;
    }
  }
  if (!report.digest) {
    // The digest is gone: the one the heads give, so that the log goes on
    // from what it holds (and no seq it reached is handed out again).
    Hash digest{};
    std::int64_t heads = 0;
    for (const StreamKind kind : kStreamKinds) {
      auto cursor = fresh.scan_heads(kind);
      StreamHead h;
      Hash one{};
      while (cursor->next(h)) {
        if (hash_from_bytes(h.hash, one)) xor_into(digest, one);
        ++heads;
      }
    }
    fresh.put_log_digest({report.events, report.newest_seq,
                          std::string(as_bytes(digest))});
  } else {
    fresh.put_log_digest(*report.digest);
  }
  // Rows as they were, where readable: rebuild keeps any that show the log
  // lost events (a fence above the log's), so no fence is handed out twice.
  // (A database of schema 4 has no forge columns: its rows are read without.)
  const bool forge_columns = attempt([&] {
    Query q(db.get(),
            "SELECT kind, session, head_moved, priority, terminal_since FROM items LIMIT 0");
  });
  report.rows_readable = attempt([&] {
    Query q(db.get(),
            forge_columns
                ? "SELECT item_id, project_id, payload, status, owner, fence, attempts, "
                  "lease_expires_at, detail, queued_seq, queued_at, updated_at, last_seq, kind, "
                  "ref, head, review, author, session, actions, expected_head, close_reason, "
                  "head_moved, priority, terminal_since, terminal_reason FROM items"
                : "SELECT item_id, project_id, payload, status, owner, fence, attempts, "
                  "lease_expires_at, detail, queued_seq, queued_at, updated_at, last_seq "
                  "FROM items");
    while (q.step()) {
      ItemRow r;
      r.item_id = q.text(0);
      r.project_id = q.text(1);
      r.payload = q.text(2);
      auto status = parse_item_status(q.text(3));
      if (!status) continue;  // a row that is not one: the fold decides
      r.status = *status;
      r.owner = q.text(4);
      r.fence = static_cast<Fence>(q.i64(5));
      r.attempts = static_cast<std::uint32_t>(q.i64(6));
      r.lease_expires_at = q.i64(7);
      r.detail = q.text(8);
      r.queued_seq = q.i64(9);
      r.queued_at = q.i64(10);
      r.updated_at = q.i64(11);
      r.last_seq = q.i64(12);
      if (forge_columns) {
        try {
          r.kind = parse_work_kind(q.text(13));
          r.review = parse_review_state(q.text(16));
        } catch (const InvalidArgument&) {
          continue;  // not a row cplane wrote: the fold decides
        }
        r.ref = q.text(14);
        r.head = q.text(15);
        r.author = q.text(17);
        r.session = q.text(18);
        r.actions = split_list(q.text(19));
        r.head_moved = q.i64(22) != 0;
        r.priority = static_cast<std::int32_t>(q.i64(23));
        r.terminal_since = q.i64(24);
        r.terminal_reason = q.text(25);
        r.expected_head = q.text(20);
        r.close_reason = q.text(21);
      }
      // Written as read (another connection: the copy is only read), so
      // that memory stays flat. A scan that fails midway keeps what it
      // copied; the rest is rebuilt from the log.
      fresh.put_item(r);
      ++report.rows;
    }
  });
  attempt([&] {
    Query q(db.get(),
            "SELECT session_id, actor, opened_at, last_seen_at, closed_at, last_seq FROM sessions");
    std::vector<SessionRow> rows;
    while (q.step()) {
      rows.push_back({q.text(0), q.text(1), q.i64(2), q.i64(3), q.i64(4), q.i64(5)});
    }
    for (const auto& r : rows) fresh.put_session(r);
  });
  attempt([&] {
    Query q(db.get(), "SELECT project_id, title, status, created_at, last_seq FROM projects");
    std::vector<ProjectRow> rows;
    while (q.step()) rows.push_back({q.text(0), q.text(1), q.text(2), q.i64(3), q.i64(4)});
    for (const auto& r : rows) fresh.put_project(r);
  });
  attempt([&] {
    Query q(db.get(), "SELECT project_id, actor, assigned_at, last_seq FROM project_actors");
    std::vector<ProjectActorRow> rows;
    while (q.step()) rows.push_back({q.text(0), q.text(1), q.i64(2), q.i64(3)});
    for (const auto& r : rows) fresh.put_assignment(r);
  });
  tx.commit();
  return report;
}

}  // namespace cplane::storage
