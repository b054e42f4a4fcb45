// The store API lives in the public header <cplane/store.hpp>.
#pragma once

#include <cplane/store.hpp>
