// Where the sibling layers meet: commands/ (the store) and verify/ (replay
// and compare, rebuild) do not depend on each other; the library's verify
// and rebuild on a ControlStore join them here.
#include <cplane/verify.hpp>

#include "commands/backend_access.hpp"
#include "recovery/export.hpp"
#include "recovery/recover.hpp"
#include "verify/verify.hpp"

namespace cplane {

std::vector<LedgerProblem> verify_ledger(ControlStore& store, const Progress& progress) {
  return BackendAccess::with(store, [&](storage::Backend& backend) {
    return verify_ledger(backend, progress);
  });
}

RebuildReport rebuild(ControlStore& store, const RebuildOptions& options,
                      const Progress& progress) {
  return BackendAccess::with(store, [&](storage::Backend& backend) {
    return rebuild(backend, options.dry_run, progress);
  });
}

ExportSummary export_log(ControlStore& store, std::FILE* out, const ExportOptions& options) {
  return BackendAccess::with(store, [&](storage::Backend& backend) {
    return export_log(backend, out, options);
  });
}

std::int64_t verify_ledger_each(ControlStore& store,
                                const std::function<void(const LedgerProblem&)>& on_problem,
                                const Progress& progress) {
  std::int64_t count = 0;
  BackendAccess::with(store, [&](storage::Backend& backend) {
    verify_ledger(backend, progress, nullptr, true, [&](LedgerProblem&& p) {
      ++count;
      on_problem(p);
    });
  });
  return count;
}

AuditReport audit_export(std::FILE* in, ControlStore* against, const Progress& progress) {
  if (against == nullptr) return audit_export(in, static_cast<storage::Backend*>(nullptr), progress);
  return BackendAccess::with(*against, [&](storage::Backend& backend) {
    return audit_export(in, &backend, progress);
  });
}

RestoreReport restore_export(std::FILE* in, ControlStore& fresh, const Progress& progress) {
  return BackendAccess::with(fresh, [&](storage::Backend& backend) {
    return restore_export(in, backend, progress);
  });
}

RecoverReport recover(const std::string& damaged_path, ControlStore& fresh,
                      const std::string& scratch_path, const Progress& progress) {
  return BackendAccess::with(fresh, [&](storage::Backend& backend) {
    return recover_store(damaged_path, scratch_path, backend, progress);
  });
}

}  // namespace cplane
