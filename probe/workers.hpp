// The worker processes of one run of a scenario: each this program again
// (cplane-probe --worker ROLE), started with the run's store and project and
// a record file of its own, reaped as they exit, and SIGKILLed and reaped
// when the Workers go.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "probe/fleet.hpp"
#include "probe/scenario.hpp"

namespace cplane::probe {

class Workers {
 public:
  explicit Workers(const RunConfig& run) : run_(run) {}

  // Worker `id` in `role` (drain, hold, assign or allocate), owner
  // probe-worker-<id>, its record at record_path(id); `slot` >= 0 gives it
  // that byte of flags_path(); `extra` arguments follow.
  pid_t spawn(const std::string& role, int id, fleet::StartGate* gate, double lease,
              double stall_probability = 0, double stall = 0, int slot = -1,
              const std::vector<std::string>& extra = {});

  std::string record_path(int id) const;
  std::string flags_path() const { return run_.scratch + "/flags"; }

  // Reaps the workers that have exited (counting in `failures` those that
  // did not exit 0); true while any is still running.
  bool any_running(int& failures);
  // Waits for every running worker, calling `meanwhile` (by default: a
  // sleep of 5 ms) between looks; false on timeout (`deadline`, as
  // fleet::seconds_now()), when all of them are killed.
  bool wait_all(double deadline, int& failures, const std::function<void()>& meanwhile = {});
  void kill_all();
  // SIGKILLs one running worker and reaps it: its exit code, 128 + SIGKILL
  // unless it had exited already (0 when it drained, else it failed).
  int kill(pid_t pid);

  // The records of workers first .. first + count - 1 that left one.
  std::vector<fleet::WorkerRecord> records(int first, int count) const {
    return read_each(first, count, fleet::read_record);
  }
  // What each of workers first .. first + count - 1 left at its record
  // path (a record, a journal), read by `read`; those that left none are
  // skipped.
  template <class Read>
  std::vector<std::invoke_result_t<Read, const std::string&>> read_each(int first, int count,
                                                                       Read read) const {
    std::vector<std::invoke_result_t<Read, const std::string&>> out;
    for (int i = first; i < first + count; ++i) {
      if (std::filesystem::exists(record_path(i))) out.push_back(read(record_path(i)));
    }
    return out;
  }

 private:
  const RunConfig& run_;
  fleet::Processes processes_;
  std::vector<pid_t> running_;
};

}  // namespace cplane::probe
