// verify's and rebuild's replay of the log (internal to verify/).
//
// The log is read stream by stream: for each stream kind, one scan of its
// events in (stream id, seq) order, and for each projection of that kind one
// scan of its rows in (stream id, key) order. The three are merged on the
// stream id, so that only one stream's events and rows are in memory at a
// time. For each stream:
//   * the audit folds its events through `apply` and checks what only the
//     log can show (creation, terminal events, fences, leases), visiting
//     every event kind exhaustively (verify/stream_audit.hpp,
//     verify/event_checks.hpp);
//   * each projection compares the rows the fold made with the stored rows
//     of that stream, field by field, and names a problem kind for each
//     difference (verify), or lists the row to write (rebuild). A
//     projection is a descriptor (verify/descriptors.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/ledger.hpp>

#include "storage/backend.hpp"
#include "storage/log_source.hpp"
#include "verify/stream_audit.hpp"
#include "verify/verify.hpp"

namespace cplane::verify_detail {

// What to do with one projection's rows of one stream.
struct Reconcile {
  std::vector<LedgerProblem>* problems = nullptr;  // verify
  bool compare_rows = true;  // verify: false checks only what the log says
  // verify: the stream each problem is about, one entry per problem.
  std::vector<std::pair<StreamKind, std::string>>* about = nullptr;
  RebuildReport* report = nullptr;                 // rebuild
  // rebuild, not dry: where each change is written as soon as it is known
  // (memory stays flat). Only the rows of the stream just merged are
  // written, which every row cursor has already passed.
  storage::Backend* write_to = nullptr;
  // recover: the log is known to be damaged; how far its fences may reach.
  const SalvageBounds* bounds = nullptr;
};

// Replays every stream kind in kStreamKinds' order: projects and sessions
// first (items are checked against their grants and lives), then items,
// incidents and schedules, then the events filed under no kind, and the log
// against its digest. `rows`: the stored rows each projection is merged
// with (null: none, as for an export audited alone). `on_stream(audit)`
// sees each stream's audit (its log problems) before its rows are
// reconciled. The caller holds the read (or write) transaction.
void replay_all(storage::LogSource& log, storage::RowSource* rows, const Reconcile& r,
                LogFacts& facts, std::int64_t& events_read, const Progress& progress,
                const std::function<void(StreamAudit&)>& on_stream);

}  // namespace cplane::verify_detail
