// cplane serve: the web console over one store (docs/console.md). What the
// CLI calls: the options, the token file's reader and the server's loop.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/store.hpp>

namespace cplane::server {

// Where to listen: "HOST:PORT", HOST an IPv4 address, "[IPv6]" or
// "localhost"; PORT 0 asks the kernel for a free one.
struct ListenAddress {
  std::string host;
  int port = 0;
  bool loopback = false;  // 127.0.0.0/8, ::1 or localhost
};
// InvalidArgument naming what is wrong ("8080", "127.0.0.1:x", ":80").
ListenAddress parse_listen_address(std::string_view text);

// A token file: one "ACTOR TOKEN" per line, separated by spaces or tabs;
// blank lines and lines whose first non-blank character is '#' are
// ignored. ACTOR is a name as require_name takes it (without white space);
// TOKEN is 16 to 256 visible ASCII characters (! to ~), and no token is
// listed twice. An actor may have several tokens (while one is rotated).
struct Token {
  std::string actor;
  std::string token;
};
// The tokens of a token file's text. InvalidArgument naming the line and
// what is wrong with it, quoting neither a token nor any part of one; and
// for a file with no token at all.
std::vector<Token> parse_tokens(std::string_view text);
// The same, from the file at `path`: InvalidArgument also when it cannot be
// read (naming the path and the system's reason).
std::vector<Token> read_token_file(const std::string& path);

// The bounds that keep a client from holding the server: bodies and
// header blocks too large are refused (413, 431), a client that sends
// too slowly or stops reading is disconnected.
struct ServeLimits {
  std::size_t max_body_bytes = 64 << 10;
  std::size_t max_header_bytes = 16 << 10;  // all names and values together, and the URL
  std::chrono::milliseconds client_timeout{10'000};  // headers, body, and each response
  std::size_t max_connections = 64;
};

struct ServeOptions {
  ListenAddress listen{"127.0.0.1", 8080, true};
  bool read_only = false;               // the store was opened for reading: no action
  std::vector<Token> tokens;            // from --token-file; empty: no action is allowed
  bool have_token_file = false;
  ServeLimits limits;
  // Told the address once the server listens ("http://127.0.0.1:8080").
  std::function<void(const std::string& url)> on_listening;
};

// Serves the console on `store` until SIGTERM or SIGINT; returns once the
// server has stopped (in-flight requests are finished: each store call runs
// to completion before its response is written). The store must be used
// by nothing else meanwhile. InvalidArgument when the address cannot be
// listened on (in use, not local) or when a non-loopback address comes
// with no token file; anything a store call throws is answered to its
// request, never let through.
void serve(ControlStore& store, const ServeOptions& options);

}  // namespace cplane::server
