// Shared by the probe and the benchmarks: forked worker processes that drain
// a queue, and the statistics of what they saw.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cplane::fleet {

// Percentile (0..100) of `samples` (sorted here), nearest rank; 0 when empty.
double percentile(std::vector<double> samples, double p);

// Monotonic seconds.
double seconds_now();

// A pipe every forked child blocks on until the parent releases them all at
// once, so a drain is timed from a common start.
class StartGate {
 public:
  StartGate();
  ~StartGate();
  void wait();      // in a forked child
  void release();   // in the parent, once
  // In a child about to exec: drop the write end so that release() in the
  // parent is seen; the exec'd program then waits with wait_on(read_fd()).
  void prepare_exec();
  int read_fd() const { return fds_[0]; }
  static void wait_on(int fd);

 private:
  int fds_[2];
};

// Waits for `pid`; returns its exit code, or 128 + signal.
int wait_exit(pid_t pid);

// A worker's record, written to a file by the worker and read by the parent.
struct WorkerRecord {
  std::int64_t claims = 0;
  std::int64_t finishes = 0;
  std::int64_t busy_errors = 0;
  std::int64_t refused = 0;
  std::int64_t other_errors = 0;
  std::vector<double> claim_latency;  // seconds, one per claim transaction
  double longest_wait = 0;            // slowest write transaction, seconds
  std::vector<std::string> claimed_ids;
};

// Writes atomically (a temporary file renamed into place).
void write_record(const std::string& path, const WorkerRecord& record);
WorkerRecord read_record(const std::string& path);

}  // namespace cplane::fleet
