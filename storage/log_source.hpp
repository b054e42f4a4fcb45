// What verify, audit and export read, and nothing more: the log
// (LogSource) and the projected rows it is compared with (RowSource).
//
// Every Backend (storage/backend.hpp) is both, over one connection. An
// export read back by audit (recovery/export.cpp) is only a LogSource: its
// log is the file, and the rows it is compared with, if any, are another
// database's. Both interfaces are read-only, and keep the Backend's
// contract where they share it: scans order ids bytewise (verify's merge
// joins depend on it), seq rises with possible gaps, and every call may
// throw StorageError (corruption, io, unavailable).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/chain.hpp"
#include "events/event.hpp"
#include "projections/rows.hpp"

namespace cplane::storage {

// An event row as stored: the index columns and the canonical body. Verify
// decodes the body and checks the columns against it.
struct RawEvent {
  Seq seq = 0;
  std::string stream_kind;  // as stored: "item", "project", or whatever tampering left
  std::string stream_id;
  std::string item_id;      // "" for events of a project stream
  std::string project_id;
  std::string type;
  Micros at = 0;
  std::string body;         // encoded event (events/codec.hpp)
  // Its place in the hash chain (events/chain.hpp): the revision within its
  // stream (1, 2, ...) and the stored hash (32 bytes, or whatever tampering
  // left).
  std::int64_t revision = 0;
  std::string hash;
  // A redacted event of a segment (archive --redact-payloads): its
  // payload's digest (32 bytes), and the body's payload bytes are filler
  // (events/chain.hpp). Empty for every event of a live store.
  std::string payload_hash;
  // Set when a column is stored with another type than the engine writes
  // (an INTEGER column holding text, an id stored as a BLOB): what it is.
  std::string bad_column;
};

// A stream's head as stored beside the log: its newest revision, that
// event's seq and hash. A cut-off tail disagrees with it.
struct StreamHead {
  std::string stream_kind;
  std::string stream_id;
  std::int64_t revision = 0;
  Seq last_seq = 0;
  std::string hash;
};

// What stays in the live store of a stream that was archived (moved whole
// into a segment file, docs/retention.md): where its chain ended (its last
// revision, seq and hash: a head), every seq it held (so that the log's
// seqs stay accounted for), what it ended as, and the segment that holds
// its events. Its hash (anchor_hash) replaces the head's in the log's
// digest, so that an anchor edited outside cplane disagrees with it.
struct StreamAnchor {
  std::string stream_kind;
  std::string stream_id;
  std::int64_t revision = 0;  // of the stream's last event
  Seq last_seq = 0;
  std::string hash;           // the last event's chain hash (32 bytes)
  std::int64_t events = 0;    // how many events it held
  std::string seqs;           // their seqs, ascending, 8 bytes big-endian each
  std::string project_id;
  std::string state;          // what it ended as: done, failed, closed, cancelled
  std::int64_t fence = 0;     // the highest fence it ever had: never issued again
  std::string idem_key;       // its enqueue key ("" none): keeps deduplicating
  Micros ended_at = 0;        // `at` of its last event
  std::string segment_id;     // the segment file's id (hex)
  std::string segment_digest; // BLAKE2b-256 of the segment file's bytes (32 bytes)
};

// The anchor's hash: BLAKE2b-256 over every field above (domain
// "cplane.anchor.v1"), folded into the log's digest in its head's place.
Hash anchor_hash(const StreamAnchor& anchor);
// Packs and unpacks StreamAnchor::seqs. unpack_seqs: false if the bytes
// are no whole number of seqs.
std::string pack_seqs(const std::vector<Seq>& seqs);
bool unpack_seqs(std::string_view bytes, std::vector<Seq>& out);

// The log as a whole: how many events it holds, its newest seq, and the XOR
// of every stream head's hash. A deleted head disagrees with it.
struct LogDigest {
  std::int64_t events = 0;
  Seq last_seq = 0;
  std::string digest;
};

// An item row as scanned for verify and rebuild. A row whose status column
// holds none of the five statuses, or whose kind or review is none of
// theirs (only tampering does that), is still returned, so that it can be
// reported and repaired: `invalid_*` holds the stored text and that field
// of the row is meaningless.
struct ScannedItem {
  ItemRow row;
  std::string invalid_status;
  std::string invalid_kind;
  std::string invalid_review;
  // priority or terminal_since stored as something the engine never
  // writes (text, a priority beyond 32 bits, a terminal_since of 0 that is
  // not NULL): the allocator's index would read it otherwise than the row.
  std::string invalid_routing;
};

template <class Row>
class Cursor {
 public:
  virtual ~Cursor() = default;
  // Fills `row` with the next row and returns true, or returns false at the end.
  virtual bool next(Row& row) = 0;
};

// The log, read in stream order: what verify replays and export writes.
class LogSource {
 public:
  virtual ~LogSource() = default;

  // A read transaction: one consistent snapshot until commit/rollback. Never
  // waits for a writer. (On a Backend, commit and rollback also end a write
  // transaction.) A source that is no database forwards them to the one
  // whose rows it is compared with, or does nothing.
  virtual void begin_read() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;

  // The heads of one stream kind, ordered by stream id (bytewise); every
  // head whose kind names no kind this build knows, by unfiled_heads().
  virtual std::unique_ptr<Cursor<StreamHead>> scan_heads(StreamKind kind) = 0;
  virtual std::vector<StreamHead> unfiled_heads() = 0;
  // The log's digest, or nullopt when its row is gone (only tampering).
  virtual std::optional<LogDigest> log_digest() = 0;
  // A random id given to the database when it was created (exports name
  // their source by it); "" if it has none.
  virtual std::string database_id() = 0;
  // Every event of one stream kind, ordered by (stream id bytewise, seq).
  virtual std::unique_ptr<Cursor<RawEvent>> scan_stream(StreamKind kind) = 0;
  // Every event whose stream_kind column names no kind this build knows
  // (only tampering, or a newer cplane, files one there), in no particular
  // order. Costs an index seek when there are none, not a scan.
  virtual std::unique_ptr<Cursor<RawEvent>> scan_unfiled() = 0;
  // How many events the log holds (replay progress; not the newest seq).
  virtual std::int64_t event_count() = 0;
  // True when this log's seqs are 1, 2, 3, ... with no gaps (SQLite: a
  // rolled-back transaction takes none), so that a missing seq is
  // evidence; false when gaps are normal (a PostgreSQL sequence).
  virtual bool seqs_dense() { return false; }
  // The anchors of archived streams of one kind (StreamAnchor), ordered by
  // stream id (bytewise). None by default: a log that archives nothing.
  virtual std::unique_ptr<Cursor<StreamAnchor>> scan_anchors(StreamKind kind);
  // What the store recorded of each segment it archived into (its table
  // `segments`), for verify to hold against the anchors; nullopt for a log
  // that keeps no such record (an export file).
  using RecordedSegment = SegmentRow;
  virtual std::optional<std::vector<RecordedSegment>> recorded_segments() { return std::nullopt; }
  // True for a log that holds some streams of a history and not the others
  // (an archive segment): what its streams say of streams it does not hold
  // (the project an item is in, the session that held it, the item a
  // schedule's fire made) is not checked on it, but in the whole history.
  virtual bool partial_history() { return false; }
};

// The projected rows, each table scanned whole in its stream id's order
// (bytewise): what verify compares with the fold of the log.
class RowSource {
 public:
  virtual ~RowSource() = default;

  // Every item row, ordered by item_id.
  virtual std::unique_ptr<Cursor<ScannedItem>> scan_items() = 0;
  // terminal_locks by item id; incident_links by incident id.
  virtual std::unique_ptr<Cursor<TerminalLockRow>> scan_terminal_locks() = 0;
  virtual std::unique_ptr<Cursor<IncidentLinkRow>> scan_incidents() = 0;
  // Every session row, ordered by session id.
  virtual std::unique_ptr<Cursor<SessionRow>> scan_sessions() = 0;
  // Every schedule row, ordered by name.
  virtual std::unique_ptr<Cursor<ScheduleRow>> scan_schedules() = 0;
  // Every limit row (removed ones too), ordered by key.
  virtual std::unique_ptr<Cursor<LimitRow>> scan_limits() = 0;
  // Every project, ordered by project id; every grant, by (project, actor).
  virtual std::vector<ProjectRow> all_projects() = 0;
  virtual std::vector<ProjectActorRow> all_assignments() = 0;
};

}  // namespace cplane::storage
