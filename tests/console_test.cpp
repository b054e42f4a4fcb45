// cplane serve, as a client sees it: the real binary on a temporary store,
// spoken to over loopback (tests/console_client.hpp). Each route's status
// and body, escaping, the token rules, --read-only, the bounds and
// timeouts, bad input; and that every refusal writes nothing and the
// server keeps serving.
#include <fstream>

#include <catch2/catch.hpp>

#include "tests/cli_checks.hpp"
#include "tests/console_client.hpp"

namespace cplane::test {
namespace {

constexpr const char* kToken = "0123456789abcdef-alice";
constexpr const char* kOtherToken = "fedcba9876543210-bob";

// A store with a project and three items, one claimed by worker-1.
struct ConsoleStore {
  TempDir dir;
  std::string db = dir.file("console.db");
  std::string tokens = dir.file("tokens");
  std::string log = dir.file("serve.log");
  std::string ready_id, claimed_id, done_id;
  std::string claimed_fence;

  ConsoleStore() {
    REQUIRE_EXIT(run_cli({"--db", db, "project", "create", "alpha", "Project <b>Alpha</b>"}), 0);
    ready_id = first_line(run_cli({"--db", db, "enqueue", "alpha", R"({"task":"<script>alert(1)</script>"})"}).out);
    claimed_id = first_line(run_cli({"--db", db, "enqueue", "alpha", R"({"task":"second"})"}).out);
    done_id = first_line(run_cli({"--db", db, "enqueue", "alpha", R"({"task":"third"})"}).out);
    // Claims take the oldest first: ready_id, then claimed_id, then done_id.
    const auto first = run_cli({"--db", db, "claim", "--owner", "worker-1", "--max", "3", "--json"});
    REQUIRE_EXIT(first, 0);
    // Give back the first; finish the third.
    REQUIRE_EXIT(run_cli({"--db", db, "release", ready_id, "--fence", "1"}), 0);
    REQUIRE_EXIT(run_cli({"--db", db, "finish", done_id, "--fence", "1", "--status", "done"}), 0);
    claimed_fence = "1";
    std::ofstream(tokens) << "# the console's operators\nalice " << kToken << "\n\nbob\t" << kOtherToken << "\n";
  }
  std::unique_ptr<ServeProcess> serve(std::vector<std::string> args = {}) const {
    args.insert(args.begin(), {"--token-file", tokens});
    auto process = std::make_unique<ServeProcess>(db, args, log);
    INFO("first line: " << process->first_line());
    REQUIRE(process->listening());
    return process;
  }
};

bool contains(const std::string& text, const std::string& part) { return has_text(text, part); }

}  // namespace

TEST_CASE("the console prints where it listens and answers every page and api route", "[console]") {
  ConsoleStore s;
  auto serve = s.serve();
  CHECK(serve->first_line().rfind("listening on http://127.0.0.1:", 0) == 0);
  struct Case {
    std::string path;
    std::string type;
    std::string text;  // in the body
  };
  const std::vector<Case> cases = {
      {"/", "text/html", "Items by project and status"},
      {"/items", "text/html", s.claimed_id},
      {"/items/" + s.claimed_id, "text/html", "id=\"timeline\""},
      {"/sessions", "text/html", "id=\"leases\""},
      {"/projects", "text/html", "alpha"},
      {"/verify", "text/html", "ok: the rows agree with the log"},
      {"/metrics", "text/plain; version=0.0.4", "# TYPE"},
      {"/static/console.js", "text/javascript", "sessionStorage"},
      {"/static/console.css", "text/css", "timeline"},
      {"/api/overview", "application/json", "\"activity\":["},
      {"/api/items", "application/json", "\"items\":["},
      {"/api/items/" + s.claimed_id, "application/json", "\"status\":\"claimed\""},
      {"/api/items/" + s.claimed_id + "/events", "application/json", "\"type\":\"claimed\""},
      {"/api/sessions", "application/json", "["},
      {"/api/projects", "application/json", "\"project_id\":\"alpha\""},
      {"/api/verify", "application/json", "[]"},
      {"/api/log?after=0&max=2", "application/json", "\"next\":2"},
  };
  for (const auto& c : cases) {
    INFO(c.path);
    const HttpReply reply = serve->get(c.path);
    CHECK(reply.status == 200);
    CHECK(reply.header("content-type").rfind(c.type, 0) == 0);
    CHECK(contains(reply.body, c.text));
    CHECK(reply.header("x-content-type-options") == "nosniff");
  }
  // HEAD answers the headers alone.
  const HttpReply head = serve->request("HEAD", "/api/items");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
}

TEST_CASE("the api answers what the CLI's --json prints for the same read", "[console]") {
  ConsoleStore s;
  auto serve = s.serve();
  const auto cli_json = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", s.db});
    args.push_back("--json");
    const auto r = run_cli(args);
    REQUIRE_EXIT(r, 0);
    return r.out;
  };
  CHECK(serve->get("/api/items").body == cli_json({"items"}));
  CHECK(serve->get("/api/items?status=ready,claimed&order=oldest&limit=1").body ==
        cli_json({"items", "--status", "ready,claimed", "--order", "oldest", "--limit", "1"}));
  CHECK(serve->get("/api/items?project=alpha&after=" + s.done_id).body ==
        cli_json({"items", "--project", "alpha", "--after", s.done_id}));
  CHECK(serve->get("/api/items/" + s.claimed_id).body == cli_json({"item", s.claimed_id}));
  CHECK(serve->get("/api/items/" + s.claimed_id + "/events").body == cli_json({"events", s.claimed_id}));
  CHECK(serve->get("/api/verify").body == cli_json({"verify"}));
  CHECK(serve->get("/api/sessions").body == cli_json({"sessions"}));
}

TEST_CASE("a payload holding a script tag is shown as text on every page", "[console]") {
  ConsoleStore s;
  REQUIRE_EXIT(run_cli({"--db", s.db, "release", s.claimed_id, "--fence", "1", "--reason",
                        "<img src=x onerror=alert(2)>"}),
               0);
  auto serve = s.serve();
  for (const std::string& path :
       std::vector<std::string>{"/items", "/items/" + s.ready_id, "/items/" + s.claimed_id, "/projects", "/"}) {
    INFO(path);
    const HttpReply reply = serve->get(path);
    REQUIRE(reply.status == 200);
    CHECK_FALSE(contains(reply.body, "<script>alert"));
    CHECK_FALSE(contains(reply.body, "<img src=x"));
    CHECK_FALSE(contains(reply.body, "<b>Alpha"));
    CHECK(contains(reply.header("content-security-policy"), "script-src 'self'"));
  }
  CHECK(contains(serve->get("/items/" + s.ready_id).body, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  CHECK(contains(serve->get("/items/" + s.claimed_id).body, "&lt;img src=x onerror=alert(2)&gt;"));
  CHECK(contains(serve->get("/projects").body, "Project &lt;b&gt;Alpha&lt;/b&gt;"));
}

TEST_CASE("an action records an event naming the token's actor", "[console]") {
  ConsoleStore s;
  auto serve = s.serve();
  // release, under the claim's fence
  HttpReply reply = serve->post("/api/items/" + s.claimed_id + "/release", "fence=1&reason=stuck", kToken);
  INFO(reply.body);
  REQUIRE(reply.status == 200);
  CHECK(contains(reply.body, "\"actor\":\"alice\""));
  auto events = run_cli({"--db", s.db, "events", s.claimed_id, "--json"}).out;
  CHECK(contains(events, R"("type":"released","actor":"alice")"));
  CHECK(contains(events, R"("reason":"stuck")"));
  // cancel, then retry, by bob
  REQUIRE(serve->post("/api/items/" + s.claimed_id + "/cancel", "reason=not+wanted", kOtherToken).status == 200);
  REQUIRE(serve->post("/api/items/" + s.claimed_id + "/retry", "", kOtherToken).status == 200);
  events = run_cli({"--db", s.db, "events", s.claimed_id, "--json"}).out;
  CHECK(contains(events, R"("type":"cancelled","actor":"bob")"));
  CHECK(contains(events, R"("reason":"not wanted")"));
  CHECK(contains(events, R"("type":"retried","actor":"bob")"));
  // pause and resume the project
  REQUIRE(serve->post("/api/projects/alpha/pause", "reason=maintenance", kToken).status == 200);
  CHECK(contains(run_cli({"--db", s.db, "project", "show", "alpha", "--json"}).out, "\"paused\":true"));
  REQUIRE(serve->post("/api/projects/alpha/resume", "", kToken).status == 200);
  const auto log = run_cli({"--db", s.db, "tail", "--stream", "project:alpha", "--jsonl"}).out;
  CHECK(contains(log, R"("type":"project_paused","actor":"alice")"));
  CHECK(contains(log, R"("type":"project_resumed","actor":"alice")"));
  // the terminal path
  REQUIRE_EXIT(run_cli({"--db", s.db, "terminal", "add", s.ready_id}), 0);
  reply = serve->post("/api/items/" + s.ready_id + "/leave-terminal-path", "", kToken);
  REQUIRE(reply.status == 200);
  CHECK(contains(reply.body, "\"changed\":true"));
  CHECK(contains(run_cli({"--db", s.db, "events", s.ready_id, "--json"}).out,
                 R"("type":"terminal_path_left","actor":"alice")"));
  CHECK(verify_file(s.db).empty());
}

TEST_CASE("a refused action writes nothing and says why", "[console]") {
  ConsoleStore s;
  auto serve = s.serve();
  const std::string before = event_count_of(s.db);
  struct Case {
    std::string what, path, form, token;
    std::vector<std::string> headers;
    int status;
    std::string reason;
  };
  const std::string release = "/api/items/" + s.claimed_id + "/release";
  const std::vector<Case> cases = {
      {"no token", release, "fence=1", "", {}, 401, "no_token"},
      {"a wrong token", release, "fence=1", "0123456789abcdef-mallory", {}, 403, "bad_token"},
      {"a token's prefix", release, "fence=1", "0123456789abcdef", {}, 403, "bad_token"},
      {"a stale fence", release, "fence=7", kToken, {}, 409, "stale_fence"},
      {"no fence", release, "", kToken, {}, 400, "invalid_input"},
      {"a fence that is not a number", release, "fence=x", kToken, {}, 400, "invalid_input"},
      {"an unknown form field", release, "fence=1&force=1", kToken, {}, 400, "invalid_input"},
      {"a cancel of a done item", "/api/items/" + s.done_id + "/cancel", "", kToken, {}, 409, "conflict"},
      {"an unknown item", "/api/items/nope/cancel", "", kToken, {}, 404, "unknown_item"},
      {"an unknown action", "/api/items/" + s.claimed_id + "/explode", "", kToken, {}, 404, "unknown_route"},
      {"an unknown project", "/api/projects/nope/pause", "", kToken, {}, 404, "unknown_project"},
      {"another site's page", release, "fence=1", kToken, {"Origin: http://evil.example"}, 403, "cross_origin"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    std::vector<std::string> headers = c.headers;
    headers.push_back("Content-Type: application/x-www-form-urlencoded");
    if (!c.token.empty()) headers.push_back("Authorization: Bearer " + c.token);
    const HttpReply reply = serve->request("POST", c.path, headers, c.form);
    INFO(reply.body);
    CHECK(reply.status == c.status);
    CHECK(contains(reply.body, "\"reason\":\"" + c.reason + "\""));
    CHECK(reply.header("content-type") == "application/json");
  }
  CHECK(serve->get("/api/items/" + s.claimed_id).status == 200);  // still serving
  CHECK(event_count_of(s.db) == before);
  // A cookie alone is not a token; a JSON body is not a form.
  CHECK(serve->request("POST", release, {"Cookie: token=" + std::string(kToken)}, "").status == 401);
  CHECK(serve->request("POST", release, {"Authorization: Bearer " + std::string(kToken), "Content-Type: application/json"},
                       R"({"fence":1})").status == 415);
  CHECK(event_count_of(s.db) == before);
}

TEST_CASE("under --read-only or without a token file every action is refused", "[console]") {
  ConsoleStore s;
  const std::string before = event_count_of(s.db);
  {
    auto serve = s.serve({"--read-only"});
    const HttpReply reply = serve->post("/api/items/" + s.claimed_id + "/release", "fence=1", kToken);
    CHECK(reply.status == 403);
    CHECK(contains(reply.body, "\"reason\":\"read_only\""));
    CHECK(serve->get("/items/" + s.claimed_id).status == 200);
  }
  {
    ServeProcess serve(s.db, {}, s.log);
    REQUIRE(serve.listening());
    const HttpReply reply = serve.post("/api/projects/alpha/pause", "", kToken);
    CHECK(reply.status == 403);
    CHECK(contains(reply.body, "\"reason\":\"actions_disabled\""));
  }
  CHECK(event_count_of(s.db) == before);
}

TEST_CASE("a malformed token file refuses to start with exit 2", "[console]") {
  ConsoleStore s;
  const auto [what, text, message] = GENERATE(table<std::string, std::string, std::string>({
      {"a short token", "alice short\n", "line 1: the token is 5 characters long"},
      {"three fields", "# ok\nalice 0123456789abcdef extra\n", "line 2: 3 field(s)"},
      {"a token twice", "alice 0123456789abcdef\nbob 0123456789abcdef\n", "line 2: this token is listed before"},
      {"no token", "# nothing\n\n", "lists no token"},
      {"a control character", "alice 0123456789abcdef\x01zz\n", "not visible ASCII"},
  }));
  INFO(what);
  const std::string file = s.dir.file("bad-tokens");
  std::ofstream(file) << text;
  const auto r = run_cli({"--db", s.db, "serve", "--listen", "127.0.0.1:0", "--token-file", file});
  CHECK_EXIT(r, 2);
  CHECK(contains(r.err, message));
  CHECK_FALSE(contains(r.err, "0123456789abcdef"));  // a token is never echoed
  CHECK(r.out.empty());
}

TEST_CASE("a token file that cannot be read or an address beyond loopback without one refuses to start", "[console]") {
  ConsoleStore s;
  auto r = run_cli({"--db", s.db, "serve", "--listen", "127.0.0.1:0", "--token-file", s.dir.file("missing")});
  CHECK_EXIT(r, 2);
  CHECK(contains(r.err, "cannot be read"));
  r = run_cli({"--db", s.db, "serve", "--listen", "0.0.0.0:0"});
  CHECK_EXIT(r, 2);
  CHECK(contains(r.err, "needs --token-file"));
  r = run_cli({"--db", s.db, "serve", "--listen", "127.0.0.1:http"});
  CHECK_EXIT(r, 2);
  r = run_cli({"--db", s.dir.file("no-such.db"), "serve", "--listen", "127.0.0.1:0"});
  CHECK(r.exit_code != 0);
  CHECK(r.out.empty());
}

TEST_CASE("unknown routes wrong methods and bad query values get a JSON error and the server keeps serving", "[console]") {
  ConsoleStore s;
  auto serve = s.serve();
  const std::string before = event_count_of(s.db);
  struct Case {
    std::string method, path;
    int status;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"GET", "/nowhere", 404, "unknown_route"},
      {"GET", "/api/items/x/y/z", 404, "unknown_route"},
      {"GET", "/static/passwd", 404, "unknown_route"},
      {"DELETE", "/api/items", 405, "method_not_allowed"},
      {"POST", "/api/items", 405, "method_not_allowed"},
      {"GET", "/api/items/" + s.claimed_id + "/release", 405, "method_not_allowed"},
      {"GET", "/api/items?status=stuck", 400, "invalid_input"},
      {"GET", "/api/items?limit=0", 400, "invalid_input"},
      {"GET", "/api/items?limit=ten", 400, "invalid_input"},
      {"GET", "/api/items?limit=1001", 400, "invalid_input"},
      {"GET", "/api/items?order=sideways", 400, "invalid_input"},
      {"GET", "/api/items?kind=bug", 400, "invalid_input"},
      {"GET", "/api/items?colour=red", 400, "invalid_input"},
      {"GET", "/api/items?limit=1&limit=2", 400, "invalid_input"},
      {"GET", "/api/items?after=nope", 404, "unknown_item"},
      {"GET", "/api/items?project=nope", 404, "unknown_project"},
      {"GET", "/api/items?project=%01", 400, "invalid_input"},
      {"GET", "/api/items/nope", 404, "unknown_item"},
      {"GET", "/api/log?after=-1", 400, "invalid_input"},
      {"GET", "/api/log?max=0", 400, "invalid_input"},
      {"GET", "/api/log?type=exploded", 400, "invalid_input"},
      {"GET", "/api/log?stream=planet:mars", 400, "invalid_input"},
      {"GET", "/items?status=stuck", 400, "invalid_input"},
      {"GET", "/items/%zz", 400, "malformed_url"},
  };
  for (const auto& c : cases) {
    INFO(c.method << " " << c.path);
    const HttpReply reply = serve->request(c.method, c.path);
    INFO(reply.body);
    CHECK(reply.status == c.status);
    CHECK(reply.header("content-type") == "application/json");
    CHECK(contains(reply.body, "{\"error\":{\"kind\":"));
    CHECK(contains(reply.body, "\"reason\":\"" + c.reason + "\""));
    if (c.status == 405) CHECK_FALSE(reply.header("allow").empty());
  }
  // A browser asking for a page is shown the error as a page.
  const HttpReply page = serve->request("GET", "/items/nope", {"Accept: text/html"});
  CHECK(page.status == 404);
  CHECK(contains(page.body, "id=\"error\""));
  CHECK(serve->get("/api/items").status == 200);
  CHECK(event_count_of(s.db) == before);
}

TEST_CASE("oversized bodies and headers and malformed requests are refused and the server keeps serving", "[console]") {
  ConsoleStore s;
  auto serve = s.serve();
  const std::string before = event_count_of(s.db);
  const std::string release = "/api/items/" + s.claimed_id + "/release";
  // A body over 64 KiB, declared: refused before it is read.
  HttpReply reply = serve->post(release, "fence=1&reason=" + std::string(100 << 10, 'x'), kToken);
  CHECK(reply.status == 413);
  CHECK(contains(reply.body, "body_too_large"));
  // ... and chunked, counted as it is read.
  std::string chunked = "POST " + release + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                        "Authorization: Bearer " + kToken + "\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 80; ++i) chunked += "400\r\n" + std::string(1024, 'y') + "\r\n";
  chunked += "0\r\n\r\n";
  reply = serve->send_raw(chunked);
  CHECK(reply.status == 413);
  // A header block over 16 KiB: the console's bound.
  reply = serve->request("GET", "/api/items", {"X-Filler: " + std::string(20 << 10, 'h')});
  CHECK(reply.status == 431);
  CHECK(contains(reply.body, "headers_too_large"));
  // One over KJ's 128 KiB buffer: answered on the socket all the same.
  reply = serve->request("GET", "/api/items", {"X-Filler: " + std::string(200 << 10, 'h')});
  CHECK(reply.status == 431);
  CHECK(reply.header("content-type") == "application/json");
  // A URL too long for the bound.
  reply = serve->get("/api/items?project=" + std::string(20 << 10, 'p'));
  CHECK(reply.status == 431);
  // Not HTTP at all, or a header line without a colon.
  reply = serve->send_raw("HELLO THERE\r\n\r\n");
  CHECK(reply.status == 501);
  CHECK(contains(reply.body, "malformed_request"));
  reply = serve->send_raw("GET /api/items HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n");
  CHECK(reply.status == 400);
  CHECK(contains(reply.body, "malformed_request"));
  // A Host a rebinding site would send.
  reply = serve->send_raw("GET /api/items HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
  CHECK(reply.status == 403);
  CHECK(contains(reply.body, "host_not_allowed"));
  CHECK(serve->get("/api/items").status == 200);
  CHECK(event_count_of(s.db) == before);
}

TEST_CASE("a slow client is dropped after the client timeout while others are served", "[console]") {
  ConsoleStore s;
  auto serve = s.serve({"--client-timeout", "0.5"});
  // Half a request line, never finished.
  Socket slow_headers(serve->port());
  REQUIRE(slow_headers.send("GET /api/items HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  // A POST whose body never comes.
  Socket slow_body(serve->port());
  REQUIRE(slow_body.send("POST /api/items/" + s.claimed_id + "/release HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Authorization: Bearer " + kToken + "\r\n"
                         "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nfence=1"));
  // Meanwhile the console answers everyone else.
  const auto start = std::chrono::steady_clock::now();
  CHECK(serve->get("/api/items").status == 200);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(400));
  CHECK(slow_headers.closed_within(std::chrono::milliseconds(3000)));
  const HttpReply reply = parse_reply(slow_body.read_all(std::chrono::milliseconds(3000)));
  CHECK(reply.status == 408);
  // An idle keep-alive connection is closed too.
  Socket idle(serve->port());
  REQUIRE(idle.send("GET /api/items HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  CHECK(idle.closed_within(std::chrono::milliseconds(3000)));
  CHECK(run_cli({"--db", s.db, "item", s.claimed_id, "--json"}).out.find("\"status\":\"claimed\"") !=
        std::string::npos);
}

TEST_CASE("the console exits 0 on SIGTERM and on SIGINT", "[console]") {
  ConsoleStore s;
  for (const int signal : {SIGTERM, SIGINT}) {
    auto serve = s.serve();
    CHECK(serve->get("/").status == 200);
    CHECK(serve->stop(signal) == 0);
  }
}

}  // namespace cplane::test
