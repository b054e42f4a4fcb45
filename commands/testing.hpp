// What tests (and the probe's fault drills) may do to a ControlStore that
// its public API does not offer: build one over a backend they wrapped
// (storage/backend_wrapper.hpp) to inject faults or observe it, and drive
// its connection by hand. Not installed; nothing in the library uses it.
#pragma once

#include <memory>
#include <utility>

#include <cplane/store.hpp>

#include "commands/control_store.hpp"
#include "storage/backend.hpp"

namespace cplane::testing {

// A store over `backend` (not null): the same checks of `options` as the
// public constructor (InvalidArgument), then every call goes to `backend`.
inline ControlStore store_over(std::unique_ptr<storage::Backend> backend,
                               StoreOptions options = {}) {
  return ControlStore::Impl::over(std::move(backend), std::move(options));
}

// The store's implementation, for what runs beside its calls (the group
// commit's combiner, CommandRunner::serve). InvalidArgument (misuse) after
// a move.
inline ControlStore::Impl& impl(ControlStore& store) { return ControlStore::Impl::of(store); }

// The connection itself, for tests that drive it by hand (hold the write
// lock, open a snapshot). Not guarded against a concurrent call on the
// store; InvalidArgument (misuse) after a move.
inline storage::Backend& backend(ControlStore& store) { return *impl(store).backend_; }

}  // namespace cplane::testing
