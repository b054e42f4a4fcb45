// Encoding of events to and from their canonical Cap'n Proto bytes.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "events/event.hpp"

namespace cplane {

// One event as a single-segment Cap'n Proto message (see events.capnp).
std::string encode(const Event& event);

// Decodes bytes written by `encode`, from any alignment. Throws UnreadableEvent
// when the bytes are truncated, are not a message, or hold an event type this
// build does not know. Never crashes on hostile input.
Event decode(std::span<const unsigned char> bytes);
inline Event decode(std::string_view bytes) {
  return decode(std::span(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
}

}  // namespace cplane
