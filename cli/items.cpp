// cplane enqueue, claim, finish, item, events: the work items.
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

kj::MainFunc Cli::enqueue_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Queue a work item in PROJECT with a JSON payload (at most 1 MiB); prints the new "
             "item id. PAYLOAD_JSON may be - (read standard input) or @FILE (read FILE). With "
             "--batch FILE (or - for standard input), queue one payload per line (blank lines "
             "are skipped) in one transaction, all or nothing, and print the ids in order."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "enqueue as this scoped actor")
      .addOptionWithArg({"batch"}, KJ_BIND_METHOD(*this, set_batch), "<file|->",
                        "one JSON payload per line, queued in one transaction")
      .addOptionWithArg({"kind"}, KJ_BIND_METHOD(*this, set_kind), "<task|issue|pr>",
                        "what the item is (default task)")
      .addOptionWithArg({"ref"}, KJ_BIND_METHOD(*this, set_ref), "<ref>",
                        "the forge's reference, such as owner/repo#123")
      .addOptionWithArg({"head"}, KJ_BIND_METHOD(*this, set_head), "<sha>",
                        "a pr's head revision")
      .addOptionWithArg({"author"}, KJ_BIND_METHOD(*this, set_author), "<session>",
                        "a pr's author")
      .addOptionWithArg({"priority"}, KJ_BIND_METHOD(*this, set_priority), "<n>",
                        "the allocator's priority, higher first (default 0)")
      .addOptionWithArg({"key"}, KJ_BIND_METHOD(*this, set_key), "<key>",
                        "an idempotency key: the same key twice in a project prints the first "
                        "item's id and queues nothing")
      .addOptionWithArg({"max-attempts"}, KJ_BIND_METHOD(*this, set_max_attempts), "<n>",
                        "its own retry policy: at most N attempts (default: the project's)")
      .addOptionWithArg({"backoff"}, KJ_BIND_METHOD(*this, set_backoff), "<spec>",
                        "with --max-attempts: none, fixed:DURATION or exponential:BASE[:CAP]")
      .addOptionWithArg({"run-at"}, KJ_BIND_METHOD(*this, set_run_at), "<micros>",
                        "scheduled: not claimable before this time (microseconds)")
      .addOptionWithArg({"delay"}, KJ_BIND_METHOD(*this, set_delay), "<duration>",
                        "scheduled: not claimable before now + DURATION (30s, 10m, 2h, ...)")
      .addOptionWithArg({"concurrency-key"}, KJ_BIND_METHOD(*this, set_concurrency_key), "<key>",
                        "the concurrency key whose limit (cplane limit set) bounds it, across "
                        "projects")
      .expectArg("PROJECT", KJ_BIND_METHOD(*this, set_positional))
      .expectOptionalArg("PAYLOAD_JSON", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_enqueue))
      .build();
}

Validity Cli::set_batch(kj::StringPtr text) {
  if (text.size() == 0) return "--batch needs a file (or - for standard input)";
  if (batch_) return "--batch is given twice: queue one batch at a time";
  batch_ = std::string(text.cStr());
  return true;
}

std::vector<std::string> Cli::read_batch() const {
  std::ifstream file;
  if (*batch_ != "-") {
    file.open(*batch_, std::ios::binary);
    if (!file) {
      throw InvalidArgument(
          fmt::format("cannot read the batch file {}: {}", *batch_, std::strerror(errno)));
    }
  }
  std::istream& in = *batch_ == "-" ? std::cin : file;
  std::vector<std::string> payloads;
  std::string line;
  // A line is read up to just over the payload limit, never whole: a
  // file without newlines (/dev/zero) is refused, not read into memory.
  constexpr std::size_t kLineCap = kMaxPayloadBytes + 2;
  auto next_line = [&](std::string& out) {
    out.clear();
    char c;
    bool any = false;
    while (in.get(c)) {
      any = true;
      if (c == '\n') return true;
      if (out.size() >= kLineCap) return true;  // require_payload refuses it
      out.push_back(c);
    }
    return any;
  };
  for (std::size_t number = 1; next_line(line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      require_payload(line);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(fmt::format("line {} of {}: {}", number,
                                        *batch_ == "-" ? "standard input" : *batch_, e.what()));
    }
    payloads.push_back(std::move(line));
  }
  if (in.bad()) throw InvalidArgument(fmt::format("cannot read the batch {}", *batch_));
  if (payloads.empty()) {
    throw InvalidArgument(fmt::format("the batch {} holds no payload", *batch_));
  }
  return payloads;
}

Validity Cli::run_enqueue() {
  if (batch_ && args_.size() > 1) return "enqueue takes PAYLOAD_JSON or --batch, not both";
  if (!batch_ && args_.size() < 2) {
    return "enqueue needs PAYLOAD_JSON (JSON text, - for standard input, @FILE), or --batch";
  }
  if (batch_ && (kind_ || ref_ || head_ || author_ || priority_ || key_ || max_attempts_ ||
                 backoff_ || run_at_ || delay_ || concurrency_key_)) {
    return "enqueue --batch queues plain tasks: --kind, --ref, --head, --author, --priority, "
           "--key, --max-attempts, --backoff, --run-at, --delay and --concurrency-key are for "
           "one item";
  }
  if (backoff_ && !max_attempts_) return "--backoff needs --max-attempts N";
  return run([&] {
    require_name(args_[0], "project id");
    if (batch_) {
      const auto payloads = read_batch();
      auto store = open();
      const auto ids = store.enqueue_batch(args_[0], payloads, actor_, now_);
      changed_ = true;
      std::string out = json_ ? "[" : "";
      for (std::size_t i = 0; i < ids.size(); ++i) {
        out += json_ ? (i ? "," : "") +
                           JsonObject().str("item_id", ids[i]).str("project_id", args_[0]).done()
                     : (i ? "\n" : "") + ids[i];
      }
      print(json_ ? out + "]" : out);
      return;
    }
    const std::string payload = read_payload_argument(args_[1]);
    require_payload(payload);
    const ControlStore::EnqueueOptions options{.kind = kind_.value_or(WorkKind::task),
                                               .ref = ref_.value_or(""),
                                               .head = head_.value_or(""),
                                               .author = author_.value_or(""),
                                               .priority = priority_.value_or(0),
                                               .key = key_.value_or(""),
                                               .actor = actor_,
                                               .now = now_,
                                               .max_attempts = max_attempts_.value_or(0),
                                               .backoff = backoff_.value_or(""),
                                               .run_at = run_at_,
                                               .delay = delay_,
                                               .concurrency_key = concurrency_key_.value_or("")};
    if (options.kind != WorkKind::pr && (head_ || author_)) {
      throw InvalidArgument(fmt::format("only a pr has a {}: add --kind pr",
                                        head_ ? "head" : "author"));
    }
    if (head_) require_name(*head_, "head");
    auto store = open();
    auto id = store.enqueue(args_[0], payload, options);
    changed_ = true;
    print(json_ ? JsonObject().str("item_id", id).str("project_id", args_[0]).done() : id);
  });
}

kj::MainFunc Cli::claim_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Claim the oldest available item (ready, or with a lapsed lease) for OWNER. With "
             "--max N, claim up to N items in one transaction (JSON: an array). Exit 3 when "
             "there is nothing to claim."))
      .addOptionWithArg({"owner"}, KJ_BIND_METHOD(*this, set_owner), "<owner>",
                        "the worker that will hold the item (required)")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "claim only from this scoped actor's projects")
      .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                        "how long the claim holds (default 900)")
      .addOptionWithArg({"max"}, KJ_BIND_METHOD(*this, set_max), "<n>",
                        "claim up to n items in one transaction")
      .addOptionWithArg({"wait"}, KJ_BIND_METHOD(*this, set_wait), "<seconds>",
                        "when nothing is claimable, wait up to this long for an item "
                        "(PostgreSQL: LISTEN/NOTIFY; SQLite: a watch on its lock file), then exit 3")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_claim))
      .build();
}

Validity Cli::set_owner(kj::StringPtr text) {
  if (text.size() == 0) return "--owner needs a name";
  KJ_IF_MAYBE(error, check_name(text, "owner").releaseError()) { return kj::mv(*error); }
  owner_ = std::string(text.cStr());
  return true;
}

Validity Cli::set_lease(kj::StringPtr text) {
  auto v = parse_decimal(text);
  if (!v) return "--lease takes a decimal number of seconds (such as 30 or 0.5)";
  try {
    require_lease(Seconds{*v});
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  lease_ = *v;
  return true;
}

Validity Cli::set_key(kj::StringPtr text) {
  if (text.size() == 0) return "--key needs a non-empty key";
  KJ_IF_MAYBE(error, check_name(text, "key").releaseError()) { return kj::mv(*error); }
  key_ = std::string(text.cStr());
  return true;
}

Validity Cli::set_wait(kj::StringPtr text) {
  auto v = parse_decimal(text);
  if (!v || !(*v >= 0) || *v > kMaxLeaseSeconds) {
    return "--wait takes a non-negative decimal number of seconds (such as 30 or 0.5)";
  }
  wait_ = *v;
  return true;
}

Validity Cli::set_max(kj::StringPtr text) {
  auto v = parse_int<std::size_t>(text);
  if (!v && out_of_range(text) && text[0] != '-') return "--max is too large";
  if (!v || *v == 0) return "--max takes a positive integer";
  max_ = *v;
  return true;
}

ClaimOptions Cli::claim_options() const {
  ClaimOptions options{actor_, {}, now_};
  if (lease_) options.lease = Seconds{*lease_};
  if (wait_) options.wait = Seconds{*wait_};
  return options;
}

std::string Cli::claimed_json(const ClaimedItem& c) const {
  return JsonObject()
      .str("item_id", c.item_id)
      .str("project_id", c.project_id)
      .raw("payload", json_raw_or_string(c.payload))
      .num("fence", static_cast<std::int64_t>(c.fence))
      .num("attempts", c.attempts)
      .num("lease_expires_at", c.lease_expires_at)
      .str("owner", *owner_)
      .done();
}

std::string Cli::claimed_text(const ClaimedItem& c) {
  return fmt::format("item_id: {}\nproject_id: {}\nfence: {}\nattempts: {}\n"
                     "lease_expires_at: {}\npayload: {}",
                     c.item_id, c.project_id, c.fence, c.attempts, c.lease_expires_at,
                     c.payload);
}

void Cli::nothing_to_claim(const char* message, const char* empty_json) {
  if (json_) print(empty_json);
  context_.report_error("nothing_to_claim", "empty", message);
  throw Exit{kNothingToClaim};
}

Validity Cli::run_claim() {
  if (!owner_) return "claim needs --owner OWNER";
  if (max_ && wait_) return "claim --wait claims one item: leave out --max";
  return run([&] {
    auto store = open();
    if (max_) {
      auto batch = store.claim_batch(*owner_, *max_, claim_options());
      changed_ = !batch.empty();
      if (batch.empty()) nothing_to_claim("nothing to claim", "[]");
      std::string out = json_ ? "[" : "";
      for (std::size_t i = 0; i < batch.size(); ++i) {
        out += json_ ? (i ? "," : "") + claimed_json(batch[i])
                     : (i ? "\n\n" : "") + claimed_text(batch[i]);
      }
      print(json_ ? out + "]" : out);
      return;
    }
    auto claimed = store.claim(*owner_, claim_options());
    changed_ = claimed.has_value();
    if (!claimed) nothing_to_claim("nothing to claim");
    print(json_ ? claimed_json(*claimed) : claimed_text(*claimed));
  });
}

kj::MainFunc Cli::finish_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Report ITEM done or failed under its current fence. Several items may be "
             "given, each with its own --fence in the same order: all are finished in one "
             "transaction, or (exit 4) none. With --next --owner OWNER, also claim OWNER's "
             "next item in the same transaction (exit 3 if there is none). Exit 4 if a fence "
             "is stale or an item is not claimed."))
      .addOptionWithArg({"fence"}, KJ_BIND_METHOD(*this, set_fence), "<n>",
                        "the fence the claim returned (required; once per ITEM)")
      .addOptionWithArg({"status"}, KJ_BIND_METHOD(*this, set_status), "<done|failed>",
                        "the outcome (required)")
      .addOptionWithArg({"detail"}, KJ_BIND_METHOD(*this, set_detail), "<text>",
                        "a note kept with the outcome")
      .addOption({"no-retry"}, KJ_BIND_METHOD(*this, set_no_retry),
                 "with --status failed: a permanent error, failed at once whatever attempts "
                 "its retry policy leaves")
      .addOption({"next"}, KJ_BIND_METHOD(*this, set_next),
                 "also claim the next item for --owner, in the same transaction")
      .addOptionWithArg({"owner"}, KJ_BIND_METHOD(*this, set_owner), "<owner>",
                        "with --next: the worker that claims the next item")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "report as this scoped actor (exit 5 outside its projects); with "
                        "--next, claim only from its projects")
      .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                        "with --next: the next claim's lease (default 900)")
      .expectOneOrMoreArgs("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_finish))
      .build();
}

Validity Cli::set_fence(kj::StringPtr text) {
  auto v = parse_int<Fence>(text);
  if (!v && out_of_range(text) && text[0] != '-') {
    return "--fence is larger than any fence (the largest is 18446744073709551615)";
  }
  if (!v) return "--fence takes a non-negative integer";
  fences_.push_back(*v);
  return true;
}

Validity Cli::set_detail(kj::StringPtr text) {
  detail_ = std::string(text.cStr());
  return true;
}

Validity Cli::set_next() {
  next_ = true;
  return true;
}

Validity Cli::run_finish() {
  if (fences_.empty()) return "finish needs --fence N";
  if (fences_.size() != args_.size()) return "finish needs one --fence per ITEM, in order";
  if (!status_set_) return "finish needs --status done|failed";
  if (next_ && !owner_) return "finish --next needs --owner OWNER";
  if (next_ && args_.size() != 1) return "finish --next takes one ITEM";
  if (no_retry_ && status_ != "failed") return "--no-retry goes with --status failed";
  if (no_retry_ && (next_ || args_.size() != 1)) return "--no-retry takes one ITEM, without --next";
  return run([&] {
    const Outcome outcome = parse_outcome(status_);
    for (const auto& id : args_) require_name(id, "item id");
    if (detail_.size() > (64 << 10)) {
      throw InvalidArgument(fmt::format("the detail is {} bytes; the limit is {}",
                                        detail_.size(), 64 << 10));
    }
    auto store = open();
    if (next_) {
      auto next = store.finish_and_claim(args_[0], fences_[0], outcome, *owner_,
                                         claim_options(), detail_);
      changed_ = true;
      if (!next) nothing_to_claim("finished; nothing to claim next");
      print(json_ ? claimed_json(*next) : claimed_text(*next));
      return;
    }
    // The store refuses a scoped actor's report outside its projects
    // (exit 5), whether or not the item exists.
    if (args_.size() == 1) {
      store.finish(args_[0], fences_[0], outcome,
                   {.detail = detail_, .actor = actor_, .now = now_, .no_retry = no_retry_});
    } else {
      std::vector<ControlStore::Report> reports;
      for (std::size_t i = 0; i < args_.size(); ++i) {
        reports.push_back({args_[i], fences_[i], outcome, detail_});
      }
      store.finish_batch(reports, actor_, now_);
    }
    changed_ = true;
    std::string out = json_ && args_.size() > 1 ? "[" : "";
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (json_) {
        out += (i ? "," : "") + JsonObject()
                                    .str("item_id", args_[i])
                                    .str("status", to_string(outcome))
                                    .num("fence", static_cast<std::int64_t>(fences_[i]))
                                    .done();
      } else {
        out += fmt::format("{}{} {}", i ? "\n" : "", args_[i], to_string(outcome));
      }
    }
    print(json_ && args_.size() > 1 ? out + "]" : out);
  });
}

kj::MainFunc Cli::item_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Show ITEM's row. A scoped --actor sees only its projects' items."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "read as this scoped actor")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_item))
      .build();
}

Validity Cli::run_item() {
  return run([&] {
    auto store = open(Access::read);
    const Item row = store.item(args_[0], actor_);
    if (json_) {
      print(item_json(row));
    } else {
      std::string actions;
      for (const auto& a : row.actions) actions += (actions.empty() ? "" : ",") + a;
      print(fmt::format("item_id: {}\nproject_id: {}\nstatus: {}\nowner: {}\nfence: {}\n"
                        "attempts: {}\nlease_expires_at: {}\npayload: {}\ndetail: {}",
                        row.item_id, row.project_id, to_string(row.status), row.owner,
                        row.fence, row.attempts, row.lease_expires_at, row.payload,
                        row.detail));
      if (row.status == ItemStatus::scheduled) print(fmt::format("run_at: {}", row.run_at));
      if (!row.concurrency_key.empty()) {
        print(fmt::format("concurrency_key: {}", escape_invisible(row.concurrency_key)));
      }
      if (row.attempt_limit != 0 || row.max_attempts != 0) {
        print(fmt::format("max_attempts: {}\nbackoff: {}\nattempt_limit: {}", row.max_attempts,
                          row.backoff.empty() ? "none" : row.backoff, row.attempt_limit));
      }
      if (row.kind != WorkKind::task || !row.session.empty()) {
        print(fmt::format("kind: {}\nref: {}\nhead: {}\nreview: {}\nauthor: {}\nsession: {}\n"
                          "expected_head: {}\nactions: {}\nclose_reason: {}",
                          to_string(row.kind), row.ref, row.head, to_string(row.review),
                          row.author, row.session, row.expected_head, actions,
                          row.close_reason));
      }
    }
  });
}

kj::MainFunc Cli::events_command() {
  return globals(kj::MainBuilder(context_, kVersionLine, "Show ITEM's events, oldest first."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "read as this scoped actor")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_events))
      .build();
}

Validity Cli::run_events() {
  return run([&] {
    auto store = open(Access::read);
    auto events = store.events(args_[0], actor_);
    std::string out = json_ ? "[" : "";
    bool first = true;
    for (const auto& stored : events) {
      const Event& e = stored.event;
      if (json_) {
        out += (first ? "" : ",") + event_json(stored);
      } else {
        out += fmt::format("{}{} {} actor={} fence={} at={}", first ? "" : "\n", stored.seq,
                           type_name(e.body), e.actor, fence_of(e.body).value_or(0), e.at);
      }
      first = false;
    }
    if (json_) out += "]";
    if (json_ || !events.empty()) print(out);
  });
}

// ---- expire -------------------------------------------------------------------
kj::MainFunc Cli::expire_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Record a lease_expired event for every claim whose lease has lapsed and is not "
             "recorded yet: the history then shows who lost which item, and when. Items stay "
             "claimed (lapsed) until someone reclaims them; prints how many leases it expired."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_expire))
      .build();
}

Validity Cli::run_expire() {
  return run([&] {
    auto store = open(Access::write);
    const auto expired = store.expire_leases(now_);
    changed_ = expired > 0;
    print(json_ ? JsonObject().num("expired", expired).done() : std::to_string(expired));
  });
}

// ---- heartbeat / release ----------------------------------------------------
kj::MainFunc Cli::heartbeat_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Extend ITEM's lease under its current fence: it then ends --lease seconds from "
             "now (default 900). Exit 4 if the fence is not the current one, or the item is not "
             "claimed, is finished, or does not exist."))
      .addOptionWithArg({"fence"}, KJ_BIND_METHOD(*this, set_fence), "<n>",
                        "the fence the claim returned (required)")
      .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                        "the lease from now (default 900)")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "as this scoped actor (exit 5 outside its projects)")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_heartbeat))
      .build();
}

Validity Cli::run_heartbeat() {
  if (fences_.size() != 1) return "heartbeat needs one --fence N";
  return run([&] {
    require_name(args_[0], "item id");
    auto store = open();
    ControlStore::LeaseOptions options{.actor = actor_, .now = now_};
    if (lease_) options.lease = Seconds{*lease_};
    const Micros until = store.heartbeat(args_[0], fences_[0], options);
    changed_ = true;
    print(json_ ? JsonObject()
                      .str("item_id", args_[0])
                      .num("fence", static_cast<std::int64_t>(fences_[0]))
                      .num("lease_expires_at", until)
                      .done()
                : fmt::format("{} lease_expires_at: {}", args_[0], until));
  });
}

kj::MainFunc Cli::release_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Give ITEM back to the queue under its current fence: it is ready again, and the "
             "next claim takes a higher fence. Exit 4 if the fence is not the current one, or "
             "the item is not claimed, is finished, or does not exist."))
      .addOptionWithArg({"fence"}, KJ_BIND_METHOD(*this, set_fence), "<n>",
                        "the fence the claim returned (required)")
      .addOptionWithArg({"reason"}, KJ_BIND_METHOD(*this, set_reason), "<text>",
                        "why it is given back, kept in the event")
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "as this scoped actor (exit 5 outside its projects)")
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_release))
      .build();
}

Validity Cli::set_reason(kj::StringPtr text) {
  reason_ = std::string(text.cStr());
  return true;
}

Validity Cli::run_release() {
  if (fences_.size() != 1) return "release needs one --fence N";
  return run([&] {
    require_name(args_[0], "item id");
    auto store = open();
    store.release(args_[0], fences_[0], reason_, {.actor = actor_, .now = now_});
    changed_ = true;
    print(json_ ? JsonObject()
                      .str("item_id", args_[0])
                      .str("status", "ready")
                      .num("fence", static_cast<std::int64_t>(fences_[0]))
                      .done()
                : fmt::format("{} released", args_[0]));
  });
}

}  // namespace cplane::cli
