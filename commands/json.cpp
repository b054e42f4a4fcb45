#include "commands/json.hpp"

#include <capnp/compat/json.h>
#include <capnp/message.h>
#include <kj/exception.h>

#include "events/errors.hpp"

namespace cplane {

void require_json(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    throw InvalidArgument("the payload is empty: it must be a JSON value");
  }
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<capnp::JsonValue>();
  capnp::JsonCodec codec;
  codec.setMaxNestingDepth(64);
  auto error = kj::runCatchingExceptions(
      [&] { codec.decodeRaw(kj::ArrayPtr<const char>(text.data(), text.size()), root); });
  KJ_IF_MAYBE(e, error) {
    // KJ prefixes the reason with the failed condition ("expected ...; reason").
    std::string reason = e->getDescription().cStr();
    if (auto cut = reason.rfind("; "); cut != std::string::npos) reason = reason.substr(cut + 2);
    throw InvalidArgument("the payload is not valid JSON: " + reason);
  }
}

}  // namespace cplane
