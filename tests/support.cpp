#include "tests/support.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace cplane::test {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "cplane-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

struct Db {
  explicit Db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
      std::string message = sqlite3_errmsg(db);
      sqlite3_close(db);
      throw std::runtime_error("cannot open " + path + ": " + message);
    }
    sqlite3_busy_timeout(db, 10'000);
  }
  ~Db() { sqlite3_close(db); }
  sqlite3* db = nullptr;
};

}  // namespace

class SqliteContext final : public TestContext {
 public:
  std::string backend_name() const override { return "sqlite"; }
  std::string fresh_store(const TempDir& dir, const std::string& name) const override {
    return dir.file(name);
  }
  void exec(const std::string& db, const std::string& statements) const override {
    Db d(db);
    char* error = nullptr;
    if (sqlite3_exec(d.db, statements.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      std::string message = error != nullptr ? error : "unknown error";
      sqlite3_free(error);
      throw std::runtime_error("SQL failed: " + message + " in: " + statements);
    }
  }
  std::vector<std::string> column(const std::string& db, const std::string& query) const override {
    Db d(db);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(d.db, query.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      throw std::runtime_error(std::string("SQL failed: ") + sqlite3_errmsg(d.db));
    }
    std::vector<std::string> out;
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
      out.emplace_back(text != nullptr ? text : "");
    }
    sqlite3_finalize(stmt);
    return out;
  }
  std::vector<std::string> tables(const std::string& db) const override {
    return column(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  }
};

const TestContext& test_context() {
  static const SqliteContext sqlite;
  const char* wanted = std::getenv("CPLANE_TEST_BACKEND");
  if (wanted != nullptr && *wanted != '\0' && std::string(wanted) != sqlite.backend_name()) {
    throw std::runtime_error(std::string("no test context for backend ") + wanted);
  }
  return sqlite;
}

void sql(const std::string& db, const std::string& statements) { test_context().exec(db, statements); }

std::vector<std::string> sql_column(const std::string& db, const std::string& query) {
  return test_context().column(db, query);
}

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  return run_cli(args, CliRun{.env = env});
}

CliResult run_cli(const std::vector<std::string>& args, const CliRun& how) {
  TempDir io;
  const std::string out_path = how.stdout_file.value_or(io.file("stdout"));
  const std::string err_path = io.file("stderr");
  const std::string in_path = how.input ? io.file("stdin") : "/dev/null";
  if (how.input) {
    std::ofstream in(in_path, std::ios::binary);
    in << *how.input;
  }
  const auto& env = how.env;
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open(in_path.c_str(), O_RDONLY);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::dup2(in, 0);
    if (how.file_size_limit) {
      struct rlimit limit {};
      limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(*how.file_size_limit);
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    if (how.uid) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(*how.uid) != 0 || ::setuid(*how.uid) != 0) ::_exit(126);
    }
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(CPLANE_CLI_PATH));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(CPLANE_CLI_PATH, argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CliResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!how.stdout_file) result.out = slurp(out_path);
  result.err = slurp(err_path);
  return result;
}

}  // namespace cplane::test
