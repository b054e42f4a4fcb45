// cplane-bench --plot DIR: the drain matrix and the depth scenario, their
// lines printed as they come, then drawn as PNG charts by gnuplot.
#pragma once

#include <string>

#include "bench/common.hpp"

namespace cplane::bench {

// Writes drain.dat, depth.dat, plot.gp, drain.png and depth.png into
// `dir` (created). Throws std::runtime_error when one of them is a link, a
// database or not a regular file (it writes only its own files), or when
// gnuplot fails.
void plot_charts(const Options& o, const std::string& dir, const Emit& emit);

}  // namespace cplane::bench
