// The export format read back (events/export.capnp): one record at a time,
// with the file's integrity checked as it goes. Used by audit, restore and
// the segment checks (recovery/export.cpp); written by its Writer.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/array.h>

#include <cplane/version.hpp>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"
#include "events/export.capnp.h"
#include "storage/log_source.hpp"
#include "verify/quote.hpp"

namespace cplane::export_format {

// A record is one event (a body of at most 1 MiB of payload, plus its
// columns) or one head: anything far larger is not a record of ours.
inline constexpr std::size_t kMaxRecordWords = (std::size_t{16} << 20) / sizeof(capnp::word);
inline constexpr std::uint32_t kMaxSegments = 512;
inline constexpr std::uint64_t kEventsSchemaId = 0xa77279471f4af3a6ULL;  // events.capnp's file id

inline StorageError damaged(const std::string& what) {
  return StorageError(StorageError::Category::corruption, what);
}

inline std::string text(capnp::Text::Reader t) { return {t.begin(), t.size()}; }
inline std::string bytes(capnp::Data::Reader d) {
  return {reinterpret_cast<const char*>(d.begin()), d.size()};
}

// One record at a time, in file order, with the file's integrity checked as
// it goes: framing, sizes, the header first, and at the end the footer's
// counts and content hash.
class Reader {
 public:
  explicit Reader(std::FILE* in) : in_(in) {
    if (!next_message()) throw damaged("the file is empty: not a cplane export");
    try {
      read_header();
    } catch (const kj::Exception& e) {
      throw damaged(fmt::format("the file does not begin with a readable export header ({}): "
                                "not a cplane export",
                                e.getDescription().cStr()));
    }
    advance();
  }

  struct Header {
    Seq since = 0;
    std::int64_t event_count = 0;
    std::string source;
    std::string segment_id;
    bool payloads_redacted = false;
    bool dense = false;
    std::optional<storage::LogDigest> digest;
  };
  const Header& header() const { return header_; }

  enum class Kind { event, head, anchor, end };
  // The current record's kind; `end` once the footer was read and checked.
  Kind kind() const { return kind_; }
  const storage::RawEvent& event() const { return event_; }
  const std::string& prev_hash() const { return prev_hash_; }
  const storage::StreamHead& head() const { return head_; }
  const storage::StreamAnchor& anchor() const { return anchor_; }
  std::int64_t anchors() const { return anchors_; }
  std::int64_t events() const { return events_; }
  // Events read so far whose payload is redacted (archive --redact-payloads).
  std::int64_t redacted() const { return redacted_; }
  std::int64_t heads() const { return heads_; }

  // Moves to the next record.
  void advance() {
    if (kind_ == Kind::end) return;
    if (!next_message()) {
      throw damaged(fmt::format("the export is truncated: it ends after {} event(s) with no "
                                "footer",
                                events_));
    }
    try {
      decode_record();
    } catch (const kj::Exception& e) {
      // Cap'n Proto checks pointers as they are followed: a damaged record
      // fails here, not when it was framed.
      throw damaged(fmt::format("the export is damaged after {} event(s): {}", events_,
                                e.getDescription().cStr()));
    }
    check_order();
  }

 private:
  void read_header() {
    auto root = record();
    if (root.which() != wire::ExportRecord::HEADER) {
      throw damaged("the file does not begin with an export header: not a cplane export");
    }
    auto h = root.getHeader();
    if (h.getFormatVersion() == 0) {
      throw damaged("the export header has format version 0: the file is damaged, or not a "
                    "cplane export");
    }
    if (h.getFormatVersion() > kExportFormatVersion) {
      throw StorageError(StorageError::Category::incompatible,
                         fmt::format("the export has format version {}, which this cplane ({}, "
                                     "format {}) does not read: upgrade cplane",
                                     h.getFormatVersion(), kVersion, kExportFormatVersion));
    }
    if (h.getSchemaId() != kEventsSchemaId) {
      throw damaged(fmt::format("the export's events are of schema {:#x}, not cplane's: not a "
                                "cplane export",
                                h.getSchemaId()));
    }
    header_.since = h.getSinceSeq();
    header_.event_count = h.getEventCount();
    header_.source = text(h.getSourceDatabase());
    header_.segment_id = text(h.getSegmentId());
    header_.payloads_redacted = h.getPayloadsRedacted();
    header_.dense = h.getDenseSeqs();
    if (h.getHasDigest()) {
      header_.digest = storage::LogDigest{h.getLogEvents(), h.getLogLastSeq(), bytes(h.getLogDigest())};
    }
  }

  // Records come in the order export writes them: project streams, item
  // streams, session streams, item streams (kStreamKinds), then kinds this build does not
  // know; within a known kind, by
  // stream id, each stream's events by seq and then its head. Anything else
  // was not written by cplane export (whatever its hashes say).
  void check_order() {
    if (kind_ == Kind::end) return;
    const bool is_event = kind_ == Kind::event;
    const bool is_anchor = kind_ == Kind::anchor;
    const std::string& kind =
        is_event ? event_.stream_kind : is_anchor ? anchor_.stream_kind : head_.stream_kind;
    const auto parsed = parse_stream_kind(kind);
    constexpr int kUnknown = static_cast<int>(std::size(kStreamKinds));
    int section = kUnknown;
    for (int i = 0; parsed && i < kUnknown; ++i) {
      if (kStreamKinds[i] == *parsed) section = i;
    }
    const std::string& id =
        is_event ? event_.stream_id : is_anchor ? anchor_.stream_id : head_.stream_id;
    const Seq seq = is_event ? event_.seq : 0;
    bool in_order = true;
    if (section != order_.section) {
      in_order = section > order_.section;
    } else if (section == kUnknown) {
      in_order = is_event ? !order_.head : true;  // unknown kinds: events, then heads
    } else if (id != order_.id) {
      in_order = id > order_.id;
    } else if (is_anchor) {
      in_order = false;  // an anchor stands alone for its stream
    } else if (is_event) {
      in_order = !order_.head && seq > order_.seq;
    } else {
      in_order = !order_.head;
    }
    if (!in_order) {
      throw damaged(fmt::format("the export is out of order after {} event(s) (a {} of {} {} "
                                "where it cannot be): it was not written by cplane export",
                                events_, is_event ? "event" : is_anchor ? "anchor" : "head", kind,
                                quoted(id)));
    }
    order_ = {section, id, seq, !is_event};
  }

  void decode_record() {
    auto root = record();
    switch (root.which()) {
      case wire::ExportRecord::EVENT: {
        auto e = root.getEvent();
        event_.seq = e.getSeq();
        event_.stream_kind = text(e.getStreamKind());
        event_.stream_id = text(e.getStreamId());
        event_.revision = e.getRevision();
        event_.hash = bytes(e.getHash());
        event_.item_id = text(e.getItemId());
        event_.project_id = text(e.getProjectId());
        event_.type = text(e.getType());
        event_.at = e.getAt();
        event_.body = bytes(e.getBody());
        prev_hash_ = bytes(e.getPrevHash());
        event_.payload_hash = bytes(e.getPayloadHash());
        if (!event_.payload_hash.empty()) ++redacted_;
        // A redacted event in a file whose header does not say so, or a
        // whole payload in one that does: not written by cplane.
        if (!event_.payload_hash.empty() && !header_.payloads_redacted) {
          throw damaged(fmt::format("seq {} holds a redacted payload, and the file's header does "
                                    "not say its payloads are redacted: it was not written by "
                                    "cplane",
                                    event_.seq));
        }
        if (header_.payloads_redacted && event_.payload_hash.empty() &&
            chain_form(event_.body).has_payload) {
          throw damaged(fmt::format("the file says its payloads are redacted, and holds seq {} "
                                    "whole: it was not written by cplane archive",
                                    event_.seq));
        }
        ++events_;
        kind_ = Kind::event;
        break;
      }
      case wire::ExportRecord::HEAD: {
        auto h = root.getHead();
        head_.stream_kind = text(h.getStreamKind());
        head_.stream_id = text(h.getStreamId());
        head_.revision = h.getRevision();
        head_.last_seq = h.getLastSeq();
        head_.hash = bytes(h.getHash());
        ++heads_;
        kind_ = Kind::head;
        break;
      }
      case wire::ExportRecord::ANCHOR: {
        auto a = root.getAnchor();
        anchor_.stream_kind = text(a.getStreamKind());
        anchor_.stream_id = text(a.getStreamId());
        anchor_.revision = a.getRevision();
        anchor_.last_seq = a.getLastSeq();
        anchor_.hash = bytes(a.getHash());
        anchor_.events = a.getEvents();
        anchor_.seqs = bytes(a.getSeqs());
        anchor_.project_id = text(a.getProjectId());
        anchor_.state = text(a.getState());
        anchor_.fence = a.getFence();
        anchor_.idem_key = text(a.getIdemKey());
        anchor_.ended_at = a.getEndedAt();
        anchor_.segment_id = text(a.getSegmentId());
        anchor_.segment_digest = bytes(a.getSegmentDigest());
        ++anchors_;
        kind_ = Kind::anchor;
        break;
      }
      case wire::ExportRecord::FOOTER: {
        auto f = root.getFooter();
        const Hash content = before_.done();
        if (bytes(f.getContentHash()) != std::string(as_bytes(content)) ||
            f.getEvents() != events_ || f.getHeads() != heads_) {
          throw damaged(fmt::format(
              "the export is damaged: its footer counts {} event(s) and {} head(s) with content "
              "hash {}, the file holds {} and {} with hash {}",
              f.getEvents(), f.getHeads(), f.getContentHash().size() == 32 ? to_hex_bytes(f) : "?",
              events_, heads_, to_hex(content)));
        }
        if (std::fgetc(in_) != EOF) throw damaged("the export has bytes after its footer");
        kind_ = Kind::end;
        break;
      }
      case wire::ExportRecord::HEADER:
        throw damaged("the export has a second header: two files concatenated?");
      default:
        // The header's format version is this cplane's: a record it does
        // not know is damage, not a newer writer.
        throw damaged(fmt::format("the export is damaged after {} event(s): a record of no "
                                  "known kind",
                                  events_));
    }
  }

  static std::string to_hex_bytes(wire::ExportFooter::Reader f) {
    Hash h{};
    hash_from_bytes(bytes(f.getContentHash()), h);
    return to_hex(h);
  }

  wire::ExportRecord::Reader record() {
    try {
      return message_->getRoot<wire::ExportRecord>();
    } catch (const kj::Exception& e) {
      throw damaged(fmt::format("the export is damaged after {} event(s): {}", events_,
                                e.getDescription().cStr()));
    }
  }

  // Reads one message in the standard stream framing into aligned words.
  bool next_message() {
    std::uint32_t first[2];
    const std::size_t got = std::fread(first, 1, sizeof first, in_);
    if (got == 0 && std::feof(in_)) return false;
    if (got != sizeof first) throw truncated();
    const std::uint32_t segments = first[0] + 1;
    if (segments == 0 || segments > kMaxSegments) throw damaged(bad_frame());
    const std::size_t table_words = (segments / 2) + 1;  // 4 + 4*segments bytes, padded to 8
    std::vector<std::uint32_t> sizes(segments);
    sizes[0] = first[1];
    std::vector<std::uint32_t> rest(table_words * 2 - 2);
    if (!rest.empty() && std::fread(rest.data(), 4, rest.size(), in_) != rest.size()) {
      throw truncated();
    }
    std::size_t total = 0;
    for (std::uint32_t i = 0; i < segments; ++i) {
      if (i > 0) sizes[i] = rest[i - 1];
      total += sizes[i];
      if (total > kMaxRecordWords) throw damaged(bad_frame());
    }
    words_ = kj::heapArray<capnp::word>(table_words + total);
    auto* raw = reinterpret_cast<char*>(words_.begin());
    std::memcpy(raw, first, sizeof first);
    if (!rest.empty()) std::memcpy(raw + sizeof first, rest.data(), rest.size() * 4);
    if (total > 0 &&
        std::fread(raw + table_words * 8, sizeof(capnp::word), total, in_) != total) {
      throw truncated();
    }
    before_ = whole_;
    whole_.add(std::string_view(raw, words_.size() * sizeof(capnp::word)));
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 4 * words_.size() + 1024;
    options.nestingLimit = 16;
    try {
      message_.emplace(words_.asPtr(), options);
    } catch (const kj::Exception& e) {
      throw damaged(fmt::format("the export is damaged after {} event(s): {}", events_,
                                e.getDescription().cStr()));
    }
    return true;
  }
  StorageError truncated() const {
    return damaged(fmt::format("the export is truncated: it ends inside a record after {} "
                               "event(s)",
                               events_));
  }
  std::string bad_frame() const {
    return fmt::format("the export is damaged after {} event(s): a record's framing is not "
                       "Cap'n Proto's (or the file is not an export)",
                       events_);
  }

  std::FILE* in_;
  kj::Array<capnp::word> words_;
  std::optional<capnp::FlatArrayMessageReader> message_;
  Header header_;
  Kind kind_ = Kind::event;
  storage::RawEvent event_;
  std::string prev_hash_;
  storage::StreamHead head_;
  storage::StreamAnchor anchor_;
  std::int64_t events_ = 0, heads_ = 0, anchors_ = 0, redacted_ = 0;
  struct Order {
    int section = -1;
    std::string id;
    Seq seq = 0;
    bool head = false;  // the last record was a head
  } order_;
  Hasher whole_;   // every byte read so far
  Hasher before_;  // every byte before the current record
};

}  // namespace cplane::export_format
