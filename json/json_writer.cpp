#include "json/json_writer.hpp"

#include <fmt/format.h>

#include <cmath>

#include "events/json.hpp"
#include "events/errors.hpp"

namespace cplane {

std::size_t utf8_length(std::string_view text, std::size_t at) {
  return utf8_sequence_length(text, at);
}

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      // Copy well-formed UTF-8 through; replace anything else with U+FFFD so
      // the output stays valid JSON whatever the stored bytes are.
      const std::size_t length = utf8_sequence_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
      } else {
        out.append(text.substr(i, length));
        i += length - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string json_raw_or_string(std::string_view text) {
  try {
    require_json(text);
    return std::string(text);
  } catch (const InvalidArgument&) {
    return json_string(text);
  }
}

void JsonObject::key(std::string_view k) {
  if (!first_) body_ += ',';
  first_ = false;
  body_ += json_string(k);
  body_ += ':';
}

JsonObject& JsonObject::str(std::string_view k, std::string_view value) {
  key(k);
  body_ += json_string(value);
  return *this;
}

JsonObject& JsonObject::str_or_null(std::string_view k, std::string_view value) {
  key(k);
  body_ += value.empty() ? "null" : json_string(value);
  return *this;
}

JsonObject& JsonObject::num(std::string_view k, std::int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonObject& JsonObject::num_or_null(std::string_view k, std::int64_t value) {
  key(k);
  body_ += value == 0 ? "null" : std::to_string(value);
  return *this;
}

JsonObject& JsonObject::boolean(std::string_view k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::fixed(std::string_view k, double value, int digits) {
  key(k);
  body_ += std::isfinite(value) ? fmt::format("{:.{}f}", value, digits) : "null";
  return *this;
}

JsonObject& JsonObject::raw(std::string_view k, std::string_view json) {
  key(k);
  body_ += json;
  return *this;
}

std::string json_strings(const std::vector<std::string>& list) {
  std::string out = "[";
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += ',';
    out += json_string(list[i]);
  }
  return out + "]";
}

}  // namespace cplane
