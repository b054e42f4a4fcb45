// The console's requests and responses as plain values, and the route
// table that maps one to the other. Nothing here knows about sockets: the
// HTTP layer (server/serve.cpp) parses a request into a Request, calls
// Console::handle, and writes the Response once handle has returned, so
// that every store call (a read snapshot, or one command's transaction) is
// over before a byte of the response is sent.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cplane/metrics.hpp>
#include <cplane/store.hpp>

#include "server/console.hpp"

namespace cplane::server {

enum class Method { get, head, post, other };

struct Request {
  Method method = Method::get;
  std::string method_name;               // as sent, for a 405's message
  std::vector<std::string> path;         // decoded segments: "/items/a%2Fb" is {"items", "a/b"}
  std::vector<std::pair<std::string, std::optional<std::string>>> query;  // decoded, in order
  std::optional<std::string> authorization;  // the Authorization header
  std::optional<std::string> origin;         // the Origin header
  std::optional<std::string> host;           // the Host header
  std::optional<std::string> content_type;
  bool accepts_html = false;             // Accept names text/html (a browser)
  std::string body;

  // The value of query parameter `name` ("" for "?name"), nullopt when
  // absent; HttpError 400 when it is given twice.
  std::optional<std::string> param(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones (Allow, ...)
};

// A request the console refuses: the status and the JSON error object
// {"error": {"kind", "reason", "message"}} the CLI's --json prints.
struct HttpError {
  int status = 400;
  std::string kind;
  std::string reason;
  std::string message;
};
[[noreturn]] void refuse(int status, std::string kind, std::string reason, std::string message);
std::string error_json(const HttpError& error);

// The standard reason phrase of a status ("Not Found").
const char* status_text(int status);

class Console {
 public:
  Console(ControlStore& store, const ServeOptions& options);
  ~Console();

  // Answers one request: never throws (a store refusal, a bad parameter, a
  // bug: each becomes a status with a JSON body, or an HTML page for a
  // browser asking for a page).
  Response handle(const Request& request);

  ControlStore& store() { return store_; }
  const ServeOptions& options() const { return options_; }
  MetricsCollector& metrics() { return *metrics_; }
  Micros now() const;
  // The last hour per minute (recent_activity), read again at most every
  // kActivityRefresh: its cost is the hour's events, so a page reloaded
  // in a loop does not read them each time.
  const std::vector<ActivityMinute>& activity();
  static constexpr Micros kActivityRefresh = 15'000'000;

 private:
  Response route(const Request& request);
  ControlStore& store_;
  const ServeOptions& options_;
  std::unique_ptr<MetricsCollector> metrics_;
  std::vector<ActivityMinute> activity_;
  Micros activity_at_ = 0;
};

// ---- the routes' bodies (server/api.cpp, actions.cpp, pages.cpp, item_page.cpp)
Response api_overview(Console& console, const Request& request);
Response api_items(Console& console, const Request& request);
Response api_item(Console& console, const std::string& item_id);
Response api_item_events(Console& console, const std::string& item_id);
Response api_sessions(Console& console);
Response api_projects(Console& console);
Response api_verify(Console& console);
Response api_log(Console& console, const Request& request);
Response metrics_text(Console& console);

// POST /api/items/ID/ACTION and /api/projects/ID/ACTION, after the token and
// the read-only check (server/actions.cpp).
Response item_action(Console& console, const Request& request, const std::string& actor,
                     const std::string& item_id, const std::string& action);
Response project_action(Console& console, const Request& request, const std::string& actor,
                        const std::string& project_id, const std::string& action);
// The actor of the request's bearer token: HttpError 403 (read_only,
// actions_disabled, bad token, cross-origin) or 401 (no token).
std::string authorize(Console& console, const Request& request);

Response page_overview(Console& console);
Response page_items(Console& console, const Request& request);
Response page_item(Console& console, const std::string& item_id);
Response page_sessions(Console& console);
Response page_projects(Console& console);
Response page_verify(Console& console);
// The page a browser is shown for a refused page request.
Response page_error(const HttpError& error);
Response asset(std::string_view name);

// The items query of ?project=&status=&owner=&kind=&key=&session=
// &concurrency_key=&order=&limit=&after= (cplane items' options):
// HttpError 400 for an unknown parameter or a value that does not parse.
ControlStore::ItemQuery item_query(const Request& request);

}  // namespace cplane::server
