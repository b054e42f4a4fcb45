#include "events/chain.hpp"

#include <cstring>

#include <sodium.h>

#include "events/codec.hpp"
#include "events/errors.hpp"

namespace cplane {

namespace {

const unsigned char kPersonal[crypto_generichash_blake2b_PERSONALBYTES] = {
    'c', 'p', 'l', 'a', 'n', 'e', '.', 'e', 'v', 'e', 'n', 't', '.', 'v', '1', 0};
const unsigned char kPersonalV2[crypto_generichash_blake2b_PERSONALBYTES] = {
    'c', 'p', 'l', 'a', 'n', 'e', '.', 'e', 'v', 'e', 'n', 't', '.', 'v', '2', 0};
const unsigned char kPayloadPersonal[crypto_generichash_blake2b_PERSONALBYTES] = {
    'c', 'p', 'l', 'a', 'n', 'e', '.', 'p', 'a', 'y', 'l', 'o', 'a', 'd', '2', 0};

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

void init(crypto_generichash_blake2b_state& s, const unsigned char* personal = kPersonal) {
  // sodium_init takes a lock each call: once per process is enough.
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw InternalError("libsodium failed to initialise");
  crypto_generichash_blake2b_init_salt_personal(&s, nullptr, 0, 32, nullptr, personal);
}

void put_bytes(crypto_generichash_blake2b_state& s, std::string_view bytes) {
  crypto_generichash_blake2b_update(&s, reinterpret_cast<const unsigned char*>(bytes.data()),
                                    bytes.size());
}

void put_place(crypto_generichash_blake2b_state& s, const Hash& prev, Seq seq,
               std::int64_t revision, std::string_view stream_kind, std::string_view stream_id) {
  crypto_generichash_blake2b_update(&s, prev.data(), prev.size());
  put_int(s, seq);
  put_int(s, revision);
  put_text(s, stream_kind);
  put_text(s, stream_id);
}

Hash finish(crypto_generichash_blake2b_state& s) {
  Hash out;
  crypto_generichash_blake2b_final(&s, out.data(), out.size());
  return out;
}

// BLAKE2b-256 of the salt (length first) and the payload.
Hash payload_digest(std::string_view salt, std::string_view payload) {
  crypto_generichash_blake2b_state s;
  init(s, kPayloadPersonal);
  put_text(s, salt);
  put_bytes(s, payload);
  return finish(s);
}

// What a redacted body holds in place of a payload of `size` bytes: JSON
// of the same length.
std::string filler(std::size_t size) {
  std::string out(size, ' ');
  const std::string_view word = size >= 4 ? "null" : "0";
  if (size > 0) out.replace(0, word.size(), word);
  return out;
}

// Chain 2 (chain.hpp): `digest` is the payload's, given (a redacted body)
// or taken from the body's own salt and payload.
Hash chain2_hash(const Hash& prev, Seq seq, std::int64_t revision, std::string_view stream_kind,
                 std::string_view stream_id, std::string_view body, const ChainForm& form,
                 const Hash* digest) {
  crypto_generichash_blake2b_state s;
  init(s, kPersonalV2);
  put_place(s, prev, seq, revision, stream_kind, stream_id);
  put_int(s, static_cast<std::int64_t>(body.size()));
  if (!form.has_payload) {
    put_bytes(s, body);
    return finish(s);
  }
  // Where the two left-out parts lie, then every other byte in order.
  put_int(s, static_cast<std::int64_t>(form.payload_at));
  put_int(s, static_cast<std::int64_t>(form.payload_size));
  put_int(s, static_cast<std::int64_t>(form.salt_at));
  put_int(s, static_cast<std::int64_t>(form.salt_size));
  struct Span {
    std::size_t at, size;
  };
  Span spans[2] = {{form.payload_at, form.payload_size}, {form.salt_at, form.salt_size}};
  if (spans[1].at < spans[0].at) std::swap(spans[0], spans[1]);
  std::size_t pos = 0;
  for (const auto& span : spans) {
    if (span.size == 0) continue;
    put_bytes(s, body.substr(pos, span.at - pos));
    pos = span.at + span.size;
  }
  put_bytes(s, body.substr(pos));
  const Hash d = digest != nullptr ? *digest
                                   : payload_digest(body.substr(form.salt_at, form.salt_size),
                                                    body.substr(form.payload_at, form.payload_size));
  crypto_generichash_blake2b_update(&s, d.data(), d.size());
  return finish(s);
}

}  // namespace

Hash chain_hash(const Hash& prev, Seq seq, std::int64_t revision, std::string_view stream_kind,
                std::string_view stream_id, std::string_view body) {
  const ChainForm form = chain_form(body);
  if (form.chain == 2) {
    return chain2_hash(prev, seq, revision, stream_kind, stream_id, body, form, nullptr);
  }
  crypto_generichash_blake2b_state s;
  init(s, kPersonal);
  put_place(s, prev, seq, revision, stream_kind, stream_id);
  put_text(s, body);
  return finish(s);
}

std::optional<Hash> stored_chain_hash(const Hash& prev, Seq seq, std::int64_t revision,
                                      std::string_view stream_kind, std::string_view stream_id,
                                      std::string_view body, std::string_view payload_hash) {
  if (payload_hash.empty()) return chain_hash(prev, seq, revision, stream_kind, stream_id, body);
  Hash digest{};
  const ChainForm form = chain_form(body);
  if (form.chain != 2 || !form.has_payload || !hash_from_bytes(payload_hash, digest)) {
    return std::nullopt;
  }
  // Only the filler redaction writes stands where the payload and its salt
  // were: those bytes are not hashed, so nothing else may be read there.
  if (body.substr(form.payload_at, form.payload_size) != filler(form.payload_size) ||
      body.substr(form.salt_at, form.salt_size).find_first_not_of('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  return chain2_hash(prev, seq, revision, stream_kind, stream_id, body, form, &digest);
}

std::optional<RedactedBody> redact_payload(std::string_view body) {
  const ChainForm form = chain_form(body);
  if (form.chain != 2) {
    // A body this build cannot read has no payload to take out; one of
    // chain 1 with a payload cannot lose it and stay checkable.
    try {
      const Event event = decode(body);
      if (!std::holds_alternative<ItemQueued>(event.body) &&
          !std::holds_alternative<ScheduleCreated>(event.body)) {
        return std::nullopt;
      }
    } catch (const Error&) {
      return std::nullopt;
    }
    throw InvalidArgument(
        "an event with a payload was written before chain 2 (its hash covers the payload's "
        "bytes): without them it cannot be checked");
  }
  if (!form.has_payload) return std::nullopt;
  RedactedBody out;
  out.payload_hash = payload_digest(body.substr(form.salt_at, form.salt_size),
                                    body.substr(form.payload_at, form.payload_size));
  out.body = std::string(body);
  out.body.replace(form.payload_at, form.payload_size, filler(form.payload_size));
  out.body.replace(form.salt_at, form.salt_size, std::string(form.salt_size, '\0'));
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
