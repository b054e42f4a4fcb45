// A minimal JSON writer for the CLI's --json output: strings are escaped,
// payloads (already validated JSON) are embedded as they are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cplane::cli {

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

// `text` as it is if it is one valid JSON value, else as a JSON string.
std::string json_raw_or_string(std::string_view text);

// A JSON array of strings.
std::string json_strings(const std::vector<std::string>& list);

// Builds one JSON object, field by field, in order.
class JsonObject {
 public:
  JsonObject& str(std::string_view key, std::string_view value);
  JsonObject& str_or_null(std::string_view key, std::string_view value);  // "" -> null
  JsonObject& num(std::string_view key, std::int64_t value);
  JsonObject& num_or_null(std::string_view key, std::int64_t value);      // 0 -> null
  JsonObject& boolean(std::string_view key, bool value);
  JsonObject& raw(std::string_view key, std::string_view json);
  std::string done() const { return body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_ = "{";
  bool first_ = true;
};

}  // namespace cplane::cli
