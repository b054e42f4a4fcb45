// The collector's state as text (the format is described in
// library/metrics_state.hpp): written whole, read strictly, so that a
// damaged file is refused rather than folded into wrong counters.
#include "library/metrics_state.hpp"

#include <charconv>

#include <fmt/format.h>

#include <cplane/errors.hpp>

namespace cplane::metrics {

namespace {

constexpr std::string_view kMagic = "cplane-metrics-state";
constexpr std::string_view kVersion = "1";

std::string field(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

[[noreturn]] void malformed(std::size_t line, std::string_view why) {
  throw InvalidArgument(fmt::format("the metrics state is malformed at line {}: {}", line, why));
}

std::vector<std::string> split(std::string_view line, std::size_t at) {
  std::vector<std::string> out(1);
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\t') {
      out.emplace_back();
    } else if (c == '\\') {
      if (++i == line.size()) malformed(at, "a backslash ends the line");
      switch (line[i]) {
        case '\\': out.back() += '\\'; break;
        case 't': out.back() += '\t'; break;
        case 'n': out.back() += '\n'; break;
        case 'r': out.back() += '\r'; break;
        default: malformed(at, fmt::format("unknown escape \\{}", line[i]));
      }
    } else if (c == '\r') {
      malformed(at, "a raw carriage return");
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::int64_t count(const std::string& text, std::size_t at, const char* what) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty() || v < 0) {
    malformed(at, fmt::format("{} must be a whole number of at least 0, not \"{}\"", what,
                              field(text.substr(0, 40))));
  }
  return v;
}

}  // namespace

std::string save(const FoldState& st) {
  std::string out = fmt::format("{}\t{}\n", kMagic, kVersion);
  if (!st.seeded) return out;
  out += fmt::format("database\t{}\nseq\t{}\noverlap\t{}\n", field(st.database_id), st.seq,
                     st.overlap);
  for (const auto& id : st.claimed) out += "claimed\t" + field(id) + '\n';
  for (const auto& id : st.sessions) out += "session\t" + field(id) + '\n';
  for (std::size_t i = 0; i < kCounterCount; ++i) {
    for (const auto& [labels, value] : st.counters[i]) {
      out += fmt::format("counter\t{}\t{}", kCounters[i].name, value);
      for (const auto& l : labels) out += '\t' + field(l);
      out += '\n';
    }
  }
  return out;
}

FoldState load(std::string_view text) {
  FoldState st;
  std::size_t at = 0;
  bool has_seq = false, has_overlap = false;
  std::size_t line_no = 0;
  while (at < text.size()) {
    const auto eol = text.find('\n', at);
    if (eol == std::string_view::npos) malformed(line_no + 1, "the last line has no newline");
    const auto line = text.substr(at, eol - at);
    at = eol + 1;
    ++line_no;
    const auto f = split(line, line_no);
    const std::string& kind = f[0];
    const auto want = [&](std::size_t n) {
      if (f.size() != n) {
        malformed(line_no, fmt::format("a {} line has {} fields, not {}", kind, f.size(), n));
      }
    };
    if (line_no == 1) {
      if (f.size() != 2 || kind != kMagic) malformed(1, "this is not a cplane metrics state");
      if (f[1] != kVersion) {
        malformed(1, fmt::format("version {} is not one this cplane reads ({})",
                                 field(f[1].substr(0, 20)), kVersion));
      }
    } else if (kind == "database") {
      want(2);
      if (st.seeded) malformed(line_no, "a second database line");
      st.seeded = true;
      st.database_id = f[1];
    } else if (!st.seeded) {
      malformed(line_no, "a database line must come first");
    } else if (kind == "seq") {
      want(2);
      st.seq = count(f[1], line_no, "seq");
      has_seq = true;
    } else if (kind == "overlap") {
      want(2);
      st.overlap = count(f[1], line_no, "overlap");
      has_overlap = true;
    } else if (kind == "claimed") {
      want(2);
      st.claimed.insert(f[1]);
    } else if (kind == "session") {
      want(2);
      st.sessions.insert(f[1]);
    } else if (kind == "counter") {
      if (f.size() < 3) malformed(line_no, "a counter line needs a family and a value");
      std::size_t i = 0;
      while (i < kCounterCount && f[1] != kCounters[i].name) ++i;
      if (i == kCounterCount) {
        malformed(line_no, fmt::format("no counter family {}", field(f[1].substr(0, 60))));
      }
      want(3 + kCounters[i].labels.size());
      const std::vector<std::string> labels(f.begin() + 3, f.end());
      if (!st.counters[i].emplace(labels, count(f[2], line_no, "a counter")).second) {
        malformed(line_no, "a counter series given twice");
      }
    } else {
      malformed(line_no, fmt::format("unknown record \"{}\"", field(kind.substr(0, 40))));
    }
  }
  if (line_no == 0) malformed(1, "it is empty");
  if (st.seeded && (!has_seq || !has_overlap)) malformed(line_no, "no seq or no overlap line");
  return st;
}

}  // namespace cplane::metrics
