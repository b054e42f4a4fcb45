// Retention: archived segments and their anchors (docs/retention.md).
#pragma once

#include <cstdio>
#include <utility>

#include <cplane/ledger.hpp>

#include "events/chain.hpp"
#include "storage/backend.hpp"

namespace cplane {

// archive() of include/cplane/verify.hpp, on one connection (see there for
// what it guarantees and throws).
ArchiveReport archive_streams(storage::Backend& backend, const ArchiveOptions& options);

// The segment `in` (an export whose header names a segment, already
// audited on its own) against `store`: rewinds `in`, and checks that its
// bytes are a segment the store recorded and that each stream it holds
// ends where its anchor says. Adds a problem per fault to `out`; fills
// `check` (segment id, streams, events) when given.
void compare_with_anchors(std::FILE* in, storage::Backend& store, std::vector<LedgerProblem>& out,
                          SegmentCheck* check);

// BLAKE2b-256 of an open file's bytes from where it stands, and their
// size: a segment's digest, as its anchors name it.
std::pair<Hash, std::int64_t> stream_digest(std::FILE* in);

// verify_segment of include/cplane/verify.hpp, on one connection.
SegmentCheck check_segment(storage::Backend& store, const std::string& file);

}  // namespace cplane
