// Batches on every engine: what a batch claim and a batch finish write is
// what the same commands one by one write. On PostgreSQL a batch's events
// (with their heads) and its item rows each go as one statement, their
// values packed into arrays (storage/postgres/statement.hpp column_array):
// every character must come back as it went in.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <cplane/cplane.hpp>

#include "commands/testing.hpp"
#include "storage/backend.hpp"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::TempDir;
using cplane::test::test_context;

// Characters an array literal or a bytea in one must not bend: quotes,
// backslashes, commas, braces, the word NULL, a "\x" that is text, tabs and
// newlines, non-ASCII.
const std::vector<std::string> kPayloads = {
    R"({"q":"a\"b","b":"c\\d","c":"{x,y}","n":null})",
    R"(["NULL",null,"",{}])",
    R"("\\x41 is not bytea")",
    R"({"u":"é ✓ 日本","t":"tab\there\nnewline"})",
    R"({})",
    R"("")",
};
const std::vector<std::string> kDetails = {
    "",
    "a \"quoted\" \\ back,slash {brace}",
    "NULL",
    "\\x41",
    "line\nbreak\ttab",
    "é ✓ {\"json\": [1, 2]}",
};

// `count` JSON strings of about 1 MB (the limit is 1 MiB), each its index
// then `unit` repeated.
std::vector<std::string> near_limit(int count, const std::string& unit) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string p = "\"" + std::to_string(i);
    while (p.size() < 1'000'000) p += unit;
    out.push_back(p + "\"");
  }
  return out;
}

// Queues `payloads` in project alpha (made here) and claims them all in one
// batch, in queue order; their ids in `ids`.
std::vector<ClaimedItem> claim_all(ControlStore& store, const std::vector<std::string>& payloads,
                                   std::vector<std::string>& ids) {
  store.create_project("alpha", "A");
  ids = store.enqueue_batch("alpha", payloads);
  auto claimed = store.claim_batch("w1", payloads.size());
  REQUIRE(claimed.size() == payloads.size());
  return claimed;
}

// A report of `done` for each of `claimed`.
std::vector<ControlStore::Report> done_reports(const std::vector<ClaimedItem>& claimed) {
  std::vector<ControlStore::Report> reports;
  for (const auto& c : claimed) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
  return reports;
}

}  // namespace

TEST_CASE("a batch claim and a batch finish keep every character of payloads and details",
          "[commands][batch]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "b.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  const auto ids = store.enqueue_batch("alpha", kPayloads);
  REQUIRE(ids.size() == kPayloads.size());

  const auto claimed = store.claim_batch("w1", kPayloads.size());
  REQUIRE(claimed.size() == kPayloads.size());
  std::vector<ControlStore::Report> reports;
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    CHECK(claimed[i].item_id == ids[i]);
    CHECK(claimed[i].payload == kPayloads[i]);
    CHECK(store.item(ids[i]).status == ItemStatus::claimed);
    CHECK(store.item(ids[i]).owner == "w1");
    reports.push_back({claimed[i].item_id, claimed[i].fence,
                       i % 2 == 0 ? Outcome::done : Outcome::failed, kDetails[i]});
  }
  store.finish_batch(reports);

  for (std::size_t i = 0; i < ids.size(); ++i) {
    const ItemRow row = store.item(ids[i]);
    CHECK(row.payload == kPayloads[i]);
    CHECK(row.status == (i % 2 == 0 ? ItemStatus::done : ItemStatus::failed));
    CHECK(row.detail == kDetails[i]);
    CHECK(row.fence == 1);
    const auto events = store.events(ids[i]);
    REQUIRE(events.size() == 3);
    const auto* finished = std::get_if<ItemFinished>(&events.back().event.body);
    REQUIRE(finished != nullptr);
    CHECK(finished->detail == kDetails[i]);
  }
  // The hashes and bodies went in as bytea inside arrays: the chain holds.
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a batch finish refused for one stale fence writes nothing, then goes through whole",
          "[commands][batch][fence]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "b.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.enqueue_batch("alpha", {"{}", "{}", "{}", "{}"});
  const auto claimed = store.claim_batch("w1", 4);
  REQUIRE(claimed.size() == 4);
  std::vector<ControlStore::Report> reports;
  for (const auto& c : claimed) reports.push_back({c.item_id, c.fence, Outcome::done, "ok"});
  reports[3].fence = claimed[3].fence + 1;  // the last one is stale
  const auto before = store.events(claimed[0].item_id).size();
  CHECK_THROWS_AS(store.finish_batch(reports), FenceRejected);
  for (const auto& c : claimed) {
    CHECK(store.item(c.item_id).status == ItemStatus::claimed);
    CHECK(store.item(c.item_id).detail.empty());
  }
  CHECK(store.events(claimed[0].item_id).size() == before);
  // The connection is clean after the refusal: the next batch commits whole.
  reports[3].fence = claimed[3].fence;
  store.finish_batch(reports);
  for (const auto& c : claimed) CHECK(store.item(c.item_id).status == ItemStatus::done);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a detail that is not valid UTF-8 is accepted or refused as input, never a storage "
          "error, and a refusal writes nothing",
          "[commands][utf8]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "u.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  const auto ids = store.enqueue_batch("alpha", {"{}", "{}"});
  const auto claimed = store.claim_batch("w1", 2);
  REQUIRE(claimed.size() == 2);
  const std::string bad = "bad\xff detail";
  const auto events_before = store.events(claimed[0].item_id).size();
  // SQLite keeps the bytes; PostgreSQL's text refuses them. Either is an
  // answer a caller can act on; `io` (retry, and fail again) is not.
  bool refused = false;
  try {
    store.finish(claimed[0].item_id, claimed[0].fence, Outcome::failed, bad);
  } catch (const InvalidArgument&) {
    refused = true;
  }
  if (refused) {
    CHECK(store.events(claimed[0].item_id).size() == events_before);
    CHECK(store.item(claimed[0].item_id).status == ItemStatus::claimed);
    // The connection is usable, and the same item finishes with a good detail.
    store.finish(claimed[0].item_id, claimed[0].fence, Outcome::failed, "good");
  }
  CHECK(store.item(claimed[0].item_id).status == ItemStatus::failed);
  CHECK_NOTHROW(store.finish(claimed[1].item_id, claimed[1].fence, Outcome::done, "fine"));
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a batch claim of payloads near the 1 MiB limit goes through, its rows sent in runs",
          "[commands][batch]") {
  // 12 payloads of about 1 MB, a third of them escapes: about 12 MB of
  // values, twice that as array literals. PostgreSQL refuses a message of
  // 1 GB; the rows go in runs of at most 8 MB of values each.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "big.db");
  ControlStore store{db};
  const auto payloads = near_limit(12, "a\\\"");
  std::vector<std::string> ids;
  const auto claimed = claim_all(store, payloads, ids);
  for (std::size_t i = 0; i < claimed.size(); ++i) {
    CHECK(claimed[i].item_id == ids[i]);
    CHECK(claimed[i].payload == payloads[i]);
    const ItemRow row = store.item(ids[i]);
    CHECK(row.status == ItemStatus::claimed);
    CHECK(row.payload == payloads[i]);
    store.finish(claimed[i].item_id, claimed[i].fence, Outcome::done);
  }
  CHECK(store.status_counts("alpha").done == 12);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a batch finish of many payloads near the 1 MiB limit is not taken for a lock wait",
          "[commands][batch]") {
  // 110 rows of about 1 MB: on PostgreSQL the finish locks them and reads
  // them back, about 110 MB. A locked read that takes longer than the
  // BEGIN's round trip and 50 ms is taken for a wait on another's lock,
  // and the command decides again (at most 10 times, then busy): the
  // transfer of the rows must not count, only the locks. (SQLite reads the
  // clock once it holds the write lock, and times no read.)
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "big.db");
  if (db.rfind("postgresql://", 0) != 0) return;
  ControlStore store{db};
  const auto payloads = near_limit(110, "xxxxxxxx");
  std::vector<std::string> ids;
  const auto claimed = claim_all(store, payloads, ids);
  store.finish_batch(done_reports(claimed));
  CHECK(store.status_counts("alpha").done == 110);
  CHECK(store.item(ids.back()).payload == payloads.back());
  CHECK(verify_ledger(store).empty());
}

// PostgreSQL only: a role or database whose transactions default to read
// only (as on a hot standby), and a statement timeout set for the role.
TEST_CASE("a server that refuses writes is a storage error that says so, and nothing is written, "
          "and a role's statement timeout does not apply",
          "[commands][postgres-settings]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "ro.db");
  if (db.rfind("postgresql://", 0) != 0) return;  // SQLite has no such settings
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
  }
  {
    ControlStore store{db + "%20-cdefault_transaction_read_only%3Don"};
    try {
      store.enqueue("alpha", "{}");
      FAIL("a write went through on a connection whose transactions default to read only");
    } catch (const StorageError& e) {
      CHECK(e.category() == StorageError::Category::io);
      CHECK(std::string(e.what()).find("the server refuses writes") != std::string::npos);
    }
  }
  ControlStore store{db + "%20-cstatement_timeout%3D1"};
  CHECK(store.status_counts("alpha").ready == 0);  // the refused enqueue wrote nothing
  // With a 1 ms statement timeout of its own, cplane's writes would fail;
  // cplane's connection sets none.
  std::vector<std::string> payloads(200, "{}");
  CHECK(store.enqueue_batch("alpha", payloads).size() == 200);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a role's idle session timeout does not end a claim that waits for work",
          "[commands][postgres-settings]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "idle.db");
  if (db.rfind("postgresql://", 0) != 0) return;  // SQLite has no such settings
  {
    ControlStore store{db};
    store.create_project("alpha", "A");
  }
  // A role with idle_session_timeout (PostgreSQL 14 and later) would end
  // the connection of a claim that waits on LISTEN; cplane's connection
  // sets none, as it sets no statement timeout.
  ControlStore waiter{db + "%20-cidle_session_timeout%3D200"};
  std::string producer_error;
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    try {
      ControlStore store{db};
      store.enqueue("alpha", R"({"late":true})");
    } catch (const std::exception& e) {
      producer_error = e.what();
    }
  });
  std::optional<ClaimedItem> got;
  std::string waiter_error;
  try {
    got = waiter.claim("w1", {.wait = Seconds{10}});
  } catch (const std::exception& e) {
    waiter_error = e.what();
  }
  producer.join();
  CHECK(producer_error.empty());
  CHECK(waiter_error.empty());
  REQUIRE(got);
  CHECK(got->payload == R"({"late":true})");
  CHECK(verify_ledger(waiter).empty());
}

TEST_CASE("a transaction left open or aborted on a PostgreSQL connection is ended before the next",
          "[commands][postgres-settings]") {
  // An adversarial run: after commits failed on a lock timeout, a worker's
  // next BEGIN met "current transaction is aborted" and the worker died.
  // Whatever leaves a connection so, the next command ends that transaction
  // first, and nothing of it is committed.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "left.db");
  if (db.rfind("postgresql://", 0) != 0) return;  // SQLite's connection has no such state
  ControlStore store{db};
  store.create_project("alpha", "A");
  const auto first = store.enqueue("alpha", R"({"n":1})");
  auto& backend = testing::backend(store);
  const auto events = test::sql_column(db, "SELECT count(*) FROM events").at(0);
  SECTION("aborted: a statement failed and nobody rolled back") {
    backend.begin_write(storage::Sync::normal);
    // Not UTF-8: the server refuses the statement, and the transaction
    // it was in is aborted.
    CHECK_THROWS(backend.find_item("\xff\xfe"));
  }
  SECTION("open: begun and never ended, with a write in it") {
    backend.begin_write(storage::Sync::normal);
    auto row = backend.find_item(first);
    REQUIRE(row);
    backend.delete_item(first);
  }
  const auto second = store.enqueue("alpha", R"({"n":2})");
  CHECK(store.item(second).status == ItemStatus::ready);
  CHECK(store.item(first).status == ItemStatus::ready);  // the left write was not committed
  CHECK(std::stoll(test::sql_column(db, "SELECT count(*) FROM events").at(0)) ==
        std::stoll(events) + 1);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a slow read that waited for no row lock is not taken for a lock wait",
          "[commands][batch][postgres-settings]") {
  // Found on a busy machine: a batch enqueue of 1,000 items (its check of
  // the ids, 60 ms) was taken for a wait on another's row lock ten times
  // over, and failed busy. Here every row read costs 60 ms (a row security
  // policy that sleeps, on a role that is not a superuser, which would
  // bypass it): each locking read of a finish takes over 50 ms, waiting
  // for nobody.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "slow.db");
  if (db.rfind("postgresql://", 0) != 0) return;  // SQLite times no read
  ControlStore owner{db};
  owner.create_project("alpha", "A");
  owner.enqueue_batch("alpha", std::vector<std::string>(5, "{}"));
  const auto batch = owner.claim_batch("w1", 4);
  const auto single = owner.claim("w1");
  REQUIRE(batch.size() == 4);
  REQUIRE(single);
  const std::string schema = test::sql_column(db, "SELECT current_schema()").at(0);
  test::sql(db, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = "
                "'cplane_slow_reader') THEN CREATE ROLE cplane_slow_reader LOGIN; END IF; END $$; "
                "GRANT USAGE ON SCHEMA " + schema + " TO cplane_slow_reader; "
                "GRANT ALL ON ALL TABLES IN SCHEMA " + schema + " TO cplane_slow_reader; "
                "GRANT ALL ON ALL SEQUENCES IN SCHEMA " + schema + " TO cplane_slow_reader; "
                "CREATE FUNCTION slow_row() RETURNS boolean VOLATILE LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_sleep(0.06); RETURN true; END $$; "
                "ALTER TABLE items ENABLE ROW LEVEL SECURITY; "
                "CREATE POLICY slow ON items USING (slow_row())");
  const auto at = db.find("postgres@");
  REQUIRE(at != std::string::npos);
  std::string slow_url = db;
  slow_url.replace(at, std::string("postgres@").size(), "cplane_slow_reader@");
  {
    ControlStore slow{slow_url};
    slow.finish(single->item_id, single->fence, Outcome::done);
    slow.finish_batch(done_reports(batch));
  }
  test::sql(db, "DROP POLICY slow ON items; ALTER TABLE items DISABLE ROW LEVEL SECURITY");
  CHECK(owner.status_counts("alpha").done == 5);
  CHECK(verify_ledger(owner).empty());
}

TEST_CASE("a batch finish waits for an item another writer holds, then goes through whole",
          "[commands][batch][lock]") {
  // On PostgreSQL the batch first takes its rows without waiting; one is
  // held, so it waits for it (and for nothing else) until it is let go.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "held.db");
  ControlStore store{db};
  std::vector<std::string> ids;
  const auto claimed = claim_all(store, {"{}", "{}", "{}"}, ids);
  const auto events = test::sql_column(db, "SELECT count(*) FROM events").at(0);
  ControlStore holder{db};
  auto& backend = testing::backend(holder);
  backend.begin_write(storage::Sync::normal);
  REQUIRE(backend.find_item(ids[1]));  // on SQLite, the write lock
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(test::sql_column(db, "SELECT count(*) FROM events").at(0) == events);
    backend.rollback();
  });
  store.finish_batch(done_reports(claimed));
  release.join();
  CHECK(store.status_counts("alpha").done == 3);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("a claim or a report on PostgreSQL reads what it needs with the BEGIN: three round trips",
          "[commands][postgres-settings]") {
  // The BEGIN, the clock and the item's row or the claim's candidates
  // (locked without waiting) in one; the stream head locked and a seq
  // drawn; the writes with the COMMIT. Reading after the BEGIN took a
  // fourth.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "trips.db");
  if (db.rfind("postgresql://", 0) != 0) return;  // SQLite has no round trips
  ControlStore store{db};
  store.create_project("alpha", "A");
  store.enqueue_batch("alpha", {"{}", "{}"});
  auto& backend = testing::backend(store);
  const auto warm = store.claim("w1");  // every statement prepared once
  REQUIRE(warm);
  store.heartbeat(warm->item_id, warm->fence);
  store.finish(warm->item_id, warm->fence, Outcome::done);
  auto trips = backend.round_trips();
  const auto claimed = store.claim("w1");
  REQUIRE(claimed);
  CHECK(backend.round_trips() - trips == 3);
  trips = backend.round_trips();
  store.heartbeat(claimed->item_id, claimed->fence);
  CHECK(backend.round_trips() - trips == 3);
  trips = backend.round_trips();
  store.finish(claimed->item_id, claimed->fence, Outcome::done);
  CHECK(backend.round_trips() - trips == 3);
  // A stale fence is still refused, with nothing written; an unknown item
  // still is not found.
  CHECK_THROWS_AS(store.finish(claimed->item_id, claimed->fence, Outcome::done), FenceRejected);
  CHECK_THROWS_AS(store.finish("01a00000-0000-7000-8000-000000000000", 1, Outcome::done),
                  FenceRejected);
  CHECK(store.status_counts("alpha").done == 2);
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("the same batch reported by several writers at once: one goes through, the others are "
          "refused, none fails busy",
          "[commands][batch][lock]") {
  // An adversarial run: when a batch first took its free rows without
  // waiting and then waited for the rest, holding them, two writers of the
  // same report split the rows and waited on each other (a deadlock the
  // server breaks after a second), and with a short lock timeout a loser
  // failed busy where it is refused.
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "same.db");
  ControlStore store{db};
  store.create_project("alpha", "A");
  constexpr int kRounds = 4;
  constexpr int kWriters = 4;
  constexpr int kItems = 1000;
  int done = 0, refused = 0;
  std::vector<std::string> busy;
  for (int round = 0; round < kRounds; ++round) {
    store.enqueue_batch("alpha", std::vector<std::string>(kItems, "{}"));
    const auto reports = done_reports(store.claim_batch("w1", kItems));
    REQUIRE(reports.size() == kItems);
    std::vector<std::unique_ptr<ControlStore>> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.push_back(std::make_unique<ControlStore>(
          db, StoreOptions{.lock_timeout = std::chrono::milliseconds(500)}));
    }
    std::atomic<int> ready{0};
    std::vector<int> outcome(kWriters, 0);  // 1 done, 2 refused
    std::vector<std::string> error(kWriters);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
      threads.emplace_back([&, w] {
        ++ready;
        while (ready.load() < kWriters) std::this_thread::yield();
        try {
          writers[static_cast<std::size_t>(w)]->finish_batch(reports);
          outcome[static_cast<std::size_t>(w)] = 1;
        } catch (const FenceRejected&) {
          outcome[static_cast<std::size_t>(w)] = 2;
        } catch (const std::exception& e) {
          error[static_cast<std::size_t>(w)] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int w = 0; w < kWriters; ++w) {
      done += outcome[static_cast<std::size_t>(w)] == 1;
      refused += outcome[static_cast<std::size_t>(w)] == 2;
      if (!error[static_cast<std::size_t>(w)].empty()) busy.push_back(error[static_cast<std::size_t>(w)]);
    }
  }
  std::string errors;
  for (const auto& e : busy) errors += e + "\n";
  INFO(errors);
  CHECK(busy.empty());
  CHECK(done == kRounds);
  CHECK(refused == kRounds * (kWriters - 1));
  CHECK(store.status_counts("alpha").done == kRounds * kItems);
  CHECK(verify_ledger(store).empty());
}
