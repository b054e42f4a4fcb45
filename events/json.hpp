// Strict JSON validation for payloads (RFC 8259, UTF-8 text).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cplane {

// Throws InvalidArgument, naming the problem and its byte offset, unless
// `text` is exactly one JSON value (surrounding white space allowed) in valid
// UTF-8, nested at most 512 deep, whose \u escapes name characters: a
// surrogate escape (\ud800-\udfff) only as half of a high-low pair (I-JSON).
// Stricter than many parsers on purpose: a payload stored here is later
// embedded as-is in JSON output.
void require_json(std::string_view text);

// The largest payload a command accepts (and verify expects in the log).
inline constexpr std::size_t kMaxPayloadBytes = 1 << 20;

// A payload as every command takes it: JSON (require_json) of at most
// kMaxPayloadBytes. Throws InvalidArgument. (Also declared in
// <cplane/store.hpp>, for callers that check before they open a store.)
void require_payload(std::string_view payload_json);

// The length (1-4) of the well-formed UTF-8 sequence starting at `text[at]`,
// or 0 if there is none (overlong, surrogate, out of range, truncated).
std::size_t utf8_sequence_length(std::string_view text, std::size_t at);

// A list as rows and options join it with commas (an assignment's actions,
// an incident's linked pull requests): every part, empty ones too, so that
// "a,,b" and "a," are never read as something tidier; "" is no part.
std::vector<std::string> split_list(std::string_view text);
// The parts joined by commas (split_list's inverse).
std::string join_list(const std::vector<std::string>& parts);

}  // namespace cplane
