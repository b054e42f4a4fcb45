#include "probe/crash_writes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <stdexcept>

#include <cplane/cplane.hpp>

#include "probe/combine_watch.hpp"
#include "probe/drain.hpp"
#include "probe/end_checks.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::crash {

using fleet::seconds_now;
using fleet::sleep_for;

ScenarioResult run(const RunConfig& run) {
  ScenarioResult out;
  const double lease = 0.5;
  const int max_kills = 40;
  const auto ids = drain::setup(run, run.items);
  Workers processes(run);
  {
    std::ofstream flags(processes.flags_path(), std::ios::binary);
    flags << std::string(4096, '\0');
  }
  int fd = ::open(processes.flags_path().c_str(), O_RDWR);
  auto* flags = static_cast<volatile char*>(
      ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ::close(fd);
  if (flags == MAP_FAILED) throw std::runtime_error("mmap failed");

  std::vector<std::pair<pid_t, int>> slots;  // live worker per slot, with its id
  int next_id = 0;
  for (int w = 0; w < run.workers; ++w) {
    slots.emplace_back(processes.spawn("drain", next_id, nullptr, lease, 0, 0, w), next_id);
    ++next_id;
  }
  std::mt19937 rng(std::random_device{}());
  int kills = 0, kills_inside = 0, failures = 0;
  CombinerKills combiner_kills;
  ControlStore store{run.store};
  const storage::CombineArea* area = combine_area(store);
  while (seconds_now() < run.deadline) {
    const auto counts = store.status_counts(run.project);
    if (counts.ready == 0 && counts.claimed == 0) break;
    sleep_for(std::uniform_real_distribution<double>(0.005, 0.04)(rng));
    if (kills >= max_kills) continue;
    Combiner combiner;
    if (area != nullptr && kills % 2 == 1) {
      const auto aim = kills % 4 == 1 ? BatchPhase::running : BatchPhase::staged;
      combiner = await_combiner(*area, slots, aim, 0.02);
    }
    int slot = combiner.slot;
    if (slot < 0) {
      slot = std::uniform_int_distribution<int>(0, run.workers - 1)(rng);
      // Prefer a moment inside a command: wait briefly for the flag.
      for (int spin = 0; spin < 2000 && flags[slot] == 0; ++spin) ::usleep(5);
    }
    const bool inside = flags[slot] != 0;
    const int code = processes.kill(slots[slot].first);
    flags[slot] = 0;
    if (code == 128 + SIGKILL) {
      ++kills;
      if (inside) ++kills_inside;
      if (combiner.slot >= 0) combiner_kills.add(combiner.phase);
    } else if (code != 0) {
      ++failures;  // it had failed on its own before the kill
    }
    slots[slot] = {processes.spawn("drain", next_id, nullptr, lease, 0, 0, slot), next_id};
    ++next_id;
  }
  const bool finished = processes.wait_all(run.deadline, failures);
  ::munmap(const_cast<char*>(flags), 4096);
  out.count("workers", run.workers);
  out.count("items", run.items);
  out.count("kills", kills);
  out.count("kills_inside_a_command", kills_inside);
  if (area != nullptr) combiner_kills.print(out);
  out.count("worker_failures", failures);
  out.check(finished && failures == 0, "the survivors drained the queue");
  out.check(kills_inside > 0, "some kills landed inside a write command");
  if (area != nullptr) {
    out.check(combiner_kills.total > 0, "some kills landed on the combiner");
  }
  check_ledger(out, run.store, ids);
  return out;
}

}  // namespace cplane::probe::crash
