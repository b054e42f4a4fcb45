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

// This process's id, without a system call: glibc no longer caches getpid(),
// and the group-commit path asked for it about five times per item (each a
// trip through the hypervisor on a VM). Kept right across fork() by an
// atfork handler; a child made by a raw clone() is not supported.
pid_t current_pid() noexcept;

}  // namespace cplane
