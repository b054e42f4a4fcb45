// POST /api/items/ID/ACTION and /api/projects/ID/ACTION: the operator's
// actions, each one ordinary store command whose event names the token's
// actor. The bearer token is checked first, and only the Authorization
// header carries it: a cookie or a form field never does, so another
// site's page cannot make a browser act (CSRF), and under --read-only or
// without a token file nothing is ever written.
#include <charconv>

#include <fmt/format.h>
#include <kj/encoding.h>

#include "json/json_writer.hpp"
#include "server/json_shapes.hpp"
#include "server/router.hpp"

namespace cplane::server {

namespace {

// Equal, in a time that does not depend on where they differ.
bool same_token(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The fields of an application/x-www-form-urlencoded body (what the pages'
// script sends), each allowed by name; HttpError 400 for any other field,
// a field twice, or bytes that do not decode; 415 for another content type.
class Form {
 public:
  Form(const Request& request, std::vector<std::string_view> allowed) {
    if (request.body.empty()) return;
    const std::string type = request.content_type.value_or("");
    if (type.rfind("application/x-www-form-urlencoded", 0) != 0) {
      refuse(415, "invalid_argument", "unsupported_media_type",
             fmt::format("an action's body is application/x-www-form-urlencoded, not {:?}", type));
    }
    std::string_view body = request.body;
    while (!body.empty()) {
      const std::size_t amp = std::min(body.find('&'), body.size());
      const std::string_view pair = body.substr(0, amp);
      body = body.substr(std::min(amp + 1, body.size()));
      if (pair.empty()) continue;
      const std::size_t eq = std::min(pair.find('='), pair.size());
      auto name = kj::decodeWwwForm(kj::arrayPtr(pair.data(), eq));
      const std::string_view raw_value = pair.substr(std::min(eq + 1, pair.size()));
      auto value = kj::decodeWwwForm(kj::arrayPtr(raw_value.data(), raw_value.size()));
      if (name.hadErrors || value.hadErrors) {
        refuse(400, "invalid_argument", "invalid_input", "the form body does not decode");
      }
      const std::string key(name.cStr(), name.size());
      bool known = false;
      for (const auto a : allowed) known = known || a == key;
      if (!known) {
        refuse(400, "invalid_argument", "invalid_input",
               fmt::format("unknown form field {:?}", key));
      }
      for (const auto& [k, v] : fields_) {
        if (k == key) {
          refuse(400, "invalid_argument", "invalid_input",
                 fmt::format("the form field {:?} is given twice", key));
        }
      }
      fields_.emplace_back(key, std::string(value.cStr(), value.size()));
    }
  }

  std::optional<std::string> get(std::string_view name) const {
    for (const auto& [k, v] : fields_) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
  std::string text(std::string_view name) const { return get(name).value_or(""); }
  std::optional<std::uint64_t> number(std::string_view name, std::uint64_t low) const {
    const auto value = get(name);
    if (!value || value->empty()) return std::nullopt;
    std::uint64_t n = 0;
    const char* end = value->data() + value->size();
    auto [p, ec] = std::from_chars(value->data(), end, n);
    if (ec != std::errc() || p != end || n < low || n > std::numeric_limits<std::uint32_t>::max()) {
      refuse(400, "invalid_argument", "invalid_input",
             fmt::format("{}: {:?} is not a whole number from {}", std::string(name), *value, low));
    }
    return n;
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

Response done(bool changed, const std::string& actor, const std::string& what_json) {
  return {200, "application/json",
          JsonObject().boolean("changed", changed).str("actor", actor).raw("result", what_json).done() + "\n",
          {}};
}

}  // namespace

std::string authorize(Console& console, const Request& request) {
  const ServeOptions& options = console.options();
  if (options.read_only) {
    refuse(403, "invalid_argument", "read_only",
           "the console was started with --read-only: no action is taken");
  }
  if (!options.have_token_file) {
    refuse(403, "unauthorized", "actions_disabled",
           "actions need a token file: start cplane serve with --token-file FILE");
  }
  // A browser names the page's origin on every POST; one from another
  // site is refused before its token is looked at.
  if (request.origin && request.host && *request.origin != "http://" + *request.host) {
    refuse(403, "unauthorized", "cross_origin",
           fmt::format("an action from another origin ({:?}) is refused", *request.origin));
  }
  if (!request.authorization) {
    refuse(401, "unauthorized", "no_token",
           "an action needs the header Authorization: Bearer TOKEN (a token of the --token-file)");
  }
  const std::string& header = *request.authorization;
  const std::size_t space = header.find(' ');
  if (space == std::string::npos || !iequals(std::string_view(header).substr(0, space), "bearer")) {
    refuse(401, "unauthorized", "no_token", "the Authorization header is not Bearer TOKEN");
  }
  std::string_view presented = std::string_view(header).substr(space + 1);
  while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
  const std::string* actor = nullptr;
  for (const Token& t : options.tokens) {
    if (same_token(presented, t.token) && actor == nullptr) actor = &t.actor;
  }
  if (actor == nullptr) refuse(403, "unauthorized", "bad_token", "the bearer token is not one of the token file's");
  return *actor;
}

Response item_action(Console& console, const Request& request, const std::string& actor,
                     const std::string& item_id, const std::string& action) {
  ControlStore& store = console.store();
  if (action == "release") {
    const Form form(request, {"fence", "reason"});
    const auto fence = form.number("fence", 1);
    if (!fence) {
      refuse(400, "invalid_argument", "invalid_input",
             "release needs the fence of the claim it ends (fence=N): the item page shows it");
    }
    ControlStore::ReleaseOptions options;
    options.by = actor;
    store.release(item_id, *fence, form.text("reason"), options);
    return done(true, actor, item_json(store.item(item_id)));
  }
  if (action == "retry") {
    const Form form(request, {"attempts"});
    const auto attempts = form.number("attempts", 1);
    store.retry(item_id, attempts ? std::optional<std::uint32_t>(*attempts) : std::nullopt,
                {.actor = actor});
    return done(true, actor, item_json(store.item(item_id)));
  }
  if (action == "cancel") {
    const Form form(request, {"reason"});
    store.cancel(item_id, form.text("reason"), {.actor = actor});
    return done(true, actor, item_json(store.item(item_id)));
  }
  if (action == "leave-terminal-path") {
    const Form form(request, {});
    const bool changed = store.leave_terminal_path(item_id, ControlStore::LifecycleOptions{.actor = actor});
    return done(changed, actor, item_json(store.item(item_id)));
  }
  refuse(404, "not_found", "unknown_route",
         fmt::format("no item action {:?} (release, retry, cancel, leave-terminal-path)", action));
}

Response project_action(Console& console, const Request& request, const std::string& actor,
                        const std::string& project_id, const std::string& action) {
  ControlStore& store = console.store();
  if (action == "pause") {
    const Form form(request, {"reason"});
    const bool changed = store.pause_project(project_id, form.text("reason"), {.actor = actor});
    return done(changed, actor, project_json(store.project(project_id)));
  }
  if (action == "resume") {
    const Form form(request, {});
    const bool changed = store.resume_project(project_id, {.actor = actor});
    return done(changed, actor, project_json(store.project(project_id)));
  }
  refuse(404, "not_found", "unknown_route",
         fmt::format("no project action {:?} (pause, resume)", action));
}

}  // namespace cplane::server
