// cplane: a durable control plane for a fleet of workers that share work.
//
//   #include <cplane/cplane.hpp>
//   cplane::ControlStore store{"control.db", {.lease = std::chrono::seconds{900}}};
//   store.create_project("alpha", "Project Alpha", "open");
//   auto id = store.enqueue("alpha", R"({"task": "summarise the report"})");
//   auto claim = store.claim("worker-1");   // std::optional<ClaimedItem>
//   store.finish(claim->item_id, claim->fence, cplane::Outcome::done);
//   assert(cplane::verify_ledger(store).empty());
//
// The public headers, all under <cplane/...>: store (ControlStore and its
// options), sqlite_options, errors, events, rows, verdict, ledger (problems
// and rebuild reports), verify, metrics (Prometheus, activity), version. Nothing else is installed, and none
// of them names the implementation behind ControlStore (a test checks it).
#pragma once

#include <cplane/errors.hpp>
#include <cplane/events.hpp>
#include <cplane/ledger.hpp>
#include <cplane/metrics.hpp>
#include <cplane/rows.hpp>
#include <cplane/sqlite_options.hpp>
#include <cplane/store.hpp>
#include <cplane/verdict.hpp>
#include <cplane/verify.hpp>
#include <cplane/version.hpp>
