// rebuild (verify/verify.hpp): the replay (verify/replay.hpp) with the rows
// that differ from the fold written over, in one write transaction, unless
// the log fails its own checks.
#include "verify/verify.hpp"

#include <fmt/format.h>

#include "verify/quote.hpp"
#include "verify/replay.hpp"

namespace cplane {

using verify_detail::LogFacts;
using verify_detail::Reconcile;
using verify_detail::replay_all;
using verify_detail::StreamAudit;

RebuildRefused::RebuildRefused(std::vector<LedgerProblem> problems, std::int64_t total)
    : Error(fmt::format(
          "rebuild refused, nothing changed: the log fails its own checks ({} problem(s); the "
          "first: {} {}): rows folded from it would be wrong. Run cplane verify to see them "
          "all; recover with cplane recover, or restore an export",
          total, problems.empty() ? std::string_view() : to_string(problems[0].kind),
          problems.empty() ? "" : problems[0].detail)),
      problems_(std::move(problems)),
      total_(total) {}

namespace {

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress,
                      const SalvageBounds* bounds) {
  // A dry run reads one snapshot like verify: it never waits for, nor holds
  // off, a writer.
  auto tx = dry_run ? storage::Transaction::read(backend)
                    : storage::Transaction::write(backend, storage::Sync::full);
  RebuildReport report;
  report.dry_run = dry_run;
  Reconcile r;
  r.report = &report;
  r.write_to = dry_run ? nullptr : &backend;
  r.bounds = bounds;
  // Rows folded from a log that fails its own checks (a broken chain, an
  // unreadable event, an index column that files an event elsewhere than
  // its body, a fence that does not rise, ...) would be wrong, and could
  // hand a fence out twice: every such problem refuses the rebuild, and the
  // transaction (with what was written so far) is rolled back.
  std::vector<LedgerProblem> refusals;
  std::int64_t refusals_total = 0;
  LogFacts facts;
  replay_all(backend, &backend, r, facts, report.events, progress, [&](StreamAudit& audit) {
    if (audit.stream.kind == StreamKind::item && audit.created) ++report.items;
    for (auto* list : {&audit.chain_problems, &audit.problems}) {
      for (auto& p : *list) {
        ++refusals_total;
        bound(p.detail);
        bound(p.item_id, 256);
        bound(p.project_id, 256);
        if (refusals.size() < kMaxListedChanges) refusals.push_back(std::move(p));
      }
    }
  });
  if (!refusals.empty() && bounds == nullptr) throw RebuildRefused(std::move(refusals), refusals_total);
  if (dry_run) return report;  // the guard rolls back: nothing written
  tx.commit();
  return report;
}

}  // namespace

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress) {
  return rebuild(backend, dry_run, progress, nullptr);
}

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress,
                      const SalvageBounds& salvage) {
  return rebuild(backend, dry_run, progress, &salvage);
}

}  // namespace cplane
