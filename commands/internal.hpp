// What the files of commands/ share and nothing else sees: input checks and
// the names events are made under.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "projections/rows.hpp"

namespace cplane::detail {

// A scoped actor's name, when one is given.
void require_actor(const std::optional<std::string>& actor);
void require_size(const std::string& text, std::size_t limit, const char* what);

// The actor of events the control plane makes itself: "".
extern const std::string kControlPlane;

// Who an item event made for a session is by: its actor, else its id.
const std::string& acting_for(const SessionRow& session);

// Actions checked (require_action), sorted, without duplicates. Empty is
// InvalidArgument unless `allow_none`.
std::vector<std::string> checked_actions(const std::vector<std::string>& actions, bool allow_none);

}  // namespace cplane::detail
