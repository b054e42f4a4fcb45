// verify and rebuild on a store: the log is the truth, the rows a cache of
// its fold.
#pragma once

#include <cstdio>
#include <functional>

#include <cplane/ledger.hpp>
#include <cplane/store.hpp>

namespace cplane {

// Replays the store's log through the same fold the commands use and
// compares it with its rows, field by field, in one snapshot; empty when
// they agree. Memory does not grow with the log. Throws StorageError if the
// database cannot be read; every problem in its contents is reported, never
// thrown. A call like any other: refused (InvalidArgument) while another
// thread is in a call on the store.
std::vector<LedgerProblem> verify_ledger(ControlStore& store, const Progress& progress = {});

// The same, handing each problem to `on_problem`, in order, once the replay
// is done; returns how many there were. Its memory stays flat however many
// problems there are (they wait in a temporary file): the form for logs
// with very many (cplane verify uses it).
std::int64_t verify_ledger_each(ControlStore& store,
                                const std::function<void(const LedgerProblem&)>& on_problem,
                                const Progress& progress = {});

struct RebuildOptions {
  bool dry_run = false;  // report the changes, write nothing
};

// Rewrites every row that differs from the fold of the log, in one write
// transaction, as it goes (memory stays flat); with options.dry_run, reports the
// same changes, writes nothing, reads one snapshot and works on a read-only
// store. Throws RebuildRefused (a refusal, not a StorageError: nothing
// changed, the reasons listed) when the log fails its own checks: a broken hash chain, an unreadable event,
// an index column that files an event elsewhere than its body, a fence that
// does not rise. Rows folded from such a log would be wrong. It never
// lowers a row's fence or moves it back in time (report.kept).
RebuildReport rebuild(ControlStore& store, const RebuildOptions& options = {},
                      const Progress& progress = {});

// Writes the store's log (one snapshot; with options.since, only the events
// after that seq) to `out` as a stream of Cap'n Proto messages (the export
// format): a header, each stream's events and head, a footer
// with the file's hash. StorageError (io) when `out` cannot be written.
ExportSummary export_log(ControlStore& store, std::FILE* out, const ExportOptions& options = {});

// Replays an export with no database: its integrity, the hash chain, and
// every check verify makes of the log on its own; with `against`, the rows
// of that store too, exactly as verify compares them. StorageError
// (corruption) for a file that is not an export, is truncated or damaged;
// (incompatible) for one a newer cplane wrote.
AuditReport audit_export(std::FILE* in, ControlStore* against = nullptr,
                         const Progress& progress = {});

// Builds `fresh` (a store with no events) from a whole export: the events
// with their hashes, the heads and digest, then the rows by rebuild.
// InvalidArgument for a partial export or a store that has events;
// RebuildRefused when the exported log fails its own checks.
// `segments`: archive segments of the exported store (cplane archive),
// whose streams come back whole in place of their anchors, so that the
// restored store holds the full history; InvalidArgument for a segment of
// another store, or one the export's anchors do not name, or whose bytes
// are not the ones they name. A segment whose payloads are redacted
// (archive --redact-payloads) cannot come back into a live log: its
// streams are checked against the anchors, which stay (kept_anchored).
RestoreReport restore_export(std::FILE* in, ControlStore& fresh, const Progress& progress = {},
                             const std::vector<std::FILE*>& segments = {});

// Moves every item stream that ended (done, failed, closed, cancelled)
// before options.before out of the live log into a segment file at
// options.file, in the export format, and leaves an anchor per stream
// (docs/retention.md). All or nothing: the segment is written to
// FILE.tmp, synced, renamed to FILE and its folder synced, then one write
// transaction (held throughout, so nothing changes meanwhile) swaps the
// streams' events, heads and rows for their anchors; on any failure FILE
// is removed and the store is as it was. InvalidArgument, with nothing
// written, for a time in the future or not positive, no stream that
// ended before it, a FILE (or FILE.tmp) that exists, a folder that is not
// writable, a store whose engine does not archive yet; NotFound for an
// unknown project; StorageError when the file cannot be written.
ArchiveReport archive(ControlStore& store, const ArchiveOptions& options);

// Checks a segment file against `store`: the file passes audit on its own
// (its chain, its footer, its digest), was written by this store (its
// source database id), its bytes are those of a segment the store
// recorded (BLAKE2b-256), and each stream it holds ends where its anchor
// says (revision, seq, hash, segment). Every fault is a problem, never
// thrown; StorageError only when the store cannot be read. Changes nothing.
SegmentCheck verify_segment(ControlStore& store, const std::string& file);

// Every segment whose streams are archived (some anchor names it), oldest
// first (one snapshot). A segment whose streams a restore brought back is
// no longer listed: its record stays, as its segment_archived does.
std::vector<ArchivedSegment> archived_segments(ControlStore& store);

// Salvages every readable event (with its hash), head and row of the
// damaged SQLite database at `damaged_path` into `fresh` (a store with no
// events), rebuilds the rows from what was salvaged (keeping rows that show
// the log lost events, so that no fence is handed out twice), and verifies
// the result. The report names every lost seq range and every stream whose
// history lost events or could not be verified. `damaged_path` is never
// written: the work is done on a copy beside `fresh`'s file.
RecoverReport recover(const std::string& damaged_path, ControlStore& fresh,
                      const std::string& scratch_path, const Progress& progress = {});

}  // namespace cplane
