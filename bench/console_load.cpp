// The console under load (console_load.hpp): the server process, and a
// client process that walks the pages and /metrics over loopback.
#include "bench/console_load.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "bench/common.hpp"
#include "json/json_writer.hpp"
#include "probe/fleet.hpp"

namespace cplane::bench {

namespace {

volatile std::sig_atomic_t stop_requested = 0;
void on_stop(int) { stop_requested = 1; }

struct Reply {
  int status = 0;
  std::string body;
};

// One GET on a fresh connection: the status and the body (Content-Length).
Reply get(int port, const std::string& path) {
  Reply reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    return reply;
  }
  const std::string request =
      fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", path, port);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return reply;
  }
  std::string raw;
  char buffer[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || head_end == std::string::npos) return reply;
  reply.status = std::atoi(raw.c_str() + 9);
  reply.body = raw.substr(head_end + 4);
  return reply;
}

struct Page {
  std::string path;
  std::string marker;  // what a right answer holds
};

// The client: the pages in turn, paced to `rps`, until SIGTERM; then its
// record. Runs in its own process.
[[noreturn]] void client(int port, double rps, const std::string& record_file) {
  std::signal(SIGTERM, on_stop);
  ConsoleLoad load;
  std::vector<double> latency;
  const double spacing = 1.0 / rps;
  std::string item;
  const auto wrong = [&](const std::string& what) {
    ++load.wrong;
    if (load.first_wrong.empty()) load.first_wrong = what;
  };
  for (std::size_t turn = 0; !stop_requested; ++turn) {
    std::vector<Page> pages = {{"/", "Items by project and status"},
                               {"/metrics", "# TYPE cplane_"},
                               {"/items?status=ready&limit=50", "id=\"items\""},
                               {"/api/items?status=claimed&limit=20", "{\"items\":["},
                               {"/sessions", "id=\"leases\""},
                               {"/projects", "id=\"projects\""},
                               {"/metrics", "# TYPE cplane_"}};
    if (!item.empty()) pages.push_back({"/items/" + item, "id=\"timeline\""});
    for (const auto& page : pages) {
      if (stop_requested) break;
      const double t0 = fleet::seconds_now();
      const Reply reply = get(port, page.path);
      const double dt = fleet::seconds_now() - t0;
      if (stop_requested) break;  // the stop's signal cut this request short: not an answer
      latency.push_back(dt);
      ++load.requests;
      if (reply.status != 200) {
        wrong(fmt::format("GET {}: status {}", page.path, reply.status));
      } else if (reply.body.find(page.marker) == std::string::npos) {
        wrong(fmt::format("GET {}: no {:?} in the page", page.path, page.marker));
      } else if (page.path.rfind("/api/items", 0) == 0) {
        // The next round's item page: a claimed item, if any.
        const auto at = reply.body.find("\"item_id\":\"");
        if (at != std::string::npos) item = reply.body.substr(at + 11, reply.body.find('"', at + 11) - at - 11);
      }
      if (dt < spacing) fleet::sleep_for(spacing - dt);
    }
    (void)turn;
  }
  std::sort(latency.begin(), latency.end());
  load.p50_ms = 1e3 * fleet::percentile(latency, 50);
  load.p99_ms = 1e3 * fleet::percentile(latency, 99);
  load.max_ms = 1e3 * fleet::percentile(latency, 100);
  std::ofstream out(record_file, std::ios::trunc);
  out << load.requests << ' ' << load.wrong << ' ' << load.p50_ms << ' ' << load.p99_ms << ' '
      << load.max_ms << '\n'
      << load.first_wrong << '\n';
  out.close();
  ::_exit(out ? 0 : 1);
}

int wait_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string default_cplane_binary() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path candidate : {self.parent_path() / "cplane", self.parent_path().parent_path() / "cli" / "cplane"}) {
    if (!ec && fs::exists(candidate)) return candidate.string();
  }
  return "cplane";  // on PATH
}

ConsoleUnderLoad::ConsoleUnderLoad(const std::string& cplane, const std::string& db, double rps,
                                   const std::string& record_file)
    : record_file_(record_file) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  server_ = ::fork();
  if (server_ < 0) throw std::runtime_error("fork failed");
  if (server_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, STDERR_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execlp(cplane.c_str(), cplane.c_str(), "--db", db.c_str(), "serve", "--listen", "127.0.0.1:0",
             static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (line.find('\n') == std::string::npos && ::read(out[0], &c, 1) == 1) line += c;
  ::close(out[0]);
  const auto colon = line.rfind(':');
  if (line.rfind("listening on http://127.0.0.1:", 0) != 0 || colon == std::string::npos) {
    ::kill(server_, SIGKILL);
    wait_status(server_);
    server_ = 0;
    throw std::runtime_error(fmt::format("{} serve did not start (is --cplane right?)", cplane));
  }
  const int port = std::atoi(line.c_str() + colon + 1);
  client_ = ::fork();
  if (client_ < 0) throw std::runtime_error("fork failed");
  if (client_ == 0) client(port, rps, record_file_);
}

ConsoleLoad ConsoleUnderLoad::stop() {
  ConsoleLoad load;
  if (client_ > 0) {
    ::kill(client_, SIGTERM);
    const int code = wait_status(client_);
    client_ = 0;
    if (code != 0) throw std::runtime_error("the console's client failed");
    std::ifstream in(record_file_);
    in >> load.requests >> load.wrong >> load.p50_ms >> load.p99_ms >> load.max_ms;
    in.ignore(1);
    std::getline(in, load.first_wrong);
  }
  if (server_ > 0) {
    ::kill(server_, SIGTERM);
    const int code = wait_status(server_);
    server_ = 0;
    if (code != 0) throw std::runtime_error(fmt::format("cplane serve exited with {}", code));
  }
  return load;
}

ConsoleUnderLoad::~ConsoleUnderLoad() {
  for (pid_t pid : {client_, server_}) {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      wait_status(pid);
    }
  }
}

void console_load_scenario(const Options& o, const Emit& emit) {
  constexpr int kRounds = 3;
  std::vector<double> without, with;
  std::int64_t requests = 0, wrong = 0;
  std::string first_wrong;
  double p99 = 0;
  const std::string cplane = o.cplane ? *o.cplane : default_cplane_binary();
  for (int round = 0; round < kRounds; ++round) {
    for (const bool console : {false, true}) {
      ScratchDir dir;
      const std::string db = dir.file("bench.db");
      fill(db, o.items);
      std::optional<ConsoleUnderLoad> load;
      if (console) load.emplace(cplane, db, static_cast<double>(o.rps), dir.file("client"));
      auto result = drain_fleet(o, db, o.workers, Mode::plain, o.durability, o.lock == "flock",
                                dir.file("worker"));
      ConsoleLoad seen;
      if (load) seen = load->stop();
      if (result.items != o.items) {
        throw std::runtime_error(fmt::format("drain finished {} of {} items", result.items, o.items));
      }
      const double rate = static_cast<double>(result.items) / result.seconds;
      (console ? with : without).push_back(rate);
      JsonObject line;
      line.str("scenario", "console-load").num("round", round + 1).boolean("console", console);
      drain_figures(line, result);
      if (console) {
        line.num("requests", seen.requests)
            .num("wrong", seen.wrong)
            .fixed("request_p50_ms", seen.p50_ms, 2)
            .fixed("request_p99_ms", seen.p99_ms, 2)
            .fixed("request_max_ms", seen.max_ms, 2);
        requests += seen.requests;
        wrong += seen.wrong;
        p99 = std::max(p99, seen.p99_ms);
        if (first_wrong.empty()) first_wrong = seen.first_wrong;
      }
      emit(line.done());
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double ratio = median(with) / median(without);
  emit(JsonObject()
           .str("scenario", "console-load-ratio")
           .num("workers", o.workers)
           .num("items", o.items)
           .num("rps", o.rps)
           .fixed("items_per_s_without", median(without), 0)
           .fixed("items_per_s_with", median(with), 0)
           .fixed("ratio", ratio, 3)
           .boolean("within_0_9", ratio >= 0.9)
           .num("requests", requests)
           .num("wrong", wrong)
           .str_or_null("first_wrong", first_wrong)
           .fixed("request_p99_ms", p99, 2)
           .done());
  if (wrong != 0) throw std::runtime_error("the console answered " + std::to_string(wrong) + " page(s) wrong: " + first_wrong);
}

}  // namespace cplane::bench
