// JSON validation for payloads (KJ's JSON codec; its exceptions stop here).
#pragma once

#include <string_view>

namespace cplane {

// Throws InvalidArgument, naming the problem, unless `text` is exactly one
// well-formed JSON value (surrounding white space allowed).
void require_json(std::string_view text);

}  // namespace cplane
