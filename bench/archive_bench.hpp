// cplane-bench --scenario archive: a drain of --items items (default
// 10^6) with an archive every --batch finished (default 10^5): per cycle,
// the live database's size, verify's time, a claim's cost and the
// segment's bytes per item (docs/retention.md).
#pragma once

#include "bench/common.hpp"

namespace cplane::bench {

void archive_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
