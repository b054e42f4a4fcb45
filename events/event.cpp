#include "events/event.hpp"

#include "events/errors.hpp"
#include "events/names.hpp"

namespace cplane {

std::string_view to_string(Outcome outcome) { return name_of(outcome); }
std::string_view to_string(WorkKind kind) { return name_of(kind); }
std::string_view to_string(ReviewState review) { return name_of(review); }
std::string_view to_string(CloseReason reason) { return name_of(reason); }
std::string_view to_string(StreamKind kind) { return name_of(kind); }
std::optional<StreamKind> parse_stream_kind(std::string_view text) {
  return enum_named<StreamKind>(text);
}

namespace {

// Parses `text` as one of Enum's names, else InvalidArgument naming what
// was expected ("unknown kind 'x': expected task, issue or pr").
template <class Enum>
Enum parse_named(std::string_view text, const char* what) {
  if (auto value = enum_named<Enum>(text)) return *value;
  throw InvalidArgument("unknown " + std::string(what) + " '" + std::string(text) +
                        "': expected " + names_listed<Enum>());
}

}  // namespace

Outcome parse_outcome(std::string_view text) { return parse_named<Outcome>(text, "outcome"); }
WorkKind parse_work_kind(std::string_view text) { return parse_named<WorkKind>(text, "kind"); }
ReviewState parse_review_state(std::string_view text) {
  return parse_named<ReviewState>(text, "review state");
}
CloseReason parse_close_reason(std::string_view text) {
  return parse_named<CloseReason>(text, "close reason");
}

std::string incident_stream_id(std::string_view provider, std::string_view fingerprint,
                               std::string_view org, std::string_view repo,
                               std::string_view environment) {
  std::string out;
  bool first = true;
  for (const std::string_view part : {provider, fingerprint, org, repo, environment}) {
    if (!first) out += '/';
    first = false;
    for (const char c : part) {
      if (c == '%') {
        out += "%25";
      } else if (c == '/') {
        out += "%2F";
      } else {
        out += c;
      }
    }
  }
  return out;
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

namespace {

EventField::Value field_value(const std::string& v) { return v; }
EventField::Value field_value(const JsonText& v) { return EventField::Json{v.text}; }
EventField::Value field_value(std::int64_t v) { return v; }
EventField::Value field_value(const std::vector<std::string>& v) { return v; }
EventField::Value field_value(const std::optional<std::string>& v) {
  return v ? EventField::Value{*v} : EventField::Value{};
}
EventField::Value field_value(const std::optional<std::int64_t>& v) {
  return v ? EventField::Value{*v} : EventField::Value{};
}
template <class Enum>
  requires std::is_enum_v<Enum>
EventField::Value field_value(Enum v) {
  return std::string(to_string(v));
}

}  // namespace

std::vector<EventField> fields_of(const EventBody& body) {
  std::vector<EventField> out;
  std::visit(
      [&](const auto& e) {
        EventTraits<std::decay_t<decltype(e)>>::fields(e, [&](std::string_view name, const auto& v) {
          if constexpr (std::is_integral_v<std::decay_t<decltype(v)>>) {
            out.push_back({name, field_value(static_cast<std::int64_t>(v))});
          } else {
            out.push_back({name, field_value(v)});
          }
        });
      },
      body);
  return out;
}

StreamRef stream_of(const Event& event) {
  return std::visit(
      [&](const auto& e) {
        using Traits = EventTraits<std::decay_t<decltype(e)>>;
        return StreamRef{Traits::stream, Traits::stream_id(event, e)};
      },
      event.body);
}

}  // namespace cplane
