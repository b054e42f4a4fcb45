#include "events/codec.hpp"

#include <bit>
#include <cstdint>
#include <optional>
#include <cstring>

#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>
#include <kj/exception.h>
#include <sodium.h>

#include "events/chain.hpp"
#include "events/errors.hpp"
#include "events/events.capnp.h"
#include "events/wire_codec.hpp"

namespace cplane {

void wire_codec::fresh_salt(std::uint8_t (&out)[kPayloadSaltBytes]) {
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw InternalError("libsodium failed to initialise");
  randombytes_buf(out, sizeof out);
}

using namespace wire_codec;


std::string encode(const Event& event) {
  capnp::MallocMessageBuilder message(64);
  auto root = message.initRoot<wire::Event>();
  root.setAt(event.at);
  root.setActor(text(event.actor));
  root.setProjectId(text(event.project_id));
  root.setItemId(text(event.item_id));
  const StreamRef stream = stream_of(event);
  root.setStreamKind(to_wire(stream.kind));
  root.setStreamId(text(stream.id));
  root.setRequestId(event.request_id);
  root.setChain(kChainVersion);
  auto body = root.initBody();
  std::visit([&](const auto& e) { WireCodec<std::decay_t<decltype(e)>>::encode(body, e); },
             event.body);
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

namespace {

Event decode_aligned(kj::ArrayPtr<const capnp::word> words) {
  capnp::ReaderOptions options;
  // Proportional to the body: text is charged against the limit, and a
  // stored body can hold a payload of up to 1 MiB.
  options.traversalLimitInWords = 4 * words.size() + 1024;
  options.nestingLimit = 16;
  capnp::FlatArrayMessageReader reader(words, options);
  auto root = reader.getRoot<wire::Event>();
  Event event;
  event.at = root.getAt();
  event.request_id = root.getRequestId();
  event.actor = str(root.getActor());
  event.project_id = str(root.getProjectId());
  event.item_id = str(root.getItemId());
  if (!BodyCodecs::decode(root.getBody(), event.body)) {
    throw UnknownEventType("unknown event type (union member " +
                           std::to_string(static_cast<unsigned>(root.getBody().which())) +
                           "): written by a newer cplane?");
  }
  // The stream the body names must be the one its kind and ids make; events
  // written before streams were recorded name none (UNSPECIFIED) and are
  // filed by their kind. A body that contradicts itself is not readable.
  if (root.getStreamKind() != wire::StreamKind::UNSPECIFIED) {
    const StreamRef derived = stream_of(event);
    if (root.getStreamKind() != to_wire(derived.kind) || str(root.getStreamId()) != derived.id) {
      throw UnreadableEvent("event names stream (" +
                            std::to_string(static_cast<unsigned>(root.getStreamKind())) + ", '" +
                            str(root.getStreamId()) + "') but a " +
                            std::string(type_name(event.body)) + " event belongs to (" +
                            std::string(to_string(derived.kind)) + ", '" + derived.id + "')");
    }
  }
  return event;
}

}  // namespace

Event decode(std::span<const unsigned char> bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    throw UnreadableEvent("event body of " + std::to_string(bytes.size()) +
                          " bytes is not a whole number of 8-byte words");
  }
  // Cap'n Proto 0.9 readers reject unaligned buffers: copy into words first.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    return decode_aligned(words);
  } catch (const UnreadableEvent&) {
    throw;
  } catch (const kj::Exception& e) {
    throw UnreadableEvent(std::string("event body cannot be decoded: ") +
                          e.getDescription().cStr());
  }
}

namespace {

// Where the root Event keeps its `chain` field and its body's union tag,
// from the schema itself (in bytes into the struct's data section).
struct RootLayout {
  std::size_t chain_at;
  std::size_t which_at;
};
const RootLayout& root_layout() {
  static const RootLayout layout = [] {
    const auto event = capnp::Schema::from<wire::Event>();
    const auto body = capnp::Schema::from<wire::Event::Body>();
    return RootLayout{event.getFieldByName("chain").getProto().getSlot().getOffset(),
                      body.getProto().getStruct().getDiscriminantOffset() * 2u};
  }();
  return layout;
}

std::uint64_t word_at(std::string_view body, std::size_t word) {
  std::uint64_t w = 0;
  std::memcpy(&w, body.data() + word * 8, 8);
  return w;  // little-endian, as Cap'n Proto's wire format and this machine
}

// The common case without a Cap'n Proto reader (whose arena costs about a
// thousand instructions an event in verify): a single-segment message
// whose root struct says its chain and which member its body is. nullopt
// when the body needs the reader: a payload kind, or anything unusual.
std::optional<ChainForm> quick_form(std::string_view body) {
  static_assert(std::endian::native == std::endian::little);
  const std::size_t words = body.size() / 8;
  if (words < 2) return std::nullopt;
  const std::uint64_t table = word_at(body, 0);
  if ((table & 0xffffffffu) != 0 || (table >> 32) != words - 1) return std::nullopt;
  const std::uint64_t root = word_at(body, 1);
  if ((root & 3) != 0) return std::nullopt;  // not a struct pointer
  const auto offset = static_cast<std::int32_t>(static_cast<std::uint32_t>(root) & ~3u) >> 2;
  const std::size_t data_words = (root >> 32) & 0xffff;
  const std::int64_t start = 2 + static_cast<std::int64_t>(offset);  // in words
  if (start < 2 || start + static_cast<std::int64_t>(data_words) > static_cast<std::int64_t>(words)) {
    return std::nullopt;
  }
  const std::size_t data = static_cast<std::size_t>(start) * 8;
  const std::size_t data_bytes = data_words * 8;
  const auto& layout = root_layout();
  // A field beyond the data section is its default: 0.
  const std::uint8_t chain = layout.chain_at < data_bytes
                                 ? static_cast<std::uint8_t>(body[data + layout.chain_at])
                                 : 0;
  ChainForm form;
  if (chain != 2) return form;
  if (layout.which_at + 2 > data_bytes) return std::nullopt;
  std::uint16_t which = 0;
  std::memcpy(&which, body.data() + data + layout.which_at, 2);
  if (which == wire::Event::Body::ITEM_QUEUED || which == wire::Event::Body::SCHEDULE_CREATED) {
    return std::nullopt;
  }
  form.chain = 2;
  return form;
}

}  // namespace

ChainForm chain_form(std::string_view body) {
  ChainForm form;
  if (body.empty() || body.size() % sizeof(capnp::word) != 0) return form;
  if (auto quick = quick_form(body)) return *quick;
  // Aligned in place when it can be (a std::string's heap buffer is), so
  // that the append path copies nothing.
  kj::Array<capnp::word> copy;
  const auto* base = reinterpret_cast<const capnp::word*>(body.data());
  if (reinterpret_cast<std::uintptr_t>(body.data()) % alignof(capnp::word) != 0) {
    copy = kj::heapArray<capnp::word>(body.size() / sizeof(capnp::word));
    std::memcpy(copy.begin(), body.data(), body.size());
    base = copy.begin();
  }
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 4 * (body.size() / sizeof(capnp::word)) + 1024;
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(base, body.size() / sizeof(capnp::word)), options);
    auto root = reader.getRoot<wire::Event>();
    if (root.getChain() < 2) return form;
    form.chain = root.getChain();
    auto body_union = root.getBody();
    capnp::Text::Reader payload;
    capnp::Data::Reader salt;
    if (body_union.isItemQueued()) {
      payload = body_union.getItemQueued().getPayload();
      salt = body_union.getItemQueued().getPayloadSalt();
    } else if (body_union.isScheduleCreated()) {
      payload = body_union.getScheduleCreated().getPayload();
      salt = body_union.getScheduleCreated().getPayloadSalt();
    } else {
      return form;
    }
    // A reader of a flat message points into it; anything else is not a
    // body this build wrote. An empty one has no place.
    const auto* start = reinterpret_cast<const char*>(base);
    auto place = [&](const void* begin, std::size_t size, std::size_t& at) {
      const auto* p = static_cast<const char*>(begin);
      if (size == 0) return true;
      if (p < start || p + size > start + body.size()) return false;
      at = static_cast<std::size_t>(p - start);
      return true;
    };
    form.has_payload = true;
    form.payload_size = payload.size();
    form.salt_size = salt.size();
    if (!place(payload.begin(), payload.size(), form.payload_at) ||
        !place(salt.begin(), salt.size(), form.salt_at)) {
      return ChainForm{};
    }
    // The two never overlap in a body this build wrote.
    if (form.salt_size > 0 && form.payload_size > 0 &&
        form.salt_at < form.payload_at + form.payload_size &&
        form.payload_at < form.salt_at + form.salt_size) {
      return ChainForm{};
    }
    return form;
  } catch (const kj::Exception&) {
    return ChainForm{};
  }
}

}  // namespace cplane
