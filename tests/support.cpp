#include "tests/support.hpp"

#include <cplane/cplane.hpp>

#include <fcntl.h>
#include <sqlite3.h>

#include "events/chain.hpp"
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
  void forge_chain(const std::string& db) const override {
    Db d(db);
    auto run = [&](const char* statements) {
      if (sqlite3_exec(d.db, statements, nullptr, nullptr, nullptr) != SQLITE_OK) {
        throw std::runtime_error(std::string("SQL failed: ") + sqlite3_errmsg(d.db));
      }
    };
    run("BEGIN IMMEDIATE; DELETE FROM stream_heads; DELETE FROM log_digest;");
    sqlite3_stmt* scan = nullptr;
    sqlite3_stmt* update = nullptr;
    sqlite3_stmt* head = nullptr;
    sqlite3_prepare_v2(d.db, "SELECT seq, stream_kind, stream_id, body FROM events ORDER BY "
                             "stream_kind, stream_id, seq", -1, &scan, nullptr);
    sqlite3_prepare_v2(d.db, "UPDATE events SET stream_rev = ?1, hash = ?2 WHERE seq = ?3", -1,
                       &update, nullptr);
    sqlite3_prepare_v2(d.db, "INSERT INTO stream_heads VALUES (?1, ?2, ?3, ?4, ?5)", -1, &head,
                       nullptr);
    auto text = [](sqlite3_stmt* s, int col) {
      auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
      return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(s, col));
    };
    std::string kind, id;
    Hash prev = kNoHash, digest{};
    std::int64_t rev = 0, events = 0;
    Seq last = 0, newest = 0;
    auto close_stream = [&] {
      if (rev == 0) return;
      sqlite3_reset(head);
      sqlite3_bind_text(head, 1, kind.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(head, 2, id.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(head, 3, rev);
      sqlite3_bind_int64(head, 4, last);
      sqlite3_bind_blob(head, 5, prev.data(), 32, SQLITE_TRANSIENT);
      sqlite3_step(head);
      xor_into(digest, prev);
    };
    while (sqlite3_step(scan) == SQLITE_ROW) {
      const Seq seq = sqlite3_column_int64(scan, 0);
      const std::string k = text(scan, 1), i = text(scan, 2);
      const std::string body(static_cast<const char*>(sqlite3_column_blob(scan, 3)),
                             static_cast<std::size_t>(sqlite3_column_bytes(scan, 3)));
      if (rev == 0 || k != kind || i != id) {
        close_stream();
        kind = k;
        id = i;
        prev = kNoHash;
        rev = 0;
      }
      prev = chain_hash(prev, seq, ++rev, kind, id, body);
      last = seq;
      newest = std::max(newest, seq);
      ++events;
      sqlite3_reset(update);
      sqlite3_bind_int64(update, 1, rev);
      sqlite3_bind_blob(update, 2, prev.data(), 32, SQLITE_TRANSIENT);
      sqlite3_bind_int64(update, 3, seq);
      sqlite3_step(update);
    }
    close_stream();
    sqlite3_finalize(scan);
    sqlite3_finalize(update);
    sqlite3_finalize(head);
    sqlite3_stmt* put = nullptr;
    sqlite3_prepare_v2(d.db, "INSERT INTO log_digest VALUES (0, ?1, ?2, ?3)", -1, &put, nullptr);
    sqlite3_bind_int64(put, 1, events);
    sqlite3_bind_int64(put, 2, newest);
    sqlite3_bind_blob(put, 3, digest.data(), 32, SQLITE_TRANSIENT);
    sqlite3_step(put);
    sqlite3_finalize(put);
    run("COMMIT");
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

void forged_sql(const std::string& db, const std::string& statements) {
  test_context().exec(db, statements);
  test_context().forge_chain(db);
}

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

std::vector<LedgerProblem> verify_file(const std::string& db) {
  ControlStore store{db};
  return verify_ledger(store);
}

std::set<std::string> problem_kinds(const std::vector<LedgerProblem>& problems) {
  std::set<std::string> out;
  for (const auto& p : problems) out.insert(p.kind);
  return out;
}

}  // namespace cplane::test
