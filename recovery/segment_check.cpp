// A segment held against a store's anchors (recovery/archive.hpp's
// compare_with_anchors and check_segment; docs/retention.md).
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "recovery/anchor_fold.hpp"
#include "recovery/archive.hpp"
#include "recovery/export.hpp"
#include "recovery/export_reader.hpp"

namespace cplane {

namespace {

// What a segment says of each stream: where it ends (its head) and what
// its anchor must keep (promised_anchor), in one pass, one stream's events
// at a time: a segment is written stream by stream.
struct SegmentContents {
  std::string source_database;
  std::string segment_id;
  std::vector<storage::StreamHead> heads;
  std::map<std::pair<StreamKind, std::string>, storage::StreamAnchor> promises;
};

SegmentContents read_segment(std::FILE* in) {
  SegmentContents out;
  export_format::Reader reader(in);
  out.source_database = reader.header().source;
  out.segment_id = reader.header().segment_id;
  std::vector<storage::RawEvent> events;
  auto fold = [&] {
    if (auto a = promised_anchor(events)) {
      const auto kind = *parse_stream_kind(a->stream_kind);
      out.promises.emplace(std::pair{kind, a->stream_id}, std::move(*a));
    }
    events.clear();
  };
  while (reader.kind() != export_format::Reader::Kind::end) {
    if (reader.kind() == export_format::Reader::Kind::event) {
      const auto& e = reader.event();
      if (!events.empty() && (events.front().stream_kind != e.stream_kind ||
                              events.front().stream_id != e.stream_id)) {
        fold();
      }
      events.push_back(e);
    } else if (reader.kind() == export_format::Reader::Kind::head) {
      out.heads.push_back(reader.head());
    }
    reader.advance();
  }
  fold();
  return out;
}

}  // namespace

void compare_with_anchors(std::FILE* in, storage::Backend& store, std::vector<LedgerProblem>& out,
                          SegmentCheck* check) {
  auto problem = [&](ProblemKind kind, std::string item, std::string detail) {
    out.push_back({kind, std::move(item), "", std::move(detail)});
  };
  if (std::fseek(in, 0, SEEK_SET) != 0) {
    throw InvalidArgument("a segment is checked against a store from a file, not a pipe");
  }
  const auto [digest, size] = stream_digest(in);
  std::rewind(in);
  const auto file = read_segment(in);
  const auto& promises = file.promises;
  auto tx = storage::Transaction::read(store);
  if (check != nullptr) {
    check->segment_id = file.segment_id;
    check->streams = static_cast<std::int64_t>(file.heads.size());
  }
  std::optional<storage::Backend::SegmentRecord> record;
  for (auto& r : store.segments()) {
    if (r.segment_id == file.segment_id) record = std::move(r);
  }
  // A store restored from an export has an id of its own; its record of
  // the segment (restored with its anchors) says the segment is its history.
  if (file.source_database != store.database_id() && !record) {
    problem(ProblemKind::digest_disagrees, "",
            fmt::format("the segment was written by database {}, not this store ({}), and "
                        "this store recorded no segment {}: it is another store's, or one whose "
                        "streams a restore brought back whole, or the store's segments table "
                        "was edited",
                        file.source_database.empty() ? "(unnamed)" : file.source_database,
                        store.database_id(), file.segment_id));
    return;
  }
  if (!record) {
    problem(ProblemKind::digest_disagrees, "",
            fmt::format("this store recorded no segment {}: the archive that wrote it did not "
                        "commit (its streams are still live), or the store's segments table "
                        "was edited",
                        file.segment_id));
    return;
  }
  if (record->digest != std::string(as_bytes(digest)) ||
      (record->bytes >= 0 && record->bytes != size)) {
    Hash recorded{};
    problem(ProblemKind::digest_disagrees, "",
            fmt::format("segment {} is {} bytes with digest {}; the store recorded {} bytes with "
                        "digest {}: the file was edited or cut",
                        file.segment_id, size, to_hex(digest), record->bytes,
                        hash_from_bytes(record->digest, recorded) ? to_hex(recorded) : "?"));
  }
  if (static_cast<std::int64_t>(file.heads.size()) != record->streams) {
    problem(ProblemKind::stream_missing, "",
            fmt::format("segment {} holds {} stream(s); the store archived {} into it",
                        file.segment_id, file.heads.size(), record->streams));
  }
  for (const auto& h : file.heads) {
    const auto kind = parse_stream_kind(h.stream_kind);
    const auto anchor = kind ? store.find_anchor({*kind, h.stream_id}) : std::nullopt;
    const std::string item = h.stream_kind == "item" ? h.stream_id : std::string();
    if (!anchor) {
      problem(ProblemKind::head_missing, item,
              fmt::format("{} {} is in segment {}, but the store has no anchor of it", h.stream_kind,
                          h.stream_id, file.segment_id));
    } else if (anchor->segment_id != file.segment_id || anchor->revision != h.revision ||
               anchor->last_seq != h.last_seq || anchor->hash != h.hash ||
               anchor->segment_digest != record->digest) {
      // A file whose digest is not the recorded one is named once, above;
      // here only what the anchor itself says otherwise.
      problem(ProblemKind::head_disagrees, item,
              fmt::format("{} {} ends at revision {} (seq {}) in segment {}; its anchor says "
                          "revision {} (seq {}) in segment {}{}{}",
                          h.stream_kind, h.stream_id, h.revision, h.last_seq, file.segment_id,
                          anchor->revision, anchor->last_seq, anchor->segment_id,
                          anchor->hash != h.hash ? ", with another hash" : "",
                          anchor->segment_digest != record->digest
                              ? ", naming another digest than the segment's record"
                              : ""));
    } else if (const auto promised = promises.find(std::pair{*kind, h.stream_id});
               promised != promises.end()) {
      // What the anchor keeps (an item's key dedupes by it, its fence is
      // never issued again) must be what the segment's events say.
      if (const auto broken = broken_promises(*anchor, promised->second); !broken.empty()) {
        problem(ProblemKind::head_disagrees, item,
                fmt::format("{} {}'s anchor is not what its events in segment {} fold to: {}",
                            h.stream_kind, h.stream_id, file.segment_id,
                            fmt::join(broken, "; ")));
      }
    }
  }
  tx.commit();
}

SegmentCheck check_segment(storage::Backend& store, const std::string& file) {
  SegmentCheck check;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    check.problems.push_back({ProblemKind::stream_missing, "", "",
                              fmt::format("cannot read {}: it is a directory", file)});
    return check;
  }
  std::FILE* in = std::fopen(file.c_str(), "rb");
  if (in == nullptr) {
    check.problems.push_back({ProblemKind::stream_missing, "", "",
                              fmt::format("cannot open {}: {}", file, std::strerror(errno))});
    return check;
  }
  try {
    auto report = audit_export(in, nullptr);
    check.events = report.summary.events;
    if (report.summary.segment_id.empty()) {
      check.problems.push_back({ProblemKind::digest_disagrees, "", "",
                                fmt::format("{} is an export, not an archive segment", file)});
    } else {
      check.problems = std::move(report.problems);
      compare_with_anchors(in, store, check.problems, &check);
    }
  } catch (const StorageError& e) {
    if (e.category() != StorageError::Category::corruption &&
        e.category() != StorageError::Category::incompatible) {
      std::fclose(in);
      throw;
    }
    check.problems.push_back({ProblemKind::digest_disagrees, "", "",
                              fmt::format("{} is not a whole, readable segment: {}", file,
                                          e.what())});
  }
  std::fclose(in);
  return check;
}

}  // namespace cplane
