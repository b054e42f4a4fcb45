#include "events/event.hpp"

#include "events/errors.hpp"

namespace cplane {

std::string_view to_string(Outcome outcome) {
  return outcome == Outcome::done ? "done" : "failed";
}

Outcome parse_outcome(std::string_view text) {
  if (text == "done") return Outcome::done;
  if (text == "failed") return Outcome::failed;
  throw InvalidArgument("unknown outcome '" + std::string(text) +
                        "': expected done or failed");
}

std::string_view type_name(const EventBody& body) {
  return std::visit([](const auto& e) { return EventTraits<std::decay_t<decltype(e)>>::name(e); },
                    body);
}

std::string_view StoredEvent::type() const { return type_name(event.body); }

std::optional<Fence> fence_of(const EventBody& body) {
  return std::visit([](const auto& e) { return EventTraits<std::decay_t<decltype(e)>>::fence(e); },
                    body);
}

StreamKind stream_kind_of(const EventBody& body) {
  return std::visit([](const auto& e) { return EventTraits<std::decay_t<decltype(e)>>::stream; },
                    body);
}

std::string_view to_string(StreamKind kind) {
  switch (kind) {
    case StreamKind::item: return "item";
    case StreamKind::project: return "project";
  }
  return "unknown";
}

std::optional<StreamKind> parse_stream_kind(std::string_view text) {
  if (text == "item") return StreamKind::item;
  if (text == "project") return StreamKind::project;
  return std::nullopt;
}

StreamRef stream_of(const Event& event) {
  const StreamKind kind = stream_kind_of(event.body);
  switch (kind) {
    case StreamKind::item: return {kind, event.item_id};
    case StreamKind::project: return {kind, event.project_id};
  }
  return {kind, ""};
}

}  // namespace cplane
