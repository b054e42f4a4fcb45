// The archive's own events: the segment's record and the carried clocks
// (recovery/archive_events.hpp).
#include "recovery/archive_events.hpp"

#include <fmt/format.h>

#include "events/errors.hpp"
#include "verify/flow_check.hpp"
#include "verify/replay.hpp"

namespace cplane {

std::optional<Event> decide_carry_clock(const LimitRow& row, const std::string& segment_id,
                                        Micros now) {
  if (row.removed || row.rate_count == 0) return std::nullopt;
  return Event{now, "", "", "", LimitClockCarried{row.key, row.tat, segment_id}};
}

std::optional<Event> decide_release_key(const storage::StreamAnchor& a, Micros now) {
  if (a.stream_kind != to_string(StreamKind::item) || a.idem_key.empty() ||
      a.idem_key.starts_with("schedule:")) {
    return std::nullopt;
  }
  return Event{now, "", a.project_id, a.stream_id, KeyReleased{a.idem_key}};
}

Event decide_archive_segment(const storage::Backend::SegmentRecord& record,
                             const ArchiveReport& report, Micros now) {
  return Event{now, "", "", "",
               SegmentArchived{record.segment_id, report.digest, record.file, record.before,
                               record.project_id, record.streams, record.events, record.bytes,
                               report.items, report.sessions, report.schedules,
                               report.redacted}};
}

// The limits whose clocks archived claims may have moved: each the log
// knows with a rate (not the rows: a row deleted or edited to no rate
// would carry nothing, and the clock would go back). When the log or the
// rows know any limit, the live log is replayed as verify does (it reads
// every live stream) under the limits' lock (a server's claims of keyed
// items take it before they move a clock, so none moves one until the
// commit), and a limit row that disagrees, or a clock carried before that
// the claims contradict, refuses the archive: it would otherwise carry an
// edited clock into the log, where no replay could find it again. (A
// project's pass needs no check here: the archive keeps its proof live.)
std::vector<LimitRow> clocks_to_carry(storage::Backend& backend) {
  std::string any_key;
  {
    auto cursor = backend.scan_stream(StreamKind::limit);
    storage::RawEvent raw;
    if (cursor->next(raw)) any_key = raw.stream_id;
  }
  if (any_key.empty()) {
    auto cursor = backend.scan_limits();
    LimitRow row;
    if (cursor->next(row)) any_key = row.key;
  }
  if (any_key.empty()) return {};
  (void)backend.find_limit(any_key);  // the limits' lock, on a server
  verify_detail::LogFacts facts;
  std::int64_t read = 0;
  verify_detail::replay_all(backend, nullptr, verify_detail::Reconcile{}, facts, read, {},
                            [](verify_detail::StreamAudit&) {});
  if (facts.item_log_unreadable) {
    throw StorageError(StorageError::Category::corruption,
                       "the live log has unreadable item events, so the rate limits' clocks "
                       "cannot be checked before their claims are archived. Nothing was "
                       "archived; run cplane verify");
  }
  const auto fold = facts.flow.fold(facts.items_archived_until == 0);
  std::vector<LedgerProblem> problems;
  for (const auto& p : fold.problems) {
    if (p.kind == ProblemKind::limit_clock_disagrees) problems.push_back(p);
  }
  verify_detail::check_flow_rows(fold, backend, facts.legacy_archived_until, problems);
  std::erase_if(problems, [](const LedgerProblem& p) {
    return p.kind == ProblemKind::project_row_disagrees;
  });
  if (!problems.empty()) {
    std::vector<std::string> what;
    for (const auto& p : problems) what.push_back(p.detail);
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("the flow rows are not what the log folds to ({}): edited "
                                   "outside cplane. Nothing was archived; run cplane verify, "
                                   "then cplane rebuild",
                                   fmt::join(what, "; ")));
  }
  // The rows, as checked: what verify accepts (the fold's, but for the
  // allowance a store archived before the carried clock keeps).
  std::vector<LimitRow> rated;
  for (const auto& [key, folded] : fold.limits) {
    if (!decide_carry_clock(folded, "", 0)) continue;
    auto row = backend.find_limit(key);
    rated.push_back(row ? std::move(*row) : folded);
  }
  return rated;
}

}  // namespace cplane
