#include "events/codec.hpp"

#include <cstdint>
#include <cstring>

#include <capnp/message.h>
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

ChainForm chain_form(std::string_view body) {
  ChainForm form;
  if (body.empty() || body.size() % sizeof(capnp::word) != 0) return form;
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
