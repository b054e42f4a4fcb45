// How problem details quote values: never more than 200 bytes of one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace cplane {

// A value as a problem or a change quotes it: whole when short; otherwise
// its first 200 bytes, its length and a fingerprint (FNV-1a, 64 bits), so
// that a report on huge tampered payloads stays small.
inline std::string quoted(const std::string& s) {
  constexpr std::size_t kShown = 200;
  if (s.size() <= kShown) return fmt::format("'{}'", s);
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  std::size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xc0) == 0x80) --cut;  // whole characters
  return fmt::format("'{}...' ({} bytes, fnv1a {:016x})", std::string_view(s).substr(0, cut),
                     s.size(), h);
}

// A detail sentence kept to at most kMaxDetail bytes (ids edited to huge
// values are not always quoted where they appear); a long one is cut at a
// character boundary and says how long it was.
inline constexpr std::size_t kMaxDetail = 1024;
inline void bound(std::string& text, std::size_t most = kMaxDetail) {
  if (text.size() <= most) return;
  std::size_t cut = most;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  const std::size_t size = text.size();
  text.resize(cut);
  text += fmt::format("... ({} bytes)", size);
}

}  // namespace cplane
