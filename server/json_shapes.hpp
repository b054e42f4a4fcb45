// The JSON the console's /api answers with: each shape is the one the
// CLI's --json prints for the same thing (docs/cli.md), field for field,
// so that a script may read either.
#pragma once

#include <string>
#include <vector>

#include <cplane/ledger.hpp>
#include <cplane/metrics.hpp>
#include <cplane/store.hpp>

namespace cplane::server {

// `cplane item --json` (and each element of `cplane items --json`).
std::string item_json(const ItemRow& row);
// Each element of `cplane events --json` (and a line of `cplane tail --jsonl`).
std::string event_json(const StoredEvent& stored);
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
