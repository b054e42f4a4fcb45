// The one JSON writer of the tools' output: the CLI's --json, the probe's
// --json report and the bench's result lines. Every string is escaped (valid
// UTF-8 is copied through, any other byte becomes U+FFFD), so the output is
// valid JSON whatever a value holds; payloads (already validated JSON) are
// embedded as they are.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cplane {

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

// `text` as it is if it is one valid JSON value, else as a JSON string.
std::string json_raw_or_string(std::string_view text);

// The length (1-4) of the well-formed UTF-8 sequence at `text[at]`, 0 if
// none there (what json_string replaces by U+FFFD; the console's HTML
// escaping does the same).
std::size_t utf8_length(std::string_view text, std::size_t at);

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
  // `value` with `digits` digits after the point; null if it is not finite.
  JsonObject& fixed(std::string_view key, double value, int digits);
  JsonObject& raw(std::string_view key, std::string_view json);  // one JSON value, as it is
  std::string done() const { return body_ + "}"; }

 private:
  void key(std::string_view k);
  std::string body_ = "{";
  bool first_ = true;
};

}  // namespace cplane
