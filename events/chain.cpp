#include "events/chain.hpp"

#include <cstring>

#include <sodium.h>

#include "events/errors.hpp"

namespace cplane {

namespace {

const unsigned char kPersonal[crypto_generichash_blake2b_PERSONALBYTES] = {
    'c', 'p', 'l', 'a', 'n', 'e', '.', 'e', 'v', 'e', 'n', 't', '.', 'v', '1', 0};

crypto_generichash_blake2b_state& state_of(unsigned char* bytes) {
  static_assert(sizeof(crypto_generichash_blake2b_state) <= 384);
  return *reinterpret_cast<crypto_generichash_blake2b_state*>(bytes);
}

void put_int(crypto_generichash_blake2b_state& s, std::int64_t value) {
  unsigned char be[8];
  auto u = static_cast<std::uint64_t>(value);
  for (int i = 7; i >= 0; --i, u >>= 8) be[i] = static_cast<unsigned char>(u & 0xff);
  crypto_generichash_blake2b_update(&s, be, sizeof be);
}

void put_text(crypto_generichash_blake2b_state& s, std::string_view text) {
  put_int(s, static_cast<std::int64_t>(text.size()));
  crypto_generichash_blake2b_update(&s, reinterpret_cast<const unsigned char*>(text.data()),
                                    text.size());
}

void init(crypto_generichash_blake2b_state& s) {
  // sodium_init takes a lock each call: once per process is enough.
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw InternalError("libsodium failed to initialise");
  crypto_generichash_blake2b_init_salt_personal(&s, nullptr, 0, 32, nullptr, kPersonal);
}

}  // namespace

Hash chain_hash(const Hash& prev, Seq seq, std::int64_t revision, std::string_view stream_kind,
                std::string_view stream_id, std::string_view body) {
  crypto_generichash_blake2b_state s;
  init(s);
  crypto_generichash_blake2b_update(&s, prev.data(), prev.size());
  put_int(s, seq);
  put_int(s, revision);
  put_text(s, stream_kind);
  put_text(s, stream_id);
  put_text(s, body);
  Hash out;
  crypto_generichash_blake2b_final(&s, out.data(), out.size());
  return out;
}

void xor_into(Hash& a, const Hash& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] ^= b[i];
}

std::string to_hex(const Hash& h) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (auto b : h) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool hash_from_bytes(std::string_view bytes, Hash& out) {
  if (bytes.size() != out.size()) return false;
  std::memcpy(out.data(), bytes.data(), out.size());
  return true;
}

Hasher::Hasher() { init(state_of(state_)); }
void Hasher::add(std::string_view bytes) { put_text(state_of(state_), bytes); }
void Hasher::add(std::int64_t value) { put_int(state_of(state_), value); }
Hash Hasher::done() {
  Hash out;
  crypto_generichash_blake2b_final(&state_of(state_), out.data(), out.size());
  return out;
}

}  // namespace cplane
