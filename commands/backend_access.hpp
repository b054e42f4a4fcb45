// A ControlStore's connection, for what sits beside the store rather than
// on it: the library's verify and rebuild (library/cplane.cpp) and tests.
// Not installed: the public API hands out no backend.
#pragma once

#include <cplane/store.hpp>

#include "storage/backend.hpp"

namespace cplane {

struct BackendAccess {
  // Runs f(backend) as one call on the store: refused with InvalidArgument,
  // like any command, while another thread is in a call on it, or after a
  // move.
  template <class F>
  static decltype(auto) with(ControlStore& store, F&& f) {
    const ControlStore::InUse in_use(store);
    return f(*store.backend_);
  }

  // The connection itself, for tests that drive it by hand (hold the write
  // lock, open a snapshot). Not guarded.
  static storage::Backend& backend(ControlStore& store) {
    if (!store.backend_) {
      throw InvalidArgument("this ControlStore was moved from: use the store it was moved to");
    }
    return *store.backend_;
  }
};

}  // namespace cplane
