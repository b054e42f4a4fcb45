#include "events/clock.hpp"

#include <chrono>
#include <random>

#include <pthread.h>
#include <unistd.h>

#include <fmt/format.h>

namespace cplane {

Micros now_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

std::mt19937_64 seeded() {
  std::random_device device;
  std::seed_seq seed{device(), device(), device(), device()};
  return std::mt19937_64(seed);
}

pid_t cached_pid = 0;

void refresh_pid() noexcept { cached_pid = ::getpid(); }

}  // namespace

pid_t current_pid() noexcept {
  static const bool registered = [] {
    refresh_pid();
    ::pthread_atfork(nullptr, nullptr, refresh_pid);
    return true;
  }();
  (void)registered;
  return cached_pid;
}

std::string new_item_id(Micros now) {
  // Reseeded after fork: a child must not repeat its parent's stream.
  thread_local std::mt19937_64 rng = seeded();
  thread_local pid_t owner = current_pid();
  if (current_pid() != owner) {
    owner = current_pid();
    rng = seeded();
  }
  const std::uint64_t ms = static_cast<std::uint64_t>(now / 1000) & 0xffffffffffffULL;
  const std::uint64_t r1 = rng();
  const std::uint64_t r2 = rng();
  const std::uint64_t rand_a = r1 & 0x0fffULL;                          // 12 bits
  const std::uint64_t rand_b = (r2 & 0x3fffffffffffffffULL) | (1ULL << 63);  // variant 10
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", ms >> 16, ms & 0xffff,
                     0x7000 | rand_a, rand_b >> 48, rand_b & 0xffffffffffffULL);
}

}  // namespace cplane
