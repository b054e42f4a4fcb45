// The flow replay (internal to verify/): what no single stream shows.
// A limit's row is the fold of its key's stream and of the claims that name
// the key; a project's fair_pass is the one its last claim recorded; and no
// claim or assignment may start an item while its key was full, or before
// its rate's token. The stream audit hands every event of an item that has
// a key, and every limit event, to FlowLog as it folds them (only those are
// kept); the replay sorts them by seq once the streams are read.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <cplane/ledger.hpp>

#include "events/event.hpp"
#include "projections/rows.hpp"

namespace cplane::storage {
class Backend;
class RowSource;
}  // namespace cplane::storage

namespace cplane::verify_detail {

class FlowLog {
 public:
  // One event as the stream audit folded it; `item` is its item's row
  // after it (for an event of an item stream).
  void observe(const StoredEvent& stored, const ItemRow& item);

  struct Fold {
    std::map<std::string, LimitRow> limits;      // every key with a limit event
    std::map<std::string, std::int64_t> passes;  // project -> fair_pass of its last claim
    std::vector<LedgerProblem> problems;         // concurrency_exceeded, rate_exceeded
    // Keys whose clock an archive carried (limit_clock_carried): the fold
    // is exact from there.
    std::set<std::string> carried;
  };
  // The events observed in seq order, replayed. A carried clock is at
  // least the one the claims before it make (archived claims only add to
  // it), and exactly that one when `history_whole` (no item is archived:
  // every claim is here, as in the whole-history audit); else it is named
  // (limit_clock_disagrees).
  Fold fold(bool history_whole) const;

 private:
  std::vector<StoredEvent> events_;
  std::map<std::string, std::pair<Seq, std::int64_t>> passes_;
};

// The stored limit rows and projects' passes against the fold: problems
// (verify), or the rows to write (rebuild: `write_to`, with each change
// noted in `changes`).
//
// An archive appends, for each limit with a rate, limit_clock_carried: the
// tat every claim up to it left (the archived ones included), so the fold
// is exact from there. `legacy_until`: the latest end of an item archived
// by a build before archives carried the clock (0: none). Only then, and
// only for a key no archive carried since, is a limit's tat allowed to be
// later in the row than the live log's claims make it, as far as such an
// archived claim could have advanced it (a claim at t leaves it at most
// t + burst x the rate's interval): accepted, and rebuild keeps it. (A
// project's fair_pass needs no such allowance: the archive leaves live
// the item whose claim holds it.)
void check_flow_rows(const FlowLog::Fold& fold, storage::RowSource& rows, Micros legacy_until,
                     std::vector<LedgerProblem>& problems);
void rebuild_flow_rows(const FlowLog::Fold& fold, storage::Backend& backend, bool write,
                       Micros archived_until, std::vector<RowChange>& changes,
                       std::int64_t& changes_total);

}  // namespace cplane::verify_detail
