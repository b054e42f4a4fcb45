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

// Which hash chain covers a stored body, and where its payload lies
// (events/chain.hpp). Never throws: a body that cannot be read is chain 1,
// whose hash then disagrees with it, and verify names it.
struct ChainForm {
  int chain = 1;
  bool has_payload = false;      // a kind that carries one (queued, schedule_created)
  std::size_t payload_at = 0;    // its bytes: body[payload_at, payload_at + payload_size)
  std::size_t payload_size = 0;
  std::size_t salt_at = 0;       // its salt's: body[salt_at, salt_at + salt_size)
  std::size_t salt_size = 0;
};
ChainForm chain_form(std::string_view body);

}  // namespace cplane
