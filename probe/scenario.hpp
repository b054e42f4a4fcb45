// What a scenario is run with, and what it hands back to the probe: its
// figures (printed as name=value, in order) and its named checks (any false
// one fails the run).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <cplane/store.hpp>

namespace cplane::probe {

struct Figure {
  std::string name;
  // A double prints with `digits` decimals (a non-finite one as a JSON
  // string); a text is a JSON string.
  std::variant<std::int64_t, double, std::string> value;
  int digits = 3;
};
struct Check {
  bool ok = false;
  std::string sentence;
};
struct ScenarioResult {
  std::vector<Figure> figures;
  std::vector<Check> checks;

  void count(std::string name, std::int64_t value) {
    figures.push_back({std::move(name), value});
  }
  void fixed(std::string name, double value, int digits = 3) {
    figures.push_back({std::move(name), value, digits});
  }
  void text(std::string name, std::string value) {
    figures.push_back({std::move(name), std::move(value)});
  }
  void check(bool ok, std::string sentence) { checks.push_back({ok, std::move(sentence)}); }
};

// What the scenarios that take no configuration of their own (the newer
// ones have a ScenarioConfig each) are run with.
struct RunConfig {
  std::string store;
  std::string scenario;  // its name, in its project's title
  std::string project;   // created by the scenario
  std::string scratch;   // a directory for the workers' records and journals
  int workers = 16;
  std::int64_t items = 0;
  double deadline = 0;   // fleet::seconds_now() after which the run gives up (FAIL)
  double timeout = 600;  // --timeout, seconds (allocate-race: how long a session may ask)
  bool combine = true;   // --combine: SQLite's group commit (key-race)
  Durability durability = Durability::fenced;  // --durability: the drain workers' stores
};

}  // namespace cplane::probe
