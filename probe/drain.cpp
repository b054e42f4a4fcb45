#include "probe/drain.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

namespace cplane::probe::drain {
namespace {

using fleet::seconds_now;
using fleet::sleep_for;

class CommandFlag {
 public:
  CommandFlag(const std::string& path, int slot) {
    if (path.empty() || slot < 0) return;
    int fd = ::open(path.c_str(), O_RDWR);
    if (fd < 0) return;
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p != MAP_FAILED) byte_ = static_cast<volatile char*>(p) + slot;
  }
  void set(bool inside) {
    if (byte_ != nullptr) *byte_ = inside ? 1 : 0;
  }

 private:
  volatile char* byte_ = nullptr;
};

}  // namespace

int run_worker(const WorkerConfig& c) {
  ControlStore store{c.store, {.durability = c.durability}};
  if (c.gate_fd >= 0) fleet::StartGate::wait_on(c.gate_fd);
  CommandFlag flag(c.flags, c.slot);
  fleet::WorkerRecord r;
  const ClaimOptions options{c.project, Seconds{c.lease}, {}};
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid()));
  std::uniform_real_distribution<double> uniform(0, 1);

  if (c.hold) {
    auto claimed = store.claim(c.owner, options);
    if (!claimed) return 3;
    r.claims = 1;
    r.claimed_ids.push_back(fmt::format("{}:{}", claimed->item_id, claimed->fence));
    fleet::write_record(c.record, r);
    while (true) ::pause();  // hold the item until killed
  }

  while (true) {
    std::optional<ClaimedItem> claimed;
    try {
      flag.set(true);
      const double t0 = seconds_now();
      claimed = store.claim(c.owner, options);
      const double dt = seconds_now() - t0;
      flag.set(false);
      r.claim_latency.push_back(dt);
      r.longest_wait = std::max(r.longest_wait, dt);
    } catch (const StorageError& e) {
      flag.set(false);
      if (e.category() != StorageError::Category::busy) throw;
      ++r.busy_errors;
      continue;
    }
    if (!claimed) {
      // Nothing available now; stop only when nothing is left in flight
      // (a stalled or dead holder's lease may still lapse).
      const auto counts = store.status_counts(c.project);
      if (counts.ready == 0 && counts.claimed == 0) break;
      sleep_for(std::min(0.05, c.lease / 4));
      continue;
    }
    ++r.claims;
    r.claimed_ids.push_back(claimed->item_id);
    if (c.stall_probability > 0 && uniform(rng) < c.stall_probability) sleep_for(c.stall);
    try {
      flag.set(true);
      const double t0 = seconds_now();
      store.finish(claimed->item_id, claimed->fence, Outcome::done);
      r.longest_wait = std::max(r.longest_wait, seconds_now() - t0);
      flag.set(false);
      ++r.finishes;
    } catch (const FenceRejected&) {
      flag.set(false);
      ++r.refused;  // a stale report: someone reclaimed the item
    } catch (const StorageError& e) {
      flag.set(false);
      if (e.category() != StorageError::Category::busy) throw;
      ++r.busy_errors;
    }
  }
  fleet::write_record(c.record, r);
  return 0;
}

std::vector<std::string> setup(const RunConfig& run, std::int64_t items) {
  ControlStore store{run.store};
  store.create_project(run.project, "cplane probe " + run.scenario);
  store.grant(run.project, run.project);
  return enqueue_more(store, run.project, 0, items);
}

std::vector<std::string> enqueue_more(ControlStore& store, const std::string& project,
                                      std::int64_t first, std::int64_t count) {
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  const std::int64_t items = first + count;
  for (std::int64_t i = first; i < items;) {
    const auto n = std::min<std::int64_t>(1000, items - i);
    payloads.clear();
    for (std::int64_t k = 0; k < n; ++k) payloads.push_back(fmt::format(R"({{"n":{}}})", i + k));
    auto batch = store.enqueue_batch(project, payloads);
    ids.insert(ids.end(), batch.begin(), batch.end());
    i += n;
  }
  return ids;
}

Stats worker_stats(ScenarioResult& out, const std::vector<fleet::WorkerRecord>& rs,
                   std::int64_t items, bool reclaims_expected) {
  std::int64_t claimed = 0, busy = 0, refused = 0, min_claims = -1, max_claims = 0;
  std::set<std::string> distinct;
  std::vector<double> latency;
  double longest = 0;
  for (const auto& r : rs) {
    claimed += r.claims;
    busy += r.busy_errors;
    refused += r.refused;
    min_claims = min_claims < 0 ? r.claims : std::min(min_claims, r.claims);
    max_claims = std::max(max_claims, r.claims);
    distinct.insert(r.claimed_ids.begin(), r.claimed_ids.end());
    latency.insert(latency.end(), r.claim_latency.begin(), r.claim_latency.end());
    longest = std::max(longest, r.longest_wait);
  }
  const auto distinct_count = static_cast<std::int64_t>(distinct.size());
  out.count("items", items);
  out.count("claimed", claimed);
  out.count("distinct", distinct_count);
  out.count(reclaims_expected ? "repeat_claims" : "duplicate_claims", claimed - distinct_count);
  out.count("busy_errors", busy);
  out.count("stale_reports_refused", refused);
  out.count("worker_min_claims", std::max<std::int64_t>(min_claims, 0));
  out.count("worker_max_claims", max_claims);
  out.fixed("claim_p50_ms", 1e3 * fleet::percentile(latency, 50));
  out.fixed("claim_p99_ms", 1e3 * fleet::percentile(latency, 99));
  out.fixed("claim_max_ms", 1e3 * fleet::percentile(latency, 100));
  out.fixed("longest_wait_ms", 1e3 * longest);
  out.check(busy == 0, "no busy or 'database is locked' error reached a worker");
  return {claimed, distinct_count, refused};
}

}  // namespace cplane::probe::drain
