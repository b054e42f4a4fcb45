// ControlStore::Impl: what sits behind the public store (<cplane/store.hpp>),
// as leveldb's DBImpl behind DB. The public class holds only a pointer to
// it and forwards each call; everything that names the storage contract
// (the backend, its transactions and sync levels) is here. Not installed.
//
// Internal code reaches it through Impl::of(store): CommandRunner
// (commands/combine.hpp), BackendAccess (commands/backend_access.hpp, for
// verify and rebuild in library/cplane.cpp) and the tests' accessors
// (commands/testing.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/store.hpp>

#include "commands/command.hpp"
#include "projections/rows.hpp"
#include "storage/backend.hpp"

namespace cplane {

class ControlStore::Impl {
 public:
  // Checks the options (InvalidArgument for a bad lease or lock timeout)
  // and takes the backend, which must not be null.
  Impl(std::unique_ptr<storage::Backend> backend, StoreOptions options);

  // The implementation of `store`. InvalidArgument (misuse) if it was moved
  // from.
  static Impl& of(ControlStore& store);
  static const Impl& of(const ControlStore& store);

  // A store over `backend` (for tests, which wrap one to inject faults or
  // observe it).
  static ControlStore over(std::unique_ptr<storage::Backend> backend, StoreOptions options);

  // Marks the store busy for one call; throws InvalidArgument (misuse) if it
  // already is (another thread is in a call on it).
  class InUse {
   public:
    explicit InUse(Impl& impl);
    ~InUse();
    InUse(const InUse&) = delete;
    InUse& operator=(const InUse&) = delete;

   private:
    Impl& impl_;
  };

  // ---- the public calls, as <cplane/store.hpp> documents them ---------------
  void create_project(const std::string& id, const std::string& title,
                      const std::string& status, std::optional<Micros> now);
  void grant(const std::string& project_id, const std::string& actor, std::optional<Micros> now);
  std::vector<std::string> visible_projects(const std::optional<std::string>& actor);
  std::string enqueue(const std::string& project_id, const std::string& payload_json,
                      const std::optional<std::string>& actor, std::optional<Micros> now);
  std::string enqueue(const std::string& project_id, const std::string& payload_json,
                      const EnqueueOptions& options);
  std::optional<ClaimedItem> claim(const std::string& owner, const ClaimOptions& options);
  void finish(const std::string& item_id, Fence fence, Outcome outcome,
              const FinishOptions& options);
  Micros heartbeat(const std::string& item_id, Fence fence, const LeaseOptions& options);
  void release(const std::string& item_id, Fence fence, const std::string& reason,
               const ReleaseOptions& options);
  std::int64_t expire_leases(std::optional<Micros> now);
  void open_session(const std::string& session, const std::optional<std::string>& actor,
                    std::optional<Micros> now);
  std::vector<std::pair<std::string, Micros>> session_heartbeat(const std::string& session,
                                                                std::optional<Seconds> lease,
                                                                std::optional<Micros> now);
  std::vector<std::string> close_session(const std::string& session, std::optional<Micros> now);
  std::vector<SessionInfo> sessions(std::optional<Micros> now);
  bool observe_head(const std::string& item_id, const std::string& head,
                    std::optional<Micros> now);
  bool observe_review(const std::string& item_id, ReviewState review, std::optional<Micros> now);
  bool observe_close(const std::string& item_id, CloseReason reason, std::optional<Micros> now);
  Assignment assign_and_lease(const std::string& session, const std::string& item_id,
                              const std::vector<std::string>& allowed_actions,
                              std::optional<Seconds> lease, std::optional<Micros> now);
  GateVerdict require_valid_assignment(const std::string& session, const std::string& item_id,
                                       Fence fence, const std::string& action,
                                       const std::optional<std::string>& head,
                                       std::optional<Micros> now);
  GateVerdict record_mutation(const std::string& session, const std::string& item_id,
                              Fence fence, const std::string& action,
                              const std::optional<std::string>& head, std::optional<Micros> now);
  Allocation allocate_next(const std::string& session, AllocateMode mode,
                           const std::vector<std::string>& actions, std::optional<Seconds> lease,
                           std::optional<Micros> now);
  bool enter_terminal_path(const std::string& item_id, const std::string& reason,
                           std::optional<Micros> now);
  bool leave_terminal_path(const std::string& item_id, std::optional<Micros> now,
                           const std::optional<std::string>& actor = {});
  std::vector<TerminalLockRow> terminal_path();
  bool link_incident(const IncidentKey& key, const std::string& target,
                     const IncidentObservation& observation, std::optional<Micros> now);
  IncidentLinkRow incident(const IncidentKey& key);
  std::vector<IncidentLinkRow> incidents(const std::optional<std::string>& target);
  IncidentImport import_incident_links(const std::vector<LegacyIncidentRow>& rows,
                                       const IncidentImportOptions& options);
  FenceVerdict check_fence(const std::string& item_id, Fence fence,
                           const std::optional<std::string>& actor);
  std::vector<std::string> enqueue_batch(const std::string& project_id,
                                         const std::vector<std::string>& payloads_json,
                                         const std::optional<std::string>& actor,
                                         std::optional<Micros> now);
  std::vector<ClaimedItem> claim_batch(const std::string& owner, std::size_t max_items,
                                       const ClaimOptions& options);
  void finish_batch(const std::vector<Report>& reports, const std::optional<std::string>& actor,
                    std::optional<Micros> now);
  std::optional<ClaimedItem> finish_and_claim(const std::string& item_id, Fence fence,
                                              Outcome outcome, const std::string& owner,
                                              const ClaimOptions& options,
                                              const std::string& detail);
  Item item(const std::string& item_id, const std::optional<std::string>& actor);
  std::vector<StoredEvent> events(const std::string& item_id,
                                  const std::optional<std::string>& actor);
  StatusCounts status_counts(const std::optional<std::string>& project_id);
  int schema_version();
  void create_project(const std::string& id, const std::string& title,
                      const ProjectOptions& options);
  bool set_retry_policy(const std::string& project_id, std::uint32_t max_attempts,
                        const std::string& backoff, std::optional<Micros> now);
  bool pause_project(const std::string& project_id, bool pause, const std::string& reason,
                     const LifecycleOptions& options);
  void change_item(detail::cmd::ItemChange change);
  BulkResult bulk(std::uint8_t kind, const std::string& project_id, const BulkOptions& options);
  ProjectRow project(const std::string& project_id, const std::optional<std::string>& actor);
  void add_schedule(const std::string& name, const ScheduleSpec& spec);
  bool change_schedule(const std::string& name, std::uint8_t kind, std::optional<Micros> now);
  std::vector<ScheduleRow> schedules();
  std::int64_t tick(std::optional<Micros> now);
  bool set_limit(const std::string& key, const LimitSpec& spec);
  bool remove_limit(const std::string& key, const LifecycleOptions& options);
  std::vector<LimitInfo> limits(std::optional<Micros> now);
  bool set_weight(const std::string& project_id, std::uint32_t weight,
                  const LifecycleOptions& options);
  Explanation explain(const std::string& item_id, const std::optional<std::string>& actor,
                      std::optional<Micros> now);
  // view.cpp
  ItemPage list_items(const ItemQuery& query, const std::optional<std::string>& actor);
  LogPage read_log(const LogQuery& query);
  Seq log_end();
  bool wait_for_log(Seq after, std::chrono::milliseconds timeout);
  // Fires the due occurrences of the schedules due at `at` (a bounded
  // number): what every claim does first, inside its transaction. Returns
  // the items made.
  std::int64_t fire_due_schedules(Micros at, std::size_t budget = kFiresPerClaim);
  // How many occurrences one transaction fires (or skips) at most: a claim
  // fires a few on its way, a tick more; --catch-up all goes on in the next.
  static constexpr std::size_t kFiresPerClaim = 64;
  static constexpr std::size_t kFiresPerTick = 1000;

  // ---- what the calls share ---------------------------------------------------
  // Runs f(tx) in a write transaction, and runs it again, whole (re-reading
  // and deciding again), when the backend reports a Conflict: a race lost
  // to another writer (PostgreSQL). A bounded number of attempts.
  // (Defined in commands/internal.hpp.)
  template <class F>
  auto write(storage::Sync sync, F&& f);
  // write(sync, f) when `writing`, else f(tx) once in a read transaction.
  template <class F>
  auto transact(bool writing, storage::Sync sync, F&& f);
  std::chrono::steady_clock::time_point next_lapse_deadline(const ClaimOptions& options);
  std::optional<ClaimedItem> claim_in_tx(const std::string& owner, const ClaimOptions& options,
                                         Micros lease, Micros at);
  // A fenced report on one item in the open transaction: scope, then the
  // decision (which refuses unless the row holds the fence), append, apply.
  // (Defined and used only in commands/control_store.cpp.)
  template <class Decide>
  ItemRow report_in_tx(const std::string& item_id, const std::optional<std::string>& actor,
                       Decide&& decide);
  void finish_in_tx(const std::string& item_id, Fence fence, Outcome outcome,
                    const std::string& detail, Micros at, const std::optional<std::string>& actor,
                    bool no_retry = false);
  std::string enqueue_in_tx(const ProjectRow& project, const std::string& payload_json,
                            const std::optional<std::string>& actor, Micros at,
                            const EnqueueOptions* forge = nullptr);
  std::vector<std::string> enqueue_batch_in_tx(const ProjectRow& project,
                                               const std::vector<std::string>& payloads,
                                               const std::optional<std::string>& actor, Micros at);
  // The queued event of a new item `id`: decide_enqueue, with the retry
  // policy resolved and what `forge` (if any) sets.
  Event queued_event(const ProjectRow& project, const std::string& id,
                     const std::string& payload_json, const std::optional<std::string>& actor,
                     Micros at, const EnqueueOptions* forge);
  SessionRow open_session_row(const std::string& session);
  GateVerdict gate_in_tx(const std::string& session, const std::string& item_id, Fence fence,
                         const std::string& action, const std::optional<std::string>& head,
                         Micros at, std::optional<ItemRow>* row_out,
                         std::optional<SessionRow>* session_out);
  template <class Observe>
  bool observe_in_tx(const std::string& item_id, Micros at, Observe&& observe);
  // Keeps terminal_locks with the item row: a row put when it goes on the
  // terminal path, deleted when it goes off (finished, closed, taken off).
  void sync_terminal_lock(const ItemRow& before, const ItemRow& after);
  // Wakes claims waiting for work when a change left something to take, or
  // to wait for: the item is claimable (a retry without delay, a release), it
  // gave back a slot of its concurrency key (a finish, a cancel, a close),
  // or it has a new due time (a retry after its backoff, a reschedule).
  void announce_if_freed(const ItemRow& before, const ItemRow& after, Micros at);
  ProjectRow visible_project(const std::string& project_id, const std::optional<std::string>& actor);
  Micros clock(std::optional<Micros> now) const;
  storage::Sync sync_for_claims() const;
  storage::Sync sync_for_finish() const;
  Micros check_claim(const std::string& owner, const ClaimOptions& options) const;
  // A lapsed item with no attempts left, found by a claim or the sweep:
  // failed, by the control plane (the terminal path's lock goes with it).
  void exhaust_in_tx(const ItemRow& row, Micros at);

  std::unique_ptr<storage::Backend> backend_;
  StoreOptions options_;
  std::atomic<bool> in_use_{false};
};

}  // namespace cplane
