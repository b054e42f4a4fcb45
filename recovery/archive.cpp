// Retention (docs/retention.md): ended item streams move out of the live
// log into a segment file in the export format (recovery/export.cpp), and
// an anchor per stream (storage::StreamAnchor) stays in their place.
//
// The order of the steps is what makes it crash-safe: under one write
// transaction (so that nothing changes between the segment and the swap),
// the segment is written to FILE.tmp, synced, renamed to FILE and its
// folder synced; only then are the events, heads and rows swapped for the
// anchors, and the transaction committed. A crash before the commit leaves
// the store as it was (and at most FILE.tmp, or a FILE that no anchor
// names); after it, the new state. No history is ever in neither place.
#include "recovery/archive.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "recovery/anchor_fold.hpp"
#include "recovery/archive_events.hpp"
#include "recovery/export.hpp"
#include "verify/descriptors.hpp"
#include "verify/quote.hpp"

namespace cplane {

namespace {

constexpr std::size_t kNoLimit = std::size_t{1} << 40;
// Streams read (and, on a server, locked or deleted) per round trip.
constexpr std::size_t kChunk = 1000;

StorageError io_error(const std::string& what) {
  return StorageError(StorageError::Category::io, fmt::format("{}: {}", what, std::strerror(errno)));
}

std::string random_id() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", rd());
  return out;
}

// The refusals that need no database: nothing is read or written before
// these pass.
void check_target(const std::string& file) {
  if (file.empty()) throw InvalidArgument("archive needs --to FILE: the segment to write");
  struct stat st {};
  if (::lstat(file.c_str(), &st) == 0) {
    throw InvalidArgument(InvalidArgument::Reason::already_exists,
                          fmt::format("{} exists: a segment is never written over a file; give a "
                                      "new name",
                                      file));
  }
  const std::string tmp = file + ".tmp";
  if (::lstat(tmp.c_str(), &st) == 0) {
    throw InvalidArgument(
        InvalidArgument::Reason::already_exists,
        fmt::format("{} exists: an earlier archive to {} was interrupted before its commit (the "
                    "store kept every event); remove it, then archive again",
                    tmp, file));
  }
  auto folder = std::filesystem::path(file).parent_path();
  if (folder.empty()) folder = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) {
    throw InvalidArgument(fmt::format("the folder {} of {} does not exist", folder.string(), file));
  }
  // Its mode too: root may write anywhere, but a folder whose mode grants
  // no one a write is one its owner meant to be read-only.
  struct stat folder_stat {};
  const bool no_write_bit = ::stat(folder.c_str(), &folder_stat) == 0 &&
                            (folder_stat.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0;
  if (no_write_bit || ::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw InvalidArgument(fmt::format("the folder {} is not writable: the segment {} cannot be "
                                      "written there",
                                      folder.string(), file));
  }
}

void sync_folder(const std::string& file) {
  auto folder = std::filesystem::path(file).parent_path();
  if (folder.empty()) folder = ".";
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw io_error(fmt::format("cannot open the folder {}", folder.string()));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw io_error(fmt::format("cannot sync the folder {}", folder.string()));
}

}  // namespace

std::pair<Hash, std::int64_t> stream_digest(std::FILE* in) {
  Hasher h;
  std::int64_t size = 0;
  std::string buffer(1 << 16, '\0');
  std::size_t got = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), in)) > 0) {
    h.add(std::string_view(buffer.data(), got));
    size += static_cast<std::int64_t>(got);
  }
  if (std::ferror(in) != 0) throw io_error("cannot read the segment");
  return {h.done(), size};
}

namespace {

// The archived streams as a log (what export_log writes): each stream's
// events, read by stream, and a head where its last event is; the digest
// is the segment's own (its events, newest seq, XOR of its heads). Read
// inside the archive's write transaction: begin/commit are the caller's.
class SegmentLog final : public storage::LogSource {
 public:
  SegmentLog(storage::Backend& backend, const std::vector<storage::StreamAnchor>& anchors,
             storage::LogDigest digest, bool redact)
      : backend_(backend), anchors_(anchors), digest_(std::move(digest)), redact_(redact) {}

  void begin_read() override {}
  void commit() override {}
  void rollback() noexcept override {}

  std::unique_ptr<storage::Cursor<storage::RawEvent>> scan_stream(StreamKind kind) override {
    return std::make_unique<Events>(*this, to_string(kind));
  }
  std::unique_ptr<storage::Cursor<storage::StreamHead>> scan_heads(StreamKind kind) override {
    return std::make_unique<Heads>(*this, to_string(kind));
  }
  std::unique_ptr<storage::Cursor<storage::RawEvent>> scan_unfiled() override {
    return std::make_unique<Events>(*this, std::string_view());
  }
  std::vector<storage::StreamHead> unfiled_heads() override { return {}; }
  std::optional<storage::LogDigest> log_digest() override { return digest_; }
  std::string database_id() override { return backend_.database_id(); }
  bool seqs_dense() override { return false; }
  std::int64_t event_count() override { return digest_.events; }

 private:
  // The anchors of one kind, in the order they were listed (by id).
  struct Events final : storage::Cursor<storage::RawEvent> {
    Events(SegmentLog& log, std::string_view kind) : log(log), kind(kind) {}
    bool next(storage::RawEvent& out) override {
      while (at >= events.size()) {
        // The next kChunk streams of this kind, read together.
        if (!refill()) return false;
      }
      out = std::move(events[at++]);
      if (log.redact_) {
        if (auto redacted = redact_payload(out.body)) {
          out.body = std::move(redacted->body);
          out.payload_hash = std::string(as_bytes(redacted->payload_hash));
        }
      }
      return true;
    }
    bool refill() {
      while (stream < log.anchors_.size() && log.anchors_[stream].stream_kind != kind) ++stream;
      if (kind.empty() || stream >= log.anchors_.size()) return false;
      std::vector<std::string> ids;
      while (stream < log.anchors_.size() && log.anchors_[stream].stream_kind == kind &&
             ids.size() < kChunk) {
        ids.push_back(log.anchors_[stream++].stream_id);
      }
      events.clear();
      at = 0;
      for (auto& one : log.backend_.streams_events(*parse_stream_kind(kind), ids)) {
        std::move(one.begin(), one.end(), std::back_inserter(events));
      }
      return true;
    }
    SegmentLog& log;
    std::string_view kind;
    std::size_t stream = 0, at = 0;
    std::vector<storage::RawEvent> events;
  };
  struct Heads final : storage::Cursor<storage::StreamHead> {
    Heads(SegmentLog& log, std::string_view kind) : log(log), kind(kind) {}
    bool next(storage::StreamHead& out) override {
      while (at < log.anchors_.size() && log.anchors_[at].stream_kind != kind) ++at;
      if (at >= log.anchors_.size()) return false;
      const auto& a = log.anchors_[at++];
      out = {a.stream_kind, a.stream_id, a.revision, a.last_seq, a.hash};
      return true;
    }
    SegmentLog& log;
    std::string_view kind;
    std::size_t at = 0;
  };

  storage::Backend& backend_;
  const std::vector<storage::StreamAnchor>& anchors_;
  storage::LogDigest digest_;
  bool redact_;
};

// Removes FILE.tmp, and FILE until the commit is asked for: a commit that
// fails may still have happened (commit_unknown), and then the anchors
// name FILE. A FILE kept by a commit that did not happen names no anchor:
// --verify-only says so.
// Only what this archive made: another archive to the same FILE, racing
// this one, keeps its FILE.tmp (an adversarial run lost a history when the
// loser of the O_EXCL create removed the winner's).
struct RemoveSegment {
  std::string file;
  bool made_tmp = false;     // this archive created FILE.tmp (and has not renamed it)
  bool placed = false;       // FILE is ours: this archive renamed it into place
  bool remove_file = true;
  ~RemoveSegment() {
    if (made_tmp) ::unlink((file + ".tmp").c_str());
    if (placed && remove_file) ::unlink(file.c_str());
  }
};

// FILE.tmp becomes FILE, never over a file that appeared since FILE was
// checked (another store's archive to the same name: found by an
// adversarial run, whose first segment a plain rename replaced).
void place_segment(const std::string& tmp, const std::string& file) {
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, file.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno == EINVAL || errno == ENOSYS) {  // a file system without RENAME_NOREPLACE
    if (::link(tmp.c_str(), file.c_str()) == 0) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (errno == EEXIST) {
    throw InvalidArgument(InvalidArgument::Reason::already_exists,
                          fmt::format("{} appeared while the segment was being written: a segment "
                                      "is never written over a file; nothing was archived",
                                      file));
  }
  throw io_error(fmt::format("cannot rename {} to {}", tmp, file));
}

// Refuses a stream whose row is not its fold (`diffs`: verify's own
// comparison, field by field), naming the fields.
void refuse_edited(std::string_view kind, const std::string& id,
                   const std::vector<verify_detail::FieldDiff>& diffs) {
  if (diffs.empty()) return;
  std::vector<std::string> fields;
  for (const auto& d : diffs) {
    fields.push_back(fmt::format("{} is {} in the row, {} in the log", d.field, d.stored,
                                 d.folded));
  }
  throw StorageError(StorageError::Category::corruption,
                     fmt::format("{} {}'s row is not what its log folds to ({}): the row was "
                                 "edited outside cplane. Nothing was archived; run cplane "
                                 "verify, then cplane rebuild",
                                 kind, id, fmt::join(fields, "; ")));
}

// Checks that a stream listed as ended may be archived (and redacted),
// sets `pass_claim` to the seq of its last claim that recorded a
// fair-share pass (0: none) and `redacted` to its payloads, from its row (an item's: `item`, read before its events; a session's or
// a schedule's is read here) and its `events`, and returns its anchor, or
// nullopt when its row no longer says it ended (changed since it was
// listed: left live). Kind by kind, what the anchor keeps comes from the
// log, not from the row: a row edited outside cplane (a claimed item set
// to done, a key changed) would otherwise be archived as if it were true,
// and pass every check after (found by an adversarial run).
std::optional<storage::StreamAnchor> read_ended(storage::Backend& backend, StreamKind kind,
                                                const std::string& id,
                                                const std::optional<ItemRow>& item,
                                                const std::vector<storage::RawEvent>& events,
                                                const ArchiveOptions& options,
                                                Seq& pass_claim,
                                                std::int64_t& redacted) {
  std::optional<SessionRow> session;
  std::optional<ScheduleRow> schedule;
  switch (kind) {
    case StreamKind::item:
      if (!item || !is_terminal(item->status) || item->updated_at >= options.before) {
        return std::nullopt;
      }
      break;
    case StreamKind::session:
      session = backend.find_session(id);
      if (!session || session->is_open() || session->closed_at >= options.before) {
        return std::nullopt;
      }
      break;
    case StreamKind::schedule:
      schedule = backend.find_schedule(id);
      if (!schedule || !schedule->removed || schedule->updated_at >= options.before) {
        return std::nullopt;
      }
      break;
    default:
      return std::nullopt;
  }
  const std::string_view kind_name = to_string(kind);
  if (events.empty()) {
    throw StorageError(StorageError::Category::corruption,
                       fmt::format("{} {} has a row and no events: the log was edited outside "
                                   "cplane. Nothing was archived; run cplane verify",
                                   kind_name, id));
  }
  if (options.redact_payloads) {
    for (const auto& e : events) {
      try {
        if (redact_payload(e.body)) ++redacted;
      } catch (const InvalidArgument& refused) {
        throw InvalidArgument(fmt::format("{} {} (seq {}): {}; archive it without "
                                          "--redact-payloads (docs/retention.md). Nothing was "
                                          "archived",
                                          kind_name, id, e.seq, refused.what()));
      }
    }
  }
  auto a = anchor_of(kind, id, events);
  if (item) {
    const ItemRow fold = fold_stream<ItemRow>(kind, id, events, &pass_claim);
    refuse_edited(kind_name, id,
                  verify_detail::ItemsProjection::diff(storage::ScannedItem{*item}, fold));
    if (!is_terminal(fold.status)) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("item {}'s row says {}, its log has not ended: the log was "
                                     "edited outside cplane. Nothing was archived; run cplane "
                                     "verify",
                                     id, to_string(fold.status)));
    }
    promise(a, fold);
  } else if (session) {
    const SessionRow fold = fold_stream<SessionRow>(kind, id, events);
    refuse_edited(kind_name, id, verify_detail::SessionsProjection::diff(*session, fold));
    if (fold.is_open()) refuse_edited(kind_name, id, {{"closed_at", {}, "closed", "open"}});
    promise(a, fold);
  } else {
    const ScheduleRow fold = fold_stream<ScheduleRow>(kind, id, events);
    refuse_edited(kind_name, id, verify_detail::SchedulesProjection::diff(*schedule, fold));
    if (!fold.removed) refuse_edited(kind_name, id, {{"removed", {}, "true", "false"}});
    promise(a, fold);
  }
  return a;
}

// forget_keys: each archived item's key is released by an event on its
// stream, appended in the archive's transaction before the segment is
// written, so that the segment holds the release, the anchor is folded
// from it (with no key: anchors_by_key no longer finds it), and an archive
// refused or killed before its commit releases nothing. The item's end
// time is unchanged (key_released keeps updated_at), so it is still one
// the archive takes. A dry run counts them and appends nothing.
void release_keys(storage::Backend& backend, std::vector<storage::StreamAnchor>& anchors,
                  const ArchiveOptions& options, Micros now, ArchiveReport& report) {
  std::vector<std::size_t> keyed;
  for (std::size_t i = 0; i < anchors.size(); ++i) {
    if (decide_release_key(anchors[i], now)) keyed.push_back(i);
  }
  report.keys_released = static_cast<std::int64_t>(keyed.size());
  if (options.dry_run) return;
  for (std::size_t at = 0; at < keyed.size(); at += kChunk) {
    const std::size_t end = std::min(keyed.size(), at + kChunk);
    std::vector<std::string> ids;
    for (std::size_t k = at; k < end; ++k) ids.push_back(anchors[keyed[k]].stream_id);
    auto rows = backend.find_items(ids);
    for (std::size_t k = at; k < end; ++k) {
      auto& row = rows[k - at];
      if (!row) {
        throw StorageError(StorageError::Category::corruption,
                           fmt::format("item {}'s row went while it was archived: nothing was "
                                       "archived; run cplane verify",
                                       ids[k - at]));
      }
      const auto event = decide_release_key(anchors[keyed[k]], now);
      const Seq seq = backend.append(*event);
      row = apply(std::move(*row), StoredEvent{seq, *event});
      backend.put_item(*row);
    }
    const auto events = backend.streams_events(StreamKind::item, ids);
    for (std::size_t k = at; k < end; ++k) {
      Seq pass_claim = 0;
      std::int64_t redacted = 0;
      auto a = read_ended(backend, StreamKind::item, ids[k - at], rows[k - at], events[k - at],
                          options, pass_claim, redacted);
      if (!a) {
        throw StorageError(StorageError::Category::corruption,
                           fmt::format("item {} no longer ended once its key was released: "
                                       "nothing was archived; run cplane verify",
                                       ids[k - at]));
      }
      anchors[keyed[k]] = std::move(*a);
    }
  }
}

void delete_row(storage::Backend& backend, const storage::StreamAnchor& a) {
  if (a.stream_kind == "item") {
    backend.delete_item(a.stream_id);
  } else if (a.stream_kind == "session") {
    backend.delete_session(a.stream_id);
  } else {
    backend.delete_schedule(a.stream_id);
  }
}

}  // namespace

ArchiveReport archive_streams(storage::Backend& backend, const ArchiveOptions& options) {
  if (options.before < 1) {
    throw InvalidArgument(fmt::format("--before takes a time after the epoch, not {}",
                                      options.before));
  }
  if (options.project && options.project->empty()) {
    throw InvalidArgument("--project takes a project id, not an empty one");
  }
  // A dry run refuses what the archive would refuse (a FILE that exists,
  // a folder not writable), so that it answers whether the archive would run.
  if (!options.dry_run || !options.file.empty()) check_target(options.file);
  ArchiveReport report;
  report.dry_run = options.dry_run;
  auto tx = storage::Transaction::write(backend, storage::Sync::full);
  // Its rows are locked as they are listed; a read slowed by the server
  // (not by a lock) must not abort an archive of 10^5 streams.
  struct Patient {
    storage::Backend& b;
    explicit Patient(storage::Backend& backend) : b(backend) { b.set_patient_reads(true); }
    ~Patient() { b.set_patient_reads(false); }
  } patient(backend);
  // Again under the write lock: another archive to the same FILE that
  // waited for the lock with us must find ours there and refuse, not
  // rename over it (found by an adversarial run: the first segment lost).
  if (!options.dry_run || !options.file.empty()) check_target(options.file);
  const Micros now = options.now ? *options.now : backend.now();
  if (options.before > now) {
    throw InvalidArgument(fmt::format("--before {} is in the future (now is {}): only streams "
                                      "that have ended can be archived",
                                      options.before, now));
  }
  if (options.project && !backend.find_project(*options.project)) {
    throw NotFound(NotFound::Reason::unknown_project,
                   fmt::format("no such project: {}", *options.project));
  }
  // Pass one: each stream's anchor (all but the segment's id and digest)
  // and the segment's digest; items, then sessions, then schedules, each
  // kind by id (the order the segment's streams are written in).
  const std::string* project = options.project ? &*options.project : nullptr;
  std::vector<storage::StreamAnchor> anchors;
  storage::LogDigest digest;
  Hash folded{};
  std::size_t listed = 0;
  std::vector<storage::StreamAnchor> candidates;
  std::vector<Seq> pass_claims;            // per candidate
  std::vector<std::int64_t> redactions;    // per candidate
  for (const StreamKind kind : {StreamKind::item, StreamKind::session, StreamKind::schedule}) {
    const auto ids = backend.ended_streams(kind, options.before, project, kNoLimit);
    listed += ids.size();
    for (std::size_t at = 0; at < ids.size(); at += kChunk) {
      const std::vector<std::string> chunk(
          ids.begin() + static_cast<std::ptrdiff_t>(at),
          ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), at + kChunk)));
      // The rows first: on a server they are locked (FOR UPDATE), so that
      // a redrive of a failed item waits for the archive instead of moving
      // the stream between its events being read and its anchor written.
      std::vector<std::optional<ItemRow>> items(chunk.size());
      if (kind == StreamKind::item) items = backend.find_items(chunk);
      const auto events = backend.streams_events(kind, chunk);
      for (std::size_t i = 0; i < chunk.size(); ++i) {
        Seq pass_claim = 0;
        std::int64_t redacted = 0;
        auto a = read_ended(backend, kind, chunk[i], items[i], events[i], options, pass_claim,
                            redacted);
        if (!a) continue;  // changed since it was listed: no longer ended
        candidates.push_back(std::move(*a));
        pass_claims.push_back(pass_claim);
        redactions.push_back(redacted);
      }
    }
  }
  // A project's fair_pass is the one its last fair-share claim recorded,
  // and verify reads it from the live log: of each project's candidates,
  // the one with the latest such claim stays live (if a live item holds a
  // later one, keeping this one costs a stream, nothing else). Decided
  // from the log alone: a pass edited in the project's row changes
  // nothing here (found by an adversarial run).
  std::map<std::string, std::size_t> holder;  // project -> candidate
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (pass_claims[i] == 0) continue;
    auto [it, fresh] = holder.try_emplace(candidates[i].project_id, i);
    if (!fresh && pass_claims[i] > pass_claims[it->second]) it->second = i;
  }
  std::vector<bool> keep(candidates.size(), false);
  for (const auto& [project_id, i] : holder) keep[i] = true;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (keep[i]) {
      ++report.kept_live;
      continue;
    }
    auto& a = candidates[i];
    ++(a.stream_kind == "item"      ? report.items
       : a.stream_kind == "session" ? report.sessions
                                    : report.schedules);
    report.redacted += redactions[i];
    anchors.push_back(std::move(a));
  }
  if (listed == 0) {
    throw InvalidArgument(fmt::format("no stream{} ended before {}: nothing to archive",
                                      options.project ? " of project " + *options.project : "",
                                      options.before));
  }
  if (anchors.empty()) {
    throw InvalidArgument(fmt::format(
        "no stream{} ended before {}: nothing to archive ({})",
        options.project ? " of project " + *options.project : "", options.before,
        report.kept_live > 0
            ? fmt::format("{} ended item(s) stay live: each holds its project's fair-share pass "
                          "until a later claim of the project takes it over",
                          report.kept_live)
            : std::string("the ones listed were redriven meanwhile")));
  }
  if (options.forget_keys) release_keys(backend, anchors, options, now, report);
  for (const auto& a : anchors) {
    Hash h{};
    if (hash_from_bytes(a.hash, h)) xor_into(folded, h);
    digest.events += a.events;
    digest.last_seq = std::max(digest.last_seq, a.last_seq);
    report.events += a.events;
  }
  // A dry run's count holds the releases it would append (found by an
  // adversarial run: it was short by one per key).
  if (options.dry_run) report.events += report.keys_released;
  digest.digest = std::string(as_bytes(folded));
  report.streams = static_cast<std::int64_t>(anchors.size());
  // Claims leave the live log with the items: the clocks they moved are
  // carried past them (verify's replay is then exact from here on).
  const std::vector<LimitRow> clocks =
      report.items > 0 ? clocks_to_carry(backend) : std::vector<LimitRow>{};
  report.clocks_carried = static_cast<std::int64_t>(clocks.size());
  if (options.dry_run) return report;  // the transaction rolls back: nothing written

  // Pass two: the segment, FILE.tmp -> synced -> FILE -> folder synced.
  report.segment_id = random_id();
  RemoveSegment cleanup{options.file};
  const std::string tmp = options.file + ".tmp";
  Hash file_hash{};
  std::int64_t size = 0;
  struct stat written {};
  {
    const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
      throw InvalidArgument(InvalidArgument::Reason::already_exists,
                            fmt::format("{} exists: another archive to {} is under way, or one "
                                        "was interrupted; nothing was archived",
                                        tmp, options.file));
    }
    if (fd < 0) throw io_error(fmt::format("cannot create {}", tmp));
    cleanup.made_tmp = true;
    std::FILE* out = ::fdopen(fd, "w+b");
    if (out == nullptr) {
      ::close(fd);
      throw io_error(fmt::format("cannot open {}", tmp));
    }
    try {
      SegmentLog log(backend, anchors, digest, options.redact_payloads);
      export_segment(log, out, report.segment_id, options.redact_payloads);
      if (std::fflush(out) != 0 || ::fsync(::fileno(out)) != 0) {
        throw io_error(fmt::format("cannot write {}", tmp));
      }
      // The digest of the bytes this archive wrote, read back through its
      // own descriptor (not by name: the name is shared with whoever else).
      std::rewind(out);
      std::tie(file_hash, size) = stream_digest(out);
      if (::fstat(::fileno(out), &written) != 0) throw io_error(fmt::format("cannot stat {}", tmp));
    } catch (...) {
      std::fclose(out);
      throw;
    }
    if (std::fclose(out) != 0) throw io_error(fmt::format("cannot write {}", tmp));
  }
  struct stat named {};
  if (::stat(tmp.c_str(), &named) != 0 || named.st_ino != written.st_ino ||
      named.st_dev != written.st_dev) {
    cleanup.made_tmp = false;  // not ours any more: left alone
    throw StorageError(StorageError::Category::io,
                       fmt::format("{} was removed or replaced while the segment was written "
                                   "(another process uses the name); nothing was archived",
                                   tmp));
  }
  place_segment(tmp, options.file);
  cleanup.made_tmp = false;
  cleanup.placed = true;
  sync_folder(options.file);

  // The swap: anchors for events, heads and rows, in this transaction.
  report.digest = to_hex(file_hash);
  report.bytes = size;
  for (auto& a : anchors) {
    a.segment_id = report.segment_id;
    a.segment_digest = std::string(as_bytes(file_hash));
  }
  backend.archive_streams(anchors);
  for (const auto& a : anchors) delete_row(backend, a);
  storage::Backend::SegmentRecord record;
  record.segment_id = report.segment_id;
  record.digest = std::string(as_bytes(file_hash));
  record.file = std::filesystem::absolute(options.file).string();
  record.before = options.before;
  record.project_id = options.project.value_or("");
  record.streams = report.streams;
  record.events = report.events;
  record.bytes = size;
  record.archived_at = now;
  {
    const Event event = decide_archive_segment(record, report, now);
    const Seq seq = backend.append(event);
    backend.put_segment(apply(SegmentRow{}, StoredEvent{seq, event}));
  }
  for (const auto& limit : clocks) {
    const auto event = decide_carry_clock(limit, report.segment_id, now);
    const Seq seq = backend.append(*event);
    backend.put_limit(apply(limit, StoredEvent{seq, *event}));
  }
  cleanup.remove_file = false;
  tx.commit();
  return report;
}

}  // namespace cplane
