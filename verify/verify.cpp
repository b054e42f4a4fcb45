// verify and rebuild, by projection.
//
// The log is read stream by stream: for each stream kind, one scan of its
// events in (stream id, seq) order, and for each projection of that kind one
// scan of its rows in (stream id, key) order. The three are merged on the
// stream id, so that only one stream's events and rows are in memory at a
// time. For each stream:
//   * the audit folds its events through `apply` and checks what only the
//     log can show (creation, terminal events, fences, leases), visiting
//     every event kind exhaustively;
//   * each projection compares the rows the fold made with the stored rows
//     of that stream, field by field, and names a problem kind for each
//     difference (verify), or lists the row to write (rebuild).
// A projection is a descriptor (struct with static members below): its
// table, its stream kind, how to scan its rows, the rows a stream folds to,
// the field diff and its problem kinds, put and delete. A new row table is
// one descriptor and one line in the stream kind's list.
#include "verify/verify.hpp"

#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "events/codec.hpp"
#include "events/json.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"
#include "verify/chain_check.hpp"
#include "verify/quote.hpp"

namespace cplane {

RebuildRefused::RebuildRefused(std::vector<LedgerProblem> problems, std::int64_t total)
    : Error(fmt::format(
          "rebuild refused, nothing changed: the log fails its own checks ({} problem(s); the "
          "first: {} {}): rows folded from it would be wrong. Run cplane verify to see them "
          "all; recover with cplane recover, or restore an export",
          total, problems.empty() ? std::string_view() : to_string(problems[0].kind),
          problems.empty() ? "" : problems[0].detail)),
      problems_(std::move(problems)),
      total_(total) {}

namespace {

constexpr std::int64_t kProgressEvery = 65536;

// A difference between a stored row and the fold, one field, and the kind
// of problem verify names it.
struct FieldDiff {
  std::string field;
  ProblemKind kind;
  std::string stored;
  std::string folded;
};

std::vector<std::string> describe(const std::vector<FieldDiff>& diffs) {
  std::vector<std::string> out;
  for (const auto& d : diffs) out.push_back(fmt::format("{}: {} -> {}", d.field, d.stored, d.folded));
  return out;
}

// Collects field differences, each as text, under the kind given last.
class Differ {
 public:
  explicit Differ(ProblemKind kind) : kind_(kind) {}
  // The kind the fields added from now on are reported as.
  Differ& as(ProblemKind kind) {
    kind_ = kind;
    return *this;
  }
  template <class A, class B>
  Differ& add(const char* field, const A& stored, const B& folded) {
    if (stored != folded) {
      out_.push_back({field, kind_, fmt::format("{}", stored), fmt::format("{}", folded)});
    }
    return *this;
  }
  // Compared as they are; quoted only when they differ (the hot path of a
  // clean verify formats nothing).
  Differ& text(const char* field, const std::string& stored, const std::string& folded) {
    if (stored != folded) out_.push_back({field, kind_, quoted(stored), quoted(folded)});
    return *this;
  }
  std::vector<FieldDiff> done() { return std::move(out_); }

 private:
  ProblemKind kind_;
  std::vector<FieldDiff> out_;
};

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

// ---- one stream's audit ---------------------------------------------------------

// What verify learns across streams: the projects the log created, and the
// streams an event was filed away from by its columns (their folds miss it).
struct LogFacts {
  std::set<std::string> projects;
  std::map<std::string, Seq> project_created_at;  // the seq of each project's creation
  bool project_log_unreadable = false;
  std::set<std::pair<StreamKind, std::string>> incomplete;
  LogChain chain;  // the log as a whole, against its digest
  // What items are checked against, from the streams replayed before them:
  // when each grant was made, and each session's life.
  std::map<std::pair<std::string, std::string>, Seq> grants;  // (project, actor) -> seq
  struct SessionLife {
    Seq opened = 0, closed = 0;  // seqs of session_opened, session_closed (0: open)
    std::string actor;
  };
  std::map<std::string, SessionLife> sessions;
  bool session_log_unreadable = false;
  // What schedules are checked against: every item queued under a
  // schedule's key (item id -> key), and those a fire named. Gathered as the
  // audit goes (it sees the facts as read-only otherwise).
  mutable std::map<std::string, std::string> schedule_items;
  mutable std::set<std::string> fired_items;
  bool item_log_unreadable = false;

  // Why `session` was not open at `seq`, or "" when it was (or the session
  // log cannot say).
  std::string not_open(const std::string& session, Seq seq) const {
    if (session_log_unreadable) return {};
    const auto life = sessions.find(session);
    if (life == sessions.end()) return fmt::format("session {} was never opened", quoted(session));
    if (life->second.opened > seq) {
      return fmt::format("session {} was opened later (seq {})", quoted(session),
                         life->second.opened);
    }
    if (life->second.closed != 0 && life->second.closed < seq) {
      return fmt::format("session {} was closed at seq {}", quoted(session), life->second.closed);
    }
    return {};
  }
};

// The fold of one stream, plus what the fold saw that no row can show.
struct StreamAudit {
  StreamRef stream;
  std::int64_t events = 0;
  Micros first_at = 0, last_at = 0;  // of its readable events
  Seq first_seq = 0, last_seq = 0;
  // What the hash chain says about the stream: reported before the fold's
  // problems, since it names the cause.
  std::vector<LedgerProblem> chain_problems;
  // An event of this stream could not be decoded, or was filed elsewhere by
  // its columns: the fold is not the stream's, so nothing is compared with
  // it, and no check claims what the log lacks.
  bool unreadable = false;
  std::vector<LedgerProblem> problems;
  // Item streams.
  ItemRow item;
  bool created = false;
  bool reported_no_creation = false;
  bool reported_before_project = false;
  int terminals = 0;
  // Incident streams.
  std::optional<IncidentLinkRow> incident;
  // Session streams.
  std::optional<SessionRow> session;
  Seq opened_seq = 0, closed_seq = 0;
  bool reported_outlived = false;  // an item held past its session's close
  // Project streams.
  std::optional<ProjectRow> project;
  Seq project_created_seq = 0;  // the seq of its project_created
  std::optional<ScheduleRow> schedule;
  std::map<std::string, ProjectActorRow> grants;  // by actor

  // The ids a problem names: the item for an item stream, else the project.
  LedgerProblem problem(ProblemKind kind, std::string project_id, std::string detail) const {
    return {kind, stream.kind == StreamKind::item ? stream.id : std::string(),
            std::move(project_id), std::move(detail)};
  }
};

// Decodes a raw event and checks its index columns against its body. Adds
// problems to the audit; returns nullopt when the body cannot be read.
std::optional<StoredEvent> read_event(const storage::RawEvent& raw, StreamAudit& audit,
                                      LogFacts& facts) {
  const std::string item_id = raw.stream_kind == "item" ? raw.stream_id : raw.item_id;
  StoredEvent stored{raw.seq, {}};
  try {
    stored.event = decode(raw.body);
  } catch (const UnknownEventType& e) {
    audit.problems.push_back(
        {ProblemKind::unknown_event_type, item_id, raw.project_id,
         fmt::format("event seq {} (type column '{}'): {}", raw.seq, raw.type, e.what())});
    return std::nullopt;
  } catch (const UnreadableEvent& e) {
    audit.problems.push_back(
        {ProblemKind::undecodable_event, item_id, raw.project_id,
         fmt::format("event seq {} (type column '{}'): {}", raw.seq, raw.type, e.what())});
    return std::nullopt;
  }
  const Event& e = stored.event;
  const StreamRef stream = stream_of(e);
  if (!raw.bad_column.empty()) {
    audit.problems.push_back({ProblemKind::index_disagrees, e.item_id, e.project_id,
                              fmt::format("event seq {}: {} (edited outside cplane)", raw.seq,
                                          raw.bad_column)});
  }
  auto check = [&](const char* column, const auto& stored_value, const auto& body_value,
                   bool files_it) {
    if (stored_value == body_value) return;
    if (files_it) facts.incomplete.insert({stream.kind, stream.id});
    // Named by what the body says (the truth), not by the columns.
    audit.problems.push_back({ProblemKind::index_disagrees, e.item_id, e.project_id,
                              fmt::format("event seq {}: column {} is {} but the body says {}",
                                          raw.seq, column, quoted(fmt::format("{}", stored_value)),
                                          quoted(fmt::format("{}", body_value)))});
  };
  check("stream_kind", raw.stream_kind, std::string(to_string(stream.kind)), true);
  check("stream_id", raw.stream_id, stream.id, true);
  check("item_id", raw.item_id, e.item_id, false);
  check("project_id", raw.project_id, e.project_id, false);
  check("type", raw.type, std::string(type_name(e.body)), false);
  check("at", raw.at, e.at, false);
  return stored;
}

// The checks of one event against what its stream's events before it left,
// one case per event kind (no catch-all: a new kind must be decided on
// here). Events of another stream kind than the audit's were filed here by
// their columns only (read_event reported them) and are skipped.
void audit_event(StreamAudit& a, const StoredEvent& stored, const LogFacts& facts) {
  const Event& e = stored.event;
  const Seq seq = stored.seq;
  auto problem = [&](ProblemKind kind, std::string detail) {
    a.problems.push_back(a.problem(kind, e.project_id, std::move(detail)));
  };
  auto item_created_first = [&] {
    if (!a.created && !a.reported_no_creation) {
      a.reported_no_creation = true;
      problem(ProblemKind::no_creation_event,
              fmt::format("item {} has a {} event (seq {}) before any queued "
                          "event",
                          a.stream.id, type_name(e.body), seq));
    }
    if (a.terminals > 0) {
      problem(ProblemKind::event_after_terminal,
              fmt::format("event seq {} ({}) follows the terminal event of item {}", seq,
                          type_name(e.body), a.stream.id));
    }
  };
  // A claim, by a worker or by a session: the same fence counter and rules.
  auto audit_claim = [&](const std::string& owner, Fence fence, std::uint32_t attempt,
                         Micros lease_expires_at) {
    item_created_first();
    // After an unreadable event the fold no longer knows the fence,
    // status or lease it left: checks against them would only
    // restate that fault as another.
    if (a.unreadable) return;
    // Exactly one worker at a time: a claim takes a ready item or
    // one whose lease had lapsed when the claim was made.
    if (a.item.status == ItemStatus::scheduled && !claimable(a.item, e.at)) {
      problem(ProblemKind::lifecycle_not_allowed,
              fmt::format("claim seq {} by {} at {} took the item before its run_at {}", seq,
                          owner, e.at, a.item.run_at));
    }
    if (a.item.attempt_limit != 0 && a.item.attempts >= a.item.attempt_limit &&
        a.item.status != ItemStatus::claimed) {
      problem(ProblemKind::lifecycle_not_allowed,
              fmt::format("claim seq {} by {} is attempt {} of an item whose limit is {}", seq,
                          owner, a.item.attempts + 1, a.item.attempt_limit));
    } else if (lapsed_exhausted(a.item, e.at)) {
      problem(ProblemKind::lifecycle_not_allowed,
              fmt::format("claim seq {} by {} took the item after its {} attempt(s) ran out", seq,
                          owner, a.item.attempts));
    } else if (a.item.status == ItemStatus::claimed && !claimable(a.item, e.at)) {
      problem(ProblemKind::claim_while_leased,
              fmt::format("claim seq {} by {} at {} took the item while {}'s lease ran "
                          "until {}",
                          seq, owner, e.at, a.item.owner, a.item.lease_expires_at));
    }
    if (!fence_rises(a.item.fence, fence)) {
      problem(ProblemKind::fence_not_monotonic,
              fmt::format("claim seq {} has fence {}, not above the earlier fence {}", seq,
                          fence, a.item.fence));
    } else if (fence != a.item.fence + 1) {
      // Every claim takes the next fence: a jump means claims are
      // missing from the log (or a fence was forged).
      problem(ProblemKind::fence_skipped,
              fmt::format("claim seq {} has fence {}, but the fence before it was {}: "
                          "claims are missing",
                          seq, fence, a.item.fence));
    }
    // (A fence that does not rise already names this claim's fault.)
    if (fence == a.item.fence + 1 && attempt != a.item.attempts + 1) {
      problem(ProblemKind::attempt_not_rising,
              fmt::format("claim seq {} is attempt {}, after {} earlier claim(s)", seq,
                          attempt, a.item.attempts));
    }
    if (lease_expires_at <= e.at) {
      problem(ProblemKind::lease_before_claim,
              fmt::format("claim seq {} at {} has a lease that ends at {}, not after it",
                          seq, e.at, lease_expires_at));
    }
  };
  auto session_open_first = [&] {
    if (!a.session && !a.reported_no_creation) {
      a.reported_no_creation = true;
      problem(ProblemKind::no_creation_event,
              fmt::format("session {} has a {} event (seq {}) before session_opened",
                          quoted(a.stream.id), type_name(e.body), seq));
    }
    if (a.session && !a.session->is_open()) {
      problem(ProblemKind::event_after_terminal,
              fmt::format("event seq {} ({}) follows the close of session {}", seq,
                          type_name(e.body), quoted(a.stream.id)));
    }
  };
  auto schedule_created_first = [&] {
    if (!a.schedule && !a.reported_no_creation) {
      a.reported_no_creation = true;
      problem(ProblemKind::no_creation_event,
              fmt::format("schedule {} has a {} event (seq {}) before schedule_created",
                          quoted(a.stream.id), type_name(e.body), seq));
    }
    if (a.schedule && a.schedule->removed) {
      problem(ProblemKind::event_after_terminal,
              fmt::format("event seq {} ({}) follows the removal of schedule {}", seq,
                          type_name(e.body), quoted(a.stream.id)));
    }
  };
  auto project_created_first = [&] {
    if (!a.project && !a.reported_no_creation) {
      a.reported_no_creation = true;
      problem(ProblemKind::no_creation_event,
              fmt::format("project {} has a {} event (seq {}) before project_created",
                          a.stream.id, type_name(e.body), seq));
    }
  };
  if (stream_of(e) != a.stream) return;  // filed here by its columns only
  // An item still held by a session after that session closed: closing
  // releases every item first.
  auto outlived = [&](const char* when) {
    if (a.unreadable || a.reported_outlived || a.item.status != ItemStatus::claimed ||
        a.item.session.empty()) {
      return;
    }
    const auto life = facts.sessions.find(a.item.session);
    if (life == facts.sessions.end() || life->second.closed == 0 || life->second.closed > seq) {
      return;
    }
    a.reported_outlived = true;
    problem(ProblemKind::session_closed_while_holding,
            fmt::format("item {} was still held by session {} {} (the session closed at seq {})",
                        a.stream.id, quoted(a.item.session), when, life->second.closed));
  };
  if (a.stream.kind == StreamKind::item) outlived(fmt::format("at seq {}", seq).c_str());
  auto forge_fact = [&] {
    if (!a.unreadable && a.created && a.item.kind != WorkKind::pr) {
      problem(ProblemKind::forge_fact_invalid,
              fmt::format("{} seq {} on item {}, which is {} {}: only a pr "
                          "has one",
                          type_name(e.body), seq, a.stream.id,
                          a.item.kind == WorkKind::issue ? "an" : "a", to_string(a.item.kind)));
    }
  };
  // What the log must say on its own, whatever the rows: an item's events
  // come after its project's creation.
  if (a.stream.kind == StreamKind::item) {
    const auto created = facts.project_created_at.find(e.project_id);
    if (created != facts.project_created_at.end() && seq < created->second &&
        !a.reported_before_project) {
      a.reported_before_project = true;
      problem(ProblemKind::event_before_project,
              fmt::format("event seq {} ({}) of item {} comes before project {} was created (seq "
                          "{})",
                          seq, type_name(e.body), a.stream.id, e.project_id, created->second));
    }
  }
  std::visit(
      Overloaded{
          [&](const ItemQueued& queued) {
            try {
              require_payload(queued.payload);
            } catch (const InvalidArgument& bad) {
              problem(ProblemKind::invalid_payload,
                      fmt::format("queued seq {} of item {} has a payload no command accepts: {}",
                                  seq, a.stream.id, bad.what()));
            }
            if (a.created) {
              problem(ProblemKind::duplicate_creation_event,
                      fmt::format("item {} is queued again by event seq {}", a.stream.id, seq));
            }
            if (a.terminals > 0) {
              problem(ProblemKind::event_after_terminal,
                      fmt::format("event seq {} (queued) follows the terminal event of item {}",
                                  seq, a.stream.id));
            }
            a.created = true;
            if (queued.key.rfind("schedule:", 0) == 0) {
              facts.schedule_items.emplace(a.stream.id, queued.key);
            }
            if (queued.kind != WorkKind::pr && (!queued.head.empty() || !queued.author.empty())) {
              problem(ProblemKind::forge_fact_invalid,
                      fmt::format("queued seq {} gives {} {} a head or an author: only a pr has "
                                  "them",
                                  seq, to_string(queued.kind), a.stream.id));
            }
          },
          [&](const ItemClaimed& claimed) {
            audit_claim(claimed.owner, claimed.fence, claimed.attempt, claimed.lease_expires_at);
          },
          [&](const ItemAssigned& assigned) {
            audit_claim(assigned.session, assigned.fence, assigned.attempt,
                        assigned.lease_expires_at);
            // What assign_and_lease checks before it appends one.
            std::string why = facts.not_open(assigned.session, seq);
            const auto life = facts.sessions.find(assigned.session);
            if (why.empty() && life != facts.sessions.end() && !life->second.actor.empty() &&
                !facts.project_log_unreadable) {
              const auto grant = facts.grants.find({e.project_id, life->second.actor});
              if (grant == facts.grants.end() || grant->second > seq) {
                why = fmt::format("session {} works for {}, who may not see project {} (R3)",
                                  quoted(assigned.session), quoted(life->second.actor),
                                  quoted(e.project_id));
              }
            }
            if (why.empty() && std::adjacent_find(assigned.actions.begin(), assigned.actions.end(),
                                                  std::greater_equal<>()) !=
                                   assigned.actions.end()) {
              why = "its actions are unsorted or repeated";
            }
            if (why.empty() && !a.unreadable && assigned.expected_head != a.item.head) {
              why = fmt::format("it pins head {} while the item's head was {} (R4)",
                                quoted(assigned.expected_head), quoted(a.item.head));
            }
            if (!why.empty()) {
              problem(ProblemKind::assignment_not_allowed,
                      fmt::format("assigned seq {} of item {} to {}: {}", seq, a.stream.id,
                                  quoted(assigned.session), why));
            }
          },
          [&](const HeadMoved&) {
            item_created_first();
            forge_fact();
          },
          [&](const ReviewChanged&) {
            item_created_first();
            forge_fact();
          },
          [&](const ItemClosed&) {
            item_created_first();
            ++a.terminals;
            if (a.terminals == 2) {
              problem(ProblemKind::two_terminal_events,
                      fmt::format("item {} has a second terminal event (closed at seq {})",
                                  a.stream.id, seq));
            }
          },
          [&](const MutationRecorded& m) {
            item_created_first();
            if (a.unreadable) return;
            // The gate records a mutation only under the live assignment
            // that allowed it: the same rule judges it here.
            const std::optional<std::string> head =
                m.head.empty() ? std::nullopt : std::optional<std::string>(m.head);
            if (const auto closed = facts.not_open(m.session, seq); !closed.empty()) {
              problem(ProblemKind::mutation_without_assignment,
                      fmt::format("mutation_recorded seq {} by {} ({}): {}", seq,
                                  quoted(m.session), quoted(m.action), closed));
            } else if (auto why =
                           gate_refusal(&a.item, true, m.session, m.fence, m.action, head, e.at)) {
              problem(ProblemKind::mutation_without_assignment,
                      fmt::format("mutation_recorded seq {} by {} ({}) would be denied: {} (the "
                                  "item was {}, held by {} under fence {} until {})",
                                  seq, quoted(m.session), quoted(m.action), to_string(*why),
                                  to_string(a.item.status), quoted(a.item.session), a.item.fence,
                                  a.item.lease_expires_at));
            }
          },
          [&](const SessionOpened&) {
            if (!a.session) a.opened_seq = seq;
            if (a.session) {
              problem(ProblemKind::duplicate_creation_event,
                      fmt::format("session {} is opened again by event seq {}", quoted(a.stream.id),
                                  seq));
            }
          },
          [&](const SessionSeen&) { session_open_first(); },
          [&](const TerminalPathEntered&) { item_created_first(); },
          [&](const TerminalPathLeft&) { item_created_first(); },
          [](const IncidentLinked&) {},  // each is the link whole: the fold is the check
          [&](const SessionClosed&) {
            session_open_first();
            if (a.session && a.session->is_open()) a.closed_seq = seq;
          },
          [&](const ItemFinished& finished) {
            item_created_first();
            ++a.terminals;
            if (a.terminals == 2) {
              problem(ProblemKind::two_terminal_events,
                      fmt::format("item {} has a second terminal event ({} at seq {})",
                                  a.stream.id, type_name(e.body), seq));
            }
            if (!a.unreadable && fence_refusal(&a.item, finished.fence)) {
              problem(ProblemKind::stale_fence_accepted,
                      fmt::format("{} at seq {} carries fence {} while the item was {} under "
                                  "fence {}",
                                  type_name(e.body), seq, finished.fence, to_string(a.item.status),
                                  a.item.fence));
            }
          },
          [&](const LeaseExtended& extended) {
            item_created_first();
            if (!a.unreadable && fence_refusal(&a.item, extended.fence)) {
              problem(ProblemKind::stale_fence_accepted,
                      fmt::format("lease_extended at seq {} carries fence {} while the item was {} "
                                  "under fence {}",
                                  seq, extended.fence, to_string(a.item.status), a.item.fence));
            }
            if (extended.lease_expires_at <= e.at) {
              problem(ProblemKind::lease_before_claim,
                      fmt::format("lease_extended seq {} at {} ends the lease at {}, not after it",
                                  seq, e.at, extended.lease_expires_at));
            }
          },
          [&](const LeaseExpired& expired) {
            item_created_first();
            if (a.unreadable) return;
            // Only the current claim's lease can lapse, and only once it
            // has: an expiry under another fence, or before the lease's
            // end, is not what the sweep records.
            if (fence_refusal(&a.item, expired.fence)) {
              problem(ProblemKind::stale_fence_accepted,
                      fmt::format("lease_expired at seq {} names fence {} while the item was {} "
                                  "under fence {}",
                                  seq, expired.fence, to_string(a.item.status), a.item.fence));
            } else if (a.item.lease_expires_at > e.at ||
                       expired.lease_expires_at != a.item.lease_expires_at ||
                       expired.owner != a.item.owner) {
              problem(ProblemKind::expired_while_leased,
                      fmt::format("lease_expired at seq {} (at {}) for {}'s lease to {}, but the "
                                  "lease was {}'s and ran until {}",
                                  seq, e.at, expired.owner, expired.lease_expires_at,
                                  a.item.owner, a.item.lease_expires_at));
            }
          },
          [&](const ItemReleased& released) {
            item_created_first();
            if (!a.unreadable && fence_refusal(&a.item, released.fence)) {
              problem(ProblemKind::stale_fence_accepted,
                      fmt::format("released at seq {} carries fence {} while the item was {} under "
                                  "fence {}",
                                  seq, released.fence, to_string(a.item.status), a.item.fence));
            }
          },
          [&](const AttemptFailed& failed) {
            item_created_first();
            if (a.unreadable) return;
            if (fence_refusal(&a.item, failed.fence)) {
              problem(ProblemKind::stale_fence_accepted,
                      fmt::format("attempt_failed at seq {} carries fence {} while the item was {} "
                                  "under fence {}",
                                  seq, failed.fence, to_string(a.item.status), a.item.fence));
            } else if (a.item.attempt_limit == 0 || !attempts_left(a.item)) {
              problem(ProblemKind::lifecycle_not_allowed,
                      fmt::format("attempt_failed at seq {} retries attempt {} of an item {}", seq,
                                  a.item.attempts,
                                  a.item.attempt_limit == 0
                                      ? std::string("with no retry policy")
                                      : fmt::format("whose {} attempts ran out",
                                                    a.item.attempt_limit)));
            }
          },
          [&](const ItemRetried&) {
            // The one event that may follow a terminal one: it reopens the item.
            if (!a.created && !a.reported_no_creation) {
              a.reported_no_creation = true;
              problem(ProblemKind::no_creation_event,
                      fmt::format("item {} has a retried event (seq {}) before any queued event",
                                  a.stream.id, seq));
            }
            if (a.unreadable) return;
            if (a.item.status != ItemStatus::failed && a.item.status != ItemStatus::cancelled) {
              problem(ProblemKind::lifecycle_not_allowed,
                      fmt::format("retried at seq {} redrove item {} while it was {}: only a "
                                  "failed or cancelled item is retried",
                                  seq, a.stream.id, to_string(a.item.status)));
            }
            a.terminals = 0;
          },
          [&](const ItemRescheduled&) {
            item_created_first();
            if (!a.unreadable && a.item.status != ItemStatus::ready &&
                a.item.status != ItemStatus::scheduled) {
              problem(ProblemKind::lifecycle_not_allowed,
                      fmt::format("rescheduled at seq {} moved item {} while it was {}", seq,
                                  a.stream.id, to_string(a.item.status)));
            }
          },
          [&](const ItemCancelled& cancelled) {
            item_created_first();
            ++a.terminals;
            if (a.terminals == 2) {
              problem(ProblemKind::two_terminal_events,
                      fmt::format("item {} has a second terminal event (cancelled at seq {})",
                                  a.stream.id, seq));
            }
            if (a.unreadable) return;
            const Fence held = a.item.status == ItemStatus::claimed ? a.item.fence : 0;
            if (cancelled.fence != held) {
              problem(ProblemKind::stale_fence_accepted,
                      fmt::format("cancelled at seq {} names fence {} while the item was {} under "
                                  "fence {}",
                                  seq, cancelled.fence, to_string(a.item.status), a.item.fence));
            }
          },
          [&](const ScheduleCreated&) {
            if (a.schedule) {
              problem(ProblemKind::duplicate_creation_event,
                      fmt::format("schedule {} is created again by event seq {}",
                                  quoted(a.stream.id), seq));
            }
          },
          [&](const ScheduleFired& fired) {
            schedule_created_first();
            if (!a.schedule) return;
            if (!a.schedule->active()) {
              problem(ProblemKind::lifecycle_not_allowed,
                      fmt::format("schedule_fired seq {} fires schedule {} while it is {}", seq,
                                  quoted(a.stream.id), a.schedule->removed ? "removed" : "paused"));
            }
            if (fired.occurrence <= a.schedule->last_occurrence) {
              problem(ProblemKind::schedule_fire_unmatched,
                      fmt::format("schedule_fired seq {} fires occurrence {} of schedule {}, not "
                                  "after its last ({}): an occurrence fired twice",
                                  seq, fired.occurrence, quoted(a.stream.id),
                                  a.schedule->last_occurrence));
            }
            if (facts.item_log_unreadable) return;
            const auto made = facts.schedule_items.find(fired.item_id);
            const std::string key = schedule_item_key(a.stream.id, fired.occurrence);
            if (made == facts.schedule_items.end() || made->second != key) {
              problem(ProblemKind::schedule_fire_unmatched,
                      fmt::format("schedule_fired seq {} names item {} for occurrence {} of "
                                  "schedule {}, but {}",
                                  seq, quoted(fired.item_id), fired.occurrence,
                                  quoted(a.stream.id),
                                  made == facts.schedule_items.end()
                                      ? std::string("no item was queued under that schedule")
                                      : fmt::format("that item is keyed {}", quoted(made->second))));
            } else if (!facts.fired_items.insert(fired.item_id).second) {
              problem(ProblemKind::schedule_fire_unmatched,
                      fmt::format("schedule_fired seq {} names item {}, which another fire named "
                                  "already",
                                  seq, quoted(fired.item_id)));
            }
          },
          [&](const ScheduleSkipped& skipped) {
            schedule_created_first();
            if (a.schedule && skipped.occurrence <= a.schedule->last_occurrence) {
              problem(ProblemKind::schedule_fire_unmatched,
                      fmt::format("schedule_skipped seq {} passes over occurrence {} of schedule "
                                  "{}, not after its last ({})",
                                  seq, skipped.occurrence, quoted(a.stream.id),
                                  a.schedule->last_occurrence));
            }
          },
          [&](const SchedulePaused&) { schedule_created_first(); },
          [&](const ScheduleResumed&) { schedule_created_first(); },
          [&](const ScheduleRemoved&) { schedule_created_first(); },
          [&](const RetryPolicySet&) { project_created_first(); },
          [&](const ProjectPaused&) { project_created_first(); },
          [&](const ProjectResumed&) { project_created_first(); },
          [&](const ProjectCreated&) {
            if (a.project) {
              problem(ProblemKind::duplicate_creation_event,
                      fmt::format("project {} is created again by event seq {}", a.stream.id, seq));
            }
          },
          [&](const ActorAssigned& granted) {
            if (!a.project && !a.reported_no_creation) {
              problem(ProblemKind::grant_without_project,
                      fmt::format("actor_assigned seq {} grants {} project {}, which its log has "
                                  "not created (yet)",
                                  seq, granted.actor, a.stream.id));
            }
          },
      },
      e.body);
  // The fold: the same apply the commands use.
  switch (a.stream.kind) {
    case StreamKind::item:
      a.item = apply(std::move(a.item), stored);
      break;
    case StreamKind::incident:
      a.incident = apply(a.incident.value_or(IncidentLinkRow{}), stored);
      break;
    case StreamKind::schedule:
      if (a.schedule || std::holds_alternative<ScheduleCreated>(e.body)) {
        a.schedule = apply(a.schedule.value_or(ScheduleRow{}), stored);
      }
      break;
    case StreamKind::session:
      if (a.session || std::holds_alternative<SessionOpened>(e.body)) {
        a.session = apply(a.session.value_or(SessionRow{}), stored);
      }
      break;
    case StreamKind::project:
      if (std::holds_alternative<ProjectCreated>(e.body)) {
        if (!a.project) a.project_created_seq = stored.seq;
        a.project = apply(a.project.value_or(ProjectRow{}), stored);
      } else if (auto* granted = std::get_if<ActorAssigned>(&e.body)) {
        auto& row = a.grants[granted->actor];
        row = apply(std::move(row), stored);
      } else if (a.project) {
        a.project = apply(std::move(*a.project), stored);  // its policy, its pause
      }
      break;
  }
}

// After an item stream's last event: it must not still be held by a
// session that has closed.
void audit_end(StreamAudit& a, const LogFacts& facts) {
  if (a.unreadable || a.reported_outlived || a.item.status != ItemStatus::claimed ||
      a.item.session.empty()) {
    return;
  }
  const auto life = facts.sessions.find(a.item.session);
  if (life == facts.sessions.end() || life->second.closed == 0) return;
  a.reported_outlived = true;
  a.problems.push_back(a.problem(
      ProblemKind::session_closed_while_holding, a.item.project_id,
      fmt::format("item {} is still held by session {}, which closed at seq {} without "
                  "releasing it",
                  a.stream.id, quoted(a.item.session), life->second.closed)));
}

void fold_event(StreamAudit& audit, const storage::RawEvent& raw, LogFacts& facts) {
  auto stored = read_event(raw, audit, facts);
  // An event its body files elsewhere is not this stream's (read_event
  // reported its columns): it neither counts nor folds here.
  if (stored && stream_of(stored->event) != audit.stream) return;
  ++audit.events;
  if (audit.first_seq == 0) audit.first_seq = raw.seq;
  audit.last_seq = std::max(audit.last_seq, raw.seq);
  if (stored) {
    if (audit.first_at == 0 || stored->event.at < audit.first_at) audit.first_at = stored->event.at;
    audit.last_at = std::max(audit.last_at, stored->event.at);
  }
  if (!stored) {
    // An unreadable event may be the creation: claim nothing about what the
    // log lacks once part of it cannot be read.
    audit.unreadable = true;
    audit.reported_no_creation = true;
    return;
  }
  audit_event(audit, *stored, facts);
}

// What a summary counts of one stream's fold.
void summarize(const StreamAudit& audit, LogSummary& summary) {
  if (audit.stream.kind == StreamKind::item && audit.created && !audit.unreadable) {
    ++summary.items_by_status[static_cast<std::size_t>(audit.item.status)];
  }
  if (audit.stream.kind == StreamKind::project && audit.project) ++summary.projects;
  if (audit.events > 0) {
    if (summary.first_at == 0 || audit.first_at < summary.first_at) summary.first_at = audit.first_at;
    summary.last_at = std::max(summary.last_at, audit.last_at);
    if (summary.first_seq == 0 || audit.first_seq < summary.first_seq) summary.first_seq = audit.first_seq;
    summary.last_seq = std::max(summary.last_seq, audit.last_seq);
  }
}

// ---- the projections -----------------------------------------------------------

ProblemKind status_kind(ItemStatus stored, ItemStatus folded, int log_terminals) {
  // A terminal row whose log has a terminal event but folds to something else
  // (an event after the terminal one) is reported as event_after_terminal by
  // the audit; the row itself then merely disagrees.
  if (is_terminal(stored) && !is_terminal(folded)) {
    return log_terminals > 0 ? ProblemKind::status_disagrees : ProblemKind::terminal_without_event;
  }
  if (!is_terminal(stored) && is_terminal(folded)) return ProblemKind::event_without_terminal;
  if (is_terminal(stored) && is_terminal(folded)) return ProblemKind::terminal_events_disagree;
  if (stored == ItemStatus::ready && folded == ItemStatus::claimed) {
    return ProblemKind::ready_after_claim;
  }
  return ProblemKind::status_disagrees;
}

// items: one row per item stream.
struct ItemsProjection {
  using Stored = storage::ScannedItem;
  using Row = ItemRow;
  static constexpr const char* table = "items";
  static constexpr StreamKind stream = StreamKind::item;
  static constexpr const char* no_creation = "no queued event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) { return b.scan_items(); }
  static const std::string& stream_id(const Stored& s) { return s.row.item_id; }
  static bool same(const Stored& s, const Row& r) { return s.row.item_id == r.item_id; }
  static std::string key(const Row& r) { return r.item_id; }
  static std::string stored_key(const Stored& s) { return s.row.item_id; }
  // The rows the stream folds to: any item stream with events has one
  // (verify reports one without a row); only a created one is written.
  static std::vector<Row> folded(StreamAudit& a) {
    if (a.events == 0) return {};
    std::vector<Row> out;
    out.push_back(std::move(a.item));  // the audit is done with it
    if (out[0].item_id.empty()) out[0].item_id = a.stream.id;
    return out;
  }
  static bool creates(const StreamAudit& a) { return a.created; }
  static bool comparable(const StreamAudit& a) { return a.created && !a.unreadable; }
  // A row with no history may be the last copy: never erased.
  static bool erasable(const StreamAudit&) { return false; }

  static std::vector<FieldDiff> diff(const Stored& scanned, const Row& folded) {
    const ItemRow& stored = scanned.row;
    Differ d(ProblemKind::project_disagrees);
    d.text("project_id", stored.project_id, folded.project_id);
    d.as(ProblemKind::payload_disagrees).text("payload", stored.payload, folded.payload);
    d.as(ProblemKind::key_disagrees).text("key", stored.key, folded.key);
    // (disagree tells the terminal cases of a status apart.)
    d.as(ProblemKind::status_disagrees);
    if (!scanned.invalid_status.empty()) {
      // Not a status at all: always a difference, whatever the fold says.
      d.add("status", quoted(scanned.invalid_status) + " (not a status)",
            std::string(to_string(folded.status)));
    } else {
      d.add("status", to_string(stored.status), to_string(folded.status));
    }
    d.as(ProblemKind::owner_disagrees).text("owner", stored.owner, folded.owner);
    d.as(ProblemKind::fence_disagrees).add("fence", stored.fence, folded.fence);
    d.as(ProblemKind::attempts_disagrees).add("attempts", stored.attempts, folded.attempts);
    d.as(ProblemKind::lease_disagrees)
        .add("lease_expires_at", stored.lease_expires_at, folded.lease_expires_at);
    d.as(ProblemKind::detail_disagrees).text("detail", stored.detail, folded.detail);
    d.as(ProblemKind::queued_disagrees)
        .add("queued_seq", stored.queued_seq, folded.queued_seq)
        .add("queued_at", stored.queued_at, folded.queued_at);
    d.as(ProblemKind::last_seq_disagrees)
        .add("updated_at", stored.updated_at, folded.updated_at)
        .add("last_seq", stored.last_seq, folded.last_seq);
    d.as(ProblemKind::forge_disagrees);
    if (!scanned.invalid_kind.empty()) {
      d.add("kind", quoted(scanned.invalid_kind) + " (not a kind)", std::string(to_string(folded.kind)));
    } else {
      d.add("kind", to_string(stored.kind), to_string(folded.kind));
    }
    d.text("ref", stored.ref, folded.ref);
    d.text("head", stored.head, folded.head);
    if (!scanned.invalid_review.empty()) {
      d.add("review", quoted(scanned.invalid_review) + " (not a review state)",
            std::string(to_string(folded.review)));
    } else {
      d.add("review", to_string(stored.review), to_string(folded.review));
    }
    d.text("author", stored.author, folded.author);
    d.as(ProblemKind::assignment_disagrees);
    d.text("session", stored.session, folded.session);
    d.text("actions", join_list(stored.actions), join_list(folded.actions));
    d.text("expected_head", stored.expected_head, folded.expected_head);
    d.add("head_moved", stored.head_moved, folded.head_moved);
    d.as(ProblemKind::routing_disagrees);
    if (!scanned.invalid_routing.empty()) {
      // Read back as the engine never writes it: always a difference.
      d.add("priority", scanned.invalid_routing + " (not as cplane writes it)",
            fmt::format("{}, terminal_since {}", folded.priority, folded.terminal_since));
    } else {
      d.add("priority", stored.priority, folded.priority);
      d.add("terminal_since", stored.terminal_since, folded.terminal_since);
    }
    d.text("terminal_reason", stored.terminal_reason, folded.terminal_reason);
    d.as(ProblemKind::forge_disagrees)
        .text("close_reason", stored.close_reason, folded.close_reason);
    d.as(ProblemKind::schedule_disagrees)
        .add("run_at", stored.run_at, folded.run_at)
        .add("max_attempts", stored.max_attempts, folded.max_attempts)
        .text("backoff", stored.backoff, folded.backoff)
        .add("attempt_limit", stored.attempt_limit, folded.attempt_limit)
        .add("ended_fence", stored.ended_fence, folded.ended_fence);
    return d.done();
  }

  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit& a) {
    std::vector<LedgerProblem> out;
    for (const auto& d : diff(stored, folded)) {
      const ProblemKind kind = d.kind == ProblemKind::status_disagrees &&
                                       stored.invalid_status.empty()
                                   ? status_kind(stored.row.status, folded.status, a.terminals)
                                   : d.kind;
      out.push_back({kind, a.stream.id, stored.row.project_id,
                     fmt::format("item {}: {} is {} in the row but {} in the log", a.stream.id,
                                 d.field, d.stored, d.folded)});
    }
    return out;
  }
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit& a) {
    return LedgerProblem{ProblemKind::orphan_events, a.stream.id, folded.project_id,
                         fmt::format("item {} has {} event(s), the last at seq {}, but no row",
                                     a.stream.id, a.events, folded.last_seq)};
  }
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit&) {
    const std::string status = stored.invalid_status.empty()
                                   ? std::string(to_string(stored.row.status))
                                   : stored.invalid_status;
    return LedgerProblem{ProblemKind::no_creation_event, stored.row.item_id, stored.row.project_id,
                         fmt::format("item {} has a row ({}) but no events at all",
                                     stored.row.item_id, status)};
  }
  // What only an item's row can show against the other streams.
  static void cross_check(const StreamAudit& a, const LogFacts& facts,
                          std::vector<LedgerProblem>& out) {
    if (a.created && !facts.project_log_unreadable && !facts.projects.contains(a.item.project_id)) {
      out.push_back({ProblemKind::item_in_unknown_project, a.stream.id, a.item.project_id,
                     fmt::format("item {} was queued into project {}, which the log never created",
                                 a.stream.id, a.item.project_id)});
    }
  }
  static void put(storage::Backend& b, const Row& r) { b.put_item(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_item(s.row.item_id); }
  // Why rebuild must leave a stored row alone rather than write the fold
  // over it, or "": a row whose fence is above the log's, or whose last
  // event is newer than the log's, was made by events the log has lost.
  // Writing the fold would hand that fence out again to a second holder.
  static std::string evidence_of_loss(const Stored& stored, const Row& folded) {
    if (stored.row.fence > folded.fence) {
      return fmt::format("fence {} in the row is above the log's {}: the log lost events; left "
                         "alone, so that no fence up to {} is handed out twice",
                         stored.row.fence, folded.fence, stored.row.fence);
    }
    if (stored.row.last_seq > folded.last_seq) {
      return fmt::format("last_seq {} in the row is newer than the log's {}: the log lost "
                         "events; left alone",
                         stored.row.last_seq, folded.last_seq);
    }
    if (stored.row.updated_at > folded.updated_at) {
      return fmt::format("updated_at {} in the row is later than the log's {}: the log lost "
                         "events; left alone",
                         stored.row.updated_at, folded.updated_at);
    }
    return {};
  }
};

// A cursor over rows already read (projects and grants are few).
template <class Row>
class VectorCursor final : public storage::Cursor<Row> {
 public:
  explicit VectorCursor(std::vector<Row> rows) : rows_(std::move(rows)) {}
  bool next(Row& row) override {
    if (at_ >= rows_.size()) return false;
    row = std::move(rows_[at_++]);
    return true;
  }

 private:
  std::vector<Row> rows_;
  std::size_t at_ = 0;
};

// What the two projections of a project stream share: every row the fold
// makes is written by rebuild, compared unless the stream held an unreadable
// event, and nothing is checked across streams or kept as evidence of loss.
struct ProjectStreamProjection {
  static constexpr StreamKind stream = StreamKind::project;
  static bool creates(const StreamAudit&) { return true; }
  static bool erasable(const StreamAudit&) { return false; }
  static bool comparable(const StreamAudit& a) { return !a.unreadable; }
  static void cross_check(const StreamAudit&, const LogFacts&, std::vector<LedgerProblem>&) {}
  template <class Stored, class Row>
  static std::string evidence_of_loss(const Stored&, const Row&) {
    return {};
  }
};

// projects: one row per project stream.
struct ProjectsProjection : ProjectStreamProjection {
  using Stored = ProjectRow;
  using Row = ProjectRow;
  static constexpr const char* table = "projects";
  static constexpr const char* no_creation = "no project_created event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) {
    return std::make_unique<VectorCursor<Stored>>(b.all_projects());
  }
  static const std::string& stream_id(const Stored& s) { return s.project_id; }
  static bool same(const Stored& s, const Row& r) { return s.project_id == r.project_id; }
  static std::string key(const Row& r) { return r.project_id; }
  static std::string stored_key(const Stored& s) { return s.project_id; }
  static std::vector<Row> folded(StreamAudit& a) {
    if (!a.project) return {};
    return {*a.project};
  }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded) {
    return Differ(ProblemKind::project_row_disagrees)
        .text("title", stored.title, folded.title)
        .text("status", stored.status, folded.status)
        .add("created_at", stored.created_at, folded.created_at)
        .add("last_seq", stored.last_seq, folded.last_seq)
        .add("max_attempts", stored.max_attempts, folded.max_attempts)
        .text("backoff", stored.backoff, folded.backoff)
        .add("paused", stored.paused, folded.paused)
        .text("pause_reason", stored.pause_reason, folded.pause_reason)
        .done();
  }
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit&) {
    std::vector<LedgerProblem> out;
    for (const auto& d : diff(stored, folded)) {
      out.push_back({d.kind, "", stored.project_id,
                     fmt::format("project {}: {} is {} in the row but {} in the log",
                                 stored.project_id, d.field, d.stored, d.folded)});
    }
    return out;
  }
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit&) {
    return LedgerProblem{ProblemKind::project_row_missing, "", folded.project_id,
                         fmt::format("project {} was created at seq {} but has no row",
                                     folded.project_id, folded.last_seq)};
  }
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a) {
    if (a.unreadable) return std::nullopt;  // the creation may be the unreadable event
    return LedgerProblem{ProblemKind::project_row_without_event, "", stored.project_id,
                         fmt::format("project {} has a row but no project_created event",
                                     stored.project_id)};
  }
  static void put(storage::Backend& b, const Row& r) { b.put_project(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_project(s.project_id); }
};

// project_actors: one row per actor granted a project, in the project's stream.
struct GrantsProjection : ProjectStreamProjection {
  using Stored = ProjectActorRow;
  using Row = ProjectActorRow;
  static constexpr const char* table = "project_actors";
  static constexpr const char* no_creation = "no actor_assigned event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) {
    return std::make_unique<VectorCursor<Stored>>(b.all_assignments());
  }
  static const std::string& stream_id(const Stored& s) { return s.project_id; }
  static bool same(const Stored& s, const Row& r) {
    return s.project_id == r.project_id && s.actor == r.actor;
  }
  static std::string key(const Row& r) { return r.project_id + "/" + r.actor; }
  static std::string stored_key(const Stored& s) { return key(s); }
  static std::vector<Row> folded(StreamAudit& a) {
    std::vector<Row> out;
    for (const auto& [actor, row] : a.grants) out.push_back(row);
    return out;
  }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded) {
    return Differ(ProblemKind::project_row_disagrees)
        .add("assigned_at", stored.assigned_at, folded.assigned_at)
        .add("last_seq", stored.last_seq, folded.last_seq)
        .done();
  }
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit&) {
    std::vector<LedgerProblem> out;
    for (const auto& d : diff(stored, folded)) {
      out.push_back({d.kind, "", stored.project_id,
                     fmt::format("assignment of {} to {}: {} is {} in the row but {} in the log",
                                 stored.actor, stored.project_id, d.field, d.stored, d.folded)});
    }
    return out;
  }
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit&) {
    return LedgerProblem{ProblemKind::assignment_missing, "", folded.project_id,
                         fmt::format("actor {} was assigned to project {} at seq {} but the "
                                     "assignment has no row",
                                     folded.actor, folded.project_id, folded.last_seq)};
  }
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a) {
    if (a.unreadable) return std::nullopt;
    return LedgerProblem{ProblemKind::assignment_without_event, "", stored.project_id,
                         fmt::format("actor {} is assigned to project {} with no actor_assigned "
                                     "event",
                                     stored.actor, stored.project_id)};
  }
  static void put(storage::Backend& b, const Row& r) { b.put_assignment(r); }
  static void erase(storage::Backend& b, const Stored& s) {
    b.delete_assignment(s.project_id, s.actor);
  }
};

// terminal_locks: a row for an item stream whose fold is on the terminal
// path. (Listed before items in replay: ItemsProjection takes the fold.)
struct TerminalLocksProjection {
  using Stored = TerminalLockRow;
  using Row = TerminalLockRow;
  static constexpr const char* table = "terminal_locks";
  static constexpr StreamKind stream = StreamKind::item;
  static constexpr const char* no_creation = "no terminal_path_entered event in the log";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) {
    return b.scan_terminal_locks();
  }
  static const std::string& stream_id(const Stored& s) { return s.item_id; }
  static bool same(const Stored& s, const Row& r) { return s.item_id == r.item_id; }
  static std::string key(const Row& r) { return r.item_id; }
  static std::string stored_key(const Stored& s) { return s.item_id; }
  static std::vector<Row> folded(StreamAudit& a) {
    if (!a.created) return {};
    ItemRow row = a.item;
    if (row.item_id.empty()) row.item_id = a.stream.id;
    auto lock = terminal_lock_of(row);
    if (!lock) return {};
    return {*lock};
  }
  static bool creates(const StreamAudit& a) { return a.created; }
  static bool comparable(const StreamAudit& a) { return a.created && !a.unreadable; }
  // The item's history is whole and readable and does not put it on the
  // terminal path: the lock is made up (the item row is the data).
  static bool erasable(const StreamAudit& a) { return a.created && !a.unreadable; }
  static void cross_check(const StreamAudit&, const LogFacts&, std::vector<LedgerProblem>&) {}
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded) {
    return Differ(ProblemKind::terminal_lock_disagrees)
        .add("since", stored.since, folded.since)
        .text("reason", stored.reason, folded.reason)
        .done();
  }
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit& a) {
    std::vector<LedgerProblem> out;
    for (const auto& d : diff(stored, folded)) {
      out.push_back({d.kind, stored.item_id, a.item.project_id,
                     fmt::format("item {} on the terminal path: {} is {} in terminal_locks but {} "
                                 "in the log",
                                 stored.item_id, d.field, d.stored, d.folded)});
    }
    return out;
  }
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit& a) {
    return LedgerProblem{ProblemKind::terminal_lock_missing, folded.item_id, a.item.project_id,
                         fmt::format("item {} is on the terminal path (since {}) but has no "
                                     "terminal_locks row",
                                     folded.item_id, folded.since)};
  }
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a) {
    if (a.unreadable) return std::nullopt;
    return LedgerProblem{ProblemKind::terminal_lock_without_event, stored.item_id,
                         a.item.project_id,
                         fmt::format("item {} has a terminal_locks row but its log does not put "
                                     "it on the terminal path (or took it off)",
                                     stored.item_id)};
  }
  static void put(storage::Backend& b, const Row& r) { b.put_terminal_lock(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_terminal_lock(s.item_id); }
  static std::string evidence_of_loss(const Stored&, const Row&) { return {}; }
};

// What the projections of one row per stream, keyed by the stream id,
// share (sessions, incident links): a problem for a missing row, for a row
// without its creation event, and the diff's kind for each field; rows never
// erased, and a row whose last_seq is ahead of the log kept (the log lost
// its events). D gives Row, table, stream, missing_kind, without_event_kind,
// noun, creation (the event that makes the row), id(row), slot(audit) and
// diff.
template <class D, class R>
struct OneRowPerStream {
  using Stored = R;
  using Row = R;
  static const std::string& stream_id(const Stored& s) { return D::id(s); }
  static bool same(const Stored& s, const Row& r) { return D::id(s) == D::id(r); }
  static std::string key(const Row& r) { return D::id(r); }
  static std::string stored_key(const Stored& s) { return D::id(s); }
  static std::vector<Row> folded(StreamAudit& a) {
    const auto& slot = D::slot(a);
    if (!slot) return {};
    return {*slot};
  }
  static bool creates(const StreamAudit& a) { return D::slot(a).has_value(); }
  static bool erasable(const StreamAudit&) { return false; }
  static bool comparable(const StreamAudit& a) { return !a.unreadable; }
  static void cross_check(const StreamAudit&, const LogFacts&, std::vector<LedgerProblem>&) {}
  static std::vector<LedgerProblem> disagree(const Stored& stored, const Row& folded,
                                             const StreamAudit&) {
    std::vector<LedgerProblem> out;
    for (const auto& d : D::diff(stored, folded)) {
      out.push_back({d.kind, "", "",
                     fmt::format("{} {}: {} is {} in the row but {} in the log", D::noun,
                                 quoted(D::id(stored)), d.field, d.stored, d.folded)});
    }
    return out;
  }
  static std::optional<LedgerProblem> missing(const Row& folded, const StreamAudit&) {
    return LedgerProblem{D::missing_kind, "", "",
                         fmt::format("{} {} has events (the last at seq {}) but no row", D::noun,
                                     quoted(D::id(folded)), folded.last_seq)};
  }
  static std::optional<LedgerProblem> unexplained(const Stored& stored, const StreamAudit& a) {
    if (a.unreadable) return std::nullopt;
    return LedgerProblem{D::without_event_kind, "", "",
                         fmt::format("{} {} has a row but no {} event", D::noun,
                                     quoted(D::id(stored)), D::creation)};
  }
  static std::string evidence_of_loss(const Stored& stored, const Row& folded) {
    if (stored.last_seq > folded.last_seq) {
      return fmt::format("last_seq {} in the row is newer than the log's {}: the log lost "
                         "events; left alone",
                         stored.last_seq, folded.last_seq);
    }
    return {};
  }
};

// incident_links: one row per incident stream.
struct IncidentsProjection : OneRowPerStream<IncidentsProjection, IncidentLinkRow> {
  static constexpr const char* table = "incident_links";
  static constexpr StreamKind stream = StreamKind::incident;
  static constexpr const char* no_creation = "no incident_linked event in the log";
  static constexpr ProblemKind missing_kind = ProblemKind::incident_link_missing;
  static constexpr ProblemKind without_event_kind = ProblemKind::incident_link_without_event;
  static constexpr const char* noun = "incident";
  static constexpr const char* creation = "incident_linked";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) {
    return b.scan_incidents();
  }
  static const std::string& id(const Row& r) { return r.incident_id; }
  static const std::optional<Row>& slot(const StreamAudit& a) { return a.incident; }
  static void put(storage::Backend& b, const Row& r) { b.put_incident(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_incident(s.incident_id); }
  static std::string opt(const std::optional<std::string>& v) {
    return v ? quoted(*v) : std::string("NULL");
  }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded) {
    Differ d(ProblemKind::incident_link_disagrees);
    d.text("provider", stored.provider, folded.provider)
        .text("fingerprint", stored.fingerprint, folded.fingerprint)
        .text("org", stored.org, folded.org)
        .text("repo", stored.repo, folded.repo)
        .text("environment", stored.environment, folded.environment)
        .text("target", stored.target, folded.target)
        .add("status", opt(stored.status), opt(folded.status))
        .add("event_count",
             stored.event_count ? std::to_string(*stored.event_count) : std::string("NULL"),
             folded.event_count ? std::to_string(*folded.event_count) : std::string("NULL"))
        .add("permalink", opt(stored.permalink), opt(folded.permalink))
        .add("first_seen", opt(stored.first_seen), opt(folded.first_seen))
        .add("last_seen", opt(stored.last_seen), opt(folded.last_seen))
        .add("linked_prs", opt(stored.linked_prs), opt(folded.linked_prs))
        .add("linked_at", stored.linked_at, folded.linked_at)
        .add("updated_at", stored.updated_at, folded.updated_at)
        .add("last_seq", stored.last_seq, folded.last_seq);
    return d.done();
  }
};

// schedules: one row per schedule stream (a removed one keeps its row).
struct SchedulesProjection : OneRowPerStream<SchedulesProjection, ScheduleRow> {
  static constexpr const char* table = "schedules";
  static constexpr StreamKind stream = StreamKind::schedule;
  static constexpr const char* no_creation = "no schedule_created event in the log";
  static constexpr ProblemKind missing_kind = ProblemKind::schedule_row_missing;
  static constexpr ProblemKind without_event_kind = ProblemKind::schedule_row_without_event;
  static constexpr const char* noun = "schedule";
  static constexpr const char* creation = "schedule_created";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) {
    return b.scan_schedules();
  }
  static const std::string& id(const Row& r) { return r.name; }
  static const std::optional<Row>& slot(const StreamAudit& a) { return a.schedule; }
  static void put(storage::Backend& b, const Row& r) { b.put_schedule(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_schedule(s.name); }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded) {
    return Differ(ProblemKind::schedule_row_disagrees)
        .text("project_id", stored.project_id, folded.project_id)
        .text("cron", stored.cron, folded.cron)
        .text("zone", stored.zone, folded.zone)
        .text("payload", stored.payload, folded.payload)
        .add("overlap_skip", stored.overlap_skip, folded.overlap_skip)
        .add("catch_up", stored.catch_up, folded.catch_up)
        .add("next_at", stored.next_at, folded.next_at)
        .add("paused", stored.paused, folded.paused)
        .add("removed", stored.removed, folded.removed)
        .text("last_item", stored.last_item, folded.last_item)
        .add("last_occurrence", stored.last_occurrence, folded.last_occurrence)
        .add("fired", stored.fired, folded.fired)
        .add("created_at", stored.created_at, folded.created_at)
        .add("updated_at", stored.updated_at, folded.updated_at)
        .add("last_seq", stored.last_seq, folded.last_seq)
        .done();
  }
};

// sessions: one row per session stream.
struct SessionsProjection : OneRowPerStream<SessionsProjection, SessionRow> {
  static constexpr const char* table = "sessions";
  static constexpr StreamKind stream = StreamKind::session;
  static constexpr const char* no_creation = "no session_opened event in the log";
  static constexpr ProblemKind missing_kind = ProblemKind::session_row_missing;
  static constexpr ProblemKind without_event_kind = ProblemKind::session_row_without_event;
  static constexpr const char* noun = "session";
  static constexpr const char* creation = "session_opened";

  static std::unique_ptr<storage::Cursor<Stored>> scan(storage::RowSource& b) {
    return b.scan_sessions();
  }
  static const std::string& id(const Row& r) { return r.session_id; }
  static const std::optional<Row>& slot(const StreamAudit& a) { return a.session; }
  static void put(storage::Backend& b, const Row& r) { b.put_session(r); }
  static void erase(storage::Backend& b, const Stored& s) { b.delete_session(s.session_id); }
  static std::vector<FieldDiff> diff(const Stored& stored, const Row& folded) {
    return Differ(ProblemKind::session_row_disagrees)
        .text("actor", stored.actor, folded.actor)
        .add("opened_at", stored.opened_at, folded.opened_at)
        .add("last_seen_at", stored.last_seen_at, folded.last_seen_at)
        .add("closed_at", stored.closed_at, folded.closed_at)
        .add("last_seq", stored.last_seq, folded.last_seq)
        .done();
  }
};

// ---- the merge ----------------------------------------------------------------

// One projection's side of the merge: its row cursor, the current row.
template <class P>
class RowSide {
 public:
  // `rows` null: a side with no rows.
  explicit RowSide(storage::RowSource* rows)
      : cursor_(rows != nullptr ? P::scan(*rows) : std::make_unique<NoRows>()) {
    advance();
  }

  const std::string* next_stream() const { return have_ ? &P::stream_id(row_) : nullptr; }

  // The stored rows of `stream_id` (the cursor must be at or past it).
  std::vector<typename P::Stored> take(const std::string& stream_id) {
    std::vector<typename P::Stored> out;
    while (have_ && P::stream_id(row_) == stream_id) {
      last_.assign(P::stream_id(row_));
      out.push_back(std::move(row_));
      advance();
    }
    return out;
  }

 private:
  struct NoRows final : storage::Cursor<typename P::Stored> {
    bool next(typename P::Stored&) override { return false; }
  };

  void advance() {
    have_ = cursor_->next(row_);
    // The merge needs ids in bytewise order (the backend contract). An id
    // stored as a BLOB (only by tampering) sorts elsewhere: stop rather
    // than report false problems.
    if (have_ && !last_.empty() && P::stream_id(row_) < last_) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("{} rows are out of order near '{}': an id is stored with a "
                                     "type other than TEXT",
                                     P::table, P::stream_id(row_)));
    }
  }

  std::unique_ptr<storage::Cursor<typename P::Stored>> cursor_;
  typename P::Stored row_{};
  bool have_ = false;
  std::string last_;  // the stream id of the last row taken
};

// What to do with one projection's rows of one stream.
struct Reconcile {
  std::vector<LedgerProblem>* problems = nullptr;  // verify
  bool compare_rows = true;  // verify: false checks only what the log says
  // verify: the stream each problem is about, one entry per problem.
  std::vector<std::pair<StreamKind, std::string>>* about = nullptr;
  RebuildReport* report = nullptr;                 // rebuild
  // rebuild, not dry: where each change is written as soon as it is known
  // (memory stays flat). Only the rows of the stream just merged are
  // written, which every row cursor has already passed.
  storage::Backend* write_to = nullptr;
  // recover: the log is known to be damaged; how far its fences may reach.
  const SalvageBounds* bounds = nullptr;
};

void note(std::vector<RowChange>& list, std::int64_t& total, RowChange change) {
  ++total;
  if (list.size() < kMaxListedChanges) list.push_back(std::move(change));
}

template <class P>
void reconcile(RowSide<P>& side, StreamAudit& audit, const LogFacts& facts, const Reconcile& r) {
  auto stored = side.take(audit.stream.id);
  const std::size_t first_problem = r.problems != nullptr ? r.problems->size() : 0;
  if (r.problems != nullptr && audit.stream.kind == P::stream) {
    P::cross_check(audit, facts, *r.problems);
  }
  if (!r.compare_rows) {
    if (r.about != nullptr) {
      for (std::size_t i = first_problem; i < r.problems->size(); ++i) {
        r.about->emplace_back(audit.stream.kind, audit.stream.id);
      }
    }
    return;
  }
  const bool comparable = P::comparable(audit);
  const bool creates = P::creates(audit);
  // Rows per stream are few (one, or one per grant): match them by key in
  // place, without maps.
  std::vector<typename P::Row> folded = P::folded(audit);
  std::vector<bool> matched(folded.size(), false);
  for (auto& row : stored) {
    std::size_t at = 0;
    while (at < folded.size() && !P::same(row, folded[at])) ++at;
    const bool found = at < folded.size();
    if (found) matched[at] = true;
    if (r.problems != nullptr) {
      if (!found) {
        if (auto p = P::unexplained(row, audit)) r.problems->push_back(std::move(*p));
      } else if (comparable) {
        for (auto& p : P::disagree(row, folded[at], audit)) r.problems->push_back(std::move(p));
      }
    }
    if (r.report != nullptr) {
      if (!found && P::erasable(audit)) {
        // A row its stream's whole, readable history does not make.
        note(r.report->changes, r.report->changes_total,
             {P::table, P::stored_key(row), "delete", {}});
        if (r.write_to != nullptr) P::erase(*r.write_to, row);
      } else if (!found) {
        // No history at all. The row may be the last copy of an item whose
        // history was lost (the heads and digest are plain values: removing
        // a stream and fixing them needs no hashing), or it was made up
        // outside cplane: rebuild cannot tell, so it never destroys it.
        // verify keeps naming it; delete it by hand if it was made up.
        note(r.report->kept, r.report->kept_total,
             {P::table, P::stored_key(row), "keep",
              {std::string(P::no_creation) + ": no history in the log, so the row may be the "
                                              "last copy; left alone"}});
      } else if (auto loss = P::evidence_of_loss(row, folded[at]); !loss.empty()) {
        note(r.report->kept, r.report->kept_total,
             {P::table, P::key(folded[at]), "keep", {std::move(loss)}});
      } else if (!creates) {
        // Events without their creation: the log fails its own checks and
        // rebuild refuses (see rebuild below); nothing to decide here.
      } else if (auto d = P::diff(row, folded[at]); !d.empty()) {
        note(r.report->changes, r.report->changes_total,
             {P::table, P::key(folded[at]), "update", describe(d)});
        if (r.write_to != nullptr) P::put(*r.write_to, folded[at]);
      }
    }
  }
  // Folded rows with no stored counterpart.
  for (std::size_t at = 0; at < folded.size(); ++at) {
    if (matched[at]) continue;
    if (r.problems != nullptr) {
      if (auto p = P::missing(folded[at], audit)) r.problems->push_back(std::move(*p));
    }
    if (r.report != nullptr && creates) {
      note(r.report->changes, r.report->changes_total,
           {P::table, P::key(folded[at]), "insert", {}});
      if (r.write_to != nullptr) P::put(*r.write_to, folded[at]);
    }
  }
  if (r.about != nullptr) {
    for (std::size_t i = first_problem; i < r.problems->size(); ++i) {
      r.about->emplace_back(audit.stream.kind, audit.stream.id);
    }
  }
}

// Replays every stream of `kind` and reconciles each of the projections
// with it. `on_stream(audit)` sees each stream's audit after its fold.
template <class... P, class OnStream>
void replay(storage::LogSource& log, storage::RowSource* rows, StreamKind kind, LogFacts& facts,
            const Reconcile& r, std::int64_t& events_read, std::int64_t total,
            const Progress& progress, OnStream&& on_stream) {
  auto events = log.scan_stream(kind);
  auto heads = log.scan_heads(kind);
  std::tuple<RowSide<P>...> sides{RowSide<P>(rows)...};
  storage::RawEvent raw;
  storage::StreamHead head;
  bool have_event = events->next(raw);
  bool have_head = heads->next(head);
  const std::string kind_name(to_string(kind));
  std::string previous;
  bool first = true;
  for (;;) {
    // The next stream id: the least of the event side, the heads and every
    // row side.
    const std::string* next = have_event ? &raw.stream_id : nullptr;
    if (have_head && (next == nullptr || head.stream_id < *next)) next = &head.stream_id;
    std::apply(
        [&](auto&... side) {
          ((side.next_stream() != nullptr && (next == nullptr || *side.next_stream() < *next)
                ? void(next = side.next_stream())
                : void()),
           ...);
        },
        sides);
    if (next == nullptr) break;
    std::string id = *next;
    if (!first && id <= previous) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("stream ids are out of order near '{}': an id is stored "
                                     "with a type other than TEXT",
                                     id));
    }
    first = false;
    previous.assign(id);
    StreamAudit audit;
    audit.stream = {kind, std::move(id)};
    const std::string& sid = audit.stream.id;
    if (!facts.incomplete.empty() && facts.incomplete.contains({kind, sid})) {
      audit.unreadable = true;
      audit.reported_no_creation = true;
    }
    StreamChain chain(kind_name, sid);
    while (have_event && raw.stream_id == sid) {
      chain.add(raw, audit.chain_problems);
      facts.chain.event(raw.seq);
      fold_event(audit, raw, facts);
      if (++events_read % kProgressEvery == 0 && progress) progress(events_read, total);
      have_event = events->next(raw);
    }
    const bool headed = have_head && head.stream_id == sid;
    if (headed) facts.chain.head(head);
    chain.finish(headed ? &head : nullptr, audit.chain_problems);
    if (r.bounds != nullptr && kind == StreamKind::item) {
      const auto& unbounded = r.bounds->unbounded;
      if (std::binary_search(unbounded.begin(), unbounded.end(), sid)) {
        // Its head was lost with the page it was on: any of the lost events
        // may have been its claims.
        audit.item.fence += r.bounds->lost_events;
      } else if (chain.broken() && headed) {
        // recover, over a stream that lost events: a lost claim may have
        // handed out a fence above the fold's. Every claim is one event, so
        // the head's revision bounds every fence the item ever had: the row
        // takes it, and the next claim goes above it.
        audit.item.fence = std::max<Fence>(audit.item.fence, static_cast<Fence>(head.revision));
      }
    }
    if (headed) have_head = heads->next(head);
    if (chain.broken()) facts.chain.stream_broken();
    if (kind == StreamKind::item) audit_end(audit, facts);
    on_stream(audit);
    std::apply([&](auto&... side) { (reconcile(side, audit, facts, r), ...); }, sides);
  }
}

// Events whose stream_kind column names no kind: each is an index fault (its
// body says where it belongs), and no stream's scan sees it. (Scanned last,
// so the streams they belong to are already reconciled.)
void audit_unfiled(storage::LogSource& log, StreamAudit& audit, LogFacts& facts,
                   std::int64_t& events_read) {
  auto events = log.scan_unfiled();
  storage::RawEvent raw;
  while (events->next(raw)) {
    ++events_read;
    facts.chain.event(raw.seq);
    read_event(raw, audit, facts);  // reports the stream_kind column, or the body
  }
  for (const auto& head : log.unfiled_heads()) facts.chain.head(head);
}

// Every stream kind in kStreamKinds' order: projects and sessions first
// (items are checked against their grants and lives), then items. `rows`:
// the stored rows each projection is merged with (null: none).
// `on_stream(audit)` sees each stream's audit (its log problems) before its
// rows are reconciled.
template <class OnStream>
void replay_all(storage::LogSource& log, storage::RowSource* rows, const Reconcile& r,
                LogFacts& facts, std::int64_t& events_read, const Progress& progress,
                OnStream&& on_stream) {
  // The total is for a progress display only: counting reads the log once
  // more, so only when someone is watching.
  const std::int64_t total = progress ? log.event_count() : 0;
  replay<ProjectsProjection, GrantsProjection>(
      log, rows, StreamKind::project, facts, r, events_read, total, progress,
      [&](StreamAudit& audit) {
        if (audit.project) {
          facts.projects.insert(audit.stream.id);
          facts.project_created_at.emplace(audit.stream.id, audit.project_created_seq);
        }
        for (const auto& [actor, grant] : audit.grants) {
          facts.grants.emplace(std::pair{audit.stream.id, actor}, grant.last_seq);
        }
        if (audit.unreadable) facts.project_log_unreadable = true;
        on_stream(audit);
      });
  replay<SessionsProjection>(log, rows, StreamKind::session, facts, r, events_read, total,
                             progress, [&](StreamAudit& audit) {
                               if (audit.session) {
                                 facts.sessions[audit.stream.id] = {
                                     audit.opened_seq, audit.closed_seq, audit.session->actor};
                               }
                               if (audit.unreadable) facts.session_log_unreadable = true;
                               on_stream(audit);
                             });
  // An event filed under another project or session by its columns: which
  // projects the log created, or when sessions lived, is no longer known
  // for sure.
  for (const auto& [kind, id] : facts.incomplete) {
    if (kind == StreamKind::project) facts.project_log_unreadable = true;
    if (kind == StreamKind::session) facts.session_log_unreadable = true;
  }
  replay<TerminalLocksProjection, ItemsProjection>(
      log, rows, StreamKind::item, facts, r, events_read, total, progress,
      [&](StreamAudit& audit) {
        // An unreadable item may be a schedule's: which items schedules
        // made is then no longer known for sure.
        if (audit.unreadable) facts.item_log_unreadable = true;
        on_stream(audit);
      });
  replay<IncidentsProjection>(log, rows, StreamKind::incident, facts, r, events_read, total,
                              progress, on_stream);
  replay<SchedulesProjection>(log, rows, StreamKind::schedule, facts, r, events_read, total,
                              progress, on_stream);
  // Every item a schedule made is named by exactly one fire.
  {
    StreamAudit orphans;
    orphans.stream = {StreamKind::schedule, ""};
    if (!facts.item_log_unreadable) {
      for (const auto& [item, key] : facts.schedule_items) {
        if (facts.fired_items.contains(item)) continue;
        orphans.problems.push_back({ProblemKind::schedule_fire_unmatched, item, "",
                                    fmt::format("item {} is keyed {}, but no schedule_fired "
                                                "names it",
                                                quoted(item), quoted(key))});
      }
    }
    if (!orphans.problems.empty()) on_stream(orphans);
  }
  StreamAudit unfiled;
  audit_unfiled(log, unfiled, facts, events_read);
  // What no stream could show: a stream removed with its head, a head
  // edited, seqs missing.
  facts.chain.finish(log.log_digest(), log.seqs_dense(), unfiled.chain_problems);
  on_stream(unfiled);
  if (progress) progress(events_read, total);
}

}  // namespace

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress,
                      const SalvageBounds* bounds);

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

namespace {

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

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress) {
  return rebuild(backend, dry_run, progress, nullptr);
}

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress,
                      const SalvageBounds& salvage) {
  return rebuild(backend, dry_run, progress, &salvage);
}

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress,
                      const SalvageBounds* bounds) {

  // A dry run reads one snapshot like verify: it never waits for, nor holds
  // off, a writer.
  auto tx = dry_run ? storage::Transaction::read(backend)
                    : storage::Transaction::write(backend, storage::Sync::full);
  RebuildReport report;
  report.dry_run = dry_run;
  Reconcile r;
  r.report = &report;
  r.write_to = dry_run ? nullptr : &backend;
  r.bounds = bounds;
  // Rows folded from a log that fails its own checks (a broken chain, an
  // unreadable event, an index column that files an event elsewhere than
  // its body, a fence that does not rise, ...) would be wrong, and could
  // hand a fence out twice: every such problem refuses the rebuild, and the
  // transaction (with what was written so far) is rolled back.
  std::vector<LedgerProblem> refusals;
  std::int64_t refusals_total = 0;
  LogFacts facts;
  replay_all(backend, &backend, r, facts, report.events, progress, [&](StreamAudit& audit) {
    if (audit.stream.kind == StreamKind::item && audit.created) ++report.items;
    for (auto* list : {&audit.chain_problems, &audit.problems}) {
      for (auto& p : *list) {
        ++refusals_total;
        bound(p.detail);
        bound(p.item_id, 256);
        bound(p.project_id, 256);
        if (refusals.size() < kMaxListedChanges) refusals.push_back(std::move(p));
      }
    }
  });
  if (!refusals.empty() && bounds == nullptr) throw RebuildRefused(std::move(refusals), refusals_total);
  if (dry_run) return report;  // the guard rolls back: nothing written
  tx.commit();
  return report;
}

}  // namespace cplane
