// A ControlStore's connection, for what sits beside the store rather than
// on it: the library's verify, rebuild, export, audit, restore and recover
// (library/cplane.cpp). Not installed: the public API hands out no backend.
// Tests reach the connection unguarded through commands/testing.hpp.
#pragma once

#include <cplane/store.hpp>

#include "commands/control_store.hpp"
#include "storage/backend.hpp"

namespace cplane {

struct BackendAccess {
  // Runs f(backend) as one call on the store: refused with InvalidArgument,
  // like any command, while another thread is in a call on it, or after a
  // move.
  template <class F>
  static decltype(auto) with(ControlStore& store, F&& f) {
    auto& impl = ControlStore::Impl::of(store);
    const ControlStore::Impl::InUse in_use(impl);
    return f(*impl.backend_);
  }
};

}  // namespace cplane
