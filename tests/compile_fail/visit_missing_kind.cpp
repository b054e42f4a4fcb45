// Must NOT compile: a visit over the event body that leaves out one kind
// (as apply and verify are written: one case per kind, no catch-all).
#include "events/event.hpp"

int main() {
  const cplane::EventBody body = cplane::ItemQueued{"{}"};
  return std::visit(cplane::Overloaded{
                        [](const cplane::ProjectCreated&) { return 0; },
                        [](const cplane::ActorAssigned&) { return 0; },
                        [](const cplane::ItemQueued&) { return 1; },
                        [](const cplane::ItemClaimed&) { return 0; },
                        [](const cplane::LeaseExtended&) { return 0; },
                        [](const cplane::ItemReleased&) { return 0; },
                        [](const cplane::LeaseExpired&) { return 0; },
                        [](const cplane::ItemAssigned&) { return 0; },
                        [](const cplane::HeadMoved&) { return 0; },
                        [](const cplane::ReviewChanged&) { return 0; },
                        [](const cplane::ItemClosed&) { return 0; },
                        [](const cplane::MutationRecorded&) { return 0; },
                        [](const cplane::SessionOpened&) { return 0; },
                        [](const cplane::SessionSeen&) { return 0; },
                        [](const cplane::SessionClosed&) { return 0; },
                        [](const cplane::TerminalPathEntered&) { return 0; },
                        [](const cplane::TerminalPathLeft&) { return 0; },
                        [](const cplane::IncidentLinked&) { return 0; },
                        // ItemFinished is not handled
                    },
                    body);
}
