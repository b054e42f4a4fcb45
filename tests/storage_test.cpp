// Opening databases: what is refused, and how.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <algorithm>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cplane/cplane.hpp>
#include <fmt/format.h>

#include "events/names.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "storage/sqlite/wal_watch.hpp"
#include "commands/testing.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;

namespace {

StorageError::Category open_failure(const std::string& path) {
  try {
    ControlStore store{path};
  } catch (const StorageError& e) {
    CAPTURE(e.what());
    CHECK(std::string(e.what()).find(path) != std::string::npos);
    return e.category();
  }
  FAIL("opening " << path << " did not throw");
  return StorageError::Category::io;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

}  // namespace

TEST_CASE("a new database gets the schema, WAL mode and a version", "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  { ControlStore store{db}; }
  CHECK(sql_column(db, "PRAGMA journal_mode").at(0) == "wal");
  CHECK(sql_column(db, "PRAGMA user_version").at(0) == std::to_string(storage::kSqliteSchemaVersion));
  auto tables = sql_column(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  CHECK(tables == std::vector<std::string>{"anchors", "events", "incident_links", "items", "limits", "log_digest", "project_actors", "projects", "schedules", "segments", "sessions", "store_info", "stream_heads", "terminal_locks"});
  // Reopening an existing database keeps it.
  ControlStore again{db};
  again.create_project("alpha", "A");
  ControlStore third{db};
  CHECK(third.visible_projects() == std::vector<std::string>{"alpha"});
}

TEST_CASE("a directory cannot be opened as a database", "[storage]") {
  TempDir dir;
  CHECK(open_failure(dir.path().string()) == StorageError::Category::unavailable);
}

TEST_CASE("a path in a missing directory is unavailable", "[storage]") {
  TempDir dir;
  CHECK(open_failure(dir.file("missing/sub/c.db")) == StorageError::Category::unavailable);
}

TEST_CASE("a file that is not a database is refused as corruption", "[storage]") {
  TempDir dir;
  const auto path = dir.file("notes.txt");
  write_file(path, std::string(4096, 'x') + "this is not an SQLite database at all\n");
  CHECK(open_failure(path) == StorageError::Category::corruption);
  // and it was not modified
  CHECK(std::filesystem::file_size(path) == 4096 + 38);
}

TEST_CASE("another application's SQLite database is refused, not written to", "[storage]") {
  TempDir dir;
  const auto path = dir.file("other.db");
  write_file(path, "");
  sql(path, "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER)");
  CHECK(open_failure(path) == StorageError::Category::corruption);
  CHECK(sql_column(path, "SELECT count(*) FROM sqlite_master").at(0) == "1");
}

TEST_CASE("a database from a newer cplane is refused as incompatible", "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  { ControlStore store{db}; }
  sql(db, "PRAGMA user_version = 99");
  // Not damage: a newer cplane wrote it. Upgrade, do not restore.
  CHECK(open_failure(db) == StorageError::Category::incompatible);
}

TEST_CASE("a truncated database is reported as a storage error, not a crash", "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    for (int i = 0; i < 500; ++i) store.enqueue("alpha", R"({"padding":"........................"})");
  }
  sql(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  std::filesystem::remove(db + "-wal");
  std::filesystem::remove(db + "-shm");
  const auto size = std::filesystem::file_size(db);
  REQUIRE(size > 3 * 4096);
  std::filesystem::resize_file(db, size / 3);
  bool refused = false;
  try {
    ControlStore store{db};
    // Opening may succeed (the header is intact); reading the damaged part
    // must fail cleanly.
    auto problems = verify_ledger(store);
    refused = !problems.empty();
  } catch (const StorageError& e) {
    CAPTURE(e.what());
    refused = e.category() == StorageError::Category::corruption;
  }
  CHECK(refused);
}

TEST_CASE("a corrupt event body makes reading that item's events fail cleanly", "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  auto id = store.enqueue("alpha", "{}");
  sql(db, "UPDATE events SET body = x'0102030405' WHERE item_id = '" + id + "'");
  CHECK_THROWS_AS(store.events(id), UnreadableEvent);
  try {
    store.events(id);
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::corruption);
  }
}

TEST_CASE("a held write lock makes a command wait, then fail as busy", "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  ControlStore holder{db};
  holder.create_project("alpha", "A");
  ControlStore waiter{db, {.lock_timeout = std::chrono::milliseconds{200},
                           .sqlite = {.writer_flock = false}}};
  testing::backend(holder).begin_write(storage::Sync::full);
  try {
    waiter.enqueue("alpha", "{}");
    FAIL("enqueue did not wait for the lock");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::busy);
  }
  testing::backend(holder).rollback();
  CHECK_NOTHROW(waiter.enqueue("alpha", "{}"));
}

TEST_CASE("each write transaction commits with the synchronous level it asked for",
          "[storage][durability]") {
  // A prepared "PRAGMA synchronous=..." takes effect when compiled, not when
  // stepped: this once left every commit at the last level prepared.
  TempDir dir;
  auto backend = storage::open_sqlite(dir.file("c.db"));
  for (auto sync : {storage::Sync::normal, storage::Sync::full, storage::Sync::normal,
                    storage::Sync::full}) {
    backend->begin_write(sync);
    CHECK(storage::sqlite_synchronous(*backend) == (sync == storage::Sync::full ? 2 : 1));
    backend->commit();
    CHECK(storage::sqlite_synchronous(*backend) == (sync == storage::Sync::full ? 2 : 1));
  }
}

TEST_CASE("a new store takes its page size from the options and an existing one keeps its own",
          "[storage]") {
  TempDir dir;
  const auto fresh = dir.file("fresh.db");
  const auto old = dir.file("old.db");
  // A payload and a detail over a 2,048-byte page: rows and events spill
  // into overflow pages, and every check still reads them back whole.
  const std::string payload = "{\"blob\":\"" + std::string(5000, 'x') + "\"}";
  const std::string detail(3000, 'd');
  const auto drain_one = [&](const std::string& db, int page_size) {
    ControlStore store{db, {.sqlite = {.page_size = page_size}}};
    if (store.visible_projects().empty()) store.create_project("alpha", "A");
    const auto id = store.enqueue("alpha", payload);
    const auto c = store.claim("w1");
    REQUIRE(c);
    CHECK(c->item_id == id);
    store.finish(c->item_id, c->fence, Outcome::done, detail);
    CHECK(store.item(id).payload == payload);
    CHECK(store.item(id).detail == detail);
    CHECK(verify_ledger(store).empty());
  };
  drain_one(fresh, 2048);
  CHECK(sql_column(fresh, "PRAGMA page_size").at(0) == "2048");
  drain_one(old, SqliteOptions{}.page_size);
  CHECK(sql_column(old, "PRAGMA page_size").at(0) == "4096");
  // Reopened with another size: the store keeps the one it was made with.
  drain_one(old, 1024);
  drain_one(fresh, 0);
  CHECK(sql_column(old, "PRAGMA page_size").at(0) == "4096");
  CHECK(sql_column(fresh, "PRAGMA page_size").at(0) == "2048");
  // A size SQLite would ignore without a word is refused, and nothing is made.
  for (const int bad : {-1, 100, 3000, 131072}) {
    const auto db = dir.file(fmt::format("bad{}.db", bad));
    try {
      ControlStore store{db, {.sqlite = {.page_size = bad}}};
      FAIL("page size " << bad << " was taken");
    } catch (const StorageError& e) {
      CHECK(e.category() == StorageError::Category::unavailable);
      CHECK(std::string(e.what()).find("page size") != std::string::npos);
    }
    CHECK_FALSE(std::filesystem::exists(db));
  }
}

TEST_CASE("inserting an item never overwrites an existing one", "[storage]") {
  TempDir dir;
  auto backend = storage::open_sqlite(dir.file("c.db"));
  ItemRow row;
  row.item_id = "same-id";
  row.project_id = "alpha";
  row.payload = "{}";
  row.queued_seq = 1;
  backend->begin_write(storage::Sync::normal);
  backend->insert_item(row);
  ItemRow other = row;
  other.fence = 9;
  other.status = ItemStatus::claimed;
  CHECK_THROWS_AS(backend->insert_item(other), StorageError);
  CHECK(backend->find_item("same-id")->fence == 0);
  backend->rollback();
}

TEST_CASE("a foreign database keeps its journal mode when refused", "[storage]") {
  TempDir dir;
  const auto path = dir.file("other.db");
  write_file(path, "");
  sql(path, "CREATE TABLE accounts (id INTEGER PRIMARY KEY)");
  CHECK(sql_column(path, "PRAGMA journal_mode").at(0) == "delete");
  CHECK(open_failure(path) == StorageError::Category::corruption);
  CHECK(sql_column(path, "PRAGMA journal_mode").at(0) == "delete");
}

TEST_CASE("an audit does not create a missing database", "[storage]") {
  TempDir dir;
  const auto path = dir.file("typo.db");
  try {
    ControlStore store{path, {.create = false}};
    FAIL("a missing database was opened");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::unavailable);
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a large transaction through the coalescing WAL writer is whole for other readers",
          "[storage]") {
  // 600 payloads of 2 KiB in one commit: several flushes of the WAL buffer
  // and chunks, across the 0x1ffff-byte limit of one write in the unix VFS.
  TempDir dir;
  const auto db = dir.file("c.db");
  ControlStore writer{db};
  ControlStore reader{db};
  writer.create_project("alpha", "A");
  std::vector<std::string> payloads(600, "\"" + std::string(2048, 'p') + "\"");
  auto ids = writer.enqueue_batch("alpha", payloads);
  CHECK(reader.status_counts("alpha").ready == 600);
  CHECK(reader.item(ids.back()).payload == payloads.back());
  CHECK(verify_ledger(reader).empty());
  // and through a plain SQLite connection, without the shim
  CHECK(sql_column(db, "SELECT count(*) FROM items").at(0) == "600");
  CHECK(sql_column(db, "PRAGMA integrity_check").at(0) == "ok");
}

TEST_CASE("the coalescing WAL writer and the plain one read each other's commits", "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  ControlStore coalescing{db};
  storage::OpenOptions plain_options;
  plain_options.sqlite.coalesce_wal_writes = false;
  ControlStore plain = testing::store_over(storage::open_sqlite(db, plain_options));
  coalescing.create_project("alpha", "A");
  for (int i = 0; i < 50; ++i) {
    auto a = coalescing.enqueue("alpha", "{}");
    auto c = plain.claim("w1");
    REQUIRE(c);
    CHECK(c->item_id == a);
    plain.finish(c->item_id, c->fence, Outcome::done);
    CHECK(coalescing.item(a).status == ItemStatus::done);
  }
  CHECK(verify_ledger(plain).empty());
}

TEST_CASE("a write that fails for lack of space changes nothing and leaves the file sound",
          "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    store.enqueue_batch("alpha", std::vector<std::string>(100, "{}"));
  }
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The child may write no file beyond 1 MiB: a 4 MiB transaction fails
    // part-way through its WAL writes, as on a full disk.
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{1 << 20, 1 << 20};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 1;
    try {
      ControlStore store{db};
      try {
        store.enqueue_batch("alpha", std::vector<std::string>(2000, "\"" + std::string(2000, 'x') + "\""));
        code = 2;  // it should not have fitted
      } catch (const StorageError&) {
        // The connection still works for what fits.
        store.enqueue("alpha", "{}");
        code = 0;
      }
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ControlStore store{db};
  CHECK(store.status_counts("alpha").ready == 101);
  CHECK(verify_ledger(store).empty());
  CHECK(sql_column(db, "PRAGMA integrity_check").at(0) == "ok");
}

namespace {

// A process that opens `db`, claims and finishes one item (both
// acknowledged), then keeps the store open until its stdin closes, or is
// SIGKILLed with its last commits still in the WAL.
struct Holder {
  pid_t pid = -1;
  int to_child = -1;
  Holder(const std::string& db, bool die_after, bool combine = true) {
    int ready[2], hold[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(hold) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::close(hold[1]);
      int code = 0;
      try {
        StoreOptions options;
        options.sqlite.combine = combine;
        ControlStore store{db, options};
        auto c = store.claim("holder");
        if (!c) ::_exit(3);
        store.finish(c->item_id, c->fence, Outcome::done);
        if (die_after) ::raise(SIGKILL);
        char b = 'r';
        [[maybe_unused]] auto n = ::write(ready[1], &b, 1);
        while (::read(hold[0], &b, 1) > 0) {
        }
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    to_child = hold[1];
    char b = 0;
    if (!die_after) REQUIRE(::read(ready[0], &b, 1) == 1);
    ::close(ready[0]);
    if (die_after) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      REQUIRE(WIFSIGNALED(status));
      pid = -1;
    }
  }
  ~Holder() {
    ::close(to_child);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
  }
};

}  // namespace

TEST_CASE("a database renamed under a running process: a new one at the old path is refused, "
          "and the renamed one keeps every acknowledged commit",
          "[storage][sqlite]") {
  // The silence it prevents: the new database reset PATH-wal, which held
  // the renamed database's last acknowledged claim and finish.
  TempDir dir;
  const std::string db = dir.file("m.db");
  const std::string moved = dir.file("m2.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    store.enqueue("alpha", "{}");
  }
  auto refused = [&] {
    try {
      ControlStore fresh{db};
      FAIL("a database was created beside another database's side files");
    } catch (const StorageError& e) {
      INFO(e.what());
      CHECK(e.category() == StorageError::Category::unavailable);
      CHECK(std::string(e.what()).find(db + "-") != std::string::npos);  // names the file
    }
    CHECK_FALSE(std::filesystem::exists(db));
  };
  SECTION("while the process still has it open, with group commit on or off") {
    const bool combine = GENERATE(true, false);
    INFO("combine " << combine);
    std::filesystem::remove(db + "-combine");
    auto holder = std::make_unique<Holder>(db, false, combine);
    REQUIRE(std::filesystem::exists(db + "-combine") == combine);
    std::filesystem::rename(db, moved);
    refused();
    // The CLI says the same, exit 1.
    const auto r = cplane::test::run_cli({"--db", db, "project", "create", "z", "Z"});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(db + "-") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(db));
    holder.reset();
    for (const char* suffix : {"-wal", "-shm"}) {
      std::filesystem::rename(db + suffix, moved + suffix);
    }
    ControlStore check{moved, {.read_only = true}};
    CHECK(verify_ledger(check).empty());
    CHECK(check.status_counts().done == 1);
  }
  SECTION("after the process died with its last commits still in the WAL") {
    Holder holder(db, true);
    REQUIRE(std::filesystem::file_size(db + "-wal") > 0);
    std::filesystem::rename(db, moved);
    refused();
    // Moved back beside its database, the WAL still holds the finish.
    std::filesystem::rename(db + "-wal", moved + "-wal");
    std::filesystem::remove(db + "-shm");
    ControlStore check{moved};
    CHECK(verify_ledger(check).empty());
    CHECK(check.status_counts().done == 1);
  }
  SECTION("a side file of a database beside it is never made a database, by any name") {
    REQUIRE(std::filesystem::exists(db + "-lock"));
    REQUIRE(std::filesystem::exists(db + "-wal"));
    std::filesystem::create_symlink(db + "-wal", dir.file("sym.db"));
    std::filesystem::create_hard_link(db + "-wal", dir.file("hard.db"));
    std::filesystem::create_hard_link(db + "-lock", dir.file("lock.db"));
    for (const std::string& wrong : {db + "-lock", db + "-wal", dir.file("sym.db"),
                                     dir.file("hard.db"), dir.file("lock.db")}) {
      INFO(wrong);
      const auto wal = std::filesystem::file_size(db + "-wal");
      try {
        ControlStore store{wrong};
        FAIL("a side file was opened as a database");
      } catch (const StorageError& e) {
        CHECK(std::string(e.what()).find("side file") != std::string::npos);
      }
      CHECK(std::filesystem::file_size(db + "-wal") == wal);
      CHECK_FALSE(std::filesystem::exists(wrong + "-wal"));
    }
    ControlStore check{db};
    CHECK(verify_ledger(check).empty());
  }
}

TEST_CASE("the items table's CHECK constraint lists exactly the statuses of the one name table",
          "[storage][sqlite]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  const auto schema = sql_column(db, "SELECT sql FROM sqlite_master WHERE name = 'items'");
  REQUIRE(schema.size() == 1);
  const auto from = schema[0].find("CHECK (status");
  REQUIRE(from != std::string::npos);
  const auto to = schema[0].find("\n", from);
  const std::string check = schema[0].substr(from, to - from);
  std::vector<std::string> listed, names;
  const std::regex quoted("'([a-z_]+)'");
  for (auto it = std::sregex_iterator(check.begin(), check.end(), quoted); it != std::sregex_iterator();
       ++it) {
    listed.push_back((*it)[1]);
  }
  for (const auto& [v, name] : EnumNames<ItemStatus>::table) names.emplace_back(name);
  std::sort(listed.begin(), listed.end());
  std::sort(names.begin(), names.end());
  CHECK(listed == names);
}

// SQLite builds a temporary b-tree for `x IN (a, b, c, ...)` each time a
// statement runs; what every write of an item evaluates must not hold one.
void check_no_long_in_lists(const std::string& db) {
  const std::regex long_list(R"(IN \('[^']*', '[^']*', '[^']*')");
  for (const auto& sql : sql_column(db, "SELECT sql FROM sqlite_master WHERE tbl_name = 'items' "
                                        "AND sql IS NOT NULL")) {
    INFO(sql);
    CHECK_FALSE(std::regex_search(sql, long_list));
  }
}

TEST_CASE("no CHECK or index predicate of the items table tests an IN list of three or more",
          "[storage][sqlite]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  { ControlStore{db}.create_project("alpha", "A"); }
  check_no_long_in_lists(db);
}

TEST_CASE("a version 9 store migrates to short IN lists and still refuses an unknown status",
          "[storage][sqlite]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  std::string id;
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    id = store.enqueue("alpha", "{}");
  }
  sql(db, test::kBackToVersion9);
  REQUIRE(sql_column(db, "PRAGMA user_version") == std::vector<std::string>{"9"});
  REQUIRE(sql_column(db, "SELECT count(*) FROM sqlite_master WHERE name = 'items' AND sql LIKE "
                         "'%''ready'', ''claimed'', ''done''%'") == std::vector<std::string>{"1"});
  {
    ControlStore store{db};
    auto claimed = store.claim("w");
    REQUIRE(claimed);
    store.finish(id, claimed->fence, Outcome::done);
    CHECK(verify_ledger(store).empty());
  }
  CHECK(sql_column(db, "PRAGMA user_version") ==
        std::vector<std::string>{std::to_string(storage::kSqliteSchemaVersion)});
  check_no_long_in_lists(db);
  CHECK(sql_column(db, "PRAGMA integrity_check") == std::vector<std::string>{"ok"});
  // The rewritten CHECK still holds: an unknown status is refused.
  CHECK_THROWS(sql(db, "UPDATE items SET status = 'lost'"));
  CHECK(sql_column(db, "SELECT status FROM items") == std::vector<std::string>{"done"});
}

// An index nobody can name the query of is a write on every item for
// nothing: docs/sqlite.md lists each index with what reads it.
TEST_CASE("docs/sqlite.md names every index a new store has with the query it serves",
          "[storage]") {
  TempDir dir;
  const auto db = dir.file("c.db");
  { ControlStore store{db}; }
  const auto indexes = sql_column(db, "SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                      "sql IS NOT NULL ORDER BY name");
  std::ifstream in(std::string(CPLANE_SOURCE_DIR) + "/docs/sqlite.md");
  REQUIRE(in.good());
  std::vector<std::string> documented;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "<!-- index-table -->") inside = true;
    if (line == "<!-- /index-table -->") inside = false;
    if (!inside || line.rfind("| `", 0) != 0) continue;
    const auto end = line.find('`', 3);
    REQUIRE(end != std::string::npos);
    const auto rest = line.substr(end + 1);
    CAPTURE(line);
    CHECK(rest.find("| `") != std::string::npos);  // a query named, in backquotes
    documented.push_back(line.substr(3, end - 3));
  }
  std::sort(documented.begin(), documented.end());
  CHECK(documented == indexes);
}

TEST_CASE("a commit that made work sets the lock file's times and leaves it empty: a notice's "
          "watch sees that and no other commit",
          "[storage][wait]") {
  using storage::sqlite::WalWatch;
  TempDir dir;
  const auto db = dir.file("n.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  WalWatch notices(db + "-lock", WalWatch::Mode::notices);
  WalWatch commits(db, WalWatch::Mode::commits);
  const auto now = [] { return std::chrono::steady_clock::now(); };
  CHECK_FALSE(notices.wait(now()));
  CHECK_FALSE(commits.wait(now()));
  // A commit that made no work: the commits' watch sees it, the notices' not.
  store.create_project("beta", "B");
  CHECK(commits.wait(now()));
  CHECK_FALSE(notices.wait(now()));
  // An enqueue made work: both see it, by the time it returned.
  store.enqueue("alpha", "{}");
  CHECK(notices.wait(now()));
  CHECK(commits.wait(now()));
  CHECK_FALSE(notices.wait(now()));  // seen once
  // A claim and a finish make none; a release does.
  const auto c = store.claim("w");
  REQUIRE(c);
  CHECK_FALSE(notices.wait(now()));
  store.release(c->item_id, c->fence, "again");
  CHECK(notices.wait(now()));
  // The lock file is still empty: a file with bytes in it could pass for a
  // database.
  CHECK(std::filesystem::file_size(db + "-lock") == 0);
}
