// Must NOT compile: an event kind with a traits entry but no WireCodec
// entry (its member of the body union, encode, decode). ctest expects failure.
#include "events/wire_codec.hpp"

namespace cplane {
struct ItemRenamed {
  std::string name;
  bool operator==(const ItemRenamed&) const = default;
};
template <>
struct EventTraits<ItemRenamed> : OnItemStream, Unfenced {
  static std::string_view name(const ItemRenamed&) { return "renamed"; }
  template <class F>
  static void fields(const ItemRenamed& e, F&& f) {
    f("name", e.name);
  }
};
static_assert(AllEventKinds<std::variant<ItemQueued, ItemRenamed>>::value);
}  // namespace cplane

int main() { return sizeof(cplane::wire_codec::WireCodecs<std::variant<cplane::ItemQueued, cplane::ItemRenamed>>); }
