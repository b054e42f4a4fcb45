// The `cplane` Python module: sessions, the gate, the allocator, incident links.
#include "python/module.hpp"

namespace cplane::python {

void bind_sessions(StoreClass& store) {
  // ---- sessions, the gate, the allocator
  store.def(
      "open_session",
      [](Store& s, const Text& session, const OptText& actor_id, const OptInt& now) {
        const auto id = text(session, "session");
        const auto actor = optional_text(actor_id, "actor_id");
        const auto at = micros(now);
        s.run([&](ControlStore& c) { c.open_session(id, actor, at); });
      },
      "session"_a, "actor_id"_a = py::none(), py::kw_only(), "now"_a = py::none(),
      "Opens an agent session, scoped to actor_id's projects if given.");
  store.def(
      "session_heartbeat",
      [](Store& s, const Text& session, const OptSeconds& lease_seconds,
         const OptInt& now) {
        const auto id = text(session, "session");
        const auto lease = optional_seconds(lease_seconds, "lease_seconds");
        const auto at = micros(now);
        py::dict out;
        for (const auto& [item, end] :
             s.run([&](ControlStore& c) { return c.session_heartbeat(id, lease, at); })) {
          out[py::str(item)] = end;
        }
        return out;
      },
      "session"_a, "lease_seconds"_a = py::none(), py::kw_only(), "now"_a = py::none(),
      "Extends every live lease the session holds; {item_id: new lease end}. NotFound "
      "(unknown_session, session_closed).");
  store.def(
      "close_session",
      [](Store& s, const Text& session, const OptInt& now) {
        const auto id = text(session, "session");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.close_session(id, at); });
      },
      "session"_a, py::kw_only(), "now"_a = py::none(),
      "Closes the session and releases what it holds; the items released.");
  store.def(
      "sessions",
      [](Store& s, const OptInt& now) {
        const auto at = micros(now);
        py::list out;
        for (const auto& i : s.run([&](ControlStore& c) { return c.sessions(at); })) {
          out.append(session_dict(i));
        }
        return out;
      },
      py::kw_only(), "now"_a = py::none(), "Every session with the items it holds.");
  store.def(
      "assign_and_lease",
      [](Store& s, const Text& session, const Text& item_id, const Texts& actions,
         const OptSeconds& lease_seconds, const OptInt& now) {
        const auto sid = text(session, "session");
        const auto id = text(item_id, "item_id");
        const auto a = texts(actions, "actions");
        const auto lease = optional_seconds(lease_seconds, "lease_seconds");
        const auto at = micros(now);
        return assignment_dict(
            s.run([&](ControlStore& c) { return c.assign_and_lease(sid, id, a, lease, at); }));
      },
      "session"_a, "item_id"_a, "actions"_a, "lease_seconds"_a = py::none(), py::kw_only(),
      "now"_a = py::none(),
      "Gives the item to the session under a fresh fence, in one transaction: a dict with "
      "outcome \"assigned\" (fence, lease_expires_at, expected_head, actions), \"wait\" "
      "(until) or \"no_safe_work\".");
  // The gate three ways: check_assignment answers with a Verdict (C++'s
  // require_valid_assignment); require_valid_assignment and record_mutation
  // raise MutationDenied for a denial, so that a caller that ignores the
  // answer cannot go on to mutate (a Python name that says "require" must
  // not return a falsy value instead).
  enum class GateCall { check, require, record };
  auto gate = [](GateCall call) {
    return [call](Store& s, const Text& session, const Text& item_id, const Int& fence,
                  const Text& action, const OptText& head, const OptInt& now) {
      const auto sid = text(session, "session");
      const auto id = text(item_id, "item_id");
      const auto f = fence_of(fence);
      const auto a = text(action, "action");
      const auto h = optional_text(head, "head");
      const auto at = micros(now);
      const auto v = s.run([&](ControlStore& c) {
        return call == GateCall::record ? c.record_mutation(sid, id, f, a, h, at)
                                        : c.require_valid_assignment(sid, id, f, a, h, at);
      });
      if (call != GateCall::check && !v) {
        raise(classes->mutation_denied, v.message(), py::str(to_string(v.reason())));
      }
      return verdict(v, "gate");
    };
  };
  store.def("check_assignment", gate(GateCall::check), "session"_a, "item_id"_a, "fence"_a,
            "action"_a, "head"_a = py::none(), py::kw_only(), "now"_a = py::none(),
            "The mutation gate as a value: a Verdict, allowed, or denied with its reason "
            "(no_live_lease, stale_fence, work_terminal, action_not_allowed, head_drift, "
            "key_held); cplane.require(verdict) raises MutationDenied. Writes nothing.");
  store.def("require_valid_assignment", gate(GateCall::require), "session"_a, "item_id"_a,
            "fence"_a, "action"_a, "head"_a = py::none(), py::kw_only(), "now"_a = py::none(),
            "The mutation gate, before each mutation on the forge: an allowed Verdict, or "
            "MutationDenied with .reason (no_live_lease, stale_fence, work_terminal, "
            "action_not_allowed, head_drift, key_held). Writes nothing.");
  store.def("record_mutation", gate(GateCall::record), "session"_a, "item_id"_a, "fence"_a,
            "action"_a, "head"_a = py::none(), py::kw_only(), "now"_a = py::none(),
            "The gate, and when it allows, mutation_recorded in the same transaction; "
            "MutationDenied (nothing recorded) when it denies.");
  store.def(
      "observe_head",
      [](Store& s, const Text& item_id, const Text& head, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto h = text(head, "head");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.observe_head(id, h, at); });
      },
      "item_id"_a, "head"_a, py::kw_only(), "now"_a = py::none(),
      "A pr's head as the forge shows it; False if unchanged.");
  store.def(
      "observe_review",
      [](Store& s, const Text& item_id, const Text& review, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto r = text(review, "review");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.observe_review(id, parse_review_state(r), at); });
      },
      "item_id"_a, "review"_a, py::kw_only(), "now"_a = py::none(),
      "A pr's review: \"none\", \"approved\" or \"changes_requested\"; False if unchanged.");
  store.def(
      "observe_close",
      [](Store& s, const Text& item_id, const Text& reason, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto r = text(reason, "reason");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.observe_close(id, parse_close_reason(r), at); });
      },
      "item_id"_a, "reason"_a = "closed", py::kw_only(), "now"_a = py::none(),
      "The item was merged or closed on the forge: terminal for everyone.");
  store.def(
      "allocate_next",
      [](Store& s, const Text& session, const Flag& apply, const Texts& actions,
         const OptSeconds& lease_seconds, const OptInt& now) {
        const auto sid = text(session, "session");
        const auto mode = truth(apply) ? AllocateMode::apply : AllocateMode::preview;
        const auto a = texts(actions, "actions");
        const auto lease = optional_seconds(lease_seconds, "lease_seconds");
        const auto at = micros(now);
        return allocation_dict(
            s.run([&](ControlStore& c) { return c.allocate_next(sid, mode, a, lease, at); }));
      },
      "session"_a, "apply"_a = false, "actions"_a = py::list(), "lease_seconds"_a = py::none(),
      py::kw_only(), "now"_a = py::none(),
      "The allocator's choice for the session: a dict with outcome (\"preview\", "
      "\"assigned\", \"wait\", \"no_safe_work\"), item_id, fence, skipped. apply=True "
      "reserves it.");
  store.def(
      "enter_terminal_path",
      [](Store& s, const Text& item_id, const Text& reason, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto r = text(reason, "reason");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.enter_terminal_path(id, r, at); });
      },
      "item_id"_a, "reason"_a = "", py::kw_only(), "now"_a = py::none(),
      "Puts an open item on the terminal path (the allocator takes it first).");
  store.def(
      "leave_terminal_path",
      [](Store& s, const Text& item_id, const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto o = lifecycle(actor_id, now);
        return s.run([&](ControlStore& c) { return c.leave_terminal_path(id, o); });
      },
      "item_id"_a, py::kw_only(), "actor_id"_a = py::none(), "now"_a = py::none(),
      "Takes an item off the terminal path.");
  store.def(
      "terminal_path",
      [](Store& s) {
        py::list out;
        for (const auto& r : s.run([](ControlStore& c) { return c.terminal_path(); })) {
          out.append(py::dict("item_id"_a = r.item_id, "since"_a = r.since, "reason"_a = r.reason));
        }
        return out;
      },
      "The items on the terminal path.");

  // ---- incident links
  auto incident_key = [](const Text& provider, const Text& fingerprint,
                         const Text& org, const Text& repo,
                         const Text& environment) {
    return IncidentKey{text(provider, "provider"), text(fingerprint, "fingerprint"),
                       text(org, "org"), text(repo, "repo"), text(environment, "environment")};
  };
  store.def(
      "link_incident",
      [incident_key](Store& s, const Text& provider, const Text& fingerprint,
                     const Text& target, const Text& org, const Text& repo,
                     const Text& environment, const OptText& status,
                     const OptInt& event_count, const OptText& permalink,
                     const OptText& first_seen, const OptText& last_seen,
                     const OptTexts& linked_prs, const OptInt& now) {
        const auto key = incident_key(provider, fingerprint, org, repo, environment);
        const auto t = text(target, "target");
        IncidentObservation o;
        o.status = optional_text(status, "status");
        if (!event_count.is_none()) o.event_count = integer(event_count, "event_count");
        o.permalink = optional_text(permalink, "permalink");
        o.first_seen = optional_text(first_seen, "first_seen");
        o.last_seen = optional_text(last_seen, "last_seen");
        if (!linked_prs.is_none()) o.linked_prs = texts(linked_prs, "linked_prs");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.link_incident(key, t, o, at); });
      },
      "provider"_a, "fingerprint"_a, "target"_a, py::kw_only(), "org"_a = "", "repo"_a = "",
      "environment"_a = "", "status"_a = py::none(), "event_count"_a = py::none(),
      "permalink"_a = py::none(), "first_seen"_a = py::none(), "last_seen"_a = py::none(),
      "linked_prs"_a = py::none(), "now"_a = py::none(),
      "Links a monitoring incident to the issue tracking it (an upsert); False if unchanged.");
  store.def(
      "incident",
      [incident_key](Store& s, const Text& provider, const Text& fingerprint,
                     const Text& org, const Text& repo, const Text& environment) {
        const auto key = incident_key(provider, fingerprint, org, repo, environment);
        return incident_dict(s.run([&](ControlStore& c) { return c.incident(key); }));
      },
      "provider"_a, "fingerprint"_a, py::kw_only(), "org"_a = "", "repo"_a = "",
      "environment"_a = "", "The link as a dict; NotFound (unknown_incident).");
  store.def(
      "incidents",
      [](Store& s, const OptText& target) {
        const auto t = optional_text(target, "target");
        py::list out;
        for (const auto& r : s.run([&](ControlStore& c) { return c.incidents(t); })) {
          out.append(incident_dict(r));
        }
        return out;
      },
      "target"_a = py::none(), "Every link, or those of one target.");
}

}  // namespace cplane::python
