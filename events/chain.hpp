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
// Each stream's head (its last revision and hash) is stored apart from the
// events, and the log's digest is the XOR of every head's hash with the
// number of events: a cut-off tail disagrees with its head, a deleted head
// with the digest. XOR composes in any order, so a server backend can keep
// the digest in shards that commits update without a global lock.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "events/event.hpp"

namespace cplane {

using Hash = std::array<std::uint8_t, 32>;

inline constexpr Hash kNoHash{};  // the "previous hash" of a stream's first event

Hash chain_hash(const Hash& prev, Seq seq, std::int64_t revision, std::string_view stream_kind,
                std::string_view stream_id, std::string_view body);

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
