// cplane session open|heartbeat|close, sessions, observe, assign, gate: the
// agents' side of the control plane (see README.md, "Sessions, the lease
// lifecycle and the gate").
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

// ---- session ------------------------------------------------------------------

kj::MainFunc Cli::session_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Open a session (one agent at work), keep the leases it holds "
                                 "alive, close it."))
      .addSubCommand("open", KJ_BIND_METHOD(*this, session_open_command), "open a session")
      .addSubCommand("heartbeat", KJ_BIND_METHOD(*this, session_heartbeat_command),
                     "extend every live lease the session holds")
      .addSubCommand("close", KJ_BIND_METHOD(*this, session_close_command),
                     "close the session and release what it holds")
      .build();
}

kj::MainFunc Cli::session_open_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Open SESSION. With --actor, its work comes only from that actor's projects. "
             "Opening an open session again as the same actor changes nothing; a closed "
             "session's id is not reused (exit 2)."))
      .addOptionWithArg({"actor"}, KJ_BIND_METHOD(*this, set_actor), "<actor>",
                        "the scoped actor the session works for")
      .expectArg("SESSION", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_session_open))
      .build();
}

Validity Cli::run_session_open() {
  return run([&] {
    require_name(args_[0], "session id");
    auto store = open();
    store.open_session(args_[0], actor_, now_);
    changed_ = true;
    print(json_ ? JsonObject().str("session", args_[0]).str_or_null("actor", actor_.value_or(""))
                      .done()
                : args_[0]);
  });
}

kj::MainFunc Cli::session_heartbeat_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "SESSION is alive: every live lease it holds now ends --lease seconds from now "
             "(default 900), one lease_extended event per item. A lapsed lease stays lapsed. "
             "Exit 7 for an unknown or closed session."))
      .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                        "the lease from now (default 900)")
      .expectArg("SESSION", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_session_heartbeat))
      .build();
}

Validity Cli::run_session_heartbeat() {
  return run([&] {
    require_name(args_[0], "session id");
    auto store = open(Access::write);
    const auto extended = store.session_heartbeat(
        args_[0], lease_ ? std::optional<Seconds>(Seconds{*lease_}) : std::nullopt, now_);
    changed_ = true;
    if (json_) {
      std::string items = "[";
      for (std::size_t i = 0; i < extended.size(); ++i) {
        items += (i ? "," : "") + JsonObject()
                                      .str("item_id", extended[i].first)
                                      .num("lease_expires_at", extended[i].second)
                                      .done();
      }
      print(JsonObject().str("session", args_[0]).raw("extended", items + "]").done());
    } else {
      std::string out = fmt::format("{}: {} lease(s) extended", args_[0], extended.size());
      for (const auto& [item, until] : extended) {
        out += fmt::format("\n{} lease_expires_at: {}", item, until);
      }
      print(out);
    }
  });
}

kj::MainFunc Cli::session_close_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Close SESSION: every item it holds is released (ready again, the next claim "
             "takes a higher fence). Closing a closed session changes nothing; exit 7 for one "
             "never opened."))
      .expectArg("SESSION", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_session_close))
      .build();
}

Validity Cli::run_session_close() {
  return run([&] {
    require_name(args_[0], "session id");
    auto store = open(Access::write);
    const auto released = store.close_session(args_[0], now_);
    changed_ = true;
    print(json_ ? JsonObject().str("session", args_[0]).raw("released", json_strings(released))
                      .done()
                : fmt::format("{}: closed, {} item(s) released", args_[0], released.size()));
  });
}

kj::MainFunc Cli::sessions_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "List every session, by id, with the items it holds a live "
                                 "lease on."))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_sessions))
      .build();
}

Validity Cli::run_sessions() {
  return run([&] {
    auto store = open(Access::read);
    const auto all = store.sessions(now_);
    std::string out = json_ ? "[" : "";
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto& [row, items] = all[i];
      if (json_) {
        out += (i ? "," : "") + session_json(all[i]);
      } else {
        std::string held;
        for (const auto& item : items) held += (held.empty() ? "" : ",") + item;
        out += fmt::format("{}{} {} actor={} last_seen_at={} items={}", i ? "\n" : "",
                           row.session_id, row.is_open() ? "open" : "closed",
                           row.actor.empty() ? "-" : row.actor, row.last_seen_at,
                           held.empty() ? "-" : held);
      }
    }
    if (json_) out += "]";
    if (json_ || !all.empty()) print(out);
  });
}

// ---- observe ------------------------------------------------------------------

kj::MainFunc Cli::observe_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "Record what the forge shows. No fence: these are the world's "
                                 "facts. An unchanged value, or an item already terminal, "
                                 "records nothing (changed: false)."))
      .addSubCommand("head", KJ_BIND_METHOD(*this, observe_head_command),
                     "a pr's head moved to SHA")
      .addSubCommand("review", KJ_BIND_METHOD(*this, observe_review_command),
                     "a pr's review state is now none, approved or changes_requested")
      .addSubCommand("close", KJ_BIND_METHOD(*this, observe_close_command),
                     "the item was merged or closed: terminal for everyone")
      .build();
}

kj::MainFunc Cli::observe_head_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "ITEM's head is now SHA (a pr only; exit 2 otherwise)."))
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("SHA", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing([this]() { return run_observe("head"); })
      .build();
}

kj::MainFunc Cli::observe_review_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "ITEM's review state is now STATE: none, approved or "
                                 "changes_requested (a pr only; exit 2 otherwise)."))
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("STATE", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing([this]() { return run_observe("review"); })
      .build();
}

kj::MainFunc Cli::observe_close_command() {
  return globals(kj::MainBuilder(context_, kVersionLine,
                                 "ITEM was closed on the forge, as REASON: merged or closed. It "
                                 "is terminal for everyone; who held it stays on record."))
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("REASON", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing([this]() { return run_observe("close"); })
      .build();
}

Validity Cli::run_observe(const char* what) {
  const std::string_view kind = what;
  return run([&] {
    require_name(args_[0], "item id");
    // The value is checked before anything is opened.
    std::optional<ReviewState> review;
    std::optional<CloseReason> reason;
    if (kind == "head") require_name(args_[1], "head");
    if (kind == "review") review = parse_review_state(args_[1]);
    if (kind == "close") reason = parse_close_reason(args_[1]);
    auto store = open(Access::write);
    const bool changed = kind == "head"     ? store.observe_head(args_[0], args_[1], now_)
                         : kind == "review" ? store.observe_review(args_[0], *review, now_)
                                            : store.observe_close(args_[0], *reason, now_);
    changed_ = changed;
    print(json_ ? JsonObject()
                      .str("item_id", args_[0])
                      .str(kind == "close" ? "reason" : kind, args_[1])
                      .boolean("changed", changed)
                      .done()
                : fmt::format("{} {}", args_[0], changed ? "changed" : "unchanged"));
  });
}

// ---- assign -------------------------------------------------------------------

kj::MainFunc Cli::assign_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "Give ITEM to SESSION with a lease and the actions it may take, in one "
             "transaction: exit 0 assigned (a fresh fence; the same fence, renewed, for the "
             "session that holds it), 9 wait (another session holds a live lease on it), 3 "
             "no_safe_work (terminal, not visible to the session, or no such item). Exit 7 "
             "for an unknown or closed session."))
      .addOptionWithArg({"actions"}, KJ_BIND_METHOD(*this, set_actions), "<action[,action...]>",
                        "what the session may do on the forge (required)")
      .addOptionWithArg({"lease"}, KJ_BIND_METHOD(*this, set_lease), "<seconds>",
                        "how long the lease holds (default 900)")
      .expectArg("SESSION", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_assign))
      .build();
}

Validity Cli::set_actions(kj::StringPtr text) {
  if (text.size() == 0) return "--actions needs ACTION[,ACTION...]";
  const auto actions = split_list(std::string_view(text.cStr(), text.size()));
  for (const auto& one : actions) {
    try {
      require_action(one);
    } catch (const InvalidArgument& e) {
      return kj::str("--actions: ", e.what());
    }
  }
  actions_.insert(actions_.end(), actions.begin(), actions.end());
  return true;
}

Validity Cli::run_assign() {
  if (actions_.empty()) return "assign needs --actions ACTION[,ACTION...]";
  return run([&] {
    require_name(args_[0], "session id");
    require_name(args_[1], "item id");
    auto store = open(Access::write);
    const Assignment a = store.assign_and_lease(
        args_[0], args_[1], actions_,
        lease_ ? std::optional<Seconds>(Seconds{*lease_}) : std::nullopt, now_);
    changed_ = a.is_assigned();
    if (json_) {
      print(JsonObject()
                .str("outcome", to_string(a.outcome))
                .str("item_id", a.item_id)
                .num_or_null("fence", static_cast<std::int64_t>(a.fence))
                .num_or_null("lease_expires_at", a.lease_expires_at)
                .str_or_null("expected_head", a.expected_head)
                .raw("actions", json_strings(a.actions))
                .num_or_null("until", a.until)
                .done());
    } else if (a.is_assigned()) {
      print(fmt::format("assigned {} fence: {} lease_expires_at: {} expected_head: {}", a.item_id,
                        a.fence, a.lease_expires_at,
                        a.expected_head.empty() ? "-" : a.expected_head));
    } else if (a.outcome == AssignOutcome::wait) {
      print(fmt::format("wait {} until: {}", a.item_id, a.until));
    } else {
      print(fmt::format("no_safe_work {}", a.item_id));
    }
    if (a.outcome == AssignOutcome::wait) throw Exit{kWait};
    if (a.outcome == AssignOutcome::no_safe_work) throw Exit{kNothingToClaim};
  });
}

// ---- gate ---------------------------------------------------------------------

kj::MainFunc Cli::gate_command() {
  return globals(kj::MainBuilder(
             context_, kVersionLine,
             "May SESSION make ACTION on ITEM under --fence now? Exit 0 allowed, 8 denied with "
             "one reason (printed): no_live_lease, stale_fence, work_terminal, "
             "action_not_allowed, head_drift, checked in that order. Fails closed: an unknown "
             "session or item is no_live_lease. With --record, an allowed mutation is recorded "
             "in the ledger in the same transaction; a denial records nothing."))
      .addOptionWithArg({"fence"}, KJ_BIND_METHOD(*this, set_fence), "<n>",
                        "the fence of the assignment (required)")
      .addOptionWithArg({"action"}, KJ_BIND_METHOD(*this, set_action), "<action>",
                        "the mutation about to be made (required)")
      .addOptionWithArg({"head"}, KJ_BIND_METHOD(*this, set_head), "<sha>",
                        "the head the mutation is made on (must be the pinned one)")
      .addOption({"record"}, KJ_BIND_METHOD(*this, set_record),
                 "record the mutation (mutation_recorded) when it is allowed")
      .expectArg("SESSION", KJ_BIND_METHOD(*this, set_positional))
      .expectArg("ITEM", KJ_BIND_METHOD(*this, set_positional))
      .callAfterParsing(KJ_BIND_METHOD(*this, run_gate))
      .build();
}

Validity Cli::set_action(kj::StringPtr text) {
  if (action_) return "--action is given twice: one mutation at a time";
  action_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_head(kj::StringPtr text) {
  head_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_record() {
  record_ = true;
  return true;
}

Validity Cli::run_gate() {
  if (fences_.size() != 1) return "gate needs one --fence N";
  if (!action_) return "gate needs --action ACTION";
  return run([&] {
    // No name check here: the gate fails closed, and a malformed session
    // or item name is a denial (no_live_lease), never another exit code.
    auto store = open(record_ ? Access::write : Access::read);
    const GateVerdict v =
        record_ ? store.record_mutation(args_[0], args_[1], fences_[0], *action_, head_, now_)
                : store.require_valid_assignment(args_[0], args_[1], fences_[0], *action_, head_,
                                                 now_);
    changed_ = record_ && v.is_allowed();
    const std::string_view reason = v ? std::string_view() : to_string(v.reason());
    if (json_) {
      print(JsonObject()
                .str("verdict", v ? "allowed" : "denied")
                .str_or_null("reason", reason)
                .done());
    } else {
      print(v ? "allowed" : std::string(reason));
    }
    if (!v) {
      if (!json_) std::cerr << "cplane: denied: " << v.message() << '\n';
      throw Exit{kDenied};
    }
  });
}

// ---- enqueue's forge options ----------------------------------------------------

Validity Cli::set_kind(kj::StringPtr text) {
  try {
    kind_ = parse_work_kind(std::string_view(text.cStr(), text.size()));
  } catch (const InvalidArgument& e) {
    return kj::str(e.what());
  }
  return true;
}

Validity Cli::set_priority(kj::StringPtr text) {
  auto v = parse_int<std::int32_t>(text);
  if (!v) return "--priority takes an integer (32-bit, higher first)";
  priority_ = *v;
  return true;
}

Validity Cli::set_ref(kj::StringPtr text) {
  KJ_IF_MAYBE(error, check_name(text, "ref").releaseError()) { return kj::mv(*error); }
  ref_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_author(kj::StringPtr text) {
  KJ_IF_MAYBE(error, check_name(text, "author").releaseError()) { return kj::mv(*error); }
  author_ = std::string(text.cStr(), text.size());
  return true;
}

}  // namespace cplane::cli
