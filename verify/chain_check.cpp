#include "verify/chain_check.hpp"

#include <fmt/format.h>

#include "verify/quote.hpp"

namespace cplane {

namespace {
// Seqs beyond this are not tracked for gaps (a bitmap of 2^28 bits is 32 MiB).
constexpr Seq kMaxTrackedSeq = Seq{1} << 28;
}  // namespace

std::string StreamChain::name() const { return fmt::format("{} {}", kind_, quoted(id_)); }

LedgerProblem StreamChain::problem(ProblemKind kind, std::string detail) const {
  return {kind, kind_ == "item" ? id_ : std::string(),
          kind_ == "project" ? id_ : project_, std::move(detail)};
}

void StreamChain::add(const storage::RawEvent& raw, std::vector<LedgerProblem>& out) {
  ++events_;
  if (project_.empty()) project_ = raw.project_id;
  const std::int64_t rev = raw.revision;
  if (rev < 1) {
    broken_ = true;
    out.push_back(problem(ProblemKind::event_inserted,
                          fmt::format("event seq {} of {} is not chained (revision {}): it was "
                                      "written outside cplane",
                                      raw.seq, name(), rev)));
    return;
  }
  if ((events_ > 1 || anchored_) && rev <= revision_) {
    broken_ = true;
    if (rev == revision_) {
      out.push_back(problem(
          ProblemKind::event_inserted,
          fmt::format("event seq {} is a second revision {} of {} (the first is seq {}): an event "
                      "was inserted, or written outside cplane",
                      raw.seq, rev, name(), seq_)));
    } else {
      out.push_back(problem(
          ProblemKind::event_reordered,
          fmt::format("event seq {} is revision {} of {}, but follows revision {} (seq {}): events "
                      "were reordered, or one was inserted",
                      raw.seq, rev, name(), revision_, seq_)));
    }
    return;  // the chain goes on from the event before it
  }
  if (rev != revision_ + 1) {
    broken_ = true;
    out.push_back(problem(
        ProblemKind::event_missing,
        revision_ == 0
            ? fmt::format("{} begins at revision {} (seq {}): revision(s) 1..{} are missing, "
                          "deleted from the log",
                          name(), rev, raw.seq, rev - 1)
            : fmt::format("{} jumps from revision {} (seq {}) to {} (seq {}): revision(s) {}..{} "
                          "are missing, deleted from the log",
                          name(), revision_, seq_, rev, raw.seq, revision_ + 1, rev - 1)));
  } else {
    Hash prev = kNoHash;
    Hash stored{};
    const bool prev_ok = revision_ == 0 || hash_from_bytes(hash_, prev);
    const bool ok = prev_ok && hash_from_bytes(raw.hash, stored) &&
                    stored_chain_hash(prev, raw.seq, rev, raw.stream_kind, raw.stream_id, raw.body,
                                      raw.payload_hash) == stored;
    if (!ok) {
      broken_ = true;
      out.push_back(problem(
          ProblemKind::event_edited,
          fmt::format("event seq {} (revision {} of {}, type column '{}') does not match its "
                      "hash: its body, seq, stream or revision was changed outside cplane",
                      raw.seq, rev, name(), raw.type)));
    }
  }
  revision_ = rev;
  seq_ = raw.seq;
  hash_ = raw.hash;
}

void StreamChain::finish(const storage::StreamHead* head, std::vector<LedgerProblem>& out) {
  if (head == nullptr) {
    if (events_ > 0) {
      broken_ = true;
      out.push_back(problem(ProblemKind::head_missing,
                            fmt::format("{} has {} event(s) but no head: its head was deleted, or "
                                        "its events were written outside cplane",
                                        name(), events_)));
    }
    return;
  }
  if (events_ == 0) {
    broken_ = true;
    out.push_back(problem(ProblemKind::stream_missing,
                          fmt::format("{} has a head (revision {}, seq {}) but no events: its "
                                      "whole history was deleted",
                                      name(), head->revision, head->last_seq)));
    return;
  }
  if (head->revision > revision_) {
    broken_ = true;
    out.push_back(problem(
        ProblemKind::tail_missing,
        fmt::format("{} ends at revision {} (seq {}) but its head is revision {} (seq {}): "
                    "revision(s) {}..{}, the newest events, were cut off",
                    name(), revision_, seq_, head->revision, head->last_seq, revision_ + 1,
                    head->revision)));
  } else if (head->revision != revision_ || head->last_seq != seq_ || head->hash != hash_) {
    broken_ = true;
    out.push_back(problem(
        ProblemKind::head_disagrees,
        fmt::format("{}: its head says revision {} at seq {}, the log ends at revision {} at seq "
                    "{}{}: the head or the log was changed outside cplane",
                    name(), head->revision, head->last_seq, revision_, seq_,
                    head->revision == revision_ && head->last_seq == seq_ ? " with another hash"
                                                                          : "")));
  }
}

void LogChain::head(const storage::StreamHead& head) {
  Hash h{};
  if (hash_from_bytes(head.hash, h)) xor_into(digest_, h);
}

void LogChain::anchor(const storage::StreamAnchor& anchor) {
  xor_into(digest_, storage::anchor_hash(anchor));
  auto [tally, fresh] = segments_.try_emplace(anchor.segment_id);
  if (fresh) {
    tally->second.digest = anchor.segment_digest;
    tally->second.project_id = anchor.project_id;
  }
  tally->second.digests_differ |= tally->second.digest != anchor.segment_digest;
  tally->second.projects_differ |= tally->second.project_id != anchor.project_id;
  ++tally->second.streams;
  tally->second.events += anchor.events;
  std::vector<Seq> seqs;
  if (!storage::unpack_seqs(anchor.seqs, seqs) || static_cast<std::int64_t>(seqs.size()) != anchor.events) {
    // Its seqs cannot be told: the count still goes to the digest's check
    // (which the anchor's hash fails anyway), the gap check is off.
    events_ += anchor.events;
    untracked_ = true;
    return;
  }
  for (const Seq seq : seqs) event(seq);
}

void LogChain::event(Seq seq) {
  ++events_;
  last_seq_ = std::max(last_seq_, seq);
  if (seq < 1 || seq >= kMaxTrackedSeq) {
    untracked_ = true;
    return;
  }
  const auto at = static_cast<std::size_t>(seq);
  if (seen_.size() <= at) seen_.resize(std::max(at + 1, seen_.size() * 2), false);
  seen_[at] = true;
}

void LogChain::finish(const std::optional<storage::LogDigest>& digest, bool dense,
                      std::vector<LedgerProblem>& out) {
  if (!digest) {
    out.push_back({ProblemKind::digest_disagrees, "", "",
                   "the log's digest (table log_digest) is gone: it was deleted outside cplane, "
                   "and with it the proof that no stream was removed whole"});
  } else if (!broken_) {  // (a broken stream named the fault already)
    Hash stored{};
    const bool readable = hash_from_bytes(digest->digest, stored);
    if (!readable || stored != digest_ || digest->events != events_) {
      out.push_back(
          {ProblemKind::digest_disagrees, "", "",
           fmt::format("the log's digest counts {} event(s){}, the log holds {}{}: a stream was "
                       "removed together with its head, or a head or an archived stream's "
                       "anchor was edited or deleted, outside cplane",
                       digest->events, readable ? "" : " (its hash is damaged)", events_,
                       stored == digest_ ? "" : ", and its heads' and anchors' hashes do not fold to it")});
    }
  }
  if (broken_) return;
  // Seqs are handed out one by one and never reused: with every stream's
  // chain intact, a missing seq is an event removed with its head
  // rewritten (or, with the digest, a whole stream removed): name it.
  const Seq newest = std::max(digest ? digest->last_seq : 0, last_seq_);
  if (!dense || untracked_ || newest >= kMaxTrackedSeq) return;
  Seq gap_start = 0;
  for (Seq s = 1; s <= newest + 1; ++s) {
    const bool present = s <= newest && static_cast<std::size_t>(s) < seen_.size() &&
                         seen_[static_cast<std::size_t>(s)];
    if (!present && s <= newest && gap_start == 0) gap_start = s;
    if ((present || s > newest) && gap_start != 0) {
      out.push_back({ProblemKind::seq_gap, "", "",
                     fmt::format("seq(s) {}..{} are missing from the log, though every stream's "
                                 "chain is intact: events were removed and their heads rewritten",
                                 gap_start, s - 1)});
      gap_start = 0;
    }
  }
}

}  // namespace cplane

namespace cplane {

namespace {

// The fields in which a segment's record differs from its event's.
std::vector<std::string> segment_diff(const SegmentRow& row, const SegmentRow& logged) {
  std::vector<std::string> out;
  auto field = [&](std::string_view name, const auto& stored, const auto& folded) {
    if (stored == folded) return;
    if constexpr (std::is_integral_v<std::decay_t<decltype(stored)>>) {
      out.push_back(fmt::format("{} is {} in the row, {} in the log", name, stored, folded));
    } else {
      out.push_back(fmt::format("{} differs", name));
    }
  };
  field("digest", row.digest, logged.digest);
  field("file", row.file, logged.file);
  field("before", row.before, logged.before);
  field("project_id", row.project_id, logged.project_id);
  field("streams", row.streams, logged.streams);
  field("events", row.events, logged.events);
  field("bytes", row.bytes, logged.bytes);
  field("archived_at", row.archived_at, logged.archived_at);
  return out;
}

}  // namespace

std::vector<SegmentRow> LogChain::records_from_anchors() const {
  std::vector<SegmentRow> out;
  for (const auto& [id, tally] : segments_) {
    if (tally.digests_differ) continue;
    SegmentRow row;
    row.segment_id = id;
    row.digest = tally.digest;
    row.streams = tally.streams;
    row.events = tally.events;
    row.bytes = -1;  // unknown: the digest still proves the file
    out.push_back(std::move(row));
  }
  return out;
}

void LogChain::check_segments(
    const std::optional<std::vector<storage::LogSource::RecordedSegment>>& recorded,
    const std::map<std::string, SegmentRow>* logged, std::vector<LedgerProblem>& out) const {
  if (!recorded) return;
  auto problem = [&](std::string detail) {
    out.push_back({ProblemKind::segment_disagrees, "", "", std::move(detail)});
  };
  std::map<std::string, const storage::LogSource::RecordedSegment*> by_id;
  for (const auto& r : *recorded) {
    if (!by_id.emplace(r.segment_id, &r).second) {
      problem(fmt::format("segment {} is recorded twice (table segments)", quoted(r.segment_id)));
    }
  }
  if (logged != nullptr) {
    for (const auto& [id, row] : *logged) {
      const auto found = by_id.find(id);
      if (found == by_id.end()) {
        // An anchored one is named below.
        if (!segments_.contains(id)) {
          problem(fmt::format("segment {} was archived (segment_archived) but the store does "
                              "not record it (table segments): its row was deleted outside "
                              "cplane",
                              quoted(id)));
        }
        continue;
      }
      if (const auto diff = segment_diff(*found->second, row); !diff.empty()) {
        problem(fmt::format("segment {}: its record is not what its segment_archived says ({}): "
                            "the record was edited outside cplane",
                            quoted(id), fmt::join(diff, "; ")));
      }
    }
  }
  for (const auto& [id, tally] : segments_) {
    if (tally.digests_differ) {
      problem(fmt::format("the anchors of segment {} name more than one digest: an anchor was "
                          "edited outside cplane",
                          quoted(id)));
    }
    const auto found = by_id.find(id);
    if (found == by_id.end()) {
      problem(fmt::format("{} stream(s) are anchored in segment {}, which the store does not "
                          "record (table segments): its row was deleted outside cplane",
                          tally.streams, quoted(id)));
      continue;
    }
    const auto& r = *found->second;
    if (!tally.digests_differ && r.digest != tally.digest) {
      problem(fmt::format("segment {}: its record's digest is not the one its anchors name: the "
                          "record was edited outside cplane",
                          quoted(id)));
    }
    if (r.streams != tally.streams || r.events != tally.events) {
      problem(fmt::format("segment {}: its record counts {} stream(s) and {} event(s), its "
                          "anchors {} and {}: the record or an anchor was edited outside cplane",
                          quoted(id), r.streams, r.events, tally.streams, tally.events));
    }
    if (!r.project_id.empty() && (tally.projects_differ || tally.project_id != r.project_id)) {
      problem(fmt::format("segment {} archived project {}, yet anchors another project's "
                          "stream(s): the record or an anchor was edited outside cplane",
                          quoted(id), quoted(r.project_id)));
    }
  }
  for (const auto& r : *recorded) {
    if (segments_.contains(r.segment_id)) continue;
    // Its streams were brought back by a restore: the event explains it.
    if (logged == nullptr || logged->contains(r.segment_id)) continue;
    problem(fmt::format("segment {} is recorded ({} stream(s), {} event(s)) but no anchor names "
                        "it: its anchors were deleted outside cplane, or its record added",
                        quoted(r.segment_id), r.streams, r.events));
  }
}

}  // namespace cplane
