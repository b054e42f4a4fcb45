// verify of a log (storage::LogSource) against rows (storage::RowSource),
// and rebuild on a backend (the public forms, on a ControlStore, are in
// <cplane/verify.hpp>): the log is the truth, the rows a cache of its fold.
//
// verify_ledger replays the log through `apply` (projections/) and compares
// the result with the stored rows, field by field, in one consistent read
// snapshot. It streams both sides in item-id order (a merge join), so its
// memory does not grow with the number of events or items.
//
// rebuild writes the fold's result over the rows in one write transaction.
//
// Inside verify/: the replay both share (replay.hpp), one stream's audit
// (stream_audit.hpp) and its checks per stream kind (event_checks.hpp,
// audit_*.cpp), the projection descriptors (descriptors.hpp), and the
// hash chain's checks (chain_check.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <cplane/ledger.hpp>

#include "projections/rows.hpp"
#include "storage/backend.hpp"
#include "storage/log_source.hpp"

namespace cplane {

// A database's log against its own rows. Throws StorageError if the
// database cannot be read; every problem in its contents is reported, never
// thrown.
std::vector<LedgerProblem> verify_ledger(storage::Backend& backend, const Progress& progress = {});

// A log against rows, each problem handed to `sink` in order once the
// replay is done (memory stays flat: problems wait in a temporary file, not
// in memory), and the summary of the fold. The replay reads in one
// snapshot, `log`'s read transaction, which must cover `rows` (a Backend is
// both; an export's log opens the snapshot of the database its rows come
// from). `rows` null: only what the log says on its own is checked (audit
// of an export with no database), and no row is read.
void verify_ledger(storage::LogSource& log, storage::RowSource* rows, const Progress& progress,
                   LogSummary* summary, const std::function<void(LedgerProblem&&)>& sink);
// The same on one database: its log against its own rows, or (without
// `compare_rows`) alone.
void verify_ledger(storage::Backend& backend, const Progress& progress, LogSummary* summary,
                   bool compare_rows, const std::function<void(LedgerProblem&&)>& sink);

// Rewrites every row that differs from the fold of the log, in one write
// transaction; with dry_run, reports the same changes and writes nothing.
// Throws RebuildRefused (nothing changed) when the log fails its own checks
// (an event that cannot be decoded, a broken chain, ...): a rebuild from a
// damaged log would only spread the damage. StorageError when the database
// cannot be read or written.
RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress = {});

// rebuild for recover: over a log known to be damaged. Nothing refuses;
// rows with no history are kept, as are rows ahead of the log. A history
// that lost events takes its head's revision as its fence (every claim is
// one event). `unbounded`: item streams (in id order) whose head was lost
// too; their fence is raised by `lost_events` (no claim can have handed
// out more fences than the events that were lost).
struct SalvageBounds {
  std::vector<std::string> unbounded;
  Fence lost_events = 0;
};
RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress,
                      const SalvageBounds& salvage);

}  // namespace cplane
