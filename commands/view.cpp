// The operator's view: the item listing and the log as a stream. Reads
// only: one snapshot each, never the write lock (DESIGN: the operator's
// view never blocks a writer).
#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "commands/control_store.hpp"
#include "commands/internal.hpp"
#include "events/codec.hpp"
#include "events/errors.hpp"

namespace cplane {

using namespace detail;
using storage::Transaction;

namespace {

// Every stored type name: one per kind, and ItemFinished's two.
const std::vector<std::string>& known_type_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (out.emplace_back(type_name(EventBody(std::in_place_index<I>))), ...);
    }(std::make_index_sequence<std::variant_size_v<EventBody>>());
    out.emplace_back(type_name(EventBody(ItemFinished{Outcome::failed, 0, ""})));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }();
  return names;
}

void require_type_names(const std::vector<std::string>& types) {
  const auto& known = known_type_names();
  for (const auto& t : types) {
    if (!std::binary_search(known.begin(), known.end(), t)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InvalidArgument(fmt::format("unknown event type {} (the types: {})", quote_id(t), list));
    }
  }
}

// An event the log read examines: its body, which must be of the type and
// stream its columns say.
Event decode_examined(const storage::RawEvent& r) {
  auto corrupt = [&](const std::string& what,
                     StorageError::Category category = StorageError::Category::corruption) {
    const bool edited = category == StorageError::Category::corruption;
    return StorageError(category, fmt::format("event {} {}{}", r.seq, what,
                                              edited ? ": the log was edited outside cplane; "
                                                       "run cplane verify"
                                                     : ""));
  };
  Event e;
  try {
    e = decode(r.body);
  } catch (const UnreadableEvent& error) {
    throw corrupt(fmt::format("does not decode ({})", error.what()), error.category());
  }
  if (type_name(e.body) != r.type) {
    throw corrupt(fmt::format("is stored as type {} but its body is {}", quote_id(r.type),
                              type_name(e.body)));
  }
  const StreamRef stream = stream_of(e);
  if (to_string(stream.kind) != r.stream_kind || stream.id != r.stream_id) {
    throw corrupt(fmt::format("is stored in stream {}:{} but its body is of {}:{}",
                              quote_id(r.stream_kind), quote_id(r.stream_id),
                              to_string(stream.kind), quote_id(stream.id)));
  }
  return e;
}

}  // namespace

ControlStore::ItemPage ControlStore::list_items(const ItemQuery& query,
                                                const std::optional<std::string>& actor) {
  return Impl::of(*this).list_items(query, actor);
}

ControlStore::LogPage ControlStore::read_log(const LogQuery& query) {
  return Impl::of(*this).read_log(query);
}

Seq ControlStore::log_end() { return Impl::of(*this).log_end(); }

bool ControlStore::wait_for_log(Seq after, std::chrono::milliseconds timeout) {
  return Impl::of(*this).wait_for_log(after, timeout);
}

ControlStore::ItemPage ControlStore::Impl::list_items(const ItemQuery& query,
                                                      const std::optional<std::string>& actor) {
  const InUse in_use(*this);
  require_actor(actor);
  if (query.limit < 1 || query.limit > kMaxListLimit) {
    throw InvalidArgument(fmt::format("a page holds 1 to {} items (limit {})", kMaxListLimit,
                                      query.limit));
  }
  if (query.project) require_name(*query.project, "project id");
  if (query.after) require_name(*query.after, "item id");
  if (query.after_seq && !query.after) {
    throw InvalidArgument("a cursor's place (after_seq) needs its item (after)");
  }
  if (query.after_seq && *query.after_seq < 1) {
    throw InvalidArgument(fmt::format("a cursor's place is a queued_seq from 1 (after_seq {})",
                                      *query.after_seq));
  }
  for (const auto* text : {&query.owner, &query.session, &query.key, &query.concurrency_key}) {
    if (*text && text->value().empty()) throw InvalidArgument("a filter needs a non-empty value");
  }
  std::vector<ItemStatus> statuses = query.statuses;
  if (statuses.empty()) {
    for (std::size_t s = 0; s < kItemStatuses; ++s) statuses.push_back(static_cast<ItemStatus>(s));
  }
  std::sort(statuses.begin(), statuses.end());
  statuses.erase(std::unique(statuses.begin(), statuses.end()), statuses.end());

  auto tx = Transaction::read(*backend_);
  // Which projects: the one asked for, else every one (unscoped) or the actor's.
  std::vector<std::optional<std::string>> projects;
  if (query.project) {
    if (actor) {
      if (!backend_->is_assigned(*query.project, *actor)) throw ScopeDenied();
    } else if (!backend_->find_project(*query.project)) {
      throw NotFound(NotFound::Reason::unknown_project,
                     fmt::format("no such project: {}", quote_id(*query.project)));
    }
    projects.emplace_back(*query.project);
  } else if (actor) {
    for (auto& p : backend_->project_ids(&*actor)) projects.emplace_back(std::move(p));
  } else {
    projects.emplace_back(std::nullopt);
  }
  const bool newest = query.order == ItemQuery::Order::newest;
  storage::ItemListing listing;
  listing.newest_first = newest;
  listing.limit = query.limit + 1;  // one more: is there a next page?
  if (query.after) {
    const auto cursor = backend_->find_item(*query.after);
    if (cursor && actor && !backend_->is_assigned(cursor->project_id, *actor)) throw ScopeDenied();
    if (!cursor) {
      if (actor) throw ScopeDenied();
      throw NotFound(NotFound::Reason::unknown_item,
                     fmt::format("the cursor {} names no item (--after takes the last item id "
                                 "of the previous page)",
                                 quote_id(*query.after)));
    }
    // Where the previous page saw it: a redrive since moved it to the back.
    listing.beyond = query.after_seq.value_or(cursor->queued_seq);
  }
  listing.owner = query.owner ? &*query.owner : nullptr;
  listing.session = query.session ? &*query.session : nullptr;
  listing.idem_key = query.key ? &*query.key : nullptr;
  listing.concurrency_key = query.concurrency_key ? &*query.concurrency_key : nullptr;
  listing.kind = query.kind;
  // One walk per (project, status), each in queue order: merged, the first
  // limit + 1 of them.
  std::vector<ItemRow> rows;
  if (query.key) {
    // An idempotency key names at most one item per project: one seek on
    // items_by_key per project, then the other filters on that row.
    auto keep = [&](const ItemRow& r) {
      if (std::find(statuses.begin(), statuses.end(), r.status) == statuses.end()) return false;
      if (query.owner && r.owner != *query.owner) return false;
      if (query.session && r.session != *query.session) return false;
      if (query.concurrency_key && r.concurrency_key != *query.concurrency_key) return false;
      if (query.kind && r.kind != *query.kind) return false;
      if (listing.beyond) return newest ? r.queued_seq < *listing.beyond : r.queued_seq > *listing.beyond;
      return true;
    };
    std::vector<std::string> ids;
    if (projects.size() == 1 && !projects[0]) {
      ids = backend_->project_ids(nullptr);
    } else {
      for (const auto& p : projects) ids.push_back(*p);
    }
    for (const auto& p : ids) {
      auto row = backend_->find_item_by_key(p, *query.key);
      if (row && keep(*row)) rows.push_back(std::move(*row));
    }
  }
  for (const auto& project : projects) {
    if (query.key) break;
    listing.project_id = project ? &*project : nullptr;
    for (const ItemStatus status : statuses) {
      listing.status = status;
      auto part = backend_->list_items(listing);
      rows.insert(rows.end(), std::make_move_iterator(part.begin()),
                  std::make_move_iterator(part.end()));
    }
  }
  tx.commit();
  const std::size_t keep = std::min(rows.size(), query.limit + 1);
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(keep), rows.end(),
                    [&](const ItemRow& a, const ItemRow& b) {
                      return newest ? a.queued_seq > b.queued_seq : a.queued_seq < b.queued_seq;
                    });
  rows.resize(keep);
  ItemPage page;
  if (rows.size() > query.limit) {
    rows.pop_back();
    page.next = rows.back().item_id;
    page.next_seq = rows.back().queued_seq;
  }
  page.items = std::move(rows);
  return page;
}

ControlStore::LogPage ControlStore::Impl::read_log(const LogQuery& query) {
  const InUse in_use(*this);
  if (query.after < 0) throw InvalidArgument("a log position (seq) is not negative");
  if (query.max < 1 || query.max > kMaxLogRead) {
    throw InvalidArgument(fmt::format("a log read takes 1 to {} events (max {})", kMaxLogRead,
                                      query.max));
  }
  if (query.stream) require_name(query.stream->id, "stream id");
  require_type_names(query.types);
  LogPage page;
  page.next = query.after;
  // A type filter reads past what it skips, in pages, up to `max` examined
  // events: the cursor then moves on even when none matched. Every examined
  // event is decoded and checked against its stored type and stream, and
  // the filter goes by the body: a column that lies is reported, never a
  // reason to skip an event (or to deliver another stream's).
  const auto raw = backend_->read_final(query.after, query.max,
                                        query.stream ? &*query.stream : nullptr);
  for (const auto& r : raw) {
    page.next = r.seq;
    StoredEvent e{r.seq, decode_examined(r)};
    if (!query.types.empty() && std::find(query.types.begin(), query.types.end(),
                                          type_name(e.event.body)) == query.types.end()) {
      continue;
    }
    page.events.push_back(std::move(e));
  }
  return page;
}

Seq ControlStore::Impl::log_end() {
  const InUse in_use(*this);
  return backend_->final_horizon();
}

bool ControlStore::Impl::wait_for_log(Seq after, std::chrono::milliseconds timeout) {
  const InUse in_use(*this);
  if (after < 0) throw InvalidArgument("a log position (seq) is not negative");
  if (timeout.count() < 0) throw InvalidArgument("a wait's timeout is not negative");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Arm the wake-up first, then look: a commit between the look and the
  // wait still wakes it.
  backend_->wait_for_commit(deadline);
  for (;;) {
    try {
      if (!backend_->read_final(after, 1, nullptr).empty()) return true;
    } catch (const StorageError& e) {
      // A writer stopped mid-command: nothing after it is final yet.
      if (e.category() != StorageError::Category::busy) throw;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    // The fallback: look again at least once a second, whatever woke us.
    backend_->wait_for_commit(std::min(deadline, now + std::chrono::seconds(1)));
  }
}

}  // namespace cplane
