#include "recovery/export.hpp"

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>

#include <cplane/version.hpp>

#include "events/chain.hpp"
#include "events/clock.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"
#include "events/events.capnp.h"
#include "events/export.capnp.h"
#include "verify/chain_check.hpp"
#include "recovery/anchor_fold.hpp"
#include "recovery/archive.hpp"
#include "recovery/export_reader.hpp"
#include "verify/quote.hpp"

namespace cplane {

namespace {

constexpr std::int64_t kProgressEvery = 65536;
using export_format::damaged;
using export_format::kEventsSchemaId;
using export_format::Reader;
capnp::Data::Reader as_data(std::string_view s) {
  return {reinterpret_cast<const capnp::byte*>(s.data()), s.size()};
}

// ---- writing -------------------------------------------------------------------

class Writer {
 public:
  // `what` names the file in errors: "the export", "the segment".
  Writer(std::FILE* out, std::string what) : out_(out), what_(std::move(what)) {}

  void write(capnp::MessageBuilder& message, bool hashed = true) {
    auto words = capnp::messageToFlatArray(message);
    auto raw = words.asChars();
    if (hashed) hasher_.add(std::string_view(raw.begin(), raw.size()));
    if (std::fwrite(raw.begin(), 1, raw.size(), out_) != raw.size()) {
      throw StorageError(StorageError::Category::io,
                         fmt::format("cannot write {}: {}", what_, std::strerror(errno)));
    }
  }
  Hash content_hash() { return hasher_.done(); }
  const std::string& what() const { return what_; }

 private:
  std::FILE* out_;
  std::string what_;
  Hasher hasher_;
};

void put_event(Writer& w, const storage::RawEvent& e, const std::string* prev_hash) {
  capnp::MallocMessageBuilder message(256 + e.body.size() / sizeof(capnp::word));
  auto ev = message.initRoot<wire::ExportRecord>().initEvent();
  ev.setSeq(e.seq);
  ev.setStreamKind(e.stream_kind);
  ev.setStreamId(e.stream_id);
  ev.setRevision(e.revision);
  ev.setHash(as_data(e.hash));
  ev.setItemId(e.item_id);
  ev.setProjectId(e.project_id);
  ev.setType(e.type);
  ev.setAt(e.at);
  ev.setBody(as_data(e.body));
  if (prev_hash != nullptr) ev.setPrevHash(as_data(*prev_hash));
  if (!e.payload_hash.empty()) ev.setPayloadHash(as_data(e.payload_hash));
  w.write(message);
}

void put_head(Writer& w, const storage::StreamHead& h) {
  capnp::MallocMessageBuilder message(64);
  auto head = message.initRoot<wire::ExportRecord>().initHead();
  head.setStreamKind(h.stream_kind);
  head.setStreamId(h.stream_id);
  head.setRevision(h.revision);
  head.setLastSeq(h.last_seq);
  head.setHash(as_data(h.hash));
  w.write(message);
}

void put_anchor(Writer& w, const storage::StreamAnchor& a) {
  capnp::MallocMessageBuilder message(128 + a.seqs.size() / sizeof(capnp::word));
  auto r = message.initRoot<wire::ExportRecord>().initAnchor();
  r.setStreamKind(a.stream_kind);
  r.setStreamId(a.stream_id);
  r.setRevision(a.revision);
  r.setLastSeq(a.last_seq);
  r.setHash(as_data(a.hash));
  r.setEvents(a.events);
  r.setSeqs(as_data(a.seqs));
  r.setProjectId(a.project_id);
  r.setState(a.state);
  r.setFence(a.fence);
  r.setIdemKey(a.idem_key);
  r.setEndedAt(a.ended_at);
  r.setSegmentId(a.segment_id);
  r.setSegmentDigest(as_data(a.segment_digest));
  w.write(message);
}

bool has_anchors(storage::LogSource& log) {
  storage::StreamAnchor a;
  for (const StreamKind kind : kStreamKinds) {
    if (log.scan_anchors(kind)->next(a)) return true;
  }
  return false;
}

}  // namespace

namespace {
ExportSummary write_export(storage::LogSource& log, std::FILE* out, const ExportOptions& options,
                           const std::string& segment_id, bool payloads_redacted);
}  // namespace

ExportSummary export_log(storage::LogSource& log, std::FILE* out, const ExportOptions& options) {
  return write_export(log, out, options, std::string(), false);
}

ExportSummary export_segment(storage::LogSource& log, std::FILE* out, const std::string& segment_id,
                             bool payloads_redacted) {
  return write_export(log, out, ExportOptions{}, segment_id, payloads_redacted);
}

namespace {
ExportSummary write_export(storage::LogSource& log, std::FILE* out, const ExportOptions& options,
                           const std::string& segment_id, bool payloads_redacted) {
  if (options.since < 0) throw InvalidArgument("--since must not be negative");
  auto tx = storage::Transaction::read(log);
  ExportSummary summary;
  const std::int64_t total = log.event_count();
  const auto digest = log.log_digest();
  Writer w(out, segment_id.empty() ? "the export" : "the segment");
  const bool anchored = has_anchors(log);
  {
    capnp::MallocMessageBuilder message(128);
    auto h = message.initRoot<wire::ExportRecord>().initHeader();
    h.setFormatVersion(anchored ? kExportFormatVersion : 1);
    h.setSchemaId(kEventsSchemaId);
    h.setSourceDatabase(log.database_id());
    h.setSinceSeq(options.since);
    h.setHasDigest(digest.has_value());
    if (digest) {
      h.setLogEvents(digest->events);
      h.setLogLastSeq(digest->last_seq);
      h.setLogDigest(as_data(digest->digest));
      Hash d{};
      if (hash_from_bytes(digest->digest, d)) summary.chain_head = to_hex(d);
    }
    h.setDenseSeqs(log.seqs_dense());
    h.setExportedAt(now_micros());
    h.setCplaneVersion(kVersion);
    h.setSegmentId(segment_id);
    h.setPayloadsRedacted(payloads_redacted);
    // The number of events written is known only at the end: the header
    // gives the log's count for a whole export (the footer the file's).
    h.setEventCount(options.since == 0 ? total : -1);
    w.write(message);
  }
  std::int64_t read = 0;
  auto tick = [&] {
    if (++read % kProgressEvery == 0 && options.progress) options.progress(read, total);
  };
  // Each stream's events, then its head, merged on the stream id.
  for (const StreamKind kind : kStreamKinds) {
    auto events = log.scan_stream(kind);
    auto heads = log.scan_heads(kind);
    auto anchors = log.scan_anchors(kind);
    storage::RawEvent raw;
    storage::StreamHead head;
    storage::StreamAnchor anchor;
    bool have_event = events->next(raw);
    bool have_head = heads->next(head);
    bool have_anchor = anchored && anchors->next(anchor);
    std::string prev_hash;  // the last skipped event's hash (--since)
    std::string stream;
    bool first_exported = false;
    while (have_event || have_head || have_anchor) {
      // An archived stream's anchor goes where its events would have.
      if (have_anchor && (!have_event || anchor.stream_id <= raw.stream_id) &&
          (!have_head || anchor.stream_id <= head.stream_id)) {
        put_anchor(w, anchor);
        ++summary.anchors;
        have_anchor = anchors->next(anchor);
      } else if (have_event && (!have_head || raw.stream_id <= head.stream_id)) {
        if (raw.stream_id != stream) {
          stream = raw.stream_id;
          prev_hash.clear();
          first_exported = false;
        }
        tick();
        if (raw.seq > options.since) {
          put_event(w, raw, options.since > 0 && !first_exported && raw.revision > 1 ? &prev_hash : nullptr);
          first_exported = true;
          ++summary.events;
        } else {
          prev_hash = raw.hash;
        }
        have_event = events->next(raw);
      } else {
        put_head(w, head);
        ++summary.heads;
        have_head = heads->next(head);
      }
    }
  }
  // Whatever is filed under a stream kind this build does not know.
  {
    auto events = log.scan_unfiled();
    storage::RawEvent raw;
    while (events->next(raw)) {
      tick();
      if (raw.seq > options.since) {
        put_event(w, raw, nullptr);
        ++summary.events;
      }
    }
    for (const auto& head : log.unfiled_heads()) {
      put_head(w, head);
      ++summary.heads;
    }
  }
  tx.commit();
  {
    capnp::MallocMessageBuilder message(64);
    auto f = message.initRoot<wire::ExportRecord>().initFooter();
    f.setEvents(summary.events);
    f.setHeads(summary.heads);
    const Hash content = w.content_hash();
    f.setContentHash(as_data(as_bytes(content)));
    w.write(message, false);
  }
  if (std::fflush(out) != 0) {
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot write {}: {}", w.what(), std::strerror(errno)));
  }
  if (options.progress) options.progress(read, total);
  return summary;
}

// ---- the export as a log -------------------------------------------------------

// Presents an export to verify as a log source whose log is the file:
// events and heads of each stream kind come out of the one sequential reader
// in the order verify asks for them (the file is written in that order), so
// that only one stream's records are ever held. The rows verify compares
// with are another database's (audit --against), whose read snapshot this
// log's transaction is, or there are none.
class ExportLog final : public storage::LogSource {
 public:
  ExportLog(Reader& reader, storage::Backend* against) : reader_(reader), against_(against) {}

  void begin_read() override {
    if (against_ != nullptr) against_->begin_read();
  }
  void commit() override {
    if (against_ != nullptr) against_->commit();
  }
  void rollback() noexcept override {
    if (against_ != nullptr) against_->rollback();
  }

  std::unique_ptr<storage::Cursor<storage::RawEvent>> scan_stream(StreamKind kind) override {
    return std::make_unique<EventCursor>(*this, std::string(to_string(kind)));
  }
  std::unique_ptr<storage::Cursor<storage::StreamHead>> scan_heads(StreamKind kind) override {
    return std::make_unique<HeadCursor>(*this, std::string(to_string(kind)));
  }
  std::unique_ptr<storage::Cursor<storage::RawEvent>> scan_unfiled() override {
    return std::make_unique<EventCursor>(*this, std::string());
  }
  std::unique_ptr<storage::Cursor<storage::StreamAnchor>> scan_anchors(StreamKind kind) override {
    return std::make_unique<AnchorCursor>(*this, std::string(to_string(kind)));
  }
  std::vector<storage::StreamHead> unfiled_heads() override {
    std::vector<storage::StreamHead> out;
    while (!heads_.empty()) {
      out.push_back(std::move(heads_.front()));
      heads_.pop_front();
    }
    while (reader_.kind() == Reader::Kind::head) {
      out.push_back(reader_.head());
      reader_.advance();
    }
    return out;
  }
  std::optional<storage::LogDigest> log_digest() override { return reader_.header().digest; }
  std::string database_id() override { return reader_.header().source; }
  bool seqs_dense() override { return reader_.header().dense; }
  std::int64_t event_count() override { return std::max<std::int64_t>(reader_.header().event_count, 0); }
  bool partial_history() override { return !reader_.header().segment_id.empty(); }

 private:
  // Records of stream kind `kind` ("" for kinds this build does not know),
  // in file order: events of it wait in events_, heads in heads_, until
  // their cursor asks. A record of a later section stops both.
  bool pull(const std::string& kind) {
    if (reader_.kind() == Reader::Kind::end) return false;
    const auto& record_kind = reader_.kind() == Reader::Kind::event    ? reader_.event().stream_kind
                              : reader_.kind() == Reader::Kind::anchor ? reader_.anchor().stream_kind
                                                                       : reader_.head().stream_kind;
    if (!in_section(record_kind, kind)) return false;
    if (reader_.kind() == Reader::Kind::event) {
      events_.push_back(reader_.event());
    } else if (reader_.kind() == Reader::Kind::anchor) {
      anchors_.push_back(reader_.anchor());
    } else {
      heads_.push_back(reader_.head());
    }
    reader_.advance();
    return true;
  }

  static bool in_section(const std::string& record_kind, const std::string& kind) {
    if (!kind.empty()) return record_kind == kind;
    return !parse_stream_kind(record_kind).has_value();
  }

  struct EventCursor final : storage::Cursor<storage::RawEvent> {
    EventCursor(ExportLog& log, std::string kind) : log(log), kind(std::move(kind)) {}
    bool next(storage::RawEvent& out) override {
      while (log.events_.empty()) {
        if (!log.pull(kind)) return false;
      }
      out = std::move(log.events_.front());
      log.events_.pop_front();
      return true;
    }
    ExportLog& log;
    std::string kind;
  };
  struct HeadCursor final : storage::Cursor<storage::StreamHead> {
    HeadCursor(ExportLog& log, std::string kind) : log(log), kind(std::move(kind)) {}
    bool next(storage::StreamHead& out) override {
      while (log.heads_.empty()) {
        if (!log.pull(kind)) return false;
      }
      out = std::move(log.heads_.front());
      log.heads_.pop_front();
      return true;
    }
    ExportLog& log;
    std::string kind;
  };

  struct AnchorCursor final : storage::Cursor<storage::StreamAnchor> {
    AnchorCursor(ExportLog& log, std::string kind) : log(log), kind(std::move(kind)) {}
    bool next(storage::StreamAnchor& out) override {
      while (log.anchors_.empty()) {
        if (!log.pull(kind)) return false;
      }
      out = std::move(log.anchors_.front());
      log.anchors_.pop_front();
      return true;
    }
    ExportLog& log;
    std::string kind;
  };

  Reader& reader_;
  storage::Backend* against_;
  std::deque<storage::RawEvent> events_;
  std::deque<storage::StreamHead> heads_;
  std::deque<storage::StreamAnchor> anchors_;
};

// A partial export (--since): only the chain can be checked, each stream
// from the hash its first exported event follows.
void audit_partial(Reader& reader, AuditReport& report, const Progress& progress) {
  std::optional<StreamChain> chain;
  std::string kind, id;
  bool headed = false;
  auto close = [&] {
    if (chain && !headed) chain->finish(nullptr, report.problems);
    chain.reset();
  };
  while (reader.kind() != Reader::Kind::end) {
    if (reader.kind() == Reader::Kind::event) {
      const auto& e = reader.event();
      if (!chain || e.stream_kind != kind || e.stream_id != id) {
        close();
        kind = e.stream_kind;
        id = e.stream_id;
        headed = false;
        chain.emplace(kind, id);
        if (!reader.prev_hash().empty()) chain->anchor(e.revision - 1, reader.prev_hash());
      }
      chain->add(e, report.problems);
      auto& s = report.summary;
      if (s.first_seq == 0 || e.seq < s.first_seq) s.first_seq = e.seq;
      s.last_seq = std::max(s.last_seq, e.seq);
      if (s.first_at == 0 || e.at < s.first_at) s.first_at = e.at;
      s.last_at = std::max(s.last_at, e.at);
      if (reader.events() % kProgressEvery == 0 && progress) progress(reader.events(), 0);
    } else if (reader.kind() == Reader::Kind::head) {
      const auto& h = reader.head();
      if (chain && h.stream_kind == kind && h.stream_id == id) {
        chain->finish(&h, report.problems);
        headed = true;
      }
      // A head with no exported events: its stream did not change since.
    }
    reader.advance();
  }
  close();
  report.summary.events = reader.events();
  report.summary.heads = reader.heads();
}

std::string hex_of(const std::string& bytes) {
  Hash h{};
  return hash_from_bytes(bytes, h) ? to_hex(h) : std::string("(not 32 bytes)");
}

}  // namespace

AuditReport audit_export(std::FILE* in, storage::Backend* against, const Progress& progress) {
  Reader reader(in);
  AuditReport report;
  report.summary.since = reader.header().since;
  report.summary.source_database = reader.header().source;
  if (reader.header().digest) {
    Hash h{};
    if (hash_from_bytes(reader.header().digest->digest, h)) report.summary.chain_head = to_hex(h);
  }
  if (reader.header().since > 0) {
    if (against != nullptr) {
      throw InvalidArgument("--against needs a whole export: a partial one (--since) holds only "
                            "part of each history");
    }
    audit_partial(reader, report, progress);
    return report;
  }
  const bool segment = !reader.header().segment_id.empty();
  // A segment --against its store: its anchors, not rows (below).
  storage::Backend* rows = segment ? nullptr : against;
  ExportLog log(reader, rows);
  LogSummary summary;
  verify_ledger(log, rows, progress, &summary, [&](LedgerProblem&& p) {
    // A segment holds ended item streams only: their projects' streams
    // stay in the live log (or another segment), so it cannot show them.
    if (segment && (p.kind == ProblemKind::item_in_unknown_project ||
                    p.kind == ProblemKind::event_before_project)) {
      return;
    }
    report.problems.push_back(std::move(p));
  });
  if (reader.kind() != Reader::Kind::end) {
    throw damaged(fmt::format("the export is out of order after {} event(s): a record of another "
                              "section follows (not written by cplane export)",
                              reader.events()));
  }
  summary.heads = reader.heads();
  summary.anchors = reader.anchors();
  summary.since = 0;
  summary.chain_head = report.summary.chain_head;
  summary.source_database = report.summary.source_database;
  summary.segment_id = reader.header().segment_id;
  summary.redacted_payloads = reader.redacted();
  report.summary = summary;
  if (segment && against != nullptr) compare_with_anchors(in, *against, report.problems, nullptr);
  return report;
}

RestoreReport restore_export(std::FILE* in, storage::Backend& fresh, const Progress& progress,
                             const std::vector<std::FILE*>& segments) {
  Reader reader(in);
  if (reader.header().since > 0) {
    throw InvalidArgument(fmt::format("the export holds only the events after seq {} (--since): "
                                      "a restore needs the whole log",
                                      reader.header().since));
  }
  if (!reader.header().segment_id.empty()) {
    throw InvalidArgument(fmt::format("the file is archive segment {}, not an export: a restore "
                                      "starts from a whole export (its segments beside it)",
                                      reader.header().segment_id));
  }
  RestoreReport report;
  {
    auto tx = storage::Transaction::write(fresh, storage::Sync::full);
    if (fresh.event_count() != 0) {
      throw InvalidArgument("the target database already holds events: restore builds a fresh one");
    }
    const std::int64_t total = std::max<std::int64_t>(reader.header().event_count, 0);
    // Streams the export anchors, per segment: with segments given, each
    // must come back, or the history restored would be short of it.
    struct Anchored {
      std::int64_t streams = 0;
      std::int64_t left = 0;  // not yet put back from (or checked against) a segment
      std::int64_t events = 0;
      std::string digest;
      bool kept = false;      // a redacted segment's: its anchors stay
    };
    std::map<std::string, Anchored> anchored;
    auto import = [&](Reader& from, const char* what) {
      try {
        fresh.import_event(from.event());
      } catch (const StorageError& e) {
        if (e.category() != StorageError::Category::io) throw;
        // The only write that can collide: a seq the files hold twice.
        throw damaged(fmt::format("the {} holds seq {} twice, or another file holds it too (it "
                                  "was not written by cplane): {}",
                                  what, from.event().seq, e.what()));
      }
    };
    while (reader.kind() != Reader::Kind::end) {
      if (reader.kind() == Reader::Kind::event) {
        import(reader, "export");
        if (reader.events() % kProgressEvery == 0 && progress) progress(reader.events(), total);
      } else if (reader.kind() == Reader::Kind::anchor) {
        const auto& a = reader.anchor();
        fresh.import_anchor(a);
        auto& segment = anchored[a.segment_id];
        ++segment.streams;
        ++segment.left;
        segment.events += a.events;
        segment.digest = a.segment_digest;
      } else {
        fresh.put_head(reader.head());
      }
      reader.advance();
    }
    report.events = reader.events();
    // Each segment's streams come back in place of their anchors: the
    // digest trades each anchor's hash for its head's again.
    std::optional<storage::LogDigest> digest = reader.header().digest;
    Hash folded{};
    const bool foldable = digest && hash_from_bytes(digest->digest, folded);
    std::set<std::string> given;
    for (std::FILE* file : segments) {
      // Its bytes, as the anchors name them: a segment rewritten whole
      // (its footer made anew) can still pass its own checks.
      if (std::fseek(file, 0, SEEK_SET) != 0) {
        throw InvalidArgument("a segment is read from a file, not a pipe: its digest is checked "
                              "against the anchors");
      }
      const std::string file_digest(as_bytes(stream_digest(file).first));
      std::rewind(file);
      Reader seg(file);
      const auto& h = seg.header();
      if (h.segment_id.empty()) {
        throw InvalidArgument("a file given as a segment is an export: give one export and its "
                              "archive segments");
      }
      // Another store's segment, unless the export's anchors name it: a
      // store restored from an export has a database id of its own, and
      // its anchors still name the segments of the store it came from.
      if (h.source != reader.header().source && !anchored.contains(h.segment_id)) {
        throw InvalidArgument(fmt::format("segment {} was written by database {}, the export by "
                                          "{}: another store's segment",
                                          h.segment_id, h.source, reader.header().source));
      }
      if (!given.insert(h.segment_id).second) {
        throw InvalidArgument(fmt::format("segment {} is given twice", h.segment_id));
      }
      // A redacted segment's streams cannot come back into a live log:
      // their ends are checked against the anchors, which stay.
      const bool keep = h.payloads_redacted;
      if (keep) anchored[h.segment_id].kept = true;
      std::vector<storage::RawEvent> stream;  // the current stream's events, for its promise
      while (seg.kind() != Reader::Kind::end) {
        if (seg.kind() == Reader::Kind::event) {
          if (!stream.empty() && (stream.front().stream_kind != seg.event().stream_kind ||
                                  stream.front().stream_id != seg.event().stream_id)) {
            stream.clear();
          }
          stream.push_back(seg.event());
          // A redacted event's body is not the one its hash covers: a
          // live log holding it would fail verify.
          if (!keep) {
            import(seg, "segment");
            ++report.events;
          }
        } else if (seg.kind() == Reader::Kind::head) {
          const auto& head = seg.head();
          const auto kind = parse_stream_kind(head.stream_kind);
          const auto anchor = kind ? fresh.find_anchor({*kind, head.stream_id}) : std::nullopt;
          Hash head_hash{};
          if (anchor && anchor->segment_id == h.segment_id &&
              anchor->segment_digest != file_digest) {
            throw InvalidArgument(fmt::format(
                "segment {} is not the file the export's anchors name: its digest is {}, theirs "
                "{} (the segment was edited, or rewritten)",
                h.segment_id, hex_of(file_digest), hex_of(anchor->segment_digest)));
          }
          if (!anchor || anchor->segment_id != h.segment_id || anchor->revision != head.revision ||
              anchor->last_seq != head.last_seq || anchor->hash != head.hash ||
              !hash_from_bytes(head.hash, head_hash)) {
            throw InvalidArgument(fmt::format(
                "segment {} holds {} {}, which the export's anchors do not name as archived into "
                "it (or name with another end): the segment or the export is another's, or "
                "was edited",
                h.segment_id, head.stream_kind, quoted(head.stream_id)));
          }
          // What the anchor keeps (a kept one goes on deduplicating by its
          // key) must be what the stream's events fold to: an anchor edited
          // with the digest recomputed is refused, not restored.
          if (!stream.empty() && stream.front().stream_kind == head.stream_kind &&
              stream.front().stream_id == head.stream_id) {
            if (const auto promised = promised_anchor(stream)) {
              if (const auto broken = broken_promises(*anchor, *promised); !broken.empty()) {
                throw InvalidArgument(fmt::format(
                    "the export's anchor of {} {} is not what its events in segment {} fold "
                    "to: {} (the export or its store was edited)",
                    head.stream_kind, quoted(head.stream_id), h.segment_id,
                    fmt::join(broken, "; ")));
              }
            }
          }
          stream.clear();
          --anchored[h.segment_id].left;
          if (keep) {
            ++report.kept_anchored;
            seg.advance();
            continue;
          }
          fresh.delete_anchor({*kind, head.stream_id});
          fresh.put_head(head);
          if (foldable) {
            xor_into(folded, storage::anchor_hash(*anchor));
            xor_into(folded, head_hash);
          }
        } else {
          throw damaged(fmt::format("segment {} holds an anchor: it was not written by cplane "
                                    "archive",
                                    h.segment_id));
        }
        seg.advance();
      }
    }
    if (!segments.empty()) {
      std::vector<std::string> missing;
      std::int64_t streams = 0;
      for (const auto& [id, segment] : anchored) {
        if (segment.left <= 0) continue;
        missing.push_back(id);
        streams += segment.left;
      }
      if (!missing.empty()) {
        throw InvalidArgument(fmt::format(
            "the export anchors {} stream(s) archived into segment(s) not given: {}; give "
            "every segment (cplane stats lists them), or none to keep the anchors",
            streams, fmt::join(missing, ", ")));
      }
    }
    // The anchors kept name their segments: recorded again (where they
    // were written and their size are not in the export), so that
    // `archive --verify-only` and stats know them in the new store.
    for (const auto& [id, kept] : anchored) {
      if (segments.empty() || kept.kept) {
        storage::Backend::SegmentRecord record;
        record.segment_id = id;
        record.digest = kept.digest;
        record.streams = kept.streams;
        record.events = kept.events;
        record.bytes = -1;  // unknown: the digest still proves the file
        fresh.put_segment(record);
      }
    }
    if (digest && foldable) digest->digest = std::string(as_bytes(folded));
    // The footers are checked: nothing of a damaged or cut file is committed.
    if (digest) fresh.put_log_digest(*digest);
    if (!reader.header().dense) fresh.put_seqs_sparse();
    tx.commit();
  }
  // Rows from the log, which must pass its own checks first (rebuild
  // refuses otherwise: the caller removes what it created).
  const auto rebuilt = rebuild(fresh, false, progress);
  report.items = rebuilt.items;
  return report;
}

}  // namespace cplane
