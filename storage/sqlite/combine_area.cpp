#include "storage/sqlite/combine_area.hpp"
#include "events/errors.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

namespace cplane::storage {

namespace {

constexpr char kMagic[8] = {'C', 'P', 'L', 'C', 'M', 'B', '0', '1'};
constexpr std::uint32_t kVersion = 3;
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kResultOffset = CombineArea::kSlotHeaderBytes + CombineArea::kMaxRequestBytes;
// How long a waiter sleeps before it looks again for itself: only a lost
// wake-up (a standby that died while blocked, a waker killed between its
// store and its wake) needs it; every hand-off wakes by futex.
constexpr auto kWatchdog = std::chrono::milliseconds{50};
std::atomic<std::int64_t> g_watchdog_ms{kWatchdog.count()};  // set_watchdog_for_tests
std::chrono::milliseconds watchdog() { return std::chrono::milliseconds{g_watchdog_ms.load()}; }

using Clock = std::chrono::steady_clock;

std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

std::uint64_t new_generation() {
  std::uint64_t g = 0;
  std::ifstream in("/dev/urandom", std::ios::binary);
  in.read(reinterpret_cast<char*>(&g), sizeof g);
  g ^= static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()) ^
       (static_cast<std::uint64_t>(::getpid()) << 32);
  return g == 0 ? 1 : g;
}

bool alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }

// Every slot's owner sleeps on one of the header's doorbells, the one of
// its group of 32 slots, with its slot's bit: a batch of answers is then
// woken with one system call per group it touches, not one per slot. On
// this VM a futex wake-up costs the waker about 12 us each when issued one
// by one and about 3-4 us each when a dozen go in one call (the same
// processes, the same shared mapping); a combiner spent a fifth of its
// time waking its batch's callers (docs/benchmarks.md, "Batch wake-ups").
constexpr std::uint32_t kDoorbells = (CombineArea::kSlots + 31) / 32;
constexpr std::uint32_t bit_of(std::uint32_t slot) { return 1u << (slot % 32); }

// False when it slept its whole timeout. Only `bit`'s rings end it.
bool futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::uint32_t bit,
                Clock::duration timeout) {
  const auto ns = std::max<std::int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count(), 1);
  // FUTEX_WAIT_BITSET's timeout is a moment of CLOCK_MONOTONIC.
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const std::int64_t total = static_cast<std::int64_t>(now.tv_nsec) + ns;
  struct timespec until {now.tv_sec + static_cast<time_t>(total / 1'000'000'000),
                         static_cast<long>(total % 1'000'000'000)};
  // Shared (not FUTEX_PRIVATE): the word lives in a file other processes map.
  if (::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_BITSET, expected,
                &until, nullptr, bit) == 0 ||
      errno == EAGAIN || errno == EINTR) {
    return true;
  }
  // Timed out, or a kernel that refuses the call (EINVAL, ENOSYS): sleep
  // out the timeout instead of looking again at once, which would spin.
  if (errno != ETIMEDOUT) ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
  return false;
}

// Rings a doorbell (incremented, then woken) for the slots of `bits`: each
// owner sleeps on the value it read before it looked at its slot, so a ring
// between its look and its sleep is never lost.
void ring(std::atomic<std::uint32_t>& word, std::uint32_t bits) {
  word.fetch_add(1, std::memory_order_seq_cst);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_BITSET, INT32_MAX,
            nullptr, nullptr, bits);
}

}  // namespace

struct CombineArea::Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t slots;
  std::uint32_t slot_bytes;
  std::uint32_t header_bytes;
  char boot[48];
  pthread_mutex_t mutex;
  std::atomic<std::int32_t> standby;
  std::atomic<std::uint64_t> next_ticket;
  std::atomic<std::uint32_t> batch_open;
  std::atomic<std::int64_t> watermark;
  std::atomic<std::int32_t> holder;  // the combiner's pid while it holds the lock, else 0
  std::uint64_t layout;               // layout_fingerprint() of the build that made it
  std::atomic<std::uint64_t> codec;   // the messages' fingerprint (accepts_codec), 0 until set
  std::uint64_t generation;           // drawn at each reset: who mapped this one, and no other
  // Rung whenever the owner of a slot of its group should look again (see
  // ring()); slot i sleeps on doorbells[i / 32] with bit i % 32.
  std::atomic<std::uint32_t> doorbells[kDoorbells];
};

struct CombineArea::Slot {
  std::atomic<std::uint32_t> state;
  std::atomic<std::int32_t> owner;  // a pid, for people: liveness is owner_lock
  // Held by the slot's owner from before it takes the slot until it frees
  // it: robust, so that a reaper learns for certain, in any PID namespace
  // and whatever pid reuse did, that the owner is gone (EOWNERDEAD).
  pthread_mutex_t owner_lock;
  std::uint64_t ticket;
  std::uint64_t request_id;
  std::uint32_t request_length;
  std::uint32_t result_length;
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

// Everything two builds must agree on to share the file: a changed field,
// size or constant changes it, with no version to remember to bump.
std::uint64_t CombineArea::layout_fingerprint() {
  static const std::uint64_t fingerprint = compute_layout_fingerprint();  // usable() asks often
  return fingerprint;
}

std::uint64_t CombineArea::compute_layout_fingerprint() {
  using H = CombineArea::Header;
  using S = CombineArea::Slot;
  const std::uint64_t parts[] = {
      kVersion, sizeof(H), offsetof(H, mutex), offsetof(H, standby), offsetof(H, next_ticket),
      offsetof(H, batch_open), offsetof(H, watermark), offsetof(H, holder), offsetof(H, layout),
      offsetof(H, codec), offsetof(H, generation), offsetof(H, doorbells), kDoorbells, sizeof(S),
      offsetof(S, state), offsetof(S, owner),
      offsetof(S, owner_lock), offsetof(S, ticket), offsetof(S, request_id),
      offsetof(S, request_length), offsetof(S, result_length), sizeof(pthread_mutex_t),
      CombineArea::kSlots, CombineArea::kSlotBytes, CombineArea::kSlotHeaderBytes,
      CombineArea::kMaxRequestBytes, kHeaderBytes};
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (const auto part : parts) {
    for (int b = 0; b < 8; ++b) hash = (hash ^ ((part >> (8 * b)) & 0xff)) * 1099511628211ull;
  }
  return hash;
}

namespace {

void init_robust(pthread_mutex_t* mutex) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(mutex, &attr);
  pthread_mutexattr_destroy(&attr);
}

}  // namespace
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// ---- a file cut short under its users ---------------------------------------------
// Touching a page of a shared mapping past its file's end is SIGBUS. A
// process whose area was truncated (by an operator, by accident) would die
// mid-command; instead, a SIGBUS at an address inside an area of ours puts
// private zero pages in the area's place, marks it cut short, and lets the
// access go on: the area then reads as unusable (no magic), and every
// command of this process runs alone. A SIGBUS anywhere else goes to the
// handler that was there before, or kills the process as it would have.
namespace {

struct Mapping {
  std::atomic<std::uintptr_t> base{0};
  std::atomic<std::size_t> size{0};
  std::atomic<std::atomic<bool>*> cut{nullptr};
};
constexpr int kMappings = 64;
Mapping g_mappings[kMappings];
struct sigaction g_previous_sigbus {};

void on_sigbus(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
  for (auto& m : g_mappings) {
    const std::uintptr_t base = m.base.load(std::memory_order_acquire);
    const std::size_t size = m.size.load(std::memory_order_acquire);
    if (base == 0 || address < base || address >= base + size) continue;
    void* zeros = ::mmap(reinterpret_cast<void*>(base), size, PROT_READ | PROT_WRITE,
                         MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zeros == MAP_FAILED) break;
    if (auto* cut = m.cut.load(std::memory_order_acquire)) cut->store(true);
    return;
  }
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) != 0 && g_previous_sigbus.sa_sigaction != nullptr) {
    g_previous_sigbus.sa_sigaction(signal, info, context);
    return;
  }
  if ((g_previous_sigbus.sa_flags & SA_SIGINFO) == 0 && g_previous_sigbus.sa_handler != SIG_DFL &&
      g_previous_sigbus.sa_handler != SIG_IGN) {
    g_previous_sigbus.sa_handler(signal);
    return;
  }
  // The default action, when the access runs again on return.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  ::sigaction(SIGBUS, &fallback, nullptr);
}

// Whether the area is watched: false when kMappings areas already are.
bool watch_for_truncation(void* base, std::size_t size, std::atomic<bool>* cut) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &g_previous_sigbus);
  });
  for (auto& m : g_mappings) {
    // Reserved (base 1, which matches no real address) before its size and
    // flag are written, so that another area's entry is never overwritten.
    std::uintptr_t none = 0;
    if (!m.base.compare_exchange_strong(none, 1)) continue;
    m.size.store(size, std::memory_order_release);
    m.cut.store(cut, std::memory_order_release);
    m.base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_release);
    return true;
  }
  return false;
}

void unwatch(void* base) {
  for (auto& m : g_mappings) {
    auto expected = reinterpret_cast<std::uintptr_t>(base);
    if (m.base.compare_exchange_strong(expected, 0)) return;
  }
}

}  // namespace

CombineArea::CombineArea(std::string path, int fd, void* base, std::size_t size)
    : path_(std::move(path)), fd_(fd), base_(base), size_(size), pid_(::getpid()) {
  watched_ = watch_for_truncation(base_, size_, &truncated_);
}

CombineArea::~CombineArea() {
  unwatch(base_);
  if (base_ != nullptr) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);  // drops the shared flock
}

CombineArea::Header& CombineArea::header() const {
  static_assert(sizeof(Header) <= kHeaderBytes);
  static_assert(sizeof(Slot) <= kSlotHeaderBytes);
  return *static_cast<Header*>(base_);
}

void CombineArea::set_watchdog_for_tests(std::chrono::milliseconds watchdog) {
  g_watchdog_ms.store(watchdog.count());
}

std::atomic<std::uint32_t>& CombineArea::doorbell(std::uint32_t i) const {
  return header().doorbells[i / 32];
}

CombineArea::Slot& CombineArea::slot(std::uint32_t i) const {
  return *reinterpret_cast<Slot*>(static_cast<char*>(base_) + kHeaderBytes +
                                  static_cast<std::size_t>(i) * kSlotBytes);
}

std::unique_ptr<CombineArea> CombineArea::open(const std::string& path, const std::string& database,
                                               std::string& why) {
  struct stat db {};
  const mode_t mode = ::stat(database.c_str(), &db) == 0 ? (db.st_mode & 0666) : 0644;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST) fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    why = fmt::format("cannot open {}: {}", path, std::strerror(errno));
    return nullptr;
  }
  if (created) {
    // As PATH-lock: the database's mode past the umask and, when root makes
    // it beside someone else's database, their ownership, so that whoever
    // may write the database may combine.
    if (::geteuid() == 0 && db.st_uid != 0) {
      [[maybe_unused]] int ignored = ::fchown(fd, db.st_uid, db.st_gid);
    }
    [[maybe_unused]] int ignored = ::fchmod(fd, mode);
  }
  auto fail = [&](std::string reason) -> std::unique_ptr<CombineArea> {
    why = std::move(reason);
    ::close(fd);
    return nullptr;
  };
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return fail(path + " is not a regular file");
  const std::size_t size = kHeaderBytes + static_cast<std::size_t>(kSlots) * kSlotBytes;
  const std::string boot = boot_id();

  // Alone (nobody holds it shared): whatever the file holds is stale.
  const bool alone = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (alone) {
    // Blocks on the disk now: a full disk refuses here, not as SIGBUS later.
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0 ||
        ::posix_fallocate(fd, 0, static_cast<off_t>(size)) != 0) {
      return fail(fmt::format("cannot size {}: {}", path, std::strerror(errno)));
    }
  } else if (::flock(fd, LOCK_SH) != 0) {
    return fail(fmt::format("cannot lock {}: {}", path, std::strerror(errno)));
  }
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != size) {
    return fail(fmt::format("{} is {} bytes, not {}: in use by another build, or edited", path,
                            st.st_size, size));
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
  std::unique_ptr<CombineArea> area(new CombineArea(path, fd, base, size));
  Header& h = area->header();
  if (alone) {
    std::memset(base, 0, kHeaderBytes);
    for (std::uint32_t i = 0; i < kSlots; ++i) {
      std::memset(static_cast<void*>(&area->slot(i)), 0, kSlotHeaderBytes);
      init_robust(&area->slot(i).owner_lock);
    }
    init_robust(&h.mutex);
    h.layout = layout_fingerprint();
    h.version = kVersion;
    h.slots = kSlots;
    h.slot_bytes = kSlotBytes;
    h.header_bytes = kHeaderBytes;
    std::snprintf(h.boot, sizeof h.boot, "%s", boot.c_str());
    h.generation = new_generation();
    area->generation_ = h.generation;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    ::msync(base, kHeaderBytes, MS_SYNC);
    if (::flock(fd, LOCK_SH) != 0) {  // let others in
      why = fmt::format("cannot lock {}: {}", path, std::strerror(errno));
      return nullptr;
    }
    return area;
  }
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.version != kVersion ||
      h.slots != kSlots || h.slot_bytes != kSlotBytes || h.header_bytes != kHeaderBytes ||
      h.layout != layout_fingerprint()) {
    why = fmt::format("{} is not a group-commit area of this build (another build, or edited) "
                      "and other processes have it open",
                      path);
    return nullptr;
  }
  if (boot != std::string(h.boot, strnlen(h.boot, sizeof h.boot))) {
    why = fmt::format("{} was made before the last reboot, yet is held open", path);
    return nullptr;
  }
  area->generation_ = h.generation;
  return area;
}

bool CombineArea::mapped() const {
  if (truncated_.load(std::memory_order_acquire)) {
    broken_ = true;
    return false;
  }
  // An area the SIGBUS handler does not watch (past kMappings in one
  // process) is looked at before each use.
  return watched_ || looked();
}

// Cut short under us (truncate(1)): touching a page past its end is SIGBUS,
// which the handler above turns into zero pages and the flag. But a page
// this process never touches again (its slot is in the part left) never
// faults, and an application may have put its own SIGBUS handler over
// ours: the file's size is looked at too, though not before every use (15
// fstat calls per item drained were 8% of a 16-worker drain on this VM):
// where a process writes into the area (a request posted, an answer
// staged, a batch published, the lock taken and let go) and after a sleep
// no ring ended; not where a waiter reads its slot after a ring.
bool CombineArea::looked() const {
  if (truncated_.load(std::memory_order_acquire)) {
    broken_ = true;
    return false;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<std::size_t>(st.st_size) < size_) {
    truncated_.store(true);
    broken_ = true;
    return false;
  }
  return true;
}

bool CombineArea::header_ok() const {
  if (broken_) return false;
  const Header& h = header();
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.layout != layout_fingerprint() ||
      h.generation != generation_) {
    broken_ = true;  // for good: nothing says the next look would be right
  }
  // Zero pages the handler put in place of the file read as no magic.
  return !broken_ && !truncated_.load(std::memory_order_acquire);
}

bool CombineArea::usable() const { return !broken_ && looked() && header_ok(); }

// ---- a caller ---------------------------------------------------------------------

std::optional<std::uint32_t> CombineArea::post(std::string_view request, std::uint64_t request_id) {
  if (request.size() > kMaxRequestBytes || !looked()) return std::nullopt;
  for (int round = 0; round < 2; ++round) {
    for (std::uint32_t n = 0; n < kSlots; ++n) {
      const std::uint32_t i = (static_cast<std::uint32_t>(pid_) + n) % kSlots;
      Slot& s = slot(i);
      if (s.state.load(std::memory_order_relaxed) != kFree) continue;
      // Ours from here: the lock first, so that a slot in use always has
      // its owner's lock held while the owner lives.
      const int rc = pthread_mutex_trylock(&s.owner_lock);
      if (rc == EOWNERDEAD) pthread_mutex_consistent(&s.owner_lock);
      else if (rc != 0) continue;
      std::uint32_t expected = kFree;
      if (!s.state.compare_exchange_strong(expected, kWriting, std::memory_order_acquire)) {
        pthread_mutex_unlock(&s.owner_lock);
        continue;
      }
      s.owner.store(pid_, std::memory_order_relaxed);
      s.request_id = request_id;
      s.request_length = static_cast<std::uint32_t>(request.size());
      s.result_length = 0;
      std::memcpy(reinterpret_cast<char*>(&s) + kSlotHeaderBytes, request.data(), request.size());
      s.ticket = header().next_ticket.fetch_add(1, std::memory_order_relaxed);
      s.state.store(kQueued, std::memory_order_seq_cst);
      return i;
    }
    // Every slot in use: free those whose owners died (their requests and
    // unread results are nobody's), then look once more.
    for (std::uint32_t i = 0; i < kSlots; ++i) {
      Slot& s = slot(i);
      const std::uint32_t st = s.state.load(std::memory_order_acquire);
      if (st == kQueued || st == kDone) free_if_gone(s, st);
    }
  }
  return std::nullopt;
}

bool CombineArea::took_lock(int rc) {
  // A lock taken after the header was overwritten is no lock: the real
  // holder may still be running its batch. Looked at after taking it, so
  // that an overwrite before the take is always seen.
  if ((rc == 0 || rc == EOWNERDEAD) && !usable()) {
    pthread_mutex_unlock(&header().mutex);
    return false;
  }
  if (rc == EOWNERDEAD) {
    // Its holder died: the lock is ours, and so is whatever it left.
    pthread_mutex_consistent(&header().mutex);
    header().holder.store(pid_, std::memory_order_relaxed);
    must_recover_ = true;
    return true;
  }
  if (rc != 0) return false;
  header().holder.store(pid_, std::memory_order_relaxed);
  must_recover_ = false;
  for (std::uint32_t i = 0; i < kSlots; ++i) {
    const auto st = slot(i).state.load(std::memory_order_acquire);
    if (st == kTaken || st == kStaged) must_recover_ = true;
  }
  return true;
}

bool CombineArea::try_lock() { return took_lock(pthread_mutex_trylock(&header().mutex)); }

bool CombineArea::lock_until(Clock::time_point deadline) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()).count();
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  std::int64_t total = static_cast<std::int64_t>(now.tv_nsec) + std::max<std::int64_t>(ns, 0);
  struct timespec until {now.tv_sec + static_cast<time_t>(total / 1'000'000'000),
                         static_cast<long>(total % 1'000'000'000)};
  return took_lock(pthread_mutex_clocklock(&header().mutex, CLOCK_MONOTONIC, &until));
}

void CombineArea::unlock() {
  if (!looked()) return;  // nothing left to unlock, or to wake
  header().holder.store(0, std::memory_order_relaxed);
  pthread_mutex_unlock(&header().mutex);
  // Whoever is queued now must not sleep with nobody to run its request:
  // the standby takes the lock by itself; without one, wake the oldest.
  std::optional<std::uint32_t> oldest;
  for (std::uint32_t i = 0; i < kSlots; ++i) {
    const Slot& s = slot(i);
    if (s.state.load(std::memory_order_seq_cst) != kQueued) continue;
    if (!oldest || s.ticket < slot(*oldest).ticket) oldest = i;
  }
  if (!oldest) return;
  std::int32_t standby = header().standby.load(std::memory_order_seq_cst);
  if (standby != 0 && alive(standby)) return;
  if (standby != 0) header().standby.compare_exchange_strong(standby, 0);
  ring(doorbell(*oldest), bit_of(*oldest));
}

CombineArea::Turn CombineArea::wait(std::uint32_t i, Clock::time_point deadline) {
  Slot& s = slot(i);
  bool slept_through = false;  // the last sleep ended by the watchdog, not a ring
  for (;;) {
    // Looked at on every wake-up, before the slot is touched: a file cut
    // short has no slot left to read, and a header overwritten under us
    // describes no lock we could wait on, nor will anyone wake us by it.
    if (!(slept_through ? looked() : mapped())) return Turn::lost;
    if (!header_ok()) return wait_unusable(i, deadline);
    const std::uint32_t bell = doorbell(i).load(std::memory_order_seq_cst);
    const std::uint32_t st = s.state.load(std::memory_order_acquire);
    if (st == kDone) return Turn::done;
    // Taken or staged and the lock free: its combiner died (the batch is
    // ours to settle), whoever the standby was meant to be.
    if (try_lock()) return Turn::combine;
    const auto now = Clock::now();
    if (now >= deadline) {
      // Nobody took it in a whole lock timeout: a stopped combiner, or a
      // header put back from an old copy (its lock held by nobody). Either
      // way this process runs its next commands alone.
      if (cancel(i)) {
        broken_ = true;
        return Turn::timeout;
      }
      if (s.state.load(std::memory_order_acquire) == kDone) return Turn::done;
      return Turn::stuck;
    }
    // A standby that died blocked on the lock: unlock() finds it so when
    // the combiner lets go, and rings the oldest waiter. Looked at here
    // only after a sleep no ring ended (the combiner gone too), not before
    // every sleep: kill(2) per look was 2 system calls per item drained.
    std::int32_t none = header().standby.load(std::memory_order_seq_cst);
    if (none != 0 && slept_through && !alive(none)) {
      header().standby.compare_exchange_strong(none, 0);
    }
    none = 0;
    if (header().standby.compare_exchange_strong(none, pid_)) {
      // The standby: blocked on the lock itself, so that the kernel wakes
      // it when the combiner lets go, or dies.
      // In slices, so that it notices a header overwritten meanwhile.
      const bool locked = lock_until(std::min(deadline, Clock::now() + watchdog()));
      if (!(locked ? mapped() : looked())) return Turn::lost;
      std::int32_t me = pid_;
      header().standby.compare_exchange_strong(me, 0);
      if (locked) return Turn::combine;
      continue;
    }
    slept_through = !futex_wait(doorbell(i), bell, bit_of(i),
                                std::min<Clock::duration>(watchdog(), deadline - now));
  }
}

CombineArea::Turn CombineArea::wait_unusable(std::uint32_t i, Clock::time_point deadline) {
  Slot& s = slot(i);
  for (;;) {
    if (!mapped()) return Turn::lost;
    if (cancel(i)) return Turn::alone;  // nobody took it: the caller runs it itself
    const std::uint32_t bell = doorbell(i).load(std::memory_order_seq_cst);
    const std::uint32_t st = s.state.load(std::memory_order_acquire);
    if (st == kDone) return Turn::done;
    // A combiner took it before the header went: its answer comes in the
    // slot, which the header does not describe.
    const auto now = Clock::now();
    if (now >= deadline) return Turn::stuck;
    futex_wait(doorbell(i), bell, bit_of(i), std::min<Clock::duration>(watchdog(), deadline - now));
  }
}

bool CombineArea::cancel(std::uint32_t i) {
  std::uint32_t queued = kQueued;
  if (!slot(i).state.compare_exchange_strong(queued, kFree, std::memory_order_acq_rel)) return false;
  pthread_mutex_unlock(&slot(i).owner_lock);
  return true;
}

std::string CombineArea::take_result(std::uint32_t i, std::uint64_t request_id) {
  if (!mapped()) {
    throw StorageError(StorageError::Category::commit_unknown,
                       fmt::format("the group-commit area {} was cut short before this command's "
                                   "answer was read: it ran; read the item for its outcome",
                                   path_));
  }
  Slot& s = slot(i);
  // A file cut short between the look above and these reads: the handler's
  // zero pages stand in the slot's place, and the flag says so.
  auto cut_short = [&] {
    return StorageError(StorageError::Category::commit_unknown,
                        fmt::format("the group-commit area {} was cut short while this command's "
                                    "answer was read: it ran; read the item for its outcome",
                                    path_));
  };
  if (s.request_id != request_id) {
    if (truncated_.load(std::memory_order_acquire)) throw cut_short();
    // Only a reaper that judged a live owner dead could have given the slot
    // to another request: never hand out its answer.
    throw InternalError(fmt::format("group commit: slot {} of {} holds another request's answer",
                                    i, path_));
  }
  std::string out(reinterpret_cast<const char*>(&s) + kResultOffset, s.result_length);
  if (truncated_.load(std::memory_order_acquire)) throw cut_short();
  s.state.store(kFree, std::memory_order_release);
  pthread_mutex_unlock(&s.owner_lock);
  return out;
}

bool CombineArea::free_if_gone(Slot& s, std::uint32_t state) {
  const int rc = pthread_mutex_trylock(&s.owner_lock);
  if (rc == EBUSY) return false;  // held: its owner lives
  if (rc != 0 && rc != EOWNERDEAD) return false;
  if (rc == EOWNERDEAD) pthread_mutex_consistent(&s.owner_lock);
  // Freed while the owner's lock is ours: no new owner can take the slot
  // between the look and the store (a poster takes the lock first).
  std::uint32_t expected = state;
  const bool freed = s.state.compare_exchange_strong(expected, kFree, std::memory_order_acq_rel);
  pthread_mutex_unlock(&s.owner_lock);
  return freed;
}

void CombineArea::abandon(std::uint32_t i) {
  if (!mapped()) return;
  // The combiner still answers into the slot; with its owner's lock free,
  // the first poster short of slots frees it once it is done, and a
  // requeued request of an owner gone is dropped before it runs.
  pthread_mutex_unlock(&slot(i).owner_lock);
}

bool CombineArea::accepts_codec(std::uint64_t fingerprint) {
  std::uint64_t current = header().codec.load(std::memory_order_acquire);
  if (current == fingerprint) return true;
  return current == 0 && header().codec.compare_exchange_strong(current, fingerprint);
}

// ---- the combiner ------------------------------------------------------------------

CombineArea::Orphans CombineArea::orphans() {
  Orphans out;
  out.batch_open = header().batch_open.load(std::memory_order_acquire) != 0;
  out.watermark = header().watermark.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < kSlots; ++i) {
    Slot& s = slot(i);
    const auto st = s.state.load(std::memory_order_acquire);
    if (st != kTaken && st != kStaged) continue;
    out.slots.push_back({i, s.request_id,
                         std::string(reinterpret_cast<const char*>(&s) + kSlotHeaderBytes,
                                     s.request_length)});
  }
  return out;
}

void CombineArea::settle_orphans(const Orphans& orphans, bool committed) {
  std::vector<std::uint32_t> done, again;
  for (const auto& t : orphans.slots) {
    const bool staged = slot(t.slot).state.load(std::memory_order_acquire) == kStaged;
    (committed && staged ? done : again).push_back(t.slot);
  }
  if (!done.empty()) publish(done);
  requeue(again);
  header().batch_open.store(0, std::memory_order_release);
  must_recover_ = false;
}

std::vector<CombineArea::Taken> CombineArea::collect(std::size_t max) {
  std::vector<std::pair<std::uint64_t, std::uint32_t>> queued;
  if (!mapped()) return {};
  for (std::uint32_t i = 0; i < kSlots; ++i) {
    const Slot& s = slot(i);
    if (s.state.load(std::memory_order_acquire) == kQueued) queued.emplace_back(s.ticket, i);
  }
  std::sort(queued.begin(), queued.end());
  std::vector<Taken> out;
  for (const auto& [ticket, i] : queued) {
    if (out.size() == max) break;
    Slot& s = slot(i);
    // Nobody waits for a request of a process gone: a claim made for a dead
    // worker would only hold an item until its lease lapsed.
    if (free_if_gone(s, kQueued)) continue;
    std::uint32_t expected = kQueued;
    if (!s.state.compare_exchange_strong(expected, kTaken, std::memory_order_acq_rel)) continue;
    out.push_back({i, s.request_id,
                   std::string(reinterpret_cast<const char*>(&s) + kSlotHeaderBytes, s.request_length)});
  }
  return out;
}

void CombineArea::open_batch(Seq watermark) {
  header().watermark.store(watermark, std::memory_order_release);
  header().batch_open.store(1, std::memory_order_seq_cst);
}

bool CombineArea::stage(std::uint32_t i, std::string_view result) {
  if (result.size() > kMaxResultBytes || !looked()) return false;
  Slot& s = slot(i);
  std::memcpy(reinterpret_cast<char*>(&s) + kResultOffset, result.data(), result.size());
  s.result_length = static_cast<std::uint32_t>(result.size());
  s.state.store(kStaged, std::memory_order_release);
  return !truncated_.load(std::memory_order_acquire);  // staged in the handler's zero pages
}

void CombineArea::publish(const std::vector<std::uint32_t>& slots) {
  if (!looked()) return;  // its waiters see the file cut short too
  std::uint32_t bits[kDoorbells] = {};
  for (const auto i : slots) {
    slot(i).state.store(kDone, std::memory_order_seq_cst);
    bits[i / 32] |= bit_of(i);
  }
  // One wake-up call per group of slots, for all its answers at once.
  for (std::uint32_t w = 0; w < kDoorbells; ++w) {
    if (bits[w] != 0) ring(header().doorbells[w], bits[w]);
  }
  // Only now: a crash before this line leaves the batch open, and the next
  // combiner asks the log, rather than running a committed batch again.
  header().batch_open.store(0, std::memory_order_release);
}

void CombineArea::requeue(const std::vector<std::uint32_t>& slots) {
  if (!mapped()) return;
  for (const auto i : slots) slot(i).state.store(kQueued, std::memory_order_seq_cst);
}

CombineArea::SlotState CombineArea::state(std::uint32_t i) const {
  return static_cast<SlotState>(slot(i).state.load(std::memory_order_acquire));
}

pid_t CombineArea::combiner() const { return header().holder.load(std::memory_order_acquire); }

pid_t CombineArea::standby() const { return header().standby.load(std::memory_order_acquire); }

}  // namespace cplane::storage
