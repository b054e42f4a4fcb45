// The operator's view (issue 24) through the library and the CLI, on every
// backend: the item listing (filters, order, a stable cursor, one index
// walk per status), the log as a stream (only final events, so a consumer
// that resumes after the last seq it saw misses none and sees none twice,
// even after a SIGKILL), and bad input that changes nothing. And what an
// adversarial review broke: a cursor item redriven between two pages, a
// lying type or stream column under a filter, a writer stopped
// mid-command under `tail --follow`, a reader that closes the pipe.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "storage/backend_wrapper.hpp"
#include "storage/open.hpp"
#include "tests/cli_checks.hpp"
#include "tests/support.hpp"

using namespace cplane;
using cplane::test::has_text;
using cplane::test::run_cli;
using cplane::test::sql;
using cplane::test::sql_column;
using cplane::test::TempDir;
using cplane::test::test_context;

namespace {

constexpr Micros T0 = 1'800'000'000'000'000;
constexpr Micros kSecond = 1'000'000;

std::int64_t events_in(const std::string& db) {
  return std::stoll(sql_column(db, "SELECT count(*) FROM events").at(0));
}

std::vector<std::string> ids_of(const std::vector<Item>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.item_id);
  return out;
}

// The seq of the first event of `type` in the log.
std::string seq_of(const std::string& db, const std::string& type) {
  return sql_column(db, "SELECT min(seq) FROM events WHERE type = '" + type + "'").at(0);
}

// Every page of `q`, concatenated.
std::vector<std::string> all_pages(ControlStore& store, ControlStore::ItemQuery q,
                                   const std::optional<std::string>& actor = {}) {
  std::vector<std::string> out;
  for (int pages = 0; pages < 1000; ++pages) {
    const auto page = store.list_items(q, actor);
    for (auto& id : ids_of(page.items)) out.push_back(id);
    if (!page.next) return out;
    CHECK(page.next == page.items.back().item_id);
    q.after = page.next;
  }
  FAIL("paging did not end");
  return out;
}

}  // namespace

TEST_CASE("items pages through every item once in queue order whatever the filter", "[view]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "list");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0);
  std::vector<std::string> queued;  // in queue order
  for (int i = 0; i < 40; ++i) {
    ControlStore::EnqueueOptions o;
    o.now = T0 + 1 + i;
    if (i % 5 == 0) o.key = "k" + std::to_string(i);
    if (i % 3 == 0) o.concurrency_key = "repo";
    if (i % 7 == 0) o.kind = WorkKind::issue;
    queued.push_back(store.enqueue(i % 2 ? "beta" : "alpha", "{}", o));
  }
  // Some claimed by two owners, some finished, one cancelled.
  for (int i = 0; i < 6; ++i) REQUIRE(store.claim(i % 2 ? "w1" : "w2", {.now = T0 + 100 + i}));
  const auto done = store.claim("w1", {.now = T0 + 200});
  REQUIRE(done);
  store.finish(done->item_id, done->fence, Outcome::done, {.now = T0 + 201});
  store.cancel(queued.back(), "no", {.now = T0 + 202});
  auto before = events_in(db);

  using Q = ControlStore::ItemQuery;
  SECTION("newest and oldest first give every item once, in queue order") {
    for (std::size_t limit : {1u, 3u, 7u, 50u}) {
      Q q;
      q.limit = limit;
      auto newest = all_pages(store, q);
      std::vector<std::string> expect(queued.rbegin(), queued.rend());
      CHECK(newest == expect);
      q.order = Q::Order::oldest;
      CHECK(all_pages(store, q) == queued);
    }
  }
  SECTION("each filter gives exactly its items") {
    auto expect = [&](auto pred) {
      std::vector<std::string> out;
      for (const auto& id : queued) {
        if (pred(store.item(id))) out.push_back(id);
      }
      return out;
    };
    Q q;
    q.order = Q::Order::oldest;
    q.limit = 4;
    Q p = q;
    p.project = "beta";
    CHECK(all_pages(store, p) == expect([](const Item& i) { return i.project_id == "beta"; }));
    Q s = q;
    s.statuses = {ItemStatus::claimed, ItemStatus::done};
    CHECK(all_pages(store, s) == expect([](const Item& i) {
            return i.status == ItemStatus::claimed || i.status == ItemStatus::done;
          }));
    Q o = q;
    o.owner = "w1";
    CHECK(all_pages(store, o) == expect([](const Item& i) { return i.owner == "w1"; }));
    CHECK(!all_pages(store, o).empty());
    Q k = q;
    k.kind = WorkKind::issue;
    CHECK(all_pages(store, k) == expect([](const Item& i) { return i.kind == WorkKind::issue; }));
    Q ck = q;
    ck.concurrency_key = "repo";
    ck.project = "alpha";
    CHECK(all_pages(store, ck) == expect([](const Item& i) {
            return i.concurrency_key == "repo" && i.project_id == "alpha";
          }));
    Q key = q;
    key.key = "k10";
    CHECK(all_pages(store, key) == std::vector<std::string>{queued[10]});
    Q c = q;
    c.statuses = {ItemStatus::cancelled};
    CHECK(all_pages(store, c) == std::vector<std::string>{queued.back()});
  }
  SECTION("a scoped actor sees its projects only and is refused another's") {
    store.grant("beta", "bot", T0 + 300);
    before = events_in(db);
    Q q;
    q.order = Q::Order::oldest;
    q.limit = 5;
    const auto seen = all_pages(store, q, std::string("bot"));
    CHECK(seen.size() == 20);
    for (const auto& id : seen) CHECK(store.item(id).project_id == "beta");
    Q other = q;
    other.project = "alpha";
    CHECK_THROWS_AS(store.list_items(other, std::string("bot")), ScopeDenied);
    Q cursor = q;
    cursor.after = queued[0];  // an alpha item
    CHECK_THROWS_AS(store.list_items(cursor, std::string("bot")), ScopeDenied);
    cursor.after = "no-such-item";
    CHECK_THROWS_AS(store.list_items(cursor, std::string("bot")), ScopeDenied);
  }
  SECTION("bad input is refused with its type") {
    Q q;
    q.limit = 0;
    CHECK_THROWS_AS(store.list_items(q), InvalidArgument);
    q.limit = ControlStore::kMaxListLimit + 1;
    CHECK_THROWS_AS(store.list_items(q), InvalidArgument);
    Q cursor;
    cursor.after = "no-such-item";
    try {
      store.list_items(cursor);
      FAIL("a cursor that names no item was taken");
    } catch (const NotFound& e) {
      CHECK(e.reason() == NotFound::Reason::unknown_item);
    }
    Q unknown;
    unknown.project = "gamma";
    try {
      store.list_items(unknown);
      FAIL("an unknown project was listed");
    } catch (const NotFound& e) {
      CHECK(e.reason() == NotFound::Reason::unknown_project);
    }
    Q empty;
    empty.owner = "";
    CHECK_THROWS_AS(store.list_items(empty), InvalidArgument);
  }
  CHECK(events_in(db) == before);  // reads write nothing
}

TEST_CASE("the log reads in seq order with its filters and a cursor that moves past what they skip",
          "[view]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "log");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  const auto a = store.enqueue("alpha", "{\"n\":1}", {}, T0 + 1);
  const auto b = store.enqueue("alpha", "{\"n\":2}", {}, T0 + 2);
  const auto c = store.claim("w", {.now = T0 + 3});
  REQUIRE(c);
  store.finish(c->item_id, c->fence, Outcome::failed, {.now = T0 + 4});
  const auto before = events_in(db);

  const auto all = store.read_log(0, 1000);
  REQUIRE(all.events.size() == 5);
  CHECK(all.next == all.events.back().seq);
  for (std::size_t i = 1; i < all.events.size(); ++i) {
    CHECK(all.events[i - 1].seq < all.events[i].seq);
  }
  CHECK(all.events[0].type() == "project_created");
  CHECK(all.events[4].type() == "failed");
  CHECK(store.log_end() == all.events.back().seq);
  // Two at a time, resuming after the last seq seen: the same events.
  std::vector<Seq> paged;
  for (Seq after = 0;;) {
    const auto page = store.read_log(after, 2);
    if (page.events.empty()) {
      CHECK(page.next == after);
      break;
    }
    for (const auto& e : page.events) paged.push_back(e.seq);
    after = page.next;
  }
  CHECK(paged.size() == 5);
  CHECK(paged.back() == all.events.back().seq);
  // Types: only those; the cursor still moves to the last event examined.
  ControlStore::LogQuery q;
  q.types = {"queued"};
  const auto queued = store.read_log(q);
  REQUIRE(queued.events.size() == 2);
  CHECK(queued.next == all.events.back().seq);
  q.types = {"done", "failed"};
  CHECK(store.read_log(q).events.size() == 1);
  // One stream.
  ControlStore::LogQuery s;
  s.stream = StreamRef{StreamKind::item, a};
  const auto of_a = store.read_log(s);
  for (const auto& e : of_a.events) CHECK(e.event.item_id == a);
  CHECK(of_a.events.size() == (c->item_id == a ? 3u : 1u));
  s.stream = StreamRef{StreamKind::item, b};
  CHECK(!store.read_log(s).events.empty());
  // Bad input.
  ControlStore::LogQuery bad;
  bad.types = {"claimd"};
  CHECK_THROWS_AS(store.read_log(bad), InvalidArgument);
  CHECK_THROWS_AS(store.read_log(0, 0), InvalidArgument);
  CHECK_THROWS_AS(store.read_log(0, ControlStore::kMaxLogRead + 1), InvalidArgument);
  CHECK_THROWS_AS(store.read_log(-1, 10), InvalidArgument);
  CHECK(store.read_log(all.next + 100, 10).events.empty());
  CHECK(events_in(db) == before);
}

TEST_CASE("wait_for_log wakes on another connection's commit and times out without one",
          "[view]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "wait");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  const Seq end = store.log_end();
  CHECK_FALSE(store.wait_for_log(end, std::chrono::milliseconds(300)));
  auto writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ControlStore other{db};
    other.enqueue("alpha", "{}", {}, T0 + 1);
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK(store.wait_for_log(end, std::chrono::seconds(20)));
  // Woken by the commit, not by the timeout (generous: a loaded machine).
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  writer.get();
  CHECK(store.read_log(end, 10).events.size() == 1);
}

namespace {

// Holds a write transaction open at its commit until released: a writer
// that drew its seq but has not committed yet.
class HeldCommit final : public storage::BackendWrapper {
 public:
  HeldCommit(std::unique_ptr<storage::Backend> inner, std::shared_future<void> release,
             std::promise<void>& holding)
      : BackendWrapper(std::move(inner)), release_(std::move(release)), holding_(holding) {}
  void commit() override {
    if (in_write_transaction() || !armed_) return BackendWrapper::commit();
    armed_ = false;
    holding_.set_value();
    release_.wait();
    BackendWrapper::commit();
  }
  void begin_write(storage::Sync sync) override {
    armed_ = true;
    BackendWrapper::begin_write(sync);
  }
  void begin_read() override {
    armed_ = false;
    BackendWrapper::begin_read();
  }

 private:
  bool armed_ = false;
  std::shared_future<void> release_;
  std::promise<void>& holding_;
};

// A new store with the project alpha.
std::string store_with_alpha(const TempDir& dir, const std::string& name) {
  const auto db = test_context().fresh_store(dir, name);
  ControlStore setup{db};
  setup.create_project("alpha", "A", "open", T0);
  return db;
}

// An enqueue of `payload` whose seq is drawn and whose commit is held until
// finish(), which returns the item.
class HeldWriter {
 public:
  HeldWriter(const std::string& db, std::string payload) {
    done_ = std::async(std::launch::async, [this, db, payload] {
      auto store = testing::store_over(
          std::make_unique<HeldCommit>(storage::open_store(db), released_, holding_), {});
      return store.enqueue("alpha", payload, {}, T0 + 1);
    });
    holding_.get_future().wait();
  }
  std::string finish() {
    release_.set_value();
    return done_.get();
  }

 private:
  std::promise<void> release_, holding_;
  std::shared_future<void> released_ = release_.get_future().share();
  std::future<std::string> done_;
};

}  // namespace

TEST_CASE("the log is read only up to what is final while an earlier seq is still to commit",
          "[view]") {
  // SQLite has one writer at a time, so seqs commit in order there; on
  // PostgreSQL a later seq can commit first.
  if (test_context().backend_name() != "postgres") return;
  TempDir dir;
  const auto db = store_with_alpha(dir, "final");
  ControlStore reader{db};
  const Seq end = reader.log_end();
  HeldWriter slow(db, "{\"slow\":1}");  // its seq is drawn, its commit held
  ControlStore fast{db};
  const auto fast_item = fast.enqueue("alpha", "{\"fast\":1}", {}, T0 + 2);
  auto read = std::async(std::launch::async, [&] { return reader.read_log(end, 100); });
  // The read waits for the held writer instead of answering with the later seq alone.
  CHECK(read.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);
  const auto slow_item = slow.finish();
  const auto page = read.get();
  REQUIRE(page.events.size() == 2);
  CHECK(page.events[0].event.item_id == slow_item);
  CHECK(page.events[1].event.item_id == fast_item);
  CHECK(page.events[0].seq < page.events[1].seq);
}

// ---- the CLI -------------------------------------------------------------------------

namespace {

// Runs the CLI with stdout to `out_fd` and stderr to `err_file`.
pid_t spawn_cli(const std::vector<std::string>& args, int out_fd,
                const std::string& err_file = "/dev/null") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::dup2(null, STDIN_FILENO);
    std::vector<char*> argv{const_cast<char*>(CPLANE_CLI_PATH)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(CPLANE_CLI_PATH, argv.data());
    ::_exit(127);
  }
  return pid;
}

pid_t spawn_cli(const std::vector<std::string>& args, const std::string& out_file,
                const std::string& err_file = "/dev/null") {
  const int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const pid_t pid = spawn_cli(args, fd, err_file);
  ::close(fd);
  return pid;
}

// Waits up to `limit` for `pid` to exit: its wait status, or nullopt.
std::optional<int> exited_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The seqs of the complete JSON lines of a tail's output (a killed
// consumer may leave half a line: it is not counted, and read again).
std::vector<Seq> seqs_in(const std::string& file) {
  const std::string text = read_file(file);
  std::vector<Seq> out;
  std::size_t at = 0;
  for (std::size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
    const std::string line = text.substr(at, nl - at);
    REQUIRE(line.rfind("{\"seq\":", 0) == 0);
    out.push_back(std::stoll(line.substr(7)));
  }
  return out;
}

}  // namespace

TEST_CASE("a tail consumer SIGKILLed again and again resumes after its last seq and misses nothing",
          "[view][cli]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "tail");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
  }
  // Four writers, each its own connection (on PostgreSQL their seqs commit
  // out of order), queue and finish items while the consumer is killed.
  std::atomic<bool> stop{false};
  std::vector<std::future<void>> writers;
  for (int w = 0; w < 4; ++w) {
    writers.push_back(std::async(std::launch::async, [&, w] {
      ControlStore store{db};
      for (int i = 0; i < 60 && !stop; ++i) {
        store.enqueue("alpha", "{}");
        if (auto c = store.claim("w" + std::to_string(w))) {
          store.finish(c->item_id, c->fence, Outcome::done);
        }
      }
    }));
  }
  std::vector<Seq> seen;
  std::mt19937 random(7);
  for (int round = 0; round < 8; ++round) {
    const std::string out = dir.file("tail" + std::to_string(round) + ".jsonl");
    const Seq from = seen.empty() ? 1 : seen.back() + 1;
    const pid_t pid = spawn_cli({"--db", db, "tail", "--follow", "--jsonl", "--from",
                                 std::to_string(from)},
                                out);
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + random() % 300));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    for (const Seq s : seqs_in(out)) seen.push_back(s);
  }
  for (auto& w : writers) w.get();
  // The rest, one-shot.
  const auto rest = run_cli({"--db", db, "tail", "--jsonl", "--from",
                             std::to_string(seen.empty() ? 1 : seen.back() + 1)});
  REQUIRE_EXIT(rest, 0);
  std::ofstream(dir.file("rest.jsonl")) << rest.out;
  for (const Seq s : seqs_in(dir.file("rest.jsonl"))) seen.push_back(s);
  // Exactly the log's seqs, each once, in order.
  const auto whole = run_cli({"--db", db, "tail", "--jsonl"});
  REQUIRE_EXIT(whole, 0);
  std::ofstream(dir.file("whole.jsonl")) << whole.out;
  const auto expect = seqs_in(dir.file("whole.jsonl"));
  CHECK(expect.size() == static_cast<std::size_t>(events_in(db)));
  CHECK(seen == expect);
}

// A follower's reader that went away is noticed when the next write fails;
// while the log was quiet there was none, and `tail --follow | head -1`
// never ended.
TEST_CASE("tail --follow ends soon after its reader closes the pipe while the log is quiet",
          "[view][cli]") {
  TempDir dir;
  const auto db = store_with_alpha(dir, "pipe");
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);  // the child keeps only its stdout
  const pid_t pid = spawn_cli({"--db", db, "tail", "--follow"}, fds[1], dir.file("err"));
  ::close(fds[1]);
  // The first line (head -1), then the reader goes.
  std::string line;
  char c = 0;
  while (line.find('\n') == std::string::npos && ::read(fds[0], &c, 1) == 1) line += c;
  CHECK(has_text(line, "project_created"));
  ::close(fds[0]);
  const auto status = exited_within(pid, std::chrono::seconds(10));
  if (!status) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  REQUIRE(status);
  CHECK(WIFEXITED(*status));
  CHECK(WEXITSTATUS(*status) == 1);
  CHECK(has_text(read_file(dir.file("err")), "could not be written"));
}

// On PostgreSQL a read waits for the log's writers, and says busy after
// 5 s; the follower's wait raised that busy too, and `tail --follow` (and
// its --from check) ended with exit 1 instead of waiting on.
TEST_CASE("tail --follow waits on through a writer stopped mid-command and then prints its event",
          "[view][cli]") {
  if (test_context().backend_name() != "postgres") return;  // SQLite's readers never wait
  TempDir dir;
  const auto db = store_with_alpha(dir, "stalled");
  ControlStore reader{db};
  const Seq end = reader.log_end();
  HeldWriter stalled(db, "{\"stalled\":1}");
  const std::string out = dir.file("tail.jsonl");
  const pid_t pid = spawn_cli({"--db", db, "tail", "--follow", "--jsonl", "--from", "1"}, out,
                              dir.file("err"));
  // The library's wait says "nothing yet", not busy.
  bool woke = true;
  CHECK_NOTHROW(woke = reader.wait_for_log(end, std::chrono::milliseconds(500)));
  CHECK_FALSE(woke);
  // Past twice the 5 s a read waits for the log's writers.
  const auto early = exited_within(pid, std::chrono::seconds(12));
  CHECK_FALSE(early);
  const auto item = stalled.finish();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!has_text(read_file(out), item) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!early) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  const std::string text = read_file(out);
  CHECK(has_text(text, item));
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);  // project_created, queued: once each
  INFO(read_file(dir.file("err")));
  CHECK(has_text(read_file(dir.file("err")), "not final yet"));
}

// A redrive moves its item to the back of the queue. Before, the next page
// started from the cursor item's new place: oldest first, every item
// between its old and new place was skipped; newest first, a page came
// round again.
TEST_CASE("a page after a cursor redriven since starts where the previous page ended",
          "[view]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "redrive");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  std::vector<std::string> queued;
  for (int i = 0; i < 6; ++i) queued.push_back(store.enqueue("alpha", "{}", {}, T0 + 1 + i));
  auto redrive = [&](const std::string& id, Micros at) {
    store.cancel(id, "redrive", {.now = at});
    store.retry(id, {}, {.now = at + 1});
  };
  using Q = ControlStore::ItemQuery;
  SECTION("oldest first") {
    Q q;
    q.order = Q::Order::oldest;
    q.limit = 2;
    const auto first = store.list_items(q);
    REQUIRE(ids_of(first.items) == std::vector<std::string>{queued[0], queued[1]});
    REQUIRE(first.next == queued[1]);
    REQUIRE(first.next_seq == first.items.back().queued_seq);
    redrive(queued[1], T0 + 100);
    q.after = first.next;
    q.after_seq = first.next_seq;
    CHECK(ids_of(store.list_items(q).items) == std::vector<std::string>{queued[2], queued[3]});
  }
  SECTION("newest first") {
    Q q;
    q.limit = 2;
    const auto first = store.list_items(q);
    REQUIRE(ids_of(first.items) == std::vector<std::string>{queued[5], queued[4]});
    redrive(queued[4], T0 + 100);
    q.after = first.next;
    q.after_seq = first.next_seq;
    CHECK(ids_of(store.list_items(q).items) == std::vector<std::string>{queued[3], queued[2]});
  }
  SECTION("on the CLI the cursor carries its place") {
    const auto page = run_cli({"--db", db, "items", "--json", "--limit", "2", "--order", "oldest"});
    REQUIRE_EXIT(page, 0);
    const auto at = std::to_string(store.item(queued[1]).queued_seq);
    CHECK(has_text(page.out, "\"next\":\"" + queued[1] + "\",\"next_seq\":" + at));
    const auto table = run_cli({"--db", db, "items", "--limit", "2", "--order", "oldest"});
    REQUIRE_EXIT(table, 0);
    CHECK(has_text(table.err, "next: --after " + queued[1] + " --after-seq " + at));
    redrive(queued[1], T0 + 100);
    const auto next = run_cli({"--db", db, "items", "--jsonl", "--limit", "2", "--order", "oldest",
                               "--after", queued[1], "--after-seq", at});
    REQUIRE_EXIT(next, 0);
    CHECK(has_text(next.out, queued[2]));
    CHECK(has_text(next.out, queued[3]));
    CHECK_EXIT(run_cli({"--db", db, "items", "--after-seq", at}), 2);
    CHECK_EXIT(run_cli({"--db", db, "items", "--after", queued[1], "--after-seq", "0"}), 2);
  }
  SECTION("a position without its item or not positive is refused") {
    Q q;
    q.after_seq = 3;
    CHECK_THROWS_AS(store.list_items(q), InvalidArgument);
    q.after = queued[0];
    q.after_seq = 0;
    CHECK_THROWS_AS(store.list_items(q), InvalidArgument);
  }
}

// Filters went by the stored columns and the body was decoded only for
// the events they kept: `tail --type claimed` skipped, silently and with
// exit 0, a claim whose type column said otherwise, or whose body did
// not decode, and `--stream` printed another stream's event.
TEST_CASE("a filtered log read reports a lying column or an unreadable body instead of skipping",
          "[view]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "lies");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  const auto a = store.enqueue("alpha", "{}", {}, T0 + 1);
  store.enqueue("alpha", "{}", {}, T0 + 2);
  REQUIRE(store.claim("w", {.now = T0 + 3}));
  const std::string claim = seq_of(db, "claimed");
  ControlStore::LogQuery claims;
  claims.types = {"claimed"};
  REQUIRE(store.read_log(claims).events.size() == 1);
  auto corrupt = [&](const ControlStore::LogQuery& q) {
    try {
      store.read_log(q);
      FAIL("the read skipped the tampered event");
    } catch (const StorageError& e) {
      CHECK(e.category() == StorageError::Category::corruption);
      CHECK(has_text(e.what(), "event " + claim));
    }
  };
  SECTION("a type column that lies") {
    sql(db, "UPDATE events SET type = 'done' WHERE seq = " + claim);
    corrupt(claims);
    CHECK_EXIT(run_cli({"--db", db, "tail", "--type", "claimed"}), 1);
  }
  SECTION("a stream column that lies") {
    sql(db, "UPDATE events SET stream_id = 'elsewhere' WHERE seq = " + claim);
    ControlStore::LogQuery q;
    q.stream = StreamRef{StreamKind::item, "elsewhere"};
    corrupt(q);
  }
  SECTION("a body that does not decode") {
    sql(db, std::string("UPDATE events SET body = ") +
                (test_context().backend_name() == "postgres" ? "decode('00112233', 'hex')"
                                                             : "x'00112233'") +
                " WHERE seq = " + claim);
    corrupt(claims);
    ControlStore::LogQuery other;
    other.types = {"queued"};
    corrupt(other);
  }
  (void)a;
}

TEST_CASE("items tail and history answer on the CLI and refuse bad input with exit 2 or 7",
          "[view][cli]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "cli");
  std::string a;
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    a = store.enqueue("alpha", "{\"x\":\"<script>\"}", {}, T0 + 1);
    store.enqueue("alpha", "{}", {}, T0 + 2);
    const auto c = store.claim("w1", {.now = T0 + 3});
    store.release(c->item_id, c->fence, "later", {.now = T0 + 4});
  }
  const auto before = events_in(db);
  const auto page = run_cli({"--db", db, "items", "--json", "--limit", "1", "--order", "oldest"});
  REQUIRE_EXIT(page, 0);
  CHECK(has_text(page.out, "\"item_id\":\"" + a + "\""));
  CHECK(has_text(page.out, "\"next\":\"" + a + "\""));
  const auto next = run_cli({"--db", db, "items", "--jsonl", "--after", a, "--order", "oldest"});
  REQUIRE_EXIT(next, 0);
  CHECK(std::count(next.out.begin(), next.out.end(), '\n') == 1);
  CHECK_FALSE(has_text(next.out, a));
  const auto table = run_cli({"--db", db, "items", "--status", "ready"});
  REQUIRE_EXIT(table, 0);
  CHECK(has_text(table.out, "ITEM"));
  const auto history = run_cli({"--db", db, "history", a, "--jsonl"});
  REQUIRE_EXIT(history, 0);
  CHECK(has_text(history.out, "\"type\":\"queued\""));
  const auto types = run_cli({"--db", db, "tail", "--type", "released", "--jsonl"});
  REQUIRE_EXIT(types, 0);
  CHECK(std::count(types.out.begin(), types.out.end(), '\n') == 1);
  CHECK(has_text(types.out, "\"reason\":\"later\""));
  const auto stream = run_cli({"--db", db, "tail", "--stream", "item:" + a, "--json"});
  REQUIRE_EXIT(stream, 0);
  CHECK(stream.out.front() == '[');
  CHECK(has_text(stream.out, "\\u003cscript\\u003e") != has_text(stream.out, "<script>"));

  CHECK_EXIT(run_cli({"--db", db, "items", "--status", "readyy"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "items", "--limit", "0"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "items", "--order", "up"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "items", "--after", "no-such"}), 7);
  CHECK_EXIT(run_cli({"--db", db, "items", "--project", "gamma"}), 7);
  CHECK_EXIT(run_cli({"--db", db, "tail", "--from", "0"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "tail", "--from", "100000"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "tail", "--from", "1", "--from-end"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "tail", "--type", "claimd"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "tail", "--stream", "itm:x"}), 2);
  CHECK_EXIT(run_cli({"--db", db, "history", "no-such"}), 7);
  CHECK(events_in(db) == before);
}
