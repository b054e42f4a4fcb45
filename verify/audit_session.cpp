// verify's checks of a session stream's events (verify/event_checks.hpp):
// opened once and first, nothing after its close; and the session lives
// that items are checked against.
#include <fmt/format.h>

#include "verify/event_checks.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

std::string LogFacts::not_open(const std::string& session, Seq seq) const {
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

void SessionChecks::session_open_first() const {
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
}

void SessionChecks::operator()(const SessionOpened&) const {
  if (!a.session) a.opened_seq = seq;
  if (a.session) {
    problem(ProblemKind::duplicate_creation_event,
            fmt::format("session {} is opened again by event seq {}", quoted(a.stream.id),
                        seq));
  }
}

void SessionChecks::operator()(const SessionSeen&) const { session_open_first(); }

void SessionChecks::operator()(const SessionClosed&) const {
  session_open_first();
  if (a.session && a.session->is_open()) a.closed_seq = seq;
}

}  // namespace cplane::verify_detail
