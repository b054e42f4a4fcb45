// The console's settings from text: the listen address, and the token file
// (its format is in server/console.hpp and docs/console.md).
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "server/console.hpp"

namespace cplane::server {

namespace {

bool is_ipv4(std::string_view host, bool& loopback) {
  int parts = 0;
  int first = -1;
  std::size_t at = 0;
  while (at <= host.size()) {
    const std::size_t dot = std::min(host.find('.', at), host.size());
    const std::string_view part = host.substr(at, dot - at);
    int value = -1;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (part.empty() || part.size() > 3 || ec != std::errc() || p != part.data() + part.size() ||
        value > 255) {
      return false;
    }
    if (parts == 0) first = value;
    ++parts;
    at = dot + 1;
  }
  loopback = first == 127;
  return parts == 4;
}

}  // namespace

ListenAddress parse_listen_address(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format("--listen {:?}: {} (HOST:PORT, say 127.0.0.1:8080)",
                                       std::string(text.substr(0, 80)), why));
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) throw bad("no port");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  int port = -1;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || p != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    throw bad("the port is not a number from 0 to 65535");
  }
  ListenAddress address;
  address.port = port;
  if (host == "localhost") {
    address.host = "127.0.0.1";
    address.loopback = true;
  } else if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    const std::string_view inner = host.substr(1, host.size() - 2);
    if (inner.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos) {
      throw bad("not an IPv6 address");
    }
    address.host = std::string(host);
    address.loopback = inner == "::1";
  } else if (is_ipv4(host, address.loopback)) {
    address.host = std::string(host);
  } else {
    throw bad("the host is not an IP address or localhost");
  }
  return address;
}

std::vector<Token> parse_tokens(std::string_view text) {
  std::vector<Token> tokens;
  std::set<std::string> seen;
  int line_number = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    ++line_number;
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto bad = [&](std::string_view why) {
      return InvalidArgument(fmt::format("token file line {}: {} (each line: ACTOR TOKEN)",
                                         line_number, why));
    };
    std::vector<std::string_view> fields;
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i == line.size()) break;
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      fields.push_back(line.substr(start, i - start));
    }
    if (fields.empty() || fields[0].front() == '#') continue;
    if (fields.size() != 2) {
      throw bad(fmt::format("{} field(s), not two", fields.size()));
    }
    try {
      require_name(fields[0], "actor");
    } catch (const InvalidArgument& e) {
      throw bad(e.what());
    }
    const std::string_view token = fields[1];
    if (token.size() < 16 || token.size() > 256) {
      throw bad(fmt::format("the token is {} characters long: 16 to 256 are needed", token.size()));
    }
    for (const char c : token) {
      if (c < '!' || c > '~') throw bad("the token holds a character that is not visible ASCII");
    }
    if (!seen.insert(std::string(token)).second) throw bad("this token is listed before");
    tokens.push_back({std::string(fields[0]), std::string(token)});
  }
  if (tokens.empty()) throw InvalidArgument("the token file lists no token (each line: ACTOR TOKEN)");
  return tokens;
}

std::vector<Token> read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InvalidArgument(fmt::format("--token-file {:?}: cannot be read: {}", path,
                                      std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    throw InvalidArgument(fmt::format("--token-file {:?}: cannot be read", path));
  }
  try {
    return parse_tokens(text.str());
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("--token-file {:?}: {}", path, e.what()));
  }
}

}  // namespace cplane::server
