// How a write command is executed: in a transaction of its own, or queued in
// SQLite's group-commit area for whichever process holds the combiner's
// lock (commands/combine.cpp has the protocol and its crash cases).
#pragma once

#include <optional>
#include <type_traits>

#include "commands/command.hpp"
#include "commands/internal.hpp"
#include "storage/sqlite/combine_area.hpp"

namespace cplane {

struct CommandRunner {
  // ---- each command's decision and writes, inside an open write transaction
  // (defined beside its public call in commands/control_store.cpp). Throws
  // its refusals; commits nothing.
  static std::string exec(ControlStore::Impl& s, const detail::cmd::Enqueue& c);
  static std::vector<std::string> exec(ControlStore::Impl& s, const detail::cmd::EnqueueBatch& c);
  static std::optional<ClaimedItem> exec(ControlStore::Impl& s, const detail::cmd::Claim& c);
  static std::vector<ClaimedItem> exec(ControlStore::Impl& s, const detail::cmd::ClaimBatch& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::Finish& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::FinishBatch& c);
  static std::optional<ClaimedItem> exec(ControlStore::Impl& s, const detail::cmd::FinishAndClaim& c);
  static Micros exec(ControlStore::Impl& s, const detail::cmd::Heartbeat& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::Release& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::CreateProject& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::Grant& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::OpenSession& c);
  static std::vector<std::pair<std::string, Micros>> exec(ControlStore::Impl& s,
                                                          const detail::cmd::SessionHeartbeat& c);
  static std::vector<std::string> exec(ControlStore::Impl& s, const detail::cmd::CloseSession& c);
  static bool exec(ControlStore::Impl& s, const detail::cmd::Observe& c);
  static Assignment exec(ControlStore::Impl& s, const detail::cmd::AssignAndLease& c);
  static GateVerdict exec(ControlStore::Impl& s, const detail::cmd::RecordMutation& c);
  static Micros exec(ControlStore::Impl& s, const detail::cmd::ExpireLeases& c);
  static bool exec(ControlStore::Impl& s, const detail::cmd::LinkIncident& c);
  static bool exec(ControlStore::Impl& s, const detail::cmd::ProjectChange& c);
  static void exec(ControlStore::Impl& s, const detail::cmd::ItemChange& c);
  static std::vector<std::string> exec(ControlStore::Impl& s, const detail::cmd::BulkBatch& c);
  static bool exec(ControlStore::Impl& s, const detail::cmd::ScheduleChange& c);
  static Micros exec(ControlStore::Impl& s, const detail::cmd::Tick& c);
  static bool exec(ControlStore::Impl& s, const detail::cmd::LimitChange& c);

  // Runs the command and returns (or throws) what the public call does:
  // through the group-commit area when the store has one and the command
  // and its answer fit a slot, else in a transaction of its own.
  template <class C>
  static auto run(ControlStore::Impl& s, const C& c) {
    using R = decltype(exec(s, c));
    if (auto* area = s.backend_->combine_area();
        area != nullptr && fits(c) && area->usable_as_far_as_known() &&
        area->accepts_codec(detail::codec_fingerprint())) {
      auto answer = run_combined(s, *area, detail::Command{c});
      if (answer && !(answer->error && answer->error->kind == detail::ErrorValue::run_alone)) {
        if (answer->error) detail::throw_error(*answer->error);
        if constexpr (!std::is_void_v<R>) return from_value<R>(s, std::move(answer->value));
        else return;
      }
    }
    // A report reads its item first, a claim its candidates: a server
    // backend reads them with the BEGIN (one round trip fewer).
    struct Expect {
      storage::Backend& backend;
      explicit Expect(storage::Backend& b, const C& c) : backend(b) {
        namespace cmd = detail::cmd;
        if constexpr (std::is_same_v<C, cmd::Finish> || std::is_same_v<C, cmd::FinishAndClaim> ||
                      std::is_same_v<C, cmd::Heartbeat> || std::is_same_v<C, cmd::Release>) {
          backend.expect_first_read({.item_id = c.item_id});
        } else if constexpr (std::is_same_v<C, cmd::Claim> || std::is_same_v<C, cmd::ClaimBatch>) {
          if (!c.now) {  // at the clock the BEGIN reads
            std::size_t want = 1;
            if constexpr (std::is_same_v<C, cmd::ClaimBatch>) want = c.max_items;
            backend.expect_first_read({.claim = true, .actor = c.actor, .want = want});
          }
        }
      }
      ~Expect() { backend.expect_first_read({}); }
    } expect{*s.backend_, c};
    return s.write(c.sync, [&](storage::Transaction& tx) {
      if constexpr (std::is_void_v<R>) {
        exec(s, c);
        tx.commit();
      } else {
        R result = exec(s, c);
        tx.commit();
        return result;
      }
    });
  }

  // The combiner, holding the area's lock: recovers a dead combiner's batch,
  // then runs batches of queued requests in arrival order until `own` is
  // answered and the sticky time (SqliteOptions::sticky_ms) has passed, or the queue is empty; unlocks at
  // the end.
  static void serve(ControlStore::Impl& s, storage::CombineArea& area, std::optional<std::uint32_t> own);

  // How many requests one transaction runs at most: a bound on how long
  // the last of them waits.
  static constexpr std::size_t kMaxBatch = 64;

 private:
  static std::optional<detail::Answer> run_combined(ControlStore::Impl& s, storage::CombineArea& area,
                                                    const detail::Command& command);
  static void run_batch(ControlStore::Impl& s, storage::CombineArea& area,
                        const std::vector<storage::CombineArea::Taken>& batch);
  static void recover(ControlStore::Impl& s, storage::CombineArea& area);

  // Whether the answer can never outgrow a slot (batches of a bounded size).
  template <class C>
  static bool fits(const C& c) {
    if constexpr (std::is_same_v<C, detail::cmd::ClaimBatch>) return c.max_items <= 32;
    else if constexpr (std::is_same_v<C, detail::cmd::EnqueueBatch>) return c.payloads.size() <= 256;
    else return true;
  }

  template <class R>
  static R from_value(ControlStore::Impl& s, detail::Value&& value);
};

}  // namespace cplane
