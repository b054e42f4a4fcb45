// Moved to the public header <cplane/errors.hpp>; kept so that internal code
// reads "events/errors.hpp" as the layer it belongs to.
#pragma once

#include <cplane/errors.hpp>
