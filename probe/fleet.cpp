#include "probe/fleet.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <thread>

namespace cplane::fleet {

void write_to(std::ostream& out, const WorkerRecord& r);

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * samples.size()));
  return samples[std::clamp<std::size_t>(rank, 1, samples.size()) - 1];
}

double seconds_now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void sleep_for(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

StartGate::StartGate() {
  if (::pipe(fds_) != 0) throw std::runtime_error("pipe failed");
}

StartGate::~StartGate() {
  ::close(fds_[0]);
  if (fds_[1] >= 0) ::close(fds_[1]);
}

void StartGate::wait() {
  prepare_exec();
  wait_on(fds_[0]);
}

void StartGate::prepare_exec() {
  if (fds_[1] >= 0) ::close(fds_[1]);
  fds_[1] = -1;
}

void StartGate::wait_on(int fd) {
  char c;
  while (::read(fd, &c, 1) < 0) {
  }
}

void StartGate::release() {
  ::close(fds_[1]);  // every child's read returns 0 at once
  fds_[1] = -1;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

void write_record(const std::string& path, const WorkerRecord& r) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    write_to(out, r);
  }
  std::rename(temporary.c_str(), path.c_str());
}

void write_to(std::ostream& out, const WorkerRecord& r) {
  out << r.claims << ' ' << r.finishes << ' ' << r.busy_errors << ' ' << r.refused << ' '
      << r.other_errors << ' ' << r.longest_wait << ' ' << r.claim_latency.size() << ' '
      << r.claimed_ids.size() << '\n';
  for (double l : r.claim_latency) out << l << '\n';
  for (const auto& id : r.claimed_ids) out << id << '\n';
}

WorkerRecord read_record(const std::string& path) {
  std::ifstream in(path);
  WorkerRecord r;
  std::size_t latencies = 0, ids = 0;
  if (!(in >> r.claims >> r.finishes >> r.busy_errors >> r.refused >> r.other_errors >>
        r.longest_wait >> latencies >> ids)) {
    throw std::runtime_error("worker record " + path + " is missing or truncated");
  }
  r.claim_latency.resize(latencies);
  for (auto& l : r.claim_latency) in >> l;
  r.claimed_ids.resize(ids);
  for (auto& id : r.claimed_ids) in >> id;
  return r;
}

Processes::~Processes() {
  for (const pid_t pid : live_) ::kill(pid, SIGKILL);
  for (const pid_t pid : live_) wait_exit(pid);
}

pid_t Processes::spawn(std::vector<std::string> args, StartGate* gate) {
  if (gate != nullptr) {
    args.push_back("--gate-fd");
    args.push_back(std::to_string(gate->read_fd()));
  }
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (gate != nullptr) gate->prepare_exec();
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  live_.push_back(pid);
  return pid;
}

int Processes::kill(pid_t pid) {
  ::kill(pid, SIGKILL);
  const int code = wait_exit(pid);
  live_.erase(std::remove(live_.begin(), live_.end(), pid), live_.end());
  return code;
}

std::optional<int> Processes::exited(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
  live_.erase(std::remove(live_.begin(), live_.end(), pid), live_.end());
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

Journal::Journal(const std::string& path)
    : path_(path), fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
  if (fd_ < 0) throw std::runtime_error("cannot open journal " + path);
}

Journal::~Journal() { ::close(fd_); }

void Journal::add(const std::string& line) {
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("cannot write journal " + path_);
    written += static_cast<std::size_t>(n);
  }
}

}  // namespace cplane::fleet
