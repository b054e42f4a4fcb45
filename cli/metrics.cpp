// cplane metrics: one scrape in the Prometheus text format (or its samples
// as JSON), for a textfile collector or a cron job. The collector's state
// is kept in a file between runs, so that a run folds only the events
// appended since the previous one (docs/metrics.md).
#include <fcntl.h>

#include "cli/cli.hpp"

namespace cplane::cli {

namespace {

// The largest state file read (its claimed items dominate: ~40 bytes each).
constexpr std::uintmax_t kMaxStateBytes = 256u << 20;

// The default state file: under the user's cache folder, named by the
// database's id, so that stores never share one; a store without an id
// (made by an old cplane) is named by its URL's hash instead.
std::filesystem::path default_state_file(const std::string& database_id, const std::string& url) {
  namespace fs = std::filesystem;
  fs::path cache;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg != nullptr && *xdg == '/') {
    cache = xdg;
  } else if (home != nullptr && *home != '\0') {
    cache = fs::path(home) / ".cache";
  } else {
    throw StorageError(StorageError::Category::unavailable,
                       "neither XDG_CACHE_HOME nor HOME is set to find the default metrics "
                       "state file: pass --state FILE");
  }
  std::string name = database_id;
  if (name.empty() || name.find_first_of("/\\") != std::string::npos || name[0] == '.') {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const unsigned char c : url) h = (h ^ c) * 1099511628211ull;
    name = fmt::format("url-{:016x}", h);
  }
  return cache / "cplane" / "metrics" / (name + ".state");
}

std::string read_state_file(const std::filesystem::path& file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) {
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot read the metrics state {}: {}", file.string(),
                                   ec.message()));
  }
  if (size > kMaxStateBytes) {
    throw InvalidArgument(fmt::format("the metrics state {} is {} bytes, more than a state "
                                      "holds (at most {}): it is not one",
                                      file.string(), size, kMaxStateBytes));
  }
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) {
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot read the metrics state {}", file.string()));
  }
  return text;
}

// Written beside the file, flushed, then renamed over it: a reader (or a
// crash) sees the old state or the new one, never half of one.
void write_state_file(const std::filesystem::path& file, const std::string& text) {
  const std::string tmp = file.string() + fmt::format(".tmp.{}", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const auto fail = [&](const char* what) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw StorageError(err == ENOSPC || err == EDQUOT || err == EFBIG
                           ? StorageError::Category::full
                           : StorageError::Category::io,
                       fmt::format("cannot {} the metrics state {}: {}", what, file.string(),
                                   std::strerror(err)));
  };
  if (fd < 0) fail("create");
  std::size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    at += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("write");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot write the metrics state {}: {}", file.string(),
                                   std::strerror(err)));
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw StorageError(StorageError::Category::io,
                       fmt::format("cannot replace the metrics state {}: {}", file.string(),
                                   std::strerror(err)));
  }
}

std::string value_json(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<std::int64_t>(v));
  return fmt::format("{}", v);
}

std::string families_json(const std::vector<MetricFamily>& families) {
  std::string list = "[";
  for (std::size_t i = 0; i < families.size(); ++i) {
    const auto& f = families[i];
    std::string samples = "[";
    for (std::size_t j = 0; j < f.samples.size(); ++j) {
      JsonObject labels;
      for (const auto& [name, value] : f.samples[j].labels) labels.str(name, value);
      samples += (j ? "," : "") + JsonObject()
                                      .raw("labels", labels.done())
                                      .raw("value", value_json(f.samples[j].value))
                                      .done();
    }
    list += (i ? "," : "") + JsonObject()
                                 .str("name", f.name)
                                 .str("type", to_string(f.type))
                                 .str("help", f.help)
                                 .raw("samples", samples + "]")
                                 .done();
  }
  return JsonObject().raw("families", list + "]").done();
}

}  // namespace

kj::MainFunc Cli::metrics_command() {
  return globals(kj::MainBuilder(
                     context_, kVersionLine,
                     "Print the store's metrics in the Prometheus text format (version 0.0.4): "
                     "open items by project and status, the oldest available item's age, live "
                     "and lapsed leases, open sessions, and counters folded from the log. The "
                     "counters go on from the state file, so a run reads only the events "
                     "appended since the previous run; the first run starts them at zero at "
                     "the log's end (--from-start: at its first event). --json prints the "
                     "same samples as JSON."))
      .addOptionWithArg({"state"}, KJ_BIND_METHOD(*this, set_state_file), "<file>",
                        "keep the counters here between runs (default: a file under the cache "
                        "folder named by the database's id)")
      .addOption({"from-start"}, KJ_BIND_METHOD(*this, set_from_start),
                 "with no state yet: fold the whole log once, so the counters are totals")
      .callAfterParsing(KJ_BIND_METHOD(*this, run_metrics))
      .build();
}

Validity Cli::set_state_file(kj::StringPtr text) {
  if (text.size() == 0) return "--state takes a file";
  state_file_ = std::string(text.cStr(), text.size());
  return true;
}

Validity Cli::set_from_start() {
  from_start_ = true;
  return true;
}

Validity Cli::run_metrics() {
  return run([&] {
    auto store = open(Access::read);
    MetricsCollector collector(store, {.from_start = from_start_});
    const bool default_file = !state_file_;
    const std::filesystem::path file =
        state_file_ ? std::filesystem::path(*state_file_)
                    : default_state_file(collector.database_id(), db_ ? *db_ : default_db_path(false));
    std::error_code ec;
    if (std::filesystem::exists(file, ec)) {
      collector.load_state(read_state_file(file));
    } else if (default_file) {
      std::filesystem::create_directories(file.parent_path(), ec);
      if (ec) {
        throw StorageError(StorageError::Category::io,
                           fmt::format("cannot create {} for the metrics state: {}",
                                       file.parent_path().string(), ec.message()));
      }
    }
    const auto families = collector.collect(now_);
    write_state_file(file, collector.save_state());
    if (context_.verbose) {
      std::cerr << fmt::format("cplane: metrics state {}: {} events folded, up to seq {}\n",
                               file.string(), collector.events_read(), collector.folded_seq());
    }
    if (json_) {
      print(families_json(families));
    } else {
      print_raw(to_prometheus_text(families));
    }
  });
}

}  // namespace cplane::cli
