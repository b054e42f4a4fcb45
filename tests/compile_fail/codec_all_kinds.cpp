// Must compile: the control for kind_without_codec (the wire registration
// of every kind of EventBody is whole).
#include "events/wire_codec.hpp"

int main() { return sizeof(cplane::wire_codec::BodyCodecs) > 0 ? 0 : 1; }
