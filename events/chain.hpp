// The log's hash chain: every event carries a BLAKE2b-256 hash (libsodium)
// over its place in the log and its canonical body, chained to the hash of
// the event before it in the same stream.
//
//   hash(e) = BLAKE2b-256(personal "cplane.event.v1",
//                         prev hash (32 bytes; zeros for revision 1)
//                         || seq || revision || stream kind || stream id || body)
//
// Integers are 8 bytes big-endian; texts and the body carry an 8-byte length
// before them. The stream kind and id are the stored columns (events written
// before streams have none in their body), so moving an event to another
// stream, renumbering it or editing its body all change its hash. The item,
// project, type and at columns are copies of the body, checked against it
// by verify.
//
// Chain 2. Every event written since chains were versioned says `chain 2`
// in its body (events.capnp), and its hash covers its payload (the JSON of
// a queued item or of a schedule) by a salted digest, not by its bytes:
//
//   hash(e) = BLAKE2b-256(personal "cplane.event.v2",
//                         prev hash || seq || revision || stream kind || stream id
//                         || body length || the payload's and the salt's offsets and lengths
//                         || the body's bytes outside the payload and the salt, in order
//                         || BLAKE2b-256(personal "cplane.payload2", salt || payload))
//
// The salt is 16 random bytes the body carries beside its payload, so that
// a digest cannot be matched against guessed payloads once both are gone.
// An event of a kind without a payload hashes its whole body after its
// length. A segment may hold a body whose payload and salt were overwritten
// (archive --redact-payloads: the payload with `null` padded with spaces,
// or `0` under four bytes; the salt with zeros, and nothing else is
// accepted there) beside the digest, and its chain is still checked; the
// payload's length stays visible. The chain is picked per event by its
// body: a body written before (chain 0 in the field) is hashed as chain 1,
// and flipping the field changes the bytes either hash covers.
//
// Each stream's head (its last revision and hash) is stored apart from the
// events, and the log's digest is the XOR of every head's hash with the
// number of events: a cut-off tail disagrees with its head, a deleted head
// with the digest. XOR composes in any order, so a server backend can keep
// the digest in shards that commits update without a global lock.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "events/event.hpp"

namespace cplane {

using Hash = std::array<std::uint8_t, 32>;

inline constexpr Hash kNoHash{};  // the "previous hash" of a stream's first event

inline constexpr std::uint8_t kChainVersion = 2;  // what encode() writes

// The hash of an event whose body is whole, by the chain its body names.
Hash chain_hash(const Hash& prev, Seq seq, std::int64_t revision, std::string_view stream_kind,
                std::string_view stream_id, std::string_view body);

// The hash of a stored or archived event: `payload_hash` empty, as
// chain_hash; else the body is a redacted one (its payload's bytes are not
// read) and `payload_hash` the payload's digest. nullopt when no event can
// hash that way: a redacted body of chain 1, of a kind without a payload,
// with anything but the filler where its payload and salt were, or a
// digest that is not 32 bytes.
std::optional<Hash> stored_chain_hash(const Hash& prev, Seq seq, std::int64_t revision,
                                      std::string_view stream_kind, std::string_view stream_id,
                                      std::string_view body, std::string_view payload_hash);

// A body as a redacted segment holds it: the payload's bytes overwritten
// with JSON of the same length (`null`, or `0` under four bytes, padded
// with spaces) and its salt with zeros, beside the payload's digest. nullopt for a body whose kind
// carries no payload. InvalidArgument for a chain-1 body with a payload:
// its hash covers the payload's bytes, so without them it cannot be
// checked.
struct RedactedBody {
  std::string body;
  Hash payload_hash{};
};
std::optional<RedactedBody> redact_payload(std::string_view body);

// a ^= b: how heads fold into the log's digest (and out of it again).
void xor_into(Hash& a, const Hash& b);

std::string to_hex(const Hash& h);
// A stored hash column: exactly 32 bytes, else false (NULL, truncated, text).
bool hash_from_bytes(std::string_view bytes, Hash& out);
inline std::string_view as_bytes(const Hash& h) {
  return {reinterpret_cast<const char*>(h.data()), h.size()};
}

// A running BLAKE2b-256 over many parts (an export's contents).
class Hasher {
 public:
  Hasher();
  void add(std::string_view bytes);
  void add(std::int64_t value);
  Hash done();

 private:
  alignas(64) unsigned char state_[384];
};

}  // namespace cplane
