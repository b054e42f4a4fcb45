// The Prometheus collector of one store: counters folded from the log,
// gauges from a few index reads (include/cplane/metrics.hpp).
//
// The fold. A collector remembers the last seq it folded, its counters, the
// items currently claimed and the sessions open. A scrape reads the events
// after that seq through ControlStore::read_log, a page at a time (every
// event delivered is final, so a scrape never folds one twice or skips
// one), and each event moves the counters; a claim of an item that is in
// the claimed set is a reclaim (its previous claim never ended).
//
// The seed. A collector that loaded no state starts (unless from_start) at
// `start`, the log's end as read_log sees it, with its counters at zero
// and the claimed set and open sessions read from the rows of a snapshot
// taken after it. That snapshot may already hold some events past `start`
// (PostgreSQL commits seqs out of order; any backend may commit between
// the two reads), whose effect the seeded sets then show. Replaying them is
// harmless for the sets (each event sets an item's or a session's state
// outright, and a stream's events commit in seq order), but a claim among
// them cannot be judged from a set that already includes it: so a claim
// up to the snapshot's newest seq (`overlap`) is judged from its own
// item's events instead. After those, the sets are exact.
#include <cplane/metrics.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "commands/backend_access.hpp"
#include "library/item_clock.hpp"
#include "library/metrics_state.hpp"

namespace cplane {

std::string_view to_string(MetricType type) {
  return type == MetricType::counter ? "counter" : "gauge";
}

// ---- the exposition format ------------------------------------------------------

namespace {

// HELP text: backslash and newline escaped; label values: also the quote.
std::string escaped(std::string_view text, bool label_value) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        if (label_value) {
          out += "\\\"";
          break;
        }
        [[fallthrough]];
      default: out += c;
    }
  }
  return out;
}

std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  return fmt::format("{}", value);
}

}  // namespace

std::string to_prometheus_text(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const auto& family : families) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", family.name, escaped(family.help, false),
                       family.name, to_string(family.type));
    for (const auto& sample : family.samples) {
      out += family.name;
      if (!sample.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < sample.labels.size(); ++i) {
          if (i > 0) out += ',';
          out += sample.labels[i].first;
          out += "=\"";
          out += escaped(sample.labels[i].second, true);
          out += '"';
        }
        out += '}';
      }
      out += ' ';
      out += number(sample.value);
      out += '\n';
    }
  }
  return out;
}

// ---- the collector -----------------------------------------------------------------

namespace {

using metrics::Counter;
using metrics::kCounters;
using Labels = std::vector<std::string>;

// The events a scrape reads at a time.
constexpr std::size_t kPage = 5000;

// Every stored type name, for events_total's zero series.
template <std::size_t... I>
std::vector<std::string> type_names(std::index_sequence<I...>) {
  return {std::string(type_name(EventBody{std::in_place_index<I>}))...};
}
const std::vector<std::string>& all_type_names() {
  static const std::vector<std::string> names =
      type_names(std::make_index_sequence<std::variant_size_v<EventBody>>{});
  return names;
}

}  // namespace

class MetricsCollector::State : public metrics::FoldState {};

MetricsCollector::MetricsCollector(ControlStore& store, MetricsOptions options)
    : store_(&store), state_(std::make_unique<State>()) {
  state_->from_start = options.from_start;
}
MetricsCollector::~MetricsCollector() = default;
MetricsCollector::MetricsCollector(MetricsCollector&&) noexcept = default;
MetricsCollector& MetricsCollector::operator=(MetricsCollector&&) noexcept = default;

Seq MetricsCollector::folded_seq() const { return state_->seq; }
std::int64_t MetricsCollector::events_read() const { return state_->events_read; }

std::string MetricsCollector::database_id() {
  return BackendAccess::with(*store_, [](storage::Backend& b) { return b.database_id(); });
}

std::string MetricsCollector::save_state() const { return metrics::save(*state_); }

void MetricsCollector::load_state(std::string_view text) {
  metrics::FoldState loaded = metrics::load(text);
  if (loaded.seeded) {
    const std::string id = database_id();
    if (loaded.database_id != id) {
      throw InvalidArgument(InvalidArgument::Reason::conflict,
                            fmt::format("the metrics state was saved from database {}, not this "
                                        "one ({}): remove it, or name another state file",
                                        quote_id(loaded.database_id), quote_id(id)));
    }
  }
  loaded.from_start = state_->from_start;
  static_cast<metrics::FoldState&>(*state_) = std::move(loaded);
}

namespace {

void seed(metrics::FoldState& st, ControlStore& store, Seq end) {
  const bool from_start = st.from_start;
  st = metrics::FoldState{};
  st.from_start = from_start;
  st.seeded = true;
  BackendAccess::with(store, [&](storage::Backend& b) {
    st.database_id = b.database_id();
    if (from_start) return;
    st.seq = end;
    auto tx = storage::Transaction::read(b);
    st.overlap = b.last_seq();
    for (auto& id : b.claimed_items()) st.claimed.insert(std::move(id));
    auto sessions = b.scan_sessions();
    SessionRow row;
    while (sessions->next(row)) {
      if (row.is_open()) st.sessions.insert(row.session_id);
    }
    tx.commit();
  });
}

void fold(metrics::FoldState& st, ControlStore& store, const StoredEvent& s) {
  const Event& e = s.event;
  const std::string& p = e.project_id;
  st.add(Counter::events, {std::string(s.type())});
  const auto claim = [&](const char* via) {
    st.add(Counter::claims, {p, via});
    // In the seed's overlap, judged from the item's own events.
    const bool reclaim = s.seq <= st.overlap
                             ? metrics::clock_before(store, e.item_id, s.seq).claimed
                             : st.claimed.contains(e.item_id);
    if (reclaim) st.add(Counter::reclaims, {p});
    st.claimed.insert(e.item_id);
  };
  const auto end = [&] { st.claimed.erase(e.item_id); };
  std::visit(Overloaded{
                 [&](const ItemQueued&) { st.add(Counter::enqueued, {p}); },
                 [&](const ItemClaimed&) { claim("claim"); },
                 [&](const ItemAssigned&) { claim("assign"); },
                 [&](const ItemFinished& f) {
                   st.add(Counter::finishes, {p, std::string(to_string(f.outcome))});
                   end();
                 },
                 [&](const AttemptFailed&) {
                   st.add(Counter::attempt_failures, {p});
                   end();
                 },
                 [&](const ItemReleased&) {
                   st.add(Counter::releases, {p});
                   end();
                 },
                 [&](const ItemCancelled&) {
                   st.add(Counter::cancels, {p});
                   end();
                 },
                 [&](const ItemClosed& c) {
                   st.add(Counter::closes, {p, std::string(to_string(c.reason))});
                   end();
                 },
                 [&](const LeaseExpired&) { st.add(Counter::lease_expiries, {p}); },
                 [&](const ItemRetried&) { st.add(Counter::retries, {p}); },
                 [&](const ItemRescheduled&) { st.add(Counter::reschedules, {p}); },
                 [&](const ScheduleFired& f) { st.add(Counter::schedule_fires, {p, f.name}); },
                 [&](const ScheduleSkipped& k) {
                   st.add(Counter::schedule_skips, {p, k.name, k.reason});
                 },
                 [&](const MutationRecorded& m) { st.add(Counter::mutations, {p, m.action}); },
                 [&](const SessionOpened& o) { st.sessions.insert(o.session); },
                 [&](const SessionClosed& c) { st.sessions.erase(c.session); },
                 [](const auto&) {},
             },
             e.body);
}

struct Snapshot {
  Micros now = 0;
  std::vector<ProjectRow> projects;
  std::vector<storage::Backend::ProjectGauges> gauges;
};

MetricSample sample(Labels names, const Labels& values, double value) {
  MetricSample s;
  for (std::size_t i = 0; i < names.size(); ++i) s.labels.emplace_back(names[i], values.at(i));
  s.value = value;
  return s;
}

double seconds(Micros micros) { return static_cast<double>(micros) / 1e6; }

// The fixed values of a counter's second label, written as zero series so
// that a rate() over them starts at the first scrape; {} for labels whose
// values are only known once seen (schedules, actions).
std::vector<Labels> zero_series(Counter c, const std::string& project) {
  switch (c) {
    case Counter::claims: return {{project, "assign"}, {project, "claim"}};
    case Counter::finishes: return {{project, "done"}, {project, "failed"}};
    case Counter::closes: return {{project, "closed"}, {project, "merged"}};
    case Counter::schedule_fires:
    case Counter::schedule_skips:
    case Counter::mutations:
    case Counter::events: return {};
    default: return {{project}};
  }
}

}  // namespace

std::vector<MetricFamily> MetricsCollector::collect(std::optional<Micros> now) {
  if (now) require_now(*now);
  auto& st = *state_;
  const Seq end = store_->log_end();
  // A log that ends before the state (a restored store under the same id)
  // starts the counters again: a counter reset.
  if (!st.seeded || end < st.seq) seed(st, *store_, end);

  std::int64_t read = 0;
  for (;;) {
    ControlStore::LogQuery query;
    query.after = st.seq;
    query.max = kPage;
    const auto page = store_->read_log(query);
    for (const auto& e : page.events) fold(st, *store_, e);
    read += static_cast<std::int64_t>(page.events.size());
    st.seq = std::max(st.seq, page.next);
    if (page.events.size() < kPage) break;
  }
  st.events_read += read;

  const Snapshot snap = BackendAccess::with(*store_, [&](storage::Backend& b) {
    auto tx = storage::Transaction::read(b);
    Snapshot s;
    s.now = now ? *now : b.now();
    s.projects = b.all_projects();
    s.gauges = b.project_gauges(s.now);
    tx.commit();
    return s;
  });

  std::set<std::string> projects;
  for (const auto& p : snap.projects) projects.insert(p.project_id);
  for (const auto& g : snap.gauges) projects.insert(g.project_id);

  std::vector<MetricFamily> out;
  // Gauges.
  {
    std::map<std::string, const storage::Backend::ProjectGauges*> by_project;
    for (const auto& g : snap.gauges) by_project[g.project_id] = &g;
    const storage::Backend::ProjectGauges none;
    const auto of = [&](const std::string& p) -> const storage::Backend::ProjectGauges& {
      const auto it = by_project.find(p);
      return it == by_project.end() ? none : *it->second;
    };
    MetricFamily items{"cplane_items", MetricType::gauge,
                       "Open items by project and status (ready, scheduled, claimed).", {}};
    MetricFamily due{"cplane_items_due", MetricType::gauge,
                     "Scheduled items whose time has come: claimable now.", {}};
    MetricFamily age{"cplane_oldest_available_age_seconds", MetricType::gauge,
                     "How long the item claimable longest (ready, due, or under a lapsed "
                     "lease) has waited: the queue's lag. 0 when none is.",
                     {}};
    MetricFamily leases{"cplane_leases", MetricType::gauge,
                        "Claimed items by lease state: live, or lapsed and not yet reclaimed.",
                        {}};
    MetricFamily paused{"cplane_project_paused", MetricType::gauge,
                        "1 while the project is paused (no claim takes its items).", {}};
    std::map<std::string, bool> is_paused;
    for (const auto& p : snap.projects) is_paused[p.project_id] = p.paused;
    for (const auto& p : projects) {
      const auto& g = of(p);
      items.samples.push_back(sample({"project", "status"}, {p, "claimed"}, double(g.claimed)));
      items.samples.push_back(sample({"project", "status"}, {p, "ready"}, double(g.ready)));
      items.samples.push_back(
          sample({"project", "status"}, {p, "scheduled"}, double(g.scheduled)));
      due.samples.push_back(sample({"project"}, {p}, double(g.due)));
      Micros oldest = 0;
      const auto waited = [&](Micros since) {
        if (since > 0 && since <= snap.now) oldest = std::max(oldest, snap.now - since);
      };
      if (g.ready > 0) waited(g.oldest_ready_at);
      if (g.due > 0) waited(g.earliest_due);
      if (g.lapsed > 0) waited(g.earliest_lapse);
      age.samples.push_back(sample({"project"}, {p}, seconds(oldest)));
      leases.samples.push_back(sample({"project", "state"}, {p, "lapsed"}, double(g.lapsed)));
      leases.samples.push_back(
          sample({"project", "state"}, {p, "live"}, double(g.claimed - g.lapsed)));
      paused.samples.push_back(sample({"project"}, {p}, is_paused[p] ? 1 : 0));
    }
    out.push_back(std::move(items));
    out.push_back(std::move(due));
    out.push_back(std::move(age));
    out.push_back(std::move(leases));
    out.push_back(std::move(paused));
    out.push_back({"cplane_sessions_open", MetricType::gauge, "Sessions open (not closed).",
                   {sample({}, {}, double(st.sessions.size()))}});
    out.push_back({"cplane_log_seq", MetricType::gauge,
                   "The seq of the last event the counters have folded.",
                   {sample({}, {}, double(st.seq))}});
    out.push_back({"cplane_scrape_events_read", MetricType::gauge,
                   "Events this scrape read from the log (its cost, with a few index reads).",
                   {sample({}, {}, double(read))}});
  }
  // Counters.
  for (std::size_t i = 0; i < kCounters.size(); ++i) {
    const auto& def = kCounters[i];
    const auto c = static_cast<Counter>(i);
    std::map<Labels, std::int64_t> series = st.counters[i];
    if (c == Counter::events) {
      for (const auto& type : all_type_names()) series.try_emplace({type}, 0);
    }
    for (const auto& p : projects) {
      for (auto& labels : zero_series(c, p)) series.try_emplace(std::move(labels), 0);
    }
    MetricFamily family{def.name, MetricType::counter, def.help, {}};
    for (const auto& [labels, value] : series) {
      family.samples.push_back(sample(def.labels, labels, double(value)));
    }
    out.push_back(std::move(family));
  }
  return out;
}

std::string MetricsCollector::scrape(std::optional<Micros> now) {
  return to_prometheus_text(collect(now));
}

}  // namespace cplane
