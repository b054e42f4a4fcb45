// The allocate-race scenario's sessions and the probe's side of it: the
// control plane and the report (probe/allocate_race.hpp; the judgement is
// in allocate_race.cpp).
#include "probe/allocate_race.hpp"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "events/clock.hpp"
#include "probe/end_checks.hpp"
#include "probe/fleet.hpp"
#include "probe/workers.hpp"

namespace cplane::probe::alloc {
namespace {

using fleet::seconds_now;
using fleet::sleep_for;

std::vector<Skip> skips_of(const std::vector<SkippedCandidate>& skipped) {
  std::vector<Skip> out;
  for (const auto& s : skipped) {
    out.push_back({s.item_id, s.reason == SkipReason::routed_to_author ? 'r' : 'f'});
  }
  return out;
}

// ---- one session at work --------------------------------------------------------

constexpr double kReleaseProbability = 0.15;
constexpr double kPreviewProbability = 0.1;

class Session {
 public:
  explicit Session(const SessionConfig& c)
      : c_(c), rng_(std::random_device{}() ^ static_cast<std::uint64_t>(::getpid())) {
    journal_.session = c.session;
  }

  int run() {
    int code = 0;
    try {
      ControlStore store{c_.store};
      store.open_session(c_.session, c_.project);
      if (c_.gate_fd >= 0) fleet::StartGate::wait_on(c_.gate_fd);
      if (!drain(store)) {
        std::cerr << "cplane-probe: session " << c_.session << " gave up after " << c_.give_up
                  << " s\n";
        code = 1;
      }
      Entry e;
      e.kind = EntryKind::session_closed;
      e.t0 = now_micros();
      const auto released = store.close_session(c_.session);
      e.t1 = now_micros();
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
  double uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }

  // Until the project has nothing open; false if it gave up first.
  bool drain(ControlStore& store) {
    const double give_up = fleet::seconds_now() + c_.give_up;
    while (fleet::seconds_now() < give_up) {
      if (uniform(0, 1) < kPreviewProbability) ask(store, false, c_.lease);
      // Every session abandons its third item, and now and then another.
      const bool abandon = given_ == 2 || uniform(0, 1) < c_.abandon_probability;
      const Allocation a = ask(store, true, abandon ? c_.abandon_lease : c_.lease);
      if (a.outcome == AllocateOutcome::assigned) {
        ++given_;
        if (abandon) {
          Entry e;
          e.kind = EntryKind::abandoned;
          e.item = a.item_id;
          e.fence = a.fence;
          e.lease_end = a.lease_expires_at;
          e.t0 = e.t1 = now_micros();
          journal_.entries.push_back(std::move(e));
        } else {
          report(store, a.item_id, a.fence, uniform(0, 1) < kReleaseProbability);
        }
      } else if (a.outcome == AllocateOutcome::wait) {
        sleep_for(std::clamp((a.until - now_micros()) / 1e6, 0.001, 0.01));
      } else {
        const auto counts = store.status_counts(c_.project);
        if (counts.ready == 0 && counts.claimed == 0) return true;
        sleep_for(uniform(0.002, 0.008));
      }
    }
    return false;
  }

  Allocation ask(ControlStore& store, bool apply, double lease) {
    Entry e;
    e.kind = apply ? EntryKind::applied : EntryKind::preview;
    e.t0 = now_micros();
    Allocation a = store.allocate_next(c_.session, apply ? AllocateMode::apply : AllocateMode::preview, {},
                                       Seconds{lease});
    e.t1 = now_micros();
    e.item = a.item_id;
    e.result = std::string(to_string(a.outcome));
    e.fence = a.fence;
    e.lease_end = a.lease_expires_at;
    e.until = a.until;
    e.skipped_total = a.skipped_total;
    e.skipped = skips_of(a.skipped);
    journal_.entries.push_back(std::move(e));
    return a;
  }

  // Finishes the item (done), or gives it back.
  void report(ControlStore& store, const std::string& item, Fence fence, bool release) {
    Entry e;
    e.kind = release ? EntryKind::released : EntryKind::finished;
    e.item = item;
    e.fence = fence;
    e.t0 = now_micros();
    try {
      if (release) {
        store.release(item, fence, "probe gives it back");
      } else {
        store.finish(item, fence, Outcome::done);
      }
      e.result = "ok";
    } catch (const FenceRejected& x) {
      e.result = to_string(x.reason());
    }
    e.t1 = now_micros();
    journal_.entries.push_back(std::move(e));
  }

  const SessionConfig& c_;
  std::mt19937_64 rng_;
  std::int64_t given_ = 0;  // items assigned so far
  Journal journal_;
};

// ---- the probe's side -----------------------------------------------------------

// The control plane of the race, on a connection of its own: what it writes
// are observations, which a power loss may drop without breaking any fence.
// It queues the items, puts open ones on the terminal path and takes them
// off, and requests changes on the author's pull requests (or approves
// them), each told change an Observation.
class ControlPlane {
 public:
  ControlPlane(const RunConfig& run, std::string author)
      : run_(run), store_(run.store, {.durability = Durability::normal}),
        author_(std::move(author)) {
    store_.create_project(run.project, "cplane probe allocate-race");
    store_.grant(run.project, run.project);
  }

  ControlStore& store() { return store_; }
  const std::vector<std::string>& ids() const { return ids_; }
  std::size_t author_prs() const { return authored_.size(); }
  const std::vector<Observation>& observations() const { return observations_; }
  std::int64_t path_refused() const { return path_refused_; }
  // The changes it made after queue() (while the sessions ran).
  std::int64_t changes_during_run() const {
    std::int64_t n = 0;
    for (std::size_t i = setup_observations_; i < observations_.size(); ++i) {
      if (observations_[i].changed) ++n;
    }
    return n;
  }

  // The queue: tasks, issues and pull requests over five priorities; a
  // third of the pull requests are the author's. Some go on the terminal
  // path and get reviews before the sessions start.
  void queue(std::int64_t items) {
    constexpr std::int32_t kPriorities[] = {-1, 0, 0, 0, 0, 0, 1, 1, 2, 5};
    std::vector<std::string> other_prs;
    for (std::int64_t i = 0; i < items; ++i) {
      ControlStore::EnqueueOptions o{.priority = kPriorities[rng_() % std::size(kPriorities)]};
      const double kind = uniform(0, 1);
      if (kind < 0.4) {
        o.kind = WorkKind::pr;
        o.ref = fmt::format("probe/alloc#{}", i);
        o.head = fmt::format("h{}", i);
        o.author = uniform(0, 1) < 0.35 ? author_ : fmt::format("someone-{}", i % 7);
      } else if (kind < 0.6) {
        o.kind = WorkKind::issue;
        o.ref = fmt::format("probe/alloc#{}", i);
      }
      // The first item is the author's, on the terminal path with changes
      // requested: every other session skips it until the author takes it.
      if (i == 0) {
        o = {.kind = WorkKind::pr, .ref = "probe/alloc#0", .head = "h0", .author = author_,
             .priority = 5};
      }
      ids_.push_back(store_.enqueue(run_.project, fmt::format(R"({{"n":{}}})", i), o));
      if (o.author == author_) {
        authored_.push_back(ids_.back());
      } else if (o.kind == WorkKind::pr) {
        other_prs.push_back(ids_.back());
      }
    }
    observe(Kind::enter_path, ids_[0], ReviewState::none);
    observe(Kind::review, ids_[0], ReviewState::changes_requested);
    for (std::size_t i = 1; i < ids_.size(); ++i) {
      if (uniform(0, 1) < 0.03) observe(Kind::enter_path, ids_[i], ReviewState::none);
    }
    for (std::size_t i = 1; i < authored_.size(); ++i) {
      if (uniform(0, 1) < 0.4) observe(Kind::review, authored_[i], ReviewState::changes_requested);
    }
    for (const auto& id : other_prs) {
      // Approved is no routing; the others' prs are never changes_requested
      // (their authors are no sessions: nobody could take them).
      if (uniform(0, 1) < 0.1) observe(Kind::review, id, ReviewState::approved);
    }
    setup_observations_ = observations_.size();
  }

  // While the sessions drain, after a moment's pause: open items go onto
  // the terminal path and off (held ones too), the author's prs get changes
  // requested or approved (held ones too: routing decides the next
  // allocation, not who holds it now).
  void act() {
    sleep_for(uniform(0.001, 0.004));
    const double r = uniform(0, 1);
    if (r < 0.35) {
      if (auto id = open_item(ids_)) observe(Kind::enter_path, *id, ReviewState::none);
    } else if (r < 0.55) {
      if (auto id = open_item(put_on_path_)) observe(Kind::leave_path, *id, ReviewState::none);
    } else if (auto id = open_item(authored_)) {
      observe(Kind::review, *id, r < 0.85 ? ReviewState::changes_requested : ReviewState::approved);
    }
  }

 private:
  using Kind = Observation::Kind;

  double uniform(double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(rng_);
  }

  void observe(Kind kind, const std::string& item, ReviewState review) {
    Observation o{kind, item, review, false, now_micros(), 0};
    try {
      if (kind == Kind::enter_path) {
        o.changed = store_.enter_terminal_path(item, "probe: ready to merge");
        if (o.changed) put_on_path_.push_back(item);
      } else if (kind == Kind::leave_path) {
        o.changed = store_.leave_terminal_path(item);
      } else {
        o.changed = store_.observe_review(item, review);
      }
    } catch (const InvalidArgument&) {
      ++path_refused_;  // finished meanwhile: only an open item goes on the path
      return;
    }
    o.t1 = now_micros();
    observations_.push_back(o);
  }

  std::optional<std::string> open_item(const std::vector<std::string>& from) {
    for (int tries = 0; tries < 8 && !from.empty(); ++tries) {
      const std::string& id = from[rng_() % from.size()];
      const auto status = store_.item(id).status;
      if (status == ItemStatus::ready || status == ItemStatus::claimed) return id;
    }
    return std::nullopt;
  }

  const RunConfig& run_;
  ControlStore store_;
  std::string author_;
  std::mt19937 rng_{std::random_device{}()};
  std::vector<std::string> ids_, authored_, put_on_path_;
  std::vector<Observation> observations_;
  std::size_t setup_observations_ = 0;
  std::int64_t path_refused_ = 0;
};

// What the run itself saw, beside the judge's findings.
struct RunFacts {
  int workers = 0;
  std::int64_t items = 0, author_prs = 0;
  double lease = 0, abandon_lease = 0, elapsed = 0, judge_seconds = 0;
  int failures = 0;
  bool timed_out = false;
  int journals = 0;
  std::int64_t during_run = 0, path_refused = 0, left_on_path = 0;
  ControlStore::StatusCounts counts;
  SessionsLeft sessions;
};

void add_figures(ScenarioResult& out, const RunFacts& r, const Findings& f) {
  out.count("workers", r.workers);
  out.count("items", r.items);
  out.count("author_prs", r.author_prs);
  out.fixed("lease_s", r.lease);
  out.fixed("abandon_lease_s", r.abandon_lease);
  out.fixed("elapsed_s", r.elapsed);
  out.fixed("allocations_per_s", f.rounds / r.elapsed, 0);
  out.count("worker_failures", r.failures);
  out.count("timed_out", r.timed_out ? 1 : 0);
  out.count("rounds", f.rounds);
  out.count("assigned", f.assigned);
  out.count("wait", f.wait);
  out.count("no_safe_work", f.no_safe_work);
  out.count("previews", f.previews);
  out.count("finishes", f.finishes_ok);
  out.count("finishes_refused", f.finishes_refused);
  out.count("releases", f.releases_ok);
  out.count("releases_refused", f.releases_refused);
  out.count("abandoned", f.abandoned);
  out.count("released_by_session_close", f.released_by_close);
  out.count("contended_assignments", f.contended_assignments);
  out.count("told_routed_skips", f.told_routed_skips);
  out.count("told_foreign_skips", f.told_foreign_skips);
  out.count("control_plane_changes_during_run", r.during_run);
  out.count("control_plane_refused", r.path_refused);
  out.count("terminal_path_entered", f.terminal_path_entered);
  out.count("terminal_path_left", f.terminal_path_left);
  out.count("review_changes", f.review_changes);
  out.count("assigned_events", f.assigned_events);
  out.count("released_events", f.released_events);
  out.count("finished_done", f.finished_done);
  out.count("items_done_once", f.items_done_once);
  out.count("items_not_done", f.items_not_done);
  out.count("items_finished_twice", f.items_finished_twice);
  out.count("items_never_assigned", f.items_never_assigned);
  out.count("finished_by_non_holder", f.finished_by_non_holder);
  out.count("handovers_by_lapse", f.handovers_by_lapse);
  out.count("handovers_after_release", f.handovers_after_release);
  out.count("handovers_observed", f.handovers_observed);
  out.fixed("tightest_handover_ms", f.tightest_handover_ms);
  out.count("max_concurrent_believers", f.max_concurrent_believers);
  out.count("assigned_over_live_lease", f.assigned_over_live_lease);
  out.count("assigned_after_terminal", f.assigned_after_terminal);
  out.count("fence_violations", f.fence_violations);
  out.count("routed_assignments", f.routed_assignments);
  out.count("routing_violations", f.routing_violations);
  out.count("plans_checked", f.plans_checked);
  out.count("choice_mismatches", f.choice_mismatches);
  out.count("skip_mismatches", f.skip_mismatches);
  out.count("lease_mismatches", f.lease_mismatches);
  out.count("assigned_on_terminal_path", f.assigned_on_terminal_path);
  out.count("terminal_skipped_for_another", f.terminal_skipped_for_another);
  out.count("chosen_below_skipped_priority", f.chosen_below_skipped_priority);
  out.count("idle_exact", f.idle_exact);
  out.count("idle_unexplained", f.idle_unexplained);
  out.count("idle_while_work_stood_by", f.idle_while_work_stood_by);
  out.count("previews_explained", f.previews_explained);
  out.count("previews_unexplained", f.previews_unexplained);
  out.count("unledgered_answers", f.unledgered_answers);
  out.count("untold_assignments", f.untold_assignments);
  out.count("finish_mismatches", f.finish_mismatches);
  out.count("release_mismatches", f.release_mismatches);
  out.count("observation_mismatches", f.observation_mismatches);
  out.count("malformed_answers", f.malformed_answers);
  out.count("foreign_events", f.foreign_events);
  out.count("stamps_out_of_order", f.stamps_out_of_order);
  out.count("left_on_terminal_path", r.left_on_path);
  out.count("sessions_open_after", r.sessions.open);
  out.count("sessions_holding_after", r.sessions.holding);
  out.fixed("judge_seconds", r.judge_seconds);
}

void add_checks(ScenarioResult& out, const RunFacts& r, const Findings& f) {
  out.check(!r.timed_out && r.failures == 0,
            "every session process exited cleanly before --timeout");
  out.check(r.journals == r.workers && r.sessions.seen == r.workers,
            "every session left a journal and a session row");
  // Every item, exactly once.
  out.check(f.items == r.items && f.items_done_once == r.items && f.finished_done == r.items &&
                r.counts.done == r.items,
            "every item was finished exactly once, done (done == items)");
  out.check(f.items_never_assigned == 0 && f.items_not_done == 0 &&
                f.items_finished_twice == 0 && r.counts.ready + r.counts.claimed +
                r.counts.failed + r.counts.closed + r.counts.invalid == 0,
            "no item was left open, never assigned or finished twice");
  out.check(f.finished_by_non_holder == 0, "every finish was its holder's, under its fence");
  // Never two holders.
  out.check(f.assigned_over_live_lease == 0 && f.assigned_after_terminal == 0,
            "no assignment took a live or terminal item");
  out.check(f.max_concurrent_believers == 1,
            "no two sessions were told they held one item at one moment");
  out.check(f.fence_violations == 0, "each assignment's fence is one above the item's last");
  // The allocator's order and routing, exactly.
  out.check(f.routing_violations == 0,
            "no changes_requested item was assigned to anyone but its author");
  out.check(f.plans_checked == f.assigned_events && f.choice_mismatches == 0,
            "every assignment is the rules' first eligible item at its place in the log");
  out.check(f.skip_mismatches == 0,
            "every assignment listed the candidates the rules skip, in rank order");
  out.check(f.lease_mismatches == 0, "every lease is the one asked for, from the event's time");
  out.check(f.idle_unexplained == 0 && f.idle_while_work_stood_by == 0,
            "every wait and no_safe_work is the rules' answer for a state in its call");
  // The journals and the ledger, one to one.
  out.check(f.unledgered_answers == 0 && f.untold_assignments == 0 &&
                f.assigned == f.assigned_events,
            "every assignment told is in the ledger, and every one there was told");
  out.check(f.finish_mismatches == 0 && f.finishes_ok == r.items,
            "every finish told is in the ledger, and only those");
  out.check(f.release_mismatches == 0 && f.releases_ok + f.released_by_close == f.released_events,
            "every release told is in the ledger, and only those");
  out.check(f.finishes_refused == 0 && f.releases_refused == 0,
            "no finish or release under a live lease was refused");
  out.check(f.observation_mismatches == 0 && f.foreign_events == 0,
            "the ledger holds the control plane's changes and nothing else");
  out.check(f.malformed_answers == 0, "every answer is one the API has");
  out.check(r.left_on_path == 0, "finishing took every item off the terminal path");
  out.check(r.sessions.open == 0 && r.sessions.holding == 0,
            "every session closed and holds nothing");
  // Not vacuous: the race, the routing and the terminal path all happened.
  out.check(r.workers == 1 || (f.told_foreign_skips > 0 && f.told_routed_skips > 0),
            "sessions were told of foreign leases and routed items they skipped");
  out.check(f.routed_assignments > 0, "the author was given its changes_requested prs");
  out.check(f.assigned_on_terminal_path > 0 && r.during_run > 0,
            "terminal-path items were allocated; the control plane changed things meanwhile");
  out.check(f.handovers_after_release > 0 && f.handovers_by_lapse > 0,
            "items changed hands both after a release and by lapse");
}

}  // namespace

int run_session(const SessionConfig& config) { return Session(config).run(); }

ScenarioResult run(const RunConfig& run) {
  RunFacts r;
  r.workers = run.workers;
  r.items = run.items;
  r.lease = 30;
  r.abandon_lease = 0.25;
  const double abandon_probability = 0.02;
  auto session_of = [&](int w) { return fmt::format("{}-s{}", run.project, w); };

  ControlPlane plane(run, session_of(0));  // s0 is the author
  plane.queue(r.items);
  Workers processes(run);
  fleet::StartGate gate;
  for (int w = 0; w < r.workers; ++w) {
    processes.spawn("allocate", w, &gate, r.lease, abandon_probability, r.abandon_lease, -1,
                    {"--session", session_of(w), "--duration", fmt::format("{}", run.timeout)});
  }
  sleep_for(0.3);  // let every session open
  const double t0 = seconds_now();
  gate.release();
  r.timed_out = !processes.wait_all(run.deadline, r.failures, [&] { plane.act(); });
  r.elapsed = seconds_now() - t0;

  ControlStore& store = plane.store();
  const auto journals = processes.read_each(0, r.workers, read_journal);
  std::map<std::string, std::vector<StoredEvent>> ledger;
  for (const auto& id : plane.ids()) ledger[id] = store.events(id);
  const double j0 = seconds_now();
  const Findings f = judge(journals, ledger, plane.observations(),
                           static_cast<Micros>(r.lease * 1e6),
                           static_cast<Micros>(r.abandon_lease * 1e6));
  r.judge_seconds = seconds_now() - j0;

  r.journals = static_cast<int>(journals.size());
  r.author_prs = static_cast<std::int64_t>(plane.author_prs());
  r.during_run = plane.changes_during_run();
  r.path_refused = plane.path_refused();
  r.counts = store.status_counts(run.project);
  const std::set<std::string> id_set(plane.ids().begin(), plane.ids().end());
  for (const auto& lock : store.terminal_path()) {
    r.left_on_path += static_cast<std::int64_t>(id_set.count(lock.item_id));
  }
  r.sessions = sessions_left(store, run.project);

  ScenarioResult out;
  add_figures(out, r, f);
  add_checks(out, r, f);
  check_verify(out, store, run.store);
  return out;
}

}  // namespace cplane::probe::alloc
