// The `cplane` Python module's conversions (python/module.hpp): Python
// arguments checked and converted, results made Python values, the C++
// refusals made the module's exceptions. All with the GIL held.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "python/module.hpp"

namespace cplane::python {

Classes* classes = nullptr;

[[noreturn]] void raise(const py::object& type, const std::string& message, py::object reason) {
  py::object exc = type(message, reason);
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw py::error_already_set();
}

[[noreturn]] void invalid(const std::string& message, const char* reason) {
  raise(classes->invalid_argument, message, py::str(reason));
}

// ---- checking Python arguments (with the GIL) ---------------------------------

bool is_int(const py::handle& value) {
  return PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr());
}

bool truth(const py::handle& value) {
  const int t = PyObject_IsTrue(value.ptr());
  if (t < 0) throw py::error_already_set();
  return t != 0;
}

// A str's UTF-8 bytes; InvalidArgument for one that has none (a lone
// surrogate such as "\udcff").
std::string utf8(const py::handle& value, const char* what) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    invalid(std::string(what) + " is not valid text: it holds a lone surrogate, which UTF-8 "
                                "cannot encode");
  }
  return std::string(data, static_cast<std::size_t>(size));
}

std::string text(const py::handle& value, const char* what) {
  if (!PyUnicode_Check(value.ptr())) {
    invalid(std::string(what) + " must be a str, not " + std::string(py::str(value.get_type().attr("__name__"))));
  }
  return utf8(value, what);
}

std::optional<std::string> optional_text(const py::object& value, const char* what) {
  if (value.is_none()) return std::nullopt;
  return text(value, what);
}

std::int64_t integer(const py::handle& value, const char* what) {
  if (!is_int(value)) {
    invalid(std::string(what) + " must be an int, not " +
            std::string(py::str(value.get_type().attr("__name__"))));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) invalid(std::string(what) + " is out of range");
  return v;
}

Fence fence_of(const py::handle& value) {
  const auto v = integer(value, "fence");
  if (v < 0) invalid("fence must not be negative");
  return static_cast<Fence>(v);
}

std::uint32_t count(const py::handle& value, const char* what) {
  const auto v = integer(value, what);
  if (v < 0 || v > 0xffffffffLL) invalid(std::string(what) + " is out of range");
  return static_cast<std::uint32_t>(v);
}

// Microseconds since the epoch, as the C++ API takes them (checked there).
std::optional<Micros> micros(const py::object& value, const char* what) {
  if (value.is_none()) return std::nullopt;
  return integer(value, what);
}

// The longest length of time any argument takes: ten years, as the engine's
// leases (so that its conversion to microseconds cannot overflow).
constexpr double kMaxSeconds = 10.0 * 365 * 24 * 3600;

// A length of time in seconds: an int or a float, positive and finite.
Seconds seconds(const py::handle& value, const char* what) {
  if (!(is_int(value) || PyFloat_Check(value.ptr()))) {
    invalid(std::string(what) + " must be a number of seconds (int or float), not " +
            std::string(py::str(value.get_type().attr("__name__"))));
  }
  const double v = value.cast<double>();
  if (!std::isfinite(v) || v <= 0) {
    invalid(std::string(what) + " must be a positive, finite number of seconds, not " +
            std::string(py::str(py::repr(value))));
  }
  if (v > kMaxSeconds) {
    invalid(std::string(what) + " must be at most ten years (315360000 seconds), not " +
            std::string(py::str(py::repr(value))));
  }
  return Seconds{v};
}

std::optional<Seconds> optional_seconds(const py::object& value, const char* what) {
  if (value.is_none()) return std::nullopt;
  return seconds(value, what);
}

Outcome outcome(const py::handle& value) {
  const auto s = text(value, "status");
  if (s == "done") return Outcome::done;
  if (s == "failed") return Outcome::failed;
  invalid("status must be \"done\" or \"failed\", not \"" + s.substr(0, 80) + "\"");
}

// A payload: a dict or list (or any JSON-serialisable value but a str),
// serialised by Python's json module; or a str, taken as JSON text (the
// engine checks it).
std::string payload_text(const py::handle& payload) {
  if (PyUnicode_Check(payload.ptr())) return utf8(payload, "payload");
  if (PyBytes_Check(payload.ptr()) || PyByteArray_Check(payload.ptr())) {
    invalid("payload must be a dict, a list or a JSON str, not bytes");
  }
  try {
    const py::object json = classes->json_dumps(payload, "ensure_ascii"_a = false,
                                                "allow_nan"_a = false,
                                                "separators"_a = py::make_tuple(",", ":"));
    return utf8(json, "payload");
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_TypeError) || e.matches(PyExc_ValueError) ||
        e.matches(PyExc_RecursionError)) {
      invalid(std::string("payload is not JSON-serialisable: ") +
              std::string(py::str(e.type().attr("__name__"))) + ": " +
              std::string(py::str(e.value())));
    }
    throw;
  }
}

// A payload the store holds was checked as JSON when it was written: one
// that no longer parses was edited outside cplane.
py::object parse_json(const std::string& json) {
  try {
    return classes->json_loads(py::str(json));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ValueError)) throw;
    raise(classes->storage_error,
          "a payload in the store is not JSON (edited outside cplane): run cplane verify",
          py::str("corruption"));
  }
}

std::vector<std::string> texts(const py::handle& values, const char* what) {
  if (PyUnicode_Check(values.ptr())) invalid(std::string(what) + " must be a list of str, not a str");
  std::vector<std::string> out;
  for (const auto& v : py::iter(values)) out.push_back(text(v, what));
  return out;
}

// ---- converting results (with the GIL) ------------------------------------------

py::object claimed(const ClaimedItem& c) {
  return classes->claimed_item(c.item_id, c.project_id, parse_json(c.payload), c.fence,
                               c.attempts, c.lease_expires_at);
}

MaybeClaimed maybe_claimed(const std::optional<ClaimedItem>& c) {
  if (!c) return MaybeClaimed(py::none());
  return MaybeClaimed(claimed(*c));
}

py::list claimed_list(const std::vector<ClaimedItem>& items) {
  py::list out;
  for (const auto& c : items) out.append(claimed(c));
  return out;
}

py::dict item_dict(const Item& r) {
  py::dict d;
  d["item_id"] = r.item_id;
  d["project_id"] = r.project_id;
  d["payload"] = parse_json(r.payload);
  d["status"] = std::string(to_string(r.status));
  d["owner"] = r.owner;
  d["fence"] = r.fence;
  d["attempts"] = r.attempts;
  d["lease_expires_at"] = r.lease_expires_at;
  d["detail"] = r.detail;
  d["queued_seq"] = r.queued_seq;
  d["queued_at"] = r.queued_at;
  d["updated_at"] = r.updated_at;
  d["last_seq"] = r.last_seq;
  d["kind"] = std::string(to_string(r.kind));
  d["ref"] = r.ref;
  d["head"] = r.head;
  d["review"] = std::string(to_string(r.review));
  d["author"] = r.author;
  d["session"] = r.session;
  d["actions"] = r.actions;
  d["expected_head"] = r.expected_head;
  d["head_moved"] = r.head_moved;
  d["close_reason"] = r.close_reason;
  d["priority"] = r.priority;
  d["terminal_since"] = r.terminal_since;
  d["terminal_reason"] = r.terminal_reason;
  d["key"] = r.key;
  d["max_attempts"] = r.max_attempts;
  d["backoff"] = r.backoff;
  d["attempt_limit"] = r.attempt_limit;
  d["run_at"] = r.run_at;
  d["concurrency_key"] = r.concurrency_key;
  return d;
}

py::dict event_dict(const StoredEvent& stored) {
  const Event& e = stored.event;
  const auto stream = stream_of(e);
  py::dict d;
  d["seq"] = stored.seq;
  d["event_type"] = std::string(stored.type());
  d["at"] = e.at;
  const auto fence = fence_of(e.body);
  d["fence"] = fence ? py::object(py::int_(*fence)) : py::object(py::none());
  d["actor"] = e.actor;
  d["item_id"] = e.item_id;
  d["project_id"] = e.project_id;
  d["stream_kind"] = std::string(to_string(stream.kind));
  d["stream_id"] = stream.id;
  for (const auto& field : fields_of(e.body)) {
    const py::str name(std::string(field.name));
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::monostate>) {
            d[name] = py::none();
          } else if constexpr (std::is_same_v<V, EventField::Json>) {
            d[name] = parse_json(v.text);
          } else {
            d[name] = v;
          }
        },
        field.value);
  }
  return d;
}

py::list event_list(const std::vector<StoredEvent>& events) {
  py::list out;
  for (const auto& e : events) out.append(event_dict(e));
  return out;
}

py::dict project_dict(const ProjectRow& r) {
  return py::dict("project_id"_a = r.project_id, "title"_a = r.title, "status"_a = r.status,
                  "created_at"_a = r.created_at, "last_seq"_a = r.last_seq,
                  "max_attempts"_a = r.max_attempts, "backoff"_a = r.backoff,
                  "paused"_a = r.paused, "pause_reason"_a = r.pause_reason,
                  "weight"_a = r.weight);
}

py::dict session_dict(const SessionInfo& s) {
  return py::dict("session_id"_a = s.row.session_id, "actor_id"_a = s.row.actor,
                  "opened_at"_a = s.row.opened_at, "last_seen_at"_a = s.row.last_seen_at,
                  "closed_at"_a = s.row.closed_at, "is_open"_a = s.row.is_open(),
                  "items"_a = s.items);
}

py::dict assignment_dict(const Assignment& a) {
  return py::dict("outcome"_a = std::string(to_string(a.outcome)), "item_id"_a = a.item_id,
                  "fence"_a = a.fence, "lease_expires_at"_a = a.lease_expires_at,
                  "expected_head"_a = a.expected_head, "actions"_a = a.actions,
                  "until"_a = a.until);
}

py::dict allocation_dict(const Allocation& a) {
  py::list skipped;
  for (const auto& s : a.skipped) {
    skipped.append(py::dict("item_id"_a = s.item_id, "reason"_a = std::string(to_string(s.reason))));
  }
  return py::dict("outcome"_a = std::string(to_string(a.outcome)), "item_id"_a = a.item_id,
                  "fence"_a = a.fence, "lease_expires_at"_a = a.lease_expires_at,
                  "expected_head"_a = a.expected_head, "actions"_a = a.actions,
                  "until"_a = a.until, "skipped"_a = skipped,
                  "skipped_total"_a = a.skipped_total);
}

py::object opt(const std::optional<std::string>& v) {
  return v ? py::object(py::str(*v)) : py::object(py::none());
}

py::dict incident_dict(const IncidentLinkRow& r) {
  return py::dict("incident_id"_a = r.incident_id, "provider"_a = r.provider,
                  "fingerprint"_a = r.fingerprint, "org"_a = r.org, "repo"_a = r.repo,
                  "environment"_a = r.environment, "target"_a = r.target,
                  "status"_a = opt(r.status),
                  "event_count"_a = r.event_count ? py::object(py::int_(*r.event_count))
                                                  : py::object(py::none()),
                  "permalink"_a = opt(r.permalink), "first_seen"_a = opt(r.first_seen),
                  "last_seen"_a = opt(r.last_seen), "linked_prs"_a = opt(r.linked_prs),
                  "linked_at"_a = r.linked_at, "updated_at"_a = r.updated_at);
}

py::dict schedule_dict(const ScheduleRow& r) {
  return py::dict("name"_a = r.name, "project_id"_a = r.project_id, "cron"_a = r.cron,
                  "zone"_a = r.zone, "payload"_a = parse_json(r.payload),
                  "overlap"_a = r.overlap_skip ? "skip" : "allow", "catch_up"_a = r.catch_up,
                  "next_at"_a = r.next_at, "paused"_a = r.paused, "removed"_a = r.removed,
                  "last_item"_a = r.last_item, "last_occurrence"_a = r.last_occurrence,
                  "fired"_a = r.fired, "created_at"_a = r.created_at,
                  "updated_at"_a = r.updated_at);
}

py::dict holder_dict(const ControlStore::KeyHolder& h) {
  return py::dict("item_id"_a = h.item_id, "project_id"_a = h.project_id, "fence"_a = h.fence,
                  "lease_expires_at"_a = h.lease_expires_at);
}

py::list holders(const std::vector<ControlStore::KeyHolder>& hs) {
  py::list out;
  for (const auto& h : hs) out.append(holder_dict(h));
  return out;
}

py::dict limit_dict(const ControlStore::LimitInfo& l) {
  return py::dict("key"_a = l.row.key, "concurrency"_a = l.row.concurrency,
                  "rate_count"_a = l.row.rate_count, "rate_period"_a = l.row.rate_period,
                  "burst"_a = l.row.burst, "live"_a = l.live, "holders"_a = holders(l.holders),
                  "next_token"_a = l.next_token);
}

py::dict explanation_dict(const ControlStore::Explanation& x) {
  py::list reasons;
  for (const auto& r : x.reasons) {
    reasons.append(py::dict("kind"_a = std::string(to_string(r.kind)), "message"_a = r.message,
                            "until"_a = r.until, "key"_a = r.key, "limit"_a = r.limit,
                            "live"_a = r.live, "holders"_a = holders(r.holders),
                            "ahead"_a = r.ahead, "weight"_a = r.weight,
                            "competing"_a = r.competing));
  }
  return py::dict("item_id"_a = x.item_id, "project_id"_a = x.project_id,
                  "status"_a = std::string(to_string(x.status)), "at"_a = x.at,
                  "claimable"_a = x.claimable, "reasons"_a = reasons);
}

py::dict counts_dict(const ControlStore::StatusCounts& c) {
  return py::dict("ready"_a = c.ready, "claimed"_a = c.claimed, "done"_a = c.done,
                  "failed"_a = c.failed, "closed"_a = c.closed, "scheduled"_a = c.scheduled,
                  "cancelled"_a = c.cancelled, "invalid"_a = c.invalid);
}

py::dict bulk_dict(const ControlStore::BulkResult& b) {
  return py::dict("operation"_a = b.operation, "count"_a = b.count, "first_ids"_a = b.first_ids);
}

py::list problem_list(const std::vector<LedgerProblem>& problems) {
  py::list out;
  for (const auto& p : problems) {
    out.append(classes->ledger_problem(std::string(to_string(p.kind)), p.item_id, p.project_id,
                                       p.detail));
  }
  return out;
}

std::vector<ItemStatus> statuses(const py::object& values) {
  std::vector<ItemStatus> out;
  if (values.is_none()) return out;
  for (const auto& name : texts(values, "statuses")) {
    const auto s = parse_item_status(name);
    if (!s) invalid("unknown status \"" + name.substr(0, 80) + "\"");
    out.push_back(*s);
  }
  return out;
}

Durability durability(const py::handle& value) {
  const auto s = text(value, "durability");
  if (s == "full") return Durability::full;
  if (s == "fenced") return Durability::fenced;
  if (s == "normal") return Durability::normal;
  invalid("durability must be \"full\", \"fenced\" or \"normal\", not \"" + s.substr(0, 80) + "\"");
}

std::unique_ptr<Store> open(const PathArg& url, const SecondsArg& lease_seconds,
                            const Durability_& durability_, const SecondsArg& lock_timeout,
                            const Flag& create, const Flag& read_only) {
  StoreOptions options;
  options.lease = seconds(lease_seconds, "lease_seconds");
  options.durability = durability(durability_);
  const double wait = seconds(lock_timeout, "lock_timeout").count();
  if (wait < 0.001) invalid("lock_timeout must be at least 0.001 seconds (one millisecond)");
  options.lock_timeout = std::chrono::milliseconds(std::llround(wait * 1000));
  options.create = truth(create);
  options.read_only = truth(read_only);
  std::string path;
  if (PyUnicode_Check(url.ptr())) {
    path = url.cast<std::string>();
  } else if (py::isinstance(url, py::module_::import("os").attr("PathLike"))) {
    path = py::str(py::module_::import("os").attr("fspath")(url)).cast<std::string>();
  } else {
    invalid("path_or_url must be a str or a path");
  }
  return std::make_unique<Store>(path, std::move(options));
}

ControlStore::Report report(const py::handle& value) {
  ControlStore::Report r;
  if (py::isinstance<py::dict>(value)) {
    const auto d = py::reinterpret_borrow<py::dict>(value);
    if (!d.contains("item_id") || !d.contains("fence")) {
      invalid("a report needs item_id and fence");
    }
    r.item_id = text(d["item_id"], "item_id");
    r.fence = fence_of(d["fence"]);
    r.outcome = outcome(d.contains("status") ? py::object(d["status"]) : py::str("done"));
    if (d.contains("detail")) r.detail = text(d["detail"], "detail");
    return r;
  }
  const auto t = py::reinterpret_borrow<py::sequence>(value);
  if (PyUnicode_Check(value.ptr()) || !PySequence_Check(value.ptr()) || t.size() < 2 ||
      t.size() > 4) {
    invalid("a report is (item_id, fence[, status[, detail]]) or a dict");
  }
  r.item_id = text(t[0], "item_id");
  r.fence = fence_of(t[1]);
  r.outcome = outcome(t.size() > 2 ? py::object(t[2]) : py::str("done"));
  if (t.size() > 3) r.detail = text(t[3], "detail");
  return r;
}

ClaimOptions claim_options(const OptText& actor_id, const OptSeconds& lease_seconds,
                           const OptInt& now) {
  ClaimOptions o;
  o.actor = optional_text(actor_id, "actor_id");
  o.lease = optional_seconds(lease_seconds, "lease_seconds");
  o.now = micros(now);
  return o;
}

ControlStore::LifecycleOptions lifecycle(const OptText& actor_id, const OptInt& now) {
  return {.actor = optional_text(actor_id, "actor_id"), .now = micros(now)};
}

// ---- exceptions -----------------------------------------------------------------

void translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const FenceRejected& e) {
    PyErr_SetObject(classes->fence_rejected.ptr(),
                    classes->fence_rejected(e.what(), to_string(e.reason())).ptr());
  } catch (const ScopeDenied& e) {
    PyErr_SetObject(classes->scope_denied.ptr(),
                    classes->scope_denied(e.what(), "out_of_scope").ptr());
  } catch (const NotFound& e) {
    PyErr_SetObject(classes->not_found.ptr(),
                    classes->not_found(e.what(), to_string(e.reason())).ptr());
  } catch (const InvalidArgument& e) {
    PyErr_SetObject(classes->invalid_argument.ptr(),
                    classes->invalid_argument(e.what(), to_string(e.reason())).ptr());
  } catch (const MutationDenied& e) {
    PyErr_SetObject(classes->mutation_denied.ptr(),
                    classes->mutation_denied(e.what(), to_string(e.reason())).ptr());
  } catch (const StorageError& e) {
    PyErr_SetObject(classes->storage_error.ptr(),
                    classes->storage_error(e.what(), to_string(e.category())).ptr());
  } catch (const InternalError& e) {
    PyErr_SetObject(classes->internal_error.ptr(), classes->internal_error(e.what()).ptr());
  } catch (const Error& e) {
    // RebuildRefused and any refusal without a class of its own here.
    PyErr_SetObject(classes->error.ptr(), classes->error(e.what()).ptr());
  }
}

std::FILE* open_file(const std::string& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) {
    const int err = errno;
    if (err == EEXIST) invalid("\"" + path + "\" exists: export never writes over a file");
    raise(classes->storage_error, "cannot open \"" + path + "\": " + std::strerror(err),
          py::str("io"));
  }
  return f;
}

}  // namespace cplane::python
