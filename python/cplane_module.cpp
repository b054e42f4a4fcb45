// The `cplane` Python module: a thin layer over the public C++ API
// (<cplane/cplane.hpp>). It translates types (keyword arguments, seconds as
// floats, payloads as dicts, rows and events as dicts) and exceptions
// (cplane.Error and its subclasses, with the C++ reason as an attribute);
// every decision stays in the engine.
//
// The GIL: every store call runs with the GIL released (Unlocked below), so
// a call waiting for SQLite's write lock, the disk or a PostgreSQL server
// lets the process's other threads run. Arguments are checked and converted
// (json.dumps of a payload) before, results converted after, with the GIL
// held. A store is one connection: threads sharing one Store take turns on
// its mutex (taken with the GIL released, so a waiting thread blocks no
// other). A store is tied to the process that opened it: in a child forked
// after the open, each call raises InvalidArgument (misuse) and the store is
// never closed there (closing would end the parent's connection).
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/cplane.hpp>

#include "python_types.hpp"  // kPythonTypes: python/types.py, embedded by CMake

namespace py = pybind11;
using namespace pybind11::literals;

namespace cplane::python {
namespace {

// The module's Python classes (python/types.py), looked up once at import.
struct Classes {
  py::object error, fence_rejected, scope_denied, not_found, invalid_argument, storage_error,
      mutation_denied, internal_error, claimed_item, ledger_problem, verdict;
  py::object json_dumps, json_loads;
};
Classes* classes = nullptr;  // set at import; lives as long as the interpreter

[[noreturn]] void raise(const py::object& type, const std::string& message, py::object reason) {
  py::object exc = type(message, reason);
  PyErr_SetObject(type.ptr(), exc.ptr());
  throw py::error_already_set();
}

[[noreturn]] void invalid(const std::string& message, const char* reason = "invalid_input") {
  raise(classes->invalid_argument, message, py::str(reason));
}

}  // namespace

// ---- argument types: what help() and editors show ------------------------------
// Each holds the Python object as given (any type: the checks below raise
// cplane.InvalidArgument, not TypeError, for a wrong one); the name is
// what the signature in a docstring shows.
#define CPLANE_PY_ARGUMENT_TYPES(X)                                  \
  X(Text, "str")                                                     \
  X(OptText, "Optional[str]")                                        \
  X(Int, "int")                                                      \
  X(OptInt, "Optional[int]")                                         \
  X(SecondsArg, "float")                                             \
  X(OptSeconds, "Optional[float]")                                   \
  X(Flag, "bool")                                                    \
  X(PayloadArg, "Union[dict, list, str]")                            \
  X(Payloads, "list[Union[dict, list, str]]")                        \
  X(Texts, "list[str]")                                              \
  X(OptTexts, "Optional[list[str]]")                                 \
  X(PathArg, "Union[str, os.PathLike]")                              \
  X(Reports, "list[Union[tuple, dict]]")                             \
  X(Durability_, "Literal['full', 'fenced', 'normal']")              \
  X(MaybeClaimed, "Optional[ClaimedItem]")                           \
  X(VerdictResult, "Verdict")
#define CPLANE_PY_ARGUMENT_TYPE(Type, Name)                          \
  struct Type : py::object {                                         \
    Type() = default;                                                \
    explicit Type(py::object o) : py::object(std::move(o)) {}        \
  };
CPLANE_PY_ARGUMENT_TYPES(CPLANE_PY_ARGUMENT_TYPE)
#undef CPLANE_PY_ARGUMENT_TYPE

}  // namespace cplane::python

namespace pybind11::detail {
#define CPLANE_PY_ARGUMENT_CASTER(Type, Name)                                         \
  template <>                                                                         \
  struct type_caster<cplane::python::Type> {                                          \
    PYBIND11_TYPE_CASTER(cplane::python::Type, const_name(Name));                     \
    bool load(handle src, bool) {                                                     \
      value = cplane::python::Type(reinterpret_borrow<object>(src));                  \
      return true;                                                                    \
    }                                                                                 \
    static handle cast(const cplane::python::Type& v, return_value_policy, handle) {  \
      return v.inc_ref();                                                             \
    }                                                                                 \
  };
CPLANE_PY_ARGUMENT_TYPES(CPLANE_PY_ARGUMENT_CASTER)
#undef CPLANE_PY_ARGUMENT_CASTER
}  // namespace pybind11::detail

namespace cplane::python {
namespace {

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
std::optional<Micros> micros(const py::object& value, const char* what = "now") {
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

template <class Reason>
VerdictResult verdict(const Verdict<Reason>& v, const char* kind) {
  if (v) return VerdictResult(classes->verdict(true, py::none(), "", kind));
  return VerdictResult(classes->verdict(false, to_string(v.reason()), v.message(), kind));
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

// ---- the store ------------------------------------------------------------------

// Runs `call` with the GIL released. Exceptions pass through; the GIL is
// taken back before they are translated.
template <class F>
decltype(auto) unlocked(F&& call) {
  py::gil_scoped_release release;
  return call();
}

class Store {
 public:
  Store(const std::string& url, StoreOptions options) : pid_(::getpid()), url_(url) {
    store_ = unlocked([&] { return std::make_unique<ControlStore>(url, std::move(options)); });
  }
  ~Store() {
    // In a forked child the connection is the parent's: leave it alone.
    if (store_ && ::getpid() != pid_) static_cast<void>(store_.release());
  }

  // Runs `call(store)` with the GIL released and this store's mutex held.
  template <class F>
  decltype(auto) run(F&& call) {
    check_usable();
    py::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    if (!store_) throw_closed_unlocked();
    return call(*store_);
  }

  void close() {
    if (::getpid() != pid_) {
      static_cast<void>(store_.release());
      return;
    }
    py::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    store_.reset();
  }
  bool closed() const { return !store_; }
  const std::string& url() const { return url_; }

 private:
  void check_usable() const {
    if (::getpid() != pid_) {
      invalid("this ControlStore was opened in process " + std::to_string(pid_) +
                  ", before a fork: open a new one in this process",
              "misuse");
    }
    if (!store_) invalid("this ControlStore is closed", "misuse");
  }
  [[noreturn]] static void throw_closed_unlocked() {
    throw InvalidArgument(InvalidArgument::Reason::misuse, "this ControlStore is closed");
  }

  pid_t pid_;
  std::string url_;
  std::mutex mutex_;
  std::unique_ptr<ControlStore> store_;
};

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

}  // namespace
}  // namespace cplane::python

using cplane::python::Store;
using namespace cplane;
using namespace cplane::python;

PYBIND11_MODULE(cplane, m) {
  m.doc() =
      "cplane: a durable control plane for a fleet of workers (atomic claims, leases with\n"
      "fencing tokens, an append-only hash-chained ledger), in-process.\n\n"
      "    with cplane.ControlStore('control.db') as store:\n"
      "        store.create_project('alpha', 'Project Alpha')\n"
      "        store.enqueue('alpha', {'task': 'summarise the report'})\n"
      "        item = store.claim('worker-1')\n"
      "        store.finish(item.item_id, fence=item.fence, status='done')\n\n"
      "Refusals are exceptions under cplane.Error with the reason as an attribute.\n"
      "Times: lease lengths in seconds (int or float); `now=` and returned times in\n"
      "integer microseconds since the epoch. See docs/python.md.";

  // The exception and value classes, defined in Python (python/types.py).
  py::exec(kPythonTypes, m.attr("__dict__"));
  static Classes cls;
  cls.error = m.attr("Error");
  cls.fence_rejected = m.attr("FenceRejected");
  cls.scope_denied = m.attr("ScopeDenied");
  cls.not_found = m.attr("NotFound");
  cls.invalid_argument = m.attr("InvalidArgument");
  cls.storage_error = m.attr("StorageError");
  cls.mutation_denied = m.attr("MutationDenied");
  cls.internal_error = m.attr("InternalError");
  cls.claimed_item = m.attr("ClaimedItem");
  cls.ledger_problem = m.attr("LedgerProblem");
  cls.verdict = m.attr("Verdict");
  auto json = py::module_::import("json");
  cls.json_dumps = json.attr("dumps");
  cls.json_loads = json.attr("loads");
  classes = &cls;
  py::register_exception_translator(&translate);
  m.attr("__version__") = CPLANE_PY_VERSION;

  py::class_<Store> store(m, "ControlStore", R"doc(
A cplane store: one connection to a SQLite file or a PostgreSQL server.

ControlStore(path_or_url, lease_seconds=900, durability="fenced",
             lock_timeout=30.0, create=True, read_only=False)

path_or_url: a file path, "sqlite:PATH" or "postgresql://...".
lease_seconds: the lease a claim gets unless it asks for another (seconds,
  int or float, positive and finite).
durability: "fenced" (claims and enqueues wait for the disk, finishes do
  not), "full" or "normal" (docs/sqlite.md#durability).
lock_timeout: seconds a write waits for the write lock before
  StorageError(category="busy").

A context manager: `with cplane.ControlStore(path) as store:` closes it at
the end. Every call releases the GIL while it waits for the lock, the disk
or the server. Threads may share one store (they take turns: it is one
connection); each process opens its own (a store inherited through fork
raises InvalidArgument, reason "misuse"). A closed store raises
InvalidArgument (reason "misuse"). Refusals write nothing.)doc");

  store.def(py::init(&open), "path_or_url"_a, "lease_seconds"_a = 900, "durability"_a = "fenced",
            "lock_timeout"_a = 30.0, "create"_a = true, "read_only"_a = false)
      .def("close", &Store::close,
           "Closes the connection (idempotent). Every later call raises InvalidArgument "
           "(reason \"misuse\").")
      .def_property_readonly("closed", &Store::closed, "True once close() was called.")
      .def_property_readonly("url", [](const Store& s) { return redacted_url(s.url()); },
                             "The path or URL it was opened with (a password shown as ***).")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Store& s, py::args) { s.close(); return false; })
      .def("__repr__", [](const Store& s) {
        return "<cplane.ControlStore " + redacted_url(s.url()) + (s.closed() ? " (closed)>" : ">");
      });

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
         const Flag& dry_run, const Flag& redact_payloads, const OptInt& now) {
        ArchiveOptions o;
        o.before = integer(before, "before");
        o.file = py::str(py::module_::import("os").attr("fspath")(to)).cast<std::string>();
        o.project = optional_text(project, "project");
        o.dry_run = truth(dry_run);
        o.redact_payloads = truth(redact_payloads);
        o.now = micros(now);
        const auto r = s.run([&](ControlStore& c) { return archive(c, o); });
        return py::dict("streams"_a = r.streams, "items"_a = r.items, "sessions"_a = r.sessions,
                        "schedules"_a = r.schedules, "events"_a = r.events, "bytes"_a = r.bytes,
                        "redacted"_a = r.redacted, "segment_id"_a = r.segment_id,
                        "digest"_a = r.digest, "dry_run"_a = r.dry_run);
      },
      "store"_a, py::kw_only(), "before"_a, "to"_a, "project"_a = py::none(),
      "dry_run"_a = false, "redact_payloads"_a = false, "now"_a = py::none(),
      "Moves every stream that ended before `before` (microseconds: an item done, failed, "
      "closed or cancelled, a closed session, a removed schedule) into a new segment file "
      "`to`, leaving an anchor per stream (docs/retention.md); redact_payloads: each payload "
      "kept as its digest. A dict with streams, items, sessions, schedules, events, bytes, "
      "redacted, segment_id, digest, dry_run.");
}
