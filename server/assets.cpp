// The console's only static files, compiled in: its style sheet and its one
// small script. The script keeps the operator's bearer token in this tab's
// sessionStorage (never a cookie) and sends it in the Authorization header
// of each action's POST; it writes server text into the page only as
// textContent.
#include "server/router.hpp"

namespace cplane::server {

namespace {

constexpr std::string_view kCss = R"css(
:root { --fg: #1d2330; --muted: #667085; --line: #d9dee7; --bg: #f6f7f9; --accent: #2f5fd0; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; gap: 16px; align-items: center; padding: 8px 20px;
  background: #18202f; color: #fff; }
header .brand { font-weight: 700; letter-spacing: .04em; }
header nav a { color: #c9d3e6; margin-right: 14px; text-decoration: none; }
header nav a.active, header nav a:hover { color: #fff; border-bottom: 2px solid #7aa2ff; }
header .token { margin-left: auto; display: flex; gap: 6px; align-items: center; }
header .token input { width: 220px; }
#token-state { color: #c9d3e6; font-size: 12px; }
main { padding: 12px 20px 40px; max-width: 1200px; }
h1 { font-size: 20px; margin: 8px 0 12px; }
h2 { font-size: 15px; margin: 20px 0 8px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px;
  margin-bottom: 14px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.zero { color: #b4bccb; }
code, pre { font: 12px/1.4 ui-monospace, monospace; }
pre { background: #f1f3f7; padding: 8px; border-radius: 4px; white-space: pre-wrap;
  word-break: break-all; }
a { color: var(--accent); }
a.id { font-family: ui-monospace, monospace; font-size: 12px; }
.status { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px;
  background: #e7eaf0; }
.status.ready { background: #dbe7ff; } .status.scheduled { background: #efe3ff; }
.status.claimed { background: #fff0c2; } .status.done { background: #d6f5df; }
.status.failed { background: #ffd9d6; } .status.cancelled, .status.closed { background: #e4e4e4; }
.status.paused { background: #ffe1b8; }
.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: end; margin-bottom: 10px; }
.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.filters input { width: 120px; }
form.action { display: inline-flex; gap: 4px; margin: 2px 6px 2px 0; }
button { cursor: pointer; }
#action-result:empty { display: none; }
#action-result { padding: 6px 10px; border-radius: 4px; margin-bottom: 10px; }
#action-result.ok { background: #d6f5df; } #action-result.error { background: #ffd9d6; }
.ok { color: #17803d; } .bad { color: #b42318; font-weight: 600; }
.hint, .empty { color: var(--muted); font-size: 12px; }
ol.timeline { list-style: none; padding: 0; margin: 0; border-left: 3px solid var(--line); }
ol.timeline li { padding: 4px 10px; margin-left: 8px; position: relative; }
ol.timeline li::before { content: ""; position: absolute; left: -17px; top: 10px; width: 11px;
  height: 11px; border-radius: 6px; background: #b4bccb; }
li.hold::before { background: #e0a800 !important; } li.done::before { background: #17803d !important; }
li.lost::before { background: #b42318 !important; } li.gate::before { background: #2f5fd0 !important; }
li.operator::before { background: #7a3fd0 !important; }
.timeline .seq, .timeline .when, .timeline .actor, .timeline .fence { color: var(--muted); font-size: 12px; }
.timeline .fields { font-size: 12px; } .timeline .field i { color: var(--muted); }
figure.chart { margin: 8px 0 16px; } figcaption { font-size: 12px; color: var(--muted); }
svg .axis { stroke: #9aa4b5; } svg .tick { font-size: 10px; fill: #667085; }
.s-enqueued { fill: #9ab8ff; } .s-claimed { fill: #e0a800; } .s-done { fill: #2e9e57; }
.s-failed { fill: #d64b3f; } .s-lag { fill: #7a3fd0; }
.legend .key { font-size: 12px; margin-right: 12px; }
.legend .key::before { content: ""; display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
.legend .s-enqueued::before { background: #9ab8ff; } .legend .s-claimed::before { background: #e0a800; }
.legend .s-done::before { background: #2e9e57; } .legend .s-failed::before { background: #d64b3f; }
.legend .s-lag::before { background: #7a3fd0; }
)css";

constexpr std::string_view kJs = R"js(
'use strict';
(function () {
  var KEY = 'cplane-token';
  function token() { return window.sessionStorage.getItem(KEY) || ''; }
  function showTokenState() {
    var state = document.getElementById('token-state');
    if (state) state.textContent = token() ? 'token set' : 'no token: actions are refused';
  }
  function show(ok, text) {
    var out = document.getElementById('action-result');
    out.className = ok ? 'ok' : 'error';
    out.dataset.state = ok ? 'ok' : 'error';
    out.textContent = text;
  }
  document.addEventListener('DOMContentLoaded', function () {
    showTokenState();
    var tokenForm = document.getElementById('token-form');
    tokenForm.addEventListener('submit', function (event) {
      event.preventDefault();
      var input = document.getElementById('token');
      if (input.value) window.sessionStorage.setItem(KEY, input.value.trim());
      else window.sessionStorage.removeItem(KEY);
      input.value = '';
      showTokenState();
    });
    document.querySelectorAll('form.action').forEach(function (form) {
      form.addEventListener('submit', function (event) {
        event.preventDefault();
        var body = new URLSearchParams(new FormData(form)).toString();
        fetch(form.getAttribute('action'), {
          method: 'POST',
          credentials: 'omit',
          headers: { 'Authorization': 'Bearer ' + token(),
                     'Content-Type': 'application/x-www-form-urlencoded' },
          body: body
        }).then(function (response) {
          return response.json().then(function (json) {
            if (response.ok) {
              var action = form.getAttribute('action').split('/').pop();
              show(true, action + ': ' + (json.changed ? 'recorded as an event by ' + json.actor
                                                      : 'nothing to change'));
              window.setTimeout(function () { window.location.reload(); }, 600);
            } else {
              show(false, form.getAttribute('action').split('/').pop() + ' refused: ' +
                          response.status + ': ' + json.error.message);
            }
          });
        }).catch(function (error) { show(false, String(error)); });
      });
    });
  });
})();
)js";

}  // namespace

Response asset(std::string_view name) {
  Response response;
  if (name == "console.css") {
    response.content_type = "text/css; charset=utf-8";
    response.body = std::string(kCss);
  } else if (name == "console.js") {
    response.content_type = "text/javascript; charset=utf-8";
    response.body = std::string(kJs);
  } else {
    refuse(404, "not_found", "unknown_route", "no such file under /static/");
  }
  response.headers.emplace_back("Cache-Control", "max-age=300");
  return response;
}

}  // namespace cplane::server
