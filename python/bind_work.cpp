// The `cplane` Python module: projects and scope, work (enqueue, claim, finish), reads.
#include "python/module.hpp"

namespace cplane::python {

void bind_projects_and_work(StoreClass& store) {
  // ---- projects and scope
  store.def(
      "create_project",
      [](Store& s, const Text& project_id, const Text& title, const Text& status,
         const Int& max_attempts, const Text& backoff, const OptInt& now) {
        ControlStore::ProjectOptions o;
        const auto id = text(project_id, "project_id");
        const auto t = text(title, "title");
        o.status = text(status, "status");
        o.max_attempts = count(max_attempts, "max_attempts");
        o.backoff = text(backoff, "backoff");
        o.now = micros(now);
        s.run([&](ControlStore& c) { c.create_project(id, t, o); });
      },
      "project_id"_a, "title"_a, "status"_a = "open", py::kw_only(), "max_attempts"_a = 0,
      "backoff"_a = "", "now"_a = py::none(),
      "Creates a project (project_created), with a retry policy when max_attempts > 0 "
      "(backoff: \"none\", \"fixed:30s\", \"exponential:1s:1h\"). InvalidArgument (reason "
      "\"already_exists\") if the id is taken.");
  store.def(
      "project",
      [](Store& s, const Text& project_id, const OptText& actor_id) {
        const auto id = text(project_id, "project_id");
        const auto actor = optional_text(actor_id, "actor_id");
        return project_dict(s.run([&](ControlStore& c) { return c.project(id, actor); }));
      },
      "project_id"_a, "actor_id"_a = py::none(),
      "The project's row as a dict. NotFound, or ScopeDenied for a scoped actor.");
  auto grant = [](Store& s, const Text& project_id, const Text& actor_id,
                  const OptInt& now) {
    const auto id = text(project_id, "project_id");
    const auto actor = text(actor_id, "actor_id");
    const auto at = micros(now);
    s.run([&](ControlStore& c) { c.grant(id, actor, at); });
  };
  store.def("grant", grant, "project_id"_a, "actor_id"_a, py::kw_only(), "now"_a = py::none(),
            "Grants a scoped actor the project: it may then see it, enqueue into it and claim "
            "from it (actor_assigned; nothing if granted already). NotFound for no project.");
  store.def("assign", grant, "project_id"_a, "actor_id"_a, py::kw_only(), "now"_a = py::none(),
            "The same as grant (the original store's name).");
  store.def(
      "visible_projects",
      [](Store& s, const OptText& actor_id) {
        const auto actor = optional_text(actor_id, "actor_id");
        return s.run([&](ControlStore& c) { return c.visible_projects(actor); });
      },
      "actor_id"_a = py::none(), "Sorted project ids: all, or those granted to actor_id.");

  // ---- work
  store.def(
      "enqueue",
      [](Store& s, const Text& project_id, const PayloadArg& payload,
         const OptText& actor_id, const Text& kind, const Text& ref,
         const Text& head, const Text& author, const Int& priority,
         const Text& key, const Int& max_attempts, const Text& backoff,
         const OptInt& run_at, const OptSeconds& delay_seconds,
         const Text& concurrency_key, const OptInt& now) {
        const auto project = text(project_id, "project_id");
        const auto json = payload_text(payload);
        ControlStore::EnqueueOptions o;
        o.kind = [&] {
          const auto k = text(kind, "kind");
          if (k == "task") return WorkKind::task;
          if (k == "issue") return WorkKind::issue;
          if (k == "pr") return WorkKind::pr;
          invalid("kind must be \"task\", \"issue\" or \"pr\"");
        }();
        o.ref = text(ref, "ref");
        o.head = text(head, "head");
        o.author = text(author, "author");
        const auto p = integer(priority, "priority");
        if (p < INT32_MIN || p > INT32_MAX) invalid("priority is out of range");
        o.priority = static_cast<std::int32_t>(p);
        o.key = text(key, "key");
        o.actor = optional_text(actor_id, "actor_id");
        o.now = micros(now);
        o.max_attempts = count(max_attempts, "max_attempts");
        o.backoff = text(backoff, "backoff");
        o.run_at = micros(run_at, "run_at");
        if (!delay_seconds.is_none()) {
          o.delay = static_cast<Micros>(
              std::llround(seconds(delay_seconds, "delay_seconds").count() * 1e6));
        }
        o.concurrency_key = text(concurrency_key, "concurrency_key");
        return s.run([&](ControlStore& c) { return c.enqueue(project, json, o); });
      },
      "project_id"_a, "payload"_a, "actor_id"_a = py::none(), py::kw_only(), "kind"_a = "task",
      "ref"_a = "", "head"_a = "", "author"_a = "", "priority"_a = 0, "key"_a = "",
      "max_attempts"_a = 0, "backoff"_a = "", "run_at"_a = py::none(),
      "delay_seconds"_a = py::none(), "concurrency_key"_a = "", "now"_a = py::none(),
      R"doc(Queues an item and returns its id.

payload: a dict or list (serialised with json.dumps) or a JSON str, at most
1 MiB. InvalidArgument for one that is not JSON(-serialisable); NotFound for
an unknown project (ScopeDenied for a scoped actor_id, exactly as a project
not theirs). key: an idempotency key (a second enqueue with it returns the
first item's id). run_at (microseconds) or delay_seconds: not claimable
before then.)doc");
  store.def(
      "enqueue_batch",
      [](Store& s, const Text& project_id, const Payloads& payloads,
         const OptText& actor_id, const OptInt& now) {
        const auto project = text(project_id, "project_id");
        if (PyUnicode_Check(payloads.ptr()) || py::isinstance<py::dict>(payloads)) {
          invalid("payloads must be a list of payloads");
        }
        std::vector<std::string> json;
        for (const auto& p : py::iter(payloads)) json.push_back(payload_text(p));
        const auto actor = optional_text(actor_id, "actor_id");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.enqueue_batch(project, json, actor, at); });
      },
      "project_id"_a, "payloads"_a, "actor_id"_a = py::none(), py::kw_only(),
      "now"_a = py::none(),
      "Queues several items in one transaction, all or nothing; returns their ids in order.");
  store.def(
      "claim",
      [](Store& s, const Text& owner, const OptText& actor_id,
         const OptSeconds& lease_seconds, const OptSeconds& wait_seconds, const Flag& fair,
         const OptInt& now) {
        const auto who = text(owner, "owner");
        auto o = claim_options(actor_id, lease_seconds, now);
        o.wait = optional_seconds(wait_seconds, "wait_seconds");
        o.fair = truth(fair);
        return maybe_claimed(s.run([&](ControlStore& c) { return c.claim(who, o); }));
      },
      "owner"_a, "actor_id"_a = py::none(), "lease_seconds"_a = py::none(), py::kw_only(),
      "wait_seconds"_a = py::none(), "fair"_a = true, "now"_a = py::none(),
      R"doc(Claims an available item for owner under a new fence; a ClaimedItem, or None
when nothing is available (within wait_seconds, if given: it blocks, without
polling and without the GIL, until an item is). actor_id scopes the claim to
that actor's projects. lease_seconds: else the store's.)doc");
  store.def(
      "claim_batch",
      [](Store& s, const Text& owner, const Int& max_items,
         const OptText& actor_id, const OptSeconds& lease_seconds, const OptInt& now) {
        const auto who = text(owner, "owner");
        const auto n = integer(max_items, "max_items");
        if (n < 1) invalid("max_items must be at least 1");
        const auto o = claim_options(actor_id, lease_seconds, now);
        return claimed_list(s.run([&](ControlStore& c) {
          return c.claim_batch(who, static_cast<std::size_t>(n), o);
        }));
      },
      "owner"_a, "max_items"_a, "actor_id"_a = py::none(), "lease_seconds"_a = py::none(),
      py::kw_only(), "now"_a = py::none(),
      "Claims up to max_items items in one transaction; a list of ClaimedItem (empty when "
      "none is available).");
  store.def(
      "finish",
      [](Store& s, const Text& item_id, const Int& fence, const Text& status,
         const Text& detail, const OptText& actor_id, const Flag& no_retry,
         const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto f = fence_of(fence);
        const auto out = outcome(status);
        ControlStore::FinishOptions o;
        o.detail = text(detail, "detail");
        o.actor = optional_text(actor_id, "actor_id");
        o.now = micros(now);
        o.no_retry = truth(no_retry);
        s.run([&](ControlStore& c) { c.finish(id, f, out, o); });
      },
      "item_id"_a, "fence"_a, "status"_a = "done", "detail"_a = "", py::kw_only(),
      "actor_id"_a = py::none(), "no_retry"_a = false, "now"_a = py::none(),
      R"doc(Reports the item "done" or "failed" under fence.

FenceRejected (reason "stale_fence", "not_claimed", "terminal",
"unknown_item", "cancelled") if the fence is not current: drop the result.
Under a retry policy a failure with attempts left is an attempt (the item
comes back after its backoff) unless no_retry.)doc");
  store.def(
      "finish_batch",
      [](Store& s, const Reports& reports, const OptText& actor_id, const OptInt& now) {
        std::vector<ControlStore::Report> rs;
        for (const auto& r : py::iter(reports)) rs.push_back(report(r));
        const auto actor = optional_text(actor_id, "actor_id");
        const auto at = micros(now);
        s.run([&](ControlStore& c) { c.finish_batch(rs, actor, at); });
      },
      "reports"_a, "actor_id"_a = py::none(), py::kw_only(), "now"_a = py::none(),
      "Finishes several items in one transaction, all or nothing. Each report is "
      "(item_id, fence[, status[, detail]]) or a dict with those keys.");
  store.def(
      "finish_and_claim",
      [](Store& s, const Text& item_id, const Int& fence, const Text& status,
         const Text& owner, const Text& detail, const OptText& actor_id,
         const OptSeconds& lease_seconds, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto f = fence_of(fence);
        const auto out = outcome(status);
        const auto who = text(owner, "owner");
        const auto d = text(detail, "detail");
        const auto o = claim_options(actor_id, lease_seconds, now);
        return maybe_claimed(
            s.run([&](ControlStore& c) { return c.finish_and_claim(id, f, out, who, o, d); }));
      },
      "item_id"_a, "fence"_a, "status"_a, "owner"_a, "detail"_a = "", py::kw_only(),
      "actor_id"_a = py::none(), "lease_seconds"_a = py::none(), "now"_a = py::none(),
      "Finishes one item and claims owner's next in the same transaction; the next "
      "ClaimedItem or None. A refused finish claims nothing.");
  store.def(
      "heartbeat",
      [](Store& s, const Text& item_id, const Int& fence,
         const OptSeconds& lease_seconds, const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto f = fence_of(fence);
        ControlStore::LeaseOptions o;
        o.lease = optional_seconds(lease_seconds, "lease_seconds");
        o.actor = optional_text(actor_id, "actor_id");
        o.now = micros(now);
        return s.run([&](ControlStore& c) { return c.heartbeat(id, f, o); });
      },
      "item_id"_a, "fence"_a, "lease_seconds"_a = py::none(), py::kw_only(),
      "actor_id"_a = py::none(), "now"_a = py::none(),
      "Extends the lease of the claim under fence; returns its new end (microseconds). "
      "Refuses as finish does.");
  store.def(
      "release",
      [](Store& s, const Text& item_id, const Int& fence, const Text& reason,
         const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto f = fence_of(fence);
        const auto r = text(reason, "reason");
        ControlStore::ReleaseOptions o;
        o.actor = optional_text(actor_id, "actor_id");
        o.now = micros(now);
        s.run([&](ControlStore& c) { c.release(id, f, r, o); });
      },
      "item_id"_a, "fence"_a, "reason"_a = "", py::kw_only(), "actor_id"_a = py::none(),
      "now"_a = py::none(),
      "Gives the item back: ready again in its place; the next claim takes a higher fence. "
      "Refuses as finish does.");
  store.def(
      "expire_leases",
      [](Store& s, const OptInt& now) {
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.expire_leases(at); });
      },
      py::kw_only(), "now"_a = py::none(),
      "Records lease_expired for every lapsed lease not recorded yet; returns how many.");
  store.def(
      "check_fence",
      [](Store& s, const Text& item_id, const Int& fence, const OptText& actor_id) {
        const auto id = text(item_id, "item_id");
        const auto f = fence_of(fence);
        const auto actor = optional_text(actor_id, "actor_id");
        return verdict(s.run([&](ControlStore& c) { return c.check_fence(id, f, actor); }),
                       "fence");
      },
      "item_id"_a, "fence"_a, "actor_id"_a = py::none(),
      "Whether a report under fence would be accepted now, as a Verdict; writes nothing.");

  // ---- reads
  store.def(
      "item",
      [](Store& s, const Text& item_id, const OptText& actor_id) {
        const auto id = text(item_id, "item_id");
        const auto actor = optional_text(actor_id, "actor_id");
        return item_dict(s.run([&](ControlStore& c) { return c.item(id, actor); }));
      },
      "item_id"_a, "actor_id"_a = py::none(),
      "The item's row as a dict (item_id, project_id, payload, status, owner, fence, "
      "attempts, lease_expires_at, detail, ...). NotFound; ScopeDenied for a scoped actor.");
  store.def(
      "events",
      [](Store& s, const Text& item_id, const OptText& actor_id) {
        const auto id = text(item_id, "item_id");
        const auto actor = optional_text(actor_id, "actor_id");
        return event_list(s.run([&](ControlStore& c) { return c.events(id, actor); }));
      },
      "item_id"_a, "actor_id"_a = py::none(),
      "The item's ledger, oldest first: dicts with event_type, seq, at, fence (None for an "
      "event without one), actor, item_id, project_id, stream_kind, stream_id and the fields "
      "of its kind. NotFound; ScopeDenied for a scoped actor.");
  store.def(
      "status_counts",
      [](Store& s, const OptText& project_id) {
        const auto p = optional_text(project_id, "project_id");
        return counts_dict(s.run([&](ControlStore& c) { return c.status_counts(p); }));
      },
      "project_id"_a = py::none(), "Items by status, of one project or all.");
  store.def(
      "read_log",
      [](Store& s, const Int& after, const Int& max) {
        ControlStore::LogQuery q;
        q.after = integer(after, "after");
        const auto n = integer(max, "max");
        if (n < 1) invalid("max must be at least 1");
        q.max = static_cast<std::size_t>(n);
        auto page = s.run([&](ControlStore& c) { return c.read_log(q); });
        return py::make_tuple(event_list(page.events), page.next);
      },
      "after"_a = 0, "max"_a = 1000,
      "The log after seq `after`, final events only: (events, next); resume after `next`.");
  store.def("log_end", [](Store& s) { return s.run([](ControlStore& c) { return c.log_end(); }); },
            "The newest final seq (0 for an empty log).");
  store.def("schema_version",
            [](Store& s) { return s.run([](ControlStore& c) { return c.schema_version(); }); },
            "The database's schema version, in its backend's numbering.");
}

}  // namespace cplane::python
