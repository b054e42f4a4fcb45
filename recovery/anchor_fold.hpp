// An archived stream's truth, from its events (docs/retention.md): the row
// they fold to, each checked against its chain, and what its anchor must
// say. The archive makes anchors of it; a segment check and a restore hold
// anchors to it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "projections/rows.hpp"
#include "storage/backend.hpp"

namespace cplane {

// A stream's row as its `events` fold, each event's hash checked against
// its chain, and each of `kind` `id`: StorageError (corruption) naming the
// first that is not. `pass_claim`, when given: the seq of the last claim
// that recorded a fair-share pass (0: none). Row: ItemRow, SessionRow or
// ScheduleRow.
template <class Row>
Row fold_stream(StreamKind kind, const std::string& id,
                const std::vector<storage::RawEvent>& events, Seq* pass_claim = nullptr);

// The anchor of a stream whose `events` were read and folded: where its
// chain ends and every seq it held; promise() fills what it ended as.
storage::StreamAnchor anchor_of(StreamKind kind, const std::string& id,
                                const std::vector<storage::RawEvent>& events);

// What an anchor promises of its stream's end, from the stream's fold:
// each kind's state, end time and (an item's) project, fence and key.
void promise(storage::StreamAnchor& a, const ItemRow& fold);
void promise(storage::StreamAnchor& a, const SessionRow& fold);
void promise(storage::StreamAnchor& a, const ScheduleRow& fold);

// What a stream's anchor must say, from `events` (the stream's, in order,
// as a segment holds them): anchor_of and promise. nullopt when they are
// not one whole stream of an archivable kind, or do not fold (not
// chained, unreadable): the segment's own audit names those.
std::optional<storage::StreamAnchor> promised_anchor(const std::vector<storage::RawEvent>& events);

// The fields of `anchor` that are not what `promised` says, each named
// with both values; empty when it keeps its promise. (Its segment and
// digest are the caller's to check.)
std::vector<std::string> broken_promises(const storage::StreamAnchor& anchor,
                                         const storage::StreamAnchor& promised);

}  // namespace cplane
