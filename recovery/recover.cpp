#include "recovery/recover.hpp"

#include "storage/sqlite/sqlite_salvage.hpp"
#include "verify/verify.hpp"

namespace cplane {

RecoverReport recover_store(const std::string& damaged, const std::string& scratch,
                            storage::Backend& fresh, const Progress& progress) {
  const auto salvaged = storage::salvage_sqlite(damaged, scratch, fresh, progress);
  RecoverReport report;
  report.events = salvaged.events;
  report.heads = salvaged.heads;
  report.rows = salvaged.rows;
  report.newest_seq = salvaged.newest_seq;
  report.heads_readable = salvaged.heads_readable;
  report.rows_readable = salvaged.rows_readable;
  report.digest_readable = salvaged.digest.has_value();
  report.unreadable = salvaged.unreadable;
  report.absent = salvaged.absent;
  // Rows from the salvaged log; rows that show it lost events stay as they
  // were, so that no fence is handed out twice.
  SalvageBounds bounds;
  bounds.unbounded = salvaged.guessed_heads;
  for (const auto* ranges : {&salvaged.unreadable, &salvaged.absent}) {
    for (const auto& [first, last] : *ranges) bounds.lost_events += static_cast<Fence>(last - first + 1);
  }
  report.rebuild = rebuild(fresh, false, progress, bounds);
  // What the new database's log shows on its own: every stream that lost
  // events (or whose events could not be verified) is named.
  report.problems = verify_ledger(fresh, progress);
  return report;
}

}  // namespace cplane
