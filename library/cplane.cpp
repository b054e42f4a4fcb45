// Where the sibling layers meet: commands/ (the store) and verify/ (replay
// and compare, rebuild) do not depend on each other; the library's verify
// and rebuild on a ControlStore join them here.
#include <cplane/verify.hpp>

#include "commands/backend_access.hpp"
#include "verify/verify.hpp"

namespace cplane {

std::vector<LedgerProblem> verify_ledger(ControlStore& store, const Progress& progress) {
  return BackendAccess::with(store, [&](storage::Backend& backend) {
    return verify_ledger(backend, progress);
  });
}

RebuildReport rebuild(ControlStore& store, bool dry_run, const Progress& progress) {
  return BackendAccess::with(store, [&](storage::Backend& backend) {
    return rebuild(backend, dry_run, progress);
  });
}

}  // namespace cplane
