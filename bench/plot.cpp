#include "bench/plot.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "bench/depth_bench.hpp"
#include "bench/drain_bench.hpp"

namespace cplane::bench {

void plot_charts(const Options& o, const std::string& dir, const Emit& emit) {
  std::filesystem::create_directories(dir);
  // Its own files only: never through a link, nor over a database.
  for (const char* name : {"drain.dat", "depth.dat", "plot.gp", "drain.png", "depth.png"}) {
    const std::string file = dir + "/" + name;
    const auto st = std::filesystem::symlink_status(file);
    if (!std::filesystem::exists(st)) continue;
    char head[16] = {};
    std::ifstream(file, std::ios::binary).read(head, sizeof head);
    if (!std::filesystem::is_regular_file(st) ||
        std::string_view(head, sizeof head) == std::string_view("SQLite format 3\0", 16)) {
      throw std::runtime_error(fmt::format(
          "{} is a link, not a regular file, or a database: --plot writes only its own files",
          file));
    }
  }
  std::ofstream drains(dir + "/drain.dat");
  for (auto d : {Durability::normal, Durability::fenced, Durability::full}) {
    drains << "\"" << cplane::to_string(d) << "\"\n";
    for (int w : {1, 2, 4, 16, 64}) {
      const auto line = drain_once(o, "drain", w, o.mode, d);
      emit(line);
      const auto at = line.find("\"items_per_s\":");
      drains << w << ' ' << std::atof(line.c_str() + at + 14) << '\n';
    }
    drains << "\n\n";
  }
  drains.close();
  std::ofstream depths(dir + "/depth.dat");
  std::vector<std::string> lines;
  depth_scenario(o, [&](const std::string& line) {
    emit(line);
    lines.push_back(line);
  });
  for (const auto& line : lines) {
    const auto d = line.find("\"depth\":");
    const auto u = line.find("\"us_per_item\":");
    depths << std::atoll(line.c_str() + d + 8) << ' ' << std::atof(line.c_str() + u + 14) << '\n';
  }
  depths.close();
  const std::string script = fmt::format(
      "set terminal pngcairo size 800,500\n"
      "set output '{0}/drain.png'\n"
      "set title 'Multi-process drain ({1} items, mode {2})'\n"
      "set xlabel 'worker processes'; set ylabel 'items/s'; set logscale x 2; set grid\n"
      "plot for [i=0:2] '{0}/drain.dat' index i using 1:2 with linespoints title columnheader(1)\n"
      "set output '{0}/depth.png'\n"
      "set title 'Claim + finish cost against queue depth'\n"
      "set xlabel 'items queued'; set ylabel 'microseconds per item'; set logscale x 10; "
      "unset logscale y; set yrange [0:*]\n"
      "plot '{0}/depth.dat' using 1:2 with linespoints title 'us per item'\n",
      dir, o.items, to_string(o.mode));
  std::ofstream(dir + "/plot.gp") << script;
  if (std::system(fmt::format("gnuplot '{}/plot.gp'", dir).c_str()) != 0) {
    throw std::runtime_error("gnuplot failed (apt-get install gnuplot-nox)");
  }
}

}  // namespace cplane::bench
