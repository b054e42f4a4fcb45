// The `cplane` Python module's shared parts (python/cplane_module.cpp is the
// module, python/bind_*.cpp its bindings by subject, python/convert.cpp the
// conversions): argument types, argument checks and result conversions,
// and the Store every binding runs its call through.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/cplane.hpp>

namespace py = pybind11;
using namespace pybind11::literals;

namespace cplane::python {

// The module's Python classes (python/types.py), looked up once at import.
struct Classes {
  py::object error, fence_rejected, scope_denied, not_found, invalid_argument, storage_error,
      mutation_denied, internal_error, claimed_item, ledger_problem, verdict;
  py::object json_dumps, json_loads;
};
extern Classes* classes;  // set at import; lives as long as the interpreter

// Raises `type(message, reason)` as the Python exception.
[[noreturn]] void raise(const py::object& type, const std::string& message, py::object reason);
// Raises cplane.InvalidArgument.
[[noreturn]] void invalid(const std::string& message, const char* reason = "invalid_input");

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

// ---- checking Python arguments (with the GIL): python/convert.cpp ---------------
// Each raises cplane.InvalidArgument for a value of the wrong type or range.
bool is_int(const py::handle& value);
bool truth(const py::handle& value);
std::string utf8(const py::handle& value, const char* what);
std::string text(const py::handle& value, const char* what);
std::optional<std::string> optional_text(const py::object& value, const char* what);
std::int64_t integer(const py::handle& value, const char* what);
Fence fence_of(const py::handle& value);
std::uint32_t count(const py::handle& value, const char* what);
std::optional<Micros> micros(const py::object& value, const char* what = "now");
Seconds seconds(const py::handle& value, const char* what);
std::optional<Seconds> optional_seconds(const py::object& value, const char* what);
Outcome outcome(const py::handle& value);
std::string payload_text(const py::handle& payload);
py::object parse_json(const std::string& json);
std::vector<std::string> texts(const py::handle& values, const char* what);
std::vector<ItemStatus> statuses(const py::object& values);
Durability durability(const py::handle& value);
ControlStore::Report report(const py::handle& value);
ClaimOptions claim_options(const OptText& actor_id, const OptSeconds& lease_seconds,
                           const OptInt& now);
ControlStore::LifecycleOptions lifecycle(const OptText& actor_id, const OptInt& now);

// ---- converting results (with the GIL): python/convert.cpp ----------------------
py::object claimed(const ClaimedItem& c);
MaybeClaimed maybe_claimed(const std::optional<ClaimedItem>& c);
py::list claimed_list(const std::vector<ClaimedItem>& items);
py::dict item_dict(const Item& r);
py::dict event_dict(const StoredEvent& stored);
py::list event_list(const std::vector<StoredEvent>& events);
py::dict project_dict(const ProjectRow& r);
py::dict session_dict(const SessionInfo& s);
py::dict assignment_dict(const Assignment& a);
py::dict allocation_dict(const Allocation& a);
py::object opt(const std::optional<std::string>& v);
py::dict incident_dict(const IncidentLinkRow& r);
py::dict schedule_dict(const ScheduleRow& r);
py::dict holder_dict(const ControlStore::KeyHolder& h);
py::list holders(const std::vector<ControlStore::KeyHolder>& hs);
py::dict limit_dict(const ControlStore::LimitInfo& l);
py::dict explanation_dict(const ControlStore::Explanation& x);
py::dict counts_dict(const ControlStore::StatusCounts& c);
py::dict bulk_dict(const ControlStore::BulkResult& b);
py::list problem_list(const std::vector<LedgerProblem>& problems);

template <class Reason>
VerdictResult verdict(const Verdict<Reason>& v, const char* kind) {
  if (v) return VerdictResult(classes->verdict(true, py::none(), "", kind));
  return VerdictResult(classes->verdict(false, to_string(v.reason()), v.message(), kind));
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


// Opens a store (ControlStore.__init__).
std::unique_ptr<Store> open(const PathArg& url, const SecondsArg& lease_seconds,
                            const Durability_& durability_, const SecondsArg& lock_timeout,
                            const Flag& create, const Flag& read_only);
// The C++ refusals as the module's exceptions (registered at import).
void translate(std::exception_ptr p);
// fopen, or cplane.InvalidArgument (a file that exists) / StorageError.
std::FILE* open_file(const std::string& path, const char* mode);

// ---- the bindings, by subject ----------------------------------------------------
using StoreClass = py::class_<Store>;
void bind_projects_and_work(StoreClass& store);  // python/bind_work.cpp
void bind_lifecycle(StoreClass& store);          // python/bind_lifecycle.cpp
void bind_sessions(StoreClass& store);           // python/bind_sessions.cpp
void bind_ledger(py::module_& m);                // python/bind_ledger.cpp: module functions

}  // namespace cplane::python
