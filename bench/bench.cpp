// cplane-bench: how fast the engine is and how its cost grows. One scenario
// per run; each result is one JSON object per line on stdout, so a script can
// compare runs. See README.md ("Benchmarks") for the table and the command.
// This file is the command line and the dispatch; each scenario (or family)
// lives in a file of its own (bench/*_bench.hpp), sharing bench/common.hpp.
//
//   cplane-bench --scenario enqueue   [--items N] [--batch B]
//   cplane-bench --scenario single    [--items N] [--mode plain|batch|next]
//   cplane-bench --scenario drain     [--workers W] [--items N] [--mode M] [--durability D]
//                                     [--db URL]   (drain, drain-matrix, latency: the store
//                                     to drain, not cleared; default a fresh SQLite file)
//   cplane-bench --scenario drain-matrix [--items N] [--mode M]   (1,2,4,16,64 x normal,fenced,full)
//   cplane-bench --scenario latency   [--workers 16] [--items N]
//   cplane-bench --scenario depth     [--max-depth 1000000]
//   cplane-bench --scenario scheduled [--max-depth 200000] [--items 2000]
//                                     (the full run: --max-depth 1000000)
//   cplane-bench --scenario verify    [--max-items 1000000]
//   cplane-bench --scenario archive   [--items 1000000] [--batch 100000]  (an archive every batch)
//   cplane-bench --scenario assign-gate [--items 2000] [--durability D]
//   cplane-bench --scenario allocate  [--items 2000] [--max-depth 1000000] [--durability D]
//   cplane-bench --scenario keys      [--workers 16] [--items 10000] [--max-depth 100000]
//                                     (keyed drain vs plain; claims past a full key)
//   cplane-bench --scenario fair      [--workers 16] [--max-depth 100000] [--items 100]
//                                     (B's wait behind A's items, fair on and off)
//   cplane-bench --scenario pg-raw --db postgresql://... [--workers 16] [--items N]
//   cplane-bench --scenario console-load [--workers 16] [--items N] [--rps R] [--cplane PATH]
//                [--claim one-statement|multi-statement]   (default both; see pg_raw.hpp)
//   DATABASE_URL=... PRODUCER_RATE=... cplane-bench --scenario long-horizon
//                                     (configured by the environment: long_horizon.hpp)
//   cplane-bench --plot DIR           (drain-matrix + depth, as PNG charts; needs gnuplot)
#include <cstdlib>
#include <iostream>
#include <string>

#include <kj/main.h>

#include <cplane/cplane.hpp>

#include "bench/allocate_bench.hpp"
#include "bench/common.hpp"
#include "bench/console_load.hpp"
#include "bench/depth_bench.hpp"
#include "bench/drain_bench.hpp"
#include "bench/enqueue_bench.hpp"
#include "bench/flow_bench.hpp"
#include "bench/long_horizon.hpp"
#include "bench/metrics_bench.hpp"
#include "bench/plot.hpp"
#include "bench/pg_raw.hpp"
#include "bench/verify_bench.hpp"
#include "bench/archive_bench.hpp"
#include "bench/view_bench.hpp"

namespace cplane::bench {
namespace {

class Bench {
 public:
  explicit Bench(kj::ProcessContext& context) : context_(context) {}

  kj::MainFunc main() {
    return kj::MainBuilder(context_, "cplane-bench 0.1.0",
                           "Benchmarks of cplane on SQLite (drains also on PostgreSQL), and "
                           "of raw libpq statements as their baseline; one JSON object per "
                           "result line.")
        .addOptionWithArg({"scenario"}, KJ_BIND_METHOD(*this, set_scenario), "<name>",
                          "enqueue, single, drain, drain-matrix, latency, depth, scheduled, "
                          "verify, assign-gate, allocate, keys, fair, list, metrics (--items: events, default "
                          "10^6), console-load, long-horizon (configured by the environment: "
                          "docs/benchmarks.md), raw, pg-raw")
        .addOptionWithArg({"db"}, KJ_BIND_METHOD(*this, set_db), "<url>",
                          "drain, drain-matrix, latency: the store to drain (a path or "
                          "postgresql://...; must hold no open items; not cleared); "
                          "pg-raw: the server (required)")
        .addOptionWithArg({"claim"}, KJ_BIND_METHOD(*this, set_claim),
                          "<one-statement|multi-statement>",
                          "pg-raw: how a claim and a finish reach the server (default both)")
        .addOptionWithArg({"items"}, KJ_BIND_METHOD(*this, set_items), "<n>",
                          "items to drain (default 10000; assign-gate and scheduled 2000; "
                          "allocate: calls per depth, 2000; fair: project B's, 100)")
        .addOptionWithArg({"workers"}, KJ_BIND_METHOD(*this, set_workers), "<n>",
                          "worker processes (default 16)")
        .addOptionWithArg({"batch"}, KJ_BIND_METHOD(*this, set_batch), "<n>",
                          "enqueue batch size (default 1)")
        .addOptionWithArg({"claim-batch"}, KJ_BIND_METHOD(*this, set_claim_batch), "<n>",
                          "--mode batch: items per claim_batch and finish_batch (default 8)")
        .addOptionWithArg({"mode"}, KJ_BIND_METHOD(*this, set_mode), "<plain|batch|next>",
                          "plain: claim + finish; batch: 8 per transaction; next: "
                          "finish_and_claim")
        .addOptionWithArg({"durability"}, KJ_BIND_METHOD(*this, set_durability),
                          "<full|fenced|normal>", "default normal")
        .addOptionWithArg({"combine"}, KJ_BIND_METHOD(*this, set_combine), "<on|off>",
                          "SQLite's group commit: a process holding the write lock runs the "
                          "commands other processes queued meanwhile in one transaction "
                          "(default on); off: one transaction per command")
        .addOptionWithArg({"coalesce"}, KJ_BIND_METHOD(*this, set_coalesce), "<on|off>",
                          "drains on SQLite: hand each WAL commit to the kernel in one write "
                          "(default on); off: SQLite's own writes, for the A/B")
        .addOptionWithArg({"sticky-ms"}, KJ_BIND_METHOD(*this, set_sticky), "<ms>",
                          "drains on SQLite with group commit: how long a combiner goes on "
                          "serving others after its own command (default 10; 0: hand over "
                          "after each batch)")
        .addOptionWithArg({"page-size"}, KJ_BIND_METHOD(*this, set_page_size), "<bytes>",
                          "drains on SQLite: the page size of the store the run creates "
                          "(default SQLite's, 4096)")
        .addOptionWithArg({"idle-waiters"}, KJ_BIND_METHOD(*this, set_idle), "<n>",
                          "drain: this many more processes wait in a claim (--wait) on a "
                          "project with no items while the fleet drains (default 0)")
        .addOptionWithArg({"lock"}, KJ_BIND_METHOD(*this, set_lock), "<flock|busy>",
                          "how writers wait: a fair flock queue (default) or SQLite's "
                          "busy_timeout alone")
        .addOptionWithArg({"max-depth"}, KJ_BIND_METHOD(*this, set_max), "<n>",
                          "depth and allocate scenarios: deepest queue (default 1000000); "
                          "scheduled: items scheduled for later (default 200000); keys: items "
                          "behind the full key (default 100000); fair: project A's items "
                          "(default 100000)")
        .addOptionWithArg({"max-items"}, KJ_BIND_METHOD(*this, set_max), "<n>",
                          "verify scenario: largest store (default 1000000)")
        .addOptionWithArg({"rps"}, KJ_BIND_METHOD(*this, set_rps), "<n>",
                          "console-load: the console's client asks at most this many pages a "
                          "second, one at a time (default 20)")
        .addOptionWithArg({"cplane"}, KJ_BIND_METHOD(*this, set_cplane), "<path>",
                          "console-load: the cplane binary that serves (default: the one "
                          "beside cplane-bench, else cplane on PATH)")
        .addOptionWithArg({"plot"}, KJ_BIND_METHOD(*this, set_plot), "<dir>",
                          "run drain-matrix and depth, write PNG charts into DIR")
        .callAfterParsing(KJ_BIND_METHOD(*this, run))
        .build();
  }

 private:
  using Validity = kj::MainBuilder::Validity;
  Validity set_scenario(kj::StringPtr s) {
    o_.scenario = s.cStr();
    return true;
  }
  Validity set_items(kj::StringPtr s) {
    o_.items_given = true;
    return positive(s, o_.items);
  }
  Validity set_workers(kj::StringPtr s) { return positive(s, o_.workers); }
  Validity set_rps(kj::StringPtr s) { return positive(s, o_.rps); }
  Validity set_cplane(kj::StringPtr s) {
    o_.cplane = s.cStr();
    return true;
  }
  Validity set_batch(kj::StringPtr s) { return positive(s, o_.batch); }
  Validity set_claim_batch(kj::StringPtr s) {
    std::int64_t n = 0;
    auto ok = positive(s, n);
    o_.claim_batch = static_cast<std::size_t>(n);
    return ok;
  }
  Validity set_max(kj::StringPtr s) {
    o_.max_given = true;
    return positive(s, o_.max);
  }
  Validity set_mode(kj::StringPtr s) {
    try {
      o_.mode = parse_mode(s.cStr());
    } catch (const std::exception& e) {
      return kj::str(e.what());
    }
    return true;
  }
  Validity set_coalesce(kj::StringPtr s) {
    if (s == "on") o_.coalesce = true;
    else if (s == "off") o_.coalesce = false;
    else return "expected on or off";
    return true;
  }
  // A whole number in [0, max], digits only, into `out`.
  static Validity set_int(kj::StringPtr s, long max, const char* expected, int& out) {
    char* end = nullptr;
    const long v = std::strtol(s.cStr(), &end, 10);
    if (s.size() == 0 || *end != '\0' || v < 0 || v > max) return expected;
    out = static_cast<int>(v);
    return true;
  }
  Validity set_sticky(kj::StringPtr s) { return set_int(s, 60000, "expected 0..60000 ms", o_.sticky_ms); }
  Validity set_page_size(kj::StringPtr s) {
    const char* expected = "expected a power of two from 512 to 65536";
    char* end = nullptr;
    const long v = std::strtol(s.cStr(), &end, 10);
    if (s.size() == 0 || *end != '\0' || v < 512 || v > 65536 || (v & (v - 1)) != 0) return expected;
    o_.page_size = static_cast<int>(v);
    return true;
  }
  Validity set_idle(kj::StringPtr s) { return set_int(s, 1000, "expected 0..1000", o_.idle_waiters); }
  Validity set_combine(kj::StringPtr s) {
    if (s == "on") o_.combine = true;
    else if (s == "off") o_.combine = false;
    else return "expected on or off";
    return true;
  }
  Validity set_durability(kj::StringPtr s) {
    try {
      o_.durability = parse_durability(s.cStr());
    } catch (const std::exception& e) {
      return kj::str(e.what());
    }
    return true;
  }
  Validity set_lock(kj::StringPtr s) {
    o_.lock = s.cStr();
    if (o_.lock != "flock" && o_.lock != "busy") return "--lock is flock or busy";
    return true;
  }
  Validity set_db(kj::StringPtr s) {
    o_.db = s.cStr();
    return true;
  }
  Validity set_claim(kj::StringPtr s) {
    try {
      o_.claim = parse_raw_claim(s.cStr());
    } catch (const std::exception& e) {
      return kj::str(e.what());
    }
    return true;
  }
  Validity set_plot(kj::StringPtr s) {
    o_.plot = s.cStr();
    return true;
  }
  template <class Int>
  Validity positive(kj::StringPtr s, Int& out) {
    char* end = nullptr;
    const long long v = std::strtoll(s.cStr(), &end, 10);
    if (end == s.cStr() || *end != '\0' || v <= 0) return "expected a positive integer";
    out = static_cast<Int>(v);
    return true;
  }

  Validity run() {
    const Emit emit = [](const std::string& line) { std::cout << line << std::endl; };
    const Options& o = o_;
    const std::string& s = o.scenario;
    try {
      if (o.plot) {
        plot_charts(o, *o.plot, emit);
      } else if (s == "enqueue") {
        enqueue_scenario(o, emit);
      } else if (s == "single") {
        single_scenario(o, emit);
      } else if (s == "drain") {
        drain_scenario(o, emit);
      } else if (s == "drain-matrix") {
        drain_matrix_scenario(o, emit);
      } else if (s == "latency") {
        latency_scenario(o, emit);
      } else if (s == "depth") {
        depth_scenario(o, emit);
      } else if (s == "scheduled") {
        scheduled_scenario(o, emit);
      } else if (s == "verify") {
        verify_scenario(o, emit);
      } else if (s == "archive") {
        archive_scenario(o, emit);
      } else if (s == "assign-gate") {
        assign_gate_scenario(o, emit);
      } else if (s == "allocate") {
        allocate_scenario(o, emit);
      } else if (s == "keys") {
        keys_scenario(o, emit);
      } else if (s == "fair") {
        fair_scenario(o, emit);
      } else if (s == "list") {
        ScratchDir dir;
        list_scenario(dir.file("."), o.max_given ? o.max : 200'000, o.items_given ? o.items : 1'000,
                      o.durability, emit);
      } else if (s == "metrics") {
        ScratchDir dir;
        emit(bench_metrics(o.db ? *o.db : dir.file("metrics.db"), o.items_given ? o.items : 1'000'000));
      } else if (s == "console-load") {
        console_load_scenario(o, emit);
      } else if (s == "long-horizon") {
        long_horizon_scenario(o, emit);
      } else if (s == "raw") {
        sqlite_raw_scenario(o, emit);
      } else if (s == "pg-raw") {
        if (!o.db || store_kind(*o.db) != "postgresql") return "pg-raw needs --db postgresql://...";
        pg_raw_scenario(o, emit);
      } else {
        return "--scenario is one of enqueue, single, drain, drain-matrix, latency, depth, "
               "scheduled, verify, archive, assign-gate, allocate, keys, fair, list, metrics, console-load, "
               "long-horizon, raw, pg-raw (or "
               "use --plot DIR)";
      }
    } catch (const std::exception& e) {
      std::cerr << "cplane-bench: " << e.what() << '\n';
      std::exit(1);
    }
    return true;
  }

  kj::ProcessContext& context_;
  Options o_;
};

}  // namespace
}  // namespace cplane::bench

int main(int argc, char** argv) {
  kj::TopLevelProcessContext context(argv[0]);
  cplane::bench::Bench bench(context);
  return kj::runMainAndExit(context, bench.main(), argc, argv);
}
