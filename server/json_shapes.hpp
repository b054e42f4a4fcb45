// The JSON the console's /api answers with: each shape is the one the
// CLI's --json prints for the same thing (docs/cli.md), field for field,
// so that a script may read either. Items and events are written by the
// tools' one writer of them (json/records.hpp).
#pragma once

#include <string>
#include <vector>

#include <cplane/ledger.hpp>
#include <cplane/metrics.hpp>
#include <cplane/store.hpp>

#include "json/records.hpp"

namespace cplane::server {

// Each element of `cplane sessions --json`.
std::string session_json(const SessionInfo& info);
// `cplane project show --json`.
std::string project_json(const ProjectRow& row);
// `cplane stats --json`.
std::string counts_json(const ControlStore::StatusCounts& counts);
// Each element of `cplane verify --json`.
std::string problem_json(const LedgerProblem& problem);
// One minute of recent_activity.
std::string activity_json(const ActivityMinute& minute);

// "[a,b,...]" of already-written JSON values.
std::string json_array(const std::vector<std::string>& values);

}  // namespace cplane::server
