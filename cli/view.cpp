// The operator's view: `items` (a page of items, filtered, with a cursor),
// `tail` (the log as a stream) and `history` (one item's timeline). Reads
// only: each page or batch is one snapshot, and no command here takes the
// write lock.
#include <poll.h>

#include <cerrno>
#include <ctime>
#include <thread>

#include "cli/cli.hpp"

namespace cplane::cli {

namespace {

// Microseconds since the epoch as UTC, to the microsecond.
std::string utc(Micros at) {
  const std::time_t seconds = static_cast<std::time_t>(at / 1'000'000);
  std::tm tm{};
  if (at < 0 || ::gmtime_r(&seconds, &tm) == nullptr) return std::to_string(at);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     at % 1'000'000);
}

// A table: each column as wide as its widest cell (up to a cap), the last
// column as it is.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  constexpr std::size_t kCap = 40;
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], std::min(row[c].size(), kCap));
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      std::string cell = row[c].size() > kCap && c + 1 < row.size()
                             ? row[c].substr(0, kCap - 1) + "~"
                             : row[c];
      if (c + 1 < row.size()) cell.resize(width[c], ' ');
      line += (c ? "  " : "") + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    const auto comma = text.find(',');
    out.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
  }
  return out;
}

// True when standard output is a pipe whose reader went away (or a
// terminal that hung up): a quiet follower has nothing to write that would
// fail, so it asks.
bool reader_gone() {
  pollfd out{STDOUT_FILENO, 0, 0};
  return ::poll(&out, 1, 0) == 1 && (out.revents & (POLLERR | POLLHUP)) != 0;
}

// The log's end; a follower waits out a writer stopped mid-command (busy)
// as follow_log does, a one-shot read says so.
Seq final_end(ControlStore& store, bool follow) {
  for (bool said = false;; said = true) {
    try {
      return store.log_end();
    } catch (const StorageError& e) {
      if (!follow || e.category() != StorageError::Category::busy) throw;
      if (!said) std::cerr << "cplane: " << e.what() << " (waiting)\n";
    }
  }
}

}  // namespace

// ---- options ------------------------------------------------------------------------

Validity Cli::set_session_filter(kj::StringPtr text) {
  KJ_IF_MAYBE(error, check_name(text, "session id").releaseError()) { return kj::mv(*error); }
  session_filter_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_page_limit(kj::StringPtr text) {
  auto v = parse_int<std::size_t>(text);
  if (!v || *v < 1 || *v > ControlStore::kMaxListLimit) {
    return kj::str("--limit takes a whole number of items from 1 to ",
                   ControlStore::kMaxListLimit);
  }
  page_limit_ = *v;
  return true;
}

Validity Cli::set_after_item(kj::StringPtr text) {
  KJ_IF_MAYBE(error, check_name(text, "item id (the cursor)").releaseError()) {
    return kj::mv(*error);
  }
  after_item_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_after_seq(kj::StringPtr text) {
  auto v = parse_int<Seq>(text);
  if (!v || *v < 1) return "--after-seq takes the cursor's queued_seq: a whole number from 1";
  after_seq_ = *v;
  return true;
}

Validity Cli::set_order(kj::StringPtr text) {
  if (text == "newest") {
    oldest_first_ = false;
  } else if (text == "oldest") {
    oldest_first_ = true;
  } else {
    return "--order takes newest or oldest";
  }
  return true;
}

Validity Cli::set_jsonl() {
  jsonl_ = true;
  return true;
}

Validity Cli::set_tail_from(kj::StringPtr text) {
  auto v = parse_int<Seq>(text);
  if (!v || *v < 1) return "--from takes a seq: a whole number from 1";
  tail_from_ = *v;
  return true;
}

Validity Cli::set_from_end() {
  from_end_ = true;
  return true;
}

Validity Cli::set_follow() {
  follow_ = true;
  return true;
}

Validity Cli::set_tail_stream(kj::StringPtr text) {
  const std::string_view s(text.cStr(), text.size());
  const auto colon = s.find(':');
  const auto kind = colon == std::string_view::npos ? std::nullopt
                                                    : parse_stream_kind(s.substr(0, colon));
  if (!kind) {
    return "--stream takes KIND:ID, KIND one of item, project, session, incident, schedule, "
           "limit (such as item:0001)";
  }
  const std::string id(s.substr(colon + 1));
  KJ_IF_MAYBE(error, check_name(kj::StringPtr(id.c_str()), "stream id").releaseError()) {
    return kj::mv(*error);
  }
  tail_stream_ = StreamRef{*kind, id};
  return true;
}

Validity Cli::set_tail_types(kj::StringPtr text) {
  for (auto& t : split_commas(std::string_view(text.cStr(), text.size()))) {
    if (t.empty()) return "--type takes event type names separated by commas (such as claimed,done)";
    tail_types_.push_back(std::move(t));
  }
  return true;
}

// ---- items --------------------------------------------------------------------------

kj::MainFunc Cli::items_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "List items, newest first (--order oldest: oldest first), a page at a time: "
             "--after the last item of a page gives the next (printed as 'next: ...' on "
             "stderr, or as \"next\" with --json). Project and status are index seeks; the "
             "other filters narrow them. A table on a terminal; --json an object, --jsonl one "
             "item per line. A scoped --actor sees only its projects."))
      .addOptionWithArg({"project"}, KJ_BIND_METHOD(*this, set_project), "<id>",
                        "only this project's items")
      .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_statuses), "<s,...>",
                        "only these statuses (ready, scheduled, claimed, done, failed, closed, "
                        "cancelled)")
      .addOptionWithArg({"owner"}, KJ_BIND_METHOD(*this, set_owner), "<owner>",
                        "only items this owner claimed last")
      .addOptionWithArg({"kind"}, KJ_BIND_METHOD(*this, set_kind), "<task|issue|pr>",
                        "only items of this kind")
      .addOptionWithArg({"key"}, KJ_BIND_METHOD(*this, set_key), "<key>",
                        "only the item queued with this idempotency key")
      .addOptionWithArg({"concurrency-key"}, KJ_BIND_METHOD(*this, set_concurrency_key),
                        "<key>", "only items of this concurrency key")
      .addOptionWithArg({"session"}, KJ_BIND_METHOD(*this, set_session_filter), "<id>",
                        "only items assigned to this session")
      .addOptionWithArg({"limit"}, KJ_BIND_METHOD(*this, set_page_limit), "<n>",
                        "items per page (default 50, at most 1000)")
      .addOptionWithArg({"after"}, KJ_BIND_METHOD(*this, set_after_item), "<item>",
                        "the cursor: the last item of the previous page")
      .addOptionWithArg({"after-seq"}, KJ_BIND_METHOD(*this, set_after_seq), "<seq>",
                        "with --after: the cursor's place as its page printed it (an item "
                        "redriven since has moved to the back of the queue)")
      .addOptionWithArg({"order"}, KJ_BIND_METHOD(*this, set_order), "<newest|oldest>",
                        "newest first (the default) or oldest first, by queue order")
      .addOption({"jsonl"}, KJ_BIND_METHOD(*this, set_jsonl), "one JSON item per line")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "read as this scoped actor")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_items))
      .build();
}

Validity Cli::run_items() {
  if (after_seq_ && !after_item_) return "--after-seq goes with --after ITEM";
  return run([&] {
    auto store = open(Access::read);
    ControlStore::ItemQuery q;
    q.project = project_;
    q.statuses = statuses_;
    q.owner = owner_;
    q.session = session_filter_;
    q.kind = kind_;
    q.key = key_;
    q.concurrency_key = concurrency_key_;
    q.order = oldest_first_ ? ControlStore::ItemQuery::Order::oldest
                            : ControlStore::ItemQuery::Order::newest;
    q.after = after_item_;
    q.after_seq = after_seq_;
    q.limit = page_limit_;
    const auto page = store.list_items(q, actor_);
    if (jsonl_) {
      for (const auto& item : page.items) print(item_json(item));
    } else if (json_) {
      std::string items = "[";
      for (std::size_t i = 0; i < page.items.size(); ++i) {
        items += (i ? "," : "") + item_json(page.items[i]);
      }
      print(JsonObject()
                .raw("items", items + "]")
                .raw("next", page.next ? json_string(*page.next) : "null")
                .raw("next_seq", page.next_seq ? std::to_string(*page.next_seq) : "null")
                .done());
    } else {
      std::vector<std::vector<std::string>> rows{
          {"ITEM", "PROJECT", "STATUS", "OWNER", "FENCE", "ATTEMPTS", "UPDATED", "PAYLOAD"}};
      for (const auto& item : page.items) {
        rows.push_back({escape_invisible(item.item_id), escape_invisible(item.project_id),
                        std::string(to_string(item.status)), escape_invisible(item.owner),
                        std::to_string(item.fence), std::to_string(item.attempts),
                        utc(item.updated_at), escape_invisible(item.payload)});
      }
      if (!page.items.empty()) print_raw(table(rows));
      if (page.next) {
        std::cerr << "next: --after " << *page.next << " --after-seq " << *page.next_seq << '\n';
      }
    }
  });
}

// ---- tail and history ---------------------------------------------------------------

std::string Cli::event_line(const StoredEvent& stored, bool timeline) const {
  if (json_ || jsonl_) return event_json(stored);
  const Event& e = stored.event;
  const StreamRef stream = stream_of(e);
  std::string line = fmt::format("{}  {:>6}  {}", utc(e.at), stored.seq, type_name(e.body));
  if (!timeline) line += fmt::format("  {}:{}", to_string(stream.kind), escape_invisible(stream.id));
  if (const auto fence = fence_of(e.body)) line += fmt::format("  fence={}", *fence);
  if (!e.actor.empty()) line += fmt::format("  actor={}", escape_invisible(e.actor));
  for (const auto& field : fields_of(e.body)) {
    if (field.name == "fence") continue;
    std::string value;
    if (const auto* s = std::get_if<std::string>(&field.value)) {
      if (s->empty()) continue;
      value = escape_invisible(*s);
    } else if (const auto* n = std::get_if<std::int64_t>(&field.value)) {
      if (*n == 0) continue;
      value = std::to_string(*n);
    } else if (const auto* j = std::get_if<EventField::Json>(&field.value)) {
      value = escape_invisible(j->text);
    } else if (const auto* list = std::get_if<std::vector<std::string>>(&field.value)) {
      if (list->empty()) continue;
      for (const auto& v : *list) value += (value.empty() ? "" : ",") + escape_invisible(v);
    } else {
      continue;
    }
    line += fmt::format("  {}={}", field.name, value);
  }
  return line;
}

constexpr auto kFollowerPace = std::chrono::milliseconds(100);

// Prints every final event after query.after, batch by batch, flushing each
// (a consumer reading the pipe sees them as they come); with --follow,
// waits for more until killed or its output closes.
void Cli::follow_log(ControlStore& store, ControlStore::LogQuery query, bool timeline) {
  const bool array = json_ && !jsonl_ && !follow_;
  bool first = true;
  bool held_back = false;  // said once per stall
  // The reader went away while nothing was being written: as a failed
  // write would have said, so that main reports it.
  auto stop_following = [&] {
    context_.output.clear();
    context_.write_error = EPIPE;
  };
  if (array) print_raw("[");
  auto last_read = std::chrono::steady_clock::now();
  for (;;) {
    ControlStore::LogPage page;
    try {
      last_read = std::chrono::steady_clock::now();
      page = store.read_log(query);
      held_back = false;
    } catch (const StorageError& e) {
      // A writer stopped mid-transaction holds back what is final: a
      // follower waits it out, a one-shot read says so.
      if (!follow_ || e.category() != StorageError::Category::busy) throw;
      if (!held_back) std::cerr << "cplane: " << e.what() << " (waiting)\n";
      held_back = true;
      if (reader_gone()) return stop_following();
      store.wait_for_log(query.after, std::chrono::seconds(1));
      continue;
    }
    for (const auto& stored : page.events) {
      if (array) {
        print_raw(std::string(first ? "" : ",") + event_json(stored));
      } else {
        print(event_line(stored, timeline));
      }
      first = false;
    }
    const bool moved = page.next != query.after;
    query.after = page.next;
    if (follow_ && !context_.flush_output()) return;  // the reader went away: main says so
    if (moved) continue;  // more may be there
    if (!follow_) break;
    if (reader_gone()) return stop_following();
    // A second at a time, so that a reader that went away is noticed.
    store.wait_for_log(query.after, std::chrono::seconds(1));
    // At most ten reads a second: a busy log is read in batches, and on
    // PostgreSQL each read looks up the log's writers (pg_locks), which
    // every writer's locking then waits on.
    std::this_thread::sleep_until(last_read + kFollowerPace);
  }
  if (array) print("]");
}

kj::MainFunc Cli::tail_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "The log as a stream, oldest first: each event with its seq, stream, type, time, "
             "fence, actor, request id and body. From the start, --from SEQ (that seq and "
             "after) or --from-end (only what comes next). --follow waits for new events "
             "(inotify on SQLite's WAL, LISTEN on PostgreSQL, a look every second as the "
             "fallback) until killed or its reader goes away. Only final events are printed: a "
             "consumer that resumes with --from LAST+1 misses none and sees none twice."))
      .addOptionWithArg({"from"}, KJ_BIND_METHOD(*this, set_tail_from), "<seq>",
                        "start at this seq (resume: the last seq seen + 1)")
      .addOption({"from-end"}, KJ_BIND_METHOD(*this, set_from_end),
                 "start after the newest event: print only what comes next")
      .addOption({"follow"}, KJ_BIND_METHOD(*this, set_follow), "wait for new events")
      .addOptionWithArg({"stream"}, KJ_BIND_METHOD(*this, set_tail_stream), "<kind:id>",
                        "only this stream's events (such as item:0001 or project:alpha)")
      .addOptionWithArg({"type"}, KJ_BIND_METHOD(*this, set_tail_types), "<t,...>",
                        "only these event types (such as claimed,done,failed)")
      .addOption({"jsonl"}, KJ_BIND_METHOD(*this, set_jsonl), "one JSON event per line")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_tail))
      .build();
}

Validity Cli::run_tail() {
  if (tail_from_ && from_end_) return "give --from SEQ or --from-end, not both";
  return run([&] {
    auto store = open(Access::read);
    ControlStore::LogQuery q;
    q.stream = tail_stream_;
    q.types = tail_types_;
    if (from_end_ || tail_from_) {
      const Seq end = final_end(store, follow_);
      if (from_end_) {
        q.after = end;
      } else {
        if (*tail_from_ > end + 1) {
          throw InvalidArgument(fmt::format("--from {} is past the end of the log (its newest "
                                            "final seq is {}): resume with --from {} at most",
                                            *tail_from_, end, end + 1));
        }
        q.after = *tail_from_ - 1;
      }
    }
    follow_log(store, q, false);
  });
}

kj::MainFunc Cli::history_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "ITEM's events as a timeline, oldest first: who held it under which fence, each "
             "lease, release, expiry, retry, cancel and recorded mutation, and who did it. "
             "--follow waits for more. A scoped --actor sees only its projects' items."))
      .addOption({"follow"}, KJ_BIND_METHOD(*this, set_follow), "wait for new events")
      .addOption({"jsonl"}, KJ_BIND_METHOD(*this, set_jsonl), "one JSON event per line")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "read as this scoped actor")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_history))
      .build();
}

Validity Cli::run_history() {
  return run([&] {
    auto store = open(Access::read);
    // The item's events as they stand (scope and existence checked there),
    // then, with --follow, its stream from after the last of them.
    const auto events = store.events(args_[0], actor_);
    const bool array = json_ && !jsonl_ && !follow_;
    std::string out;
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (array) {
        out += (i ? "," : "[") + event_json(events[i]);
      } else {
        print(event_line(events[i], true));
      }
    }
    if (array) print(events.empty() ? "[]" : out + "]");
    if (!follow_) return;
    ControlStore::LogQuery q;
    q.after = events.empty() ? 0 : events.back().seq;
    q.stream = StreamRef{StreamKind::item, args_[0]};
    follow_log(store, q, true);
  });
}

}  // namespace cplane::cli
