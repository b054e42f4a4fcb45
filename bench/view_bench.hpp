// The operator's view under a deep store: `cplane-bench --scenario list`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <cplane/cplane.hpp>

namespace cplane::bench {

// Fills a store with `deep` items (and a small one with `shallow`), some
// claimed and finished, then times page 1 and a page deep behind a cursor
// of each listing, interleaved, on both: a page's cost must not grow with
// the store. One JSON line per listing through `emit`, then the ratios.
void list_scenario(const std::string& dir, std::int64_t deep, std::int64_t shallow,
                   Durability durability, const std::function<void(const std::string&)>& emit);

}  // namespace cplane::bench
