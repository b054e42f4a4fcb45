// The route table, and what turns every refusal into a status and a body.
#include "server/router.hpp"

#include <charconv>
#include <chrono>
#include <functional>

#include <fmt/format.h>

#include "json/json_writer.hpp"

namespace cplane::server {

void refuse(int status, std::string kind, std::string reason, std::string message) {
  throw HttpError{status, std::move(kind), std::move(reason), std::move(message)};
}

std::string error_json(const HttpError& e) {
  return "{\"error\":" +
         JsonObject().str("kind", e.kind).str("reason", e.reason).str("message", e.message).done() +
         "}\n";
}

const char* status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

std::optional<std::string> Request::param(std::string_view name) const {
  std::optional<std::string> found;
  for (const auto& [key, value] : query) {
    if (key != name) continue;
    if (found) {
      refuse(400, "invalid_argument", "invalid_input",
             fmt::format("the query parameter {:?} is given twice", std::string(name)));
    }
    found = value.value_or("");
  }
  return found;
}

Console::Console(ControlStore& store, const ServeOptions& options)
    : store_(store), options_(options), metrics_(std::make_unique<MetricsCollector>(store)) {}

Console::~Console() = default;

Micros Console::now() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const std::vector<ActivityMinute>& Console::activity() {
  const Micros at = now();
  if (activity_at_ == 0 || at - activity_at_ >= kActivityRefresh || at < activity_at_) {
    activity_ = recent_activity(store_, 60 * kMinuteMicros, at);
    activity_at_ = at;
  }
  return activity_;
}

namespace {

using Captures = std::vector<std::string>;
using Handler = std::function<Response(Console&, const Request&, const Captures&)>;

struct Route {
  Method method;
  std::vector<std::string_view> pattern;  // "*" matches one segment, captured
  std::vector<std::string_view> params;   // the query parameters it takes
  bool page;                              // HTML: a browser is shown errors as a page
  Handler handler;
};

const std::vector<std::string_view> kItemParams = {
    "project", "status", "owner", "kind", "key", "session", "concurrency_key", "order", "limit",
    "after"};

const std::vector<Route>& routes() {
  static const std::vector<Route> table = {
      {Method::get, {}, {}, true, [](Console& c, const Request&, const Captures&) { return page_overview(c); }},
      {Method::get, {"items"}, kItemParams, true,
       [](Console& c, const Request& r, const Captures&) { return page_items(c, r); }},
      {Method::get, {"items", "*"}, {}, true,
       [](Console& c, const Request&, const Captures& id) { return page_item(c, id[0]); }},
      {Method::get, {"sessions"}, {}, true, [](Console& c, const Request&, const Captures&) { return page_sessions(c); }},
      {Method::get, {"projects"}, {}, true, [](Console& c, const Request&, const Captures&) { return page_projects(c); }},
      {Method::get, {"verify"}, {}, true, [](Console& c, const Request&, const Captures&) { return page_verify(c); }},
      {Method::get, {"metrics"}, {}, false, [](Console& c, const Request&, const Captures&) { return metrics_text(c); }},
      {Method::get, {"static", "*"}, {}, false,
       [](Console&, const Request&, const Captures& name) { return asset(name[0]); }},
      {Method::get, {"api", "overview"}, {}, false,
       [](Console& c, const Request& r, const Captures&) { return api_overview(c, r); }},
      {Method::get, {"api", "items"}, kItemParams, false,
       [](Console& c, const Request& r, const Captures&) { return api_items(c, r); }},
      {Method::get, {"api", "items", "*"}, {}, false,
       [](Console& c, const Request&, const Captures& id) { return api_item(c, id[0]); }},
      {Method::get, {"api", "items", "*", "events"}, {}, false,
       [](Console& c, const Request&, const Captures& id) { return api_item_events(c, id[0]); }},
      {Method::get, {"api", "sessions"}, {}, false, [](Console& c, const Request&, const Captures&) { return api_sessions(c); }},
      {Method::get, {"api", "projects"}, {}, false, [](Console& c, const Request&, const Captures&) { return api_projects(c); }},
      {Method::get, {"api", "verify"}, {}, false, [](Console& c, const Request&, const Captures&) { return api_verify(c); }},
      {Method::get, {"api", "log"}, {"after", "max", "type", "stream"}, false,
       [](Console& c, const Request& r, const Captures&) { return api_log(c, r); }},
      {Method::post, {"api", "items", "*", "*"}, {}, false,
       [](Console& c, const Request& r, const Captures& at) {
         const std::string actor = authorize(c, r);
         return item_action(c, r, actor, at[0], at[1]);
       }},
      {Method::post, {"api", "projects", "*", "*"}, {}, false,
       [](Console& c, const Request& r, const Captures& at) {
         const std::string actor = authorize(c, r);
         return project_action(c, r, actor, at[0], at[1]);
       }},
  };
  return table;
}

bool matches(const Route& route, const std::vector<std::string>& path, Captures& captures) {
  if (route.pattern.size() != path.size()) return false;
  captures.clear();
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (route.pattern[i] == "*") {
      captures.push_back(path[i]);
    } else if (route.pattern[i] != path[i]) {
      return false;
    }
  }
  return true;
}

HttpError error_of(const std::exception_ptr& thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const HttpError& e) {
    return e;
  } catch (const FenceRejected& e) {
    return {409, "fence_rejected", to_string(e.reason()), std::string("fence rejected: ") + e.what()};
  } catch (const ScopeDenied& e) {
    return {403, "scope_denied", "out_of_scope", e.what()};
  } catch (const NotFound& e) {
    return {404, "not_found", to_string(e.reason()), e.what()};
  } catch (const InvalidArgument& e) {
    int status = 400;
    switch (e.reason()) {
      case InvalidArgument::Reason::invalid_input: status = 400; break;
      case InvalidArgument::Reason::already_exists:
      case InvalidArgument::Reason::conflict: status = 409; break;
      case InvalidArgument::Reason::read_only: status = 403; break;
      case InvalidArgument::Reason::misuse: status = 500; break;
    }
    return {status, "invalid_argument", to_string(e.reason()),
            std::string("invalid input: ") + e.what()};
  } catch (const StorageError& e) {
    return {e.category() == StorageError::Category::busy ? 503 : 500, "storage_error",
            to_string(e.category()),
            fmt::format("storage error ({}): {}", to_string(e.category()), e.what())};
  } catch (const InternalError& e) {
    return {500, "internal_error", "invariant",
            fmt::format("internal error: {} (a bug in cplane, or rows edited behind its back: run "
                        "cplane verify)",
                        e.what())};
  } catch (const std::exception& e) {
    return {500, "error", "unexpected", std::string("error: ") + e.what()};
  }
}

}  // namespace

Response Console::route(const Request& request) {
  Captures captures;
  std::vector<std::string> allowed;
  for (const Route& r : routes()) {
    if (!matches(r, request.path, captures)) continue;
    const bool method_fits =
        r.method == request.method || (r.method == Method::get && request.method == Method::head);
    if (!method_fits) {
      allowed.push_back(r.method == Method::get ? "GET, HEAD" : "POST");
      continue;
    }
    try {
      for (const auto& [key, value] : request.query) {
        bool known = false;
        for (const auto name : r.params) known = known || name == key;
        if (!known) {
          refuse(400, "invalid_argument", "invalid_input",
                 fmt::format("unknown query parameter {:?}", key));
        }
      }
      return r.handler(*this, request, captures);
    } catch (...) {
      const HttpError error = error_of(std::current_exception());
      if (r.page && request.accepts_html) return page_error(error);
      Response response{error.status, "application/json", error_json(error), {}};
      if (error.status == 401) response.headers.emplace_back("WWW-Authenticate", "Bearer");
      return response;
    }
  }
  std::string path;
  for (const auto& segment : request.path) path += "/" + segment;
  if (path.empty()) path = "/";
  if (!allowed.empty()) {
    std::string allow;
    for (const auto& a : allowed) allow += (allow.empty() ? "" : ", ") + a;
    const HttpError error{405, "method_not_allowed", "method_not_allowed",
                          fmt::format("{} {:?}: allowed: {}", request.method_name, path, allow)};
    return {405, "application/json", error_json(error), {{"Allow", allow}}};
  }
  const HttpError error{404, "not_found", "unknown_route",
                        fmt::format("no such route: {:?} (see /api/ in docs/console.md)", path)};
  return {404, "application/json", error_json(error), {}};
}

Response Console::handle(const Request& request) {
  try {
    return route(request);
  } catch (...) {
    const HttpError error = error_of(std::current_exception());
    return {error.status, "application/json", error_json(error), {}};
  }
}

ControlStore::ItemQuery item_query(const Request& request) {
  ControlStore::ItemQuery q;
  const auto bad = [](const std::string& what) { refuse(400, "invalid_argument", "invalid_input", what); };
  const auto name = [&](const char* param, const char* what) -> std::optional<std::string> {
    auto value = request.param(param);
    if (!value || value->empty()) return std::nullopt;
    try {
      require_name(*value, what);
    } catch (const InvalidArgument& e) {
      bad(fmt::format("{}: {}", param, e.what()));
    }
    return value;
  };
  q.project = name("project", "project id");
  q.owner = name("owner", "owner");
  q.session = name("session", "session id");
  q.after = name("after", "item id");
  if (auto key = request.param("key"); key && !key->empty()) q.key = *key;
  if (auto key = request.param("concurrency_key"); key && !key->empty()) {
    try {
      require_concurrency_key(*key);
    } catch (const InvalidArgument& e) {
      bad(fmt::format("concurrency_key: {}", e.what()));
    }
    q.concurrency_key = *key;
  }
  if (auto statuses = request.param("status"); statuses && !statuses->empty()) {
    std::size_t at = 0;
    while (at <= statuses->size()) {
      const std::size_t comma = std::min(statuses->find(',', at), statuses->size());
      const std::string part = statuses->substr(at, comma - at);
      const auto status = parse_item_status(part);
      if (!status) {
        bad(fmt::format("status: unknown status {:?} (ready, scheduled, claimed, done, failed, "
                        "cancelled, closed)",
                        part));
      }
      q.statuses.push_back(*status);
      at = comma + 1;
    }
  }
  if (auto kind = request.param("kind"); kind && !kind->empty()) {
    try {
      q.kind = parse_work_kind(*kind);
    } catch (const InvalidArgument& e) {
      bad(fmt::format("kind: {}", e.what()));
    }
  }
  if (auto order = request.param("order"); order && !order->empty()) {
    if (*order == "newest") {
      q.order = ControlStore::ItemQuery::Order::newest;
    } else if (*order == "oldest") {
      q.order = ControlStore::ItemQuery::Order::oldest;
    } else {
      bad(fmt::format("order: {:?} is neither newest nor oldest", *order));
    }
  }
  if (auto limit = request.param("limit"); limit && !limit->empty()) {
    std::size_t n = 0;
    const char* end = limit->data() + limit->size();
    auto [p, ec] = std::from_chars(limit->data(), end, n);
    if (ec != std::errc() || p != end || n < 1 || n > ControlStore::kMaxListLimit) {
      bad(fmt::format("limit: {:?} is not a whole number from 1 to {}", *limit,
                      ControlStore::kMaxListLimit));
    }
    q.limit = n;
  }
  return q;
}

}  // namespace cplane::server
