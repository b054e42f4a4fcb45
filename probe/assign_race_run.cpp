// The assign-race scenario's sessions and the probe's side of it: the
// control plane and the report (probe/assign_race.hpp; the judgement is in
// assign_race.cpp).
#include "probe/assign_race.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "commands/testing.hpp"
#include "events/clock.hpp"
#include "probe/end_checks.hpp"
#include "probe/fleet.hpp"
#include "probe/workers.hpp"
#include "storage/backend.hpp"

namespace cplane::probe::race {
namespace {

using fleet::seconds_now;
using fleet::sleep_for;

// ---- one session per process ----------------------------------------------------
// The session asks for one of a few items over and over. Given one, it makes
// a few mutations through the gate, then gives the item back, keeps it for a
// while (its heartbeats renew the lease), or stalls past its lease and
// presents the old fence, which must be refused. Every answer goes to its
// journal (probe/assign_race.hpp), which the probe holds to the ledger.

const std::vector<std::string> kRaceActions = {"comment", "push"};

std::vector<std::string> read_slots(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> ids;
  for (std::string id; in >> id;) ids.push_back(id);
  if (ids.empty()) throw std::runtime_error("no items in " + path);
  return ids;
}

class Session {
 public:
  explicit Session(const SessionConfig& c)
      : c_(c),
        store_(c.store),
        lease_us_(static_cast<Micros>(c.lease * 1e6)),
        rng_(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())) {
    journal_.session = c.session;
  }

  // 0 when every call went through; the journal is written either way.
  int run() {
    int code = 0;
    try {
      store_.open_session(c_.session, c_.project);
      if (c_.gate_fd >= 0) fleet::StartGate::wait_on(c_.gate_fd);
      slots_ = read_slots(c_.slots);
      ask_until(seconds_now() + c_.duration);
      Entry e;
      e.t0 = now_micros();
      const auto released = store_.close_session(c_.session);
      e.t1 = now_micros();
      e.kind = EntryKind::session_closed;
      for (const auto& item : released) {
        e.item = item;
        journal_.entries.push_back(e);
      }
    } catch (const std::exception& e) {
      std::cerr << "cplane-probe: session " << c_.session << ": " << e.what() << '\n';
      code = 1;
    }
    write_journal(c_.journal, journal_);
    return code;
  }

 private:
  struct Held {
    Fence fence = 0;
    std::string head;  // pinned when it was assigned
    Micros lease_end = 0;
    double since = 0;  // seconds_now() when assigned
  };

  double uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }

  void ask_until(double end) {
    double last_heartbeat = seconds_now();
    std::int64_t round = 0;
    while (seconds_now() < end) {
      if (!held_.empty() && seconds_now() - last_heartbeat > c_.lease / 3) {
        heartbeat();
        last_heartbeat = seconds_now();
      }
      give_back_kept();
      if (++round % 16 == 0) slots_ = read_slots(c_.slots);
      const std::string item = slots_[rng_() % slots_.size()];
      const Assignment a = ask(item);
      if (a.outcome == AssignOutcome::no_safe_work) {
        slots_ = read_slots(c_.slots);  // closed: the control plane has replaced it
        continue;
      }
      if (a.outcome == AssignOutcome::wait) {
        sleep_for(uniform(0.0005, 0.002));
        continue;
      }
      const auto it = held_.find(item);
      const bool renewal = it != held_.end() && it->second.fence == a.fence;
      held_[item] = {a.fence, a.expected_head, a.lease_expires_at,
                     renewal ? it->second.since : seconds_now()};
      if (!renewal) ++fresh_;
      if (!work(item)) continue;
      const double r = uniform(0, 1);
      // Every session stalls on its second fresh assignment, and now and then.
      if ((!renewal && fresh_ == 2) || r < c_.stall_probability) {
        stall(item);
      } else if (r < 0.6) {
        give_back(item);
      }  // else keep it: heartbeats renew it until give_back_kept
    }
  }

  Assignment ask(const std::string& item) {
    Entry e;
    e.kind = EntryKind::answer;
    e.item = item;
    e.t0 = now_micros();
    const Assignment a = store_.assign_and_lease(c_.session, item, kRaceActions, Seconds{c_.lease});
    e.t1 = now_micros();
    e.result = std::string(to_string(a.outcome));
    e.fence = a.fence;
    e.lease_end = a.lease_expires_at;
    e.until = a.until;
    e.head = a.expected_head;
    journal_.entries.push_back(std::move(e));
    return a;
  }

  // The gate: record_mutation when `write`, else require_valid_assignment.
  // `head` "" presents none.
  GateVerdict present(bool write, const char* purpose, const std::string& item, Fence fence,
                      const std::string& action, const std::string& head) {
    Entry e;
    e.kind = EntryKind::gate;
    e.item = item;
    e.fence = fence;
    e.head = head;
    e.write = write;
    e.purpose = purpose;
    e.action = action;
    e.seen_seq = store_.item(item).last_seq;
    const std::optional<std::string> presented =
        head.empty() ? std::nullopt : std::optional<std::string>(head);
    e.t0 = now_micros();
    const GateVerdict v =
        write ? store_.record_mutation(c_.session, item, fence, action, presented)
              : store_.require_valid_assignment(c_.session, item, fence, action, presented);
    e.t1 = now_micros();
    e.result = v ? "allowed" : to_string(v.reason());
    journal_.entries.push_back(std::move(e));
    return v;
  }

  // A few mutations under the item's assignment; false (and the item given
  // up) at the first denial.
  bool work(const std::string& item) {
    const Held h = held_.at(item);
    if (fresh_ % 4 == 0) present(false, "merge", item, h.fence, "merge", h.head);
    if (uniform(0, 1) < 0.3) present(false, "check", item, h.fence, "push", h.head);
    const int mutations = 1 + static_cast<int>(rng_() % 3);
    for (int i = 0; i < mutations; ++i) {
      const std::string head = rng_() % 5 == 0 ? "" : h.head;
      const GateVerdict v = present(true, "work", item, h.fence, kRaceActions[i % 2], head);
      if (!v) {
        // The head moved under a live lease: give the item back for a new
        // assignment to pin the new head. Otherwise it is gone already.
        if (v.reason() == GateReason::head_drift) {
          give_back(item);
        } else {
          held_.erase(item);
        }
        return false;
      }
      sleep_for(uniform(0.001, 0.003));
    }
    return true;
  }

  void give_back(const std::string& item) {
    const Fence fence = held_.at(item).fence;
    held_.erase(item);
    Entry e;
    e.kind = EntryKind::released;
    e.item = item;
    e.fence = fence;
    e.t0 = now_micros();
    try {
      store_.release(item, fence, "probe gives it back");
      e.result = "ok";
    } catch (const FenceRejected& x) {
      e.result = std::string(to_string(x.reason()));
    }
    e.t1 = now_micros();
    journal_.entries.push_back(std::move(e));
  }

  // Kept items go back after half a lease, with one last mutation first.
  void give_back_kept() {
    std::vector<std::string> due;
    for (const auto& [item, h] : held_) {
      if (seconds_now() - h.since > c_.lease / 2) due.push_back(item);
    }
    for (const auto& item : due) {
      const Held h = held_.at(item);
      present(true, "final", item, h.fence, "comment", h.head);
      give_back(item);
    }
  }

  void heartbeat() {
    Entry e;
    e.kind = EntryKind::extended;
    e.t0 = now_micros();
    const auto extended = store_.session_heartbeat(c_.session, Seconds{c_.lease});
    e.t1 = now_micros();
    std::set<std::string> live;
    for (const auto& [item, end] : extended) {
      e.item = item;
      e.lease_end = end;
      journal_.entries.push_back(e);
      live.insert(item);
      if (auto it = held_.find(item); it != held_.end()) it->second.lease_end = end;
    }
    // What it did not extend was lapsed, taken over or closed: the old
    // fence, presented once more, must be refused.
    std::vector<std::string> lost;
    for (const auto& [item, h] : held_) {
      if (live.count(item) == 0) lost.push_back(item);
    }
    for (const auto& item : lost) {
      const Held h = held_.at(item);
      held_.erase(item);
      present(true, "lost", item, h.fence, "push", h.head);
    }
  }

  // Sleeps until half a lease past the lease's end (by the store's clock),
  // presents the old fence, then asks for the item again: under a fresh
  // fence of its own the old one is stale.
  void stall(const std::string& item) {
    const Held h = held_.at(item);
    held_.erase(item);
    const Micros wake = h.lease_end + lease_us_ / 2;
    for (Micros now = now_micros(); now < wake; now = now_micros()) sleep_for((wake - now) / 1e6);
    present(true, "stall", item, h.fence, "push", h.head);
    const double give_up = seconds_now() + 2 * c_.lease;
    while (seconds_now() < give_up) {
      const Assignment a = ask(item);
      if (a.outcome == AssignOutcome::no_safe_work) return;
      if (a.outcome == AssignOutcome::wait) {
        sleep_for(std::clamp((a.until - now_micros()) / 1e6, 0.001, 0.02));
        continue;
      }
      held_[item] = {a.fence, a.expected_head, a.lease_expires_at, seconds_now()};
      ++fresh_;
      if (a.fence != h.fence) present(true, "stale", item, h.fence, "push", h.head);
      if (work(item)) give_back(item);
      return;
    }
  }

  const SessionConfig& c_;
  ControlStore store_;
  Micros lease_us_;
  std::mt19937_64 rng_;
  std::vector<std::string> slots_;
  std::map<std::string, Held> held_;
  std::int64_t fresh_ = 0;  // fresh assignments so far
  Journal journal_;
};

// ---- the probe's side -----------------------------------------------------------

// The control plane of a race: creates the pr items raced for and names
// them to the sessions (the slots file), moves heads (mostly of held items,
// so that their holders meet head_drift), closes a held item every
// run_s / 10 (replacing it with a new one) and stalls the writers.
class ControlPlane {
 public:
  ControlPlane(const RunConfig& run, std::size_t slot_count, double lease, double run_s)
      : run_(run),
        store_(run.store),
        lease_(lease),
        lease_us_(static_cast<Micros>(lease * 1e6)),
        run_s_(run_s),
        slots_path_(run.scratch + "/slots"),
        row_locks_(run.store.rfind("postgres", 0) == 0),
        lock_path_((run.store.rfind("sqlite:", 0) == 0 ? run.store.substr(7) : run.store) +
                   "-lock") {
    store_.create_project(run.project, "cplane probe assign-race");
    store_.grant(run.project, run.project);
    for (std::size_t k = 0; k < slot_count; ++k) {
      slots_.push_back(enqueue_pr());
      items_.push_back(slots_.back());
    }
    publish();
  }

  ControlStore& store() { return store_; }
  const std::string& slots_path() const { return slots_path_; }
  const std::vector<std::string>& items() const { return items_; }  // every one created
  const std::vector<Observation>& observations() const { return observations_; }
  const std::vector<WriterStall>& writer_stalls() const { return writer_stalls_; }

  // The sessions were released at `t0`: plans the closes and writer stalls.
  void start(double t0) {
    next_close_ = t0 + run_s_ / kClosesPlanned;
    // The writer lock every write transaction queues on (StoreOptions: a
    // flock on the store's "-lock" file), held as a writer stopped inside
    // a transaction would hold it. Each is taken, once due, as soon as an
    // item was just assigned: its holder is then at work.
    writer_stall_at_ = {t0 + 0.25 * run_s_, t0 + 0.5 * run_s_, t0 + 0.75 * run_s_};
    // A row lock stalls one item's writers, not all: more of them, so that
    // some gate call surely queues behind one.
    if (row_locks_) {
      writer_stall_at_.clear();
      for (int i = 1; i <= 8; ++i) writer_stall_at_.push_back(t0 + i * run_s_ / 9);
    }
  }

  // One move on a random item: a writer stall once due, a close once due,
  // or now and then a head move.
  void act() {
    const std::size_t slot = rng_() % slots_.size();
    const std::string item = slots_[slot];
    const ItemRow row = store_.item(item);
    const Micros now = now_micros();
    const bool held = row.status == ItemStatus::claimed && row.lease_expires_at > now;
    const bool just_assigned = held && row.lease_expires_at - now > lease_us_ - 20'000;
    const bool stall_due = !writer_stall_at_.empty() && seconds_now() >= writer_stall_at_.front();
    if (stall_due && (just_assigned || seconds_now() >= writer_stall_at_.front() + 0.5)) {
      writer_stall_at_.erase(writer_stall_at_.begin());
      stall_writers(item);
    } else if (held && seconds_now() >= next_close_) {
      const CloseReason reason = merge_ ? CloseReason::merged : CloseReason::closed;
      merge_ = !merge_;
      observe(Observation::Kind::close, item, [&] { return store_.observe_close(item, reason); });
      slots_[slot] = enqueue_pr();
      items_.push_back(slots_[slot]);
      publish();
      next_close_ += run_s_ / kClosesPlanned;
    } else if (uniform(0, 1) < (held ? 0.35 : 0.05)) {
      const std::string head = fmt::format("h{}", ++heads_);
      observe(Observation::Kind::head, item, [&] { return store_.observe_head(item, head); });
      // Now and then it moves straight back (a force-push undone): the
      // head moved since it was pinned all the same.
      if (uniform(0, 1) < 0.2) {
        observe(Observation::Kind::head, item,
                [&] { return store_.observe_head(item, row.head); });
      }
    }
  }

  double uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }

 private:
  static constexpr int kClosesPlanned = 10;

  std::string enqueue_pr() {
    ++prs_;
    return store_.enqueue(run_.project, fmt::format(R"({{"pr":{}}})", prs_),
                          ControlStore::EnqueueOptions{.kind = WorkKind::pr,
                                                       .ref = fmt::format("probe/race#{}", prs_),
                                                       .head = fmt::format("h{}", ++heads_),
                                                       .author = "probe-author"});
  }

  void publish() {
    {
      std::ofstream out(slots_path_ + ".tmp", std::ios::trunc);
      for (const auto& id : slots_) out << id << '\n';
    }
    std::filesystem::rename(slots_path_ + ".tmp", slots_path_);
  }

  template <class Call>
  void observe(Observation::Kind kind, const std::string& item, Call&& call) {
    Observation o{kind, item, false, now_micros(), 0};
    o.changed = call();
    o.t1 = now_micros();
    observations_.push_back(o);
  }

  // On PostgreSQL writers lock rows, not the store: the stall holds the
  // row lock of the item just assigned, as a writer stopped inside a
  // transaction that read it would.
  void stall_writers(const std::string& item) {
    if (row_locks_) {
      ControlStore staller{run_.store};
      auto& backend = testing::backend(staller);
      for (;;) {
        backend.begin_write(storage::Sync::normal);
        try {
          backend.find_item(item);
          break;
        } catch (const storage::Conflict&) {
          backend.rollback();  // waited behind another writer: take it afresh
        }
      }
      WriterStall stall{now_micros(), 0, item};
      sleep_for(1.5 * lease_);
      stall.letting_go = now_micros();
      backend.rollback();  // lets go
      writer_stalls_.push_back(stall);
      return;
    }
    const int fd = ::open(lock_path_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open the store's writer lock " + lock_path_);
    if (::flock(fd, LOCK_EX) != 0) {
      ::close(fd);
      throw std::runtime_error("cannot take the store's writer lock " + lock_path_);
    }
    WriterStall stall{now_micros(), 0, ""};
    sleep_for(1.5 * lease_);
    stall.letting_go = now_micros();
    ::close(fd);  // lets go
    writer_stalls_.push_back(stall);
  }

  const RunConfig& run_;
  ControlStore store_;
  double lease_;
  Micros lease_us_;
  double run_s_;
  std::string slots_path_;
  bool row_locks_;
  std::string lock_path_;
  std::mt19937 rng_{std::random_device{}()};
  std::int64_t prs_ = 0, heads_ = 0;
  std::vector<std::string> slots_, items_;
  std::vector<Observation> observations_;
  std::vector<WriterStall> writer_stalls_;
  std::vector<double> writer_stall_at_;
  double next_close_ = 0;
  bool merge_ = true;
};

// What the run itself saw, beside the judge's findings.
struct RunFacts {
  int workers = 0;
  std::size_t slot_count = 0;
  double lease = 0, run_s = 0, elapsed = 0;
  int failures = 0;
  bool timed_out = false;
  std::size_t writer_stalls = 0;
  int journals = 0;
  SessionsLeft sessions;
};

void add_figures(ScenarioResult& out, const RunFacts& r, const Findings& f) {
  out.count("workers", r.workers);
  out.count("items", static_cast<std::int64_t>(r.slot_count));
  out.count("items_created", f.items);
  out.fixed("lease_s", r.lease);
  out.fixed("run_s", r.run_s);
  out.fixed("elapsed_s", r.elapsed);
  out.count("worker_failures", r.failures);
  out.count("timed_out", r.timed_out ? 1 : 0);
  out.count("rounds", f.rounds);
  out.count("assigned", f.assigned);
  out.count("renewals", f.renewals);
  out.count("wait", f.wait);
  out.count("no_safe_work", f.no_safe_work);
  out.count("extensions", f.extensions_told);
  out.count("releases", f.releases_ok);
  out.count("releases_refused", f.releases_refused);
  out.count("released_by_session_close", f.released_by_close);
  out.count("gate_calls", f.gate_calls);
  out.count("allowed", f.allowed);
  for (const auto& [reason, n] : f.denials) out.count("denied_" + reason, n);
  out.count("mutations_allowed", f.allowed_writes);
  out.count("mutations_recorded", f.mutations_recorded);
  out.count("stall_presentations", f.stall_presentations);
  out.count("stall_allowed", f.stall_allowed);
  out.count("stale_presentations", f.stale_presentations);
  out.count("stale_denied_as_stale_fence", f.stale_denied_as_stale_fence);
  out.count("lost_presentations", f.lost_presentations);
  out.count("lost_allowed", f.lost_allowed);
  out.count("head_moves", f.head_moves);
  out.count("closes", f.closes);
  out.count("handovers_by_lapse", f.handovers_by_lapse);
  out.count("handovers_after_release", f.handovers_after_release);
  out.count("handovers_observed", f.handovers_observed);
  out.fixed("tightest_handover_ms", f.tightest_handover_ms);
  out.count("writer_stalls", static_cast<std::int64_t>(r.writer_stalls));
  out.count("gates_behind_writer_stall", f.gates_behind_writer_stall);
  out.count("allowed_on_lapsed_lease", f.allowed_on_lapsed_lease);
  out.count("renewed_after_lapse", f.renewed_after_lapse);
  out.count("allowed_after_lease_end", f.allowed_after_lease_end);
  out.count("allowed_during_other_hold", f.allowed_during_other_hold);
  out.fixed("latest_allowed_after_lease_end_ms", f.latest_allowed_ms);
  out.count("stamps_out_of_order", f.stamps_out_of_order);
  out.count("max_concurrent_holders", f.max_concurrent_holders);
  out.count("max_concurrent_believers", f.max_concurrent_believers);
  out.count("fence_violations", f.fence_violations);
  out.count("assigned_over_live_lease", f.assigned_over_live_lease);
  out.count("assigned_after_terminal", f.assigned_after_terminal);
  out.count("extensions_of_dead_leases", f.extensions_of_dead_leases);
  out.count("lease_shortened", f.lease_shortened);
  out.count("unledgered_answers", f.unledgered_answers);
  out.count("untold_assignments", f.untold_assignments);
  out.count("unledgered_extensions", f.unledgered_extensions);
  out.count("untold_extensions", f.untold_extensions);
  out.count("release_mismatches", f.release_mismatches);
  out.count("mutation_mismatches", f.mutation_mismatches);
  out.count("mutations_against_rules", f.mutations_against_rules);
  out.count("observation_mismatches", f.observation_mismatches);
  out.count("foreign_events", f.foreign_events);
  out.count("verdicts_exact", f.verdicts_exact);
  out.count("verdicts_ambiguous", f.verdicts_ambiguous);
  out.count("verdict_mismatches", f.verdict_mismatches);
  out.count("unplaced_verdicts", f.unplaced_verdicts);
  out.count("verdicts_on_head_moved_back", f.verdicts_on_head_moved_back);
  out.count("waits_unbacked", f.waits_unbacked);
  out.count("no_safe_work_unbacked", f.no_safe_work_unbacked);
  out.count("answered_after_close", f.answered_after_close);
  out.count("sessions_open_after", r.sessions.open);
  out.count("sessions_holding_after", r.sessions.holding);
}

void add_checks(ScenarioResult& out, const RunFacts& r, const Findings& f) {
  out.check(!r.timed_out && r.failures == 0,
            "every session process exited cleanly before --timeout");
  out.check(r.journals == r.workers && r.sessions.seen == r.workers,
            "every session left a journal and a session row");
  // R2, by the ledger and by the sessions' own clocks.
  out.check(f.max_concurrent_holders == 1, "the ledger never has two live holders of one item");
  out.check(f.max_concurrent_believers == 1,
            "no two sessions were told they held one item at one moment");
  out.check(f.assigned_over_live_lease == 0 && f.assigned_after_terminal == 0,
            "no assignment took a live or terminal item");
  out.check(f.fence_violations == 0, "each assignment's fence is one above the item's last");
  out.check(f.extensions_of_dead_leases == 0 && f.lease_shortened == 0,
            "only live leases were extended, and never shortened");
  // The journals and the ledger, one to one.
  out.check(f.unledgered_answers == 0 && f.untold_assignments == 0 &&
                f.assigned == f.assigned_events,
            "every assignment told is in the ledger with its fence, and every one there was told");
  out.check(f.unledgered_extensions == 0 && f.untold_extensions == 0,
            "every renewal and heartbeat extension told is in the ledger, and only those");
  out.check(f.release_mismatches == 0, "every release told is in the ledger, and only those");
  out.check(f.mutation_mismatches == 0 && f.allowed_writes == f.mutations_recorded,
            "each allowed record_mutation is exactly one mutation_recorded; no denial is");
  out.check(f.mutations_against_rules == 0, "every recorded mutation passes the gate's rules");
  out.check(f.observation_mismatches == 0 && f.foreign_events == 0,
            "the ledger holds the control plane's observations and nothing else");
  // Every answer and verdict is one the rules give.
  out.check(f.verdict_mismatches == 0 && f.unplaced_verdicts == 0,
            "every gate verdict is the rules' for a state the item was in meanwhile");
  out.check(f.stall_allowed == 0 && f.lost_allowed == 0,
            "an old fence presented after its lease lapsed is always denied");
  out.check(f.allowed_on_lapsed_lease == 0,
            "no record_mutation is allowed under a lease that ended before it decided");
  out.check(f.waits_unbacked == 0, "every wait names another session's live lease end");
  out.check(f.no_safe_work_unbacked == 0 && f.answered_after_close == 0,
            "no_safe_work exactly for closed items");
  out.check(r.sessions.open == 0 && r.sessions.holding == 0,
            "every session closed and holds nothing");
  // Not vacuous: the race, the stalls and the control plane all happened.
  out.check(f.assigned > 0 && f.renewals > 0 && f.allowed_writes > 0,
            "sessions were assigned, renewed and mutated");
  out.check(r.workers <= static_cast<int>(r.slot_count) || f.wait > 0,
            "sessions were told to wait (more sessions than items)");
  out.check(f.no_safe_work > 0 && f.closes > 0 && f.head_moves > 0,
            "the control plane closed items and moved heads, and closed items were no_safe_work");
  out.check(f.handovers_by_lapse > 0 && f.handovers_after_release > 0,
            "items changed hands both by lapse and after a release");
  out.check(f.stall_presentations > 0 && f.stale_denied_as_stale_fence > 0,
            "stalled sessions presented old fences, some as stale_fence");
  out.check(f.gates_behind_writer_stall > 0, "mutations queued behind a stalled writer");
  for (const auto& [reason, n] : f.denials) {
    out.check(n > 0, "some gate call was denied " + reason);
  }
}

}  // namespace

int run_session(const SessionConfig& config) { return Session(config).run(); }

ScenarioResult run(const RunConfig& run) {
  RunFacts r;
  r.workers = run.workers;
  r.slot_count = static_cast<std::size_t>(run.items);
  r.lease = 0.3;
  const double stall_probability = 0.03;
  r.run_s = r.workers <= 4 ? 3.0 : 6.0;

  ControlPlane plane(run, r.slot_count, r.lease, r.run_s);
  Workers processes(run);
  auto session_of = [&](int w) { return fmt::format("{}-s{}", run.project, w); };
  fleet::StartGate gate;
  for (int w = 0; w < r.workers; ++w) {
    processes.spawn("assign", w, &gate, r.lease, stall_probability, 0, -1,
                    {"--session", session_of(w), "--slots", plane.slots_path(), "--duration",
                     fmt::format("{}", r.run_s)});
  }
  sleep_for(0.3);  // let every session open
  const double t0 = seconds_now();
  const double stop = t0 + r.run_s;
  gate.release();

  plane.start(t0);
  r.timed_out = !processes.wait_all(run.deadline, r.failures, [&] {
    if (seconds_now() < stop) plane.act();
    sleep_for(plane.uniform(0.003, 0.012));
  });
  r.elapsed = seconds_now() - t0;

  ControlStore& store = plane.store();
  const auto journals = processes.read_each(0, r.workers, read_journal);
  std::map<std::string, std::vector<StoredEvent>> ledger;
  for (const auto& id : plane.items()) ledger[id] = store.events(id);
  const Findings f = judge(journals, ledger, plane.observations(), plane.writer_stalls());
  r.journals = static_cast<int>(journals.size());
  r.writer_stalls = plane.writer_stalls().size();
  // Every session closed, holding nothing.
  r.sessions = sessions_left(store, run.project);

  ScenarioResult out;
  add_figures(out, r, f);
  add_checks(out, r, f);
  check_verify(out, store, run.store);
  return out;
}

}  // namespace cplane::probe::race
