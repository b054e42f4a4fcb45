// verify and rebuild on a store: the log is the truth, the rows a cache of
// its fold.
#pragma once

#include <cplane/ledger.hpp>
#include <cplane/store.hpp>

namespace cplane {

// Replays the store's log through the same fold the commands use and
// compares it with its rows, field by field, in one snapshot; empty when
// they agree. Memory does not grow with the log. Throws StorageError if the
// database cannot be read; every problem in its contents is reported, never
// thrown. A call like any other: refused (InvalidArgument) while another
// thread is in a call on the store.
std::vector<LedgerProblem> verify_ledger(ControlStore& store, const Progress& progress = {});

// Rewrites every row that differs from the fold of the log, in one write
// transaction; with dry_run, reports the same changes, writes nothing, reads
// one snapshot and works on a read-only store. Throws UnreadableEvent
// (nothing changed) if an event cannot be decoded or its index columns file
// it elsewhere than its body: a rebuild from such a log would spread the
// damage.
RebuildReport rebuild(ControlStore& store, bool dry_run = false, const Progress& progress = {});

}  // namespace cplane
