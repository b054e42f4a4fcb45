// What a URL or path names, and which files must not be written: the part
// of storage/open.hpp every engine shares (the factory is open_store.cpp).

#include "storage/open.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "events/errors.hpp"
#include "storage/backend.hpp"

namespace cplane::storage {
namespace {

bool has_scheme(const std::string& url, std::string_view scheme) {
  if (url.size() < scheme.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(url[i])) != scheme[i]) return false;
  }
  return true;
}

enum class FileKind { other, sqlite_database, sqlite_wal, combine_area };

// What a regular file is, by its first bytes (the formats' own magic).
FileKind sniff(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return FileKind::other;
  struct stat st {};
  unsigned char head[16] = {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  const ssize_t n = regular ? ::pread(fd, head, sizeof head, 0) : 0;
  ::close(fd);
  if (n >= 16 && std::memcmp(head, "SQLite format 3", 16) == 0) return FileKind::sqlite_database;
  // A WAL header: magic 0x377f0682 or 0x377f0683, big-endian.
  if (n >= 4 && head[0] == 0x37 && head[1] == 0x7f && head[2] == 0x06 &&
      (head[3] == 0x82 || head[3] == 0x83)) {
    return FileKind::sqlite_wal;
  }
  if (n >= 8 && std::memcmp(head, "CPLCMB01", 8) == 0) return FileKind::combine_area;
  return FileKind::other;
}

// The database `path` is a side file of, if its name says so and that
// database exists beside it.
std::optional<std::string> side_file_of(const std::string& path) {
  for (const char* suffix : kSideFileSuffixes) {
    const std::string_view p(path);
    if (!p.ends_with(suffix) || p.size() == std::strlen(suffix)) continue;
    std::string base(p.substr(0, p.size() - std::strlen(suffix)));
    struct stat st {};
    if (::stat(base.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return base;
  }
  return std::nullopt;
}

// The path with every link resolved (as far as it exists).
std::string absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path : p.string();
}
// The path made absolute and normal, its links left as they are.
std::string absolute_name(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec).lexically_normal();
  return ec ? path : p.string();
}

// The database whose side file `path` is by device and inode: a link (of
// either kind) to a WAL, a lock or an area under another name.
std::optional<std::string> side_file_by_inode(const std::string& path) {
  struct stat t {};
  if (::stat(path.c_str(), &t) != 0 || !S_ISREG(t.st_mode)) return std::nullopt;
  std::error_code ec;
  const auto folder = std::filesystem::path(absolute(path)).parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().string();
    if (!side_file_of(name)) continue;
    struct stat s {};
    if (::stat(name.c_str(), &s) == 0 && s.st_dev == t.st_dev && s.st_ino == t.st_ino &&
        name != absolute(path)) {
      return *side_file_of(name);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> protected_target(const std::string& target, const std::string& source) {
  struct stat t {};
  const bool exists = ::stat(target.c_str(), &t) == 0;
  const std::string given = sqlite_path(source);
  // SQLite keeps a linked database's side files beside the file the link
  // leads to: look beside both.
  std::vector<std::string> names;
  if (!given.empty() && given != ":memory:") {
    names.push_back(given);
    if (const std::string resolved = absolute(given); resolved != absolute_name(given)) {
      names.push_back(resolved);
    }
  }
  for (const std::string& file : names) {
    const std::string where = absolute(target);
    for (const char* suffix : {"", "-wal", "-shm", "-journal", "-lock", "-combine"}) {
      const std::string side = file + suffix;
      struct stat s {};
      const bool same_file = exists && ::stat(side.c_str(), &s) == 0 && s.st_dev == t.st_dev &&
                             s.st_ino == t.st_ino;
      if (same_file || where == absolute(side)) {
        return *suffix == '\0'
                   ? fmt::format("{} is the database being read", target)
                   : fmt::format("{} is a side file of the database being read ({})", target, side);
      }
    }
  }
  if (exists && S_ISREG(t.st_mode)) {
    switch (sniff(target)) {
      case FileKind::sqlite_database:
        return fmt::format("{} is an SQLite database", target);
      case FileKind::sqlite_wal:
        return fmt::format("{} is an SQLite write-ahead log (a database's committed writes)", target);
      case FileKind::combine_area:
        return fmt::format("{} is a database's group-commit area", target);
      case FileKind::other:
        break;
    }
  }
  for (const auto& base : {side_file_of(target), side_file_of(absolute(target)),
                           side_file_by_inode(target)}) {
    if (base) return fmt::format("{} is a side file of the database {}", target, *base);
  }
  return std::nullopt;
}

std::optional<std::string> foreign_side_files(const std::string& path) {
  // By name, by the name a symbolic link leads to, and by inode (a hard
  // link): a database made there would be written into another's WAL.
  for (const auto& base : {side_file_of(path), side_file_of(absolute(path)),
                           side_file_by_inode(path)}) {
    if (base) {
      return fmt::format("{} is a side file of the database {}, not a database", path, *base);
    }
  }
  const std::string wal = path + "-wal";
  struct stat st {};
  if (::stat(wal.c_str(), &st) == 0 && st.st_size > 0) {
    return fmt::format(
        "{} exists and is not empty, but there is no database at {}: it holds another "
        "database's committed writes (one moved or deleted without its side files), which a "
        "new database would take as its own or reset. Move it back beside its database, or "
        "remove {} and {}-shm if nothing in it is needed",
        wal, path, wal, path);
  }
  // SQLite's wal-index: every connection that has it open holds a read
  // lock on its "dead man switch" byte (offset 128, src/os_unix.c).
  const std::string shm = path + "-shm";
  if (const int fd = ::open(shm.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); fd >= 0) {
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    probe.l_start = 128;
    probe.l_len = 1;
    const bool held = ::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
    ::close(fd);
    if (held) {
      return fmt::format(
          "{} is held open by a process of another database (one moved while it runs): a new "
          "database at {} would share its WAL; stop it, or give the new database another name",
          shm, path);
    }
  }
  const std::string area = path + "-combine";
  const int fd = ::open(area.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    ::close(fd);
    if (held) {
      return fmt::format(
          "{} is held open by processes of another database (one moved while they run): a new "
          "database at {} would share their group-commit area; stop them, or give the new "
          "database another name",
          area, path);
    }
  }
  return std::nullopt;
}

bool is_postgres_url(const std::string& url) {
  return has_scheme(url, "postgresql://") || has_scheme(url, "postgres://");
}

std::string sqlite_path(const std::string& url) {
  if (is_postgres_url(url)) return "";
  if (has_scheme(url, "sqlite://")) return url.substr(9);  // sqlite:///abs/x.db -> /abs/x.db
  if (has_scheme(url, "sqlite:")) return url.substr(7);    // sqlite:x.db -> x.db
  return url;
}

}  // namespace cplane::storage

namespace cplane::storage {

void Backend::savepoint() { throw InternalError("this backend has no group commit: no savepoints"); }
void Backend::release_savepoint() {
  throw InternalError("this backend has no group commit: no savepoints");
}
std::unique_ptr<Cursor<RawEvent>> Backend::scan_after(Seq) {
  throw InternalError("this backend cannot scan the log by seq");
}

namespace {
template <class Row>
struct NoRows final : Cursor<Row> {
  bool next(Row&) override { return false; }
};
InvalidArgument no_archive() {
  return InvalidArgument("this store's engine does not archive yet (SQLite does): nothing was "
                         "archived");
}
}  // namespace

std::unique_ptr<Cursor<StreamAnchor>> LogSource::scan_anchors(StreamKind) {
  return std::make_unique<NoRows<StreamAnchor>>();
}
std::vector<std::string> Backend::ended_streams(StreamKind, Micros, const std::string*,
                                                std::size_t) {
  throw no_archive();
}
void Backend::archive_stream(const StreamAnchor&) { throw no_archive(); }
void Backend::import_anchor(const StreamAnchor&) { throw no_archive(); }
void Backend::delete_anchor(const StreamRef&) { throw no_archive(); }
std::optional<StreamAnchor> Backend::find_anchor(const StreamRef&) { return std::nullopt; }
std::optional<StreamAnchor> Backend::find_anchor_by_key(const std::string&, std::string_view) {
  return std::nullopt;
}
void Backend::put_segment(const SegmentRecord&) { throw no_archive(); }
void Backend::delete_segment(const std::string&) { throw no_archive(); }
std::set<std::string> Backend::anchored_segments() { return {}; }
std::vector<Backend::SegmentRecord> Backend::segments() { return {}; }
std::optional<std::vector<LogSource::RecordedSegment>> Backend::recorded_segments() {
  return segments();
}

Hash anchor_hash(const StreamAnchor& a) {
  Hasher h;
  h.add(std::string_view("cplane.anchor.v1"));
  for (const std::string* text : {&a.stream_kind, &a.stream_id, &a.hash, &a.seqs, &a.project_id,
                                  &a.state, &a.idem_key, &a.segment_id, &a.segment_digest}) {
    h.add(static_cast<std::int64_t>(text->size()));
    h.add(*text);
  }
  for (const std::int64_t n : {a.revision, a.last_seq, a.events, a.fence, a.ended_at}) h.add(n);
  return h.done();
}

std::string pack_seqs(const std::vector<Seq>& seqs) {
  std::string out;
  out.reserve(seqs.size() * 8);
  for (const Seq s : seqs) {
    for (int shift = 56; shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((static_cast<std::uint64_t>(s) >> shift) & 0xff));
    }
  }
  return out;
}

bool unpack_seqs(std::string_view bytes, std::vector<Seq>& out) {
  out.clear();
  if (bytes.size() % 8 != 0) return false;
  for (std::size_t at = 0; at < bytes.size(); at += 8) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
    out.push_back(static_cast<Seq>(v));
  }
  return true;
}

}  // namespace cplane::storage
