// Must NOT compile: an event kind added to the body variant without an
// EventTraits entry (stored name, stream, fence). ctest expects failure.
#include "events/event.hpp"

namespace cplane {
struct ItemRenamed {
  std::string name;
};
static_assert(AllEventKinds<std::variant<ItemQueued, ItemRenamed>>::value);
}  // namespace cplane

int main() { return 0; }
