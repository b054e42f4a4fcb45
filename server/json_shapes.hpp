// The JSON the console's /api answers with: each shape is the one the
// CLI's --json prints for the same thing (docs/cli.md), field for field,
// so that a script may read either. Items, events, sessions, projects,
// counts and problems are written by the tools' one writer of records
// (json/records.hpp); what only the console answers is here.
#pragma once

#include <string>
#include <vector>

#include <cplane/ledger.hpp>
#include <cplane/metrics.hpp>
#include <cplane/store.hpp>

#include "json/records.hpp"

namespace cplane::server {

// One minute of recent_activity.
std::string activity_json(const ActivityMinute& minute);

// "[a,b,...]" of already-written JSON values.
std::string json_array(const std::vector<std::string>& values);

}  // namespace cplane::server
