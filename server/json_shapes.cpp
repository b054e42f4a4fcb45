// The /api shapes: the CLI's --json, field for field (see json_shapes.hpp).
#include "server/json_shapes.hpp"

#include <fmt/format.h>

#include "json/json_writer.hpp"

namespace cplane::server {

std::string json_array(const std::vector<std::string>& values) {
  std::string out = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += values[i];
  }
  return out + "]";
}

std::string activity_json(const ActivityMinute& m) {
  return JsonObject()
      .num("start", m.start)
      .num("enqueued", m.enqueued)
      .num("claimed", m.claimed)
      .num("done", m.done)
      .num("failed", m.failed)
      .num("max_wait", m.max_wait)
      .done();
}

}  // namespace cplane::server
