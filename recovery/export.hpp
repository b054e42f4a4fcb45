// Export, offline audit and restore of the log (events/export.capnp).
//
// export_log writes one read snapshot of a log, stream by stream, to a
// file. audit_export replays such a file with no database: the chain, the
// file's own integrity, every check verify makes of the log on its own,
// and (against a database) the rows, exactly as verify does: the file is
// presented to verify as a log source (storage::LogSource) whose log is
// the file, and the database as the rows. restore_export
// builds a fresh database from a file. All three stream: memory does not
// grow with the number of events.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cplane/ledger.hpp>

#include "storage/backend.hpp"
#include "storage/log_source.hpp"
#include "verify/verify.hpp"

namespace cplane {

// 1: events and heads. 2: anchors of archived streams too (written only
// by a store that has some, so that an older cplane still reads the rest).
inline constexpr std::uint32_t kExportFormatVersion = 2;

// Writes the log (one read snapshot) to `out`. Throws StorageError (io)
// when the file cannot be written.
ExportSummary export_log(storage::LogSource& log, std::FILE* out, const ExportOptions& options);

// export_log for an archive segment (recovery/archive.cpp): the header
// names the segment, so that audit knows the file holds some streams only,
// and says whether its payloads are redacted (the log's events then carry
// their payload_hash).
ExportSummary export_segment(storage::LogSource& log, std::FILE* out, const std::string& segment_id,
                             bool payloads_redacted);

// Replays an export. `against`: also compare the fold with that database's
// rows, as verify does. Throws StorageError when the file is not an export
// (corruption), is truncated or damaged (corruption: what it could read is
// not reported as the log), or was written by a newer cplane
// (incompatible).
AuditReport audit_export(std::FILE* in, storage::Backend* against, const Progress& progress = {});

// Copies an export's events (with their hashes), heads and digest into
// `fresh` (an empty store), then rebuilds its rows. Throws what
// audit_export throws for a bad file, InvalidArgument for a partial
// export, and RebuildRefused when the exported log fails its own checks.
// `segments`: archive segments of the exported store (docs/retention.md),
// whose streams come back whole in place of their anchors; InvalidArgument
// for a segment of another store or one the anchors do not name.
// InvalidArgument too for a segment whose bytes are not the ones the
// anchors name (their digest). A segment whose payloads are redacted is
// checked against the anchors that name it, which stay.
RestoreReport restore_export(std::FILE* in, storage::Backend& fresh, const Progress& progress = {},
                             const std::vector<std::FILE*>& segments = {});

}  // namespace cplane
