// The row types live in the public header <cplane/rows.hpp>.
#pragma once

#include <cplane/rows.hpp>
