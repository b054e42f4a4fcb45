// The argument helpers the command groups share (declared in cli/cli.hpp).
#include "cli/cli.hpp"
#include "events/json.hpp"

namespace cplane::cli {

// Digits alone, but too many for the type: say so, not "not a number".
bool out_of_range(kj::StringPtr text) {
  const std::string_view t(text.cStr(), text.size());
  const std::size_t from = !t.empty() && t[0] == '-' ? 1 : 0;
  return t.size() > from &&
         t.find_first_not_of("0123456789", from) == std::string_view::npos;
}

// A decimal number, as people write one: digits with an optional sign,
// fraction and exponent; no hex, no surrounding space, no "inf" or "nan".
std::optional<double> parse_decimal(kj::StringPtr text) {
  const std::string_view t(text.cStr(), text.size());
  if (t.empty()) return std::nullopt;
  std::size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
  const std::size_t digits_from = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  std::size_t digits = i - digits_from;
  if (i < t.size() && t[i] == '.') {
    const std::size_t from = ++i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    digits += i - from;
  }
  if (digits == 0) return std::nullopt;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    const std::size_t from = i;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
    if (i == from) return std::nullopt;
  }
  if (i != t.size()) return std::nullopt;
  double value = 0;
  const char* begin = t.data() + (t[0] == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(begin, t.data() + t.size(), value);
  if (ec == std::errc::result_out_of_range) return std::numeric_limits<double>::infinity();
  if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
  return value;
}

// A number of seconds for --lock-timeout: 0 or more, at most a day.
std::optional<std::chrono::milliseconds> parse_timeout(kj::StringPtr text) {
  auto v = parse_decimal(text);
  if (!v || !std::isfinite(*v) || *v < 0 || *v > 86'400) return std::nullopt;
  return std::chrono::milliseconds{static_cast<std::int64_t>(std::llround(*v * 1000))};
}

// Where the database lives when neither --db nor $CPLANE_DB says: control.db
// in cplane/ inside the user's cache folder ($XDG_CACHE_HOME, else
// ~/.cache). Only a command that writes creates anything, and then only
// cplane/ (and ~/.cache inside an existing HOME), never HOME or above it.
std::string default_db_path(bool create_folder) {
  if (const char* env = std::getenv("CPLANE_DB"); env != nullptr && *env != '\0') return env;
  namespace fs = std::filesystem;
  fs::path cache;
  fs::path must_exist;  // the folder we never create
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg != nullptr && *xdg == '/') {  // relative values are ignored (XDG spec)
    cache = fs::path(xdg).lexically_normal();
    if (!cache.has_filename()) cache = cache.parent_path();
    must_exist = cache.parent_path();
  } else if (home != nullptr && *home != '\0') {
    must_exist = home;
    cache = must_exist / ".cache";
  } else {
    throw StorageError(StorageError::Category::unavailable,
                       "no database given, and neither XDG_CACHE_HOME nor HOME is set to find "
                       "the default: pass --db PATH or set CPLANE_DB");
  }
  const fs::path db = cache / "cplane" / "control.db";
  if (!create_folder) return db.string();
  std::error_code ec;
  if (!fs::is_directory(must_exist, ec)) {
    throw StorageError(StorageError::Category::unavailable,
                       fmt::format("{} ({}) is not an existing folder, so the default database "
                                   "{} cannot be created: pass --db PATH or set CPLANE_DB",
                                   must_exist == cache.parent_path() && xdg != nullptr && *xdg == '/'
                                       ? "the folder above XDG_CACHE_HOME"
                                       : "HOME",
                                   must_exist.string(), db.string()));
  }
  for (const fs::path& dir : {cache, cache / "cplane"}) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw StorageError(StorageError::Category::unavailable,
                         fmt::format("cannot create {} for the default database {}: {}",
                                     dir.string(), db.string(), std::strerror(errno)));
    }
  }
  return db.string();
}

// Shown whole, with what would act on the terminal escaped (usage errors
// echo the argument KJ could not take).
std::string escape_invisible(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = utf8_sequence_length(text, at);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[at]));
      ++at;
      continue;
    }
    std::uint32_t c = static_cast<unsigned char>(text[at]);
    if (length > 1) {
      c &= 0xffu >> (length + 1);
      for (std::size_t i = 1; i < length; ++i) {
        c = (c << 6) | (static_cast<unsigned char>(text[at + i]) & 0x3fu);
      }
    }
    if (is_invisible_control(c)) {
      out += c < 0x80 ? fmt::format("\\x{:02x}", c) : fmt::format("\\u{:04x}", c);
    } else {
      out.append(text.substr(at, length));
    }
    at += length;
  }
  return out;
}

// Options that take a value, so that "--now -5" reads as "--now=-5" rather
// than as a missing value followed by an unknown option "-5".
constexpr std::array kValueOptions = {"--db",     "--now",   "--durability", "--lock-timeout",
                                      "--actor",  "--owner", "--lease",      "--max",
                                      "--fence",  "--status", "--detail",    "--project",
                                      "--batch",    "--reason", "--kind",      "--ref",
                                      "--head",   "--author", "--priority",  "--actions",
                                      "--action", "--provider", "--fingerprint", "--org",
                                      "--repo",   "--environment", "--target", "--event-count",
                                      "--permalink", "--first-seen", "--last-seen", "--pr",
                                      "--from", "--key", "--wait", "--max-attempts", "--attempts",
                                      "--backoff", "--run-at", "--delay", "--cron", "--payload",
                                      "--tz", "--overlap", "--catch-up"};

std::vector<std::string> join_option_values(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (; i < argc; ++i) out.emplace_back(argv[i]);
      break;
    }
    const bool takes_value =
        std::find(kValueOptions.begin(), kValueOptions.end(), arg) != kValueOptions.end();
    if (takes_value && i + 1 < argc) {
      out.push_back(arg + "=" + argv[++i]);
    } else {
      out.push_back(std::move(arg));
    }
  }
  return out;
}

// Reads a payload argument: "-" is standard input, "@FILE" a file, anything
// else the JSON itself. Files and stdin are read up to just over the limit.
std::string read_payload_argument(const std::string& arg) {
  if (arg != "-" && !arg.starts_with("@")) return arg;
  if (arg == "@") throw InvalidArgument("@ needs a file name: @FILE reads the payload from FILE");
  constexpr std::size_t kCap = kMaxPayloadBytes + 1;
  std::string text;
  auto read_all = [&](std::istream& in, const std::string& name) {
    char buffer[65536];
    while (text.size() < kCap && in.read(buffer, sizeof buffer).gcount() > 0) {
      text.append(buffer, static_cast<std::size_t>(in.gcount()));
    }
    if (in.bad()) throw InvalidArgument(fmt::format("cannot read the payload from {}", name));
  };
  if (arg == "-") {
    read_all(std::cin, "standard input");
  } else {
    const std::string path = arg.substr(1);
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      throw InvalidArgument(
          fmt::format("cannot read the payload file {}: {}", path, std::strerror(errno)));
    }
    read_all(in, path);
  }
  // A file usually ends with a newline; it is not part of the payload.
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace cplane::cli
