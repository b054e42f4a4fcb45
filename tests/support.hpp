// Shared test fixtures: a temporary directory per test, raw SQL on a store's
// file (to tamper with rows the way an operator or a bug would), and a
// runner for the cplane CLI.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <cplane/ledger.hpp>

namespace cplane {
// So that a failed CHECK on a problem kind prints its name.
inline std::ostream& operator<<(std::ostream& out, ProblemKind kind) {
  return out << to_string(kind);
}
}  // namespace cplane

namespace cplane::test {

// A fresh directory, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The backend under test, as the conformance suite sees it (SOCI's
// test_context): a fresh store, raw statements on its database to tamper
// with it the way an operator or a bug would, its tables. Every command,
// verify and rebuild test reaches the database through this, so a second
// backend adds one context, not a second suite.
class TestContext {
 public:
  virtual ~TestContext() = default;
  virtual std::string backend_name() const = 0;
  // The URL (or path) of a new store in `dir`; nothing exists there yet.
  virtual std::string fresh_store(const TempDir& dir, const std::string& name) const = 0;
  // Runs statements through a connection of its own. Throws
  // std::runtime_error with the database's message on failure.
  virtual void exec(const std::string& store, const std::string& statements) const = 0;
  // The first column of every row `query` returns, as text ("" for NULL).
  virtual std::vector<std::string> column(const std::string& store,
                                          const std::string& query) const = 0;
  // The store's tables, sorted.
  virtual std::vector<std::string> tables(const std::string& store) const = 0;
  // What a forger who rewrites the whole log (or a bug in a writer) leaves:
  // the hash chain, heads and digest recomputed over the events as they
  // now are. verify's checks of what the log says must still catch them.
  virtual void forge_chain(const std::string& store) const = 0;
};

// The context of the backend this run tests ($CPLANE_TEST_BACKEND: sqlite,
// the default, or postgres).
const TestContext& test_context();

// The PostgreSQL server the postgres context uses, if one answers there:
// $CPLANE_TEST_PG_URL, else the one the ctest fixture started (its URL in
// $CPLANE_TEST_PG_URL_FILE, else in this build's file;
// scripts/ctest-postgres.sh).
std::optional<std::string> postgres_test_url();
// Why postgres_test_url() has none, in one line.
std::string postgres_test_skip_reason();

// Shorthands for test_context().exec and .column.
void sql(const std::string& db, const std::string& statements);
// sql(), then forge_chain(): an edit the chain cannot show, for the checks
// that must catch it anyway.
void forged_sql(const std::string& db, const std::string& statements);
std::vector<std::string> sql_column(const std::string& db, const std::string& query);

// PostgreSQL only: a connection of the test's own that runs `statements`
// in a transaction it leaves open, holding the row locks they took, until
// commit(), or release() or the destructor, which roll it back. Throws on
// SQLite.
class HeldTransaction {
 public:
  HeldTransaction(const std::string& db, const std::string& statements);
  ~HeldTransaction();
  HeldTransaction(const HeldTransaction&) = delete;
  HeldTransaction& operator=(const HeldTransaction&) = delete;
  void commit();
  void release();

 private:
  struct Connection;
  std::unique_ptr<Connection> connection_;
};

// SQL that takes a database of the current schema back to what version 7
// was (before flow control), 6 (before the job lifecycle), 4
// was (before sessions and forge items), 3 (before the hash chain), and 1
// (before streams, with the lease index without queued_seq): migration
// tests start from them. (Version 4's items had no 'closed' in its CHECK;
// a copy that keeps it migrates the same.)
// Version 9's CHECK and allocator index tested statuses with IN lists of
// three or more (SQLite's documented in-place edit of a constraint).
// Version 10 had no retention tables.
#define CPLANE_BACK_TO_10 "DROP TABLE anchors; DROP TABLE segments; "
inline constexpr const char* kBackToVersion10 = CPLANE_BACK_TO_10 "PRAGMA user_version = 10; ";
#define CPLANE_BACK_TO_9                                                                     \
  CPLANE_BACK_TO_10                                                                          \
  "PRAGMA writable_schema = ON; "                                                            \
  "UPDATE sqlite_schema SET sql = replace(sql, 'CHECK (status IN (''ready'', ''claimed'') "  \
  "OR status IN (''done'', ''failed'') OR status IN (''closed'', ''scheduled'') OR status = " \
  "''cancelled'')', 'CHECK (status IN (''ready'', ''claimed'', ''done'', ''failed'', "       \
  "''closed'', ''scheduled'', ''cancelled''))') WHERE type = 'table' AND name = 'items'; "   \
  "PRAGMA schema_version = 1000000; PRAGMA writable_schema = OFF; "                           \
  "DROP INDEX items_alloc; "                                                                 \
  "CREATE INDEX items_alloc ON items(project_id, (terminal_since IS NOT NULL) DESC, "        \
  "priority DESC, queued_seq) WHERE status IN ('ready', 'claimed', 'scheduled'); "
inline constexpr const char* kBackToVersion9 = CPLANE_BACK_TO_9 "PRAGMA user_version = 9; ";
#define CPLANE_BACK_TO_8 \
  CPLANE_BACK_TO_9 "DROP INDEX items_listing; DROP INDEX items_listing_all; "
inline constexpr const char* kBackToVersion8 = CPLANE_BACK_TO_8 "PRAGMA user_version = 8; ";
#define CPLANE_BACK_TO_7                                                                     \
  CPLANE_BACK_TO_8                                                                           \
  "DROP TABLE limits; DROP INDEX items_ready_key; DROP INDEX items_due_key; "               \
  "DROP INDEX items_lease_key; DROP INDEX items_live_key; DROP INDEX items_ready; "          \
  "CREATE INDEX items_ready ON items(project_id, queued_seq) WHERE status = 'ready'; "       \
  "ALTER TABLE items DROP COLUMN concurrency_key; "                                          \
  "ALTER TABLE projects DROP COLUMN weight; ALTER TABLE projects DROP COLUMN fair_pass; "
inline constexpr const char* kBackToVersion7 = CPLANE_BACK_TO_7 "PRAGMA user_version = 7; ";
// PostgreSQL's schema 3 taken back to 2 (before flow control).
inline constexpr const char* kPostgresBackTo3 =
    "DROP TABLE anchors; DROP TABLE segments; "
    "DROP INDEX items_listing; DROP INDEX items_listing_all; "
    "UPDATE store_info SET value = '3' WHERE key = 'schema_version'; ";
inline constexpr const char* kPostgresBackTo2 =
    "DROP TABLE anchors; DROP TABLE segments; "
    "DROP INDEX items_listing; DROP INDEX items_listing_all; "
    "DROP TABLE limits; DROP INDEX items_ready_key; DROP INDEX items_due_key; "
    "DROP INDEX items_lease_key; DROP INDEX items_live_key; DROP INDEX items_ready; "
    "CREATE INDEX items_ready ON items (project_id, queued_seq) WHERE status = 'ready'; "
    "ALTER TABLE items DROP COLUMN concurrency_key; "
    "ALTER TABLE projects DROP COLUMN weight, DROP COLUMN fair_pass; "
    "UPDATE store_info SET value = '2' WHERE key = 'schema_version'; ";
#define CPLANE_BACK_TO_6                                                                     \
  CPLANE_BACK_TO_7                                                                           \
  "DROP TABLE schedules; "                                                                   \
  "DROP INDEX items_due; DROP INDEX items_failed; DROP INDEX items_cancelled; "              \
  "ALTER TABLE items DROP COLUMN max_attempts; ALTER TABLE items DROP COLUMN backoff; "     \
  "ALTER TABLE items DROP COLUMN attempt_limit; ALTER TABLE items DROP COLUMN run_at; "     \
  "ALTER TABLE items DROP COLUMN ended_fence; "                                              \
  "ALTER TABLE projects DROP COLUMN max_attempts; ALTER TABLE projects DROP COLUMN backoff; " \
  "ALTER TABLE projects DROP COLUMN paused; ALTER TABLE projects DROP COLUMN pause_reason; "
inline constexpr const char* kBackToVersion6 = CPLANE_BACK_TO_6 "PRAGMA user_version = 6; ";
#define CPLANE_BACK_TO_4                                                                     \
  CPLANE_BACK_TO_6                                                                           \
  "DROP TABLE sessions; DROP INDEX items_by_session; DROP INDEX items_alloc; "             \
  "DROP TABLE terminal_locks; DROP TABLE incident_links; "                                  \
  "ALTER TABLE items DROP COLUMN priority; ALTER TABLE items DROP COLUMN terminal_since; "  \
  "ALTER TABLE items DROP COLUMN terminal_reason; "                                         \
  "ALTER TABLE items DROP COLUMN kind; ALTER TABLE items DROP COLUMN ref; "                 \
  "ALTER TABLE items DROP COLUMN head; ALTER TABLE items DROP COLUMN review; "              \
  "ALTER TABLE items DROP COLUMN author; ALTER TABLE items DROP COLUMN session; "           \
  "ALTER TABLE items DROP COLUMN actions; ALTER TABLE items DROP COLUMN expected_head; "    \
  "ALTER TABLE items DROP COLUMN close_reason; ALTER TABLE items DROP COLUMN head_moved; "
inline constexpr const char* kBackToVersion4 = CPLANE_BACK_TO_4 "PRAGMA user_version = 4; ";
inline constexpr const char* kBackToVersion3 =
    CPLANE_BACK_TO_4
    "DROP TABLE stream_heads; DROP TABLE log_digest; DROP TABLE store_info; "
    "ALTER TABLE events DROP COLUMN stream_rev; ALTER TABLE events DROP COLUMN hash; "
    "PRAGMA user_version = 3; ";
inline constexpr const char* kBackToVersion1 =
    CPLANE_BACK_TO_4
    "DROP TABLE stream_heads; DROP TABLE log_digest; DROP TABLE store_info; "
    "ALTER TABLE events DROP COLUMN stream_rev; "
    "ALTER TABLE events DROP COLUMN hash; "
    "DROP INDEX events_by_stream; ALTER TABLE events DROP COLUMN stream_kind; "
    "ALTER TABLE events DROP COLUMN stream_id; CREATE INDEX events_by_item ON events(item_id, seq); "
    "DROP INDEX items_lease; CREATE INDEX items_lease ON items(project_id, lease_expires_at) "
    "WHERE status = 'claimed'; PRAGMA user_version = 1; ";

// test_context().tables(db) less SQLite's retention tables (anchors,
// segments: docs/retention.md), which PostgreSQL has not yet: the tables
// every backend has.
std::vector<std::string> tables_but_retention(const std::string& db);

// verify_ledger on the store at `db` (opened to write, so that it migrates),
// and the kinds of the problems it names.
std::vector<LedgerProblem> verify_file(const std::string& db);
std::set<std::string> problem_kinds(const std::vector<LedgerProblem>& problems);

// The result of running the cplane CLI.
struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built `cplane` binary with `args` (no shell is involved) and
// `env` entries ("NAME=value") added to the environment.
CliResult run_cli(const std::vector<std::string>& args,
                  const std::vector<std::string>& env = {});

// How to run the CLI when the defaults (stdin /dev/null, stdout captured)
// are not what a test needs: the faults an operator's environment brings.
struct CliRun {
  std::vector<std::string> env;
  std::optional<std::string> input;         // fed to stdin (else /dev/null)
  std::optional<std::string> stdout_file;   // stdout goes here (e.g. /dev/full), not captured
  std::optional<long> file_size_limit;      // RLIMIT_FSIZE, bytes
  std::optional<uid_t> uid;                 // run as this user (the test runs as root)
};
CliResult run_cli(const std::vector<std::string>& args, const CliRun& how);

// A file's whole text ("" when it cannot be read).
std::string read_file(const std::string& path);
// Everything an archive may change (the counts of events, stream_heads,
// items, anchors, segments, and the digest), to compare before and after
// a refusal.
std::vector<std::string> archive_snapshot(const std::string& db);
// Waits for a child; false if it still runs after `seconds` (then killed).
bool reap(pid_t pid, double seconds = 30, int* status_out = nullptr);

}  // namespace cplane::test
