// Incident links: monitoring incidents tied to the forge issues that track
// them (never work items), and the import of an older control plane's links.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include <cplane/store.hpp>

#include "commands/combine.hpp"
#include "commands/decide.hpp"
#include "commands/internal.hpp"
#include "events/errors.hpp"
#include "events/json.hpp"
#include "projections/apply.hpp"
#include "storage/backend.hpp"
#include "storage/sqlite/legacy_incidents.hpp"

namespace cplane {

using namespace detail;
using storage::Transaction;

namespace {

constexpr std::size_t kMaxMetadataBytes = 64 << 10;

void check_key(const IncidentKey& key) {
  require_name(key.provider, "provider");
  require_name(key.fingerprint, "fingerprint");
  for (const auto& [what, part] : {std::pair{"org", &key.org}, std::pair{"repo", &key.repo},
                                   std::pair{"environment", &key.environment}}) {
    if (!part->empty()) require_name(*part, what);  // "" is absent
  }
}

void check_observation(const IncidentObservation& o) {
  if (o.status && !o.status->empty()) require_name(*o.status, "status");  // "" is a value
  if (o.event_count && *o.event_count < 0) {
    throw InvalidArgument(fmt::format("an event count must not be negative ({})", *o.event_count));
  }
  for (const auto& [what, v] : {std::pair{"permalink", &o.permalink},
                                std::pair{"first seen", &o.first_seen},
                                std::pair{"last seen", &o.last_seen}}) {
    if (*v) require_size(**v, kMaxMetadataBytes, what);
  }
  if (o.linked_prs) {
    for (const auto& pr : *o.linked_prs) {
      require_name(pr, "pull request");
      if (pr.find(',') != std::string::npos) {
        throw InvalidArgument(fmt::format("pull request {} contains a comma", quote_id(pr)));
      }
    }
  }
}


std::string id_of(const IncidentKey& key) {
  return incident_stream_id(key.provider, key.fingerprint, key.org, key.repo, key.environment);
}

}  // namespace

bool ControlStore::Impl::link_incident(const IncidentKey& key, const std::string& target,
                                       const IncidentObservation& observation,
                                       std::optional<Micros> now) {
  const InUse in_use(*this);
  check_key(key);
  require_name(target, "target");
  check_observation(observation);
  if (now) require_now(*now);
  return CommandRunner::run(*this, cmd::LinkIncident{.sync = sync_for_finish(),
                                                     .key = key,
                                                     .target = target,
                                                     .observation = observation,
                                                     .now = now});
}

bool CommandRunner::exec(ControlStore::Impl& s, const cmd::LinkIncident& c) {
  const Micros at = s.clock(c.now);
  const auto before = s.backend_->find_incident(id_of(c.key));
  const auto event = decide_link_incident(before, c.key, c.target, c.observation, at);
  if (!event) return false;  // nothing new: nothing recorded
  const Seq seq = s.backend_->append(*event);
  s.backend_->put_incident(apply(before.value_or(IncidentLinkRow{}), StoredEvent{seq, *event}));
  return true;
}

IncidentLinkRow ControlStore::Impl::incident(const IncidentKey& key) {
  const InUse in_use(*this);
  check_key(key);
  auto tx = Transaction::read(*backend_);
  auto row = backend_->find_incident(id_of(key));
  tx.commit();
  if (!row) {
    throw NotFound(NotFound::Reason::unknown_incident,
                   fmt::format("no incident link for provider {}, fingerprint {}, org {}, repo {}, "
                               "environment {}",
                               quote_id(key.provider), quote_id(key.fingerprint),
                               quote_id(key.org), quote_id(key.repo),
                               quote_id(key.environment)));
  }
  return std::move(*row);
}

std::vector<IncidentLinkRow> ControlStore::Impl::incidents(const std::optional<std::string>& target) {
  const InUse in_use(*this);
  if (target) require_name(*target, "target");
  auto tx = Transaction::read(*backend_);
  std::vector<IncidentLinkRow> out;
  if (target) {
    out = backend_->incidents_for(*target);
  } else {
    auto cursor = backend_->scan_incidents();
    IncidentLinkRow row;
    while (cursor->next(row)) out.push_back(row);
  }
  tx.commit();
  return out;
}

// ---- migrate-incidents ---------------------------------------------------------------

std::vector<LegacyIncidentRow> read_legacy_incident_links(const std::string& path) {
  return storage::read_legacy_incident_links(path);
}

namespace {

// A value as a conflict shows it: whole (never cut, unlike quote_id), in
// quotes with '\\', '\'' and control bytes escaped, or NULL. Distinct values
// show distinct.
std::string shown(const std::optional<std::string>& v) {
  if (!v) return "NULL";
  std::string out = "'";
  for (const char c : *v) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7f) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out + "'";
}
std::string shown(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : "NULL";
}

// The fields of a group's rows that do not all agree, compared as raw
// values (bytes, and NULL apart from ''), with their distinct values shown.
// The scope is not compared: NULL and '' are the same absence there.
std::vector<std::pair<std::string, std::vector<std::string>>> disagreements(
    const std::vector<const LegacyIncidentRow*>& rows) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  auto field = [&](const char* name, auto get) {
    std::vector<decltype(get(*rows.front()))> values;
    for (const auto* r : rows) {
      auto v = get(*r);
      if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
    if (values.size() > 1) {
      std::vector<std::string> texts;
      for (const auto& v : values) texts.push_back(shown(v));
      out.emplace_back(name, std::move(texts));
    }
  };
  field("target", [](const LegacyIncidentRow& r) { return std::optional<std::string>(r.target); });
  field("status", [](const LegacyIncidentRow& r) { return r.status; });
  field("event_count", [](const LegacyIncidentRow& r) { return r.event_count; });
  field("permalink", [](const LegacyIncidentRow& r) { return r.permalink; });
  field("first_seen", [](const LegacyIncidentRow& r) { return r.first_seen; });
  field("last_seen", [](const LegacyIncidentRow& r) { return r.last_seen; });
  field("linked_prs", [](const LegacyIncidentRow& r) { return r.linked_prs; });
  return out;
}

IncidentLinked link_of(const LegacyIncidentRow& r) {
  return IncidentLinked{r.provider,  r.fingerprint, r.org.value_or(""), r.repo.value_or(""),
                        r.environment.value_or(""), r.target, r.status, r.event_count,
                        r.permalink, r.first_seen,  r.last_seen, r.linked_prs};
}

}  // namespace

IncidentImport ControlStore::Impl::import_incident_links(
    const std::vector<LegacyIncidentRow>& rows, const IncidentImportOptions& options) {
  const InUse in_use(*this);
  const bool dry_run = options.dry_run;
  const std::optional<Micros>& now = options.now;
  if (now) require_now(*now);
  IncidentImport report;
  report.dry_run = dry_run;
  report.rows = static_cast<std::int64_t>(rows.size());
  // Groups by the canonical key, in key order; rows keep their order.
  std::map<std::string, std::vector<const LegacyIncidentRow*>> groups;
  for (const auto& r : rows) {
    // The checks link_incident makes: a legacy row no link could hold is
    // refused (naming it), never imported as it is or dropped.
    try {
      check_key({r.provider, r.fingerprint, r.org.value_or(""), r.repo.value_or(""),
                 r.environment.value_or("")});
      require_name(r.target, "target");
      check_observation({r.status, r.event_count, r.permalink, r.first_seen, r.last_seen, {}});
      if (r.linked_prs) {
        require_size(*r.linked_prs, kMaxMetadataBytes, "linked_prs");
        // Each reference as `incident link --pr` takes it.
        check_observation({{}, {}, {}, {}, {}, split_list(*r.linked_prs)});
      }
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(e.reason(),
                            fmt::format("legacy row {}: {}; nothing was imported", r.rowid,
                                        e.what()));
    }
    groups[incident_stream_id(r.provider, r.fingerprint, r.org.value_or(""), r.repo.value_or(""),
                              r.environment.value_or(""))]
        .push_back(&r);
  }
  report.links = static_cast<std::int64_t>(groups.size());
  const IncidentImport checked = report;  // each attempt starts from here
  return transact(!dry_run, sync_for_finish(), [&](Transaction& tx) -> IncidentImport {
    IncidentImport report = checked;
    const Micros at = clock(now);
    std::vector<IncidentLinked> to_write;
    for (const auto& [id, group] : groups) {
      const IncidentLinked link = link_of(*group.front());
      const IncidentKey key{link.provider, link.fingerprint, link.org, link.repo, link.environment};
      auto fields = disagreements(group);
      const auto stored = backend_->find_incident(id);
      if (fields.empty() && stored && !link_unchanged(link, *stored)) {
        // The store's own link disagrees: name each field with both values.
        const IncidentLinkRow& s = *stored;
        auto both = [&](const char* name, std::string store_value, std::string legacy_value) {
          if (store_value != legacy_value) {
            fields.emplace_back(name, std::vector<std::string>{"store: " + store_value,
                                                               std::move(legacy_value)});
          }
        };
        both("target", shown(std::optional<std::string>(s.target)),
             shown(std::optional<std::string>(link.target)));
        both("status", shown(s.status), shown(link.status));
        both("event_count", shown(s.event_count), shown(link.event_count));
        both("permalink", shown(s.permalink), shown(link.permalink));
        both("first_seen", shown(s.first_seen), shown(link.first_seen));
        both("last_seen", shown(s.last_seen), shown(link.last_seen));
        both("linked_prs", shown(s.linked_prs), shown(link.linked_prs));
      }
      if (!fields.empty()) {
        IncidentImport::Conflict conflict{key, {}, std::move(fields)};
        for (const auto* r : group) conflict.rowids.push_back(r->rowid);
        report.conflicts.push_back(std::move(conflict));
        continue;
      }
      report.collapsed += static_cast<std::int64_t>(group.size()) - 1;
      if (stored) {
        ++report.unchanged;
      } else {
        ++report.imported;
        to_write.push_back(link);
      }
    }
    // Fails closed: one conflict and nothing is imported.
    if (!report.conflicts.empty()) {
      report.imported = 0;
      return report;
    }
    if (dry_run) return report;
    for (auto& link : to_write) {
      const Event event{at, kControlPlane, "", "", std::move(link)};
      const Seq seq = backend_->append(event);
      backend_->put_incident(apply(IncidentLinkRow{}, StoredEvent{seq, event}));
    }
    tx.commit();
    return report;
  });
}

}  // namespace cplane
