// The one SQLite statement wrapper of the engine (sqlite_backend.cpp and the
// files beside it) and of salvage (sqlite_salvage.cpp): prepare, bind in
// order, step, read columns; and the one-shot helpers over it (exec, query).
// Internal to storage/sqlite/: nothing outside the engine includes sqlite3.h.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace cplane::storage::sqlite {

// Throws the StorageError (or InvalidArgument, InternalError) that SQLite's
// result code `rc` on `db` means, its message prefixed by `what`: busy,
// unavailable, full, corruption, io (statement.cpp). Never returns.
[[noreturn]] void throw_sqlite_error(sqlite3* db, int rc, const std::string& what);

// How a statement reports a failed call: must throw.
using Failure = void (*)(sqlite3* db, int rc, const std::string& what);

// Parameter wrappers: a blob, text stored as NULL when empty, an integer
// stored as NULL when zero.
struct Blob {
  std::string_view bytes;
};
struct NullIfEmpty {
  std::string_view text;
};
struct NullIfZero {
  std::int64_t value;
};
// Optional values: NULL when absent (an empty text is not absent).
struct OptionalText {
  std::string_view text;
  bool present;
};
struct OptionalInt {
  std::int64_t value;
  bool present;
};

// One prepared statement, finalized with it. Every failed call throws
// through `fail` (default: throw_sqlite_error), which never returns.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, const char* sql, Failure fail = throw_sqlite_error,
            unsigned prepare_flags = SQLITE_PREPARE_PERSISTENT)
      : db_(db), fail_(fail) {
    int rc = sqlite3_prepare_v3(db, sql, -1, prepare_flags, &stmt_, nullptr);
    if (rc != SQLITE_OK) fail_(db, rc, "cannot prepare statement");
  }
  Statement(Statement&& o) noexcept : db_(o.db_), stmt_(o.stmt_), fail_(o.fail_) {
    o.stmt_ = nullptr;
  }
  Statement& operator=(Statement&& o) noexcept {
    std::swap(db_, o.db_);
    std::swap(stmt_, o.stmt_);
    std::swap(fail_, o.fail_);
    return *this;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  // Binds parameters (1-based) in order and resets the statement.
  template <class... A>
  Statement& bind(const A&... args) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    int i = 0;
    (bind_one(++i, args), ...);
    return *this;
  }

  // Steps once: true when a row is available.
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite3_reset(stmt_);
    fail_(db_, rc, "statement failed");
    std::abort();  // fail_ never returns
  }
  void run() {
    step();
    sqlite3_reset(stmt_);
  }
  void reset() { sqlite3_reset(stmt_); }

  std::int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  int type(int col) const { return sqlite3_column_type(stmt_, col); }
  std::string text(int col) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p == nullptr ? std::string() : std::string(p, sqlite3_column_bytes(stmt_, col));
  }
  // Into an existing string, reusing its buffer: scans fill one row object
  // again and again without allocating per row.
  void text_into(int col, std::string& out) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    if (p == nullptr) {
      out.clear();
    } else {
      out.assign(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
    }
  }
  void blob_into(int col, std::string& out) const {
    auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    if (p == nullptr) {
      out.clear();
    } else {
      out.assign(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
    }
  }

 private:
  void bind_one(int i, std::int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_one(int i, long long v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_one(int i, int v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_one(int i, std::uint32_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind_one(int i, std::uint64_t v) {
    check(sqlite3_bind_int64(stmt_, i, static_cast<std::int64_t>(v)));
  }
  void bind_one(int i, std::string_view v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  void bind_one(int i, const std::string& v) { bind_one(i, std::string_view(v)); }
  void bind_one(int i, const char* v) { bind_one(i, std::string_view(v)); }
  void bind_one(int i, std::nullptr_t) { check(sqlite3_bind_null(stmt_, i)); }
  void bind_one(int i, Blob v) {
    check(sqlite3_bind_blob(stmt_, i, v.bytes.data(), static_cast<int>(v.bytes.size()),
                            SQLITE_TRANSIENT));
  }
  void bind_one(int i, NullIfEmpty v) {
    if (v.text.empty()) {
      bind_one(i, nullptr);
    } else {
      bind_one(i, v.text);
    }
  }
  void bind_one(int i, OptionalText v) {
    if (v.present) {
      bind_one(i, v.text);
    } else {
      bind_one(i, nullptr);
    }
  }
  void bind_one(int i, OptionalInt v) {
    if (v.present) {
      bind_one(i, v.value);
    } else {
      bind_one(i, nullptr);
    }
  }
  void bind_one(int i, NullIfZero v) {
    if (v.value == 0) {
      bind_one(i, nullptr);
    } else {
      bind_one(i, v.value);
    }
  }
  void check(int rc) {
    if (rc != SQLITE_OK) fail_(db_, rc, "cannot bind parameter");
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  Failure fail_ = throw_sqlite_error;
};

// Runs `sql` (one or more statements, no parameters) on `db`; a failure
// throws through throw_sqlite_error, prefixed by `what`.
inline void exec(sqlite3* db, const char* sql, const std::string& what) {
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  sqlite3_free(error);
  if (rc != SQLITE_OK) throw_sqlite_error(db, rc, what);
}

// The first column of the first row `sql` answers (a PRAGMA, a count): as
// text, empty when there is no row; as an integer, 0 when there is none.
inline std::string query_text(sqlite3* db, const char* sql) {
  Statement s(db, sql);
  s.bind();
  return s.step() ? s.text(0) : std::string();
}
inline std::int64_t query_int(sqlite3* db, const char* sql) {
  Statement s(db, sql);
  s.bind();
  return s.step() ? s.i64(0) : 0;
}

}  // namespace cplane::storage::sqlite
