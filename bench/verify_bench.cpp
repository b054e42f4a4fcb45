#include "bench/verify_bench.hpp"

#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

using fleet::seconds_now;

// Each size runs in a child process so that its peak memory is its own.
void verify_scenario(const Options& o, const Emit& emit) {
  for (std::int64_t items : {10'000LL, 100'000LL, 1'000'000LL}) {
    if (items > o.max) break;
    ScratchDir dir;
    const auto db = dir.file("bench.db");
    {
      fill(db, items);
      ControlStore store{db, {.durability = Durability::normal}};
      while (true) {
        auto batch = store.claim_batch("w", 1000);
        if (batch.empty()) break;
        std::vector<ControlStore::Report> reports;
        for (const auto& c : batch) reports.push_back({c.item_id, c.fence, Outcome::done, ""});
        store.finish_batch(reports);
      }
    }
    for (const char* what : {"verify", "rebuild"}) {
      const std::string out = dir.file("result");
      pid_t pid = ::fork();
      if (pid == 0) {
        try {
          const double base = peak_rss_mib();
          ControlStore store{db};
          const double t0 = seconds_now();
          std::int64_t events = 0;
          bool clean = false;
          if (std::string(what) == "verify") {
            clean = verify_ledger(store, [&](std::int64_t d, std::int64_t) { events = d; }).empty();
          } else {
            auto report = rebuild(store);
            events = report.events;
            clean = report.changes.empty();
          }
          const double dt = seconds_now() - t0;
          std::ofstream(out) << JsonObject()
                                    .str("scenario", what)
                                    .num("items", items)
                                    .num("events", events)
                                    .fixed("seconds", dt, 3)
                                    .fixed("events_per_s", events / dt, 0)
                                    .fixed("peak_rss_mib", peak_rss_mib(), 1)
                                    .fixed("rss_before_mib", base, 1)
                                    .boolean("clean", clean)
                                    .done();
          ::_exit(0);
        } catch (const std::exception& e) {
          std::cerr << e.what() << '\n';
          ::_exit(1);
        }
      }
      if (fleet::wait_exit(pid) != 0) throw std::runtime_error(fmt::format("{} failed", what));
      std::ifstream in(out);
      std::string line;
      std::getline(in, line);
      emit(line);
    }
  }
}

}  // namespace cplane::bench
