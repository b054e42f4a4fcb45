// What the files of commands/ share and nothing else sees: input checks and
// the names events are made under.
#pragma once

#include <unistd.h>

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <cplane/store.hpp>

#include "commands/control_store.hpp"
#include "projections/rows.hpp"
#include "storage/backend.hpp"

namespace cplane::detail {

// A scoped actor's name, when one is given.
void require_actor(const std::optional<std::string>& actor);
void require_size(const std::string& text, std::size_t limit, const char* what);
// The longest detail, reason or title a command takes.
inline constexpr std::size_t kMaxTextBytes = 64 << 10;

// The actor of events the control plane makes itself: "".
extern const std::string kControlPlane;

// Who an item event made for a session is by: its actor, else its id.
const std::string& acting_for(const SessionRow& session);

// A report's input (finish, report_batch): the item id, outcome and detail.
void check_report(const std::string& item_id, Outcome outcome, const std::string& detail);

// Actions checked (require_action), sorted, without duplicates. Empty is
// InvalidArgument unless `allow_none`.
std::vector<std::string> checked_actions(const std::vector<std::string>& actions, bool allow_none);

}  // namespace cplane::detail

namespace cplane {

// How many times a command runs its decide step before a Conflict is
// handed to the caller (as busy: retry later).
inline constexpr int kConflictAttempts = 10;

template <class F>
auto ControlStore::Impl::write(storage::Sync sync, F&& f) {
  for (int attempt = 1;; ++attempt) {
    try {
      auto tx = storage::Transaction::write(*backend_, sync);
      return f(tx);
    } catch (const storage::Conflict& e) {
      if (attempt >= kConflictAttempts) {
        throw StorageError(StorageError::Category::busy,
                           fmt::format("{} (gave up after {} attempts; retry)", e.what(), attempt));
      }
      // Apart a little, at random, so that the racers do not meet again.
      thread_local std::minstd_rand jitter(static_cast<unsigned>(::getpid()));
      std::this_thread::sleep_for(std::chrono::microseconds(jitter() % (200 * attempt)));
    }
  }
}

template <class F>
auto ControlStore::Impl::transact(bool writing, storage::Sync sync, F&& f) {
  if (writing) return write(sync, std::forward<F>(f));
  auto tx = storage::Transaction::read(*backend_);
  return f(tx);
}

}  // namespace cplane
