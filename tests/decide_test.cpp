// The pure decisions, without a database.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "commands/decide.hpp"
#include "events/errors.hpp"

using namespace cplane;

namespace {

ItemRow claimed_row(Fence fence, Micros lease_expires_at) {
  ItemRow row;
  row.item_id = "i1";
  row.project_id = "alpha";
  row.status = ItemStatus::claimed;
  row.owner = "w1";
  row.fence = fence;
  row.attempts = static_cast<std::uint32_t>(fence);
  row.lease_expires_at = lease_expires_at;
  return row;
}

}  // namespace

TEST_CASE("a claim raises the fence by one and counts the attempt", "[decide]") {
  ItemRow ready;
  ready.item_id = "i1";
  ready.project_id = "alpha";
  const Event e = decide_claim(ready, "w1", "w1", 5'000'000, 1'000);
  const auto& c = std::get<ItemClaimed>(e.body);
  CHECK(c.owner == "w1");
  CHECK(c.fence == 1);
  CHECK(c.attempt == 1);
  CHECK(c.lease_expires_at == 5'001'000);
  CHECK(e.item_id == "i1");
  CHECK(e.at == 1'000);
}

TEST_CASE("a lapsed lease is reclaimed with a higher fence, a live one is not", "[decide]") {
  const ItemRow row = claimed_row(3, 10'000);
  CHECK_FALSE(is_claimable(row, 9'999));
  CHECK(is_claimable(row, 10'000));
  const Event e = decide_claim(row, "w2", "w2", 1'000, 20'000);
  CHECK(std::get<ItemClaimed>(e.body).fence == 4);
  CHECK(std::get<ItemClaimed>(e.body).attempt == 4);
  CHECK_THROWS_AS(decide_claim(row, "w2", "w2", 1'000, 5'000), InternalError);
}

TEST_CASE("a claim needs an owner and a positive lease", "[decide]") {
  ItemRow ready;
  CHECK_THROWS_AS(decide_claim(ready, "", "", 1'000, 0), InvalidArgument);
  CHECK_THROWS_AS(decide_claim(ready, "w1", "w1", 0, 0), InvalidArgument);
  CHECK_THROWS_AS(decide_claim(ready, "w1", "w1", -5, 0), InvalidArgument);
}

TEST_CASE("finish accepts only the current fence of a claimed item", "[decide][fence]") {
  const ItemRow row = claimed_row(2, 10'000);
  const Event e = decide_finish(row, "i1", 2, Outcome::done, "ok", "", 500);
  CHECK(std::get<ItemFinished>(e.body) == ItemFinished{Outcome::done, 2, "ok"});
  CHECK(e.actor == "w1");
  CHECK_THROWS_AS(decide_finish(row, "i1", 1, Outcome::done, "", "", 500), FenceRejected);
  CHECK_THROWS_AS(decide_finish(row, "i1", 3, Outcome::done, "", "", 500), FenceRejected);
}

TEST_CASE("finish refuses unknown, ready and terminal items", "[decide][fence]") {
  CHECK_THROWS_AS(decide_finish(std::nullopt, "x", 0, Outcome::done, "", "", 0), FenceRejected);
  ItemRow ready;
  ready.item_id = "i1";
  CHECK_THROWS_AS(decide_finish(ready, "i1", 0, Outcome::done, "", "", 0), FenceRejected);
  ItemRow done = claimed_row(1, 100);
  done.status = ItemStatus::done;
  CHECK_THROWS_AS(decide_finish(done, "i1", 1, Outcome::failed, "", "", 0), FenceRejected);
}

TEST_CASE("a lapsed lease that nobody reclaimed still accepts its fence", "[decide][fence]") {
  const ItemRow row = claimed_row(1, 100);
  CHECK_NOTHROW(decide_finish(row, "i1", 1, Outcome::done, "", "", 1'000'000));
}

TEST_CASE("projects need an id and a status and cannot be created twice", "[decide]") {
  const Event e = decide_create_project(std::nullopt, "alpha", "Alpha", "open", 7);
  CHECK(e.project_id == "alpha");
  CHECK(std::get<ProjectCreated>(e.body) == ProjectCreated{"Alpha", "open"});
  CHECK_THROWS_AS(decide_create_project(std::nullopt, "", "t", "open", 7), InvalidArgument);
  CHECK_THROWS_AS(decide_create_project(std::nullopt, "a", "t", "", 7), InvalidArgument);
  CHECK_THROWS_AS(decide_create_project(ProjectRow{"alpha"}, "alpha", "t", "open", 7),
                  InvalidArgument);
}

TEST_CASE("assigning twice records nothing the second time", "[decide]") {
  const ProjectRow project{"alpha", "Alpha", "open", 1, 1};
  CHECK(decide_grant(project, false, "bob", 5).has_value());
  CHECK_FALSE(decide_grant(project, true, "bob", 5).has_value());
  CHECK_THROWS_AS(decide_grant(project, false, "", 5), InvalidArgument);
}

// ---- the decisions that used to be made inline in the command layer --------------

namespace {

// The exception `f` throws, which must be an `E` (else the test fails).
template <class E, class F>
std::optional<E> refusal_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL_CHECK("threw another exception: " << e.what());
    return std::nullopt;
  }
  FAIL_CHECK("did not throw");
  return std::nullopt;
}

ItemRow item_row(const std::string& id, ItemStatus status) {
  ItemRow row;
  row.item_id = id;
  row.project_id = "alpha";
  row.status = status;
  return row;
}

// A claimed item held by `session` under `fence` until `until`.
ItemRow session_item(const std::string& id, const std::string& session, Fence fence,
                     Micros until) {
  ItemRow row = item_row(id, ItemStatus::claimed);
  row.owner = session;
  row.session = session;
  row.fence = fence;
  row.lease_expires_at = until;
  return row;
}

SessionRow session_row(const std::string& id, const std::string& actor, Micros closed_at = 0) {
  return SessionRow{id, actor, 10, 10, closed_at, 1};
}

Event item_event(EventBody body) { return Event{1, "", "alpha", "i1", std::move(body)}; }

}  // namespace

TEST_CASE("the sweep records a lapsed lease once per claim", "[decide][sweep]") {
  struct Case {
    const char* name;
    Micros lease_expires_at;
    std::optional<Event> last;
    bool recorded;
  };
  // now = 1'000; the item is claimed under fence 3.
  const Case cases[] = {
      {"lapsed, nothing read before", 900, std::nullopt, true},
      {"lapsed exactly now", 1'000, std::nullopt, true},
      {"last event is the claim", 900, item_event(ItemClaimed{"w1", 3, 900, 3}), true},
      {"last event is an earlier claim's expiry", 900, item_event(LeaseExpired{2, "w0", 500}),
       true},
      {"last event is this claim's expiry", 900, item_event(LeaseExpired{3, "w1", 900}), false},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      ItemRow row = item_row("i1", ItemStatus::claimed);
      row.owner = "w1";
      row.fence = 3;
      row.lease_expires_at = c.lease_expires_at;
      const auto event = decide_expire_lease(row, c.last, 1'000);
      REQUIRE(event.has_value() == c.recorded);
      if (!event) continue;
      CHECK(*event ==
            Event{1'000, "", "alpha", "i1", LeaseExpired{3, "w1", c.lease_expires_at}});
    }
  }
}

TEST_CASE("the sweep is never handed a live lease, a ready or a terminal item",
          "[decide][sweep]") {
  // Each would be a lease_expired the log must never hold.
  ItemRow live = item_row("i1", ItemStatus::claimed);
  live.fence = 1;
  live.lease_expires_at = 1'001;
  for (const ItemRow& row : {live, item_row("i1", ItemStatus::ready),
                             item_row("i1", ItemStatus::done), item_row("i1", ItemStatus::closed)}) {
    CHECK_THROWS_AS(decide_expire_lease(row, std::nullopt, 1'000), InternalError);
  }
}

TEST_CASE("opening a session records it once, and never reopens or rescopes one",
          "[decide][session]") {
  struct Case {
    const char* name;
    std::optional<SessionRow> existing;
    std::optional<std::string> actor;
    bool recorded;
    std::string refusal;  // "" for none
    std::string archived_in = "";
  };
  const Case cases[] = {
      {"a new unscoped session", std::nullopt, std::nullopt, true, ""},
      {"archived, asked again", std::nullopt, std::nullopt, false,
       "session 's1' was closed and archived (segment 5e6); session ids are not reused: open a "
       "new one",
       "5e6"},
      {"a new scoped session", std::nullopt, "alice", true, ""},
      {"open unscoped, asked unscoped", session_row("s1", ""), std::nullopt, false, ""},
      {"open as alice, asked as alice", session_row("s1", "alice"), "alice", false, ""},
      {"open unscoped, asked as alice", session_row("s1", ""), "alice", false,
       "session 's1' is already open unscoped"},
      {"open as alice, asked unscoped", session_row("s1", "alice"), std::nullopt, false,
       "session 's1' is already open as actor 'alice'"},
      {"open as alice, asked as bob", session_row("s1", "alice"), "bob", false,
       "session 's1' is already open as actor 'alice'"},
      {"closed, asked the same", session_row("s1", "", 50), std::nullopt, false,
       "session 's1' was closed at 50; session ids are not reused: open a new one"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      if (!c.refusal.empty()) {
        const auto e = refusal_of<InvalidArgument>(
            [&] { decide_open_session(c.existing, c.archived_in, "s1", c.actor, 100); });
        REQUIRE(e);
        CHECK(e->reason() == InvalidArgument::Reason::already_exists);
        CHECK(std::string(e->what()) == c.refusal);
        continue;
      }
      const auto event = decide_open_session(c.existing, c.archived_in, "s1", c.actor, 100);
      REQUIRE(event.has_value() == c.recorded);
      if (!event) continue;
      const std::string scope = c.actor.value_or("");
      CHECK(*event == Event{100, scope, "", "", SessionOpened{"s1", scope}});
    }
  }
}

TEST_CASE("only an open session is an open session", "[decide][session]") {
  const auto none = refusal_of<NotFound>([] { require_open_session(std::nullopt, "s1"); });
  REQUIRE(none);
  CHECK(none->reason() == NotFound::Reason::unknown_session);
  CHECK(std::string(none->what()) == "no such session: 's1'");
  const auto closed =
      refusal_of<NotFound>([] { require_open_session(session_row("s1", "", 50), "s1"); });
  REQUIRE(closed);
  CHECK(closed->reason() == NotFound::Reason::session_closed);
  CHECK(std::string(closed->what()) == "session 's1' was closed at 50: open a new session");
  CHECK(require_open_session(session_row("s1", "alice"), "s1") == session_row("s1", "alice"));
}

TEST_CASE("a session's item events are by its actor, else by the session", "[decide][session]") {
  CHECK(session_actor(session_row("s1", "alice")) == "alice");
  CHECK(session_actor(session_row("s1", "")) == "s1");
}

TEST_CASE("a session heartbeat extends its live leases only, then says it was seen",
          "[decide][session]") {
  // now = 1'000, lease 500: live until 1'001 and 5'000; lapsed at 1'000 and 900.
  for (const std::string actor : {"", "alice"}) {
    SECTION(actor.empty() ? "unscoped" : "scoped") {
      std::vector<ItemRow> items{session_item("a", "s1", 2, 1'001),
                                 session_item("b", "s1", 4, 1'000),
                                 session_item("c", "s1", 1, 900),
                                 session_item("d", "s1", 7, 5'000)};
      const auto d = decide_session_heartbeat(session_row("s1", actor), "s1", items, 500, 1'000);
      const std::string by = actor.empty() ? "s1" : actor;
      REQUIRE(d.extended.size() == 2);
      CHECK(d.extended[0].before == items[0]);
      CHECK(d.extended[0].event == Event{1'000, by, "alpha", "a", LeaseExtended{2, 1'500}});
      CHECK(d.extended[1].before == items[3]);
      CHECK(d.extended[1].event == Event{1'000, by, "alpha", "d", LeaseExtended{7, 1'500}});
      // The session's own event is by its scope, "" when unscoped.
      CHECK(d.seen == Event{1'000, actor, "", "", SessionSeen{"s1"}});
    }
  }
  SECTION("no leases: seen all the same") {
    const auto d = decide_session_heartbeat(session_row("s1", ""), "s1", {}, 500, 1'000);
    CHECK(d.extended.empty());
    CHECK(d.seen == Event{1'000, "", "", "", SessionSeen{"s1"}});
  }
}

TEST_CASE("a heartbeat of an unknown or closed session is refused", "[decide][session]") {
  struct Case {
    const char* name;
    std::optional<SessionRow> row;
    NotFound::Reason reason;
  };
  const Case cases[] = {{"unknown", std::nullopt, NotFound::Reason::unknown_session},
                        {"closed", session_row("s1", "", 50), NotFound::Reason::session_closed}};
  for (const auto& c : cases) {
    SECTION(c.name) {
      const auto e = refusal_of<NotFound>(
          [&] { decide_session_heartbeat(c.row, "s1", {}, 500, 1'000); });
      REQUIRE(e);
      CHECK(e->reason() == c.reason);
    }
  }
  SECTION("a lease that is not positive") {
    CHECK_THROWS_AS(decide_session_heartbeat(session_row("s1", ""), "s1", {}, 0, 1'000),
                    InvalidArgument);
  }
}

TEST_CASE("closing a session releases every lease it holds, lapsed ones too",
          "[decide][session]") {
  std::vector<ItemRow> items{session_item("a", "s1", 2, 5'000), session_item("b", "s1", 4, 900)};
  for (const std::string actor : {"", "alice"}) {
    SECTION(actor.empty() ? "unscoped" : "scoped") {
      const auto d = decide_close_session(session_row("s1", actor), "s1", items, 1'000);
      const std::string by = actor.empty() ? "s1" : actor;
      REQUIRE(d.released.size() == 2);
      CHECK(d.released[0].before == items[0]);
      CHECK(d.released[0].event ==
            Event{1'000, by, "alpha", "a", ItemReleased{2, "session closed"}});
      CHECK(d.released[1].before == items[1]);
      CHECK(d.released[1].event ==
            Event{1'000, by, "alpha", "b", ItemReleased{4, "session closed"}});
      REQUIRE(d.closed);
      CHECK(*d.closed == Event{1'000, actor, "", "", SessionClosed{"s1"}});
    }
  }
  SECTION("closed already: nothing at all") {
    const auto d = decide_close_session(session_row("s1", "", 50), "s1", items, 1'000);
    CHECK(d.released.empty());
    CHECK_FALSE(d.closed);
  }
  SECTION("unknown: refused") {
    const auto e = refusal_of<NotFound>([&] { decide_close_session(std::nullopt, "s1", {}, 1); });
    REQUIRE(e);
    CHECK(e->reason() == NotFound::Reason::unknown_session);
    CHECK(std::string(e->what()) == "no such session: 's1'");
  }
}

TEST_CASE("a session is never handed another's item or one that is not claimed",
          "[decide][session]") {
  // Each would extend or release a lease the session does not hold.
  ItemRow ready = session_item("a", "s1", 1, 5'000);
  ready.status = ItemStatus::ready;
  for (const ItemRow& item : {session_item("a", "s2", 1, 5'000), ready}) {
    CHECK_THROWS_AS(decide_session_heartbeat(session_row("s1", ""), "s1", {item}, 500, 1'000),
                    InternalError);
    CHECK_THROWS_AS(decide_close_session(session_row("s1", ""), "s1", {item}, 1'000),
                    InternalError);
  }
}

TEST_CASE("an observation that changes nothing records nothing", "[decide][observe]") {
  using Observe = std::function<std::optional<Event>(const std::optional<ItemRow>&)>;
  const Observe head = [](const auto& r) { return decide_observe_head(r, "i1", "h2", 7); };
  const Observe review = [](const auto& r) {
    return decide_observe_review(r, "i1", ReviewState::approved, 7);
  };
  const Observe close = [](const auto& r) {
    return decide_observe_close(r, "i1", CloseReason::merged, 7);
  };
  const Observe enter = [](const auto& r) {
    return decide_enter_terminal_path(r, "i1", "why", 7);
  };
  const Observe leave = [](const auto& r) { return decide_leave_terminal_path(r, "i1", 7); };
  auto pr = [](ItemStatus status) {
    ItemRow row = item_row("i1", status);
    row.kind = WorkKind::pr;
    row.head = "h1";
    return row;
  };
  auto of_kind = [](WorkKind kind, ItemStatus status = ItemStatus::ready) {
    ItemRow row = item_row("i1", status);
    row.kind = kind;
    return row;
  };
  auto reviewed = [&](ItemStatus status) {
    ItemRow row = pr(status);
    row.review = ReviewState::approved;
    return row;
  };
  auto on_path = [&](ItemRow row) {
    row.terminal_since = 3;
    row.terminal_reason = "first";
    return row;
  };
  struct Case {
    const char* name;
    ItemRow row;
    Observe observe;
    std::optional<EventBody> recorded;
    std::string refusal;  // InvalidArgument (conflict) with this message; "" for none
  };
  const Case cases[] = {
      {"a pr's new head", pr(ItemStatus::claimed), head, HeadMoved{"h2"}, ""},
      {"a pr's same head", [&] { auto r = pr(ItemStatus::ready); r.head = "h2"; return r; }(),
       head, std::nullopt, ""},
      {"a done pr's head", pr(ItemStatus::done), head, std::nullopt, ""},
      {"a closed pr's head", pr(ItemStatus::closed), head, std::nullopt, ""},
      {"a task's head", of_kind(WorkKind::task), head, std::nullopt,
       "item 'i1' is a task: only a pr has a head"},
      {"an issue's head", of_kind(WorkKind::issue), head, std::nullopt,
       "item 'i1' is an issue: only a pr has a head"},
      {"a done task's head (kind first)", of_kind(WorkKind::task, ItemStatus::done), head,
       std::nullopt, "item 'i1' is a task: only a pr has a head"},
      {"a pr's new review", pr(ItemStatus::ready), review, ReviewChanged{ReviewState::approved},
       ""},
      {"a pr's same review", reviewed(ItemStatus::ready), review, std::nullopt, ""},
      {"a failed pr's review", pr(ItemStatus::failed), review, std::nullopt, ""},
      {"an issue's review", of_kind(WorkKind::issue), review, std::nullopt,
       "item 'i1' is an issue: only a pr has a review state"},
      {"closing an open task", of_kind(WorkKind::task), close, ItemClosed{CloseReason::merged},
       ""},
      {"closing a claimed pr", pr(ItemStatus::claimed), close, ItemClosed{CloseReason::merged},
       ""},
      {"closing a done item", item_row("i1", ItemStatus::done), close, std::nullopt, ""},
      {"closing a closed item", item_row("i1", ItemStatus::closed), close, std::nullopt, ""},
      {"an open item onto the path", item_row("i1", ItemStatus::ready), enter,
       TerminalPathEntered{"why"}, ""},
      {"a claimed item onto the path", item_row("i1", ItemStatus::claimed), enter,
       TerminalPathEntered{"why"}, ""},
      {"onto the path again", on_path(item_row("i1", ItemStatus::ready)), enter, std::nullopt,
       ""},
      {"a done item onto the path", item_row("i1", ItemStatus::done), enter, std::nullopt,
       "item 'i1' is done: only an open item goes on the terminal path"},
      {"a closed item onto the path", item_row("i1", ItemStatus::closed), enter, std::nullopt,
       "item 'i1' is closed: only an open item goes on the terminal path"},
      {"off the path", on_path(item_row("i1", ItemStatus::claimed)), leave, TerminalPathLeft{},
       ""},
      {"off the path, not on it", item_row("i1", ItemStatus::ready), leave, std::nullopt, ""},
      {"a done item off the path", item_row("i1", ItemStatus::done), leave, std::nullopt, ""},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      if (!c.refusal.empty()) {
        const auto e = refusal_of<InvalidArgument>([&] { c.observe(c.row); });
        REQUIRE(e);
        CHECK(e->reason() == InvalidArgument::Reason::conflict);
        CHECK(std::string(e->what()) == c.refusal);
        continue;
      }
      const auto event = c.observe(c.row);
      REQUIRE(event.has_value() == c.recorded.has_value());
      if (!event) continue;
      // By the control plane, on the item's stream, at the command's time.
      CHECK(*event == Event{7, "", "alpha", "i1", *c.recorded});
    }
  }
  SECTION("every observation of an unknown item is NotFound") {
    for (const auto& observe : {head, review, close, enter, leave}) {
      const auto e = refusal_of<NotFound>([&] { observe(std::nullopt); });
      REQUIRE(e);
      CHECK(e->reason() == NotFound::Reason::unknown_item);
      CHECK(std::string(e->what()) == "no such item: 'i1'");
    }
  }
}

TEST_CASE("an enqueue under a key taken in its project answers the first item",
          "[decide][enqueue]") {
  const ProjectRow alpha{"alpha", "Alpha", "open", 1, 1};
  ItemRow first = item_row("i1", ItemStatus::done);  // whatever became of it
  first.key = "k";
  struct Case {
    const char* name;
    std::string key;
    std::optional<ItemRow> first;
    std::optional<std::string> answer;
  };
  const Case cases[] = {
      {"no key", "", std::nullopt, std::nullopt},
      {"a key not taken", "k", std::nullopt, std::nullopt},
      {"a key taken", "k", first, "i1"},
  };
  for (const auto& c : cases) {
    SECTION(c.name) { CHECK(decide_keyed_enqueue(alpha, c.key, c.first) == c.answer); }
  }
  SECTION("an item of another project or key is a lookup gone wrong") {
    ItemRow elsewhere = first;
    elsewhere.project_id = "beta";
    CHECK_THROWS_AS(decide_keyed_enqueue(alpha, "k", elsewhere), InternalError);
    CHECK_THROWS_AS(decide_keyed_enqueue(alpha, "other", first), InternalError);
  }
}

TEST_CASE("an incident link records only what is new", "[decide][incident]") {
  const IncidentKey key{"sentry", "fp", "org", "", ""};
  IncidentLinkRow stored;
  stored.incident_id = "inc";
  stored.provider = "sentry";
  stored.fingerprint = "fp";
  stored.org = "org";
  stored.target = "t1";
  stored.status = "open";
  stored.event_count = 3;
  stored.linked_prs = "p1,p2";
  auto with = [](auto change) {
    IncidentObservation o;
    change(o);
    return o;
  };
  struct Case {
    const char* name;
    std::optional<IncidentLinkRow> before;
    std::string target;
    IncidentObservation observation;
    bool recorded;
  };
  const Case cases[] = {
      {"a first link, bare", std::nullopt, "t1", {}, true},
      {"the same target, nothing observed", stored, "t1", {}, false},
      {"the same values observed", stored, "t1",
       with([](auto& o) {
         o.status = "open";
         o.event_count = 3;
         o.linked_prs = std::vector<std::string>{"p1", "p2"};
       }),
       false},
      {"another target", stored, "t2", {}, true},
      {"a new status", stored, "t1", with([](auto& o) { o.status = "resolved"; }), true},
      {"an empty status is a value", stored, "t1", with([](auto& o) { o.status = ""; }), true},
      {"a first permalink", stored, "t1", with([](auto& o) { o.permalink = "https://x"; }),
       true},
      {"other pull requests", stored, "t1",
       with([](auto& o) { o.linked_prs = std::vector<std::string>{"p1"}; }), true},
  };
  for (const auto& c : cases) {
    SECTION(c.name) {
      const auto event = decide_link_incident(c.before, key, c.target, c.observation, 9);
      REQUIRE(event.has_value() == c.recorded);
      if (!event) continue;
      CHECK(event->at == 9);
      CHECK(event->actor.empty());
      CHECK(event->project_id.empty());
      CHECK(event->item_id.empty());
      const auto& linked = std::get<IncidentLinked>(event->body);
      CHECK(linked.provider == "sentry");
      CHECK(linked.fingerprint == "fp");
      CHECK(linked.org == "org");
      CHECK(linked.target == c.target);
      CHECK_FALSE(link_unchanged(linked, c.before.value_or(IncidentLinkRow{})));
    }
  }
}

TEST_CASE("an incident link keeps the parts an observation does not give",
          "[decide][incident]") {
  IncidentLinkRow stored;
  stored.target = "t1";
  stored.status = "open";
  stored.event_count = 3;
  stored.permalink = "https://x";
  stored.first_seen = "mon";
  stored.last_seen = "tue";
  stored.linked_prs = "p1";
  IncidentObservation o;
  o.last_seen = "wed";
  o.linked_prs = std::vector<std::string>{"p1", "p2"};
  const auto event = decide_link_incident(stored, {"sentry", "fp", "", "", ""}, "t1", o, 9);
  REQUIRE(event);
  CHECK(std::get<IncidentLinked>(event->body) ==
        IncidentLinked{"sentry", "fp", "", "", "", "t1", "open", 3, "https://x", "mon", "wed",
                       "p1,p2"});
}
