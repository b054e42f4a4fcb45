// cplane-bench --scenario assign-gate (an agent's round trip: assign, the
// recording gate, the read-only gate) and allocate (the allocator against
// the depth of the queue), each beside claim + finish as the baseline.
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

// Throws std::runtime_error unless every round trip came out exact.
void assign_gate_scenario(const Options& o, const Emit& emit);
// One line per depth, then the ratios of the deepest to the shallowest.
// Throws std::runtime_error unless every allocation came out exact.
void allocate_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
