#include "probe/workers.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace cplane::probe {

pid_t Workers::spawn(const std::string& role, int id, fleet::StartGate* gate, double lease,
                     double stall_probability, double stall, int slot,
                     const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "cplane-probe", "--worker", role, "--store", run_.store, "--project", run_.project,
      "--owner", fmt::format("probe-worker-{}", id), "--record", record_path(id),
      "--lease", fmt::format("{}", lease), "--stall-probability",
      fmt::format("{}", stall_probability), "--stall", fmt::format("{}", stall),
      "--durability", std::string(to_string(run_.durability))};
  if (slot >= 0) {
    args.insert(args.end(), {"--flags", flags_path(), "--slot", std::to_string(slot)});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = processes_.spawn(std::move(args), gate);
  running_.push_back(pid);
  return pid;
}

std::string Workers::record_path(int id) const {
  return fmt::format("{}/worker-{}", run_.scratch, id);
}

bool Workers::any_running(int& failures) {
  for (auto it = running_.begin(); it != running_.end();) {
    if (const auto code = processes_.exited(*it)) {
      if (*code != 0) ++failures;
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  return !running_.empty();
}

bool Workers::wait_all(double deadline, int& failures, const std::function<void()>& meanwhile) {
  while (any_running(failures)) {
    if (fleet::seconds_now() > deadline) {
      kill_all();
      return false;
    }
    if (meanwhile) {
      meanwhile();
    } else {
      fleet::sleep_for(0.005);
    }
  }
  return true;
}

void Workers::kill_all() {
  for (const pid_t pid : running_) processes_.kill(pid);
  running_.clear();
}

int Workers::kill(pid_t pid) {
  running_.erase(std::remove(running_.begin(), running_.end(), pid), running_.end());
  return processes_.kill(pid);
}

}  // namespace cplane::probe
