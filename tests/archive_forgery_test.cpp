// Retention against a forger (docs/retention.md): anchors, segments and rows
// edited behind cplane's back, some with the chain and the log's digest
// recomputed to match; each is named, refused or passed over.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <filesystem>
#include <functional>

#include <cplane/cplane.hpp>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "storage/log_source.hpp"
#include "storage/open.hpp"
#include "tests/archive_support.hpp"
#include "tests/support.hpp"

using namespace cplane::test::archive_fixture;

TEST_CASE("tampering with an anchor, or putting an archived stream's events back, is named by "
          "verify",
          "[archive]") {
  const auto [name, statements, kind] = GENERATE(
      std::tuple{"an anchor's fence lowered", "UPDATE anchors SET fence = 0 WHERE state = 'done'",
                 ProblemKind::digest_disagrees},
      std::tuple{"an anchor's hash edited", "UPDATE anchors SET hash = zeroblob(32) WHERE state = 'failed'",
                 ProblemKind::digest_disagrees},
      std::tuple{"an anchor deleted", "DELETE FROM anchors WHERE state = 'cancelled'",
                 ProblemKind::digest_disagrees},
      std::tuple{"an anchor's seqs cut", "UPDATE anchors SET seqs = substr(seqs, 9), events = events - 1 WHERE state = 'failed'",
                 ProblemKind::digest_disagrees},
      std::tuple{"an event of the live log deleted",
                 "DELETE FROM events WHERE seq = (SELECT max(seq) FROM events WHERE stream_kind = "
                 "'item')",
                 ProblemKind::tail_missing},
      std::tuple{"the archive's own event deleted",
                 "DELETE FROM events WHERE type = 'segment_archived'",
                 ProblemKind::stream_missing});
  INFO(name);
  TempDir dir;
  const std::string db = seed(dir);
  archive_to(db, dir.file("s.seg"));
  REQUIRE(verify_db(db).empty());
  sql(db, statements);
  const auto problems = verify_db(db);
  CHECK(test::problem_kinds(problems).contains(std::string(to_string(kind))));
}

TEST_CASE("a segment edited by one byte, cut, empty, of another store, or not a segment fails "
          "its check against the store",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("s.seg");
  archive_to(db, seg);
  const std::string other_db = seed(dir, "other.db");
  archive_to(other_db, dir.file("other.seg"));
  std::ifstream in(seg, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir.file(name), std::ios::binary) << content;
    return dir.file(name);
  };
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x01;
  {
    ControlStore store{db};
    const std::string exported = dir.file("whole.export");
    std::FILE* out = std::fopen(exported.c_str(), "wb");
    export_log(store, out);
    std::fclose(out);
  }
  for (const auto& file : {write("flip.seg", flipped), write("cut.seg", bytes.substr(0, bytes.size() - 9)),
                           write("empty.seg", ""), dir.file("other.seg"), dir.file("whole.export")}) {
    INFO(file);
    ControlStore store{db};
    CHECK_FALSE(verify_segment(store, file).problems.empty());
  }
  ControlStore store{db};
  CHECK(verify_segment(store, seg).problems.empty());
}

TEST_CASE("a row put back for an archived item is named by verify and removed by rebuild, never "
          "kept to hand out its old fences",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  archive_to(db, dir.file("a.seg"));
  const std::string archived_id = sql_column(db, "SELECT stream_id FROM anchors LIMIT 1").at(0);
  // A row copied from a live item, under the archived item's id, ready.
  sql(db, "CREATE TEMP TABLE t AS SELECT * FROM items WHERE status = 'ready' LIMIT 1; "
          "UPDATE t SET item_id = '" + archived_id + "'; INSERT INTO items SELECT * FROM t");
  REQUIRE(count(db, "items") == "4");
  CHECK_FALSE(verify_db(db).empty());
  ControlStore store{db};
  const auto report = rebuild(store);
  CHECK(report.kept_total == 0);
  CHECK(count(db, "items") == "3");
  CHECK(verify_ledger(store).empty());
}

TEST_CASE("an archived schedule's row put back outside cplane fires nothing: verify names it and "
          "rebuild removes it",
          "[archive][schedule]") {
  TempDir dir;
  const std::string db = dir.file("s.db");
  {
    ControlStore store{db};
    store.create_project("alpha", "A", "open", T0);
    store.add_schedule("gone", {.project_id = "alpha", .cron = "* * * * *", .now = T0});
    REQUIRE(store.remove_schedule("gone", T0 + 500'000));
    store.add_schedule("kept", {.project_id = "alpha", .cron = "* * * * *", .now = T0});
    REQUIRE(store.pause_schedule("kept", T0 + 600'000));
    REQUIRE(archive(store, {.before = kCut, .file = dir.file("a.seg"), .now = kNow}).schedules ==
            1);
  }
  // The archived schedule back, active and due, copied from the live one.
  sql(db, "CREATE TEMP TABLE t AS SELECT * FROM schedules WHERE name = 'kept'; "
          "UPDATE t SET name = 'gone', paused = 0; INSERT INTO schedules SELECT * FROM t");
  const auto events = sql_column(db, "SELECT count(*) FROM events").at(0);
  {
    ControlStore store{db};
    CHECK(store.tick(kNow + 300'000'000) == 0);
  }
  CHECK(sql_column(db, "SELECT count(*) FROM events").at(0) == events);
  CHECK(count(db, "items") == "0");
  CHECK_FALSE(verify_db(db).empty());
  ControlStore store{db};
  rebuild(store);
  CHECK(sql_column(db, "SELECT count(*) FROM schedules WHERE name = 'gone'").at(0) == "0");
  CHECK(verify_ledger(store).empty());
}

namespace {

// An anchor edited as a forger with the database would: its hash traded in
// the log's digest for the edited one's, so that verify cannot see it.
void forge_anchor(const std::string& db, const std::string& item_id,
                  const std::function<void(storage::StreamAnchor&)>& edit) {
  storage::StreamAnchor before, after;
  {
    auto backend = storage::open_store(db);
    auto found = backend->find_anchor({StreamKind::item, item_id});
    REQUIRE(found);
    before = after = *found;
  }
  edit(after);
  const std::string hex = sql_column(db, "SELECT hex(digest) FROM log_digest").at(0);
  Hash digest{};
  for (std::size_t i = 0; i < digest.size(); ++i) {
    digest[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  xor_into(digest, storage::anchor_hash(before));
  xor_into(digest, storage::anchor_hash(after));
  std::string seqs_hex;
  for (unsigned char c : after.seqs) seqs_hex += fmt::format("{:02x}", c);
  sql(db, fmt::format("UPDATE anchors SET idem_key = {}, fence = {}, state = '{}', events = {}, "
                      "seqs = x'{}' WHERE stream_id = '{}'; UPDATE log_digest SET digest = x'{}'",
                      after.idem_key.empty() ? std::string("NULL") : "'" + after.idem_key + "'",
                      after.fence, after.state, after.events, seqs_hex, item_id,
                      to_hex(digest)));
}

}  // namespace

TEST_CASE("an anchor whose key, fence or state is not what its segment's events fold to is "
          "named by --verify-only and audit --against, even with the digest forged to match",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("s.seg");
  archive_to(db, seg);
  const std::string keyed = sql_column(db, "SELECT stream_id FROM anchors WHERE idem_key = 'k1'").at(0);
  const std::string plain =
      sql_column(db, "SELECT stream_id FROM anchors WHERE idem_key IS NULL LIMIT 1").at(0);
  {
    ControlStore store{db};
    REQUIRE(verify_segment(store, seg).problems.empty());
  }
  forge_anchor(db, keyed, [](storage::StreamAnchor& a) { a.idem_key.clear(); });
  forge_anchor(db, plain, [](storage::StreamAnchor& a) {
    a.idem_key = "never-held";
    a.fence = 0;
    a.state = "cancelled";
  });
  ControlStore store{db};
  REQUIRE(verify_ledger(store).empty());  // the digest was forged to match
  const auto problems = verify_segment(store, seg).problems;
  REQUIRE(problems.size() == 2);
  std::string details;
  for (const auto& p : problems) {
    CHECK(p.kind == ProblemKind::head_disagrees);
    details += p.detail + "\n";
  }
  INFO(details);
  CHECK(contains(details, "key none (its events: 'k1')"));
  CHECK(contains(details, "key 'never-held' (its events: none)"));
  CHECK(contains(details, "state 'cancelled'"));
  CHECK(contains(details, "fence 0 (its events: 1)"));
  const auto audit = run_cli({"audit", seg, "--against", db});
  CHECK(audit.exit_code == 6);
  CHECK(contains(audit.out + audit.err, "is not what its events in segment"));
}

TEST_CASE("anchors that trade seqs or event counts, with the digest forged to match, are named "
          "by --verify-only, and a forged anchor of a redacted segment is refused by restore and "
          "the whole-history audit",
          "[archive]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("s.seg");
  {
    ControlStore store{db};
    REQUIRE(archive(store, {.before = kCut, .file = seg, .now = kNow, .redact_payloads = true})
                .items == 4);
  }
  const auto ids = sql_column(db, "SELECT stream_id FROM anchors ORDER BY stream_id");
  std::string seqs_a, seqs_b;
  {
    auto backend = storage::open_store(db);
    seqs_a = backend->find_anchor({StreamKind::item, ids[0]})->seqs;
    seqs_b = backend->find_anchor({StreamKind::item, ids[1]})->seqs;
  }
  REQUIRE(seqs_a != seqs_b);
  // Two anchors trade their seqs: each count and gap check still adds up.
  forge_anchor(db, ids[0], [&](storage::StreamAnchor& a) { a.seqs = seqs_b; });
  forge_anchor(db, ids[1], [&](storage::StreamAnchor& a) { a.seqs = seqs_a; });
  {
    ControlStore store{db};
    const auto problems = verify_segment(store, seg).problems;
    REQUIRE(problems.size() == 2);
    CHECK(contains(problems[0].detail + problems[1].detail, "seqs"));
  }
  forge_anchor(db, ids[0], [&](storage::StreamAnchor& a) { a.seqs = seqs_a; });
  forge_anchor(db, ids[1], [&](storage::StreamAnchor& a) { a.seqs = seqs_b; });
  // The beta item's key (released by nothing: this archive kept keys) taken
  // off its anchor: a restore would carry the forgery into a new store.
  const std::string keyed = sql_column(db, "SELECT stream_id FROM anchors WHERE idem_key = 'k1'").at(0);
  forge_anchor(db, keyed, [](storage::StreamAnchor& a) { a.idem_key.clear(); });
  {
    ControlStore store{db};
    REQUIRE(verify_ledger(store).empty());
  }
  const std::string live = dir.file("live.export");
  REQUIRE(run_cli({"--db", db, "export", live}).exit_code == 0);
  const std::string full = dir.file("full.db");
  const auto restored = run_cli({"--db", full, "restore", live, seg});
  INFO(restored.out << restored.err);
  CHECK(restored.exit_code == 2);
  CHECK(contains(restored.err, "is not what its events in segment"));
  CHECK_FALSE(fs::exists(full));
  const auto whole = run_cli({"audit", live, seg});
  CHECK(whole.exit_code == 6);
  CHECK(contains(whole.out + whole.err, "key none (its events: 'k1')"));
}

TEST_CASE("a key_released on an item that has not ended, or naming another key, is "
          "lifecycle_not_allowed",
          "[verify][sqlite]") {
  TempDir dir;
  const auto db = test_context().fresh_store(dir, "control.db");
  std::string live, ended;
  {
    ControlStore store(db);
    store.create_project("alpha", "A", "open", T0);
    ControlStore::EnqueueOptions keyed;
    keyed.key = "k-ended";
    keyed.now = T0 + 1;
    ended = store.enqueue("alpha", "{}", keyed);
    auto c = store.claim("w", {.now = T0 + 2});
    REQUIRE(c);
    REQUIRE(c->item_id == ended);
    store.finish(ended, c->fence, Outcome::done, "", T0 + 3);
    keyed.key = "k-live";
    keyed.now = T0 + 4;
    live = store.enqueue("alpha", "{}", keyed);
    REQUIRE(verify_ledger(store).empty());
  }
  auto forge = [&](const std::string& id, const std::string& key) {
    std::string hex;
    for (unsigned char c : encode(Event{T0 + 10, "", "alpha", id, KeyReleased{key}})) {
      hex += fmt::format("{:02x}", c);
    }
    cplane::test::forged_sql(
        db, "INSERT INTO events (item_id, project_id, type, at, body, stream_kind, stream_id) "
            "VALUES ('" + id + "', 'alpha', 'key_released', " + std::to_string(T0 + 10) +
                ", x'" + hex + "', 'item', '" + id + "')");
  };
  forge(live, "k-live");    // still ready
  forge(ended, "k-other");  // not the key it holds
  ControlStore store(db);
  const auto problems = verify_ledger(store);
  std::vector<std::string> named;
  for (const auto& p : problems) {
    if (p.kind == ProblemKind::lifecycle_not_allowed) named.push_back(p.detail);
  }
  REQUIRE(named.size() == 2);
  CHECK(contains(named[0] + named[1], "while it was ready"));
  CHECK(contains(named[0] + named[1], "k-other"));
}
