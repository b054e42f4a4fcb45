// GET /items/ID: an item's row, payload, why it waits, its actions, and its
// ledger as a timeline: who held it under which fence, each release,
// expiry, attempt, gate-approved mutation and operator action.
#include <variant>

#include <fmt/format.h>

#include "server/html.hpp"
#include "server/router.hpp"

namespace cplane::server {

namespace {

template <class... F>
struct Overloads : F... {
  using F::operator()...;
};
template <class... F>
Overloads(F...) -> Overloads<F...>;

std::string field_text(const EventField::Value& value) {
  return std::visit(Overloads{
                        [](std::monostate) { return std::string(); },
                        [](const std::string& v) { return v; },
                        [](std::int64_t v) { return std::to_string(v); },
                        [](const EventField::Json& v) { return v.text; },
                        [](const std::vector<std::string>& v) {
                          std::string out;
                          for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
                          return out;
                        },
                    },
                    value);
}

// The timeline's class of an event type: what kind of step it is.
std::string_view step_class(std::string_view type) {
  if (type == "claimed" || type == "assigned") return "hold";
  if (type == "done") return "done";
  if (type == "failed" || type == "attempt_failed" || type == "lease_expired") return "lost";
  if (type == "mutation_recorded") return "gate";
  if (type == "released" || type == "retried" || type == "cancelled" || type == "rescheduled" ||
      type == "terminal_path_entered" || type == "terminal_path_left") {
    return "operator";
  }
  return "info";
}

std::string row_line(std::string_view name, const std::string& value_html) {
  return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", name, value_html);
}

}  // namespace

Response page_item(Console& console, const std::string& item_id) {
  ControlStore& store = console.store();
  const Micros now = console.now();
  const Item item = store.item(item_id);
  const auto events = store.events(item_id);
  const std::string id_path = "/api/items/" + url_part(item.item_id);

  std::string rows;
  rows += row_line("item", "<code id=\"item-id\">" + escape(item.item_id) + "</code>");
  rows += row_line("project", project_link(item.project_id));
  rows += row_line("status", fmt::format("<span class=\"status {0}\" id=\"item-status\">{0}</span>",
                                         to_string(item.status)));
  rows += row_line("owner", escape(item.owner.empty() ? "-" : item.owner));
  rows += row_line("fence", fmt::format("<span id=\"item-fence\">{}</span>", item.fence));
  rows += row_line("attempts", item.attempt_limit == 0
                                   ? std::to_string(item.attempts)
                                   : fmt::format("{} of {}", item.attempts, item.attempt_limit));
  if (item.status == ItemStatus::claimed) {
    const Micros left = item.lease_expires_at - now;
    rows += row_line("lease", time_text(item.lease_expires_at) +
                                  (left > 0 ? " (live, " + duration_text(left) + " left)"
                                            : " (lapsed " + duration_text(-left) + " ago)"));
  }
  if (item.run_at != 0) rows += row_line("runs at", time_text(item.run_at));
  rows += row_line("queued", time_text(item.queued_at));
  rows += row_line("updated", time_text(item.updated_at) + fmt::format(" (seq {})", item.last_seq));
  rows += row_line("kind", escape(std::string(to_string(item.kind))) +
                               (item.ref.empty() ? "" : " " + escape(item.ref)));
  if (!item.session.empty()) rows += row_line("session", escape(item.session));
  if (!item.concurrency_key.empty()) rows += row_line("concurrency key", escape(item.concurrency_key));
  if (item.priority != 0) rows += row_line("priority", std::to_string(item.priority));
  if (item.terminal_since != 0) {
    rows += row_line("terminal path", "since " + time_text(item.terminal_since) + " " +
                                          escape(item.terminal_reason));
  }
  if (!item.detail.empty()) rows += row_line("detail", escape(item.detail));

  std::string body = "<section class=\"row\"><table id=\"item\">" + rows + "</table></section>\n";
  body += "<section><h2>Payload</h2><pre id=\"payload\">" + escape(item.payload) + "</pre></section>\n";

  // Why it is not being claimed (cplane why), while it is open.
  if (!is_terminal(item.status)) {
    const auto why = store.explain(item_id, std::nullopt, now);
    std::string reasons;
    for (const auto& r : why.reasons) {
      reasons += fmt::format("<li><b>{}</b>: {}</li>", escape(std::string(to_string(r.kind))),
                             escape(r.message));
    }
    body += fmt::format("<section><h2>Why it waits</h2><p>{}</p><ul id=\"why\">{}</ul></section>\n",
                        why.claimable ? "A claim now could take it." : "A claim now would not take it.",
                        reasons);
  }

  std::string actions;
  if (item.status == ItemStatus::claimed) {
    actions += action_form(id_path + "/release", "Release", {{"fence", std::to_string(item.fence)}},
                           "reason", "why (optional)");
  }
  if (!is_terminal(item.status)) {
    actions += action_form(id_path + "/cancel", "Cancel", {}, "reason", "why (optional)");
  }
  if (item.status == ItemStatus::failed || item.status == ItemStatus::cancelled) {
    actions += action_form(id_path + "/retry", "Retry", {});
  }
  if (item.terminal_since != 0) actions += action_form(id_path + "/leave-terminal-path", "Leave the terminal path", {});
  if (!actions.empty()) {
    body += "<section><h2>Actions</h2><div class=\"actions\">" + actions +
            "</div><p class=\"hint\">Each action is a command recorded as an event naming the "
            "token's actor.</p></section>\n";
  }

  std::string timeline;
  Fence last_fence = 0;
  for (const auto& stored : events) {
    const Event& e = stored.event;
    const std::string_view type = type_name(e.body);
    const auto fence = fence_of(e.body);
    std::string fence_cell = "-";
    if (fence) {
      fence_cell = *fence > last_fence && (type == "claimed" || type == "assigned")
                       ? fmt::format("<b>{}</b>", *fence)
                       : std::to_string(*fence);
      if (type == "claimed" || type == "assigned") last_fence = std::max(last_fence, *fence);
    }
    std::string fields;
    for (const auto& f : fields_of(e.body)) {
      std::string text = field_text(f.value);
      if (text.empty()) continue;  // a field this event leaves unset
      const auto* micros = std::get_if<std::int64_t>(&f.value);
      if (micros && *micros > 0 && f.name.ends_with("_at")) text = time_text(*micros);
      fields += fmt::format("<span class=\"field\"><i>{}</i> {}</span> ", escape(f.name),
                            escape(text));
    }
    timeline += fmt::format(
        "<li class=\"step {}\" data-seq=\"{}\" data-type=\"{}\"><span class=\"seq\">#{}</span> "
        "<span class=\"when\">{}</span> <b class=\"type\">{}</b> <span class=\"actor\">{}</span> "
        "<span class=\"fence\">fence {}</span><div class=\"fields\">{}</div></li>\n",
        step_class(type), stored.seq, escape(type), stored.seq, time_text(e.at), escape(type),
        escape(e.actor.empty() ? "control plane" : e.actor), fence_cell, fields);
  }
  body += fmt::format("<section><h2>Ledger ({} events)</h2><ol class=\"timeline\" id=\"timeline\">"
                      "{}</ol><p class=\"hint\">A refusal (a stale fence, a denied gate check) "
                      "appends nothing: the ledger holds what happened.</p></section>\n",
                      events.size(), timeline);
  return page("Item " + item.item_id, "Items", body);
}

}  // namespace cplane::server
