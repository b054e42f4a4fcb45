// An archived stream's truth, from its events (recovery/anchor_fold.hpp).
#include "recovery/anchor_fold.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "events/chain.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "storage/log_source.hpp"
#include "verify/quote.hpp"

namespace cplane {

template <class Row>
Row fold_stream(StreamKind kind, const std::string& id,
                const std::vector<storage::RawEvent>& events, Seq* pass_claim) {
  const std::string_view kind_name = to_string(kind);
  Row row;
  Hash prev = kNoHash;
  std::int64_t revision = 0;
  for (const auto& raw : events) {
    Hash stored{};
    const bool chained = ++revision == raw.revision && raw.stream_kind == kind_name &&
                         raw.stream_id == id && hash_from_bytes(raw.hash, stored) &&
                         stored_chain_hash(prev, raw.seq, raw.revision, raw.stream_kind,
                                           raw.stream_id, raw.body, raw.payload_hash) == stored;
    if (!chained) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{} {}'s event seq {} is not chained to the one before "
                                     "it: the log was edited outside cplane. Nothing was "
                                     "archived; run cplane verify",
                                     kind_name, id, raw.seq));
    }
    prev = stored;
    StoredEvent event{raw.seq, decode(raw.body)};
    if (stream_of(event.event) != StreamRef{kind, id}) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{} {}'s event seq {} belongs to another stream: the log "
                                     "was edited outside cplane. Nothing was archived; run "
                                     "cplane verify",
                                     kind_name, id, raw.seq));
    }
    if (pass_claim != nullptr) {
      if (const auto* c = std::get_if<ItemClaimed>(&event.event.body); c && c->fair_pass != 0) {
        *pass_claim = raw.seq;
      }
    }
    row = apply(std::move(row), event);
  }
  return row;
}

template ItemRow fold_stream<ItemRow>(StreamKind, const std::string&,
                                     const std::vector<storage::RawEvent>&, Seq*);
template SessionRow fold_stream<SessionRow>(StreamKind, const std::string&,
                                           const std::vector<storage::RawEvent>&, Seq*);
template ScheduleRow fold_stream<ScheduleRow>(StreamKind, const std::string&,
                                             const std::vector<storage::RawEvent>&, Seq*);

storage::StreamAnchor anchor_of(StreamKind kind, const std::string& id,
                                const std::vector<storage::RawEvent>& events) {
  storage::StreamAnchor a;
  a.stream_kind = std::string(to_string(kind));
  a.stream_id = id;
  a.revision = events.back().revision;
  a.last_seq = events.back().seq;
  a.hash = events.back().hash;
  a.events = static_cast<std::int64_t>(events.size());
  std::vector<Seq> seqs;
  seqs.reserve(events.size());
  for (const auto& e : events) seqs.push_back(e.seq);
  a.seqs = storage::pack_seqs(seqs);
  return a;
}

void promise(storage::StreamAnchor& a, const ItemRow& fold) {
  a.project_id = fold.project_id;
  a.state = std::string(to_string(fold.status));
  a.fence = static_cast<std::int64_t>(std::max(fold.fence, fold.ended_fence));
  a.idem_key = fold.key;
  a.ended_at = fold.updated_at;
}
void promise(storage::StreamAnchor& a, const SessionRow& fold) {
  a.state = "closed";
  a.ended_at = fold.closed_at;
}
void promise(storage::StreamAnchor& a, const ScheduleRow& fold) {
  a.project_id = fold.project_id;
  a.state = "removed";
  a.ended_at = fold.updated_at;
}

std::optional<storage::StreamAnchor> promised_anchor(
    const std::vector<storage::RawEvent>& events) {
  if (events.empty()) return std::nullopt;
  const auto kind = parse_stream_kind(events.front().stream_kind);
  const std::string& id = events.front().stream_id;
  if (!kind) return std::nullopt;
  try {
    storage::StreamAnchor a = anchor_of(*kind, id, events);
    if (kind == StreamKind::item) {
      promise(a, fold_stream<ItemRow>(*kind, id, events));
    } else if (kind == StreamKind::session) {
      promise(a, fold_stream<SessionRow>(*kind, id, events));
    } else if (kind == StreamKind::schedule) {
      promise(a, fold_stream<ScheduleRow>(*kind, id, events));
    } else {
      return std::nullopt;
    }
    return a;
  } catch (const StorageError&) {  // not chained, another stream's, unreadable
    return std::nullopt;
  }
}

std::vector<std::string> broken_promises(const storage::StreamAnchor& anchor,
                                         const storage::StreamAnchor& promised) {
  std::vector<std::string> out;
  auto field = [&](const char* name, const auto& said, const auto& folded) {
    if (said != folded) out.push_back(fmt::format("{} {} (its events: {})", name, said, folded));
  };
  auto key = [](const std::string& k) { return k.empty() ? std::string("none") : quoted(k); };
  field("project", quoted(anchor.project_id), quoted(promised.project_id));
  field("state", quoted(anchor.state), quoted(promised.state));
  field("fence", anchor.fence, promised.fence);
  field("key", key(anchor.idem_key), key(promised.idem_key));
  field("end time", anchor.ended_at, promised.ended_at);
  field("events", anchor.events, promised.events);
  field("revision", anchor.revision, promised.revision);
  field("last seq", anchor.last_seq, promised.last_seq);
  if (anchor.seqs != promised.seqs) {
    auto listed = [](const std::string& packed) {
      std::vector<Seq> seqs;
      if (!storage::unpack_seqs(packed, seqs)) return std::string("(unreadable)");
      return fmt::format("{}", fmt::join(seqs, ","));
    };
    out.push_back(fmt::format("seqs {} (its events: {})", listed(anchor.seqs),
                              listed(promised.seqs)));
  }
  return out;
}

}  // namespace cplane
