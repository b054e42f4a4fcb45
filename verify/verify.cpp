// verify_ledger (verify/verify.hpp): the replay (verify/replay.hpp) with
// its problems collected, in the order found, and handed on once the read
// snapshot is closed.
#include "verify/verify.hpp"

#include <cstdio>

#include "events/chain.hpp"
#include "events/errors.hpp"
#include "verify/quote.hpp"
#include "verify/replay.hpp"

namespace cplane {

using verify_detail::LogFacts;
using verify_detail::Reconcile;
using verify_detail::replay_all;
using verify_detail::StreamAudit;
using verify_detail::summarize;

namespace {

bool is_chain_problem(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::event_edited:
    case ProblemKind::event_missing:
    case ProblemKind::event_inserted:
    case ProblemKind::event_reordered:
    case ProblemKind::tail_missing:
    case ProblemKind::stream_missing:
    case ProblemKind::head_missing:
    case ProblemKind::head_disagrees:
    case ProblemKind::digest_disagrees:
    case ProblemKind::seq_gap:
      return true;
    default:
      return false;
  }
}

// The problems of a verify, in the order found, with the stream each is
// about: in memory up to kInMemory, then in a temporary file, so that a log
// with many problems (10^5 changed rows) does not hold them all in memory.
// They are kept until the end because a fault found late (an event filed
// away from its stream) withdraws what that stream's fold reported.
class ProblemSpool {
 public:
  ~ProblemSpool() {
    if (file_ != nullptr) std::fclose(file_);
  }
  void add(LedgerProblem&& p, StreamKind kind, std::string id) {
    memory_.push_back({std::move(p), kind, std::move(id)});
    if (memory_.size() >= kInMemory) spill();
  }
  // f(problem, kind, id) for each, in order.
  template <class F>
  void each(F&& f) {
    if (file_ != nullptr) {
      spill();
      std::rewind(file_);
      Entry e;
      while (read(e)) f(e.problem, e.kind, e.id);
    }
    for (auto& e : memory_) f(e.problem, e.kind, e.id);
  }

 private:
  static constexpr std::size_t kInMemory = 4096;
  struct Entry {
    LedgerProblem problem;
    StreamKind kind = StreamKind::item;
    std::string id;
  };
  void spill() {
    if (memory_.empty()) return;
    if (file_ == nullptr) file_ = std::tmpfile();
    if (file_ == nullptr) return;  // no temporary file: keep them in memory
    for (const auto& e : memory_) {
      const char problem_kind = static_cast<char>(e.problem.kind);
      std::fwrite(&problem_kind, 1, 1, file_);
      for (const std::string* s : {&e.problem.item_id, &e.problem.project_id, &e.problem.detail,
                                   &e.id}) {
        put(*s);
      }
      const char kind = static_cast<char>(e.kind);
      std::fwrite(&kind, 1, 1, file_);
    }
    if (std::ferror(file_)) {
      throw StorageError(StorageError::Category::io,
                         "cannot write verify's problems to a temporary file");
    }
    memory_.clear();
  }
  void put(const std::string& s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    std::fwrite(&n, sizeof n, 1, file_);
    std::fwrite(s.data(), 1, s.size(), file_);
  }
  bool get(std::string& s) {
    std::uint32_t n = 0;
    if (std::fread(&n, sizeof n, 1, file_) != 1) return false;
    s.resize(n);
    return std::fread(s.data(), 1, n, file_) == n;
  }
  bool read(Entry& e) {
    char problem_kind = 0, kind = 0;
    return std::fread(&problem_kind, 1, 1, file_) == 1 &&
           ((e.problem.kind = static_cast<ProblemKind>(problem_kind)), true) &&
           get(e.problem.item_id) && get(e.problem.project_id) && get(e.problem.detail) &&
           get(e.id) && std::fread(&kind, 1, 1, file_) == 1 &&
           ((e.kind = static_cast<StreamKind>(kind)), true);
  }

  std::vector<Entry> memory_;
  std::FILE* file_ = nullptr;
};

}  // namespace

std::vector<LedgerProblem> verify_ledger(storage::Backend& backend, const Progress& progress) {
  std::vector<LedgerProblem> out;
  verify_ledger(backend, &backend, progress, nullptr,
                [&](LedgerProblem&& p) { out.push_back(std::move(p)); });
  return out;
}

void verify_ledger(storage::Backend& backend, const Progress& progress, LogSummary* summary,
                   bool compare_rows, const std::function<void(LedgerProblem&&)>& sink) {
  verify_ledger(backend, compare_rows ? &backend : nullptr, progress, summary, sink);
}

void verify_ledger(storage::LogSource& log, storage::RowSource* rows, const Progress& progress,
                   LogSummary* summary, const std::function<void(LedgerProblem&&)>& sink) {
  auto tx = storage::Transaction::read(log);
  std::vector<LedgerProblem> problems;
  // The stream each problem is about, to drop what a fault found later
  // (an event filed away from its stream, seen only when its body is read)
  // made that stream's fold report: one problem per fault.
  std::vector<std::pair<StreamKind, std::string>> about;
  std::int64_t events_read = 0;
  LogFacts facts;
  // Log problems of a stream come before its rows' problems.
  Reconcile r;
  r.problems = &problems;
  r.about = &about;
  r.compare_rows = rows != nullptr;
  ProblemSpool spool;
  // What reconcile added for the stream before, then this stream's own.
  auto drain = [&] {
    for (std::size_t i = 0; i < problems.size(); ++i) {
      spool.add(std::move(problems[i]), about[i].first, std::move(about[i].second));
    }
    problems.clear();
    about.clear();
  };
  replay_all(log, rows, r, facts, events_read, progress, [&](StreamAudit& audit) {
    if (summary != nullptr) summarize(audit, *summary);
    drain();
    for (auto* list : {&audit.chain_problems, &audit.problems}) {
      for (auto& p : *list) {
        bound(p.detail);
        spool.add(std::move(p), audit.stream.kind, audit.stream.id);
      }
    }
  });
  drain();
  tx.commit();
  if (summary != nullptr) {
    summary->events = events_read;
    if (auto digest = log.log_digest()) {
      Hash h{};
      if (hash_from_bytes(digest->digest, h)) summary->chain_head = to_hex(h);
    }
    summary->source_database = log.database_id();
  }
  spool.each([&](LedgerProblem& p, StreamKind kind, const std::string& id) {
    if (!facts.incomplete.empty() && p.kind != ProblemKind::index_disagrees &&
        !is_chain_problem(p.kind) && facts.incomplete.contains({kind, id})) {
      return;
    }
    bound(p.detail);
    bound(p.item_id, 256);
    bound(p.project_id, 256);
    sink(std::move(p));
  });
}

}  // namespace cplane
