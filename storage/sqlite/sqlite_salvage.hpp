// Salvage of a damaged SQLite store (cplane recover): see sqlite_salvage.cpp.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/ledger.hpp>

#include "storage/backend.hpp"

namespace cplane::storage {

struct SalvageReport {
  std::int64_t events = 0;  // copied
  std::int64_t heads = 0;   // copied (0 when the heads could not be read)
  std::int64_t rows = 0;    // item rows copied
  Seq newest_seq = 0;       // the newest seq the log reached, as far as can be told
  bool newest_readable = false;
  bool heads_readable = false;
  bool rows_readable = false;
  std::optional<LogDigest> digest;  // the damaged log's, when readable
  // Seq ranges [first, last] lost: whose page could not be read, and seqs
  // missing from readable pages (a dense log has every seq).
  std::vector<std::pair<Seq, Seq>> unreadable;
  std::vector<std::pair<Seq, Seq>> absent;
  // Item streams whose head could not be read (the salvaged tip stands in),
  // in id order: nothing bounds the fences they may have handed out.
  std::vector<std::string> guessed_heads;
};

// Copies every readable event (with its revision and hash), head, the
// digest and the readable rows of the SQLite database at `damaged` into
// `fresh` (which holds no events), in one write transaction. Works on a copy
// made at `scratch` (removed afterwards): `damaged` is never written.
// StorageError when nothing at all can be read.
SalvageReport salvage_sqlite(const std::string& damaged, const std::string& scratch,
                             Backend& fresh, const Progress& progress = {});

}  // namespace cplane::storage
