// The `cplane` Python module: the job lifecycle (retries, delays, cancel, pause,
// cron) and flow control (limits, fairness, why).
#include "python/module.hpp"

namespace cplane::python {

void bind_lifecycle(StoreClass& store) {
  // ---- the lifecycle
  store.def(
      "set_retry_policy",
      [](Store& s, const Text& project_id, const Int& max_attempts,
         const Text& backoff, const OptInt& now) {
        const auto p = text(project_id, "project_id");
        const auto n = count(max_attempts, "max_attempts");
        const auto b = text(backoff, "backoff");
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.set_retry_policy(p, n, b, at); });
      },
      "project_id"_a, "max_attempts"_a, "backoff"_a = "none", py::kw_only(), "now"_a = py::none(),
      "Sets the project's retry policy for items queued from now on; False if unchanged.");
  store.def(
      "pause_project",
      [](Store& s, const Text& project_id, const Text& reason,
         const OptText& actor_id, const OptInt& now) {
        const auto p = text(project_id, "project_id");
        const auto r = text(reason, "reason");
        const auto o = lifecycle(actor_id, now);
        return s.run([&](ControlStore& c) { return c.pause_project(p, r, o); });
      },
      "project_id"_a, "reason"_a = "", py::kw_only(), "actor_id"_a = py::none(),
      "now"_a = py::none(), "Holds the project's items back from every claim; False if paused already.");
  store.def(
      "resume_project",
      [](Store& s, const Text& project_id, const OptText& actor_id, const OptInt& now) {
        const auto p = text(project_id, "project_id");
        const auto o = lifecycle(actor_id, now);
        return s.run([&](ControlStore& c) { return c.resume_project(p, o); });
      },
      "project_id"_a, py::kw_only(), "actor_id"_a = py::none(), "now"_a = py::none(),
      "Resumes a paused project; False if it was not paused.");
  store.def(
      "retry",
      [](Store& s, const Text& item_id, const OptInt& attempts,
         const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        std::optional<std::uint32_t> n;
        if (!attempts.is_none()) n = count(attempts, "attempts");
        const auto o = lifecycle(actor_id, now);
        s.run([&](ControlStore& c) { c.retry(id, n, o); });
      },
      "item_id"_a, "attempts"_a = py::none(), py::kw_only(), "actor_id"_a = py::none(),
      "now"_a = py::none(),
      "Redrives a failed or cancelled item: ready again at the back of the queue. "
      "InvalidArgument (reason \"conflict\") for another status.");
  store.def(
      "reschedule",
      [](Store& s, const Text& item_id, const OptInt& run_at,
         const OptSeconds& delay_seconds, const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto o = lifecycle(actor_id, now);
        if (run_at.is_none() == delay_seconds.is_none()) {
          invalid("give exactly one of run_at and delay_seconds", "conflict");
        }
        if (!run_at.is_none()) {
          const auto t = integer(run_at, "run_at");
          s.run([&](ControlStore& c) { c.reschedule(id, t, o); });
        } else {
          const auto d = static_cast<Micros>(
              std::llround(seconds(delay_seconds, "delay_seconds").count() * 1e6));
          s.run([&](ControlStore& c) { c.reschedule_in(id, d, o); });
        }
      },
      "item_id"_a, py::kw_only(), "run_at"_a = py::none(), "delay_seconds"_a = py::none(),
      "actor_id"_a = py::none(), "now"_a = py::none(),
      "Runs a ready or scheduled item at run_at (microseconds) or after delay_seconds.");
  store.def(
      "cancel",
      [](Store& s, const Text& item_id, const Text& reason,
         const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto r = text(reason, "reason");
        const auto o = lifecycle(actor_id, now);
        s.run([&](ControlStore& c) { c.cancel(id, r, o); });
      },
      "item_id"_a, "reason"_a = "", py::kw_only(), "actor_id"_a = py::none(),
      "now"_a = py::none(),
      "Cancels a ready, scheduled or claimed item (terminal); its holder's next report is "
      "FenceRejected (reason \"cancelled\").");
  auto bulk = [](bool cancel) {
    return [cancel](Store& s, const Text& project_id, const OptTexts& statuses_,
                    const Text& reason, const OptInt& attempts,
                    const Flag& dry_run, const OptText& actor_id, const OptInt& now) {
      const auto p = text(project_id, "project_id");
      ControlStore::BulkOptions o;
      o.statuses = statuses(statuses_);
      o.reason = text(reason, "reason");
      if (!attempts.is_none()) o.attempts = count(attempts, "attempts");
      o.dry_run = truth(dry_run);
      o.actor = optional_text(actor_id, "actor_id");
      o.now = micros(now);
      return bulk_dict(s.run([&](ControlStore& c) {
        return cancel ? c.cancel_matching(p, o) : c.retry_matching(p, o);
      }));
    };
  };
  store.def("cancel_matching", bulk(true), "project_id"_a, py::kw_only(),
            "statuses"_a = py::none(), "reason"_a = "", "attempts"_a = py::none(),
            "dry_run"_a = false, "actor_id"_a = py::none(), "now"_a = py::none(),
            "Cancels every item of the project in statuses (default ready, scheduled, claimed); "
            "a dict with operation, count, first_ids.");
  store.def("retry_matching", bulk(false), "project_id"_a, py::kw_only(),
            "statuses"_a = py::none(), "reason"_a = "", "attempts"_a = py::none(),
            "dry_run"_a = false, "actor_id"_a = py::none(), "now"_a = py::none(),
            "Redrives every failed (or statuses) item of the project; as cancel_matching.");
  store.def(
      "add_schedule",
      [](Store& s, const Text& name, const Text& project_id, const Text& cron,
         const PayloadArg& payload, const Text& zone, const Text& overlap,
         const Int& catch_up, const OptInt& now) {
        const auto n = text(name, "name");
        ControlStore::ScheduleSpec spec;
        spec.project_id = text(project_id, "project_id");
        spec.cron = text(cron, "cron");
        spec.payload = payload_text(payload);
        spec.zone = text(zone, "zone");
        const auto ov = text(overlap, "overlap");
        if (ov == "allow") {
          spec.overlap = ControlStore::Overlap::allow;
        } else if (ov == "skip") {
          spec.overlap = ControlStore::Overlap::skip;
        } else {
          invalid("overlap must be \"allow\" or \"skip\"");
        }
        spec.catch_up = integer(catch_up, "catch_up");
        spec.now = micros(now);
        s.run([&](ControlStore& c) { c.add_schedule(n, spec); });
      },
      "name"_a, "project_id"_a, "cron"_a, "payload"_a = py::dict(), py::kw_only(),
      "zone"_a = "UTC", "overlap"_a = "allow", "catch_up"_a = 0, "now"_a = py::none(),
      "A cron schedule: one item per occurrence, fired by any claim or tick.");
  auto schedule_op = [](int which) {
    return [which](Store& s, const Text& name, const OptInt& now) {
      const auto n = text(name, "name");
      const auto at = micros(now);
      return s.run([&](ControlStore& c) {
        return which == 0 ? c.pause_schedule(n, at)
               : which == 1 ? c.resume_schedule(n, at)
                            : c.remove_schedule(n, at);
      });
    };
  };
  store.def("pause_schedule", schedule_op(0), "name"_a, py::kw_only(), "now"_a = py::none(),
            "False if unchanged; NotFound for no schedule.");
  store.def("resume_schedule", schedule_op(1), "name"_a, py::kw_only(), "now"_a = py::none(),
            "False if unchanged; NotFound for no schedule.");
  store.def("remove_schedule", schedule_op(2), "name"_a, py::kw_only(), "now"_a = py::none(),
            "False if unchanged; NotFound for no schedule.");
  store.def(
      "schedules",
      [](Store& s) {
        py::list out;
        for (const auto& r : s.run([](ControlStore& c) { return c.schedules(); })) {
          out.append(schedule_dict(r));
        }
        return out;
      },
      "Every schedule as a dict.");
  store.def(
      "tick",
      [](Store& s, const OptInt& now) {
        const auto at = micros(now);
        return s.run([&](ControlStore& c) { return c.tick(at); });
      },
      py::kw_only(), "now"_a = py::none(), "Fires every due occurrence; how many items it queued.");

  // ---- flow control
  store.def(
      "set_limit",
      [](Store& s, const Text& key, const Int& concurrency, const Text& rate,
         const Int& burst, const OptText& actor_id, const OptInt& now) {
        const auto k = text(key, "key");
        ControlStore::LimitSpec spec;
        spec.concurrency = count(concurrency, "concurrency");
        spec.rate = text(rate, "rate");
        spec.burst = count(burst, "burst");
        spec.actor = optional_text(actor_id, "actor_id");
        spec.now = micros(now);
        return s.run([&](ControlStore& c) { return c.set_limit(k, spec); });
      },
      "key"_a, py::kw_only(), "concurrency"_a = 0, "rate"_a = "", "burst"_a = 0,
      "actor_id"_a = py::none(), "now"_a = py::none(),
      "Bounds a concurrency key: at most `concurrency` live leases, claims at `rate` "
      "(\"10/s\"). False if unchanged.");
  store.def(
      "remove_limit",
      [](Store& s, const Text& key, const OptText& actor_id, const OptInt& now) {
        const auto k = text(key, "key");
        const auto o = lifecycle(actor_id, now);
        return s.run([&](ControlStore& c) { return c.remove_limit(k, o); });
      },
      "key"_a, py::kw_only(), "actor_id"_a = py::none(), "now"_a = py::none(),
      "Removes a key's limit; False if removed already; NotFound for a key never limited.");
  store.def(
      "limits",
      [](Store& s, const OptInt& now) {
        const auto at = micros(now);
        py::list out;
        for (const auto& l : s.run([&](ControlStore& c) { return c.limits(at); })) {
          out.append(limit_dict(l));
        }
        return out;
      },
      py::kw_only(), "now"_a = py::none(), "Every limit with its live leases and holders.");
  store.def(
      "set_weight",
      [](Store& s, const Text& project_id, const Int& weight,
         const OptText& actor_id, const OptInt& now) {
        const auto p = text(project_id, "project_id");
        const auto w = count(weight, "weight");
        const auto o = lifecycle(actor_id, now);
        return s.run([&](ControlStore& c) { return c.set_weight(p, w, o); });
      },
      "project_id"_a, "weight"_a, py::kw_only(), "actor_id"_a = py::none(), "now"_a = py::none(),
      "The project's share of claims across projects; False if unchanged.");
  store.def(
      "why",
      [](Store& s, const Text& item_id, const OptText& actor_id, const OptInt& now) {
        const auto id = text(item_id, "item_id");
        const auto actor = optional_text(actor_id, "actor_id");
        const auto at = micros(now);
        return explanation_dict(s.run([&](ControlStore& c) { return c.explain(id, actor, at); }));
      },
      "item_id"_a, "actor_id"_a = py::none(), py::kw_only(), "now"_a = py::none(),
      "Every reason the item is not being claimed now (a dict with reasons).");
}

}  // namespace cplane::python
