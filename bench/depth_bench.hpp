// cplane-bench --scenario depth (claim + finish against the depth of the
// queue, 10^3 to --max-depth) and scheduled (claims of due items among many
// scheduled for later, against claims of ready ones).
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

// One line per depth, up to --max-depth.
void depth_scenario(const Options& o, const Emit& emit);
// One line per configuration (ready, due, few-due), then the ratios.
// Throws std::runtime_error when a claim takes an item it should not.
void scheduled_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
