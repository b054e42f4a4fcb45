// cplane-bench --scenario console-load: the console under load. A real
// `cplane serve` on the store a drain runs on, and a client process asking
// it for pages and /metrics in a loop (one request at a time, at most
// --rps a second, loopback only), each answer checked; the drain's rate
// is compared with the same drain without them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "bench/common.hpp"

namespace cplane::bench {

// What the client process saw.
struct ConsoleLoad {
  std::int64_t requests = 0;
  std::int64_t wrong = 0;          // a status other than 200, or a page without its marker
  std::string first_wrong;         // what the first wrong answer was
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// `cplane --db DB serve --listen 127.0.0.1:0 --read-only` and the client
// process, from the constructor until stop(). Throws std::runtime_error
// when the server does not start.
class ConsoleUnderLoad {
 public:
  ConsoleUnderLoad(const std::string& cplane, const std::string& db, double rps,
                   const std::string& record_file);
  ~ConsoleUnderLoad();
  ConsoleUnderLoad(const ConsoleUnderLoad&) = delete;
  ConsoleUnderLoad& operator=(const ConsoleUnderLoad&) = delete;

  // Stops the client, then the server (SIGTERM: it must exit 0); what the
  // client saw. Throws std::runtime_error when either did not exit cleanly.
  ConsoleLoad stop();

 private:
  pid_t server_ = 0;
  pid_t client_ = 0;
  std::string record_file_;
};

// The `cplane` binary beside this cplane-bench (build/cli/cplane for
// build/bench/cplane-bench, or the same folder once installed).
std::string default_cplane_binary();

// Rounds of the same drain of --items with --workers processes on a fresh
// store, without and with `cplane serve` (--cplane, else the default
// binary) answering a client's page and /metrics requests throughout,
// alternately (so that a warming disk or cache favours neither). One line
// per drain, then the medians' ratio. Throws std::runtime_error when a
// page was wrong or a drain short.
void console_load_scenario(const Options& o, const Emit& emit);

}  // namespace cplane::bench
