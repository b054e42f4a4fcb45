// Time and identity: the only sources of nondeterminism in the engine, kept
// here so that everything above can be given explicit values in tests.
#pragma once

#include <string>

#include <sys/types.h>

#include "events/event.hpp"

namespace cplane {

// Wall-clock now, microseconds since the epoch.
Micros now_micros();

// A new item id: a UUIDv7 (time-ordered, 74 random bits), lower-case hex with
// dashes. Ids from separate processes do not collide in practice, and sort
// roughly by creation time, which keeps the log's per-item index local.
std::string new_item_id(Micros now);

// This process's id, without a system call (glibc no longer caches
// getpid()), for reseeding the id generators after fork: the group-commit
// path drew ids twice per item. Kept right across fork() by an atfork
// handler; a child made by _Fork() or a raw fork system call runs none, so
// the checks that refuse a store inherited through fork ask getpid().
pid_t current_pid() noexcept;

}  // namespace cplane
