// ControlStore's public calls: each goes to the
// implementation (ControlStore::Impl, commands/control_store.hpp). Split
// from control_store.cpp, which holds the implementation.
#include <fmt/format.h>

#include "commands/control_store.hpp"
#include "commands/internal.hpp"
#include "events/errors.hpp"
#include "storage/backend.hpp"

namespace cplane {

using namespace detail;

// ---- the public calls: each goes to the implementation ---------------------------

void ControlStore::create_project(const std::string& id, const std::string& title,
                                  const std::string& status, std::optional<Micros> now) {
  Impl::of(*this).create_project(id, title, status, now);
}

void ControlStore::grant(const std::string& project_id, const std::string& actor,
                         std::optional<Micros> now) {
  Impl::of(*this).grant(project_id, actor, now);
}

std::vector<std::string> ControlStore::visible_projects(const std::optional<std::string>& actor) {
  return Impl::of(*this).visible_projects(actor);
}

std::string ControlStore::enqueue(const std::string& project_id, const std::string& payload_json,
                                  const std::optional<std::string>& actor,
                                  std::optional<Micros> now) {
  return Impl::of(*this).enqueue(project_id, payload_json, actor, now);
}

std::string ControlStore::enqueue(const std::string& project_id, const std::string& payload_json,
                                  const EnqueueOptions& options) {
  return Impl::of(*this).enqueue(project_id, payload_json, options);
}

std::optional<ClaimedItem> ControlStore::claim(const std::string& owner,
                                               const ClaimOptions& options) {
  return Impl::of(*this).claim(owner, options);
}

void ControlStore::finish(const std::string& item_id, Fence fence, Outcome outcome,
                          const FinishOptions& options) {
  Impl::of(*this).finish(item_id, fence, outcome, options);
}

Micros ControlStore::heartbeat(const std::string& item_id, Fence fence,
                               const LeaseOptions& options) {
  return Impl::of(*this).heartbeat(item_id, fence, options);
}

void ControlStore::release(const std::string& item_id, Fence fence, const std::string& reason,
                           const ReleaseOptions& options) {
  Impl::of(*this).release(item_id, fence, reason, options);
}

std::int64_t ControlStore::expire_leases(std::optional<Micros> now) {
  return Impl::of(*this).expire_leases(now);
}

void ControlStore::open_session(const std::string& session,
                                const std::optional<std::string>& actor,
                                std::optional<Micros> now) {
  Impl::of(*this).open_session(session, actor, now);
}

std::vector<std::pair<std::string, Micros>> ControlStore::session_heartbeat(
    const std::string& session, std::optional<Seconds> lease, std::optional<Micros> now) {
  return Impl::of(*this).session_heartbeat(session, lease, now);
}

std::vector<std::string> ControlStore::close_session(const std::string& session,
                                                     std::optional<Micros> now) {
  return Impl::of(*this).close_session(session, now);
}

std::vector<SessionInfo> ControlStore::sessions(std::optional<Micros> now) {
  return Impl::of(*this).sessions(now);
}

bool ControlStore::observe_head(const std::string& item_id, const std::string& head,
                                std::optional<Micros> now) {
  return Impl::of(*this).observe_head(item_id, head, now);
}

bool ControlStore::observe_review(const std::string& item_id, ReviewState review,
                                  std::optional<Micros> now) {
  return Impl::of(*this).observe_review(item_id, review, now);
}

bool ControlStore::observe_close(const std::string& item_id, CloseReason reason,
                                 std::optional<Micros> now) {
  return Impl::of(*this).observe_close(item_id, reason, now);
}

Assignment ControlStore::assign_and_lease(const std::string& session, const std::string& item_id,
                                          const std::vector<std::string>& allowed_actions,
                                          std::optional<Seconds> lease,
                                          std::optional<Micros> now) {
  return Impl::of(*this).assign_and_lease(session, item_id, allowed_actions, lease, now);
}

GateVerdict ControlStore::require_valid_assignment(const std::string& session,
                                                   const std::string& item_id, Fence fence,
                                                   const std::string& action,
                                                   const std::optional<std::string>& head,
                                                   std::optional<Micros> now) {
  return Impl::of(*this).require_valid_assignment(session, item_id, fence, action, head, now);
}

GateVerdict ControlStore::record_mutation(const std::string& session, const std::string& item_id,
                                          Fence fence, const std::string& action,
                                          const std::optional<std::string>& head,
                                          std::optional<Micros> now) {
  return Impl::of(*this).record_mutation(session, item_id, fence, action, head, now);
}

Allocation ControlStore::allocate_next(const std::string& session, AllocateMode mode,
                                       const std::vector<std::string>& actions,
                                       std::optional<Seconds> lease, std::optional<Micros> now) {
  return Impl::of(*this).allocate_next(session, mode, actions, lease, now);
}

bool ControlStore::enter_terminal_path(const std::string& item_id, const std::string& reason,
                                       std::optional<Micros> now) {
  return Impl::of(*this).enter_terminal_path(item_id, reason, now);
}

bool ControlStore::leave_terminal_path(const std::string& item_id, std::optional<Micros> now) {
  return Impl::of(*this).leave_terminal_path(item_id, now);
}

bool ControlStore::leave_terminal_path(const std::string& item_id,
                                       const LifecycleOptions& options) {
  return Impl::of(*this).leave_terminal_path(item_id, options.now, options.actor);
}

std::vector<TerminalLockRow> ControlStore::terminal_path() {
  return Impl::of(*this).terminal_path();
}

bool ControlStore::link_incident(const IncidentKey& key, const std::string& target,
                                 const IncidentObservation& observation,
                                 std::optional<Micros> now) {
  return Impl::of(*this).link_incident(key, target, observation, now);
}

IncidentLinkRow ControlStore::incident(const IncidentKey& key) {
  return Impl::of(*this).incident(key);
}

std::vector<IncidentLinkRow> ControlStore::incidents(const std::optional<std::string>& target) {
  return Impl::of(*this).incidents(target);
}

IncidentImport ControlStore::import_incident_links(const std::vector<LegacyIncidentRow>& rows,
                                                   const IncidentImportOptions& options) {
  return Impl::of(*this).import_incident_links(rows, options);
}

FenceVerdict ControlStore::check_fence(const std::string& item_id, Fence fence,
                                       const std::optional<std::string>& actor) {
  return Impl::of(*this).check_fence(item_id, fence, actor);
}

std::vector<std::string> ControlStore::enqueue_batch(const std::string& project_id,
                                                     const std::vector<std::string>& payloads_json,
                                                     const std::optional<std::string>& actor,
                                                     std::optional<Micros> now) {
  return Impl::of(*this).enqueue_batch(project_id, payloads_json, actor, now);
}

std::vector<ClaimedItem> ControlStore::claim_batch(const std::string& owner, std::size_t max_items,
                                                   const ClaimOptions& options) {
  return Impl::of(*this).claim_batch(owner, max_items, options);
}

void ControlStore::finish_batch(const std::vector<Report>& reports,
                                const std::optional<std::string>& actor,
                                std::optional<Micros> now) {
  Impl::of(*this).finish_batch(reports, actor, now);
}

std::optional<ClaimedItem> ControlStore::finish_and_claim(const std::string& item_id, Fence fence,
                                                          Outcome outcome, const std::string& owner,
                                                          const ClaimOptions& options,
                                                          const std::string& detail) {
  return Impl::of(*this).finish_and_claim(item_id, fence, outcome, owner, options, detail);
}

Item ControlStore::item(const std::string& item_id, const std::optional<std::string>& actor) {
  return Impl::of(*this).item(item_id, actor);
}

std::vector<StoredEvent> ControlStore::events(const std::string& item_id,
                                              const std::optional<std::string>& actor) {
  return Impl::of(*this).events(item_id, actor);
}

ControlStore::StatusCounts ControlStore::status_counts(
    const std::optional<std::string>& project_id) {
  return Impl::of(*this).status_counts(project_id);
}

int ControlStore::schema_version() { return Impl::of(*this).schema_version(); }

const StoreOptions& ControlStore::options() const { return Impl::of(*this).options_; }

}  // namespace cplane
