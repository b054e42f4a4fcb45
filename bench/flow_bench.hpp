// cplane-bench's flow control: --scenario keys (a keyed drain against a
// plain one; claims past a full key) and fair (a small project's wait
// behind a big one, fair share on and off).
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

// Throws std::runtime_error when a drain is short or a claim takes an item
// of the full key.
void keys_scenario(const Options& o, const Emit& emit);
void fair_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
