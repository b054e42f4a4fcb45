// What a scenario kept in a file of its own hands back to the probe: its
// figures (printed as name=value) and its named checks (any false one fails
// the run).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace cplane::probe {

struct Figure {
  std::string name;
  std::variant<std::int64_t, double> value;  // a double prints with three decimals
};
struct Check {
  bool ok = false;
  std::string sentence;
};
struct ScenarioResult {
  std::vector<Figure> figures;
  std::vector<Check> checks;
};

}  // namespace cplane::probe
