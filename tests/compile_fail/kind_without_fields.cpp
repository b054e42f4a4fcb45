// Must NOT compile: an event kind whose traits entry leaves out fields(),
// so that `events --json` could not show it. ctest expects failure.
#include "events/event.hpp"

namespace cplane {
struct ItemRenamed {
  std::string name;
};
template <>
struct EventTraits<ItemRenamed> : OnItemStream, Unfenced {
  static std::string_view name(const ItemRenamed&) { return "renamed"; }
};
static_assert(AllEventKinds<std::variant<ItemQueued, ItemRenamed>>::value);
}  // namespace cplane

int main() { return 0; }
