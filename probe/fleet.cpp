#include "probe/fleet.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <stdexcept>

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

}  // namespace cplane::fleet
