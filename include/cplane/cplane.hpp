// cplane: a durable control plane for a fleet of workers that share work.
//
//   #include <cplane/cplane.hpp>
//   cplane::ControlStore store{"control.db", {.lease = std::chrono::seconds{900}}};
//   store.create_project("alpha", "Project Alpha", "open");
//   auto id = store.enqueue("alpha", R"({"task": "summarise the report"})");
//   auto claim = store.claim("worker-1");   // std::optional<ClaimedItem>
//   store.finish(claim->item_id, claim->fence, cplane::Outcome::done);
//   assert(cplane::verify_ledger(store).empty());
//
// This umbrella header is where the sibling layers meet: commands/ (the store)
// and verify/ (replay-and-compare, rebuild) do not depend on each other.
#pragma once

#include "commands/control_store.hpp"
#include "events/errors.hpp"
#include "events/event.hpp"
#include "verify/verify.hpp"

namespace cplane {

// Replays the store's log and compares it with its rows; empty when they agree.
inline std::vector<LedgerProblem> verify_ledger(ControlStore& store,
                                                const Progress& progress = {}) {
  return store.with_backend(
      [&](storage::Backend& backend) { return verify_ledger(backend, progress); });
}

// Rewrites the store's rows from its log (see verify/verify.hpp). A dry run
// reads one snapshot and works on a read-only store.
inline RebuildReport rebuild(ControlStore& store, bool dry_run = false,
                             const Progress& progress = {}) {
  return store.with_backend(
      [&](storage::Backend& backend) { return rebuild(backend, dry_run, progress); });
}

}  // namespace cplane
