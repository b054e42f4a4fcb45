#include "events/errors.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace cplane {

const char* to_string(FenceRejected::Reason reason) noexcept {
  switch (reason) {
    case FenceRejected::Reason::unknown_item: return "unknown_item";
    case FenceRejected::Reason::terminal: return "terminal";
    case FenceRejected::Reason::not_claimed: return "not_claimed";
    case FenceRejected::Reason::stale_fence: return "stale_fence";
    case FenceRejected::Reason::cancelled: return "cancelled";
    case FenceRejected::Reason::slot_taken: return "slot_taken";
  }
  return "unknown";
}

const char* to_string(InvalidArgument::Reason reason) noexcept {
  switch (reason) {
    case InvalidArgument::Reason::invalid_input: return "invalid_input";
    case InvalidArgument::Reason::already_exists: return "already_exists";
    case InvalidArgument::Reason::conflict: return "conflict";
    case InvalidArgument::Reason::read_only: return "read_only";
    case InvalidArgument::Reason::misuse: return "misuse";
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
    case NotFound::Reason::unknown_schedule: return "unknown_schedule";
    case NotFound::Reason::unknown_limit: return "unknown_limit";
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
    case GateReason::key_held: return "key_held";
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

namespace {

std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool is_password_key(std::string_view key) {
  std::string k = percent_decoded(key);
  for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!k.empty() && k.back() == ' ') k.pop_back();
  while (!k.empty() && k.front() == ' ') k.erase(k.begin());
  return k == "password";
}

// Where each secret of `url` is: [begin, end) ranges of its characters.
std::vector<std::pair<std::size_t, std::size_t>> secret_ranges(std::string_view url) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  // key=value pairs: a URL's query (split at '&') or a conninfo string
  // (split at spaces); a key is matched after percent-decoding and in any
  // case, as libpq reads it.
  const auto scheme = url.find("://");
  const std::size_t query = scheme == std::string_view::npos ? 0 : url.find('?', scheme);
  if (query != std::string_view::npos) {
    const char separator = scheme == std::string_view::npos ? ' ' : '&';
    std::size_t at = scheme == std::string_view::npos ? 0 : query + 1;
    while (at <= url.size()) {
      std::size_t end = url.find(separator, at);
      if (end == std::string_view::npos) end = url.size();
      if (scheme != std::string_view::npos) {
        const auto hash = url.find('#', at);
        if (hash != std::string_view::npos && hash < end) end = hash;
      }
      const auto eq = url.find('=', at);
      if (eq != std::string_view::npos && eq < end && is_password_key(url.substr(at, eq - at))) {
        std::size_t value = eq + 1;
        while (separator == ' ' && value < end && url[value] == ' ') ++value;
        out.emplace_back(value, end);
      }
      at = end + 1;
    }
  }
  // postgresql://user:secret@host: the userinfo's password.
  if (scheme != std::string_view::npos) {
    const auto authority_end = std::min(url.find_first_of("/?#", scheme + 3), url.size());
    const auto at = url.rfind('@', authority_end);
    if (at != std::string_view::npos && at > scheme + 3) {
      const auto colon = url.find(':', scheme + 3);
      if (colon != std::string_view::npos && colon < at) out.emplace_back(colon + 1, at);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string redacted_url(std::string url) {
  const auto ranges = secret_ranges(url);
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
    url.replace(it->first, it->second - it->first, "***");
  }
  return url;
}

std::string redacted_message(std::string message, std::string_view url) {
  // Longest first, so that a secret holding a shorter one goes whole.
  std::vector<std::string> secrets;
  for (const auto& [begin, end] : secret_ranges(url)) {
    const std::string raw(url.substr(begin, end - begin));
    if (raw.empty()) continue;
    secrets.push_back(raw);
    secrets.push_back(percent_decoded(raw));
  }
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t at = 0; (at = message.find(secret, at)) != std::string::npos;) {
      message.replace(at, secret.size(), "***");
      at += 3;
    }
  }
  return message;
}

StorageError headless_stream(std::string_view kind, std::string_view id) {
  return StorageError(StorageError::Category::corruption,
                      fmt::format("the head of stream {} {} is missing while the stream has "
                                  "events (edited outside cplane): nothing was written; run "
                                  "cplane verify (on SQLite, cplane recover puts back the head "
                                  "from the stream's last event)",
                                  kind, quote_id(id)));
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
