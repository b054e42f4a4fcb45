// Recovery drills: garbage written into pages of a copy of a real database
// (the event table, the item rows, an index, the stream heads), then
// `cplane recover`. What is readable comes back, what is lost is named, no
// fence goes back, and the damaged file is never written.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cplane/cplane.hpp>

#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::run_cli;
using cplane::test::sql_column;
using cplane::test::TempDir;
namespace fs = std::filesystem;

constexpr Micros T0 = 1'700'000'000'000'000;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// 1,500 items, the last 300 claimed (their claims are the newest events).
std::string seed(const TempDir& dir) {
  const std::string db = dir.file("good.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.enqueue_batch("alpha", std::vector<std::string>(1500, R"({"pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})"),
                        {}, T0 + 1);
    for (int i = 0; i < 300; ++i) store.claim(fmt::format("w{}", i), {.now = T0 + 10 + i});
  }
  // One file, no WAL: the pages are where dbstat says.
  test::sql(db, "PRAGMA wal_checkpoint(TRUNCATE)");
  return db;
}

// The page size `db` was made with (SqliteOptions::page_size).
long page_size(const std::string& db) { return std::stol(sql_column(db, "PRAGMA page_size").at(0)); }

// Overwrites page `page` (1-based) of `path` with random bytes.
void garble(const std::string& path, long page) {
  const long size = page_size(path);
  std::mt19937 random(static_cast<unsigned>(page));
  std::string junk(static_cast<std::size_t>(size), '\0');
  for (auto& c : junk) c = static_cast<char>(random());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp((page - 1) * size);
  f.write(junk.data(), size);
}

// A leaf page of `table` (its n-th, or its last).
long leaf_of(const std::string& db, const std::string& table, bool last = false) {
  const auto pages = sql_column(db, "SELECT pageno FROM dbstat WHERE name = '" + table +
                                        "' AND pagetype = 'leaf' ORDER BY pageno");
  REQUIRE(pages.size() > 4);
  return std::stol(last ? pages.back() : pages[2]);
}

std::map<std::string, std::string> fences(const std::string& db) {
  std::map<std::string, std::string> out;
  for (const auto& row : sql_column(db, "SELECT item_id || ' ' || fence FROM items")) {
    out[row.substr(0, row.find(' '))] = row.substr(row.find(' ') + 1);
  }
  return out;
}

}  // namespace

TEST_CASE("recover salvages a database with damaged pages and names what was lost",
          "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto damaged = dir.file("damaged.db");
  const auto fresh = dir.file("new.db");
  fs::copy_file(good, damaged);
  std::string table;
  bool loses_events = false;
  SECTION("garbage in the item rows") { table = "items"; }
  SECTION("garbage in an index of the log") { table = "events_by_stream"; }
  SECTION("garbage in the event table") {
    table = "events";
    loses_events = true;
  }
  SECTION("garbage in the stream heads") { table = "stream_heads"; }
  CAPTURE(table);
  garble(damaged, leaf_of(good, table));
  const std::string before = slurp(damaged);

  // verify on the damaged file: a clear error that names recover, no crash.
  if (table != "stream_heads") {
    auto v = run_cli({"--db", damaged, "verify"});
    CHECK_EXIT(v, 1);
    CHECK(contains(v.err, "corruption"));
    CHECK(contains(v.err, "cplane recover"));
  }

  auto r = run_cli({"--db", damaged, "--json", "recover", "--to", fresh});
  INFO(r.out << r.err);
  CHECK(slurp(damaged) == before);  // never written
  REQUIRE(fs::exists(fresh));
  if (table == "items" || table == "events_by_stream") {
    CHECK_EXIT(r, 0);
    CHECK(contains(r.out, R"("unreadable":[])"));
    CHECK(contains(r.out, R"("problems":[])"));
    CHECK_EXIT(run_cli({"--db", fresh, "verify"}), 0);
    // Every row is what the log says, as in the undamaged database.
    CHECK(sql_column(fresh, "SELECT item_id || status || fence FROM items ORDER BY item_id") ==
          sql_column(good, "SELECT item_id || status || fence FROM items ORDER BY item_id"));
  }
  if (loses_events) {
    CHECK_EXIT(r, 6);
    CHECK_FALSE(contains(r.out, R"("unreadable":[])"));
    CHECK(contains(r.out, "event_missing"));  // the histories that lost events are named
    // The lost items' rows are kept: the last copy of each is not destroyed.
    CHECK(sql_column(fresh, "SELECT count(*) FROM items") == std::vector<std::string>{"1500"});
  }
  if (table == "stream_heads") {
    CHECK_EXIT(r, 6);
    CHECK(contains(r.out, R"("heads_readable":false)"));
    CHECK_EXIT(run_cli({"--db", fresh, "verify"}), 0);
  }
  // No fence goes back: a worker's fence is never handed out again.
  const auto old_fences = fences(good);
  for (const auto& [id, fence] : fences(fresh)) {
    if (old_fences.contains(id)) CHECK(std::stol(fence) >= std::stol(old_fences.at(id)));
  }
  // The new database works.
  CHECK_EXIT(run_cli({"--db", fresh, "claim", "--owner", "after"}), 0);
}

TEST_CASE("recover keeps the fences of claims whose events were on a lost page", "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto damaged = dir.file("damaged.db");
  const auto fresh = dir.file("new.db");
  fs::copy_file(good, damaged);
  garble(damaged, leaf_of(good, "events", /*last=*/true));  // the newest claims
  auto r = run_cli({"--db", damaged, "recover", "--to", fresh});
  CHECK_EXIT(r, 6);
  CHECK(contains(r.out, "lost, on pages that could not be read"));
  const auto old_fences = fences(good);
  int held = 0;
  for (const auto& [id, fence] : fences(fresh)) {
    CHECK(fence == old_fences.at(id));
    if (fence == "1") ++held;
  }
  CHECK(held == 300);
}

TEST_CASE("recover refuses what it cannot work on, and creates nothing", "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto fresh = dir.file("new.db");
  SECTION("a file that is not a database") {
    std::ofstream(dir.file("text.db")) << "not a database at all\n";
    CHECK_EXIT(run_cli({"--db", dir.file("text.db"), "recover", "--to", fresh}), 1);
  }
  SECTION("an empty file") {
    std::ofstream(dir.file("empty.db")).flush();
    CHECK_EXIT(run_cli({"--db", dir.file("empty.db"), "recover", "--to", fresh}), 1);
  }
  SECTION("a missing file") {
    CHECK_EXIT(run_cli({"--db", dir.file("missing.db"), "recover", "--to", fresh}), 1);
    CHECK_FALSE(fs::exists(dir.file("missing.db")));
  }
  SECTION("its first page destroyed") {
    const auto damaged = dir.file("damaged.db");
    fs::copy_file(good, damaged);
    garble(damaged, 1);
    CHECK_EXIT(run_cli({"--db", damaged, "recover", "--to", fresh}), 1);
  }
  SECTION("a target that exists, or is the damaged file itself") {
    CHECK_EXIT(run_cli({"--db", good, "recover", "--to", good}), 1);
    const auto other = dir.file("other.db");
    fs::copy_file(good, other);
    const std::string before = slurp(other);
    CHECK_EXIT(run_cli({"--db", good, "recover", "--to", other}), 1);
    CHECK(slurp(other) == before);
    return;
  }
  CHECK_FALSE(fs::exists(fresh));
  CHECK_FALSE(fs::exists(fresh + "-wal"));
}

TEST_CASE("recover of a sound database loses nothing", "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto fresh = dir.file("new.db");
  auto r = run_cli({"--db", good, "recover", "--to", fresh});
  CHECK_EXIT(r, 0);
  CHECK(contains(r.out, "ok: nothing was lost"));
  CHECK(sql_column(fresh, "SELECT hex(digest) FROM log_digest") ==
        sql_column(good, "SELECT hex(digest) FROM log_digest"));
  CHECK_EXIT(run_cli({"--db", fresh, "verify"}), 0);
}

TEST_CASE("recover rebuilds a stream head that was deleted, and the stream takes writes again",
          "[recover]") {
  // A writer refuses a stream whose head row is gone while its events are
  // there; recover puts back its head from the stream's last event.
  TempDir dir;
  const auto good = seed(dir);
  const auto item = sql_column(good, "SELECT item_id FROM items WHERE status = 'claimed' "
                                     "ORDER BY item_id LIMIT 1").at(0);
  test::sql(good, "DELETE FROM stream_heads WHERE stream_id = '" + item + "'");
  {
    ControlStore store{good};
    CHECK_THROWS_AS(store.release(item, 1, "", {.now = T0 + 20'000'000}), StorageError);
  }
  const auto fresh = dir.file("new.db");
  // Not "nothing was lost": a tail deleted with the head would not show.
  auto r = run_cli({"--db", good, "recover", "--to", fresh});
  CHECK_EXIT(r, 6);
  CHECK(contains(r.out, "each put back from its stream's last event"));
  CHECK_EXIT(run_cli({"--db", fresh, "verify"}), 0);
  CHECK(sql_column(fresh, "SELECT revision FROM stream_heads WHERE stream_id = '" + item + "'") ==
        std::vector<std::string>{"2"});
  ControlStore store{fresh};
  store.release(item, 1, "", {.now = T0 + 20'000'000});
  CHECK(store.item(item).status == ItemStatus::ready);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("recover bounds the fences of histories that lost events when the rows are gone too",
          "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto damaged = dir.file("damaged.db");
  const auto fresh = dir.file("new.db");
  fs::copy_file(good, damaged);
  // The newest claims and the item rows' root: the fold alone would put the
  // claimed items back at fence 0, and hand fence 1 out again. With a heads
  // page lost too, the heads that were read must still bound the fences.
  const bool heads_too = GENERATE(false, true);
  CAPTURE(heads_too);
  if (heads_too) garble(damaged, leaf_of(good, "stream_heads", /*last=*/true));
  garble(damaged, leaf_of(good, "events", /*last=*/true));
  garble(damaged, std::stol(sql_column(good, "SELECT rootpage FROM sqlite_master WHERE name = "
                                             "'items'").at(0)));
  auto r = run_cli({"--db", damaged, "recover", "--to", fresh});
  CHECK_EXIT(r, 6);
  const auto old_fences = fences(good);
  const auto new_fences = fences(fresh);
  int lost_claims = 0;
  for (const auto& [id, fence] : old_fences) {
    if (!new_fences.contains(id)) continue;
    CHECK(std::stol(new_fences.at(id)) >= std::stol(fence));
    if (fence == "1") ++lost_claims;
  }
  CHECK(lost_claims > 0);
  // A claim on the new database goes above every fence the old one handed out.
  for (int i = 0; i < 400; ++i) {
    auto c = run_cli({"--db", fresh, "--json", "--now", std::to_string(T0 + 10'000'000'000), "claim",
                      "--owner", "later"});
    if (c.exit_code != 0) break;
    const auto at = c.out.find("\"item_id\":\"") + 11;
    const std::string id = c.out.substr(at, c.out.find('"', at) - at);
    const auto f = c.out.find("\"fence\":") + 8;
    CHECK(std::stol(c.out.substr(f)) > std::stol(old_fences.at(id)));
  }
}

TEST_CASE("recover reads past a page whose garbage ends a scan without an error", "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto damaged = dir.file("damaged.db");
  const auto fresh = dir.file("new.db");
  fs::copy_file(good, damaged);
  {
    // Not zeros: bytes that leave the page looking like a page.
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp((leaf_of(good, "events") + 3 - 1) * page_size(good) + 100);
    const std::string junk(1000, '\xde');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto r = run_cli({"--db", damaged, "--json", "recover", "--to", fresh});
  INFO(r.out);
  const auto events = std::stol(sql_column(fresh, "SELECT count(*) FROM events").at(0));
  const auto total = std::stol(sql_column(good, "SELECT count(*) FROM events").at(0));
  CHECK(events >= total - 60);  // one page's worth at most
  if (events < total) {
    CHECK_EXIT(r, 6);
  }
}

TEST_CASE("a restore or recover killed at any moment leaves no database that looks sound",
          "[recover][export]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto file = dir.file("log.cpx");
  REQUIRE_EXIT(run_cli({"--db", good, "export", file}), 0);
  for (const int delay_ms : {0, 20, 60, 150}) {
    for (const std::string command : {"restore", "recover"}) {
      CAPTURE(delay_ms, command);
      const auto target = dir.file(command + std::to_string(delay_ms) + ".db");
      const std::vector<std::string> args =
          command == "restore"
              ? std::vector<std::string>{CPLANE_CLI_PATH, "--db", target, "restore", file}
              : std::vector<std::string>{CPLANE_CLI_PATH, "--db", good, "recover", "--to", target};
      const pid_t pid = ::fork();
      REQUIRE(pid >= 0);
      if (pid == 0) {
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        const int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, 1);
        ::dup2(devnull, 2);
        ::execv(argv[0], argv.data());
        ::_exit(127);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
      // Either nothing at the target, or the whole database.
      if (fs::exists(target)) {
        CHECK_EXIT(run_cli({"--db", target, "verify"}), 0);
        CHECK(sql_column(target, "SELECT count(*) FROM items") == std::vector<std::string>{"1500"});
      }
    }
  }
}

TEST_CASE("recover is not sent on by a digest that claims a far newer seq", "[recover]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto damaged = dir.file("damaged.db");
  const auto fresh = dir.file("new.db");
  fs::copy_file(good, damaged);
  test::sql(damaged, "UPDATE log_digest SET last_seq = 1000000000");
  const auto start = std::chrono::steady_clock::now();
  auto r = run_cli({"--db", damaged, "--json", "recover", "--to", fresh});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds{60});
  CHECK_EXIT(r, 6);
  CHECK(contains(r.out, R"("absent":[[1802,1000000000]])"));
  CHECK(sql_column(fresh, "SELECT count(*) FROM events") == std::vector<std::string>{"1801"});
}

TEST_CASE("recover and restore refuse a target with an earlier database's WAL beside it, or a "
          "side file, and a WAL they cannot copy",
          "[recover][export]") {
  TempDir dir;
  const auto good = seed(dir);
  const auto fresh = dir.file("new.db");
  std::ofstream(fresh + "-wal") << std::string(4096, 'w');
  auto r = run_cli({"--db", good, "recover", "--to", fresh});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "-wal exists"));
  CHECK_FALSE(fs::exists(fresh));
  r = run_cli({"--db", good, "recover", "--to", good + "-shm"});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "side file"));
  // DAMAGED's WAL is not a file that can be copied: it may hold committed
  // events, so nothing is recovered without it.
  const auto other = dir.file("other.db");
  fs::copy_file(good, other);
  fs::create_directory(other + "-wal");
  r = run_cli({"--db", other, "recover", "--to", dir.file("n2.db")});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "-wal"));
  CHECK_FALSE(fs::exists(dir.file("n2.db")));
}
