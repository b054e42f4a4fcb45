// Must compile: the control for the two compile-fail cases (the same visit
// with every kind handled), so that they fail for the reason they name.
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
                        [](const cplane::ItemFinished&) { return 0; },
                        [](const cplane::AttemptFailed&) { return 0; },
                        [](const cplane::ItemRetried&) { return 0; },
                        [](const cplane::ItemRescheduled&) { return 0; },
                        [](const cplane::ItemCancelled&) { return 0; },
                        [](const cplane::RetryPolicySet&) { return 0; },
                        [](const cplane::ProjectPaused&) { return 0; },
                        [](const cplane::ProjectResumed&) { return 0; },
                        [](const cplane::ScheduleCreated&) { return 0; },
                        [](const cplane::ScheduleFired&) { return 0; },
                        [](const cplane::ScheduleSkipped&) { return 0; },
                        [](const cplane::SchedulePaused&) { return 0; },
                        [](const cplane::ScheduleResumed&) { return 0; },
                        [](const cplane::ScheduleRemoved&) { return 0; },
                        [](const cplane::ProjectWeightSet&) { return 0; },
                        [](const cplane::LimitSet&) { return 0; },
                        [](const cplane::LimitRemoved&) { return 0; },
                        [](const cplane::LimitClockCarried&) { return 0; },
                        [](const cplane::SegmentArchived&) { return 0; },
                        [](const cplane::KeyReleased&) { return 0; },
                    },
                    body) == 1 ? 0 : 1;
}
