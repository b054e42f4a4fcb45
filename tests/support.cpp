#include "tests/support.hpp"

#include <cplane/cplane.hpp>

#include <fcntl.h>
#if CPLANE_WITH_POSTGRES
#include <libpq-fe.h>
#endif
#include <sqlite3.h>

#include "events/chain.hpp"
#include <grp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include <chrono>
#include <iterator>
#include <thread>

#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>

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
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
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

#if CPLANE_WITH_POSTGRES
namespace {

// A libpq connection of the test's own, for raw statements.
struct Pg {
  explicit Pg(const std::string& url) : conn(PQconnectdb(url.c_str())) {
    if (PQstatus(conn) != CONNECTION_OK) {
      std::string message = PQerrorMessage(conn);
      PQfinish(conn);
      throw std::runtime_error("cannot connect to " + url + ": " + message);
    }
    PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  }
  ~Pg() { PQfinish(conn); }
  Pg(const Pg&) = delete;
  Pg& operator=(const Pg&) = delete;
  // Runs `sql` (one or more statements, or one with parameters).
  PGresult* run(const std::string& sql, const std::vector<std::string>& params = {},
                const std::vector<int>& binary = {}) {
    std::vector<const char*> values;
    std::vector<int> lengths;
    for (const auto& p : params) {
      values.push_back(p.data());
      lengths.push_back(static_cast<int>(p.size()));
    }
    PGresult* r = params.empty()
                      ? PQexec(conn, sql.c_str())
                      : PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                     values.data(), lengths.data(),
                                     binary.empty() ? nullptr : binary.data(), 0);
    const auto status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      std::string message = PQresultErrorMessage(r);
      PQclear(r);
      throw std::runtime_error("SQL failed: " + message + " in: " + sql);
    }
    return r;
  }
  void exec(const std::string& sql) { PQclear(run(sql)); }
  PGconn* conn;
};

std::string hex_bytes(const char* p, int n) {
  // bytea in text format: "\x" and hex digits.
  std::string out;
  for (int i = 2; i + 1 < n; i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(p + i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace

// The PostgreSQL backend's context: each store is a schema of its own in the
// server postgres_test_url() names, named
// in the store's URL (options=-csearch_path=...).
class PostgresContext final : public TestContext {
 public:
  explicit PostgresContext(std::string url) : url_(std::move(url)) {}
  std::string backend_name() const override { return "postgres"; }
  std::string fresh_store(const TempDir&, const std::string& name) const override {
    static std::mt19937_64 random{std::random_device{}()};
    std::string schema = "t";
    for (char c : name) schema += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    schema += std::to_string(random() % 1'000'000'000'000ULL);
    Pg(url_).exec("CREATE SCHEMA " + schema);
    return url_ + (url_.find('?') == std::string::npos ? "?" : "&") +
           "options=-csearch_path%3D" + schema;
  }
  // The tests' tampering is written in SQLite's SQL; the few SQLite-isms it
  // uses have a PostgreSQL spelling: blob literals, hex(), quote(),
  // zeroblob().
  static std::string dialect(std::string sql) {
    static const std::regex blob(R"(\bx'([0-9a-fA-F]*)')");
    static const std::regex hex(R"(\bhex\()");
    static const std::regex quote(R"(\bquote\()");
    static const std::regex zeroblob(R"(\bzeroblob\((\d+)\))");
    sql = std::regex_replace(sql, blob, "'\\x$1'::bytea");
    sql = std::regex_replace(sql, hex, "cplane_test_hex(");
    sql = std::regex_replace(sql, quote, "quote_literal(");
    sql = std::regex_replace(sql, zeroblob, "decode(repeat('00', $1), 'hex')");
    return sql;
  }
  static void define_helpers(Pg& pg) {
    pg.exec("CREATE OR REPLACE FUNCTION pg_temp.cplane_test_hex(bytea) RETURNS text "
            "LANGUAGE sql AS $$ SELECT upper(encode($1, 'hex')) $$");
  }
  void exec(const std::string& store, const std::string& statements) const override {
    Pg pg(store);
    define_helpers(pg);
    pg.exec(std::regex_replace(dialect(statements), std::regex(R"(\bcplane_test_hex\()"),
                               "pg_temp.cplane_test_hex("));
  }
  std::vector<std::string> column(const std::string& store, const std::string& query) const override {
    Pg pg(store);
    define_helpers(pg);
    PGresult* r = pg.run(std::regex_replace(dialect(query), std::regex(R"(\bcplane_test_hex\()"),
                                            "pg_temp.cplane_test_hex("));
    std::vector<std::string> out;
    for (int i = 0; i < PQntuples(r); ++i) {
      out.emplace_back(PQgetvalue(r, i, 0), static_cast<std::size_t>(PQgetlength(r, i, 0)));
    }
    PQclear(r);
    return out;
  }
  std::vector<std::string> tables(const std::string& store) const override {
    return column(store, "SELECT table_name::text FROM information_schema.tables WHERE "
                         "table_schema = current_schema() ORDER BY 1");
  }
  void forge_chain(const std::string& store) const override {
    Pg pg(store);
    pg.exec("BEGIN; DELETE FROM stream_heads; DELETE FROM log_digest");
    PGresult* scan = pg.run("SELECT seq, stream_kind, stream_id, body FROM events ORDER BY "
                            "stream_kind, stream_id, seq");
    std::string kind, id;
    Hash prev = kNoHash, digest{};
    std::int64_t rev = 0, events = 0;
    Seq last = 0, newest = 0;
    auto bytes = [](const Hash& h) { return std::string(reinterpret_cast<const char*>(h.data()), 32); };
    auto close_stream = [&] {
      if (rev == 0) return;
      PQclear(pg.run("INSERT INTO stream_heads VALUES ($1, $2, $3, $4, $5)",
                     {kind, id, std::to_string(rev), std::to_string(last), bytes(prev)},
                     {0, 0, 0, 0, 1}));
      xor_into(digest, prev);
    };
    for (int i = 0; i < PQntuples(scan); ++i) {
      const Seq seq = std::stoll(PQgetvalue(scan, i, 0));
      const std::string k = PQgetvalue(scan, i, 1), s = PQgetvalue(scan, i, 2);
      const std::string body = hex_bytes(PQgetvalue(scan, i, 3), PQgetlength(scan, i, 3));
      if (rev == 0 || k != kind || s != id) {
        close_stream();
        kind = k;
        id = s;
        prev = kNoHash;
        rev = 0;
      }
      prev = chain_hash(prev, seq, ++rev, kind, id, body);
      last = seq;
      newest = std::max(newest, seq);
      ++events;
      PQclear(pg.run("UPDATE events SET stream_rev = $1, hash = $2 WHERE seq = $3",
                     {std::to_string(rev), bytes(prev), std::to_string(seq)}, {0, 1, 0}));
    }
    close_stream();
    PQclear(scan);
    std::vector<std::string> words;
    for (int w = 0; w < 4; ++w) {
      std::uint64_t v = 0;
      for (int b = 0; b < 8; ++b) v = v << 8 | digest[static_cast<std::size_t>(w * 8 + b)];
      words.push_back(std::to_string(static_cast<std::int64_t>(v)));
    }
    pg.exec("INSERT INTO log_digest SELECT shard, 0, 0, 0, 0, 0, 0 FROM generate_series(1, 63) "
            "AS shard");
    PQclear(pg.run("INSERT INTO log_digest VALUES (0, $1, $2, $3, $4, $5, $6)",
                   {std::to_string(events), std::to_string(newest), words[0], words[1], words[2],
                    words[3]}));
    pg.exec("COMMIT");
  }

 private:
  std::string url_;
};

#endif  // CPLANE_WITH_POSTGRES

#if CPLANE_WITH_POSTGRES
struct HeldTransaction::Connection {
  explicit Connection(const std::string& url) : pg(url) {}
  Pg pg;
};

HeldTransaction::HeldTransaction(const std::string& db, const std::string& statements)
    : connection_(std::make_unique<Connection>(db)) {
  connection_->pg.exec("BEGIN");
  connection_->pg.exec(statements);
}

void HeldTransaction::commit() {
  if (connection_) connection_->pg.exec("COMMIT");
  connection_.reset();
}

void HeldTransaction::release() {
  if (connection_) connection_->pg.exec("ROLLBACK");
  connection_.reset();
}
#else
struct HeldTransaction::Connection {};

HeldTransaction::HeldTransaction(const std::string&, const std::string&) {
  throw std::runtime_error("HeldTransaction needs PostgreSQL");
}

void HeldTransaction::commit() {}
void HeldTransaction::release() {}
#endif

HeldTransaction::~HeldTransaction() {
  try {
    release();
  } catch (const std::exception&) {
  }
}

const TestContext& test_context() {
  static const SqliteContext sqlite;
  const char* wanted = std::getenv("CPLANE_TEST_BACKEND");
  if (wanted == nullptr || *wanted == '\0' || std::string(wanted) == sqlite.backend_name()) {
    return sqlite;
  }
#if CPLANE_WITH_POSTGRES
  if (std::string(wanted) == "postgres") {
    static const PostgresContext postgres(postgres_test_url().value_or(""));
    return postgres;
  }
#endif
  throw std::runtime_error(std::string("no test context for backend ") + wanted);
}

namespace {

// The file the ctest fixture writes the URL of the server it started to
// (scripts/ctest-postgres.sh): $CPLANE_TEST_PG_URL_FILE, else this build's.
std::string postgres_url_file() {
  const char* file = std::getenv("CPLANE_TEST_PG_URL_FILE");
  if (file != nullptr && *file != '\0') return file;
#ifdef CPLANE_TEST_PG_URL_FILE
  return CPLANE_TEST_PG_URL_FILE;
#else
  return "";
#endif
}

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The URL the postgres entries are to use ("" if none is named), and the
// words that say where it came from.
std::pair<std::string, std::string> postgres_named_url() {
  const char* url = std::getenv("CPLANE_TEST_PG_URL");
  if (url != nullptr && *url != '\0') {
    return {url, std::string("at $CPLANE_TEST_PG_URL (") + url + ")"};
  }
  const std::string file = postgres_url_file();
  if (file.empty()) return {"", ""};
  const std::string started = first_line(file);
  return {started, "at " + started + ", the server the ctest fixture started"};
}

bool postgres_answers(const std::string& url) {
#if CPLANE_WITH_POSTGRES
  PGconn* conn = PQconnectdb(url.c_str());
  const bool ok = PQstatus(conn) == CONNECTION_OK;
  PQfinish(conn);
  return ok;
#else
  (void)url;
  return false;  // this build has no PostgreSQL
#endif
}

}  // namespace

std::optional<std::string> postgres_test_url() {
  const auto [url, where] = postgres_named_url();
  if (url.empty() || !postgres_answers(url)) return std::nullopt;
  return url;
}

std::string postgres_test_skip_reason() {
#if !CPLANE_WITH_POSTGRES
  return "this build has no PostgreSQL (configured with CPLANE_WITH_POSTGRES=OFF)";
#endif
  const auto [url, where] = postgres_named_url();
  if (!url.empty()) return "no PostgreSQL server answers " + where;
  const std::string file = postgres_url_file();
  const std::string why = file.empty() ? "" : first_line(file + ".skip");
  if (!why.empty()) return "$CPLANE_TEST_PG_URL is unset and ctest could start no server: " + why;
  return "$CPLANE_TEST_PG_URL is unset and no ctest fixture started a server (run this entry "
         "through ctest, or export CPLANE_TEST_PG_URL=$(scripts/postgres.sh start))";
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
  for (const auto& p : problems) out.insert(std::string(to_string(p.kind)));
  return out;
}

std::vector<std::string> tables_but_retention(const std::string& db) {
  auto tables = test_context().tables(db);
  std::erase_if(tables, [](const std::string& t) { return t == "anchors" || t == "segments"; });
  return tables;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool reap(pid_t pid, double seconds, int* status_out) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (status_out != nullptr) *status_out = status;
  return true;
}

std::vector<std::string> archive_snapshot(const std::string& db) {
  std::vector<std::string> out;
  for (const char* t : {"events", "stream_heads", "items", "anchors", "segments"}) {
    out.push_back(sql_column(db, std::string("SELECT count(*) FROM ") + t).at(0));
  }
  out.push_back(sql_column(db, "SELECT hex(digest) FROM log_digest").at(0));
  return out;
}

}  // namespace cplane::test
