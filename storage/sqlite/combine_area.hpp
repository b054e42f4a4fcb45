// The shared area of SQLite's group commit (flat combining across
// processes): a memory-mapped file beside the database, PATH-combine, where
// processes queue serialised commands and the one holding the combiner's
// lock runs them all in one write transaction and hands back the results.
//
// The area knows bytes, not commands: commands/combine.cpp owns what they
// mean. Its file:
//
//   header (one page): magic "CPLCMB01", layout version and sizes, the boot
//     id of the kernel that made it, the combiner's lock (a process-shared,
//     robust pthread mutex: the kernel hands it to the next locker with
//     EOWNERDEAD when its holder dies), the standby (the pid of the one
//     waiter blocked on that lock, so that a combiner's death wakes someone
//     at once), the next arrival ticket, the batch in flight (open flag
//     and the log's last seq before it: its watermark), and a generation
//     drawn at each reset. A process checks magic, layout and generation
//     on every wake-up: a header overwritten under it (zeros, another
//     area's copy) describes no lock it may wait on, so it withdraws its
//     request and runs alone from then on. Then one doorbell (a futex
//     word) per 32 slots: a slot's owner sleeps on its group's with its
//     slot's bit, so that a combiner wakes a whole batch in one call.
//   kSlots slots of kSlotBytes: a state word, the owner's pid, arrival
//     ticket, request id, and one buffer holding the request, later the
//     result.
//
// A slot's life: free -> writing (its owner fills it) -> queued (ticket
// taken) -> taken (a combiner put it in its batch) -> staged (its result
// written, the batch not yet committed) -> done (committed: its owner
// reads the result and frees it). A combiner publishes or requeues every
// slot it took before it lets the lock go; a slot found taken or staged by
// the next holder of the lock is the batch of a combiner that died, and
// the log after the watermark says whether it committed: the request ids of
// its events (Event::request_id) are there, or nothing of it is.
//
// Who may reset it: every process that has the area mapped holds a shared
// flock(2) on the file; one that gets the exclusive lock is alone, so
// whatever the file holds (a crash's leftovers, another boot's mutex, a
// torn or foreign header) is stale and is rewritten. A process that finds
// a header it cannot use while others hold the area does not combine.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/event.hpp"

namespace cplane::storage {

class CombineArea {
 public:
  static constexpr std::uint32_t kSlots = 128;
  static constexpr std::uint32_t kSlotBytes = 32 << 10;  // header + buffer
  static constexpr std::uint32_t kSlotHeaderBytes = 128;
  // A request, and its answer, each have half of what the header leaves.
  static constexpr std::size_t kMaxRequestBytes = (kSlotBytes - kSlotHeaderBytes) / 2;
  static constexpr std::size_t kMaxResultBytes = kSlotBytes - kSlotHeaderBytes - kMaxRequestBytes;

  enum SlotState : std::uint32_t {
    kFree = 0,
    kWriting = 1,
    kQueued = 2,
    kTaken = 3,
    kStaged = 4,
    kDone = 5,
  };

  // Maps PATH-combine (created beside `database` with its mode). nullptr
  // with `why` set when it cannot be used: a caller then runs every command
  // in a transaction of its own, which is always correct.
  static std::unique_ptr<CombineArea> open(const std::string& path, const std::string& database,
                                           std::string& why);
  ~CombineArea();
  CombineArea(const CombineArea&) = delete;
  CombineArea& operator=(const CombineArea&) = delete;

  const std::string& path() const { return path_; }

  // ---- a caller ---------------------------------------------------------------
  // Queues `request` under `request_id`: the slot, or nullopt when none is
  // free or the request does not fit (run it alone then).
  std::optional<std::uint32_t> post(std::string_view request, std::uint64_t request_id);

  enum class Turn {
    done,     // the slot holds the result: take_result
    combine,  // the caller holds the combiner's lock: run batches, then unlock
    timeout,  // the deadline passed with the request still queued; it was withdrawn
    stuck,    // the deadline passed while a combiner holds it (taken): outcome unknown
    alone,    // the area is unusable (its header overwritten); the request was withdrawn
    lost,     // the file was cut short under us: the request's slot is gone, outcome unknown
  };
  // Whether the whole file is still there (not truncated under us), as far
  // as this process knows without a system call (its SIGBUS handler's
  // flag). Once false, false for good, and usable() too.
  bool mapped() const;
  // The same, asking the file's size (fstat).
  bool looked() const;
  // Whether the header is still the one this process mapped (magic, layout
  // fingerprint and generation) and the file is whole (looked()). Once
  // false, false for good: the caller runs every command alone.
  bool usable() const;
  // usable() without the system call: as far as the SIGBUS handler knows.
  // Enough before post(), which looks at the file's size itself.
  bool usable_as_far_as_known() const { return !broken_ && mapped() && header_ok(); }
  // Waits until the request is answered or the caller holds the lock.
  // Sleeps on a futex (its group's doorbell with its slot's bit, or the
  // lock as the standby); never spins.
  Turn wait(std::uint32_t slot, std::chrono::steady_clock::time_point deadline);
  // Gives up waiting for a slot a combiner took and has not answered: the
  // slot is freed once answered, or dropped if requeued.
  void abandon(std::uint32_t slot);
  // The result of a done slot; frees it. InternalError if the slot holds
  // another request than `request_id`.
  std::string take_result(std::uint32_t slot, std::uint64_t request_id);
  // Whether requests and answers encoded with `fingerprint` (of the
  // commands' codec) may use this area: the first user after a reset sets
  // it; a build with another codec then runs its commands alone.
  bool accepts_codec(std::uint64_t fingerprint);

  // ---- the combiner (holding the lock) -------------------------------------------
  // The lock without waiting (also how a caller becomes the combiner).
  bool try_lock();
  // Releases the lock, then wakes a waiter whose request is still queued
  // if no standby is there to take the lock.
  void unlock();
  // Set when this holder took the lock from a process that died holding it
  // (or found another combiner's slots): recover() before anything else.
  bool must_recover() const { return must_recover_; }

  struct Taken {
    std::uint32_t slot = 0;
    std::uint64_t request_id = 0;
    std::string request;
  };
  // The batch a dead combiner left: every taken or staged slot, and whether
  // it had opened its transaction (else nothing of it can be in the log).
  struct Orphans {
    std::vector<Taken> slots;
    bool batch_open = false;
    Seq watermark = 0;
  };
  Orphans orphans();
  // Publishes the orphans (the batch committed) or puts them back in the
  // queue in their places (it did not).
  void settle_orphans(const Orphans& orphans, bool committed);

  // Takes up to `max` queued requests in arrival order (taken). Requests of
  // processes that no longer exist are freed, not taken.
  std::vector<Taken> collect(std::size_t max);
  // The batch is about to run in a transaction that starts after `watermark`.
  void open_batch(Seq watermark);
  // Writes a result into a taken slot (staged). False if it does not fit.
  bool stage(std::uint32_t slot, std::string_view result);
  // The batch committed (or failed as a whole): staged slots become done
  // and their owners are woken; the batch is closed.
  void publish(const std::vector<std::uint32_t>& slots);
  // Puts taken slots back in the queue (nothing of them happened).
  void requeue(const std::vector<std::uint32_t>& slots);

  // For tests: how long a waiter sleeps before it looks again by itself
  // (50 ms), for every area of this process. A long one makes a lost
  // wake-up a long wait instead of a short one.
  static void set_watchdog_for_tests(std::chrono::milliseconds watchdog);

  // For tests and the probe: a slot's state, the pid of the process
  // holding the combiner's lock and of the standby (0 for none).
  SlotState state(std::uint32_t slot) const;
  pid_t combiner() const;
  pid_t standby() const;

 private:
  struct Header;
  struct Slot;
  CombineArea(std::string path, int fd, void* base, std::size_t size);
  static std::uint64_t layout_fingerprint();
  static std::uint64_t compute_layout_fingerprint();
  // Frees the slot if its owner is gone and it is still in `state`.
  bool free_if_gone(Slot& slot, std::uint32_t state);
  Header& header() const;
  Slot& slot(std::uint32_t i) const;
  // The doorbell that slot i's owner sleeps on (one per 32 slots).
  std::atomic<std::uint32_t>& doorbell(std::uint32_t i) const;
  bool lock_until(std::chrono::steady_clock::time_point deadline);  // as the standby
  bool took_lock(int rc);
  bool header_ok() const;  // usable() without the look at the file's size
  bool cancel(std::uint32_t slot);
  Turn wait_unusable(std::uint32_t slot, std::chrono::steady_clock::time_point deadline);

  std::string path_;
  int fd_ = -1;
  void* base_ = nullptr;
  std::size_t size_ = 0;
  bool must_recover_ = false;
  pid_t pid_ = 0;
  std::uint64_t generation_ = 0;
  mutable bool broken_ = false;
  mutable std::atomic<bool> truncated_{false};  // set by the SIGBUS handler too
  bool watched_ = false;                         // the SIGBUS handler covers it
};

}  // namespace cplane::storage
