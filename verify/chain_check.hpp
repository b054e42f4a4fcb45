// Checks the log's hash chain (events/chain.hpp), stream by stream, and the
// log as a whole against its digest. Used by verify (on a backend) and by
// audit (on an export): both feed it streams in (stream id, seq) order.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <cplane/ledger.hpp>

#include "events/chain.hpp"
#include "storage/log_source.hpp"

namespace cplane {

// One stream: its events in seq order, then its stored head.
class StreamChain {
 public:
  StreamChain(std::string kind, std::string id) : kind_(std::move(kind)), id_(std::move(id)) {}

  // A partial log (an export --since): the chain goes on from `revision`
  // with `hash`, as the events before it left it.
  void anchor(std::int64_t revision, std::string hash) {
    revision_ = revision;
    hash_ = std::move(hash);
    anchored_ = true;
  }

  // Checks one event: its revision follows the one before it, and its hash
  // is what its body, place and predecessor give.
  void add(const storage::RawEvent& raw, std::vector<LedgerProblem>& out);
  // Checks the stored head (null when there is none) against the last event.
  void finish(const storage::StreamHead* head, std::vector<LedgerProblem>& out);

  bool broken() const { return broken_; }

 private:
  LedgerProblem problem(ProblemKind kind, std::string detail) const;
  std::string name() const;

  std::string kind_, id_, project_;
  std::int64_t events_ = 0;
  std::int64_t revision_ = 0;  // of the last event that advanced the chain
  Seq seq_ = 0;
  std::string hash_;           // as stored on that event
  bool broken_ = false;
  bool anchored_ = false;
};

// The log as a whole: every head's hash folds into the digest, every event
// into the count, every seq into the gap check.
class LogChain {
 public:
  void head(const storage::StreamHead& head);
  void event(Seq seq);
  // An archived stream (storage::StreamAnchor): its anchor_hash folds into
  // the digest in its head's place, its seqs count as events.
  void anchor(const storage::StreamAnchor& anchor);
  void stream_broken() { broken_ = true; }
  // Compares with the stored digest (nullopt: its row is gone). Reports
  // only what no stream already named: a deleted or edited head, events
  // removed together with their heads, seqs missing with intact chains.
  // `dense`: the backend hands out seqs with no gaps (LogSource::seqs_dense).
  void finish(const std::optional<storage::LogDigest>& digest, bool dense,
              std::vector<LedgerProblem>& out);
  // Holds the store's record of its segments (table `segments`) against
  // the log and the anchors: each record is what its segment_archived
  // makes (`logged`; null: the segment log could not be read), every
  // segment_archived and every anchor's segment is recorded, with the
  // anchors' digest, and every record counts exactly the streams and
  // events its anchors hold. A record with neither an event nor an anchor
  // is named; one with an event and no anchor is a segment whose streams
  // a restore brought back. nullopt: the log keeps no record (an export):
  // nothing to compare.
  void check_segments(const std::optional<std::vector<storage::LogSource::RecordedSegment>>& recorded,
                      const std::map<std::string, SegmentRow>* logged,
                      std::vector<LedgerProblem>& out) const;
  // The segments the anchors name.
  bool anchors_segment(const std::string& segment_id) const {
    return segments_.contains(segment_id);
  }
  // Each segment the anchors name, as a record made from them alone (what a
  // restore without segments records): its digest, streams and events; no
  // project, file, size or time. A segment whose anchors name two digests
  // is left out.
  std::vector<SegmentRow> records_from_anchors() const;


 private:
  Hash digest_{};
  std::int64_t events_ = 0;
  Seq last_seq_ = 0;
  std::vector<bool> seen_;  // seen_[seq], while seqs stay within kMaxTrackedSeq
  bool untracked_ = false;
  bool broken_ = false;
  // The anchors, by segment: what they say of it.
  struct SegmentTally {
    std::string digest;          // the first anchor's
    bool digests_differ = false;  // another anchor named another digest
    std::string project_id;       // the first anchor's
    bool projects_differ = false;
    std::int64_t streams = 0;
    std::int64_t events = 0;
  };
  std::map<std::string, SegmentTally> segments_;
};

}  // namespace cplane
