// cplane-bench --scenario verify: verify and rebuild of a drained store of
// 10^4 to --max-items items, each in a child process so that its peak
// memory is its own.
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

void verify_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
