// The archive's own events (recovery/archive.cpp's): the record of the
// segment it wrote, and the limits' clocks it carries past the claims it
// takes from the live log (docs/retention.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <cplane/ledger.hpp>

#include "events/event.hpp"
#include "projections/rows.hpp"
#include "storage/backend.hpp"

namespace cplane {

// The archive's decision for a limit (pure): claims that leave the live
// log carry the clock of a limit with a rate past them, as
// limit_clock_carried with `row`'s tat (the limit as the whole log folds
// it, which the caller checked), so that a replay of the live log is exact
// from there. nullopt for a limit without a rate, or removed: no claim
// moves its clock.
std::optional<Event> decide_carry_clock(const LimitRow& row, const std::string& segment_id,
                                        Micros now);

// The archive's decision for an item it takes, when it forgets keys
// (pure): key_released for the key the ended item `a` holds, or nullopt
// when it holds none or a schedule occurrence's (`schedule:NAME@TIME`: the
// schedule's catch-up finds an archived occurrence by it, and would make
// it again).
std::optional<Event> decide_release_key(const storage::StreamAnchor& a, Micros now);

// The archive's record of the segment it wrote (pure): segment_archived on
// the segment's own stream, the record whole; its fold is the segments row.
Event decide_archive_segment(const storage::Backend::SegmentRecord& record,
                             const ArchiveReport& report, Micros now);

// The limits whose clocks archived claims may have moved: each the log
// knows with a rate, as the archive must carry them. Replays the live log
// (inside the caller's write transaction) when the log or the rows know
// any limit; StorageError (corruption), with nothing written, when a limit
// row or a clock carried before disagrees with it.
std::vector<LimitRow> clocks_to_carry(storage::Backend& backend);

}  // namespace cplane
