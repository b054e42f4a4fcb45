// verify's audit of one stream's events (verify/stream_audit.hpp): each
// raw event read and its columns checked against its body, its checks
// (verify/event_checks.hpp, one visitor per stream kind), and its fold
// through the same `apply` the commands use.
#include "verify/stream_audit.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "events/codec.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "verify/event_checks.hpp"
#include "verify/quote.hpp"

namespace cplane::verify_detail {

namespace {

// The fold: the same apply the commands use.
void fold_rows(StreamAudit& a, const StoredEvent& stored) {
  const Event& e = stored.event;
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
    case StreamKind::limit:
      break;  // its row is the flow replay's (verify/flow_check.cpp)
    case StreamKind::segment:
      a.segment = apply(a.segment.value_or(SegmentRow{}), stored);
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

}  // namespace

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

void audit_event(StreamAudit& a, const StoredEvent& stored, const LogFacts& facts) {
  const Event& e = stored.event;
  if (stream_of(e) != a.stream) return;  // filed here by its columns only
  const EventCheck check{a, e, stored.seq, facts};
  if (a.stream.kind == StreamKind::item) ItemChecks{check}.cross_stream();
  std::visit(Overloaded{ItemChecks{check}, ProjectChecks{check}, SessionChecks{check},
                        IncidentChecks{check}, ScheduleChecks{check}, LimitChecks{check},
                        SegmentChecks{check}},
             e.body);
  fold_rows(a, stored);
  facts.flow.observe(stored, a.item);
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

}  // namespace cplane::verify_detail
