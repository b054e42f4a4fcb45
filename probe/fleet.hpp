// Shared by the probe and the benchmarks: forked worker processes that drain
// a queue, and the statistics of what they saw.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cplane::fleet {

// Percentile (0..100) of `samples` (sorted here), nearest rank; 0 when empty.
double percentile(std::vector<double> samples, double p);

// Monotonic seconds.
double seconds_now();

// Sleeps for `seconds` (fractions included).
void sleep_for(double seconds);

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

// The worker processes a scenario runs: each this program again
// (/proc/self/exe) with `args` (argv[0] first), released by `gate` when one
// is given. Those still alive when it is destroyed are SIGKILLed and reaped.
class Processes {
 public:
  Processes() = default;
  ~Processes();
  Processes(const Processes&) = delete;
  Processes& operator=(const Processes&) = delete;
  pid_t spawn(std::vector<std::string> args, StartGate* gate);
  // SIGKILLs `pid` and reaps it: its exit code, 128 + SIGKILL unless it
  // had exited already.
  int kill(pid_t pid);
  // The exit code of `pid` if it has exited (reaped), else nullopt.
  std::optional<int> exited(pid_t pid);
  bool empty() const { return live_.empty(); }

 private:
  std::vector<pid_t> live_;
};

// A journal a worker appends to, one line per write(2), so that what a
// SIGKILLed worker had written survives whole, up to its last line.
class Journal {
 public:
  explicit Journal(const std::string& path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  void add(const std::string& line);  // `line` ends with '\n'

 private:
  std::string path_;
  int fd_;
};

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
