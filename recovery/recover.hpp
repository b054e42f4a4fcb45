// cplane recover: salvage a damaged database into a fresh one (storage
// salvages what is readable; here the rows are rebuilt from it and the new
// database verified, so that the report names every stream that lost events).
#pragma once

#include <string>

#include <cplane/ledger.hpp>

#include "storage/backend.hpp"

namespace cplane {

// `damaged`: the path of a SQLite database (never written). `scratch`: a
// path for a private copy of it (removed afterwards). `fresh`: an empty
// store.
RecoverReport recover_store(const std::string& damaged, const std::string& scratch,
                            storage::Backend& fresh, const Progress& progress = {});

}  // namespace cplane
