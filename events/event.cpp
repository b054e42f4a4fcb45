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

namespace {
template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
}  // namespace

std::string_view type_name(const EventBody& body) {
  return std::visit(
      Overloaded{
          [](const ProjectCreated&) -> std::string_view { return "project_created"; },
          [](const ActorAssigned&) -> std::string_view { return "actor_assigned"; },
          [](const ItemQueued&) -> std::string_view { return "queued"; },
          [](const ItemClaimed&) -> std::string_view { return "claimed"; },
          [](const ItemFinished& e) -> std::string_view { return to_string(e.outcome); },
      },
      body);
}

std::string_view StoredEvent::type() const { return type_name(event.body); }

std::optional<Fence> fence_of(const EventBody& body) {
  if (auto* c = std::get_if<ItemClaimed>(&body)) return c->fence;
  if (auto* f = std::get_if<ItemFinished>(&body)) return f->fence;
  return std::nullopt;
}

}  // namespace cplane
