#include "events/json.hpp"

#include <string>

#include <fmt/format.h>

#include "events/errors.hpp"

namespace cplane {

std::string join_list(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += ',';
    out += parts[i];
  }
  return out;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (;;) {
    const auto comma = text.find(',');
    out.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  auto byte = [&](std::size_t i) -> unsigned { return static_cast<unsigned char>(text[i]); };
  const unsigned b0 = byte(at);
  if (b0 < 0x80) return 1;
  std::size_t length;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    length = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    length = 3;
    if (b0 == 0xe0) lo = 0xa0;       // no overlongs
    if (b0 == 0xed) hi = 0x9f;       // no surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    length = 4;
    if (b0 == 0xf0) lo = 0x90;       // no overlongs
    if (b0 == 0xf4) hi = 0x8f;       // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < lo || byte(at + 1) > hi) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xbf) return 0;
  }
  return length;
}

namespace {

constexpr int kMaxDepth = 512;

class Validator {
 public:
  explicit Validator(std::string_view text) : text_(text) {}

  void run() {
    skip_space();
    if (at_end()) fail("the payload is empty: it must be a JSON value");
    value(0);
    skip_space();
    if (!at_end()) fail("unexpected text after the JSON value");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InvalidArgument(fmt::format("the payload is not valid JSON: {} (at byte {})", what, pos_));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail("unknown literal");
    pos_ += word.size();
  }

  void value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    switch (peek()) {
      case '{': object(depth); break;
      case '[': array(depth); break;
      case '"': string(); break;
      case 't': literal("true"); break;
      case 'f': literal("false"); break;
      case 'n': literal("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          number();
        } else {
          fail(at_end() ? "the text ends where a value should be" : "expected a value");
        }
    }
  }

  void object(int depth) {
    expect('{');
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      if (peek() != '"') fail("expected a string key");
      string();
      skip_space();
      expect(':');
      skip_space();
      value(depth + 1);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return;
    }
  }

  void array(int depth) {
    expect('[');
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return;
    }
    while (true) {
      skip_space();
      value(depth + 1);
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return;
    }
  }

  void digits() {
    if (!(peek() >= '0' && peek() <= '9')) fail("expected a digit");
    while (peek() >= '0' && peek() <= '9') ++pos_;
  }

  void number() {
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
    } else {
      digits();
    }
    if (peek() == '.') {
      ++pos_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      digits();
    }
  }

  static bool is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }

  // At the 'u' of a \u escape: its four hex digits as a UTF-16 code unit,
  // leaving pos_ after them.
  unsigned hex_unit() {
    ++pos_;
    unsigned unit = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = peek();
      if (!is_hex(h)) fail("bad \\u escape");
      unit = unit * 16 + static_cast<unsigned>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_;
    }
    return unit;
  }

  void string() {
    expect('"');
    while (true) {
      if (at_end()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return;
      }
      if (c < 0x20) fail("unescaped control character in a string");
      if (c == '\\') {
        ++pos_;
        const char e = peek();
        if (e == 'u') {
          const std::size_t escape_at = pos_ - 1;
          const unsigned unit = hex_unit();
          if (unit >= 0xdc00 && unit <= 0xdfff) {
            pos_ = escape_at;
            fail("a low surrogate escape (\\udc00-\\udfff) without a high one before it");
          }
          if (unit >= 0xd800 && unit <= 0xdbff) {
            // I-JSON (RFC 7493): a high surrogate only as the first half of
            // a pair. Alone it is no character, and strict parsers refuse
            // the text (the payload is later printed as it is).
            unsigned low = 0;
            if (text_.substr(pos_, 2) == "\\u") {
              ++pos_;
              low = hex_unit();
            }
            if (low < 0xdc00 || low > 0xdfff) {
              pos_ = escape_at;
              fail("a high surrogate escape (\\ud800-\\udbff) not followed by a low one");
            }
          }
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't') {
          ++pos_;
        } else {
          fail("bad escape in a string");
        }
        continue;
      }
      const std::size_t length = utf8_sequence_length(text_, pos_);
      if (length == 0) fail("invalid UTF-8");
      pos_ += length;
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

void require_json(std::string_view text) { Validator(text).run(); }

void require_payload(std::string_view payload) {
  if (payload.size() > kMaxPayloadBytes) {
    throw InvalidArgument(fmt::format("the payload is {} bytes; the limit is {}", payload.size(),
                                      kMaxPayloadBytes));
  }
  require_json(payload);
}


}  // namespace cplane
