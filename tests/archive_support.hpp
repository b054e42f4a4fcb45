// The retention tests' shared fixture (archive_test.cpp, archive_forgery_test.cpp):
// a seeded store, its snapshot, and the shorthands both files use.
#pragma once

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <cplane/cplane.hpp>

#include "tests/support.hpp"

namespace cplane::test::archive_fixture {

using namespace cplane;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;
namespace fs = std::filesystem;

constexpr Micros T0 = 1'700'000'000'000'000;
constexpr Micros kCut = T0 + 1'000'000;  // between the ended items and the rest
constexpr Micros kNow = T0 + 10'000'000;

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Two projects; in alpha two items done and one failed before kCut, one
// done after it, one still ready, one claimed; in beta one cancelled
// before kCut (under a key).
inline std::string seed(const TempDir& dir, const std::string& name = "a.db") {
  const std::string db = dir.file(name);
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0 + 1);
  for (int i = 0; i < 6; ++i) store.enqueue("alpha", fmt::format(R"({{"n": {}}})", i), {}, T0 + 10 + i);
  ControlStore::EnqueueOptions keyed;
  keyed.key = "k1";
  keyed.now = T0 + 20;
  const std::string beta = store.enqueue("beta", "{}", keyed);
  for (int i = 0; i < 3; ++i) {
    auto c = store.claim("w", {.now = T0 + 100 + i, .fair = false});
    REQUIRE(c);
    store.finish(c->item_id, c->fence, i == 2 ? Outcome::failed : Outcome::done, "",
                 T0 + 200 + i);
  }
  store.cancel(beta, "", {.now = T0 + 300});
  auto late = store.claim("w", {.now = kCut + 10, .fair = false});
  store.finish(late->item_id, late->fence, Outcome::done, "", kCut + 20);
  store.claim("w", {.now = kCut + 30, .fair = false});
  return db;
}

inline std::string count(const std::string& db, const std::string& table) {
  return sql_column(db, "SELECT count(*) FROM " + table).at(0);
}

inline std::vector<std::string> snapshot(const std::string& db) { return cplane::test::archive_snapshot(db); }

inline ArchiveReport archive_to(const std::string& db, const std::string& file, Micros before = kCut,
                         std::optional<std::string> project = std::nullopt) {
  ControlStore store{db};
  return archive(store, {.before = before, .project = project, .file = file, .now = kNow});
}

inline std::vector<LedgerProblem> verify_db(const std::string& db) {
  ControlStore store{db};
  return verify_ledger(store);
}

inline AuditReport audit_path(const std::string& path, ControlStore* against = nullptr) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  REQUIRE(in != nullptr);
  auto report = audit_export(in, against);
  std::fclose(in);
  return report;
}

// One byte of a file flipped in place.
inline void flip_byte(const std::string& path, std::streamoff at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.get(c);
  f.seekp(at);
  f.put(static_cast<char>(c ^ 1));
}

}  // namespace cplane::test::archive_fixture
