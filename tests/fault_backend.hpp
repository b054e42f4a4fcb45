// A Backend that fails one chosen call, the n-th time it is made, with a
// chosen StorageError category; everything else is forwarded to the real
// backend it wraps (storage::BackendWrapper). Faults come from wrapping a
// layer, never from flags in production code (leveldb's fault_injection_test).
#pragma once

#include <string>
#include <vector>

#include "events/errors.hpp"
#include "storage/backend_wrapper.hpp"

namespace cplane::test {

class FaultBackend : public storage::BackendWrapper {
 public:
  enum class Call { begin_write, append, commit, rollback };

  FaultBackend(std::unique_ptr<storage::Backend> inner, Call call, int nth,
               StorageError::Category category)
      : BackendWrapper(std::move(inner)), call_(call), nth_(nth), category_(category) {}

  int faults() const { return faults_; }

  void begin_write(storage::Sync sync) override {
    maybe_fail(Call::begin_write);
    BackendWrapper::begin_write(sync);
  }
  Seq append(const Event& event) override {
    maybe_fail(Call::append);
    return BackendWrapper::append(event);
  }
  // Each event of a batch counts as an append: the batch fails at its n-th
  // event overall, after those before it went in.
  std::vector<Seq> append_batch(const std::vector<Event>& events) override {
    if (call_ != Call::append || calls_ > nth_ ||
        calls_ + static_cast<int>(events.size()) <= nth_) {
      if (call_ == Call::append) calls_ += static_cast<int>(events.size());
      return BackendWrapper::append_batch(events);
    }
    const std::vector<Event> before(events.begin(), events.begin() + (nth_ - calls_));
    if (!before.empty()) BackendWrapper::append_batch(before);
    calls_ = nth_;
    maybe_fail(Call::append);
    return {};  // not reached: maybe_fail threw
  }
  // A commit that fails after the real one ran (commit_unknown: it did
  // happen) or instead of it (any other category: it did not).
  void commit() override {
    if (hit(Call::commit)) {
      if (category_ == StorageError::Category::commit_unknown) BackendWrapper::commit();
      else BackendWrapper::rollback();
      throw StorageError(category_, "injected commit fault");
    }
    BackendWrapper::commit();
  }
  // A rollback that fails: the real one is not made (the connection stays
  // inside its transaction), as when SQLite's ROLLBACK itself fails.
  void rollback() noexcept override {
    if (hit(Call::rollback)) return;
    BackendWrapper::rollback();
  }

 private:
  bool hit(Call call) {
    if (call != call_ || calls_++ != nth_) return false;
    ++faults_;
    return true;
  }
  void maybe_fail(Call call) {
    if (hit(call)) throw StorageError(category_, "injected fault");
  }

  Call call_;
  int nth_;
  int calls_ = 0;
  int faults_ = 0;
  StorageError::Category category_;
};

}  // namespace cplane::test
