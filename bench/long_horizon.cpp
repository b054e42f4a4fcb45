#include "bench/long_horizon.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <new>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <cplane/cplane.hpp>

#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

namespace {

// ---- the settings ---------------------------------------------------------------

enum class ProducerMode { fixed, burst };

struct Settings {
  std::string url;  // "" until chosen: a scratch SQLite file
  double rate = 1000;
  ProducerMode mode = ProducerMode::fixed;
  double burst_every_s = 1;
  std::int64_t batch_max = 100;
  int workers = 16;
  std::int64_t payload_bytes = 256;
  double work_ms = 0;
  double sample_every_s = 1;
  double duration_s = 0;
  Durability durability = Durability::fenced;
  bool combine = true;
  double claim_wait_ms = 100;
  int sticky_ms = SqliteOptions{}.sticky_ms;
};

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// A number as people write one: digits, an optional point and fraction,
// an optional exponent, a leading '-' at most. strtod alone also takes
// " 5", "+7", "0x10" and "0x1p3".
bool plain_number(const std::string& s) {
  static const std::regex number(R"(-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?)");
  return std::regex_match(s, number);
}

double env_number(const char* name, double fallback, double low, double high) {
  const auto text = env(name);
  if (!text) return fallback;
  char* end = nullptr;
  const double v = plain_number(*text) ? std::strtod(text->c_str(), &end) : 0;
  if (end == nullptr || *end != '\0' || !std::isfinite(v) || v < low || v > high) {
    throw InvalidArgument(fmt::format("{}={}: expected a number from {} to {}", name, *text, low,
                                      high));
  }
  return v;
}

// A count: digits only (1.5 or 1e3 refused, not cut to 1 or read as 1000).
std::int64_t env_count(const char* name, std::int64_t fallback, std::int64_t low,
                       std::int64_t high) {
  const auto text = env(name);
  if (!text) return fallback;
  static const std::regex digits("[0-9]{1,18}");
  const std::int64_t v = std::regex_match(*text, digits) ? std::stoll(*text) : -1;
  if (v < low || v > high) {
    throw InvalidArgument(
        fmt::format("{}={}: expected a whole number from {} to {}", name, *text, low, high));
  }
  return v;
}

Settings read_settings() {
  Settings s;
  s.url = env("DATABASE_URL").value_or("");
  s.rate = env_number("PRODUCER_RATE", s.rate, 0, 1e7);
  if (const auto mode = env("PRODUCER_MODE")) {
    if (*mode == "fixed") {
      s.mode = ProducerMode::fixed;
    } else if (*mode == "burst") {
      s.mode = ProducerMode::burst;
    } else {
      throw InvalidArgument(fmt::format("PRODUCER_MODE={}: expected fixed or burst", *mode));
    }
  }
  s.burst_every_s = env_number("BURST_EVERY_S", s.burst_every_s, 0.001, 86'400);
  s.batch_max = env_count("PRODUCER_BATCH_MAX", 100, 1, 10'000);
  s.workers = static_cast<int>(env_count("WORKER_COUNT", s.workers, 1, 1024));
  s.payload_bytes = env_count("JOB_PAYLOAD_BYTES", 256, 0, 1 << 19);
  s.work_ms = env_number("JOB_WORK_MS", s.work_ms, 0, 3'600'000);
  s.sample_every_s = env_number("SAMPLE_EVERY_S", s.sample_every_s, 0.01, 86'400);
  s.duration_s = env_number("DURATION_S", s.duration_s, 0, 1e9);
  if (const auto d = env("DURABILITY")) {
    if (*d != "full" && *d != "fenced" && *d != "normal") {
      throw InvalidArgument(fmt::format("DURABILITY={}: expected full, fenced or normal", *d));
    }
    s.durability = parse_durability(*d);
  }
  if (const auto c = env("COMBINE")) {
    if (*c != "on" && *c != "off") {
      throw InvalidArgument(fmt::format("COMBINE={}: expected on or off", *c));
    }
    s.combine = *c == "on";
  }
  s.claim_wait_ms = env_number("CLAIM_WAIT_MS", s.claim_wait_ms, 1, 60'000);
  s.sticky_ms = static_cast<int>(env_count("STICKY_MS", s.sticky_ms, 0, 60'000));  // as --sticky-ms
  return s;
}

std::string_view to_string(ProducerMode m) { return m == ProducerMode::fixed ? "fixed" : "burst"; }

// The URL without its password (user:secret@host -> user@host), and
// without a password=... parameter: the descriptor is printed.
std::string redacted(std::string url) {
  const auto scheme = url.find("://");
  if (scheme != std::string::npos) {
    const auto at = url.find('@', scheme + 3);
    const auto colon = url.find(':', scheme + 3);
    if (at != std::string::npos && colon != std::string::npos && colon < at) {
      url.erase(colon, at - colon);
    }
  }
  for (auto p = url.find("password="); p != std::string::npos; p = url.find("password=", p + 1)) {
    const auto end = url.find('&', p);
    url.replace(p + 9, (end == std::string::npos ? url.size() : end) - p - 9, "***");
  }
  return url;
}

// ---- the latency histogram ------------------------------------------------------

// Microseconds 0..63 exactly, then 32 buckets per power of two up to 2^41
// (about 25 days); larger values fall in the last bucket.
constexpr int kExact = 64, kSub = 32, kTopExponent = 40;
constexpr int kBuckets = kExact + (kTopExponent - 5) * kSub;

int bucket_of(std::uint64_t us) {
  if (us < kExact) return static_cast<int>(us);
  const int e = 63 - std::countl_zero(us);  // 2^e <= us < 2^(e+1), e >= 6
  if (e > kTopExponent) return kBuckets - 1;
  const int sub = static_cast<int>((us >> (e - 5)) & (kSub - 1));
  return kExact + (e - 6) * kSub + sub;
}

// The middle of bucket `i`, microseconds.
double bucket_middle(int i) {
  if (i < kExact) return i;
  const int e = (i - kExact) / kSub + 6, sub = (i - kExact) % kSub;
  const double width = std::ldexp(1.0, e - 5);
  return (kSub + sub) * width + width / 2;
}

using Counts = std::array<std::uint64_t, kBuckets>;

// The value at percentile p (0..100) of `counts` (total `n` > 0), ms.
double percentile_ms(const Counts& counts, std::uint64_t n, double p) {
  const auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(n)));
  std::uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts[static_cast<std::size_t>(i)];
    if (seen >= std::max<std::uint64_t>(rank, 1)) return bucket_middle(i) / 1e3;
  }
  return bucket_middle(kBuckets - 1) / 1e3;
}

// ---- the shared region ----------------------------------------------------------

// One writer per counter (the producer, or one worker): relaxed increments,
// read by the sampler at each tick.
struct WorkerSlot {
  std::atomic<std::uint64_t> claimed{0}, completed{0}, errors{0};
  std::array<std::atomic<std::uint64_t>, kBuckets> latency{};
};

struct SharedHeader {
  std::atomic<int> stop{0};
  std::atomic<std::int64_t> start_ns{0};  // the monotonic start, set before the gate opens
  std::atomic<std::uint64_t> enqueued{0}, producer_errors{0};
};

// A shared anonymous mapping (inherited by every forked child): the header,
// then one WorkerSlot per worker.
class Shared {
 public:
  explicit Shared(int workers)
      : workers_(workers),
        size_(kSlotsAt + sizeof(WorkerSlot) * static_cast<std::size_t>(workers)) {
    base_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base_ == MAP_FAILED) throw std::runtime_error("long-horizon: mmap failed");
    new (base_) SharedHeader;
    for (int w = 0; w < workers; ++w) new (&slot(w)) WorkerSlot;
  }
  ~Shared() { ::munmap(base_, size_); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
  SharedHeader* operator->() const { return static_cast<SharedHeader*>(base_); }
  WorkerSlot& slot(int w) const {
    return static_cast<WorkerSlot*>(static_cast<void*>(static_cast<char*>(base_) + kSlotsAt))[w];
  }
  int workers() const { return workers_; }

 private:
  static constexpr std::size_t kSlotsAt =
      (sizeof(SharedHeader) + alignof(WorkerSlot) - 1) / alignof(WorkerSlot) * alignof(WorkerSlot);
  int workers_;
  std::size_t size_;
  void* base_;
};

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Sleeps until the monotonic moment `ns`; returns early on a signal.
void sleep_until_ns(std::int64_t ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

volatile std::sig_atomic_t stop_signal = 0;
void on_stop_signal(int) { stop_signal = 1; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a signal ends the sampler's sleep
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

// In a child: the sampler's word (children ignore SIGTERM and SIGINT, which
// the sampler handles; a terminal's ^C reaches the whole group).
bool stopping(const Shared& shared) { return shared->stop.load(std::memory_order_relaxed) != 0; }

// ---- the children ---------------------------------------------------------------

// Items owed by `elapsed_s` seconds since the start.
std::int64_t owed(const Settings& s, double elapsed_s) {
  if (s.mode == ProducerMode::fixed) return static_cast<std::int64_t>(s.rate * elapsed_s);
  const double periods = std::floor(elapsed_s / s.burst_every_s) + 1;
  return static_cast<std::int64_t>(s.rate * s.burst_every_s * periods);
}

// {"t":<monotonic ns of the enqueue call>,"pad":"xxx..."}, `bytes` long
// (or the shortest such payload, when `bytes` is less).
std::string payload_at(std::int64_t t_ns, std::int64_t bytes) {
  std::string p = fmt::format(R"({{"t":{},"pad":")", t_ns);
  const auto pad = bytes - static_cast<std::int64_t>(p.size()) - 2;
  if (pad > 0) p.append(static_cast<std::size_t>(pad), 'x');
  p += "\"}";
  return p;
}

std::int64_t payload_time(std::string_view payload) {
  const auto at = payload.find("\"t\":");
  if (at == std::string_view::npos) return 0;
  return std::strtoll(payload.data() + at + 4, nullptr, 10);
}

void produce(const Settings& s, const std::string& project, const Shared& shared,
             ControlStore& store) {
  const std::int64_t start = shared->start_ns.load();
  std::int64_t produced = 0;
  std::vector<std::string> payloads;
  while (!stopping(shared)) {
    const std::int64_t now = monotonic_ns();
    const std::int64_t due = owed(s, static_cast<double>(now - start) / 1e9) - produced;
    if (due <= 0) {
      // Until the next item is owed, at most 5 ms (to see a stop).
      double next_s = 0;
      if (s.rate <= 0) {
        next_s = 1e18;
      } else if (s.mode == ProducerMode::fixed) {
        next_s = static_cast<double>(produced + 1) / s.rate;
      } else {
        next_s = (std::floor(static_cast<double>(now - start) / 1e9 / s.burst_every_s) + 1) *
                 s.burst_every_s;
      }
      const auto next_ns = start + static_cast<std::int64_t>(std::min(next_s, 1e9) * 1e9);
      sleep_until_ns(std::min(next_ns, now + 5'000'000));
      continue;
    }
    const auto n = static_cast<std::size_t>(std::min(due, s.batch_max));
    payloads.clear();
    const std::int64_t t = monotonic_ns();
    for (std::size_t i = 0; i < n; ++i) payloads.push_back(payload_at(t, s.payload_bytes));
    // Counted as the call starts: a worker may claim and finish the item
    // between its commit and the call's return (a combiner's caller
    // returns after the batch it served, and its checkpoint), and
    // queue_depth must never go below zero. A call that fails is taken
    // back, unless its outcome is unknown.
    shared->enqueued.fetch_add(n, std::memory_order_relaxed);
    try {
      if (n == 1) {
        store.enqueue(project, payloads.front());
      } else {
        store.enqueue_batch(project, payloads);
      }
      produced += static_cast<std::int64_t>(n);
    } catch (const StorageError& e) {
      // commit_unknown: the items may be there; counting them keeps the
      // depth from going below zero.
      if (e.category() != StorageError::Category::commit_unknown) {
        shared->enqueued.fetch_sub(n, std::memory_order_relaxed);
      }
      shared->producer_errors.fetch_add(1, std::memory_order_relaxed);
      fleet::sleep_for(0.01);
    }
  }
}

void work(const Settings& s, const std::string& project, const Shared& shared, int w,
          ControlStore& store) {
  WorkerSlot& slot = shared.slot(w);
  const std::string owner = fmt::format("lh-worker-{}", w);
  const ClaimOptions options{.actor = project,
                             .wait = Seconds{s.claim_wait_ms / 1e3}};
  while (!stopping(shared)) {
    try {
      const auto c = store.claim(owner, options);
      if (!c) continue;
      const std::int64_t now = monotonic_ns();
      const std::int64_t t = payload_time(c->payload);
      const auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(0, now - t) / 1000);
      slot.latency[static_cast<std::size_t>(bucket_of(us))].fetch_add(1, std::memory_order_relaxed);
      slot.claimed.fetch_add(1, std::memory_order_relaxed);
      if (s.work_ms > 0) {
        // In slices, to see a stop: an item cut short stays claimed (its
        // lease lapses) and is not counted.
        const std::int64_t until = now + static_cast<std::int64_t>(s.work_ms * 1e6);
        while (monotonic_ns() < until && !stopping(shared)) {
          sleep_until_ns(std::min(until, monotonic_ns() + 50'000'000));
        }
        if (monotonic_ns() < until) break;
      }
      store.finish(c->item_id, c->fence, Outcome::done);
      slot.completed.fetch_add(1, std::memory_order_relaxed);
    } catch (const StorageError&) {
      slot.errors.fetch_add(1, std::memory_order_relaxed);
      fleet::sleep_for(0.01);
    }
  }
}

// ---- the sampler ----------------------------------------------------------------

struct Totals {
  std::uint64_t enqueued = 0, claimed = 0, completed = 0, errors = 0;
  Counts latency{};
  std::int64_t at_ns = 0;
};

Totals read_totals(const Shared& shared) {
  Totals t;
  t.at_ns = monotonic_ns();
  t.enqueued = shared->enqueued.load(std::memory_order_relaxed);
  t.errors = shared->producer_errors.load(std::memory_order_relaxed);
  for (int w = 0; w < shared.workers(); ++w) {
    const WorkerSlot& slot = shared.slot(w);
    t.claimed += slot.claimed.load(std::memory_order_relaxed);
    t.completed += slot.completed.load(std::memory_order_relaxed);
    t.errors += slot.errors.load(std::memory_order_relaxed);
    for (int i = 0; i < kBuckets; ++i) {
      t.latency[static_cast<std::size_t>(i)] +=
          slot.latency[static_cast<std::size_t>(i)].load(std::memory_order_relaxed);
    }
  }
  return t;
}

// `owed_at_ns`: the moment producer_lag is reckoned at (the tick; for the
// final sample, the moment the producer was told to stop).
std::string sample_json(const Settings& s, double t, double late_ms, const Totals& prev,
                        const Totals& cur, std::int64_t start_ns, std::int64_t owed_at_ns,
                        bool final) {
  Counts interval{};
  std::uint64_t n = 0;
  int top = -1;
  for (int i = 0; i < kBuckets; ++i) {
    const auto k = static_cast<std::size_t>(i);
    interval[k] = cur.latency[k] - prev.latency[k];
    n += interval[k];
    if (interval[k] != 0) top = i;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double span = static_cast<double>(cur.at_ns - prev.at_ns) / 1e9;
  const double elapsed = static_cast<double>(owed_at_ns - start_ns) / 1e9;
  const auto lag = std::max<std::int64_t>(
      0, owed(s, elapsed) - static_cast<std::int64_t>(cur.enqueued));
  return JsonObject()
      .str("kind", "sample")
      .fixed("t", t, 3)
      .fixed("interval_s", span, 3)
      .fixed("claim_p50_ms", n ? percentile_ms(interval, n, 50) : nan, 3)
      .fixed("claim_p95_ms", n ? percentile_ms(interval, n, 95) : nan, 3)
      .fixed("claim_p99_ms", n ? percentile_ms(interval, n, 99) : nan, 3)
      .fixed("claim_max_ms", top >= 0 ? bucket_middle(top) / 1e3 : nan, 3)
      .num("claims", static_cast<std::int64_t>(n))
      .fixed("enqueue_rate", static_cast<double>(cur.enqueued - prev.enqueued) / span, 1)
      .fixed("completion_rate", static_cast<double>(cur.completed - prev.completed) / span, 1)
      .num("queue_depth", static_cast<std::int64_t>(cur.enqueued - cur.completed))
      .num("enqueued", static_cast<std::int64_t>(cur.enqueued))
      .num("completed", static_cast<std::int64_t>(cur.completed))
      .num("producer_lag", lag)
      .num("errors", static_cast<std::int64_t>(cur.errors - prev.errors))
      .fixed("late_ms", late_ms, 3)
      .boolean("final", final)
      .done();
}

std::string descriptor_json(const Settings& s, std::string_view backend,
                            const std::string& project) {
  return JsonObject()
      .str("kind", "descriptor")
      .str("system", "cplane")
      .str("protocol", "long-horizon")
      .str("backend", backend)
      .str("durability", cplane::to_string(s.durability))
      .str("database", redacted(s.url))
      .str("project", project)
      .fixed("producer_rate", s.rate, 1)
      .str("producer_mode", to_string(s.mode))
      .fixed("burst_every_s", s.burst_every_s, 3)
      .num("producer_batch_max", s.batch_max)
      .num("worker_count", s.workers)
      .num("job_payload_bytes", s.payload_bytes)
      .fixed("job_work_ms", s.work_ms, 3)
      .fixed("sample_every_s", s.sample_every_s, 3)
      .fixed("duration_s", s.duration_s, 3)
      .boolean("combine", s.combine && backend == "sqlite")
      .fixed("claim_wait_ms", s.claim_wait_ms, 1)
      .num("sticky_ms", s.combine && backend == "sqlite" ? s.sticky_ms : 0)
      .str("claim_latency", "from the producer's enqueue call to the claim's answer")
      .str("histogram", "log-linear: 64 exact microsecond buckets, then 32 per power of two")
      .done();
}

// Forks a child that runs `body` with its own store, after the gate; it
// dies with this process (PR_SET_PDEATHSIG). Writes one byte to ready[1]
// once its store is open, then closes it.
pid_t spawn_child(const Settings& s, const int (&ready)[2], fleet::StartGate& gate,
                  const std::function<void(ControlStore&)>& body) {
  const pid_t parent = ::getpid();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  ::signal(SIGTERM, SIG_IGN);
  ::signal(SIGINT, SIG_IGN);
  ::close(ready[0]);
  int code = 0;
  try {
    ControlStore store{s.url,
                       StoreOptions{.durability = s.durability,
                                    .sqlite = {.combine = s.combine, .sticky_ms = s.sticky_ms}}};
    if (::write(ready[1], "r", 1) != 1) throw std::runtime_error("ready pipe");
    ::close(ready[1]);
    gate.wait();
    body(store);
  } catch (const std::exception& e) {
    std::cerr << "long-horizon child: " << e.what() << '\n';
    code = 1;
  }
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

void long_horizon_scenario(const Options& o, const Emit& emit) {
  Settings s = read_settings();
  std::optional<ScratchDir> scratch;
  if (s.url.empty()) {
    scratch.emplace();
    s.url = o.db ? *o.db : scratch->file("long-horizon.db");
  }
  const std::string_view backend = store_kind(s.url);
  // A project of the run's own, and claims scoped to it: items another run
  // left on the same store are never taken, nor counted.
  const std::string project =
      fmt::format("long-horizon-{}-{}", std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count(),
                  ::getpid());
  {
    ControlStore store{s.url,
                       StoreOptions{.durability = s.durability,
                                    .sqlite = {.combine = s.combine, .sticky_ms = s.sticky_ms}}};
    store.create_project(project, "cplane-bench long-horizon");
    store.grant(project, project);
  }
  emit(descriptor_json(s, backend, project));

  install_stop_handlers();
  Shared shared(s.workers);
  int ready[2];
  if (::pipe(ready) != 0) throw std::runtime_error("pipe failed");
  fleet::StartGate gate;
  std::vector<pid_t> children;
  children.push_back(spawn_child(s, ready, gate, [&](ControlStore& store) {
    produce(s, project, shared, store);
  }));
  for (int w = 0; w < s.workers && children.back() > 0; ++w) {
    children.push_back(spawn_child(s, ready, gate, [&, w](ControlStore& store) {
      work(s, project, shared, w, store);
    }));
  }
  ::close(ready[1]);
  // To the end of the pipe: a child that died before it was ready cannot
  // leave the sampler waiting.
  int prepared = 0;
  for (char c;;) {
    const auto n = ::read(ready[0], &c, 1);
    if (n == 1) {
      ++prepared;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  ::close(ready[0]);
  const bool forked = children.back() > 0;
  if (!forked) children.pop_back();

  const std::int64_t start = monotonic_ns();
  shared->start_ns.store(start);
  gate.release();
  const bool started = forked && prepared == static_cast<int>(children.size());

  std::string failure = started ? "" : "a child did not start";
  Totals prev = read_totals(shared);
  prev.at_ns = start;
  const auto every_ns = static_cast<std::int64_t>(s.sample_every_s * 1e9);
  const std::int64_t end =
      s.duration_s > 0 ? start + static_cast<std::int64_t>(s.duration_s * 1e9)
                       : std::numeric_limits<std::int64_t>::max();
  for (std::int64_t k = 1; failure.empty() && stop_signal == 0;) {
    const std::int64_t tick = start + k * every_ns;
    sleep_until_ns(std::min(tick, end));
    if (stop_signal != 0) break;
    int status = 0;
    if (const pid_t dead = ::waitpid(-1, &status, WNOHANG); dead > 0) {
      children.erase(std::remove(children.begin(), children.end(), dead), children.end());
      failure = fmt::format("child {} exited ({}) before the end", dead, status);
      break;
    }
    const std::int64_t now = monotonic_ns();
    if (now >= tick) {
      const Totals cur = read_totals(shared);
      emit(sample_json(s, static_cast<double>(k) * s.sample_every_s,
                       static_cast<double>(cur.at_ns - tick) / 1e6, prev, cur, start, cur.at_ns,
                       false));
      prev = cur;
      // A sampler that fell behind skips the ticks it missed: still aligned.
      k = std::max(k + 1, (now - start) / every_ns + 1);
    }
    if (now >= end) break;
  }

  // The children stop on the flag (a worker within CLAIM_WAIT_MS, or at
  // once in its work); those still alive after 3 s are killed.
  const std::int64_t stopped_at = monotonic_ns();
  shared->stop.store(1);
  const std::int64_t give_up = monotonic_ns() + 3'000'000'000;
  while (!children.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      children.erase(std::remove(children.begin(), children.end(), pid), children.end());
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failure.empty()) failure = fmt::format("child {} exited ({})", pid, status);
      continue;
    }
    if (pid < 0 && errno == ECHILD) break;
    if (monotonic_ns() > give_up) {
      for (const pid_t c : children) ::kill(c, SIGKILL);
      for (const pid_t c : children) ::waitpid(c, nullptr, 0);
      if (failure.empty()) failure = fmt::format("{} children did not stop within 3 s",
                                                 children.size());
      children.clear();
      break;
    }
    fleet::sleep_for(0.005);
  }
  const Totals last = read_totals(shared);
  std::string final_line = sample_json(s, static_cast<double>(last.at_ns - start) / 1e9, 0, prev,
                                       last, start, stopped_at, true);
  // And the whole run's claim latency, from the cumulative histograms.
  std::uint64_t n = 0;
  for (const auto c : last.latency) n += c;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  JsonObject run;
  run.num("run_claims", static_cast<std::int64_t>(n))
      .fixed("run_claim_p50_ms", n ? percentile_ms(last.latency, n, 50) : nan, 3)
      .fixed("run_claim_p95_ms", n ? percentile_ms(last.latency, n, 95) : nan, 3)
      .fixed("run_claim_p99_ms", n ? percentile_ms(last.latency, n, 99) : nan, 3);
  final_line.pop_back();  // '}'
  emit(final_line + "," + run.done().substr(1));
  if (!failure.empty()) throw std::runtime_error("long-horizon: " + failure);
}

}  // namespace cplane::bench
