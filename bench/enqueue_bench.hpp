// cplane-bench --scenario enqueue (one process queues --items, one by one
// or in --batch batches) and single (one process queues, drains, verifies
// and rebuilds).
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

void enqueue_scenario(const Options& o, const Emit& emit);
// Throws std::runtime_error unless every item is done and verify and
// rebuild find nothing.
void single_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
