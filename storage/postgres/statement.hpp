// The libpq wrapper of the PostgreSQL engine: a statement's parameters, its
// result, and the SQLSTATE of a failure. Internal to storage/postgres/:
// nothing outside the engine includes libpq-fe.h.
#pragma once

#include <libpq-fe.h>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cplane::storage::postgres {

// ---- parameters ------------------------------------------------------------

// The parameters of one statement, in text format except bytea (binary).
class Params {
 public:
  Params& text(std::string_view v) {
    values_.emplace_back(v);
    nulls_.push_back(false);
    binary_.push_back(0);
    return *this;
  }
  Params& null() {
    values_.emplace_back();
    nulls_.push_back(true);
    binary_.push_back(0);
    return *this;
  }
  Params& i64(std::int64_t v) { return text(std::to_string(v)); }
  Params& bytes(std::string_view v) {
    text(v);
    binary_.back() = 1;
    return *this;
  }
  Params& text_or_null(std::string_view v) { return v.empty() ? null() : text(v); }
  Params& i64_or_null(std::int64_t v) { return v == 0 ? null() : i64(v); }
  Params& opt(const std::optional<std::string>& v) { return v ? text(*v) : null(); }
  Params& opt(const std::optional<std::int64_t>& v) { return v ? i64(*v) : null(); }

  int size() const { return static_cast<int>(values_.size()); }
  // The bytes of every value, as sent (a statement's message grows with them).
  std::size_t bytes() const {
    std::size_t n = 0;
    for (const auto& v : values_) n += v.size();
    return n;
  }
  void finish() {
    pointers_.clear();
    lengths_.clear();
    for (std::size_t i = 0; i < values_.size(); ++i) {
      pointers_.push_back(nulls_[i] ? nullptr : values_[i].data());
      lengths_.push_back(static_cast<int>(values_[i].size()));
    }
  }
  // Parameter i as an element of an array literal: NULL, a bytea in hex
  // ("\\x..."), or the text quoted with " and \ escaped.
  void append_element(std::string& out, int i) const {
    const auto k = static_cast<std::size_t>(i);
    if (nulls_[k]) {
      out += "NULL";
      return;
    }
    out += '"';
    if (binary_[k] != 0) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\\\x";
      for (const unsigned char c : values_[k]) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
    } else {
      for (const char c : values_[k]) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
    }
    out += '"';
  }
  const char* const* pointers() const { return pointers_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return binary_.data(); }

 private:
  std::vector<std::string> values_;
  std::vector<bool> nulls_;
  std::vector<int> binary_;
  std::vector<const char*> pointers_;
  std::vector<int> lengths_;
};

// ---- results ---------------------------------------------------------------

// One statement's result, owned: text, integers (NULL reads as 0), bytea.
class Result {
 public:
  Result() = default;
  explicit Result(PGresult* r) : r_(r) {}
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result& operator=(Result&& o) noexcept {
    std::swap(r_, o.r_);
    return *this;
  }
  ~Result() { PQclear(r_); }
  int rows() const { return PQntuples(r_); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col)));
  }
  std::int64_t i64(int row, int col) const {
    if (null(row, col)) return 0;
    const char* p = PQgetvalue(r_, row, col);
    std::int64_t v = 0;
    std::from_chars(p, p + PQgetlength(r_, row, col), v);
    return v;
  }
  // A bytea column in text format: "\x" and hex digits.
  std::string bytes(int row, int col) const {
    if (null(row, col)) return {};
    const char* p = PQgetvalue(r_, row, col);
    const int n = PQgetlength(r_, row, col);
    std::string out;
    if (n < 2 || p[0] != '\\' || p[1] != 'x') return std::string(p, static_cast<std::size_t>(n));
    out.reserve(static_cast<std::size_t>(n - 2) / 2);
    auto nibble = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return c - 'A' + 10;
    };
    for (int i = 2; i + 1 < n; i += 2) out.push_back(static_cast<char>(nibble(p[i]) << 4 | nibble(p[i + 1])));
    return out;
  }
  PGresult* get() const { return r_; }

 private:
  PGresult* r_ = nullptr;
};

// The SQLSTATE of a failed statement's result ("" if none, or no result).
inline std::string sqlstate(const PGresult* r) {
  const char* s = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  return s != nullptr ? s : "";
}

// libpq's message without its trailing newline.
inline std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Parameter `column` of each of `rows` (the same statement's) as one array
// literal, for a statement that takes many rows through unnest().
inline std::string column_array(const std::vector<Params>& rows, int column) {
  std::string out = "{";
  for (const auto& row : rows) {
    if (out.size() > 1) out += ',';
    row.append_element(out, column);
  }
  return out + "}";
}

// `rows` cut into runs of at most `limit` bytes of values each (a row
// larger than that is a run of its own), so that a statement that takes a
// run through arrays stays far below the server's 1 GB message limit,
// whatever the payloads.
inline std::vector<std::vector<Params>> runs_of(std::vector<Params> rows, std::size_t limit) {
  std::vector<std::vector<Params>> out;
  std::size_t bytes = 0;
  for (auto& row : rows) {
    const std::size_t b = row.bytes();
    if (out.empty() || (bytes + b > limit && !out.back().empty())) {
      out.emplace_back();
      bytes = 0;
    }
    bytes += b;
    out.back().push_back(std::move(row));
  }
  return out;
}
// The values per statement of a batch: an array literal can be twice the
// values (escapes, bytea in hex).
inline constexpr std::size_t kRunBytes = 8 << 20;

// A text[] literal: {"a","b"}, with " and \ escaped.
inline std::string array_literal(const std::vector<std::string>& values) {
  std::string out = "{";
  for (const auto& v : values) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

}  // namespace cplane::storage::postgres
