#include "bench/drain_bench.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "bench/pg_raw.hpp"
#include "bench/sqlite_raw.hpp"
#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

using fleet::seconds_now;

namespace {

std::string drain_json(const Options& o, const char* scenario, Mode mode, Durability durability,
                       const std::string& lock, std::string_view store, const DrainResult& r) {
  JsonObject out;
  out.str("scenario", scenario)
      .str("store", store)
      .num("workers", static_cast<std::int64_t>(r.workers.size()))
      .str("mode", to_string(mode))
      .str("durability", cplane::to_string(durability))
      .str("lock", lock)
      .boolean("combine", o.combine && store == "sqlite")
      .boolean("coalesce", o.coalesce && store == "sqlite")
      .num("sticky_ms", store == "sqlite" && o.combine ? o.sticky_ms : 0)
      .num("idle_waiters", o.idle_waiters);
  if (mode == Mode::batch) out.num("claim_batch", o.claim_batch);
  drain_figures(out, r);
  return out.done();
}

// Processes that wait in a claim on project "idle", which gets no items,
// for as long as they live (what a fleet of idle agents does beside a busy
// one): each commit they are woken by costs the fleet. Killed when this
// goes.
class IdleWaiters {
 public:
  IdleWaiters(const Options& o, const std::string& db, Durability durability) {
    if (o.idle_waiters == 0) return;
    {
      ControlStore store{db};
      store.create_project("idle", "Waits for work that never comes");
      store.grant("idle", "idle");
    }
    for (int i = 0; i < o.idle_waiters; ++i) {
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        try {
          ControlStore store{db, StoreOptions{.durability = durability,
                                              .sqlite = {.writer_flock = o.lock == "flock",
                                                         .combine = o.combine,
                                                         .sticky_ms = o.sticky_ms,
                                                         .coalesce_wal_writes = o.coalesce}}};
          for (;;) store.claim(fmt::format("idle-{}", i), {.actor = "idle", .wait = Seconds{600}});
        } catch (...) {
          ::_exit(1);
        }
      }
      pids_.push_back(pid);
    }
    // Each has opened the store and begun its wait (its first look and
    // its watch) before the fleet starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    for (const pid_t pid : pids_) {
      if (::waitpid(pid, nullptr, WNOHANG) != 0) throw std::runtime_error("an idle waiter died");
    }
  }
  ~IdleWaiters() {
    for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (const pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  IdleWaiters(const IdleWaiters&) = delete;
  IdleWaiters& operator=(const IdleWaiters&) = delete;

 private:
  std::vector<pid_t> pids_;
};

}  // namespace

// On a fresh SQLite file, or on the store --db names, which is not
// cleared: open items there would be drained too, so there must be none.
std::string drain_once(const Options& o, const char* scenario, int workers, Mode mode,
                       Durability durability) {
  ScratchDir dir;  // the workers' records, and the store unless --db
  const auto db = o.db ? *o.db : dir.file("bench.db");
  if (o.db) {
    const auto counts = ControlStore{db, {.sqlite = {.page_size = o.page_size}}}.status_counts();
    if (counts.ready + counts.claimed != 0) {
      throw std::runtime_error(fmt::format("{} has {} open items: give a drained store",
                                           db, counts.ready + counts.claimed));
    }
  }
  fill(db, o.items, Durability::normal, o.page_size);
  const IdleWaiters idle(o, db, durability);
  auto result = drain_fleet(o, db, workers, mode, durability, o.lock == "flock", dir.file("worker"));
  if (result.items != o.items) {
    throw std::runtime_error(
        fmt::format("drain finished {} of {} items", result.items, o.items));
  }
  return drain_json(o, scenario, mode, durability, o.lock, store_kind(db), result);
}

void drain_scenario(const Options& o, const Emit& emit) {
  emit(drain_once(o, "drain", o.workers, o.mode, o.durability));
}

void drain_matrix_scenario(const Options& o, const Emit& emit) {
  for (auto d : {Durability::normal, Durability::fenced, Durability::full}) {
    for (int w : {1, 2, 4, 16, 64}) emit(drain_once(o, "drain", w, o.mode, d));
  }
}

void latency_scenario(const Options& o, const Emit& emit) {
  emit(drain_once(o, "latency", o.workers, Mode::plain, o.durability));
}

// SQLite's baseline: the same statements as plain sqlite3 calls, one
// transaction each, on a fresh file, at --durability's levels.
void sqlite_raw_scenario(const Options& o, const Emit& emit) {
  ScratchDir dir;
  const bool full_claims = o.durability != Durability::normal;
  const bool full_finishes = o.durability == Durability::full;
  const SqliteRawDrain raw = drain_sqlite_raw(dir.file("raw.db"), o.workers, o.items, full_claims,
                                              full_finishes, dir.file("worker"));
  const DrainResult r{raw.seconds, raw.items, raw.workers};
  JsonObject out;
  out.str("scenario", "raw")
      .str("store", "sqlite")
      .num("workers", static_cast<std::int64_t>(r.workers.size()))
      .str("durability", cplane::to_string(o.durability))
      .str("lock", "flock");
  drain_figures(out, r);
  emit(out.done());
}

// The raw baseline: each claim variant asked for (default both) drains a
// fresh queue of --items with --workers processes.
void pg_raw_scenario(const Options& o, const Emit& emit) {
  std::vector<RawClaim> claims = {RawClaim::one_statement, RawClaim::multi_statement};
  if (o.claim) claims = {*o.claim};
  for (RawClaim claim : claims) {
    ScratchDir dir;
    const RawDrain raw = drain_raw(*o.db, o.workers, o.items, claim, dir.file("worker"));
    const DrainResult r{raw.seconds, raw.items, raw.workers};
    JsonObject out;
    out.str("scenario", "pg-raw")
        .str("store", "postgresql")
        .num("workers", static_cast<std::int64_t>(r.workers.size()))
        .str("claim", to_string(claim))
        .str("synchronous_commit", raw.synchronous_commit);
    drain_figures(out, r);
    emit(out.done());
  }
}

}  // namespace cplane::bench
