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

std::string_view to_string(WorkKind kind) {
  switch (kind) {
    case WorkKind::task: return "task";
    case WorkKind::issue: return "issue";
    case WorkKind::pr: return "pr";
  }
  return "unknown";
}

WorkKind parse_work_kind(std::string_view text) {
  if (text == "task") return WorkKind::task;
  if (text == "issue") return WorkKind::issue;
  if (text == "pr") return WorkKind::pr;
  throw InvalidArgument("unknown kind '" + std::string(text) + "': expected task, issue or pr");
}

std::string_view to_string(ReviewState review) {
  switch (review) {
    case ReviewState::none: return "none";
    case ReviewState::approved: return "approved";
    case ReviewState::changes_requested: return "changes_requested";
  }
  return "unknown";
}

ReviewState parse_review_state(std::string_view text) {
  if (text == "none") return ReviewState::none;
  if (text == "approved") return ReviewState::approved;
  if (text == "changes_requested") return ReviewState::changes_requested;
  throw InvalidArgument("unknown review state '" + std::string(text) +
                        "': expected none, approved or changes_requested");
}

std::string_view to_string(CloseReason reason) {
  return reason == CloseReason::merged ? "merged" : "closed";
}

CloseReason parse_close_reason(std::string_view text) {
  if (text == "merged") return CloseReason::merged;
  if (text == "closed") return CloseReason::closed;
  throw InvalidArgument("unknown close reason '" + std::string(text) +
                        "': expected merged or closed");
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

std::string_view to_string(StreamKind kind) {
  switch (kind) {
    case StreamKind::item: return "item";
    case StreamKind::project: return "project";
    case StreamKind::session: return "session";
    case StreamKind::incident: return "incident";
  }
  return "unknown";
}

std::optional<StreamKind> parse_stream_kind(std::string_view text) {
  if (text == "item") return StreamKind::item;
  if (text == "project") return StreamKind::project;
  if (text == "session") return StreamKind::session;
  if (text == "incident") return StreamKind::incident;
  return std::nullopt;
}

StreamRef stream_of(const Event& event) {
  const StreamKind kind = stream_kind_of(event.body);
  switch (kind) {
    case StreamKind::item: return {kind, event.item_id};
    case StreamKind::project: return {kind, event.project_id};
    case StreamKind::session:
      // A session's events name it in their body.
      return {kind, std::visit(
                        [](const auto& body) -> std::string {
                          if constexpr (requires { body.session; }) {
                            return body.session;
                          } else {
                            return {};
                          }
                        },
                        event.body)};
    case StreamKind::incident:
      if (const auto* linked = std::get_if<IncidentLinked>(&event.body)) {
        return {kind, incident_stream_id(linked->provider, linked->fingerprint, linked->org,
                                         linked->repo, linked->environment)};
      }
      return {kind, ""};
  }
  return {kind, ""};
}

}  // namespace cplane
