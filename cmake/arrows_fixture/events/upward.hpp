// The arrows check's self-test (cmake/check_arrows.cmake): an upward
// include, which must fail the check.
#pragma once
#include "storage/backend.hpp"
