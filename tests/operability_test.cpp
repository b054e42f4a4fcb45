// What an operator meets outside the happy path, with real processes and
// real faults: a writer stopped with SIGSTOP while it holds the lock,
// another program's open write transaction, /dev/full, a file size limit,
// a full disk, a read-only folder, an empty file passed as the database,
// rows edited behind the engine's back, one store shared by two threads.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <cplane/cplane.hpp>

#include "storage/backend_wrapper.hpp"
#include "storage/sqlite/sqlite_backend.hpp"
#include "commands/testing.hpp"
#include "tests/cli_checks.hpp"
#include "tests/support.hpp"
#include "events/errors.hpp"

namespace {

using namespace cplane;
using cplane::test::CliResult;
using cplane::test::CliRun;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::forged_sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

CliResult cli(const std::string& db, std::vector<std::string> args, CliRun how = {}) {
  args.insert(args.begin(), {"--db", db});
  return run_cli(args, how);
}


bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string trim(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

long long count_rows(const std::string& db, const std::string& table) {
  return std::stoll(sql_column(db, "SELECT count(*) FROM " + table).at(0));
}

// A store with one project and `items` ready items; returns the item ids.
std::vector<std::string> seed(const std::string& db, int items = 2) {
  ControlStore store{db};
  store.create_project("alpha", "Alpha");
  std::vector<std::string> ids;
  for (int i = 0; i < items; ++i) ids.push_back(store.enqueue("alpha", R"({"n": 1})"));
  return ids;
}

// One item in project alpha, claimed by `first` (a 1 s lease from t=1 s)
// and reclaimed by `second` at t=5 s under fence 2 with `lease`.
std::string reclaimed_item(const std::string& db, const std::string& first,
                           const std::string& second, Seconds lease) {
  ControlStore store{db};
  store.create_project("alpha", "A");
  const std::string id = store.enqueue("alpha", "{}", {}, 1'000'000);
  store.claim(first, {.lease = Seconds{1}, .now = 1'000'000});
  store.claim(second, {.lease = lease, .now = 5'000'000});
  return id;
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// The read commands, each of which must work while a writer holds the lock.
std::vector<std::vector<std::string>> read_commands(const std::string& item) {
  return {{"verify"},        {"stats"},          {"projects"},       {"item", item},
          {"events", item},  {"rebuild", "--dry-run"}};
}

}  // namespace

// ---- 1. reads never wait for writers ------------------------------------------

TEST_CASE("a writer stopped with SIGSTOP while holding the lock stops no read, and a writer "
          "gives up after --lock-timeout naming the stopped pid",
          "[operability][lock]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  const auto ids = seed(db);

  const pid_t holder = ::fork();
  REQUIRE(holder >= 0);
  if (holder == 0) {
    try {
      ControlStore store{db};
      testing::backend(store).begin_write(storage::Sync::full);  // holds PATH-lock and SQLite's lock
      ::raise(SIGSTOP);
    } catch (...) {
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(holder, &status, WUNTRACED) == holder);
  REQUIRE(WIFSTOPPED(status));

  for (const auto& args : read_commands(ids[0])) {
    INFO("cplane " << args[0]);
    const auto start = SteadyClock::now();
    auto r = cli(db, args);
    CHECK_EXIT(r, 0);
    CHECK(seconds_since(start) < 10);  // a hang guard, not a speed target
  }

  const auto events = count_rows(db, "events");
  const auto start = SteadyClock::now();
  auto r = cli(db, {"--lock-timeout", "0.5", "enqueue", "alpha", "{}"});
  CHECK_EXIT(r, 1);
  CHECK(seconds_since(start) >= 0.45);
  CHECK(contains(r.err, "busy"));
  CHECK(contains(r.err, "pid " + std::to_string(holder)));
  CHECK(contains(r.err, "stopped"));
  CHECK(r.out.empty());

  ::kill(holder, SIGKILL);
  ::waitpid(holder, &status, 0);
  CHECK(count_rows(db, "events") == events);
  // The kernel released the dead holder's lock: writers go on.
  CHECK_EXIT(cli(db, {"--lock-timeout", "5", "enqueue", "alpha", "{}"}), 0);
}

TEST_CASE("another program's open write transaction stops no read, and a writer fails as busy after "
          "--lock-timeout",
          "[operability][lock]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  const auto ids = seed(db);

  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);

  for (const auto& args : read_commands(ids[0])) {
    INFO("cplane " << args[0]);
    const auto start = SteadyClock::now();
    CHECK_EXIT(cli(db, args), 0);
    CHECK(seconds_since(start) < 10);
  }
  auto r = cli(db, {"--lock-timeout", "0.3", "claim", "--owner", "w"});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "busy"));
  CHECK(contains(r.err, "write transaction"));

  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  CHECK_EXIT(cli(db, {"claim", "--owner", "w"}), 0);
}

TEST_CASE("the library's lock_timeout bounds a write and its busy error names the holder",
          "[operability][lock]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db);
  ControlStore holder{db};
  testing::backend(holder).begin_write(storage::Sync::full);
  ControlStore waiter{db, {.lock_timeout = std::chrono::milliseconds{200}}};
  const auto start = SteadyClock::now();
  try {
    waiter.enqueue("alpha", "{}");
    FAIL("the enqueue did not give up");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::busy);
    CHECK(contains(e.what(), "pid " + std::to_string(::getpid())));
  }
  CHECK(seconds_since(start) >= 0.19);
  // A read-only store of the same file reads on, lock or no lock.
  ControlStore reader{db, {.read_only = true}};
  CHECK(reader.status_counts().ready == 2);
  testing::backend(holder).rollback();
  CHECK_NOTHROW(waiter.enqueue("alpha", "{}"));
}

TEST_CASE("a store opened read-only creates no lock file, writes nothing and refuses writes",
          "[operability][lock]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db);
  fs::remove(db + "-lock");
  const auto size = fs::file_size(db);
  {
    ControlStore reader{db, {.read_only = true}};
    CHECK(reader.visible_projects() == std::vector<std::string>{"alpha"});
    CHECK(verify_ledger(reader).empty());
    CHECK(rebuild(reader, {.dry_run = true}).changes.empty());
    CHECK_THROWS_AS(reader.enqueue("alpha", "{}"), InvalidArgument);
    CHECK_THROWS_AS(rebuild(reader), InvalidArgument);
  }
  CHECK_FALSE(fs::exists(db + "-lock"));
  CHECK(fs::file_size(db) == size);
}

// ---- 2. nothing is created by mistake ----------------------------------------

TEST_CASE("read commands never create or initialise a database: a missing or empty file is exit 1",
          "[operability][create]") {
  TempDir dir;
  const std::string missing = dir.file("missing.db");
  const std::string empty = dir.file("empty.db");
  std::ofstream(empty).close();
  for (const auto& args : read_commands("some-item")) {
    for (const auto& db : {missing, empty}) {
      INFO("cplane " << args[0] << " on " << db);
      auto r = cli(db, args);
      CHECK_EXIT(r, 1);
      CHECK(r.out.empty());
      CHECK((contains(r.err, "no database") || contains(r.err, "empty")));
    }
    auto r = cli(missing, {"rebuild"});
    CHECK_EXIT(r, 1);
  }
  CHECK_FALSE(fs::exists(missing));
  CHECK(fs::file_size(empty) == 0);
  for (const char* suffix : {"-lock", "-wal", "-shm", "-journal"}) {
    CHECK_FALSE(fs::exists(missing + suffix));
    CHECK_FALSE(fs::exists(empty + suffix));
  }
  // A write command is what creates a store, even in an empty file.
  CHECK_EXIT(cli(empty, {"project", "create", "alpha", "Alpha"}), 0);
  CHECK_EXIT(cli(empty, {"verify"}), 0);
}

TEST_CASE("a command refused for bad input leaves no database file behind", "[operability][create]") {
  TempDir dir;
  const std::string db = dir.file("new.db");
  const std::vector<std::vector<std::string>> refused = {
      {"claim", "--owner", "w", "--lease", "0"},
      {"claim", "--owner", "w", "--lease", "-1"},
      {"claim", "--owner", "w", "--lease", "0x10"},
      {"claim", "--owner", "w", "--lease", " 5"},
      {"claim", "--owner", "w\x01", "--lease", "5"},
      {"--now", "-5", "claim", "--owner", "w"},
      {"enqueue", "alpha", "{not json"},
      {"enqueue", "al\tpha", "{}"},
      {"finish", "x", "--fence", "-1", "--status", "done"},
      {"finish", "x", "--fence", "1", "--status", "maybe"},
      {"project", "create", "", "Title"},
      {"project", "assign", "alpha", std::string(300, 'a')},
  };
  for (const auto& args : refused) {
    INFO("cplane " << args[0] << " " << args[1] << " " << args[2]);
    auto r = cli(db, args);
    CHECK_EXIT(r, 2);
    CHECK(!contains(r.err, "missing argument"));
    CHECK_FALSE(fs::exists(db));
    CHECK_FALSE(fs::exists(db + "-lock"));
  }
}

TEST_CASE("negative and malformed numbers are refused with the real reason", "[operability][args]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  struct Case {
    std::vector<std::string> args;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {{"--now", "-5", "stats"}, "negative"},
      {{"claim", "--owner", "w", "--lease", "-1"}, "positive"},
      {{"finish", "x", "--fence", "-1", "--status", "done"}, "non-negative"},
      {{"claim", "--owner", "w", "--lease", "0x10"}, "decimal"},
      {{"claim", "--owner", "w", "--lease", "5 "}, "decimal"},
      {{"claim", "--owner", "w", "--lease", "inf"}, "decimal"},
      {{"claim", "--owner", "w", "--lease", "400000000"}, "ten years"},
      {{"--now", "9000000000000000000", "stats"}, "latest"},
      {{"--lock-timeout", "-1", "stats"}, "lock-timeout"},
  };
  for (const auto& c : cases) {
    INFO("cplane " << c.args[0] << " " << c.args[1] << " " << c.args[2]);
    auto r = cli(db, c.args);
    CHECK_EXIT(r, 2);
    CHECK(contains(r.err, c.reason));
  }
  // The same values joined with '=' read the same way.
  auto joined = cli(db, {"--now=-5", "stats"});
  CHECK_EXIT(joined, 2);
  CHECK(contains(joined.err, "negative"));
}

TEST_CASE("with HOME missing, the default database is never created and the error names its path",
          "[operability][create]") {
  TempDir dir;
  const std::string home = dir.file("no-such-home");
  auto r = run_cli({"project", "create", "alpha", "Alpha"},
                   {"CPLANE_DB=", "XDG_CACHE_HOME=", "HOME=" + home});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, home + "/.cache/cplane/control.db"));
  CHECK_FALSE(fs::exists(home));

  // XDG_CACHE_HOME whose parent is missing: nothing above the cache folder is made.
  const std::string xdg = dir.file("gone") + "/cache";
  auto x = run_cli({"project", "create", "alpha", "Alpha"},
                   {"CPLANE_DB=", "XDG_CACHE_HOME=" + xdg, "HOME=" + home});
  CHECK_EXIT(x, 1);
  CHECK(contains(x.err, xdg + "/cplane/control.db"));
  CHECK_FALSE(fs::exists(dir.file("gone")));

  // A read creates nothing, not even cplane/ in an existing cache folder.
  fs::create_directory(home);
  auto read = run_cli({"stats"}, {"CPLANE_DB=", "XDG_CACHE_HOME=", "HOME=" + home});
  CHECK_EXIT(read, 1);
  CHECK_FALSE(fs::exists(home + "/.cache"));
}

TEST_CASE("an SQLite URI is refused, and a foreign file gets no lock file beside it",
          "[operability][create]") {
  TempDir dir;
  const std::string uri = "file:" + dir.file("x.db");
  auto r = run_cli({"--db", uri, "project", "create", "alpha", "Alpha"});
  CHECK_EXIT(r, 2);
  CHECK(contains(r.err, "URI"));
  CHECK_FALSE(fs::exists(dir.file("x.db")));
  CHECK_THROWS_AS(ControlStore(uri), InvalidArgument);

  const std::string foreign = dir.file("foreign.db");
  std::ofstream(foreign).close();
  sql(foreign, "CREATE TABLE t (x)");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"project", "create", "alpha", "Alpha"}, {"verify"}, {"rebuild"}}) {
    auto f = cli(foreign, args);
    CHECK_EXIT(f, 1);
    CHECK(contains(f.err, "not a cplane"));
  }
  CHECK_FALSE(fs::exists(foreign + "-lock"));
  CHECK(sql_column(foreign, "PRAGMA journal_mode") == std::vector<std::string>{"delete"});
}

// ---- 3. every failure is told, once, correctly ---------------------------------

TEST_CASE("output that cannot be written is exit 1, saying the command took effect",
          "[operability][output]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db, 0);
  auto r = cli(db, {"enqueue", "alpha", "{}"}, {.stdout_file = "/dev/full"});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "took effect"));
  CHECK(count_rows(db, "items") == 1);  // it did: the item is queued

  auto read = cli(db, {"stats", "--json"}, {.stdout_file = "/dev/full"});
  CHECK_EXIT(read, 1);
  CHECK(contains(read.err, "could not be written"));
  CHECK_FALSE(contains(read.err, "took effect"));
}

TEST_CASE("a write past the file size limit is reported as full, nothing written, no SIGXFSZ",
          "[operability][full]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db, 1);
  const std::string payload = "{\"x\": \"" + std::string(300'000, 'a') + "\"}";
  const std::string file = dir.file("big.json");
  std::ofstream(file) << payload;
  const auto events = count_rows(db, "events");
  auto r = cli(db, {"enqueue", "alpha", "@" + file}, {.file_size_limit = 200'000});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "full"));
  CHECK(contains(r.err, "nothing was written"));
  CHECK_FALSE(contains(r.err, "unknown"));
  CHECK(r.out.empty());
  CHECK(count_rows(db, "events") == events);
  CHECK_EXIT(cli(db, {"verify"}), 0);
  CHECK_EXIT(cli(db, {"enqueue", "alpha", "@" + file}), 0);  // without the limit it fits
}

TEST_CASE("a full disk is StorageError full, not commit outcome unknown", "[operability][full]") {
  TempDir dir;
  const std::string mount_point = dir.file("tiny");
  fs::create_directory(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=400k") != 0) {
    WARN("cannot mount a small tmpfs here (not root?): the full-disk case is covered by the "
         "file size limit test only");
    return;
  }
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{mount_point};
  const std::string db = mount_point + "/control.db";
  ControlStore store{db};
  store.create_project("alpha", "Alpha");
  const std::string payload = "{\"x\": \"" + std::string(200'000, 'a') + "\"}";
  std::int64_t queued = 0;
  bool full = false;
  for (int i = 0; i < 10 && !full; ++i) {
    try {
      store.enqueue("alpha", payload);
      ++queued;
    } catch (const StorageError& e) {
      INFO(e.what());
      CHECK(e.category() == StorageError::Category::full);
      full = true;
    }
  }
  REQUIRE(full);
  CHECK(store.status_counts().ready == queued);
  CHECK(verify_ledger(store).empty());
  CHECK_NOTHROW(store.enqueue("alpha", "{}"));  // a small one still fits
}

namespace {

// Blocks inside begin_write until released: one thread is then "in a call".
class GateBackend : public storage::BackendWrapper {
 public:
  using BackendWrapper::BackendWrapper;
  void begin_write(storage::Sync sync) override {
    {
      std::unique_lock lock(mutex_);
      entered_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
    }
    BackendWrapper::begin_write(sync);
  }
  void wait_entered() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool released_ = false;
};

}  // namespace

TEST_CASE("a ControlStore used from two threads at once refuses the second call", "[operability]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db, 1);
  auto gate = std::make_unique<GateBackend>(storage::open_sqlite(db));
  GateBackend& g = *gate;
  ControlStore store = testing::store_over(std::move(gate));
  auto first = std::async(std::launch::async, [&] { return store.claim("w1"); });
  g.wait_entered();
  try {
    store.claim("w2");
    FAIL("the second thread's call was not refused");
  } catch (const InvalidArgument& e) {
    CHECK(contains(e.what(), "one per thread"));
  }
  CHECK_THROWS_AS(store.status_counts(), InvalidArgument);
  CHECK_THROWS_AS(verify_ledger(store), InvalidArgument);
  g.release();
  auto claimed = first.get();
  REQUIRE(claimed);
  CHECK(claimed->fence == 1);
  CHECK_NOTHROW(store.status_counts());  // free again once the call is over
}

TEST_CASE("a moved-from ControlStore throws a clear error", "[operability]") {
  TempDir dir;
  ControlStore a{dir.file("c.db")};
  ControlStore b{std::move(a)};
  CHECK_NOTHROW(b.create_project("alpha", "A"));
  try {
    a.enqueue("alpha", "{}");  // NOLINT(bugprone-use-after-move): that is the test
    FAIL("a moved-from store answered");
  } catch (const InvalidArgument& e) {
    CHECK(contains(e.what(), "moved"));
  }
  CHECK_THROWS_AS(verify_ledger(a), InvalidArgument);
}

TEST_CASE("an Outcome outside the enum is refused, not stored as failed", "[operability]") {
  TempDir dir;
  ControlStore store{dir.file("c.db")};
  store.create_project("alpha", "A");
  const auto id = store.enqueue("alpha", "{}");
  const auto c = store.claim("w");
  REQUIRE(c);
  const auto bogus = static_cast<Outcome>(7);
  CHECK_THROWS_AS(store.finish(id, c->fence, bogus), InvalidArgument);
  CHECK_THROWS_AS(store.finish_batch({{id, c->fence, bogus, ""}}), InvalidArgument);
  CHECK_THROWS_AS(store.finish_and_claim(id, c->fence, bogus, "w"), InvalidArgument);
  CHECK(store.item(id).status == ItemStatus::claimed);
  CHECK(store.events(id).size() == 2);
}

TEST_CASE("a row whose status is not a status is status_disagrees, and rebuild repairs it",
          "[operability][verify]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const auto ids = seed(db, 2);
  {
    ControlStore store{db};
    store.claim("w");
  }
  sql(db, "PRAGMA ignore_check_constraints = 1; UPDATE items SET status = 'bogus' WHERE item_id = '" +
              ids[0] + "'");
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].kind == ProblemKind::status_disagrees);
  CHECK(problems[0].item_id == ids[0]);
  CHECK(contains(problems[0].detail, "bogus"));
  // A command that must decide on that row refuses it as corruption.
  CHECK_THROWS_AS(store.item(ids[0]), StorageError);
  const auto dry = rebuild(store, {.dry_run = true});
  REQUIRE(dry.changes.size() == 1);
  CHECK(dry.changes[0].key == ids[0]);
  rebuild(store);
  CHECK(verify_ledger(store).empty());
  CHECK(store.item(ids[0]).status == ItemStatus::claimed);
}

TEST_CASE("reads work in a read-only folder, for a user who may not write there",
          "[operability][readonly]") {
  TempDir dir;
  const fs::path folder = dir.path() / "ro";
  fs::create_directory(folder);
  const std::string db = (folder / "control.db").string();
  const auto ids = seed(db, 2);
  fs::remove(db + "-lock");
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read |
                              fs::perms::others_exec);
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                          fs::perms::others_read);
  auto files_in = [&] {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(folder)) files.push_back(entry.path().filename());
    std::sort(files.begin(), files.end());
    return files;
  };
  const auto before = files_in();
  CliRun as_nobody;
  if (::geteuid() == 0) as_nobody.uid = 65534;  // root ignores permissions: be someone else
  if (const auto probe = cli(db, {"stats"}, as_nobody); probe.exit_code >= 126) {
    WARN("cannot run the CLI as another user here (its build folder is not reachable): skipped");
    return;
  }
  for (const auto& args : read_commands(ids[0])) {
    INFO("cplane " << args[0]);
    CHECK_EXIT(cli(db, args, as_nobody), 0);
  }
  auto write = cli(db, {"enqueue", "alpha", "{}"}, as_nobody);
  CHECK_EXIT(write, 1);
  CHECK(files_in() == before);  // the reads made nothing (no -lock)
  CHECK(std::find(before.begin(), before.end(), "control.db-wal") != before.end());
  fs::permissions(folder, fs::perms::owner_all);
}

// ---- 4. payloads and arguments as people pass them ------------------------------

TEST_CASE("a payload comes from an argument, standard input (-) or a file (@FILE), up to 1 MiB",
          "[operability][payload]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 0);
  const std::string big = "{\"x\": \"" + std::string(500'000, 'b') + "\"}";  // over ARG_MAX's per-argument limit
  const std::string file = dir.file("big.json");
  std::ofstream(file) << big << "\n";

  auto from_file = cli(db, {"enqueue", "alpha", "@" + file});
  REQUIRE_EXIT(from_file, 0);
  CHECK(ControlStore(db).item(trim(from_file.out)).payload == big);

  auto from_stdin = cli(db, {"enqueue", "alpha", "-"}, {.input = "{\"k\": [1, 2]}\n"});
  REQUIRE_EXIT(from_stdin, 0);
  CHECK(ControlStore(db).item(trim(from_stdin.out)).payload == "{\"k\": [1, 2]}");

  const std::string huge_file = dir.file("huge.json");
  std::ofstream(huge_file) << "{\"x\": \"" << std::string(1 << 20, 'c') << "\"}";
  auto huge = cli(db, {"enqueue", "alpha", "@" + huge_file});
  CHECK_EXIT(huge, 2);
  CHECK(contains(huge.err, "limit"));
  auto missing = cli(db, {"enqueue", "alpha", "@" + dir.file("nope.json")});
  CHECK_EXIT(missing, 2);
  CHECK(count_rows(db, "items") == 2);
}

TEST_CASE("enqueue --batch queues one payload per line in one transaction, all or nothing",
          "[operability][payload]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 0);
  const std::string file = dir.file("batch.jsonl");
  std::ofstream(file) << "{\"n\": 1}\n\n{\"n\": 2}\r\n{\"n\": 3}\n";
  const auto seq_before = sql_column(db, "SELECT coalesce(max(seq), 0) FROM events").at(0);
  auto r = cli(db, {"enqueue", "alpha", "--batch", file});
  REQUIRE_EXIT(r, 0);
  std::vector<std::string> ids;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) ids.push_back(line);
  REQUIRE(ids.size() == 3);
  ControlStore store{db};
  for (int i = 0; i < 3; ++i) {
    CHECK(store.item(ids[i]).payload == "{\"n\": " + std::to_string(i + 1) + "}");
  }
  // In queue order: claims hand them out as listed.
  for (const auto& id : ids) CHECK(store.claim("w")->item_id == id);

  auto json = cli(db, {"--json", "enqueue", "alpha", "--batch", "-"}, {.input = "1\n2\n"});
  REQUIRE_EXIT(json, 0);
  CHECK(json.out.front() == '[');

  const auto items = count_rows(db, "items");
  const std::string bad = dir.file("bad.jsonl");
  std::ofstream(bad) << "{\"n\": 1}\n{\"n\": \n{\"n\": 3}\n";
  auto refused = cli(db, {"enqueue", "alpha", "--batch", bad});
  CHECK_EXIT(refused, 2);
  CHECK(contains(refused.err, "line 2"));
  CHECK(count_rows(db, "items") == items);
  CHECK_EXIT(cli(db, {"enqueue", "alpha", "{}", "--batch", file}), 2);
  CHECK_EXIT(cli(db, {"enqueue", "alpha"}), 2);
  CHECK_EXIT(cli(db, {"enqueue", "ghost", "--batch", file}), 7);
  CHECK(count_rows(db, "items") == items);
}

TEST_CASE("ids, owners and actors are printable UTF-8 of at most 256 bytes, and messages cut them to "
          "80 characters",
          "[operability][args]") {
  TempDir dir;
  ControlStore store{dir.file("c.db")};
  store.create_project("alpha", "A");
  CHECK_NOTHROW(store.create_project("проект-β", "unicode is fine"));
  for (const std::string& bad : {std::string("a\nb"), std::string("a\x7f"), std::string("\xc2\x85"),
                                std::string("\xff"), std::string(257, 'x'), std::string()}) {
    CHECK_THROWS_AS(store.create_project(bad, "T"), InvalidArgument);
    CHECK_THROWS_AS(store.claim(bad), InvalidArgument);
    CHECK_THROWS_AS(store.claim("w", {.actor = bad}), InvalidArgument);
    CHECK_THROWS_AS(store.item(bad), InvalidArgument);
    CHECK_THROWS_AS(store.grant("alpha", bad), InvalidArgument);
  }
  CHECK(store.visible_projects().size() == 2);
  const std::string long_id(200, 'z');
  try {
    store.item(long_id);
    FAIL("found an item that does not exist");
  } catch (const NotFound& e) {
    const std::string message = e.what();
    CHECK(contains(message, std::string(80, 'z') + "..."));
    CHECK_FALSE(contains(message, std::string(81, 'z')));
  }
}

TEST_CASE("the --verbose option says which database was opened, how, and how long the steps took",
          "[operability][args]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 1);
  auto r = cli(db, {"--verbose", "stats"});
  REQUIRE_EXIT(r, 0);
  CHECK(contains(r.err, db));
  CHECK(contains(r.err, "reading"));
  CHECK(contains(r.err, " ms"));
  CHECK(r.out == cli(db, {"stats"}).out);
  auto w = cli(db, {"enqueue", "alpha", "{}", "--verbose", "--durability", "full"});
  REQUIRE_EXIT(w, 0);
  CHECK(contains(w.err, "writing"));
  CHECK(contains(w.err, "durability full"));
  CHECK(contains(w.err, "committed"));
}

// ---- 5. small semantics ----------------------------------------------------------

TEST_CASE("leases that lapse at the same moment are reclaimed in queue order", "[operability][claim]") {
  TempDir dir;
  ControlStore store{dir.file("c.db")};
  store.create_project("alpha", "A");
  std::vector<std::string> queued;
  // Ids made in one millisecond are random after their time prefix, so their
  // order is not the queue's: the tie must be broken by queue order.
  for (int i = 0; i < 24; ++i) queued.push_back(store.enqueue("alpha", "{}", {}, 1'000'000));
  const auto batch = store.claim("w1", 24, {.lease = Seconds{10}, .now = 2'000'000});
  REQUIRE(batch.size() == 24);
  std::vector<std::string> reclaimed;
  for (int i = 0; i < 24; ++i) {
    auto c = store.claim("w2", {.lease = Seconds{10}, .now = 20'000'000});
    REQUIRE(c);
    CHECK(c->fence == 2);
    reclaimed.push_back(c->item_id);
  }
  CHECK(reclaimed == queued);
}

TEST_CASE("a fence above the current one is 'not the current fence', a lower one 'stale', and both "
          "carry the reason stale_fence",
          "[operability][fence]") {
  TempDir dir;
  ControlStore store{dir.file("c.db")};
  store.create_project("alpha", "A");
  const auto id = store.enqueue("alpha", "{}", {}, 1'000'000);
  store.claim("w1", {.lease = Seconds{1}, .now = 1'000'000});
  store.claim("w2", {.lease = Seconds{1}, .now = 3'000'000});  // fence 2
  struct Case {
    Fence fence;
    const char* words;
  };
  for (const auto& c : {Case{1, "is stale"}, Case{9, "not the current fence"}}) {
    try {
      store.finish(id, c.fence, Outcome::done);
      FAIL("accepted fence " << c.fence);
    } catch (const FenceRejected& e) {
      CHECK(e.reason() == FenceRejected::Reason::stale_fence);
      CHECK(contains(e.what(), c.words));
    }
  }
  const auto other = store.enqueue("alpha", "{}");
  try {
    store.finish(other, 1, Outcome::done);
    FAIL("finished a ready item");
  } catch (const FenceRejected& e) {
    CHECK(e.reason() == FenceRejected::Reason::not_claimed);
  }
  try {
    store.finish("no-such-item", 1, Outcome::done);
    FAIL("finished an unknown item");
  } catch (const FenceRejected& e) {
    CHECK(e.reason() == FenceRejected::Reason::unknown_item);
  }
  store.finish(id, 2, Outcome::done);
  try {
    store.finish(id, 2, Outcome::done);
    FAIL("finished twice");
  } catch (const FenceRejected& e) {
    CHECK(e.reason() == FenceRejected::Reason::terminal);
  }
}

TEST_CASE("the same item twice in one finish batch is refused as listed twice, nothing written",
          "[operability][fence]") {
  TempDir dir;
  ControlStore store{dir.file("c.db")};
  store.create_project("alpha", "A");
  const auto id = store.enqueue("alpha", "{}");
  const auto c = store.claim("w");
  try {
    store.finish_batch({{id, c->fence, Outcome::done, ""}, {id, c->fence, Outcome::done, ""}});
    FAIL("a batch with one item twice was accepted");
  } catch (const InvalidArgument& e) {
    CHECK(contains(e.what(), "listed twice"));
  }
  CHECK(store.item(id).status == ItemStatus::claimed);
  auto r = run_cli({"--db", dir.file("c.db"), "finish", id, id, "--fence", "1", "--fence", "1",
                    "--status", "done"});
  CHECK_EXIT(r, 2);
  CHECK(contains(r.err, "listed twice"));
}

TEST_CASE("verify reports one problem per fault: an undecodable claim, a NULL item_id column",
          "[operability][verify]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const std::string id = reclaimed_item(db, "w1", "w2", Seconds{1});
  {
    ControlStore store{db};
    store.finish(id, 2, Outcome::done, "", 6'000'000);
  }
  SECTION("an undecodable claim event") {
    forged_sql(db, "UPDATE events SET body = x'00' WHERE type = 'claimed' AND item_id = '" + id +
                "' AND seq = (SELECT max(seq) FROM events WHERE type = 'claimed')");
    ControlStore store{db};
    const auto problems = verify_ledger(store);
    REQUIRE(problems.size() == 1);
    CHECK(problems[0].kind == ProblemKind::undecodable_event);
  }
  SECTION("a NULL item_id column") {
    forged_sql(db, "UPDATE events SET item_id = NULL WHERE type = 'done'");
    ControlStore store{db};
    const auto problems = verify_ledger(store);
    INFO(problems.size() << " problems; first: "
                         << (problems.empty() ? std::string_view() : to_string(problems[0].kind)));
    const auto index = std::count_if(problems.begin(), problems.end(), [](const auto& p) {
      return p.kind == ProblemKind::index_disagrees;
    });
    CHECK(index == 1);
  }
}

TEST_CASE("a version-1 database is migrated to the current schema by a writer, and refused by a reader",
          "[operability][migration]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 1);
  // What version 1 was: no stream columns (events filed by item_id), and
  // the lease index without queued_seq.
  sql(db,
      std::string(test::kBackToVersion1));
  // A read never migrates: it refuses, saying how to upgrade.
  try {
    ControlStore reader{db, {.read_only = true}};
    FAIL("a read-only store opened a version-1 database");
  } catch (const StorageError& e) {
    CHECK(e.category() == StorageError::Category::incompatible);
    CHECK(contains(e.what(), "migrate"));
  }
  CHECK(sql_column(db, "PRAGMA user_version") == std::vector<std::string>{"1"});
  {
    ControlStore writer{db};
    CHECK(writer.claim("w"));
  }
  CHECK(sql_column(db, "PRAGMA user_version") ==
        std::vector<std::string>{std::to_string(storage::kSqliteSchemaVersion)});
  CHECK(sql_column(db, "SELECT sql FROM sqlite_master WHERE name = 'items_lease'").at(0).find(
            "queued_seq") != std::string::npos);
  // Every event was filed under its stream by the migration.
  CHECK(sql_column(db, "SELECT count(*) FROM events WHERE stream_kind = 'project' AND stream_id = "
                       "'alpha'") == std::vector<std::string>{"1"});
  CHECK(sql_column(db, "SELECT count(*) FROM events WHERE stream_kind = 'item' AND stream_id = "
                       "item_id") == std::vector<std::string>{"2"});
  ControlStore store{db};
  CHECK(verify_ledger(store).empty());
}

// ---- found by review: each was a way to break the guarantees above ----------------

TEST_CASE("reads in a read-only folder stay consistent while writers work", "[operability][readonly]") {
  TempDir dir;
  const fs::path folder = dir.path() / "ro";
  fs::create_directory(folder);
  const std::string db = (folder / "control.db").string();
  seed(db, 200);
  for (const char* suffix : {"", "-wal", "-shm", "-lock"}) {
    if (fs::exists(db + suffix)) fs::permissions(db + suffix, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  }
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(folder, fs::perms::owner_all | fs::perms::others_read | fs::perms::others_exec);
  CliRun as_nobody;
  if (::geteuid() == 0) as_nobody.uid = 65534;
  if (const auto probe = cli(db, {"stats"}, as_nobody); probe.exit_code >= 126) {
    WARN("cannot run the CLI as another user here: skipped");
    return;
  }
  // A writer that claims, finishes and enqueues, each in a process of its
  // own (each closes its connection, as CLI writers do), while reads run.
  const pid_t writer = ::fork();
  REQUIRE(writer >= 0);
  if (writer == 0) {
    const auto until = SteadyClock::now() + std::chrono::seconds{3};
    while (SteadyClock::now() < until) {
      ControlStore store{db};
      if (auto c = store.claim("w")) store.finish(c->item_id, c->fence, Outcome::done);
      store.enqueue_batch("alpha", std::vector<std::string>(20, R"({"pad": "xxxxxxxxxxxxxxxx"})"));
    }
    ::_exit(0);
  }
  int failures = 0;
  for (int i = 0; i < 12; ++i) {
    auto r = cli(db, {"verify"}, as_nobody);
    if (r.exit_code != 0) {
      ++failures;
      UNSCOPED_INFO("read " << i << ": exit " << r.exit_code << ": " << r.err);
    }
  }
  int status = 0;
  ::waitpid(writer, &status, 0);
  CHECK(failures == 0);
  CHECK_EXIT(cli(db, {"verify"}), 0);
}

TEST_CASE("a reader stopped inside its snapshot holds off no writer and no reader",
          "[operability][lock]") {
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db, 3);
  const pid_t reader = ::fork();
  REQUIRE(reader >= 0);
  if (reader == 0) {
    try {
      ControlStore store{db, {.read_only = true}};
      testing::backend(store).begin_read();
      testing::backend(store).status_counts(nullptr);  // the snapshot is taken
      ::raise(SIGSTOP);
    } catch (...) {
    }
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(reader, &status, WUNTRACED) == reader);
  CHECK_EXIT(cli(db, {"--lock-timeout", "5", "enqueue", "alpha", "{}"}), 0);
  CHECK_EXIT(cli(db, {"--lock-timeout", "5", "claim", "--owner", "w"}), 0);
  CHECK_EXIT(cli(db, {"verify"}), 0);
  ::kill(reader, SIGKILL);
  ::waitpid(reader, &status, 0);
}

TEST_CASE("writers leave the WAL in place but empty, so it never grows from process to process",
          "[operability][lock]") {
  // The WAL stays (a reader in a read-only folder needs it), and each
  // writer process cuts it to nothing as it closes: the next process has
  // no WAL index to rebuild from it, and no WAL grows without bound.
  TempDir dir;
  const std::string db = dir.file("control.db");
  seed(db, 1);
  for (int i = 0; i < 30; ++i) REQUIRE_EXIT(cli(db, {"enqueue", "alpha", "{}"}), 0);
  CHECK(fs::exists(db + "-wal"));
  CHECK(fs::exists(db + "-shm"));
  CHECK(fs::file_size(db + "-wal") == 0);
  CHECK(count_rows(db, "items") == 31);
  // A long-lived writer keeps it bounded too (checkpoints after commits).
  {
    ControlStore store{db};
    for (int i = 0; i < 60; ++i) {
      store.enqueue_batch("alpha", std::vector<std::string>(50, R"({"pad": "xxxxxxxxxxxxxxxxxxxxxxxx"})"));
    }
    CHECK(fs::file_size(db + "-wal") < (8u << 20));
  }
  CHECK(fs::file_size(db + "-wal") == 0);
}

TEST_CASE("rebuild refuses a log whose index columns file an event elsewhere, and never lowers a "
          "fence",
          "[operability][verify]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const std::string id = reclaimed_item(db, "a", "b", Seconds{100});  // b holds fence 2
  const auto newest_claim =
      "(SELECT max(seq) FROM events WHERE type = 'claimed' AND stream_id = '" + id + "')";
  SECTION("a NULL item_id column") {
    sql(db, "UPDATE events SET item_id = NULL WHERE seq = " + newest_claim);
  }
  SECTION("a stream_id column pointing elsewhere") {
    sql(db, "UPDATE events SET stream_id = 'elsewhere', item_id = 'elsewhere' WHERE seq = " +
                newest_claim);
  }
  SECTION("a stream_kind column no kind has") {
    sql(db, "UPDATE events SET stream_kind = 'nowhere' WHERE seq = " + newest_claim);
  }
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  REQUIRE_FALSE(problems.empty());
  // The columns disagree with the body; a moved stream column also breaks
  // both streams' chains (the one it left ends early, the one it joined
  // gains an event it never chained).
  CHECK(std::any_of(problems.begin(), problems.end(),
                    [](const auto& p) { return p.kind == ProblemKind::index_disagrees; }));
  const std::set<ProblemKind> chain = {ProblemKind::tail_missing,   ProblemKind::event_missing,
                                       ProblemKind::head_missing,   ProblemKind::event_inserted,
                                       ProblemKind::event_reordered, ProblemKind::event_edited};
  for (const auto& p : problems) {
    CHECK((p.kind == ProblemKind::index_disagrees || chain.contains(p.kind)));
  }
  CHECK_THROWS_AS(rebuild(store), RebuildRefused);
  CHECK(store.item(id).fence == 2);
  CHECK(store.item(id).owner == "b");
  // The next claim (after b's lease) still gets a higher fence than b's.
  const auto next = store.claim("c", {.now = 200'000'000});
  REQUIRE(next);
  CHECK(next->fence == 3);
}

TEST_CASE("the lock file is never a symbolic link and takes the database's mode",
          "[operability][lock]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 0);
  const std::string victim = dir.file("victim.txt");
  std::ofstream(victim) << "precious\n";
  fs::remove(db + "-lock");
  fs::create_symlink(victim, db + "-lock");
  auto r = cli(db, {"enqueue", "alpha", "{}"});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "symbolic link"));
  std::ifstream in(victim);
  std::string content;
  std::getline(in, content);
  CHECK(content == "precious");

  fs::remove(db + "-lock");
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                          fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
  CHECK_EXIT(cli(db, {"enqueue", "alpha", "{}"}), 0);
  const auto mode = fs::status(db + "-lock").permissions();
  CHECK((mode & fs::perms::others_write) != fs::perms::none);
}

TEST_CASE("rebuild whose output cannot be written says it took effect", "[operability][output]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const auto ids = seed(db, 1);
  sql(db, "UPDATE items SET attempts = attempts + 5");
  auto r = cli(db, {"rebuild"}, {.stdout_file = "/dev/full"});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "took effect"));
  CHECK_EXIT(cli(db, {"verify"}), 0);
}

TEST_CASE("messages escape control and bidi characters, and such names are refused",
          "[operability][args]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 0);
  auto r = cli(db, {"item", "\x1b[2J"});
  CHECK_EXIT(r, 2);
  CHECK_FALSE(contains(r.err, "\x1b"));
  CHECK(contains(r.err, "\\x1b"));
  CHECK(quote_id("a\u202eb") == "'a\\u202eb'");
  ControlStore store{db};
  for (const std::string bad : {"\u202egnp.exe", " padded", "padded ", " "}) {
    CHECK_THROWS_AS(store.claim(bad), InvalidArgument);
  }
}

TEST_CASE("operator mistakes in arguments get their real reason", "[operability][args]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  seed(db, 0);
  struct Case {
    std::vector<std::string> args;
    std::string reason;
  };
  const std::string file = dir.file("b.jsonl");
  std::ofstream(file) << "{}\n";
  for (const auto& c : std::vector<Case>{
           {{"--db", ":memory:", "project", "create", "p", "P"}, "keep nothing"},
           {{"--db", "sqlite::memory:", "project", "create", "p", "P"}, "keep nothing"},
           {{"--db", "sqlite:", "project", "create", "p", "P"}, "names no file"},
           {{"--db", db, "claim", "--owner", "w", "--max", "99999999999999999999"}, "too large"},
           {{"--db", db, "finish", "x", "--fence", "99999999999999999999", "--status", "done"},
            "larger than any fence"},
           {{"--db", db, "enqueue", "alpha", "--batch", file, "--batch", file}, "twice"},
           {{"--db", db, "enqueue", "alpha", "@"}, "file name"},
       }) {
    INFO(c.args[2] << " " << c.args[3]);
    auto r = run_cli(c.args);
    CHECK_EXIT(r, 2);
    CHECK(contains(r.err, c.reason));
  }
  auto dev_null = run_cli({"--db", "/dev/null", "project", "create", "p", "P"});
  CHECK_EXIT(dev_null, 1);
  CHECK(contains(dev_null.err, "not a regular file"));
  auto zero = run_cli({"--db", db, "enqueue", "alpha", "--batch", "/dev/zero"});
  CHECK_EXIT(zero, 2);
  CHECK(contains(zero.err, "limit"));
}

TEST_CASE("stats says when rows with an invalid status are left out", "[operability][verify]") {
  TempDir dir;
  const std::string db = dir.file("c.db");
  const auto ids = seed(db, 2);
  sql(db, "PRAGMA ignore_check_constraints = 1; UPDATE items SET status = 'bogus' WHERE item_id = '" +
              ids[0] + "'");
  auto r = cli(db, {"stats"});
  CHECK_EXIT(r, 0);
  CHECK(contains(r.out, "ready: 1"));
  CHECK(contains(r.err, "1 item row(s)"));
}

TEST_CASE("a migration killed at any moment leaves the old schema or the new, never a mix",
          "[operability][migration]") {
  TempDir dir;
  const std::string tmpl = dir.file("v1.db");
  {
    ControlStore store{tmpl};
    store.create_project("alpha", "A");
    for (int i = 0; i < 10; ++i) {
      store.enqueue_batch("alpha", std::vector<std::string>(1000, R"({"n": 1})"));
    }
  }
  // Back to what version 1 was (see the migration test above).
  sql(tmpl,
      std::string(test::kBackToVersion1) + "PRAGMA wal_checkpoint(TRUNCATE);");
  for (const int delay_ms : {0, 2, 10, 30, 80}) {
    INFO("SIGKILL after " << delay_ms << " ms");
    const std::string db = dir.file("m" + std::to_string(delay_ms) + ".db");
    fs::copy_file(tmpl, db);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(CPLANE_CLI_PATH, CPLANE_CLI_PATH, "--db", db.c_str(), "migrate", nullptr);
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{delay_ms});
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    const auto version = sql_column(db, "PRAGMA user_version").at(0);
    CHECK((version == "1" || version == std::to_string(storage::kSqliteSchemaVersion)));
    CHECK(sql_column(db, "PRAGMA quick_check").at(0) == "ok");
    const auto columns = sql_column(db, "SELECT count(*) FROM pragma_table_info('events') WHERE "
                                        "name IN ('stream_kind', 'stream_id')").at(0);
    CHECK(columns == (version == "1" ? "0" : "2"));
    REQUIRE_EXIT(cli(db, {"migrate"}), 0);
    CHECK_EXIT(cli(db, {"verify"}), 0);
    CHECK(count_rows(db, "items") == 10'000);
  }
}

TEST_CASE("a password in a store's URL is never shown: not by --verbose, an error or --json",
          "[operability][args]") {
  // The silence it prevents: `--verbose` wrote "opened postgresql://u:secret@...".
  struct Case {
    std::string url, shown;
  };
  const std::vector<Case> cases = {
      {"postgresql://u:secret@host/db", "postgresql://u:***@host/db"},
      {"postgres://u:secret@host:5432/db?sslmode=off", "postgres://u:***@host:5432/db?sslmode=off"},
      {"postgresql://host/db?password=secret&user=u", "postgresql://host/db?password=***&user=u"},
      {"postgresql://u@host/db?user=u&password=secret", "postgresql://u@host/db?user=u&password=***"},
      {"postgresql://u:a:b@host/db?password=x&password=y",
       "postgresql://u:***@host/db?password=***&password=***"},
      {"host=h password=secret user=u", "host=h password=*** user=u"},
      {"postgresql://u@host/db", "postgresql://u@host/db"},
      {"/var/lib/cplane/a:b@c.db", "/var/lib/cplane/a:b@c.db"},
      {"my_password=1.db", "my_password=1.db"},
      // libpq decodes keys and ignores their case: so does the mask.
      {"postgresql://h/db?pass%77ord=secret", "postgresql://h/db?pass%77ord=***"},
      {"postgresql://h/db?PassWord=secret#frag", "postgresql://h/db?PassWord=***#frag"},
      {"POSTGRESQL://u:secret@h/db", "POSTGRESQL://u:***@h/db"},
  };
  for (const auto& c : cases) CHECK(redacted_url(c.url) == c.shown);
  // A client library's own message may quote what it was given, decoded.
  CHECK(redacted_message(R"(invalid percent-encoded token: "s3cr%zz" and s3cr x)",
                         "postgresql://u:s3cr%zz@h/db?password=s%33cr") ==
        R"(invalid percent-encoded token: "***" and *** x)");

  const std::string bad = "postgresql://u:secret@127.0.0.1:1/db?password=hidden&connect_timeout=2";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--verbose", "--db", bad, "stats"},
           {"--db", "POSTGRESQL://u:secret@127.0.0.1:1/db?pass%77ord=hidden", "stats"},
           {"--db", "postgresql://u:secret%zz@127.0.0.1:1/db?password=hidden%zz", "stats"},
           {"--verbose", "--json", "--db", bad, "enqueue", "alpha", "{}"},
           {"--json", "--db", bad, "restore", "/nonexistent.cpx"}}) {
    const auto r = cplane::test::run_cli(args);
    INFO(r.err);
    CHECK(r.exit_code != 0);
    CHECK_FALSE(contains(r.err + r.out, "secret"));
    CHECK_FALSE(contains(r.err + r.out, "hidden"));
  }
}
