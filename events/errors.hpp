// The error types are public (<cplane/errors.hpp>); the helpers that build
// cplane's own messages are not.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <cplane/errors.hpp>

namespace cplane {

// An id, owner or actor as shown in a message: quoted, cut to 80
// characters, with control and bidi characters escaped (\x1b, \u202e).
std::string quote_id(std::string_view id);

// A code point that changes how text shows rather than showing: C0, DEL,
// C1, zero-width and bidi controls, the BOM. Never allowed in a name.
bool is_invisible_control(std::uint32_t code_point);

// An append to a stream whose head row is gone while its events are there
// (the row deleted behind cplane's back): corruption. Appending would fork
// the stream's chain (a second event of revision 1), so nothing is written.
StorageError headless_stream(std::string_view kind, std::string_view id);

}  // namespace cplane
