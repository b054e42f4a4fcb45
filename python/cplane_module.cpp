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

#include "python/module.hpp"
#include "python_types.hpp"  // kPythonTypes: python/types.py, embedded by CMake

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

  bind_projects_and_work(store);
  bind_lifecycle(store);
  bind_sessions(store);
  bind_ledger(m);
}
