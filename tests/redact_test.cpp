// Redacted segments (archive --redact-payloads, docs/retention.md): chain 2
// covers each payload by its digest, so a segment can hold the digest
// alone and its chain is still checked; what such a segment can and cannot
// be used for, and what a forger who edits one is told.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cplane/cplane.hpp>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "events/events.capnp.h"
#include "events/export.capnp.h"
#include "tests/support.hpp"

namespace {

using namespace cplane;
using cplane::test::forged_sql;
using cplane::test::read_file;
using cplane::test::run_cli;
using cplane::test::sql_column;
using cplane::test::TempDir;
namespace fs = std::filesystem;

constexpr Micros T0 = 1'700'000'000'000'000;
constexpr Micros kCut = T0 + 1'000'000;
constexpr Micros kNow = T0 + 10'000'000;
const std::string kSecret = "s3cret-of-a-person";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

kj::Array<capnp::word> words_of(std::string_view bytes) {
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  return words;
}

std::string bytes_of(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  return std::string(words.asChars().begin(), words.asChars().size());
}

// The same body with its chain field set to `chain` (0: as every event
// before chain 2 was written).
std::string with_chain(const std::string& body, std::uint8_t chain) {
  auto words = words_of(body);
  capnp::FlatArrayMessageReader reader(words);
  capnp::MallocMessageBuilder copy;
  copy.setRoot(reader.getRoot<wire::Event>());
  copy.getRoot<wire::Event>().setChain(chain);
  return bytes_of(copy);
}

Event item_event(EventBody body) {
  Event e;
  e.at = T0;
  e.project_id = "p";
  e.item_id = "i1";
  e.body = std::move(body);
  return e;
}

Event queued(const std::string& payload) {
  ItemQueued q;
  q.payload = payload;
  return item_event(q);
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

std::string unhex(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
  }
  return out;
}

// Items in two projects: in alpha three ended before kCut with a personal
// payload each, one ended after; in beta one cancelled before kCut.
std::string seed(const TempDir& dir) {
  const std::string db = dir.file("a.db");
  ControlStore store{db};
  store.create_project("alpha", "A", "open", T0);
  store.create_project("beta", "B", "open", T0 + 1);
  for (int i = 0; i < 4; ++i) {
    store.enqueue("alpha", fmt::format(R"({{"who": "{}-{}"}})", kSecret, i), {}, T0 + 10 + i);
  }
  const std::string beta = store.enqueue("beta", R"({"who": "s3cret-of-a-person-b"})", {}, T0 + 20);
  for (int i = 0; i < 3; ++i) {
    auto c = store.claim("w", {.now = T0 + 100 + i, .fair = false});
    REQUIRE(c);
    store.finish(c->item_id, c->fence, Outcome::done, "", T0 + 200 + i);
  }
  store.cancel(beta, "", {.now = T0 + 300});
  auto late = store.claim("w", {.now = kCut + 10, .fair = false});
  store.finish(late->item_id, late->fence, Outcome::done, "", kCut + 20);
  return db;
}

std::vector<std::string> snapshot(const std::string& db) { return cplane::test::archive_snapshot(db); }

// A segment rewritten record by record, each event through `edit`, and
// its footer's content hash made anew: what a forger who knows the format
// does, so that only the chain can tell.
void rewrite_segment(const std::string& path,
                     const std::function<void(wire::ExportRecord::Builder)>& edit) {
  const std::string bytes = read_file(path);
  auto words = words_of(bytes);
  kj::ArrayPtr<const capnp::word> rest = words;
  std::string out;
  Hasher hasher;
  while (rest.size() > 0) {
    capnp::FlatArrayMessageReader reader(rest);
    capnp::MallocMessageBuilder copy;
    copy.setRoot(reader.getRoot<wire::ExportRecord>());
    auto record = copy.getRoot<wire::ExportRecord>();
    rest = kj::arrayPtr(reader.getEnd(), rest.end());
    if (record.isFooter()) {
      const Hash content = hasher.done();
      record.getFooter().setContentHash(
          capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(content.data()), content.size()));
      out += bytes_of(copy);
      break;
    }
    edit(record);
    const std::string written = bytes_of(copy);
    hasher.add(written);
    out += written;
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(out.data(), 1, out.size(), f) == out.size());
  std::fclose(f);
}

// rewrite_segment, editing only the first event whose payload is redacted.
void edit_first_redacted(const std::string& path,
                         const std::function<void(wire::ExportEvent::Builder)>& edit) {
  bool done = false;
  rewrite_segment(path, [&](wire::ExportRecord::Builder record) {
    if (!record.isEvent() || done || !record.getEvent().hasPayloadHash()) return;
    done = true;
    edit(record.getEvent());
  });
  REQUIRE(done);
}

}  // namespace

TEST_CASE("chain 2 covers a payload by its digest: a redacted body checks, and every other edit "
          "breaks its hash",
          "[chain][redact]") {
  const std::string body = encode(queued(R"({"who": "s3cret"})"));
  const ChainForm form = chain_form(body);
  CHECK(form.chain == 2);
  REQUIRE(form.has_payload);
  CHECK(body.substr(form.payload_at, form.payload_size) == R"({"who": "s3cret"})");
  const Hash h = chain_hash(kNoHash, 7, 1, "item", "i1", body);

  const auto redacted = redact_payload(body);
  REQUIRE(redacted);
  CHECK(redacted->body.size() == body.size());
  CHECK_FALSE(contains(redacted->body, "s3cret"));
  const std::string digest(as_bytes(redacted->payload_hash));
  CHECK(stored_chain_hash(kNoHash, 7, 1, "item", "i1", redacted->body, digest) == h);
  // The redacted body still decodes, with JSON where the payload was.
  const Event back = decode(redacted->body);
  CHECK(std::get<ItemQueued>(back.body).payload == "null             ");

  // Another digest, the filler read as the payload, a byte of the rest of
  // the body, the place in the log: each a different hash.
  std::string other = digest;
  other[0] = static_cast<char>(other[0] ^ 1);
  CHECK(stored_chain_hash(kNoHash, 7, 1, "item", "i1", redacted->body, other) != h);
  CHECK(stored_chain_hash(kNoHash, 7, 1, "item", "i1", redacted->body, "") != h);
  CHECK(stored_chain_hash(kNoHash, 8, 1, "item", "i1", redacted->body, digest) != h);
  // Every byte outside the payload and its salt is covered.
  REQUIRE(form.salt_size == 16);
  for (std::size_t at = 0; at < body.size(); ++at) {
    if ((at >= form.payload_at && at < form.payload_at + form.payload_size) ||
        (at >= form.salt_at && at < form.salt_at + form.salt_size)) {
      continue;
    }
    CAPTURE(at);
    std::string edited = redacted->body;
    edited[at] = static_cast<char>(edited[at] ^ 1);
    CHECK(stored_chain_hash(kNoHash, 7, 1, "item", "i1", edited, digest) != h);
  }
  // Only the filler may stand where the payload and the salt were: other
  // JSON of the same length there, or a salt kept, is no redacted body.
  std::string other_json = redacted->body;
  other_json.replace(form.payload_at, form.payload_size, R"({"who": "m4llory"})");
  CHECK_FALSE(stored_chain_hash(kNoHash, 7, 1, "item", "i1", other_json, digest));
  std::string salt_kept = redacted->body;
  salt_kept.replace(form.salt_at, form.salt_size, body.substr(form.salt_at, form.salt_size));
  CHECK_FALSE(stored_chain_hash(kNoHash, 7, 1, "item", "i1", salt_kept, digest));
  // The salt: the same event encoded twice gets another digest, so a
  // digest cannot be matched against a guessed payload.
  const auto again = redact_payload(encode(queued(R"({"who": "s3cret"})")));
  REQUIRE(again);
  CHECK(again->payload_hash != redacted->payload_hash);
  // A digest that is not 32 bytes is no hash at all.
  CHECK_FALSE(stored_chain_hash(kNoHash, 7, 1, "item", "i1", redacted->body, "short"));

  // A payload under four bytes is filled with a JSON number.
  const auto tiny = redact_payload(encode(queued("1")));
  REQUIRE(tiny);
  CHECK(std::get<ItemQueued>(decode(tiny->body).body).payload == "0");

  // A kind without a payload: nothing to redact, and no redacted form.
  ItemClaimed claim;
  claim.owner = "w";
  claim.fence = 1;
  const std::string claim_body = encode(item_event(claim));
  CHECK(chain_form(claim_body).chain == 2);
  CHECK_FALSE(chain_form(claim_body).has_payload);
  CHECK(chain_form(with_chain(claim_body, 0)).chain == 1);
  CHECK(chain_form(with_chain(claim_body, 7)).chain != 2);
  CHECK_FALSE(redact_payload(claim_body));
  CHECK_FALSE(stored_chain_hash(kNoHash, 7, 1, "item", "i1", claim_body, digest));

  // Chain 1 (a body written before chain 2): hashed over its bytes, under
  // another personalisation; its payload cannot be redacted. Flipping the
  // chain field changes the hash either way.
  const std::string old = with_chain(body, 0);
  CHECK(chain_form(old).chain == 1);
  CHECK(chain_hash(kNoHash, 7, 1, "item", "i1", old) != h);
  CHECK_THROWS_AS(redact_payload(old), InvalidArgument);
  CHECK_FALSE(redact_payload(with_chain(claim_body, 0)));
  CHECK_FALSE(stored_chain_hash(kNoHash, 7, 1, "item", "i1", old, digest));
  // An unreadable body is chain 1, and has nothing to redact.
  CHECK(chain_form("not a body").chain == 1);
  CHECK_FALSE(redact_payload(std::string(16, '\xff')));
}

TEST_CASE("a payload edited in the live store is named: chain 2 covers it", "[chain][redact]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seq = sql_column(db, "SELECT min(seq) FROM events WHERE type = 'queued'").at(0);
  const std::string body = unhex(sql_column(db, "SELECT hex(body) FROM events WHERE seq = " + seq).at(0));
  Event e = decode(body);
  std::get<ItemQueued>(e.body).payload = R"({"who": "someone else"})";
  cplane::test::sql(db, fmt::format("UPDATE events SET body = x'{}' WHERE seq = {}", hex(encode(e)), seq));
  ControlStore store{db};
  const auto problems = verify_ledger(store);
  CHECK(cplane::test::problem_kinds(problems).contains("event_edited"));
}

TEST_CASE("archive --redact-payloads: the segment holds no payload, audit checks its chain and "
          "says so, restore keeps its streams anchored, and the whole history still audits",
          "[archive][redact][cli]") {
  TempDir dir;
  const std::string db = seed(dir);
  const std::string seg = dir.file("r.seg");
  const std::string plain = dir.file("b.seg");
  const std::string cut = std::to_string(kCut);
  const std::string now = std::to_string(kNow);
  // beta's stream in a plain segment, then alpha's three redacted.
  REQUIRE(run_cli({"archive", "--db", db, "--before", cut, "--project", "beta", "--to", plain,
                   "--now", now})
              .exit_code == 0);
  const auto done = run_cli({"archive", "--db", db, "--before", cut, "--to", seg,
                             "--redact-payloads", "--json", "--now", now});
  INFO(done.out << done.err);
  REQUIRE(done.exit_code == 0);
  CHECK(contains(done.out, "\"streams\":3"));
  CHECK(contains(done.out, "\"redact_payloads\":true"));
  CHECK(contains(done.out, "\"redacted\":3"));
  CHECK_FALSE(contains(read_file(seg), "s3cret"));
  CHECK(run_cli({"verify", "--db", db}).exit_code == 0);

  const auto audit = run_cli({"audit", seg});
  INFO(audit.out << audit.err);
  CHECK(audit.exit_code == 0);
  CHECK(contains(audit.out, "payloads redacted: 3 event(s)"));
  const auto audit_json = run_cli({"audit", seg, "--json"});
  CHECK(contains(audit_json.out, "\"redacted_payloads\":3"));
  CHECK(run_cli({"audit", seg, "--against", db}).exit_code == 0);
  CHECK(run_cli({"archive", "--db", db, "--verify-only", seg}).exit_code == 0);

  const std::string exported = dir.file("live.cpx");
  REQUIRE(run_cli({"--db", db, "export", exported}).exit_code == 0);
  const auto whole = run_cli({"audit", exported, seg, plain, "--json"});
  INFO(whole.out << whole.err);
  CHECK(whole.exit_code == 0);
  CHECK(contains(whole.out, "\"problems\":[]"));

  SECTION("restore brings the plain segment's streams back and keeps the redacted one's anchored") {
    const std::string target = dir.file("r.db");
    const auto r = run_cli({"restore", exported, seg, plain, "--db", target, "--json"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "\"kept_anchored\":3"));
    CHECK(sql_column(target, "SELECT count(*) FROM anchors").at(0) == "3");
    CHECK(sql_column(target, "SELECT count(*) FROM anchors WHERE project_id = 'beta'").at(0) == "0");
    CHECK(run_cli({"verify", "--db", target}).exit_code == 0);
    CHECK(run_cli({"archive", "--db", target, "--verify-only", seg}).exit_code == 0);
    // Without the plain segment: the export names it, so it is missing.
    const auto missing = run_cli({"restore", exported, seg, "--db", dir.file("r2.db")});
    CHECK(missing.exit_code == 2);
    CHECK(contains(missing.err, "not given"));
    CHECK_FALSE(fs::exists(dir.file("r2.db")));
  }
  SECTION("filler rewritten to other JSON, footer made anew: the chain names it, and the whole "
          "history and restore see the segment is not the one the anchors name") {
    const std::string forged = dir.file("filler.seg");
    fs::copy_file(seg, forged);
    edit_first_redacted(forged, [](wire::ExportEvent::Builder e) {
      std::string body(reinterpret_cast<const char*>(e.getBody().begin()), e.getBody().size());
      const ChainForm form = chain_form(body);
      body.replace(form.payload_at, form.payload_size,
                   std::string(R"({"x":1})").append(form.payload_size - 7, ' '));
      e.setBody(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(body.data()), body.size()));
    });
    const auto r = run_cli({"audit", forged, "--json"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 6);
    CHECK(contains(r.out, "\"kind\":\"event_edited\""));
    const auto history = run_cli({"audit", exported, forged, plain});
    INFO(history.out << history.err);
    CHECK(history.exit_code == 6);
    const auto restored = run_cli({"restore", exported, forged, plain, "--db", dir.file("r3.db")});
    INFO(restored.out << restored.err);
    CHECK(restored.exit_code == 2);
    CHECK(contains(restored.err, "not the file the export's anchors name"));
    CHECK_FALSE(fs::exists(dir.file("r3.db")));
  }
  SECTION("a forged payload digest is named by the chain; a digest taken away, by the reader") {
    for (int how = 0; how < 2; ++how) {
      CAPTURE(how);
      const std::string forged = dir.file(fmt::format("forged{}.seg", how));
      fs::copy_file(seg, forged);
      edit_first_redacted(forged, [&](wire::ExportEvent::Builder e) {
        if (how == 0) {
          std::string d(reinterpret_cast<const char*>(e.getPayloadHash().begin()),
                        e.getPayloadHash().size());
          d[3] = static_cast<char>(d[3] ^ 1);
          e.setPayloadHash(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(d.data()), d.size()));
        } else {
          e.disownPayloadHash();
        }
      });
      const auto r = run_cli({"audit", forged, "--json"});
      INFO(r.out << r.err);
      if (how == 0) {
        CHECK(r.exit_code == 6);
        CHECK(contains(r.out, "\"kind\":\"event_edited\""));
      } else {
        // The filler would be read as the payload: a file cplane never writes.
        CHECK(r.exit_code == 1);
        CHECK(contains(r.err, "whole: it was not written by cplane archive"));
      }
      CHECK(run_cli({"archive", "--db", db, "--verify-only", forged}).exit_code != 0);
    }
  }
  SECTION("a segment that differs from its record only in its bytes is named once, by its digest") {
    const std::string forged = dir.file("header.seg");
    fs::copy_file(seg, forged);
    rewrite_segment(forged, [](wire::ExportRecord::Builder record) {
      if (record.isHeader()) record.getHeader().setExportedAt(record.getHeader().getExportedAt() + 1);
    });
    const auto r = run_cli({"archive", "--db", db, "--verify-only", forged, "--json"});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 6);
    CHECK(contains(r.out, "digest_disagrees"));
    CHECK_FALSE(contains(r.out, "head_disagrees"));
  }
  SECTION("a segment whose header hides its redaction is not cplane's: audit and restore refuse "
          "it") {
    const std::string forged = dir.file("hidden.seg");
    fs::copy_file(seg, forged);
    rewrite_segment(forged, [&](wire::ExportRecord::Builder record) {
      if (record.isHeader()) record.getHeader().setPayloadsRedacted(false);
    });
    const auto audited = run_cli({"audit", forged});
    INFO(audited.out << audited.err);
    CHECK(audited.exit_code == 1);
    CHECK(contains(audited.err, "does not say its payloads are redacted"));
    const auto r = run_cli({"restore", exported, forged, plain, "--db", dir.file("r4.db")});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK_FALSE(fs::exists(dir.file("r4.db")));
  }
}

TEST_CASE("archive --redact-payloads refuses events written before chain 2, and changes nothing",
          "[archive][redact]") {
  TempDir dir;
  const std::string db = seed(dir);
  // The first item's queued event as an older cplane wrote it (chain 1),
  // its chain recomputed: a store upgraded from before chain 2.
  const std::string seq = sql_column(db, "SELECT min(seq) FROM events WHERE type = 'queued'").at(0);
  const std::string body = unhex(sql_column(db, "SELECT hex(body) FROM events WHERE seq = " + seq).at(0));
  forged_sql(db, fmt::format("UPDATE events SET body = x'{}' WHERE seq = {}", hex(with_chain(body, 0)), seq));
  REQUIRE(run_cli({"verify", "--db", db}).exit_code == 0);
  const auto before = snapshot(db);
  const auto r = run_cli({"archive", "--db", db, "--before", std::to_string(kCut), "--to",
                          dir.file("r.seg"), "--redact-payloads", "--now", std::to_string(kNow)});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "before chain 2"));
  CHECK(snapshot(db) == before);
  CHECK_FALSE(fs::exists(dir.file("r.seg")));
  CHECK_FALSE(fs::exists(dir.file("r.seg.tmp")));
  // Without redaction it archives, and the old event's chain checks.
  const auto plain = run_cli({"archive", "--db", db, "--before", std::to_string(kCut), "--to",
                              dir.file("p.seg"), "--now", std::to_string(kNow)});
  INFO(plain.out << plain.err);
  CHECK(plain.exit_code == 0);
  CHECK(run_cli({"audit", dir.file("p.seg"), "--against", db}).exit_code == 0);
  // --verify-only takes no archive flags.
  CHECK(run_cli({"archive", "--db", db, "--verify-only", dir.file("p.seg"), "--redact-payloads"})
            .exit_code == 2);
}
