// Shared test fixtures: a temporary directory per test, raw SQL on a store's
// file (to tamper with rows the way an operator or a bug would), and a
// runner for the cplane CLI.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cplane::test {

// A fresh directory, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs SQL statements on the database at `db` through a separate connection.
// Throws std::runtime_error with SQLite's message on failure.
void sql(const std::string& db, const std::string& statements);

// The first column of every row `query` returns, as text ("" for NULL).
std::vector<std::string> sql_column(const std::string& db, const std::string& query);

// The result of running the cplane CLI.
struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the built `cplane` binary with `args` (no shell is involved) and
// `env` entries ("NAME=value") added to the environment.
CliResult run_cli(const std::vector<std::string>& args,
                  const std::vector<std::string>& env = {});

// How to run the CLI when the defaults (stdin /dev/null, stdout captured)
// are not what a test needs: the faults an operator's environment brings.
struct CliRun {
  std::vector<std::string> env;
  std::optional<std::string> input;         // fed to stdin (else /dev/null)
  std::optional<std::string> stdout_file;   // stdout goes here (e.g. /dev/full), not captured
  std::optional<long> file_size_limit;      // RLIMIT_FSIZE, bytes
  std::optional<uid_t> uid;                 // run as this user (the test runs as root)
};
CliResult run_cli(const std::vector<std::string>& args, const CliRun& how);

}  // namespace cplane::test
