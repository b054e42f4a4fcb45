// SQLite's group commit: flat combining across processes.
//
//   caller                     shared area (PATH-combine)          combiner
//   ------                     --------------------------          --------
//   encode the command  ──▶    slot: queued (ticket, request id)
//   try the lock ──────────────────────────────────────────────▶  holds it?
//     got it: become the combiner ──────────────────────────────▶  serve()
//     else: sleep on the slot's doorbell (one waiter sleeps on the
//           lock itself: the standby, woken if the combiner dies)
//                                                                  collect up to 64 queued, oldest first
//                                                                  BEGIN IMMEDIATE (strongest sync asked)
//                                                                  watermark := last seq; batch open
//                                                                  per request: run it, its events
//                                                                    carry its request id; a refusal
//                                                                    wrote nothing (one that wrote:
//                                                                    the batch again, with savepoints)
//                                                                  stage each answer in its slot
//                                                                  COMMIT (one fsync for the batch)
//   woken: read the answer ◀── slot: done ◀─────────────────────  publish, close the batch
//                                                                  unlock; wake the oldest still queued
//
// Crash cases (the combiner SIGKILLed), as the next holder of the lock sees
// them (recover()):
//   * before COMMIT: nothing of the batch is in the log; its requests go back
//     in the queue in their places and run once, in the next batch;
//   * after COMMIT, before publishing: the log after the watermark holds the
//     batch's request ids; the answers staged before the commit are handed
//     out as they are; nothing runs twice, and nobody is told "unknown";
//   * a batch whose commands appended nothing (every claim found nothing,
//     every report refused) leaves no id: it runs again, which changes
//     nothing that running it once would not have.
#include "commands/combine.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>

#include <fmt/format.h>

#include "events/clock.hpp"
#include "events/codec.hpp"

namespace cplane {

using detail::Answer;
using detail::Command;
using detail::ErrorValue;
using storage::CombineArea;
using storage::Sync;
using storage::Transaction;

namespace {

std::uint64_t new_request_id() {
  // Seeded again in a forked child, which would otherwise repeat its
  // parent's ids (and a sibling's).
  thread_local pid_t seeded_in = 0;
  thread_local std::mt19937_64 random;
  if (seeded_in != current_pid()) {
    seeded_in = current_pid();
    std::random_device device;
    random.seed((static_cast<std::uint64_t>(device()) << 32) ^ device() ^
                (static_cast<std::uint64_t>(seeded_in) << 20));
  }
  // The clock mixed in: a child made without fork() (_Fork(), which runs
  // no atfork handler) keeps its parent's generator, and must still not
  // repeat its ids.
  std::uint64_t id = 0;
  while (id == 0) {
    id = random() ^ static_cast<std::uint64_t>(
                        std::chrono::steady_clock::now().time_since_epoch().count());
  }
  return id;
}

detail::ClaimedValue claimed_value(ClaimedItem item) { return {std::move(item), false}; }

template <class R>
detail::Value to_value(R&& result) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, std::optional<ClaimedItem>>) {
    if (!result) return std::optional<detail::ClaimedValue>{};
    return std::optional<detail::ClaimedValue>{claimed_value(std::move(*result))};
  } else if constexpr (std::is_same_v<T, std::vector<ClaimedItem>>) {
    std::vector<detail::ClaimedValue> out;
    for (auto& c : result) out.push_back(claimed_value(std::move(c)));
    return out;
  } else {
    return detail::Value{std::forward<R>(result)};
  }
}

}  // namespace

template <class R>
R CommandRunner::from_value(ControlStore::Impl& s, detail::Value&& value) {
  // A payload too large for the slot was left out: it never changes, so the
  // caller reads it from the item.
  auto payload_of = [&](detail::ClaimedValue& c) -> ClaimedItem {
    if (c.elided) {
      auto tx = Transaction::read(*s.backend_);
      auto row = s.backend_->find_item(c.item.item_id);
      tx.commit();
      if (!row) throw InternalError("a claimed item's row is gone: " + c.item.item_id);
      c.item.payload = std::move(row->payload);
    }
    return std::move(c.item);
  };
  if constexpr (std::is_same_v<R, std::optional<ClaimedItem>>) {
    auto& v = std::get<std::optional<detail::ClaimedValue>>(value);
    if (!v) return std::nullopt;
    return payload_of(*v);
  } else if constexpr (std::is_same_v<R, std::vector<ClaimedItem>>) {
    std::vector<ClaimedItem> out;
    for (auto& c : std::get<std::vector<detail::ClaimedValue>>(value)) out.push_back(payload_of(c));
    return out;
  } else {
    return std::get<R>(std::move(value));
  }
}

template std::string CommandRunner::from_value<std::string>(ControlStore::Impl&, detail::Value&&);
template std::vector<std::string> CommandRunner::from_value<std::vector<std::string>>(ControlStore::Impl&,
                                                                                      detail::Value&&);
template std::optional<ClaimedItem> CommandRunner::from_value<std::optional<ClaimedItem>>(
    ControlStore::Impl&, detail::Value&&);
template std::vector<ClaimedItem> CommandRunner::from_value<std::vector<ClaimedItem>>(ControlStore::Impl&,
                                                                                      detail::Value&&);
template Micros CommandRunner::from_value<Micros>(ControlStore::Impl&, detail::Value&&);
template bool CommandRunner::from_value<bool>(ControlStore::Impl&, detail::Value&&);
template std::vector<std::pair<std::string, Micros>>
CommandRunner::from_value<std::vector<std::pair<std::string, Micros>>>(ControlStore::Impl&, detail::Value&&);
template Assignment CommandRunner::from_value<Assignment>(ControlStore::Impl&, detail::Value&&);
template GateVerdict CommandRunner::from_value<GateVerdict>(ControlStore::Impl&, detail::Value&&);

std::optional<Answer> CommandRunner::run_combined(ControlStore::Impl& s, CombineArea& area,
                                                  const Command& command) {
  const std::uint64_t id = new_request_id();
  const auto slot = area.post(detail::encode_command(command), id);
  if (!slot) return std::nullopt;  // no free slot, or too large: alone
  const auto timeout = s.options_.lock_timeout;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool extended = false;
  for (;;) {
    switch (area.wait(*slot, deadline)) {
      case CombineArea::Turn::done:
        return detail::decode_answer(area.take_result(*slot, id));
      case CombineArea::Turn::combine:
        serve(s, area, *slot);
        s.backend_->checkpoint_if_due();  // the lock let go: beside the next combiner
        continue;
      case CombineArea::Turn::alone:
        return std::nullopt;  // withdrawn from an unusable area: run it alone
      case CombineArea::Turn::lost:
        throw StorageError(StorageError::Category::commit_unknown,
                           fmt::format("the group-commit area {} was cut short while this "
                                       "command waited in it: its outcome is unknown; read the "
                                       "item before retrying (later commands run alone)",
                                       area.path()));
      case CombineArea::Turn::timeout:
        throw StorageError(StorageError::Category::busy,
                           fmt::format("gave up after {} ms waiting for the write lock (group "
                                       "commit: nobody took this command; nothing was done): "
                                       "another process holds it; retry, or raise --lock-timeout",
                                       timeout.count()));
      case CombineArea::Turn::stuck:
        // A combiner took it and has not answered: its own lock timeout ends
        // its wait for the database; give it as long again.
        if (!extended) {
          extended = true;
          deadline = std::chrono::steady_clock::now() + timeout;
          continue;
        }
        area.abandon(*slot);
        throw StorageError(StorageError::Category::commit_unknown,
                           fmt::format("the process combining this command has not answered in "
                                       "{} ms (stopped?): its outcome is unknown; read the item "
                                       "before retrying",
                                       2 * timeout.count()));
    }
  }
}

void CommandRunner::serve(ControlStore::Impl& s, CombineArea& area, std::optional<std::uint32_t> own) {
  struct Unlock {
    CombineArea& area;
    storage::Backend& backend;
    ~Unlock() {
      backend.defer_checkpoints(false);
      area.unlock();
    }
  } unlock{area, *s.backend_};
  // Not under `full` or `fenced`: a checkpoint's fsyncs beside the next
  // combiner's would hold up its FULL commits (a fenced drain ran 0.96x).
  s.backend_->defer_checkpoints(s.options_.durability == Durability::normal);
  if (area.must_recover()) {
    try {
      recover(s, area);
    } catch (const std::exception&) {
      // The dead combiner's batch stays where it is; the next holder of the
      // lock tries again. Our own request waits (up to its deadline).
      return;
    }
  }
  // Sticky: once its own request is answered, the combiner goes on serving
  // whoever queued meanwhile, for up to sticky_ms. Its page cache is then
  // still good for the next batch (SQLite drops a connection's cache when
  // another process committed: a new combiner re-reads every page it
  // touches), and no hand-off of the lock is paid per batch.
  // A 16-worker drain ran 1.1-1.2x faster with 10 ms than with none
  // (docs/benchmarks.md, "Sticky combiner"); 50 ms let the longest wait
  // pass 85 ms.
  const auto stop_after = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(std::max(0, s.options_.sqlite.sticky_ms));
  for (;;) {
    if (!area.usable()) return;  // its waiters notice too, and run alone
    if (own && area.state(*own) == CombineArea::kDone &&
        std::chrono::steady_clock::now() >= stop_after) {
      return;
    }
    const auto batch = area.collect(kMaxBatch);
    if (batch.empty()) return;
    run_batch(s, area, batch);
  }
}

void CommandRunner::recover(ControlStore::Impl& s, CombineArea& area) {
  const auto orphans = area.orphans();
  bool committed = false;
  if (!orphans.slots.empty() && orphans.batch_open) {
    std::set<std::uint64_t> ids;
    for (const auto& t : orphans.slots) ids.insert(t.request_id);
    // The batch committed or did not; the log after its watermark says
    // which: it is short (the batch, and whatever ran alone since).
    auto tx = Transaction::read(*s.backend_);
    auto cursor = s.backend_->scan_after(orphans.watermark);
    storage::RawEvent raw;
    while (!committed && cursor->next(raw)) {
      try {
        committed = ids.contains(decode(raw.body).request_id);
      } catch (const StorageError&) {
        // An unreadable event is verify's to report, not a request's.
      }
    }
    cursor.reset();
    tx.commit();
  }
  area.settle_orphans(orphans, committed);
}

void CommandRunner::run_batch(ControlStore::Impl& s, CombineArea& area,
                              const std::vector<CombineArea::Taken>& batch) {
  auto& backend = *s.backend_;
  std::vector<std::optional<Command>> commands(batch.size());
  std::vector<Answer> answers(batch.size());
  Sync sync = Sync::normal;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    try {
      commands[i] = detail::decode_command(batch[i].request);
      if (detail::sync_of(*commands[i]) == Sync::full) sync = Sync::full;
    } catch (...) {
      answers[i].error = detail::capture_error();
    }
  }
  // The answer, as staged: with every payload, else without those that do
  // not fit (the caller reads them from the items).
  auto encoded = [](const Answer& a) {
    std::string bytes = detail::encode_answer(a);
    if (bytes.size() > CombineArea::kMaxResultBytes) bytes = detail::encode_answer(a, 0);
    return bytes;
  };
  // Stages an answer, or, if even a refusal's does not fit, one that says so.
  auto stage = [&](std::uint32_t slot, const Answer& a) {
    if (!area.stage(slot, encoded(a))) {
      area.stage(slot, encoded(Answer{{}, ErrorValue{ErrorValue::internal, 0,
                                                     "the answer does not fit a group-commit slot"}}));
    }
  };
  bool opened = false;
  // One transaction for the batch. Most commands either refuse before they
  // write anything or succeed, so they run without a savepoint (two
  // statements each, 7-11% of a drain); a command that fails after it
  // wrote (a batch report refused halfway, a storage error, an answer too
  // large) undoes the whole attempt, and the batch runs again with a
  // savepoint for every command. Nothing of an attempt is committed.
  struct NeedsSavepoints {};
  auto attempt = [&](bool savepoints) {
    auto tx = Transaction::write(backend, sync);
    area.open_batch(backend.last_seq());
    opened = true;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (!commands[i]) {
        stage(batch[i].slot, answers[i]);
        continue;
      }
      answers[i] = Answer{};
      if (savepoints) backend.savepoint();
      const auto written = backend.rows_written();
      backend.tag_requests(batch[i].request_id);
      bool keep = true;
      try {
        answers[i].value =
            std::visit([&](const auto& c) -> detail::Value {
              if constexpr (std::is_void_v<decltype(exec(s, c))>) {
                exec(s, c);
                return std::monostate{};
              } else {
                return to_value(exec(s, c));
              }
            }, *commands[i]);
      } catch (...) {
        answers[i].error = detail::capture_error();
        keep = false;
      }
      backend.tag_requests(0);
      std::string bytes = encoded(answers[i]);
      if (keep && bytes.size() > CombineArea::kMaxResultBytes) {
        keep = false;
        answers[i] = Answer{{}, ErrorValue{ErrorValue::run_alone, 0,
                                           "the answer does not fit a group-commit slot"}};
        bytes = encoded(answers[i]);
      }
      if (savepoints) {
        if (keep) {
          backend.release_savepoint();
        } else if (!backend.rollback_to_savepoint()) {
          // The engine ended the transaction (an I/O error): the batch is lost.
          throw StorageError(StorageError::Category::io,
                             answers[i].error ? answers[i].error->message
                                              : "the transaction ended under a savepoint");
        }
      } else if (!keep && (backend.rows_written() != written || !backend.in_write_transaction())) {
        throw NeedsSavepoints{};
      }
      if (!area.stage(batch[i].slot, bytes)) stage(batch[i].slot, answers[i]);
    }
    tx.commit();
  };
  try {
    try {
      attempt(false);
    } catch (const NeedsSavepoints&) {
      attempt(true);
    }
  } catch (...) {
    const ErrorValue error = detail::capture_error();
    if (opened && error.kind == ErrorValue::storage &&
        error.code == static_cast<std::int32_t>(StorageError::Category::commit_unknown)) {
      // Ask the log rather than tell anyone "unknown".
      try {
        recover(s, area);
        return;
      } catch (...) {
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) stage(batch[i].slot, Answer{{}, error});
  }
  std::vector<std::uint32_t> slots;
  for (const auto& t : batch) slots.push_back(t.slot);
  area.publish(slots);
}

}  // namespace cplane
