// The `cplane` Python module: verify, rebuild, export, audit, archive.
#include <cstdio>

#include "python/module.hpp"

namespace cplane::python {

void bind_ledger(py::module_& m) {
  // ---- verify, rebuild, export, audit
  m.def(
      "verify_ledger",
      [](Store& s) {
        return problem_list(s.run([](ControlStore& c) { return verify_ledger(c); }));
      },
      "store"_a,
      "Replays the log and compares it with the rows: a list of LedgerProblem (kind, "
      "item_id, project_id, detail), empty when they agree.");
  m.def(
      "rebuild",
      [](Store& s, const Flag& dry_run) {
        RebuildOptions o{.dry_run = truth(dry_run)};
        const auto r = s.run([&](ControlStore& c) { return rebuild(c, o); });
        py::list changes;
        for (const auto& c : r.changes) {
          changes.append(py::dict("table"_a = c.table, "key"_a = c.key, "action"_a = c.action,
                                  "fields"_a = c.fields));
        }
        return py::dict("changes"_a = changes, "changes_total"_a = r.changes_total,
                        "kept_total"_a = r.kept_total, "events"_a = r.events,
                        "items"_a = r.items, "dry_run"_a = r.dry_run);
      },
      "store"_a, py::kw_only(), "dry_run"_a = false,
      "Rewrites every row that differs from the fold of the log (dry_run: reports only). "
      "cplane.Error when the log fails its own checks (nothing changed).");
  m.def(
      "export",
      [](Store& s, const PathArg& path, const Int& since) {
        const auto p = py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
        ExportOptions o;
        o.since = integer(since, "since");
        if (o.since < 0) invalid("since must not be negative");
        // Refused or failed: the file this call created goes again, so a
        // retry is not blocked by it.
        std::FILE* f = open_file(p, "wbx");
        ExportSummary summary;
        try {
          summary = s.run([&](ControlStore& c) { return export_log(c, f, o); });
        } catch (...) {
          std::fclose(f);
          std::remove(p.c_str());
          throw;
        }
        if (std::fclose(f) != 0) {
          raise(classes->storage_error, "cannot write \"" + p + "\"", py::str("io"));
        }
        return py::dict("events"_a = summary.events, "heads"_a = summary.heads,
                        "chain_head"_a = summary.chain_head);
      },
      "store"_a, "path"_a, py::kw_only(), "since"_a = 0,
      "Writes the log to a new file at path (the export format; never over a file).");
  m.def(
      "audit",
      [](const PathArg& path, Store* against) {
        const auto p = py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
        std::FILE* f = open_file(p, "rb");
        AuditReport r;
        try {
          if (against != nullptr) {
            r = against->run([&](ControlStore& c) { return audit_export(f, &c); });
          } else {
            py::gil_scoped_release release;
            r = audit_export(f);
          }
        } catch (...) {
          std::fclose(f);
          throw;
        }
        std::fclose(f);
        return py::dict("problems"_a = problem_list(r.problems), "events"_a = r.summary.events,
                        "heads"_a = r.summary.heads, "projects"_a = r.summary.projects,
                        "chain_head"_a = r.summary.chain_head,
                        "segment_id"_a = r.summary.segment_id, "anchors"_a = r.summary.anchors,
                        "redacted_payloads"_a = r.summary.redacted_payloads);
      },
      "path"_a, "against"_a = py::none(),
      "Replays an export or an archive segment with no database (and, given a store, "
      "against its rows, or a segment against its anchors): a dict with problems "
      "(LedgerProblem list), events, heads, projects, chain_head, segment_id ('' for an "
      "export), anchors, redacted_payloads.");
  m.def(
      "archive",
      [](Store& s, const Int& before, const PathArg& to, const OptText& project,
         const Flag& dry_run, const Flag& redact_payloads, const Flag& forget_keys,
         const OptInt& now) {
        ArchiveOptions o;
        o.before = integer(before, "before");
        o.file = py::str(py::module_::import("os").attr("fspath")(to)).cast<std::string>();
        o.project = optional_text(project, "project");
        o.dry_run = truth(dry_run);
        o.redact_payloads = truth(redact_payloads);
        o.forget_keys = truth(forget_keys);
        o.now = micros(now);
        const auto r = s.run([&](ControlStore& c) { return archive(c, o); });
        return py::dict("streams"_a = r.streams, "items"_a = r.items, "sessions"_a = r.sessions,
                        "schedules"_a = r.schedules, "kept_live"_a = r.kept_live,
                        "clocks_carried"_a = r.clocks_carried,
                        "keys_released"_a = r.keys_released,
                        "events"_a = r.events, "bytes"_a = r.bytes, "redacted"_a = r.redacted,
                        "segment_id"_a = r.segment_id, "digest"_a = r.digest,
                        "dry_run"_a = r.dry_run);
      },
      "store"_a, py::kw_only(), "before"_a, "to"_a, "project"_a = py::none(),
      "dry_run"_a = false, "redact_payloads"_a = false, "forget_keys"_a = false,
      "now"_a = py::none(),
      "Moves every stream that ended before `before` (microseconds: an item done, failed, "
      "closed or cancelled, a closed session, a removed schedule) into a new segment file "
      "`to`, leaving an anchor per stream (docs/retention.md); redact_payloads: each payload "
      "kept as its digest; forget_keys: the archived items' idempotency keys released (an "
      "enqueue with one then makes a new item). A dict with streams, items, sessions, "
      "schedules, kept_live, clocks_carried, keys_released, events, bytes, redacted, "
      "segment_id, digest, dry_run.");
}

}  // namespace cplane::python
