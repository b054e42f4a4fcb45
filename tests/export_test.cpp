// Export, offline audit and restore: the log leaves the database whole,
// is checked with no database, and comes back as a database verify calls
// clean. Damaged, cut, foreign and newer files are refused, never mistaken
// for a log.
#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cplane/cplane.hpp>

#include "events/export.capnp.h"
#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;
namespace fs = std::filesystem;

constexpr Micros T0 = 1'700'000'000'000'000;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Two projects, a grant, items in every status.
std::string seed(const TempDir& dir, const std::string& name = "c.db") {
  const std::string db = test_context().fresh_store(dir, name);
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0 + 1);
  store.grant("beta", "bob", T0 + 2);
  for (int i = 0; i < 6; ++i) store.enqueue(i % 2 ? "beta" : "alpha", fmt::format(R"({{"n": {}}})", i), {}, T0 + 10 + i);
  // The order before fairness (the available earliest of any project):
  // the checks below name the items that order leaves untouched.
  auto a = store.claim("w1", {.now = T0 + 100, .fair = false});
  auto b = store.claim("w2", {.now = T0 + 101, .fair = false});
  auto c = store.claim("w3", {.now = T0 + 102, .fair = false});
  store.finish(a->item_id, a->fence, Outcome::done, "ok", T0 + 200);
  store.finish(b->item_id, b->fence, Outcome::failed, "no", T0 + 201);
  store.release(c->item_id, c->fence, "back", {.now = T0 + 202});
  store.claim("w4", {.now = T0 + 300, .fair = false});
  return db;
}

std::string export_file(const std::string& db, const std::string& path, Seq since = 0) {
  ControlStore store{db, {.read_only = true}};
  std::FILE* out = std::fopen(path.c_str(), "wb");
  REQUIRE(out != nullptr);
  export_log(store, out, {.since = since});
  std::fclose(out);
  return path;
}

AuditReport audit_file(const std::string& path, ControlStore* against = nullptr) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  REQUIRE(in != nullptr);
  struct Close {
    std::FILE* f;
    ~Close() { std::fclose(f); }
  } close{in};
  return audit_export(in, against);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::vector<std::string> rows(const std::string& db) {
  return sql_column(db, "SELECT item_id || status || coalesce(owner, '') || fence || attempts || "
                        "payload || last_seq FROM items ORDER BY item_id");
}

std::vector<std::string> chain(const std::string& db) {
  return sql_column(db, "SELECT seq || ' ' || stream_rev || ' ' || hex(hash) FROM events ORDER BY seq");
}

// Audit refuses the file: StorageError of `category`, nothing reported as a log.
void refused(const std::string& path, StorageError::Category category) {
  try {
    audit_file(path);
    FAIL("audited " << path << " as a log");
  } catch (const StorageError& e) {
    INFO(e.what());
    CHECK(e.category() == category);
  }
}

}  // namespace

TEST_CASE("export, audit and restore round-trip a log: hashes, rows and all", "[export][sqlite]") {
  TempDir dir;
  const auto db = seed(dir);
  const auto file = export_file(db, dir.file("log.cpx"));
  const auto report = audit_file(file);
  INFO(report.problems.size() << " problems; first: "
                              << (report.problems.empty() ? "" : report.problems[0].detail));
  CHECK(report.problems.empty());
  CHECK(report.summary.events == 16);
  CHECK(report.summary.projects == 2);
  CHECK(report.summary.items_by_status == std::array<std::int64_t, 7>{3, 1, 1, 1, 0, 0, 0});
  CHECK(report.summary.first_seq == 1);
  CHECK(report.summary.last_seq == 16);
  CHECK(report.summary.first_at == T0);
  CHECK(report.summary.last_at == T0 + 300);
  CHECK(report.summary.chain_head.size() == 64);

  const auto restored = dir.file("restored.db");
  {
    ControlStore fresh{restored};
    std::FILE* in = std::fopen(file.c_str(), "rb");
    const auto r = restore_export(in, fresh);
    std::fclose(in);
    CHECK(r.events == 16);
    CHECK(r.items == 6);
    CHECK(verify_ledger(fresh).empty());
  }
  CHECK(rows(restored) == rows(db));
  CHECK(chain(restored) == chain(db));
  CHECK(sql_column(restored, "SELECT hex(digest) FROM log_digest") ==
        sql_column(db, "SELECT hex(digest) FROM log_digest"));
  // The restored store works on: the next seq follows the log's.
  ControlStore store{restored};
  store.enqueue("alpha", "{}", {}, T0 + 400);
  CHECK(sql_column(restored, "SELECT max(seq) FROM events") == std::vector<std::string>{"17"});
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("audit names what the exported log shows on its own, and --against compares rows",
          "[export]") {
  TempDir dir;
  const auto db = seed(dir);
  SECTION("an edited event") {
    sql(db, "UPDATE events SET body = body || x'00' WHERE seq = 5");
    const auto report = audit_file(export_file(db, dir.file("log.cpx")));
    REQUIRE_FALSE(report.problems.empty());
    CHECK(report.problems[0].kind == ProblemKind::event_edited);
    CHECK(contains(report.problems[0].detail, "seq 5"));
  }
  SECTION("a cut-off tail") {
    sql(db, "DELETE FROM events WHERE seq = 16");
    const auto report = audit_file(export_file(db, dir.file("log.cpx")));
    REQUIRE_FALSE(report.problems.empty());
    CHECK(report.problems[0].kind == ProblemKind::tail_missing);
  }
  SECTION("rows edited in the database: only --against sees them") {
    const auto file = export_file(db, dir.file("log.cpx"));
    sql(db, "UPDATE items SET attempts = attempts + 5");
    CHECK(audit_file(file).problems.empty());
    ControlStore against{db, {.read_only = true}};
    const auto report = audit_file(file, &against);
    REQUIRE(report.problems.size() == 6);
    for (const auto& p : report.problems) CHECK(p.kind == ProblemKind::attempts_disagrees);
    auto r = run_cli({"audit", file, "--against", db});
    CHECK_EXIT(r, 6);
    CHECK(contains(r.out, "attempts_disagrees"));
  }
}

TEST_CASE("a cut, damaged, foreign or newer export is refused, never read as a log",
          "[export][sqlite]") {
  TempDir dir;
  const auto db = seed(dir);
  const auto file = export_file(db, dir.file("log.cpx"));
  const std::string bytes = slurp(file);
  const auto broken = dir.file("broken.cpx");
  SECTION("cut anywhere") {
    for (std::size_t cut : {std::size_t{0}, std::size_t{7}, std::size_t{8}, bytes.size() / 3,
                            bytes.size() / 2, bytes.size() - 40, bytes.size() - 1}) {
      CAPTURE(cut);
      spit(broken, bytes.substr(0, cut));
      refused(broken, StorageError::Category::corruption);
    }
  }
  SECTION("a byte changed anywhere before the footer") {
    // The footer is the last record, under 96 bytes (72 with six stream kinds).
    const std::size_t footer = 96;
    for (std::size_t at = 0; at + footer < bytes.size(); at += 37) {
      CAPTURE(at);
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
      spit(broken, damaged);
      try {
        const auto report = audit_file(broken);
        CHECK_FALSE(report.problems.empty());  // read whole: the chain names the change
      } catch (const StorageError& e) {
        CHECK(e.category() != StorageError::Category::io);
      }
    }
  }
  SECTION("a database, an empty file, a text file") {
    refused(db, StorageError::Category::corruption);
    spit(broken, "");
    refused(broken, StorageError::Category::corruption);
    spit(broken, "hello, this is not an export\n");
    refused(broken, StorageError::Category::corruption);
  }
  SECTION("a newer format") {
    capnp::MallocMessageBuilder message;
    auto header = message.initRoot<wire::ExportRecord>().initHeader();
    header.setFormatVersion(99);
    header.setSchemaId(0xa77279471f4af3a6ULL);
    auto words = capnp::messageToFlatArray(message);
    spit(broken, std::string(words.asChars().begin(), words.asChars().size()));
    refused(broken, StorageError::Category::incompatible);
  }
  SECTION("two exports concatenated") {
    spit(broken, bytes + bytes);
    refused(broken, StorageError::Category::corruption);
  }
}

TEST_CASE("an incremental export carries its chain from where it starts", "[export]") {
  TempDir dir;
  const auto db = seed(dir);
  const auto file = export_file(db, dir.file("since.cpx"), 10);
  const auto report = audit_file(file);
  CHECK(report.problems.empty());
  CHECK(report.summary.since == 10);
  CHECK(report.summary.events == 6);
  CHECK(report.summary.first_seq == 11);
  // A restore needs the whole log.
  ControlStore fresh{dir.file("fresh.db")};
  std::FILE* in = std::fopen(file.c_str(), "rb");
  CHECK_THROWS_AS(restore_export(in, fresh), InvalidArgument);
  std::fclose(in);
}

TEST_CASE("cplane export, audit and restore: files, exit codes, nothing left on failure",
          "[export][cli][sqlite]") {
  TempDir dir;
  const auto db = seed(dir);
  const auto file = dir.file("log.cpx");
  auto r = run_cli({"--db", db, "export", file});
  CHECK_EXIT(r, 0);
  CHECK(contains(r.out, "exported 16 event(s)"));
  r = run_cli({"audit", file});
  CHECK_EXIT(r, 0);
  CHECK(contains(r.out, "ok: the log passes its own checks"));
  CHECK(contains(r.out, "2 project(s)"));

  SECTION("to standard output, and into restore from standard input") {
    const auto piped = dir.file("piped.cpx");
    r = run_cli({"--db", db, "export", "-"}, {.stdout_file = piped});
    CHECK_EXIT(r, 0);
    CHECK(slurp(piped).size() == slurp(file).size());
    r = run_cli({"--db", dir.file("new.db"), "restore", "-"}, {.input = slurp(piped)});
    CHECK_EXIT(r, 0);
    CHECK_EXIT(run_cli({"--db", dir.file("new.db"), "verify"}), 0);
  }
  SECTION("restore never writes over a database") {
    const auto before = rows(db);
    r = run_cli({"--db", db, "restore", file});
    CHECK_EXIT(r, 1);
    CHECK(contains(r.err, "is an SQLite database"));
    CHECK(rows(db) == before);
  }
  SECTION("a cut export restores nothing, and leaves nothing") {
    const auto cut = dir.file("cut.cpx");
    spit(cut, slurp(file).substr(0, slurp(file).size() / 2));
    r = run_cli({"--db", dir.file("new.db"), "restore", cut});
    CHECK_EXIT(r, 1);
    CHECK(contains(r.err, "truncated"));
    CHECK_FALSE(fs::exists(dir.file("new.db")));
    CHECK_EXIT(run_cli({"audit", cut}), 1);
  }
  SECTION("an export of a damaged log: audit exit 6, restore refused and leaves nothing") {
    sql(db, "DELETE FROM events WHERE seq = 7");
    const auto bad = dir.file("bad.cpx");
    CHECK_EXIT(run_cli({"--db", db, "export", bad}), 0);
    r = run_cli({"--json", "audit", bad});
    CHECK_EXIT(r, 6);
    CHECK(contains(r.out, R"("kind":"stream_missing")"));
    r = run_cli({"--db", dir.file("new.db"), "restore", bad});
    CHECK_EXIT(r, 6);
    CHECK_FALSE(fs::exists(dir.file("new.db")));
    // With --json the refusal is the error object, not a sentence.
    r = run_cli({"--json", "--db", dir.file("new.db"), "restore", bad});
    CHECK_EXIT(r, 6);
    CHECK(contains(r.err, R"({"error":{"kind":"restore_refused","reason":"log_fails_checks")"));
    CHECK_FALSE(fs::exists(dir.file("new.db")));
  }
  SECTION("an export that cannot be written is an error, and leaves no file") {
    r = run_cli({"--db", db, "export", "-"}, {.stdout_file = "/dev/full"});
    CHECK_EXIT(r, 1);
    r = run_cli({"--db", db, "export", dir.file("no/such/folder/x.cpx")});
    CHECK_EXIT(r, 1);
  }
  SECTION("a missing database is never created by export") {
    r = run_cli({"--db", dir.file("missing.db"), "export", dir.file("x.cpx")});
    CHECK_EXIT(r, 1);
    CHECK_FALSE(fs::exists(dir.file("missing.db")));
    CHECK_FALSE(fs::exists(dir.file("x.cpx")));
  }
}

TEST_CASE("export writes through a pipe or a link and never replaces what is there",
          "[export][cli]") {
  TempDir dir;
  const auto db = seed(dir);
  SECTION("a symbolic link: its target is written, the link stays") {
    const auto target = dir.file("target.cpx");
    fs::create_symlink(target, dir.file("link.cpx"));
    CHECK_EXIT(run_cli({"--db", db, "export", dir.file("link.cpx")}), 0);
    CHECK(fs::is_symlink(dir.file("link.cpx")));
    CHECK(audit_file(target).problems.empty());
  }
  SECTION("a pipe: written in place, read whole at the other end") {
    const auto fifo = dir.file("pipe");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::string read;
    std::thread reader([&] { read = slurp(fifo); });
    auto r = run_cli({"--db", db, "export", fifo});
    reader.join();
    CHECK_EXIT(r, 0);
    CHECK(fs::is_fifo(fifo));
    spit(dir.file("copy.cpx"), read);
    CHECK(audit_file(dir.file("copy.cpx")).problems.empty());
  }
  SECTION("a directory is refused") {
    fs::create_directory(dir.file("folder"));
    CHECK_EXIT(run_cli({"--db", db, "export", dir.file("folder")}), 1);
    CHECK(fs::is_directory(dir.file("folder")));
  }
}

TEST_CASE("a log whose seqs have gaps (PostgreSQL's) restores into SQLite and into a server, and "
          "verifies clean",
          "[export][restore]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "c.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
    const auto id = store.enqueue("alpha", R"({"n":1})");
    if (test_context().backend_name() == "postgres") {
      sql(db, "SELECT nextval('events_seq')");  // what a rolled-back transaction leaves
    }
    const auto claimed = store.claim("w");
    REQUIRE(claimed);
    store.finish(claimed->item_id, claimed->fence, Outcome::done);
    store.enqueue("alpha", R"({"n":2})");
    (void)id;
  }
  const std::string file = dir.file("log.cpx");
  const auto exported = run_cli({"--db", db, "export", file});
  REQUIRE(exported.exit_code == 0);
  // Into a new SQLite file: the gap is not read as a deletion there either.
  const std::string copy = dir.file("copy.db");
  const auto restored = run_cli({"--db", copy, "restore", file});
  INFO(restored.out << restored.err);
  CHECK(restored.exit_code == 0);
  CHECK(run_cli({"--db", copy, "verify"}).exit_code == 0);
  // Into a fresh store of the backend under test (a server's schema, or a file).
  const std::string again = test_context().fresh_store(dir, "again.db");
  const auto into = run_cli({"--db", again, "restore", file});
  INFO(into.out << into.err);
  CHECK(into.exit_code == 0);
  CHECK(run_cli({"--db", again, "verify"}).exit_code == 0);
  CHECK(sql_column(again, "SELECT count(*) FROM items") == std::vector<std::string>{"2"});
}

TEST_CASE("export never writes over the database it reads, a side file of it, or any SQLite "
          "database: exit 2, nothing touched",
          "[export][cli][sqlite]") {
  // The silence it prevents: `cplane export e.db` with CPLANE_DB=e.db wrote
  // the export over the live database and exited 0.
  TempDir dir;
  const auto db = seed(dir, "e.db");
  const auto other = seed(dir, "other.db");
  { ControlStore{db}.enqueue("alpha", "{}"); }  // the WAL and the area exist
  std::string wal_header("\x37\x7f\x06\x82", 4);
  wal_header += std::string(28, '\0');
  spit(dir.file("stray-wal-copy"), wal_header + std::string(4096, 'p'));
  fs::create_symlink(db, dir.file("link.cpx"));
  fs::create_hard_link(db, dir.file("hard.cpx"));
  fs::create_symlink(db + "-wal", dir.file("wal-link.cpx"));
  struct Case {
    const char* name;
    std::string target;
    std::vector<std::string> env;
  };
  const std::vector<Case> cases = {
      {"the database, named by $CPLANE_DB", db, {"CPLANE_DB=" + db}},
      {"the database, by --db", db, {}},
      {"a symbolic link to it", dir.file("link.cpx"), {}},
      {"a hard link to it", dir.file("hard.cpx"), {}},
      {"its WAL", db + "-wal", {}},
      {"a link to its WAL", dir.file("wal-link.cpx"), {}},
      {"its wal-index", db + "-shm", {}},
      {"its writer lock", db + "-lock", {}},
      {"its group-commit area", db + "-combine", {}},
      {"another cplane database", other, {}},
      {"another database's side file", other + "-lock", {}},
      {"a WAL under another name", dir.file("stray-wal-copy"), {}},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    std::vector<std::string> args = {"--json", "export", c.target};
    if (c.env.empty()) args.insert(args.begin(), {"--db", db});
    const std::string before = fs::exists(c.target) ? slurp(c.target) : "";
    const auto r = run_cli(args, c.env);
    CHECK_EXIT(r, 2);
    CHECK(contains(r.err, "\"kind\":\"invalid_argument\""));
    CHECK(contains(r.err, "never written over a database"));
    CHECK((fs::exists(c.target) ? slurp(c.target) : "") == before);
    for (const auto& e : fs::directory_iterator(dir.path())) {
      CHECK_FALSE(contains(e.path().filename().string(), ".partial-"));
    }
  }
  // Standard output that is the database (`1<>`, `>>`: no truncation by
  // the shell) is refused as the file would be.
  for (const char* redirect : {"1<>", ">>"}) {
    INFO(redirect);
    const std::string before = slurp(db);
    const std::string command = fmt::format("'{}' --db '{}' export - {}'{}' 2>/dev/null",
                                            CPLANE_CLI_PATH, db, redirect, db);
    const int status = std::system(command.c_str());
    CHECK(WEXITSTATUS(status) == 2);
    CHECK(slurp(db) == before);
  }
  // A database named through a symbolic link: its side files are beside
  // the file the link leads to, and are refused there too.
  fs::create_symlink(db, dir.file("sym.db"));
  fs::create_hard_link(db + "-shm", dir.file("shm-link.cpx"));
  CHECK_EXIT(run_cli({"--db", dir.file("sym.db"), "export", dir.file("shm-link.cpx")}), 2);
  ControlStore check{db, {.read_only = true}};
  CHECK(verify_ledger(check).empty());
  CHECK(check.status_counts().ready == 4);
  // An earlier export is written over, as before.
  CHECK_EXIT(run_cli({"--db", db, "export", dir.file("x.cpx")}), 0);
  CHECK_EXIT(run_cli({"--db", db, "export", dir.file("x.cpx")}), 0);
  CHECK(audit_file(dir.file("x.cpx")).problems.empty());
}

TEST_CASE("restore and recover leave nothing beside NEW but the database, whether they succeed "
          "or fail, and never build over a database's group-commit area",
          "[export][recover][cli][sqlite]") {
  // The silence it prevents: NEW.partial-PID-combine (4 MiB) left behind.
  TempDir dir;
  const auto db = seed(dir);
  const auto exported = export_file(db, dir.file("x.cpx"));
  fs::create_directory(dir.file("out"));
  auto listing = [&] {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.file("out"))) {
      names.insert(e.path().filename().string());
    }
    return names;
  };
  CHECK_EXIT(run_cli({"--db", dir.file("out/r.db"), "restore", exported}), 0);
  CHECK(listing() == std::set<std::string>{"r.db"});
  CHECK_EXIT(run_cli({"--db", db, "recover", "--to", dir.file("out/v.db")}), 0);
  CHECK(listing() == std::set<std::string>{"r.db", "v.db"});
  // Refused midway: an export cut short fails its own checks.
  const std::string whole = slurp(exported);
  spit(dir.file("cut.cpx"), whole.substr(0, whole.size() / 2));
  CHECK(run_cli({"--db", dir.file("out/f.db"), "restore", dir.file("cut.cpx")}).exit_code != 0);
  CHECK(listing() == std::set<std::string>{"r.db", "v.db"});
  // A database's area is not a place to build one.
  { ControlStore{db}.enqueue("alpha", "{}"); }
  REQUIRE(fs::exists(db + "-combine"));
  const std::string area = slurp(db + "-combine");
  auto r = run_cli({"--db", db + "-combine", "restore", exported});
  CHECK_EXIT(r, 1);
  CHECK(contains(r.err, "side file"));
  r = run_cli({"--db", db, "recover", "--to", db + "-combine"});
  CHECK_EXIT(r, 1);
  CHECK(slurp(db + "-combine").size() == area.size());
}

TEST_CASE("restore and --verbose name the store they wrote without its password",
          "[export][restore][cli]") {
  TempDir dir;
  const auto db = seed(dir);
  const auto exported = export_file(db, dir.file("x.cpx"));
  // A server takes a password it does not ask for (trust authentication);
  // a file path has none to hide and is shown as given.
  std::string target = test_context().fresh_store(dir, "new.db");
  const bool server = test_context().backend_name() == "postgres";
  if (server) target += "&password=hidden";
  const auto r = run_cli({"--verbose", "--json", "--db", target, "restore", exported});
  CHECK_EXIT(r, 0);
  CHECK_FALSE(contains(r.out + r.err, "hidden"));
  CHECK(contains(r.out, server ? "password=***" : target));
  CHECK(contains(r.err, server ? "password=***" : target));
}
