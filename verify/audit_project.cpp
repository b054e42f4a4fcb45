// verify's checks of a project stream's events (verify/event_checks.hpp):
// created once and first, grants only of a created project.
#include <fmt/format.h>

#include "verify/event_checks.hpp"

namespace cplane::verify_detail {

void ProjectChecks::project_created_first() const {
  if (!a.project && !a.reported_no_creation) {
    a.reported_no_creation = true;
    problem(ProblemKind::no_creation_event,
            fmt::format("project {} has a {} event (seq {}) before project_created",
                        a.stream.id, type_name(e.body), seq));
  }
}

void ProjectChecks::operator()(const ProjectCreated&) const {
  if (a.project) {
    problem(ProblemKind::duplicate_creation_event,
            fmt::format("project {} is created again by event seq {}", a.stream.id, seq));
  }
}

void ProjectChecks::operator()(const ActorAssigned& granted) const {
  if (!a.project && !a.reported_no_creation) {
    problem(ProblemKind::grant_without_project,
            fmt::format("actor_assigned seq {} grants {} project {}, which its log has "
                        "not created (yet)",
                        seq, granted.actor, a.stream.id));
  }
}

void ProjectChecks::operator()(const RetryPolicySet&) const { project_created_first(); }

void ProjectChecks::operator()(const ProjectPaused&) const { project_created_first(); }

void ProjectChecks::operator()(const ProjectResumed&) const { project_created_first(); }

void ProjectChecks::operator()(const ProjectWeightSet&) const { project_created_first(); }

}  // namespace cplane::verify_detail
