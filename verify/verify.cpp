#include "verify/verify.hpp"

#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "events/codec.hpp"
#include "events/errors.hpp"
#include "projections/apply.hpp"
#include "projections/rules.hpp"

namespace cplane {

const std::vector<std::string> kProblemKinds = {
    "no_creation_event",      "duplicate_creation_event", "orphan_events",
    "two_terminal_events",    "event_after_terminal",     "terminal_without_event",
    "terminal_events_disagree", "event_without_terminal", "ready_after_claim",
    "status_disagrees",       "fence_not_monotonic",      "stale_fence_accepted",
    "fence_disagrees",        "owner_disagrees",          "attempts_disagrees",
    "lease_disagrees",        "project_disagrees",        "payload_disagrees",
    "detail_disagrees",       "queued_disagrees",         "last_seq_disagrees",
    "item_in_unknown_project", "undecodable_event",       "unknown_event_type",
    "index_disagrees",        "claim_while_leased",       "project_row_missing",      "project_row_without_event",
    "project_row_disagrees",  "assignment_missing",       "assignment_without_event",
};

namespace {

constexpr std::int64_t kProgressEvery = 65536;

// A difference between a stored row and the fold, one field.
struct FieldDiff {
  std::string field;
  std::string stored;
  std::string folded;
};

std::string quoted(const std::string& s) { return fmt::format("'{}'", s); }

std::vector<FieldDiff> diff(const storage::ScannedItem& scanned, const ItemRow& folded) {
  const ItemRow& stored = scanned.row;
  std::vector<FieldDiff> out;
  auto add = [&](const char* field, auto a, auto b) {
    if (a != b) out.push_back({field, fmt::format("{}", a), fmt::format("{}", b)});
  };
  add("project_id", quoted(stored.project_id), quoted(folded.project_id));
  add("payload", quoted(stored.payload), quoted(folded.payload));
  if (!scanned.invalid_status.empty()) {
    // Not a status at all: always a difference, whatever the fold says.
    out.push_back({"status", quoted(scanned.invalid_status) + " (not a status)",
                   std::string(to_string(folded.status))});
  } else {
    add("status", std::string(to_string(stored.status)), std::string(to_string(folded.status)));
  }
  add("owner", quoted(stored.owner), quoted(folded.owner));
  add("fence", stored.fence, folded.fence);
  add("attempts", stored.attempts, folded.attempts);
  add("lease_expires_at", stored.lease_expires_at, folded.lease_expires_at);
  add("detail", quoted(stored.detail), quoted(folded.detail));
  add("queued_seq", stored.queued_seq, folded.queued_seq);
  add("queued_at", stored.queued_at, folded.queued_at);
  add("updated_at", stored.updated_at, folded.updated_at);
  add("last_seq", stored.last_seq, folded.last_seq);
  return out;
}

std::vector<FieldDiff> diff(const ProjectRow& stored, const ProjectRow& folded) {
  std::vector<FieldDiff> out;
  auto add = [&](const char* field, auto a, auto b) {
    if (a != b) out.push_back({field, fmt::format("{}", a), fmt::format("{}", b)});
  };
  add("title", quoted(stored.title), quoted(folded.title));
  add("status", quoted(stored.status), quoted(folded.status));
  add("created_at", stored.created_at, folded.created_at);
  add("last_seq", stored.last_seq, folded.last_seq);
  return out;
}

std::vector<FieldDiff> diff(const ProjectActorRow& stored, const ProjectActorRow& folded) {
  std::vector<FieldDiff> out;
  if (stored.assigned_at != folded.assigned_at) {
    out.push_back({"assigned_at", fmt::format("{}", stored.assigned_at),
                   fmt::format("{}", folded.assigned_at)});
  }
  if (stored.last_seq != folded.last_seq) {
    out.push_back({"last_seq", fmt::format("{}", stored.last_seq),
                   fmt::format("{}", folded.last_seq)});
  }
  return out;
}

std::vector<std::string> describe(const std::vector<FieldDiff>& diffs) {
  std::vector<std::string> out;
  for (const auto& d : diffs) out.push_back(fmt::format("{}: {} -> {}", d.field, d.stored, d.folded));
  return out;
}

// The fold of one stream plus what the fold saw that no row can show.
struct ItemAudit {
  std::string item_id;
  ItemRow folded;
  std::int64_t events = 0;
  bool created = false;
  bool unreadable = false;
  bool reported_no_creation = false;
  int terminals = 0;
  std::vector<LedgerProblem> log_problems;
};

// Decodes a raw event and checks its index columns. Adds problems to `out`;
// returns nullopt when the body cannot be read.
std::optional<StoredEvent> read_event(const storage::RawEvent& raw,
                                      std::vector<LedgerProblem>& out) {
  StoredEvent stored{raw.seq, {}};
  try {
    stored.event = decode(raw.body);
  } catch (const UnknownEventType& e) {
    out.push_back({"unknown_event_type", raw.item_id, raw.project_id,
                   fmt::format("event seq {} (type column '{}'): {}", raw.seq, raw.type, e.what())});
    return std::nullopt;
  } catch (const UnreadableEvent& e) {
    out.push_back({"undecodable_event", raw.item_id, raw.project_id,
                   fmt::format("event seq {} (type column '{}'): {}", raw.seq, raw.type, e.what())});
    return std::nullopt;
  }
  const Event& e = stored.event;
  auto check = [&](const char* column, const auto& stored_value, const auto& body_value) {
    if (stored_value != body_value) {
      out.push_back({"index_disagrees", raw.item_id, raw.project_id,
                     fmt::format("event seq {}: column {} is '{}' but the body says '{}'", raw.seq,
                                 column, stored_value, body_value)});
    }
  };
  check("item_id", raw.item_id, e.item_id);
  check("project_id", raw.project_id, e.project_id);
  check("type", raw.type, std::string(type_name(e.body)));
  check("at", raw.at, e.at);
  return stored;
}

bool is_item_event(const EventBody& body) {
  return std::holds_alternative<ItemQueued>(body) || std::holds_alternative<ItemClaimed>(body) ||
         std::holds_alternative<ItemFinished>(body);
}

void fold_item_event(ItemAudit& audit, const storage::RawEvent& raw) {
  ++audit.events;
  auto stored = read_event(raw, audit.log_problems);
  if (!stored) {
    // An unreadable event may be the creation: claim nothing about what the
    // log lacks once part of it cannot be read.
    audit.unreadable = true;
    audit.reported_no_creation = true;
    return;
  }
  const Event& e = stored->event;
  auto problem = [&](const char* kind, std::string detail) {
    audit.log_problems.push_back({kind, audit.item_id, e.project_id, std::move(detail)});
  };
  if (!is_item_event(e.body)) {
    // read_event has reported it: its item_id column is not its body's
    // (a project event has none). One problem per fault.
    return;
  }
  if (std::holds_alternative<ItemQueued>(e.body)) {
    if (audit.created) {
      problem("duplicate_creation_event",
              fmt::format("item {} is queued again by event seq {}", audit.item_id, raw.seq));
    }
    audit.created = true;
  } else if (!audit.created && !audit.reported_no_creation) {
    audit.reported_no_creation = true;
    problem("no_creation_event",
            fmt::format("item {} has a {} event (seq {}) before any queued event", audit.item_id,
                        type_name(e.body), raw.seq));
  }
  if (audit.terminals > 0) {
    problem("event_after_terminal",
            fmt::format("event seq {} ({}) follows the terminal event of item {}", raw.seq,
                        type_name(e.body), audit.item_id));
  }
  if (audit.unreadable) {
    // An earlier event of this item could not be read: the fold no longer
    // knows the fence, status or lease it left, so checks against them
    // would only report the unreadable event again, as something else.
  } else if (auto* claimed = std::get_if<ItemClaimed>(&e.body)) {
    // Exactly one worker at a time: a claim may only take a ready item or
    // one whose lease had lapsed when the claim was made.
    if (audit.folded.status == ItemStatus::claimed && !claimable(audit.folded, e.at)) {
      problem("claim_while_leased",
              fmt::format("claim seq {} by {} at {} took the item while {}'s lease ran until {}",
                          raw.seq, claimed->owner, e.at, audit.folded.owner,
                          audit.folded.lease_expires_at));
    }
    if (!fence_rises(audit.folded.fence, claimed->fence)) {
      problem("fence_not_monotonic",
              fmt::format("claim seq {} has fence {}, not above the earlier fence {}", raw.seq,
                          claimed->fence, audit.folded.fence));
    }
  }
  if (auto* finished = std::get_if<ItemFinished>(&e.body)) {
    ++audit.terminals;
    if (audit.terminals == 2) {
      problem("two_terminal_events",
              fmt::format("item {} has a second terminal event ({} at seq {})", audit.item_id,
                          type_name(e.body), raw.seq));
    }
    if (!audit.unreadable && fence_refusal(&audit.folded, finished->fence)) {
      problem("stale_fence_accepted",
              fmt::format("{} at seq {} carries fence {} while the item was {} under fence {}",
                          type_name(e.body), raw.seq, finished->fence,
                          to_string(audit.folded.status), audit.folded.fence));
    }
  }
  audit.folded = apply(std::move(audit.folded), *stored);
}

// Walks the item events (by item_id, seq) and the item rows (by item_id)
// together, calling `visit(audit, stored_row)` once per item id seen on
// either side.
template <class Visit>
void replay_items(storage::Backend& backend, const Progress& progress, std::int64_t total,
                  std::int64_t& events_read, Visit&& visit) {
  auto events = backend.scan_item_events();
  auto rows = backend.scan_items();
  storage::RawEvent raw;
  storage::ScannedItem row;
  bool have_event = events->next(raw);
  bool have_row = rows->next(row);
  std::string previous;
  bool first = true;
  while (have_event || have_row) {
    const std::string key = !have_row     ? raw.item_id
                            : !have_event ? row.row.item_id
                                          : std::min(raw.item_id, row.row.item_id);
    // The merge needs both sides in one order; SQLite's BINARY collation of
    // TEXT is memcmp, as is std::string's. An id stored as a BLOB (only by
    // tampering) sorts elsewhere: stop rather than report false problems.
    if (!first && key <= previous) {
      throw StorageError(StorageError::Category::corruption,
                         fmt::format("item ids are out of order near '{}': an id is stored with "
                                     "a type other than TEXT",
                                     key));
    }
    first = false;
    previous = key;
    ItemAudit audit;
    audit.item_id = key;
    while (have_event && raw.item_id == key) {
      fold_item_event(audit, raw);
      if (++events_read % kProgressEvery == 0 && progress) progress(events_read, total);
      have_event = events->next(raw);
    }
    std::optional<storage::ScannedItem> stored;
    if (have_row && row.row.item_id == key) {
      stored = std::move(row);
      have_row = rows->next(row);
    }
    visit(audit, stored);
  }
}

struct ProjectFold {
  std::map<std::string, ProjectRow> projects;
  std::map<std::pair<std::string, std::string>, ProjectActorRow> assignments;
  std::vector<LedgerProblem> problems;
  bool unreadable = false;
  std::set<std::string> misfiled_items;  // items with an event filed under no item
};

ProjectFold fold_projects(storage::Backend& backend, std::int64_t& events_read) {
  ProjectFold fold;
  auto events = backend.scan_project_events();
  storage::RawEvent raw;
  while (events->next(raw)) {
    ++events_read;
    auto stored = read_event(raw, fold.problems);
    if (!stored) {
      fold.unreadable = true;
      continue;
    }
    const Event& e = stored->event;
    if (std::holds_alternative<ProjectCreated>(e.body)) {
      auto [it, fresh] = fold.projects.try_emplace(e.project_id);
      if (!fresh) {
        fold.problems.push_back({"duplicate_creation_event", "", e.project_id,
                                 fmt::format("project {} is created again by event seq {}",
                                             e.project_id, raw.seq)});
      }
      it->second = apply(std::move(it->second), *stored);
    } else if (auto* assigned = std::get_if<ActorAssigned>(&e.body)) {
      auto& row = fold.assignments[{e.project_id, assigned->actor}];
      row = apply(std::move(row), *stored);
    } else {
      // An item event with no item_id column: read_event reported the
      // column (once). Its item's own fold misses it, so that item's row is
      // not compared (the comparison would only restate this fault).
      fold.misfiled_items.insert(e.item_id);
    }
  }
  return fold;
}

std::string status_kind(ItemStatus stored, ItemStatus folded, int log_terminals) {
  // A terminal row whose log has a terminal event but folds to something else
  // (an event after the terminal one) is reported as event_after_terminal by
  // the fold; the row itself then merely disagrees.
  if (is_terminal(stored) && !is_terminal(folded)) {
    return log_terminals > 0 ? "status_disagrees" : "terminal_without_event";
  }
  if (!is_terminal(stored) && is_terminal(folded)) return "event_without_terminal";
  if (is_terminal(stored) && is_terminal(folded)) return "terminal_events_disagree";
  if (stored == ItemStatus::ready && folded == ItemStatus::claimed) return "ready_after_claim";
  return "status_disagrees";
}

std::string field_kind(const std::string& field) {
  if (field == "project_id") return "project_disagrees";
  if (field == "lease_expires_at") return "lease_disagrees";
  if (field == "queued_seq" || field == "queued_at") return "queued_disagrees";
  if (field == "updated_at" || field == "last_seq") return "last_seq_disagrees";
  return field + "_disagrees";
}

}  // namespace

std::vector<LedgerProblem> verify_ledger(storage::Backend& backend, const Progress& progress) {
  auto tx = storage::Transaction::read(backend);
  const std::int64_t total = backend.last_seq();
  std::int64_t events_read = 0;
  ProjectFold projects = fold_projects(backend, events_read);
  std::vector<LedgerProblem> problems = std::move(projects.problems);

  for (const auto& stored : backend.all_projects()) {
    auto it = projects.projects.find(stored.project_id);
    if (it == projects.projects.end()) {
      // With an unreadable project event, the missing creation may be it.
      if (projects.unreadable) continue;
      problems.push_back({"project_row_without_event", "", stored.project_id,
                          fmt::format("project {} has a row but no project_created event",
                                      stored.project_id)});
      continue;
    }
    for (const auto& d : diff(stored, it->second)) {
      problems.push_back({"project_row_disagrees", "", stored.project_id,
                          fmt::format("project {}: {} is {} in the row but {} in the log",
                                      stored.project_id, d.field, d.stored, d.folded)});
    }
  }
  std::set<std::string> stored_projects;
  for (const auto& id : backend.project_ids(nullptr)) stored_projects.insert(id);
  for (const auto& [id, row] : projects.projects) {
    if (!stored_projects.contains(id)) {
      problems.push_back({"project_row_missing", "", id,
                          fmt::format("project {} was created at seq {} but has no row", id,
                                      row.last_seq)});
    }
  }
  std::set<std::pair<std::string, std::string>> stored_assignments;
  for (const auto& stored : backend.all_assignments()) {
    stored_assignments.insert({stored.project_id, stored.actor});
    auto it = projects.assignments.find({stored.project_id, stored.actor});
    if (it == projects.assignments.end()) {
      if (projects.unreadable) continue;
      problems.push_back({"assignment_without_event", "", stored.project_id,
                          fmt::format("actor {} is assigned to project {} with no "
                                      "actor_assigned event",
                                      stored.actor, stored.project_id)});
    } else if (auto d = diff(stored, it->second); !d.empty()) {
      problems.push_back({"project_row_disagrees", "", stored.project_id,
                          fmt::format("assignment of {} to {}: {} is {} in the row but {} in "
                                      "the log",
                                      stored.actor, stored.project_id, d[0].field, d[0].stored,
                                      d[0].folded)});
    }
  }
  for (const auto& [key, row] : projects.assignments) {
    if (!stored_assignments.contains(key)) {
      problems.push_back({"assignment_missing", "", key.first,
                          fmt::format("actor {} was assigned to project {} at seq {} but the "
                                      "assignment has no row",
                                      key.second, key.first, row.last_seq)});
    }
  }

  replay_items(backend, progress, total, events_read,
               [&](ItemAudit& audit, const std::optional<storage::ScannedItem>& stored) {
    for (auto& p : audit.log_problems) problems.push_back(std::move(p));
    const std::string project = stored ? stored->row.project_id : audit.folded.project_id;
    if (audit.events == 0) {
      problems.push_back({"no_creation_event", audit.item_id, project,
                          fmt::format("item {} has a row ({}) but no events at all",
                                      audit.item_id,
                                      stored->invalid_status.empty()
                                          ? std::string(to_string(stored->row.status))
                                          : stored->invalid_status)});
      return;
    }
    if (audit.created && !projects.unreadable &&
        !projects.projects.contains(audit.folded.project_id)) {
      problems.push_back({"item_in_unknown_project", audit.item_id, audit.folded.project_id,
                          fmt::format("item {} was queued into project {}, which the log never "
                                      "created",
                                      audit.item_id, audit.folded.project_id)});
    }
    if (!stored) {
      problems.push_back({"orphan_events", audit.item_id, project,
                          fmt::format("item {} has {} event(s), the last at seq {}, but no row",
                                      audit.item_id, audit.events, audit.folded.last_seq)});
      return;
    }
    // The fold is not a row to compare with.
    if (!audit.created || audit.unreadable || projects.misfiled_items.contains(audit.item_id)) return;
    for (const auto& d : diff(*stored, audit.folded)) {
      const std::string kind =
          d.field != "status"                ? field_kind(d.field)
          : !stored->invalid_status.empty() ? std::string("status_disagrees")
                                            : status_kind(stored->row.status, audit.folded.status,
                                                          audit.terminals);
      problems.push_back({kind, audit.item_id, project,
                          fmt::format("item {}: {} is {} in the row but {} in the log",
                                      audit.item_id, d.field, d.stored, d.folded)});
    }
  });
  tx.commit();
  if (progress) progress(events_read, total);
  return problems;
}

RebuildReport rebuild(storage::Backend& backend, bool dry_run, const Progress& progress) {
  // A dry run reads one snapshot like verify: it never waits for, nor holds
  // off, a writer.
  auto tx = dry_run ? storage::Transaction::read(backend)
                    : storage::Transaction::write(backend, storage::Sync::full);
  RebuildReport report;
  report.dry_run = dry_run;
  const std::int64_t total = backend.last_seq();

  auto refuse_unreadable = [](const std::vector<LedgerProblem>& problems) {
    for (const auto& p : problems) {
      if (p.kind == "undecodable_event" || p.kind == "unknown_event_type") {
        throw UnreadableEvent("rebuild refused, nothing changed: " + p.detail);
      }
    }
  };

  ProjectFold projects = fold_projects(backend, report.events);
  refuse_unreadable(projects.problems);
  std::vector<ProjectRow> put_projects;
  std::vector<std::string> drop_projects;
  std::set<std::string> seen;
  for (const auto& stored : backend.all_projects()) {
    seen.insert(stored.project_id);
    auto it = projects.projects.find(stored.project_id);
    if (it == projects.projects.end()) {
      report.changes.push_back({"projects", stored.project_id, "delete", {}});
      drop_projects.push_back(stored.project_id);
    } else if (auto d = diff(stored, it->second); !d.empty()) {
      report.changes.push_back({"projects", stored.project_id, "update", describe(d)});
      put_projects.push_back(it->second);
    }
  }
  for (const auto& [id, row] : projects.projects) {
    if (!seen.contains(id)) {
      report.changes.push_back({"projects", id, "insert", {}});
      put_projects.push_back(row);
    }
  }
  std::vector<ProjectActorRow> put_assignments;
  std::vector<ProjectActorRow> drop_assignments;
  std::set<std::pair<std::string, std::string>> seen_assignments;
  for (const auto& stored : backend.all_assignments()) {
    const auto key = std::pair{stored.project_id, stored.actor};
    seen_assignments.insert(key);
    auto it = projects.assignments.find(key);
    const std::string name = stored.project_id + "/" + stored.actor;
    if (it == projects.assignments.end()) {
      report.changes.push_back({"project_actors", name, "delete", {}});
      drop_assignments.push_back(stored);
    } else if (auto d = diff(stored, it->second); !d.empty()) {
      report.changes.push_back({"project_actors", name, "update", describe(d)});
      put_assignments.push_back(it->second);
    }
  }
  for (const auto& [key, row] : projects.assignments) {
    if (!seen_assignments.contains(key)) {
      report.changes.push_back({"project_actors", key.first + "/" + key.second, "insert", {}});
      put_assignments.push_back(row);
    }
  }

  // Rows are written after the scan: the cursors must not see their own writes.
  std::vector<ItemRow> put_items;
  std::vector<std::string> drop_items;
  replay_items(backend, progress, total, report.events,
               [&](ItemAudit& audit, const std::optional<storage::ScannedItem>& stored) {
    refuse_unreadable(audit.log_problems);
    if (audit.created) ++report.items;
    if (!audit.created) {
      if (stored) {
        report.changes.push_back({"items", audit.item_id, "delete", {"no queued event in the log"}});
        drop_items.push_back(audit.item_id);
      }
      return;
    }
    if (!stored) {
      report.changes.push_back({"items", audit.item_id, "insert", {}});
      put_items.push_back(std::move(audit.folded));
    } else if (auto d = diff(*stored, audit.folded); !d.empty()) {
      report.changes.push_back({"items", audit.item_id, "update", describe(d)});
      put_items.push_back(std::move(audit.folded));
    }
  });

  if (dry_run) {
    if (progress) progress(report.events, total);
    return report;  // the guard rolls back: nothing written
  }
  for (const auto& id : drop_projects) backend.delete_project(id);
  for (const auto& row : put_projects) backend.put_project(row);
  for (const auto& row : drop_assignments) backend.delete_assignment(row.project_id, row.actor);
  for (const auto& row : put_assignments) backend.put_assignment(row);
  for (const auto& id : drop_items) backend.delete_item(id);
  for (const auto& row : put_items) backend.put_item(row);
  tx.commit();
  if (progress) progress(report.events, total);
  return report;
}

}  // namespace cplane
