// The event value types live in the public header <cplane/events.hpp>.
#pragma once

#include <cplane/events.hpp>
