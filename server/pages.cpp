// The console's pages but the item's own (item_page.cpp): server-rendered
// HTML, each from reads of one snapshot per store call, every value through
// escape().
#include <map>

#include <fmt/format.h>

#include <cplane/verify.hpp>

#include "server/html.hpp"
#include "server/router.hpp"

namespace cplane::server {

namespace {

constexpr ItemStatus kShownStatuses[] = {ItemStatus::ready,   ItemStatus::scheduled,
                                         ItemStatus::claimed, ItemStatus::done,
                                         ItemStatus::failed,  ItemStatus::cancelled,
                                         ItemStatus::closed};

std::int64_t count_of(const ControlStore::StatusCounts& c, ItemStatus s) {
  switch (s) {
    case ItemStatus::ready: return c.ready;
    case ItemStatus::claimed: return c.claimed;
    case ItemStatus::done: return c.done;
    case ItemStatus::failed: return c.failed;
    case ItemStatus::closed: return c.closed;
    case ItemStatus::scheduled: return c.scheduled;
    case ItemStatus::cancelled: return c.cancelled;
  }
  return 0;
}

std::string status_badge(ItemStatus s) {
  return fmt::format("<span class=\"status {0}\">{0}</span>", to_string(s));
}

// The first `max` characters of `text` (whole UTF-8 sequences), "..." after.
std::string preview(std::string_view text, std::size_t max) {
  std::size_t at = 0, chars = 0;
  while (at < text.size() && chars < max) {
    ++at;
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    ++chars;
  }
  return at < text.size() ? std::string(text.substr(0, at)) + "…" : std::string(text);
}

std::string counts_row(std::string_view head, const ControlStore::StatusCounts& c,
                       std::string_view project) {
  std::string row = "<tr><th>" + std::string(head) + "</th>";
  std::int64_t total = 0;
  for (const ItemStatus s : kShownStatuses) {
    const std::int64_t n = count_of(c, s);
    total += n;
    const std::string filter = project.empty()
                                   ? fmt::format("/items?status={}", to_string(s))
                                   : fmt::format("/items?project={}&amp;status={}",
                                                 url_part(project), to_string(s));
    row += n == 0 ? "<td class=\"num zero\">0</td>"
                  : fmt::format("<td class=\"num\"><a href=\"{}\">{}</a></td>", filter, n);
  }
  return row + fmt::format("<td class=\"num\">{}</td></tr>\n", total);
}

std::string counts_head() {
  std::string head = "<tr><th></th>";
  for (const ItemStatus s : kShownStatuses) head += "<th class=\"num\">" + status_badge(s) + "</th>";
  return head + "<th class=\"num\">all</th></tr>\n";
}

}  // namespace

Response page_overview(Console& console) {
  ControlStore& store = console.store();
  std::string table = "<table class=\"counts\" id=\"counts\">" + counts_head() +
                      counts_row("all projects", store.status_counts(), "");
  for (const auto& id : store.visible_projects()) {
    table += counts_row(project_link(id), store.status_counts(id), id);
  }
  table += "</table>\n";
  const auto minutes = console.activity();
  Series enqueued{"enqueued", "s-enqueued", {}}, claimed{"claimed", "s-claimed", {}},
      done{"done", "s-done", {}}, failed{"failed", "s-failed", {}}, lag{"longest wait", "s-lag", {}};
  std::int64_t total_claims = 0;
  for (const auto& m : minutes) {
    enqueued.values.push_back(static_cast<double>(m.enqueued));
    claimed.values.push_back(static_cast<double>(m.claimed));
    done.values.push_back(static_cast<double>(m.done));
    failed.values.push_back(static_cast<double>(m.failed));
    lag.values.push_back(static_cast<double>(m.max_wait) / 1e6);
    total_claims += m.claimed;
  }
  std::string body = "<section><h2>Items by project and status</h2>" + table + "</section>\n";
  body += fmt::format("<section><h2>The last hour</h2><p>{} claim(s) in the last hour; the log "
                      "ends at seq {}.</p>",
                      total_claims, store.log_end());
  body += bar_chart("throughput per minute", {enqueued, claimed, done, failed}, "");
  body += bar_chart("claim lag: the longest wait for a claim, per minute", {lag}, "s");
  body += "</section>\n";
  return page("Overview", "Overview", body);
}

Response page_items(Console& console, const Request& request) {
  const ControlStore::ItemQuery q = item_query(request);
  const auto result = console.store().list_items(q);
  const auto value = [&](const char* name) { return escape(request.param(name).value_or("")); };
  std::string form = "<form class=\"filters\" method=\"get\" action=\"/items\" id=\"filters\">";
  for (const char* name : {"project", "status", "owner", "kind", "key", "session", "concurrency_key"}) {
    form += fmt::format("<label>{0}<input name=\"{0}\" value=\"{1}\"></label>", name, value(name));
  }
  const bool oldest = q.order == ControlStore::ItemQuery::Order::oldest;
  form += fmt::format("<label>order<select name=\"order\"><option value=\"newest\"{}>newest first"
                      "</option><option value=\"oldest\"{}>oldest first</option></select></label>"
                      "<label>limit<input name=\"limit\" value=\"{}\" size=\"4\"></label>"
                      "<button type=\"submit\">Filter</button></form>\n",
                      oldest ? "" : " selected", oldest ? " selected" : "", q.limit);
  std::string rows;
  for (const auto& item : result.items) {
    rows += fmt::format(
        "<tr data-item=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td></tr>\n",
        escape(item.item_id), item_link(item.item_id), project_link(item.project_id),
        status_badge(item.status), escape(item.owner), item.fence, item.attempts,
        time_text(item.queued_at), escape(preview(item.payload, 80)));
  }
  std::string body = form;
  body += "<table class=\"items\" id=\"items\"><tr><th>item</th><th>project</th><th>status</th>"
          "<th>owner</th><th class=\"num\">fence</th><th class=\"num\">attempts</th>"
          "<th>queued</th><th>payload</th></tr>\n" +
          rows + "</table>\n";
  if (result.items.empty()) body += "<p class=\"empty\">No item matches.</p>\n";
  if (result.next) {
    std::string next_query;
    for (const auto& [key, v] : request.query) {
      if (key == "after") continue;
      next_query += fmt::format("{}={}&", url_part(key), url_part(v.value_or("")));
    }
    body += fmt::format("<p><a id=\"next-page\" href=\"/items?{}\">Next page</a></p>\n",
                        escape(next_query + "after=" + url_part(*result.next)));
  }
  return page("Items", "Items", body);
}

Response page_sessions(Console& console) {
  ControlStore& store = console.store();
  const Micros now = console.now();
  std::string rows;
  for (const auto& [row, items] : store.sessions(now)) {
    std::string held;
    for (const auto& id : items) held += item_link(id) + " ";
    rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                        escape(row.session_id), escape(row.actor.empty() ? "-" : row.actor),
                        row.is_open() ? "open" : "closed", time_text(row.opened_at),
                        time_text(row.last_seen_at), held.empty() ? "-" : held);
  }
  std::string body = "<section><h2>Sessions</h2><table id=\"sessions\"><tr><th>session</th>"
                     "<th>actor</th><th>state</th><th>opened</th><th>last seen</th>"
                     "<th>items held</th></tr>\n" +
                     rows + "</table></section>\n";
  ControlStore::ItemQuery q;
  q.statuses = {ItemStatus::claimed};
  q.order = ControlStore::ItemQuery::Order::oldest;
  q.limit = 200;
  const auto leases = store.list_items(q);
  std::string lease_rows;
  for (const auto& item : leases.items) {
    const Micros left = item.lease_expires_at - now;
    lease_rows += fmt::format(
        "<tr data-item=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>\n",
        escape(item.item_id), item_link(item.item_id), project_link(item.project_id),
        escape(item.owner), escape(item.session.empty() ? "-" : item.session), item.fence,
        time_text(item.lease_expires_at), left > 0 ? "live" : "lapsed",
        left > 0 ? "live, " + duration_text(left) + " left"
                 : "lapsed " + duration_text(-left) + " ago",
        action_form("/api/items/" + url_part(item.item_id) + "/release", "Release",
                    {{"fence", std::to_string(item.fence)}}));
  }
  body += "<section><h2>Leases</h2><table id=\"leases\"><tr><th>item</th><th>project</th>"
          "<th>owner</th><th>session</th><th class=\"num\">fence</th><th>expires</th>"
          "<th>state</th><th></th></tr>\n" +
          lease_rows + "</table>";
  if (leases.next) body += "<p>The 200 oldest claims are shown: <a href=\"/items?status=claimed\">all claimed items</a>.</p>";
  body += "</section>\n";
  return page("Sessions and leases", "Sessions", body);
}

Response page_projects(Console& console) {
  ControlStore& store = console.store();
  std::string rows;
  for (const auto& id : store.visible_projects()) {
    const ProjectRow p = store.project(id);
    const auto counts = store.status_counts(id);
    const std::string path = "/api/projects/" + url_part(id);
    rows += fmt::format(
        "<tr data-project=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
        escape(id), project_link(id), escape(p.title), escape(p.status),
        p.paused ? "<span class=\"status paused\">paused</span> " + escape(p.pause_reason)
                 : std::string("running"),
        p.weight,
        escape(p.max_attempts == 0 ? std::string("none")
                                   : fmt::format("{} attempts, backoff {}", p.max_attempts,
                                                 p.backoff.empty() ? "none" : p.backoff)),
        counts.ready + counts.scheduled, counts.claimed,
        p.paused ? action_form(path + "/resume", "Resume", {})
                 : action_form(path + "/pause", "Pause", {}, "reason", "why (optional)"));
  }
  const std::string body =
      "<table id=\"projects\"><tr><th>project</th><th>title</th><th>status</th><th>claims</th>"
      "<th class=\"num\">weight</th><th>retry policy</th><th class=\"num\">waiting</th>"
      "<th class=\"num\">claimed</th><th></th></tr>\n" +
      rows + "</table>\n";
  return page("Projects", "Projects", body);
}

Response page_verify(Console& console) {
  const auto problems = verify_ledger(console.store());
  std::map<std::string_view, std::vector<const LedgerProblem*>> by_kind;
  for (const auto& p : problems) by_kind[to_string(p.kind)].push_back(&p);
  std::string body;
  if (problems.empty()) {
    body = fmt::format("<p class=\"ok\" id=\"verdict\">ok: the rows agree with the log (replayed "
                       "up to seq {}).</p>\n",
                       console.store().log_end());
  } else {
    body = fmt::format("<p class=\"bad\" id=\"verdict\">{} problem(s) of {} kind(s).</p>\n",
                       problems.size(), by_kind.size());
  }
  for (const auto& [kind, list] : by_kind) {
    std::string meaning;
    for (const auto& info : kProblemKinds) {
      if (info.name == kind) meaning = std::string(info.meaning);
    }
    body += fmt::format("<section class=\"problems\" data-kind=\"{0}\"><h2>{0} ({1})</h2><p>{2}</p>"
                        "<table><tr><th>item</th><th>project</th><th>detail</th></tr>\n",
                        escape(kind), list.size(), escape(meaning));
    for (const LedgerProblem* p : list) {
      body += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                          p->item_id.empty() ? "-" : item_link(p->item_id),
                          p->project_id.empty() ? "-" : project_link(p->project_id),
                          escape(p->detail));
    }
    body += "</table></section>\n";
  }
  return page("Verify", "Verify", body);
}

Response page_error(const HttpError& error) {
  Response response = page(
      fmt::format("{} {}", error.status, status_text(error.status)), "",
      fmt::format("<p class=\"bad\" id=\"error\" data-kind=\"{}\" data-reason=\"{}\">{}</p>",
                  escape(error.kind), escape(error.reason), escape(error.message)));
  response.status = error.status;
  return response;
}

}  // namespace cplane::server
