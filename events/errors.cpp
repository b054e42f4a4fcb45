#include "events/errors.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace cplane {

const char* to_string(FenceRejected::Reason reason) noexcept {
  switch (reason) {
    case FenceRejected::Reason::unknown_item: return "unknown_item";
    case FenceRejected::Reason::terminal: return "terminal";
    case FenceRejected::Reason::not_claimed: return "not_claimed";
    case FenceRejected::Reason::stale_fence: return "stale_fence";
  }
  return "unknown";
}

const char* to_string(StorageError::Category category) noexcept {
  switch (category) {
    case StorageError::Category::busy: return "busy";
    case StorageError::Category::unavailable: return "unavailable";
    case StorageError::Category::commit_unknown: return "commit_unknown";
    case StorageError::Category::corruption: return "corruption";
    case StorageError::Category::io: return "io";
    case StorageError::Category::full: return "full";
    case StorageError::Category::incompatible: return "incompatible";
  }
  return "unknown";
}

const char* to_string(NotFound::Reason reason) noexcept {
  switch (reason) {
    case NotFound::Reason::unknown_item: return "unknown_item";
    case NotFound::Reason::unknown_project: return "unknown_project";
    case NotFound::Reason::unknown_session: return "unknown_session";
    case NotFound::Reason::session_closed: return "session_closed";
    case NotFound::Reason::unknown_incident: return "unknown_incident";
  }
  return "unknown";
}

const char* to_string(GateReason reason) noexcept {
  switch (reason) {
    case GateReason::no_live_lease: return "no_live_lease";
    case GateReason::stale_fence: return "stale_fence";
    case GateReason::work_terminal: return "work_terminal";
    case GateReason::action_not_allowed: return "action_not_allowed";
    case GateReason::head_drift: return "head_drift";
  }
  return "unknown";
}

namespace {

// The code point of the UTF-8 sequence at `at` of `length` bytes.
std::uint32_t code_point(std::string_view s, std::size_t at, std::size_t length) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[at + i]); };
  switch (length) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1fu) << 6) | (b(1) & 0x3fu);
    case 3: return ((b(0) & 0x0fu) << 12) | ((b(1) & 0x3fu) << 6) | (b(2) & 0x3fu);
    default:
      return ((b(0) & 0x07u) << 18) | ((b(1) & 0x3fu) << 12) | ((b(2) & 0x3fu) << 6) |
             (b(3) & 0x3fu);
  }
}

std::size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 0;
}

}  // namespace

bool is_invisible_control(std::uint32_t c) {
  return c < 0x20 || c == 0x7f || (c >= 0x80 && c <= 0x9f) ||   // C0, DEL, C1
         (c >= 0x200b && c <= 0x200f) ||                         // zero width, LRM, RLM
         (c >= 0x202a && c <= 0x202e) ||                         // bidi embedding, override
         (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;            // bidi isolates, BOM
}

std::string redacted_url(std::string url) {
  // ...?password=secret&... and "host=h password=secret" -> password=***
  for (std::size_t at = 0; (at = url.find("password=", at)) != std::string::npos;) {
    if (at > 0 && url[at - 1] != '?' && url[at - 1] != '&' && url[at - 1] != ' ') {
      ++at;
      continue;
    }
    const std::size_t start = at + 9;
    const std::size_t end = std::min(url.find_first_of("& ", start), url.size());
    url.replace(start, end - start, "***");
    at = start;
  }
  // postgresql://user:secret@host -> postgresql://user:***@host
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const auto authority_end = std::min(url.find_first_of("/?#", scheme + 3), url.size());
  const auto at = url.rfind('@', authority_end);
  if (at == std::string::npos || at < scheme + 3) return url;
  const auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon + 1) + "***" + url.substr(at);
}

std::string quote_id(std::string_view id) {
  // Shown to a person, on a terminal: control and bidi characters are
  // escaped (never sent raw), bytes that are not UTF-8 too; at most 80
  // characters.
  constexpr std::size_t kShown = 80;
  std::string out = "'";
  std::size_t characters = 0;
  std::size_t at = 0;
  while (at < id.size()) {
    if (++characters > kShown) {
      return out + fmt::format("...' ({} bytes)", id.size());
    }
    std::size_t length = sequence_length(static_cast<unsigned char>(id[at]));
    if (length == 0 || at + length > id.size()) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(id[at]));
      ++at;
      continue;
    }
    const std::uint32_t c = code_point(id, at, length);
    if (is_invisible_control(c)) {
      out += c < 0x80 ? fmt::format("\\x{:02x}", c) : fmt::format("\\u{:04x}", c);
    } else {
      out.append(id.substr(at, length));
    }
    at += length;
  }
  return out + "'";
}

}  // namespace cplane
