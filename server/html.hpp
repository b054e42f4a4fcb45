// What the pages are made of: escaping, the layout every page shares,
// times, links and the inline SVG charts. Every value from the store goes
// through escape() (or a helper that calls it) on its way into a page;
// nothing else is ever written raw but the page's own markup.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <cplane/events.hpp>

#include "server/router.hpp"

namespace cplane::server {

// Text as HTML text or a quoted attribute value: & < > " ' escaped, bytes
// that are not UTF-8 as U+FFFD, control characters but tab and newline as
// U+FFFD. A payload holding <script> is shown as text.
std::string escape(std::string_view text);

// A path segment or query value, percent-encoded (then safe in an
// attribute once escaped, which the link helpers do).
std::string url_part(std::string_view text);
// <a href="/items/ID">ID</a>, and a project's filtered items.
std::string item_link(std::string_view item_id);
std::string project_link(std::string_view project_id);

// "2024-05-01 12:00:03 UTC" (seconds), or "-" for 0.
std::string time_text(Micros at);
// "3m 12s", "2h 5m", "450ms": a duration for a person.
std::string duration_text(Micros micros);

// The page: the nav bar with `active` marked, the token box, `body`.
// Served with a Content-Security-Policy that runs no inline script.
Response page(std::string_view title, std::string_view active, const std::string& body);

// A bar chart of `values` (one per minute, oldest first) as inline SVG:
// `label` above it, the largest value on its scale.
struct Series {
  std::string name;
  std::string css_class;  // its colour (console.css)
  std::vector<double> values;
};
std::string bar_chart(std::string_view label, const std::vector<Series>& series,
                      std::string_view unit);

// A form that takes an action through the pages' script (the token goes in
// the Authorization header, see assets.cpp): POST to `action_path`, with
// hidden fields and an optional text field, and a button.
struct FormField {
  std::string name;
  std::string value;
};
std::string action_form(std::string_view action_path, std::string_view button,
                        const std::vector<FormField>& hidden, std::string_view text_field = "",
                        std::string_view placeholder = "");

}  // namespace cplane::server
