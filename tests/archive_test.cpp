// Retention (docs/retention.md): ended streams move into a checked segment,
// anchors stay, verify and audit still prove everything; bad input and a
// crash at any step leave the live store as it was.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "events/chain.hpp"
#include "storage/backend_wrapper.hpp"
#include "storage/log_source.hpp"
#include "storage/open.hpp"
#include "tests/archive_support.hpp"
#include "tests/support.hpp"

using namespace cplane::test::archive_fixture;

TEST_CASE("an archive moves the ended streams into a segment, leaves anchors, and verify stays "
          "clean",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const auto events_before = std::stoll(count(db, "events"));
  const std::string seg = dir.file("s1.seg");
  const auto report = archive_to(db, seg);
  CHECK(report.streams == 4);  // three of alpha, one of beta
  CHECK(report.events > 0);
  CHECK(fs::exists(seg));
  CHECK_FALSE(fs::exists(seg + ".tmp"));
  CHECK(report.bytes == static_cast<std::int64_t>(fs::file_size(seg)));
  CHECK(count(db, "anchors") == "4");
  CHECK(count(db, "items") == "3");  // alpha: one done after the cut, one claimed, one ready
  // Its events went; the archive's own (segment_archived) came.
  CHECK(std::stoll(count(db, "events")) == events_before - report.events + 1);
  CHECK(sql_column(db, "SELECT DISTINCT state FROM anchors ORDER BY state") ==
        std::vector<std::string>{"cancelled", "done", "failed"});
  CHECK(verify_db(db).empty());
  // The segment is an export: audit reads it on its own, and against the store.
  const auto alone = audit_path(seg);
  CHECK(alone.problems.empty());
  CHECK(alone.summary.segment_id == report.segment_id);
  CHECK(alone.summary.events == report.events);
  ControlStore store{db};
  CHECK(audit_path(seg, &store).problems.empty());
  const auto check = verify_segment(store, seg);
  CHECK(check.problems.empty());
  CHECK(check.streams == 4);
  // The rest keeps working: a claim, a finish, and verify again.
  auto c = store.claim("w", {.now = kNow, .fair = false});
  REQUIRE(c);
  store.finish(c->item_id, c->fence, Outcome::done, "", kNow + 1);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("an archived item's key keeps deduplicating: enqueue answers the archived item",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string archived = sql_column(db, "SELECT item_id FROM items WHERE idem_key = 'k1'").at(0);
  archive_to(db, dir.file("s.seg"));
  REQUIRE(sql_column(db, "SELECT count(*) FROM items WHERE idem_key = 'k1'").at(0) == "0");
  ControlStore store{db};
  ControlStore::EnqueueOptions keyed;
  keyed.key = "k1";
  const auto events = std::stoll(count(db, "events"));
  CHECK(store.enqueue("beta", "{}", keyed) == archived);
  CHECK(std::stoll(count(db, "events")) == events);  // nothing appended
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("an archive with --project takes that project's ended streams only", "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const auto report = archive_to(db, dir.file("b.seg"), kCut, "beta");
  CHECK(report.streams == 1);
  CHECK(sql_column(db, "SELECT DISTINCT project_id FROM anchors") == std::vector<std::string>{"beta"});
  CHECK(verify_db(db).empty());
  // A second archive of what is left, to another file: both segments check.
  const auto second = archive_to(db, dir.file("a.seg"));
  CHECK(second.streams == 3);
  CHECK(count(db, "segments") == "2");
  CHECK(verify_db(db).empty());
  ControlStore store{db};
  CHECK(verify_segment(store, dir.file("b.seg")).problems.empty());
  CHECK(verify_segment(store, dir.file("a.seg")).problems.empty());
}

TEST_CASE("a dry run counts what would be archived and changes nothing", "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const auto before = snapshot(db);
  ControlStore store{db};
  const auto report =
      archive(store, {.before = kCut, .file = dir.file("x.seg"), .dry_run = true, .now = kNow});
  CHECK(report.dry_run);
  CHECK(report.streams == 4);
  CHECK_FALSE(fs::exists(dir.file("x.seg")));
  CHECK(snapshot(db) == before);
}

TEST_CASE("bad input is refused with a clear error and nothing removed from the live store",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  fs::create_directory(dir.file("ro"));
  ::chmod(dir.file("ro").c_str(), 0555);
  { std::ofstream(dir.file("taken.seg")) << "x"; }
  struct Case {
    const char* name;
    Micros before;
    std::string file;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"a time in the future", kNow + 1, dir.file("f.seg"), "in the future"},
      {"a time before anything ended", T0, dir.file("n.seg"), "nothing to archive"},
      {"a FILE that exists", kCut, dir.file("taken.seg"), "exists"},
      {"a folder that does not exist", kCut, dir.file("none/x.seg"), "does not exist"},
  };
  const auto before = snapshot(db);
  for (const auto& c : cases) {
    INFO(c.name);
    ControlStore store{db};
    try {
      archive(store, {.before = c.before, .file = c.file, .now = kNow});
      FAIL("no refusal");
    } catch (const InvalidArgument& e) {
      CHECK(contains(e.what(), c.message));
    }
    CHECK(snapshot(db) == before);
    CHECK_FALSE(fs::exists(c.file + ".tmp"));
  }
  {  // refused by its mode, even for root (who may write anywhere)
    ControlStore store{db};
    CHECK_THROWS_AS(archive(store, {.before = kCut, .file = dir.file("ro/x.seg"), .now = kNow}),
                    InvalidArgument);
    CHECK(snapshot(db) == before);
    CHECK(fs::is_empty(dir.file("ro")));
  }
  ControlStore store{db};
  CHECK_THROWS_AS(
      archive(store, {.before = kCut, .project = "nope", .file = dir.file("p.seg"), .now = kNow}),
      NotFound);
  CHECK(snapshot(db) == before);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("the CLI: archive, --dry-run, --verify-only, audit --against, and refusals exit 2 "
          "with nothing changed",
          "[archive][cli]") {
  TempDir dir;
  const std::string db = seed(dir);
  const auto before = snapshot(db);
  const std::string cut = std::to_string(kCut);
  // Refusals: the future (an ISO time too), a FILE that exists, no --to.
  { std::ofstream(dir.file("taken.seg")) << "x"; }
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"archive", "--db", db, "--before", "2999-01-01T00:00:00Z", "--to", dir.file("f.seg")},
           {"archive", "--db", db, "--before", cut, "--to", dir.file("taken.seg")},
           {"archive", "--db", db, "--before", "1", "--to", dir.file("n.seg")},
           {"archive", "--db", db, "--before", "yesterday", "--to", dir.file("y.seg")},
           {"archive", "--db", db, "--before", cut}}) {
    const auto r = run_cli(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK(snapshot(db) == before);
  }
  CHECK_FALSE(fs::exists(dir.file("f.seg")));
  // A day that no month has, and a dry run to a FILE that exists: refused
  // as the archive itself would be.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"archive", "--db", db, "--before", "2023-02-31", "--dry-run"},
           {"archive", "--db", db, "--before", "2023-11-31T00:00:00Z", "--dry-run"},
           {"archive", "--db", db, "--before", cut, "--to", dir.file("taken.seg"), "--dry-run"}}) {
    const auto r = run_cli(args);
    INFO(r.out << r.err);
    CHECK(r.exit_code == 2);
  }
  const auto dry = run_cli({"archive", "--db", db, "--before", cut, "--to", dir.file("s.seg"), "--dry-run"});
  CHECK(dry.exit_code == 0);
  CHECK(contains(dry.out, "would archive 4 stream(s)"));
  // The same TIME in ISO-8601, in UTC and with an offset.
  for (const char* iso : {"2023-11-14T22:13:21Z", "2023-11-14T23:13:21+01:00"}) {
    const auto r = run_cli({"archive", "--db", db, "--before", iso, "--dry-run"});
    INFO(iso << ": " << r.out << r.err);
    CHECK(contains(r.out, "would archive 4 stream(s)"));
  }
  CHECK(snapshot(db) == before);
  const auto done = run_cli({"archive", "--db", db, "--before", cut, "--to", dir.file("s.seg"), "--json"});
  INFO(done.err);
  CHECK(done.exit_code == 0);
  CHECK(contains(done.out, "\"streams\":4"));
  CHECK(run_cli({"verify", "--db", db}).exit_code == 0);
  const auto ok = run_cli({"archive", "--db", db, "--verify-only", dir.file("s.seg")});
  CHECK(ok.exit_code == 0);
  CHECK(contains(ok.out, "ok:"));
  const auto audit = run_cli({"audit", dir.file("s.seg"), "--against", db});
  CHECK(audit.exit_code == 0);
  CHECK(contains(audit.out, "archive segment"));
  // Archiving again to the same FILE: refused, nothing changed.
  const auto after = snapshot(db);
  CHECK(run_cli({"archive", "--db", db, "--before", cut, "--to", dir.file("s.seg")}).exit_code == 2);
  CHECK(snapshot(db) == after);
  // A segment edited by one byte: --verify-only says so (exit 6).
  flip_byte(dir.file("s.seg"), 100);
  CHECK(run_cli({"archive", "--db", db, "--verify-only", dir.file("s.seg")}).exit_code == 6);
  const auto stats = run_cli({"stats", "--db", db});
  CHECK(contains(stats.out, "archived"));
}

namespace {

// Dies (SIGKILL) or throws at one step of an archive: the n-th call of
// stream_events (pass one reads each stream once, the segment's writing
// once more), the n-th archive_stream (after the rename, inside the swap),
// or the commit (before or after the real one).
class ArchiveFault : public storage::BackendWrapper {
 public:
  enum class Step { stream_events, put_item, archive_stream, before_commit, after_commit };
  ArchiveFault(std::unique_ptr<storage::Backend> inner, Step step, int nth, bool kill)
      : BackendWrapper(std::move(inner)), step_(step), nth_(nth), kill_(kill) {}
  std::vector<storage::RawEvent> stream_events(const StreamRef& stream) override {
    if (step_ == Step::stream_events && ++calls_ == nth_) fault();
    return BackendWrapper::stream_events(stream);
  }
  // (Only --forget-keys writes an item row: its key released, before the
  // segment is written.)
  void put_item(const ItemRow& row) override {
    if (step_ == Step::put_item && ++calls_ == nth_) fault();
    BackendWrapper::put_item(row);
  }
  void archive_stream(const storage::StreamAnchor& anchor) override {
    if (step_ == Step::archive_stream && ++calls_ == nth_) fault();
    BackendWrapper::archive_stream(anchor);
  }
  void commit() override {
    if (step_ == Step::before_commit) fault();
    BackendWrapper::commit();
    if (step_ == Step::after_commit) fault();
  }

 private:
  void fault() {
    if (kill_) ::raise(SIGKILL);
    throw StorageError(StorageError::Category::io, "injected archive fault");
  }
  Step step_;
  int nth_;
  bool kill_;
  int calls_ = 0;
};

}  // namespace

TEST_CASE("an archive killed (SIGKILL) or failing at any step leaves the old state or the new "
          "one, and verify is clean",
          "[archive][faults]") {
  using Step = ArchiveFault::Step;
  // Four streams: stream_events call 2 is in pass one, call 6 while the
  // segment is written.
  // forget: with --forget-keys (beta's key released, in the transaction).
  const auto [name, step, nth, committed, forget] = GENERATE(
      std::tuple{"reading the streams", Step::stream_events, 2, false, false},
      std::tuple{"writing FILE.tmp", Step::stream_events, 6, false, false},
      std::tuple{"after the rename, at the first anchor", Step::archive_stream, 1, false, false},
      std::tuple{"in the middle of the swap", Step::archive_stream, 3, false, false},
      std::tuple{"before the commit", Step::before_commit, 0, false, false},
      std::tuple{"after the commit", Step::after_commit, 0, true, false},
      std::tuple{"releasing a key", Step::put_item, 1, false, true},
      std::tuple{"keys released, before the commit", Step::before_commit, 0, false, true},
      std::tuple{"keys released, after the commit", Step::after_commit, 0, true, true});
  const bool kill = GENERATE(false, true);
  INFO(name << (kill ? " (SIGKILL)" : " (an exception)"));
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("s.seg");
  const auto before = snapshot(db);
  auto run = [&] {
    ControlStore store = testing::store_over(
        std::make_unique<ArchiveFault>(storage::open_store(db), step, nth, kill));
    archive(store, {.before = kCut, .file = seg, .now = kNow, .forget_keys = forget});
  };
  if (kill) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      try {
        run();
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status));
  } else if (committed) {
    CHECK_THROWS_AS(run(), StorageError);  // the commit went through; the caller hears of a fault
  } else {
    CHECK_THROWS_AS(run(), StorageError);
    // An exception cleans up: no FILE.tmp, and no FILE unless the commit
    // was asked for (a failed commit may have happened: FILE is kept).
    CHECK_FALSE(fs::exists(seg + ".tmp"));
    if (step != Step::before_commit) CHECK_FALSE(fs::exists(seg));
  }
  CHECK(verify_db(db).empty());
  if (committed) {
    CHECK(count(db, "anchors") == "4");
    CHECK(sql_column(db, "SELECT count(*) FROM anchors WHERE idem_key = 'k1'").at(0) ==
          (forget ? "0" : "1"));
    ControlStore store{db};
    if (fs::exists(seg)) CHECK(verify_segment(store, seg).problems.empty());
  } else {
    CHECK(snapshot(db) == before);
    // At most a stray FILE.tmp or a FILE no anchor names: --verify-only
    // says so, and the next archive (to that name) refuses until removed.
    ControlStore store{db};
    if (fs::exists(seg)) CHECK_FALSE(verify_segment(store, seg).problems.empty());
    if (fs::exists(seg) || fs::exists(seg + ".tmp")) {
      CHECK_THROWS_AS(archive(store, {.before = kCut, .file = seg, .now = kNow}), InvalidArgument);
      fs::remove(seg);
      fs::remove(seg + ".tmp");
    }
    CHECK(archive(store, {.before = kCut, .file = seg, .now = kNow}).streams == 4);
    CHECK(verify_ledger(store).empty());
  }
}

namespace {

// Another process acts at the n-th stream_events call (calls 1-4 are pass
// one, one per stream; 5 on are the writing of FILE.tmp).
class Meanwhile : public storage::BackendWrapper {
 public:
  Meanwhile(std::unique_ptr<storage::Backend> inner, int nth, std::function<void()> act)
      : BackendWrapper(std::move(inner)), nth_(nth), act_(std::move(act)) {}
  std::vector<storage::RawEvent> stream_events(const StreamRef& stream) override {
    if (++calls_ == nth_) act_();
    return BackendWrapper::stream_events(stream);
  }
  // The first item read looks redriven (ready again) when asked for.
  bool redrive_first = false;
  std::optional<ItemRow> find_item(std::string_view item_id) override {
    auto row = BackendWrapper::find_item(item_id);
    if (redrive_first && row) {
      redrive_first = false;
      row->status = ItemStatus::ready;
    }
    return row;
  }
  // (The archive reads its rows in chunks: each through find_item above.)
  std::vector<std::optional<ItemRow>> find_items(const std::vector<std::string>& ids) override {
    std::vector<std::optional<ItemRow>> out;
    for (const auto& id : ids) out.push_back(find_item(id));
    return out;
  }

 private:
  int nth_;
  std::function<void()> act_;
  int calls_ = 0;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("archives racing for one FILE: the other's file is never replaced or removed, and the "
          "loser archives nothing",
          "[archive][faults]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("s.seg");
  const auto before = snapshot(db);
  auto attempt = [&](int nth, const std::function<void()>& act) {
    ControlStore store =
        testing::store_over(std::make_unique<Meanwhile>(storage::open_store(db), nth, act));
    return archive(store, {.before = kCut, .file = seg, .now = kNow});
  };
  SECTION("FILE appears while the segment is written") {
    CHECK_THROWS_AS(attempt(6, [&] { std::ofstream(seg) << "theirs"; }), InvalidArgument);
    CHECK(slurp(seg) == "theirs");
    CHECK_FALSE(fs::exists(seg + ".tmp"));
  }
  SECTION("FILE.tmp is made by another archive after the check: theirs is kept") {
    CHECK_THROWS_AS(attempt(2, [&] { std::ofstream(seg + ".tmp") << "theirs"; }),
                    InvalidArgument);
    CHECK(slurp(seg + ".tmp") == "theirs");
    CHECK_FALSE(fs::exists(seg));
  }
  SECTION("FILE.tmp is replaced while it is written: not renamed, not removed") {
    CHECK_THROWS_AS(attempt(6,
                            [&] {
                              fs::remove(seg + ".tmp");
                              std::ofstream(seg + ".tmp") << "theirs";
                            }),
                    StorageError);
    CHECK(slurp(seg + ".tmp") == "theirs");
    CHECK_FALSE(fs::exists(seg));
  }
  CHECK(snapshot(db) == before);
  CHECK(verify_db(db).empty());
}

TEST_CASE("an item redriven between the archive's list and its read is left live, not called "
          "corrupt",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  auto inner = std::make_unique<Meanwhile>(storage::open_store(db), 0, [] {});
  inner->redrive_first = true;
  ControlStore store = testing::store_over(std::move(inner));
  const auto report = archive(store, {.before = kCut, .file = dir.file("s.seg"), .now = kNow});
  CHECK(report.streams == 3);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("an archive takes what it keeps from the log: a row edited outside cplane is refused, "
          "not laundered into an anchor",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  // The claimed item set to done behind cplane's back, with another key.
  const std::string claimed =
      sql_column(db, "SELECT item_id FROM items WHERE status = 'claimed'").at(0);
  sql(db, "UPDATE items SET status = 'done', owner = NULL, lease_expires_at = NULL, "
          "idem_key = 'other', updated_at = 1 WHERE item_id = '" + claimed + "'");
  const auto before = snapshot(db);
  CHECK_THROWS_AS(archive_to(db, dir.file("s.seg")), StorageError);
  CHECK(snapshot(db) == before);
  CHECK_FALSE(fs::exists(dir.file("s.seg")));
  // A done item whose key was edited: refused too.
  sql(db, "UPDATE items SET status = 'claimed', idem_key = NULL WHERE item_id = '" + claimed + "'");
  const std::string done =
      sql_column(db, "SELECT item_id FROM items WHERE status = 'done' AND updated_at < " +
                         std::to_string(kCut) + " ORDER BY item_id")
          .at(0);
  sql(db, "UPDATE items SET idem_key = 'edited' WHERE item_id = '" + done + "'");
  CHECK_THROWS_AS(archive_to(db, dir.file("s2.seg")), StorageError);
  CHECK(count(db, "anchors") == "0");
}

TEST_CASE("an export restored without its segments still knows them: --verify-only passes, and "
          "its own export restores with them",
          "[archive][export]") {
  TempDir dir;
  const std::string db = seed(dir);
  archive_to(db, dir.file("a.seg"));
  const std::string live = dir.file("live.export");
  REQUIRE(run_cli({"export", "--db", db, live}).exit_code == 0);
  const std::string copy = dir.file("copy.db");
  REQUIRE(run_cli({"restore", live, "--db", copy}).exit_code == 0);
  const auto check = run_cli({"archive", "--db", copy, "--verify-only", dir.file("a.seg")});
  INFO(check.out << check.err);
  CHECK(check.exit_code == 0);
  const auto stats = run_cli({"stats", "--db", copy});
  CHECK(contains(stats.out, "archived: 4 stream(s)"));
  // The copy's export and the original segment: the full history.
  const std::string again = dir.file("copy.export");
  REQUIRE(run_cli({"export", "--db", copy, again}).exit_code == 0);
  const auto whole = run_cli({"audit", again, dir.file("a.seg")});
  INFO(whole.out << whole.err);
  CHECK(whole.exit_code == 0);
  const auto full = run_cli({"restore", again, dir.file("a.seg"), "--db", dir.file("full.db")});
  INFO(full.out << full.err);
  CHECK(full.exit_code == 0);
  CHECK(count(dir.file("full.db"), "anchors") == "0");
  CHECK(verify_db(dir.file("full.db")).empty());
}

TEST_CASE("recover carries the anchors and segments across: keys still deduplicate, archived "
          "seqs are not called lost, the segment still checks",
          "[archive][recover]") {
  TempDir dir;
  const std::string db = seed(dir);
  archive_to(db, dir.file("a.seg"));
  const std::string fresh = dir.file("recovered.db");
  const auto r = run_cli({"--db", db, "recover", "--to", fresh});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(count(fresh, "anchors") == "4");
  CHECK(count(fresh, "segments") == "1");
  CHECK(verify_db(fresh).empty());
  CHECK(run_cli({"archive", "--db", fresh, "--verify-only", dir.file("a.seg")}).exit_code == 0);
  // The archived beta item's key answers that item, as in the original.
  const std::string archived_id =
      sql_column(fresh, "SELECT stream_id FROM anchors WHERE idem_key = 'k1'").at(0);
  ControlStore store{fresh};
  ControlStore::EnqueueOptions keyed;
  keyed.key = "k1";
  keyed.now = kNow;
  CHECK(store.enqueue("beta", "{}", keyed) == archived_id);
}

TEST_CASE("an export after an archive carries the anchors: audit of it is clean, and a restore "
          "from it plus its segments holds the full history",
          "[archive][export]") {
  TempDir dir;
  const std::string db = seed(dir);
  std::vector<std::string> ids_before = sql_column(db, "SELECT item_id FROM items ORDER BY item_id");
  // Two archives: each adds its own event (segment_archived).
  const auto events_before = std::to_string(std::stoll(count(db, "events")) + 2);
  archive_to(db, dir.file("b.seg"), kCut, "beta");
  archive_to(db, dir.file("a.seg"));
  const std::string exported = dir.file("live.export");
  {
    ControlStore store{db};
    std::FILE* out = std::fopen(exported.c_str(), "wb");
    REQUIRE(out != nullptr);
    CHECK(export_log(store, out).anchors == 4);
    std::fclose(out);
  }
  const auto audit = audit_path(exported);
  CHECK(audit.problems.empty());
  CHECK(audit.summary.anchors == 4);
  // The segments audited together with the live export: one history.
  for (const auto& seg : {dir.file("a.seg"), dir.file("b.seg")}) CHECK(audit_path(seg).problems.empty());

  SECTION("the export alone: anchors come back as anchors") {
    const std::string fresh = dir.file("r1.db");
    ControlStore target{fresh};
    std::FILE* in = std::fopen(exported.c_str(), "rb");
    restore_export(in, target);
    std::fclose(in);
    CHECK(verify_ledger(target).empty());
    CHECK(count(fresh, "anchors") == "4");
  }
  SECTION("the export and its segments: the full history, as if never archived") {
    const std::string fresh = dir.file("r2.db");
    ControlStore target{fresh};
    std::FILE* in = std::fopen(exported.c_str(), "rb");
    std::FILE* a = std::fopen(dir.file("a.seg").c_str(), "rb");
    std::FILE* b = std::fopen(dir.file("b.seg").c_str(), "rb");
    restore_export(in, target, {}, {a, b});
    for (auto* f : {in, a, b}) std::fclose(f);
    CHECK(verify_ledger(target).empty());
    CHECK(count(fresh, "anchors") == "0");
    CHECK(count(fresh, "events") == events_before);
    CHECK(sql_column(fresh, "SELECT item_id FROM items ORDER BY item_id") == ids_before);
  }
  SECTION("a segment of another store is refused, and nothing is left") {
    const std::string other = seed(dir, "other.db");
    archive_to(other, dir.file("o.seg"));
    const auto r = run_cli({"restore", exported, dir.file("o.seg"), "--db", dir.file("r3.db")});
    CHECK(r.exit_code == 2);
    CHECK_FALSE(fs::exists(dir.file("r3.db")));
  }
  SECTION("a segment missing or given twice: the restore refuses, and nothing is left") {
    const auto missing = run_cli({"restore", exported, dir.file("a.seg"), "--db", dir.file("r5.db")});
    INFO(missing.out << missing.err);
    CHECK(missing.exit_code == 2);
    CHECK(contains(missing.err, "not given"));
    CHECK_FALSE(fs::exists(dir.file("r5.db")));
    const auto twice = run_cli({"restore", exported, dir.file("a.seg"), dir.file("a.seg"),
                                dir.file("b.seg"), "--db", dir.file("r6.db")});
    INFO(twice.out << twice.err);
    CHECK(twice.exit_code == 2);
    CHECK(contains(twice.err, "given twice"));
    CHECK_FALSE(fs::exists(dir.file("r6.db")));
  }
  SECTION("audit of the export and every segment checks the history as one") {
    const auto whole = run_cli({"audit", exported, dir.file("a.seg"), dir.file("b.seg"), "--json"});
    INFO(whole.out << whole.err);
    CHECK(whole.exit_code == 0);
    CHECK(contains(whole.out, "\"problems\":[]"));
    CHECK(contains(whole.out, fmt::format("\"history\":{{\"events\":{}", events_before)));
    // One segment left out: the history is short of its streams.
    const auto short_of = run_cli({"audit", exported, dir.file("a.seg")});
    INFO(short_of.out << short_of.err);
    CHECK(short_of.exit_code == 6);
    CHECK(contains(short_of.out, "not given"));
    // Another store's segment beside this store's export.
    const std::string other = seed(dir, "other2.db");
    archive_to(other, dir.file("o2.seg"));
    const auto foreign = run_cli({"audit", exported, dir.file("a.seg"), dir.file("o2.seg")});
    CHECK(foreign.exit_code == 6);
    CHECK(contains(foreign.out, "another store's segment"));
    // Two exports: a usage error, not a history.
    CHECK(run_cli({"audit", exported, exported}).exit_code == 2);
    // A segment edited by one byte: that file is not a whole export (exit 1), named.
    fs::copy_file(dir.file("b.seg"), dir.file("b-edited.seg"));
    flip_byte(dir.file("b-edited.seg"), 100);
    const auto edited = run_cli({"audit", exported, dir.file("a.seg"), dir.file("b-edited.seg")});
    CHECK(edited.exit_code == 1);
    CHECK(contains(edited.err, "b-edited.seg"));
  }
  SECTION("the CLI: restore FILE SEGMENT... --db NEW") {
    const auto r = run_cli({"restore", exported, dir.file("a.seg"), dir.file("b.seg"), "--db",
                            dir.file("r4.db")});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(run_cli({"verify", "--db", dir.file("r4.db")}).exit_code == 0);
  }
}

TEST_CASE("an item a schedule made, archived, is still the one its fire names: verify is clean "
          "and the occurrence is not made again",
          "[archive][schedule]") {
  TempDir dir;
  const std::string db = dir.file("s.db");
  const Micros hour = 3'600'000'000;
  const Micros t0 = 1'700'000'000'000'000 / hour * hour;  // on the hour
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", t0);
    store.add_schedule("hourly", {.project_id = "alpha", .cron = "@hourly", .now = t0 + 1});
    CHECK(store.tick(t0 + hour + 5) == 1);
    auto c = store.claim("w", {.now = t0 + hour + 10, .fair = false});
    REQUIRE(c);
    store.finish(c->item_id, c->fence, Outcome::done, "", t0 + hour + 20);
    const auto report =
        archive(store, {.before = t0 + hour + 30, .file = dir.file("s.seg"), .now = t0 + hour + 40});
    CHECK(report.streams == 1);
    CHECK(verify_ledger(store).empty());
    // The next occurrence makes a new item; verify still clean.
    CHECK(store.tick(t0 + 2 * hour + 5) == 1);
    CHECK(verify_ledger(store).empty());
  }
  CHECK(count(db, "anchors") == "1");
}

TEST_CASE("a store migrated from schema 10 gains the retention tables and archives", "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  sql(db, test::kBackToVersion10);
  ControlStore store{db};
  CHECK(sql_column(db, "PRAGMA user_version").at(0) == std::to_string(11));
  CHECK(archive(store, {.before = kCut, .file = dir.file("m.seg"), .now = kNow}).streams == 4);
  CHECK(verify_ledger(store).empty());
}

namespace {

// An archive as a build before archives were events made it: its record
// and anchors, no segment_archived in the log.
class BeforeArchiveEvents : public storage::BackendWrapper {
 public:
  using BackendWrapper::BackendWrapper;
  Seq append(const Event& event) override {
    if (std::holds_alternative<SegmentArchived>(event.body)) return 0;
    return BackendWrapper::append(event);
  }
};

}  // namespace

TEST_CASE("a record of an archive made before archives were events is held against its anchors, "
          "and rebuild makes it again from them when it is gone",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  {
    ControlStore store =
        testing::store_over(std::make_unique<BeforeArchiveEvents>(storage::open_store(db)));
    REQUIRE(archive(store, {.before = kCut, .file = dir.file("s.seg"), .now = kNow}).streams ==
            4);
  }
  CHECK(count(db, "segments") == "1");
  CHECK(sql_column(db, "SELECT count(*) FROM events WHERE type = 'segment_archived'") ==
        std::vector<std::string>{"0"});
  CHECK(verify_db(db).empty());
  const auto digest = sql_column(db, "SELECT hex(digest) FROM segments");
  sql(db, "DELETE FROM segments");
  REQUIRE_FALSE(verify_db(db).empty());
  CHECK(run_cli({"--db", db, "rebuild"}).exit_code == 0);
  CHECK(verify_db(db).empty());
  CHECK(sql_column(db, "SELECT hex(digest) FROM segments") == digest);
  CHECK(sql_column(db, "SELECT streams FROM segments") == std::vector<std::string>{"4"});
  CHECK(sql_column(db, "SELECT bytes FROM segments") == std::vector<std::string>{"-1"});
}

TEST_CASE("a segment path with control characters is printed escaped by archive, --verify-only "
          "and stats, never raw to the terminal",
          "[archive][cli]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("evil\x1b[31m\n.seg");
  const std::string cut = std::to_string(kCut);
  const std::string now = std::to_string(kNow);
  const auto made = run_cli({"--db", db, "--now", now, "archive", "--before", cut, "--to", seg});
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  const auto checked = run_cli({"--db", db, "archive", "--verify-only", seg});
  const auto stats = run_cli({"--db", db, "stats"});
  for (const auto* out : {&made.out, &checked.out, &stats.out}) {
    CHECK_FALSE(contains(*out, "\x1b"));
    CHECK(contains(*out, "evil\\x1b[31m\\x0a.seg"));
  }
}
