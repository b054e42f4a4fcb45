// A fleet of forked worker processes for the drains of cplane-bench.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "probe/fleet.hpp"

namespace cplane::bench {

struct FleetRun {
  double seconds = 0;  // from the start gate to the last worker's exit
  std::vector<fleet::WorkerRecord> records;
  std::int64_t claims = 0, finishes = 0, refused = 0;  // summed over the records
};

// Forks `workers` processes. Each runs prepare(w) (opens its connection)
// and gets its job, says it is ready, waits at the start gate, runs the job
// and writes the record it returns to `record_prefix`.<w>. The gate opens
// (and the clock starts) once every worker is ready. Throws
// std::runtime_error when a fork or a worker fails.
inline FleetRun run_fleet(
    int workers, const std::string& record_prefix,
    const std::function<std::function<fleet::WorkerRecord()>(int)>& prepare) {
  // Each worker writes one byte here once prepared, then closes its end:
  // the parent reads to the end of the pipe, so a worker that died before
  // it was ready cannot leave it waiting.
  int ready[2];
  if (::pipe(ready) != 0) throw std::runtime_error("pipe failed");
  fleet::StartGate gate;
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int w = 0; w < workers; ++w) {
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::close(ready[0]);
      int code = 0;
      try {
        auto job = prepare(w);
        if (::write(ready[1], "r", 1) != 1) throw std::runtime_error("ready pipe");
        ::close(ready[1]);
        gate.wait();
        fleet::write_record(fmt::format("{}.{}", record_prefix, w), job());
      } catch (const std::exception& e) {
        std::cerr << "worker " << w << ": " << e.what() << '\n';
        code = 1;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  ::close(ready[1]);
  int prepared = 0;
  for (char c; ::read(ready[0], &c, 1) == 1;) ++prepared;
  ::close(ready[0]);
  FleetRun run;
  const double t0 = fleet::seconds_now();
  gate.release();
  bool ok = true;
  for (pid_t pid : pids) ok = fleet::wait_exit(pid) == 0 && ok;
  run.seconds = fleet::seconds_now() - t0;
  if (static_cast<int>(pids.size()) != workers) throw std::runtime_error("fork failed");
  if (prepared != workers || !ok) throw std::runtime_error("a worker failed");
  for (int w = 0; w < workers; ++w) {
    run.records.push_back(fleet::read_record(fmt::format("{}.{}", record_prefix, w)));
    run.claims += run.records.back().claims;
    run.finishes += run.records.back().finishes;
    run.refused += run.records.back().refused;
  }
  return run;
}

}  // namespace cplane::bench
