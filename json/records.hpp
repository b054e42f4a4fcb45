// The JSON shape of cplane's records, one writer for every tool that prints
// them: an item's row (`cplane item --json`, each line of `items --jsonl`,
// the console's /api) and a stored event (`events`, `tail`, `history`).
#pragma once

#include <string>

#include <cplane/cplane.hpp>

namespace cplane {

// Every column of the row; "" and 0 where the engine means "none" are null.
std::string item_json(const Item& row);

// `cplane sessions --json`'s elements: session, actor, opened_at,
// last_seen_at, closed_at, items (the live leases it holds).
std::string session_json(const SessionInfo& info);

// `cplane project show --json`: the project's row.
std::string project_json(const ProjectRow& row);

// `cplane stats --json`: items by status.
std::string counts_json(const ControlStore::StatusCounts& counts);

// `cplane verify --json`'s elements: kind, item_id, project_id, detail.
std::string problem_json(const LedgerProblem& problem);

// seq, type, actor, fence, at, item_id, project_id, request_id (16 hex
// digits or null), stream_kind, stream_id, then every field of its kind by
// its registration.
std::string event_json(const StoredEvent& stored);

}  // namespace cplane
