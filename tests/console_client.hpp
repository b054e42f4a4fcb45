// A real `cplane serve` for the console's tests: the built binary started
// on a store, its address read from its stdout, spoken to over loopback
// with raw sockets (so that a test can send what no HTTP library would:
// a header too large, half a request, a bad request line).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cplane::test {

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  bool closed_without_reply = false;
  std::string header(const std::string& lower_name) const {
    const auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

inline HttpReply parse_reply(const std::string& raw) {
  HttpReply reply;
  if (raw.empty()) {
    reply.closed_without_reply = true;
    return reply;
  }
  const auto head_end = raw.find("\r\n\r\n");
  const std::string head = raw.substr(0, head_end);
  reply.body = head_end == std::string::npos ? "" : raw.substr(head_end + 4);
  std::size_t at = head.find("\r\n");
  const std::string status_line = head.substr(0, at);
  if (status_line.rfind("HTTP/1.1 ", 0) == 0) reply.status = std::stoi(status_line.substr(9, 3));
  while (at != std::string::npos && at < head.size()) {
    const std::size_t next = head.find("\r\n", at + 2);
    const std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    const auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      reply.headers[name] = value;
    }
    at = next;
  }
  // A chunked body (none of the console's, but a check should not lie).
  if (reply.header("transfer-encoding") == "chunked") {
    std::string body;
    std::size_t p = 0;
    while (p < reply.body.size()) {
      const std::size_t eol = reply.body.find("\r\n", p);
      const std::size_t n = std::stoul(reply.body.substr(p, eol - p), nullptr, 16);
      if (n == 0) break;
      body += reply.body.substr(eol + 2, n);
      p = eol + 2 + n + 2;
    }
    reply.body = body;
  }
  return reply;
}

// One TCP connection to 127.0.0.1:port.
class Socket {
 public:
  explicit Socket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("cannot connect to the console");
    }
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // False once the peer has closed (EPIPE, ECONNRESET).
  bool send(const std::string& data) {
    std::size_t at = 0;
    while (at < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<std::size_t>(n);
    }
    return true;
  }
  // Everything until the peer closes, or `timeout` passes.
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000)) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[65536];
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
  // Whether the peer closed within `timeout` (reads and drops what it sends).
  bool closed_within(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
        if (n <= 0) return true;
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
};

// `cplane --db DB serve --listen 127.0.0.1:0 ARGS...`, until the object dies
// (SIGTERM, then its exit status is collected).
class ServeProcess {
 public:
  ServeProcess(const std::string& db, std::vector<std::string> args, const std::string& log_file) {
    std::vector<std::string> argv = {CPLANE_CLI_PATH, "--db", db, "serve", "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), args.begin(), args.end());
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      const int err = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> raw;
      for (auto& a : argv) raw.push_back(a.data());
      raw.push_back(nullptr);
      ::execv(CPLANE_CLI_PATH, raw.data());
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_fd_ = out[0];
    // "listening on http://127.0.0.1:PORT\n", or EOF when it refused to start.
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (line.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{stdout_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c[256];
      const ssize_t n = ::read(stdout_fd_, c, sizeof c);
      if (n <= 0) break;
      line.append(c, static_cast<std::size_t>(n));
    }
    first_line_ = line.substr(0, line.find('\n'));
    const auto colon = first_line_.rfind(':');
    if (first_line_.rfind("listening on http://127.0.0.1:", 0) == 0 && colon != std::string::npos) {
      port_ = std::stoi(first_line_.substr(colon + 1));
    }
  }
  ~ServeProcess() {
    stop(SIGTERM);
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  bool listening() const { return port_ > 0; }
  const std::string& first_line() const { return first_line_; }

  // Sends `signal` and waits for the exit: its status (-1: killed by a
  // signal or still running after 15 s, then SIGKILLed).
  int stop(int signal) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, signal);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = 0;
        return exit_code_ = -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = 0;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }
  // For a process that should refuse to start: its exit status.
  int wait_exit() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    return exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // One request on a fresh connection ("Connection: close" is added).
  HttpReply request(const std::string& method, const std::string& path,
                    const std::vector<std::string>& headers = {}, const std::string& body = "") const {
    std::string raw = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" +
                      std::to_string(port_) + "\r\nConnection: close\r\n";
    for (const auto& h : headers) raw += h + "\r\n";
    if (!body.empty() || method == "POST") raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    raw += "\r\n" + body;
    return send_raw(raw);
  }
  HttpReply send_raw(const std::string& raw) const {
    Socket socket(port_);
    socket.send(raw);
    return parse_reply(socket.read_all());
  }
  HttpReply get(const std::string& path) const { return request("GET", path); }
  HttpReply post(const std::string& path, const std::string& form, const std::string& token = "") const {
    std::vector<std::string> headers = {"Content-Type: application/x-www-form-urlencoded"};
    if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
    return request("POST", path, headers, form);
  }

 private:
  pid_t pid_ = 0;
  int stdout_fd_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::string first_line_;
};

}  // namespace cplane::test
