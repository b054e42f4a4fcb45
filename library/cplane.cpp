// Where the sibling layers meet: commands/ (the store) and verify/ (replay
// and compare, rebuild) do not depend on each other; the library's verify
// and rebuild on a ControlStore join them here.
#include <cplane/verify.hpp>

#include "commands/backend_access.hpp"
#include "events/chain.hpp"
#include "events/codec.hpp"
#include "recovery/archive.hpp"
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

ArchiveReport archive(ControlStore& store, const ArchiveOptions& options) {
  return BackendAccess::with(
      store, [&](storage::Backend& backend) { return archive_streams(backend, options); });
}

std::vector<ArchivedSegment> archived_segments(ControlStore& store) {
  return BackendAccess::with(store, [&](storage::Backend& backend) {
    auto tx = storage::Transaction::read(backend);
    std::vector<ArchivedSegment> out;
    // A segment no anchor names any more had its streams brought back by a
    // restore: its record stays (its event says the archive happened), but
    // nothing of it is archived now.
    const auto anchored = backend.anchored_segments();
    for (const auto& r : backend.segments()) {
      if (!anchored.contains(r.segment_id)) continue;
      Hash h{};
      out.push_back({r.segment_id, hash_from_bytes(r.digest, h) ? to_hex(h) : "", r.file,
                     r.project_id, r.before, r.archived_at, r.streams, r.events, r.bytes});
      // How many payloads it redacted: its segment_archived says.
      for (const auto& raw : backend.stream_events({StreamKind::segment, r.segment_id})) {
        try {
          const Event e = decode(raw.body);
          if (const auto* a = std::get_if<SegmentArchived>(&e.body)) out.back().redacted = a->redacted;
        } catch (const std::exception&) {
          // unreadable: verify names it; stats says "not known"
        }
      }
    }
    tx.commit();
    return out;
  });
}

SegmentCheck verify_segment(ControlStore& store, const std::string& file) {
  return BackendAccess::with(
      store, [&](storage::Backend& backend) { return check_segment(backend, file); });
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

RestoreReport restore_export(std::FILE* in, ControlStore& fresh, const Progress& progress,
                             const std::vector<std::FILE*>& segments) {
  return BackendAccess::with(fresh, [&](storage::Backend& backend) {
    return restore_export(in, backend, progress, segments);
  });
}

RecoverReport recover(const std::string& damaged_path, ControlStore& fresh,
                      const std::string& scratch_path, const Progress& progress) {
  return BackendAccess::with(fresh, [&](storage::Backend& backend) {
    return recover_store(damaged_path, scratch_path, backend, progress);
  });
}

}  // namespace cplane
