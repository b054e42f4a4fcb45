#include "events/errors.hpp"

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
  return reason == NotFound::Reason::unknown_item ? "unknown_item" : "unknown_project";
}

std::string quote_id(std::string_view id) {
  constexpr std::size_t kShown = 80;  // characters (UTF-8 sequences), not bytes
  std::size_t characters = 0;
  for (std::size_t at = 0; at < id.size(); ++at) {
    if ((static_cast<unsigned char>(id[at]) & 0xc0) == 0x80) continue;  // continuation byte
    if (++characters > kShown) {
      return fmt::format("'{}...' ({} bytes)", id.substr(0, at), id.size());
    }
  }
  return fmt::format("'{}'", id);
}

}  // namespace cplane
