// What this file reads of a TZif file (RFC 8536), and why no more.
//
// A TZif file is a header (`TZif`, a version byte, six big-endian counts),
// a data block, and for version 2 and later a second header and data block
// with 64-bit times, then a footer: a POSIX TZ string between two newlines.
// A data block holds, in order: the transition times (ascending), one local
// time type index per transition, the local time types (a 32-bit UTC offset,
// an is-DST byte, an abbreviation index), the abbreviations, the leap-second
// records and two indicator arrays. Times before the first transition use
// local time type 0; times after the last use the footer's rule.
//
// Of all that, a cron schedule needs only the UTC offset as a function of
// time. We keep the transitions at which the offset changes (a transition
// that changes only the abbreviation or the is-DST flag is dropped), the
// offset before the first, and the footer's rule parsed into a PosixRule.
// Leap seconds would shift every time by up to half a minute: a file with
// leap-second records is refused rather than read wrong.
#include "commands/cron.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <vector>

#include <fmt/format.h>

#include <cplane/errors.hpp>

namespace cplane {

namespace {

constexpr std::int64_t kMinute = 60;
constexpr std::int64_t kHour = 60 * kMinute;
constexpr std::int64_t kDay = 24 * kHour;
constexpr std::int64_t kHorizon = 5 * 366 * kDay;
// How long after an offset change a repeat of local times is still looked for.
constexpr std::int64_t kRepeatLookback = 2 * kDay;
constexpr std::int64_t kMicrosPerSecond = 1'000'000;

// ---- Calendar arithmetic on days since 1970-01-01 (proleptic Gregorian).

constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

constexpr bool is_leap_year(std::int64_t year) {
  return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
}

constexpr int days_in_month(std::int64_t year, int month) {
  constexpr std::array<int, 13> kDays{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap_year(year) ? 29 : kDays[static_cast<std::size_t>(month)];
}

// H. Hinnant's days_from_civil and civil_from_days.
constexpr std::int64_t days_from_civil(std::int64_t year, int month, int day) {
  year -= month <= 2 ? 1 : 0;
  const std::int64_t era = floor_div(year, 400);
  const std::int64_t year_of_era = year - era * 400;
  const std::int64_t day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const std::int64_t day_of_era =
      year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + day_of_era - 719468;
}

struct CivilDate {
  std::int64_t year;
  int month;  // 1-12
  int day;    // 1-31
};

constexpr CivilDate civil_from_days(std::int64_t days) {
  days += 719468;
  const std::int64_t era = floor_div(days, 146097);
  const std::int64_t day_of_era = days - era * 146097;
  const std::int64_t year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const std::int64_t day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const std::int64_t shifted_month = (5 * day_of_year + 2) / 153;
  const int day = static_cast<int>(day_of_year - (153 * shifted_month + 2) / 5 + 1);
  const int month = static_cast<int>(shifted_month < 10 ? shifted_month + 3 : shifted_month - 9);
  return {year_of_era + era * 400 + (month <= 2 ? 1 : 0), month, day};
}

// 0 is Sunday; 1970-01-01 was a Thursday.
constexpr int weekday_of(std::int64_t days) {
  return static_cast<int>(days - floor_div(days + 4, 7) * 7 + 4);
}

constexpr std::int64_t year_of(std::int64_t seconds) {
  return civil_from_days(floor_div(seconds, kDay)).year;
}

static_assert(days_from_civil(1970, 1, 1) == 0);
static_assert(days_from_civil(2000, 3, 1) == 11017);
static_assert(civil_from_days(11017).year == 2000 && civil_from_days(11017).month == 3);
static_assert(weekday_of(0) == 4 && weekday_of(-1) == 3 && weekday_of(3) == 0);

// ASCII only, whatever the process's locale.
constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// An expression or zone as shown in a message: double-quoted, escaped, cut.
std::string shown(std::string_view text) {
  constexpr std::size_t kShown = 120;
  if (text.size() <= kShown) return fmt::format("{:?}", text);
  return fmt::format("{:?}... ({} bytes)", text.substr(0, kShown), text.size());
}

// ---- The POSIX TZ rule of a TZif footer.

struct RuleDate {
  enum class Kind { julian, zero_based, month_week_day };
  Kind kind = Kind::month_week_day;
  int day = 0;  // Jn: 1-365, Feb 29 never counted; n: 0-365, Feb 29 counted
  int month = 0, week = 0, weekday = 0;  // Mm.w.d: week 5 is the last
};

struct PosixRule {
  std::int32_t std_offset = 0;  // seconds east of UTC
  bool has_dst = false;
  std::int32_t dst_offset = 0;
  RuleDate start, end;
  std::int32_t start_time = 2 * kHour;  // after local (standard) midnight; may be < 0 or > 24h
  std::int32_t end_time = 2 * kHour;    // after local (daylight) midnight
};

// The day (since the epoch) on which `date` falls in `year`.
std::int64_t rule_day(const RuleDate& date, std::int64_t year) {
  const std::int64_t january_first = days_from_civil(year, 1, 1);
  switch (date.kind) {
    case RuleDate::Kind::julian:
      return january_first + date.day - 1 + (is_leap_year(year) && date.day >= 60 ? 1 : 0);
    case RuleDate::Kind::zero_based:
      return january_first + date.day;
    case RuleDate::Kind::month_week_day: {
      const std::int64_t first = days_from_civil(year, date.month, 1);
      std::int64_t day = first + (date.weekday - weekday_of(first) + 7) % 7 + (date.week - 1) * 7;
      while (day >= first + days_in_month(year, date.month)) day -= 7;
      return day;
    }
  }
  return january_first;
}

// An instant from which an offset holds.
struct OffsetFrom {
  std::int64_t at;
  std::int32_t offset;
};

// The rule's changes in years `first_year` to `last_year`, in time order; of
// two at one instant (a year's end of DST that is the next year's start, as
// in all-year DST), the later-listed one.
std::vector<OffsetFrom> rule_changes(const PosixRule& rule, std::int64_t first_year,
                                     std::int64_t last_year) {
  std::vector<OffsetFrom> changes;
  if (!rule.has_dst) return changes;
  for (std::int64_t year = first_year; year <= last_year; ++year) {
    changes.push_back(
        {rule_day(rule.start, year) * kDay + rule.start_time - rule.std_offset, rule.dst_offset});
    changes.push_back(
        {rule_day(rule.end, year) * kDay + rule.end_time - rule.dst_offset, rule.std_offset});
  }
  std::stable_sort(changes.begin(), changes.end(),
                   [](const OffsetFrom& a, const OffsetFrom& b) { return a.at < b.at; });
  std::vector<OffsetFrom> out;
  for (const auto& change : changes) {
    if (!out.empty() && out.back().at == change.at) {
      out.back() = change;
    } else {
      out.push_back(change);
    }
  }
  return out;
}

// Reads a POSIX TZ string; nullopt when it is not one this reader knows.
class PosixReader {
 public:
  explicit PosixReader(std::string_view text) : text_(text) {}

  std::optional<PosixRule> rule() {
    PosixRule rule;
    if (!name()) return std::nullopt;
    const auto std_offset = hms(24);
    if (!std_offset) return std::nullopt;
    rule.std_offset = static_cast<std::int32_t>(-*std_offset);
    if (done()) {
      rule.dst_offset = rule.std_offset;
      return rule;
    }
    if (!name()) return std::nullopt;
    rule.has_dst = true;
    rule.dst_offset = rule.std_offset + static_cast<std::int32_t>(kHour);
    if (!done() && peek() != ',') {
      const auto dst_offset = hms(24);
      if (!dst_offset) return std::nullopt;
      rule.dst_offset = static_cast<std::int32_t>(-*dst_offset);
    }
    // DST with no rule: POSIX leaves the dates to the implementation.
    if (!take(',') || !date_and_time(rule.start, rule.start_time) || !take(',') ||
        !date_and_time(rule.end, rule.end_time) || !done()) {
      return std::nullopt;
    }
    return rule;
  }

 private:
  bool done() const { return at_ == text_.size(); }
  char peek() const { return done() ? '\0' : text_[at_]; }
  bool take(char c) {
    if (peek() != c) return false;
    ++at_;
    return true;
  }

  // `EST` or `<-03>`: at least three characters.
  bool name() {
    const std::size_t begin = at_;
    if (take('<')) {
      while (!done() && (is_letter(peek()) || is_digit(peek()) || peek() == '+' || peek() == '-')) {
        ++at_;
      }
      return at_ - begin - 1 >= 3 && take('>');
    }
    while (!done() && is_letter(peek())) ++at_;
    return at_ - begin >= 3;
  }

  std::optional<std::int64_t> number(std::int64_t max) {
    std::int64_t value = 0;
    const std::size_t begin = at_;
    while (!done() && is_digit(peek()) && at_ - begin < 4) {
      value = value * 10 + (peek() - '0');
      ++at_;
    }
    if (at_ == begin || value > max) return std::nullopt;
    return value;
  }

  // [+-]hh[:mm[:ss]], in seconds.
  std::optional<std::int64_t> hms(std::int64_t max_hours) {
    const bool negative = take('-');
    if (!negative) take('+');
    const auto hours = number(max_hours);
    if (!hours) return std::nullopt;
    std::int64_t seconds = *hours * kHour;
    if (take(':')) {
      const auto minutes = number(59);
      if (!minutes) return std::nullopt;
      seconds += *minutes * kMinute;
      if (take(':')) {
        const auto secs = number(59);
        if (!secs) return std::nullopt;
        seconds += *secs;
      }
    }
    return negative ? -seconds : seconds;
  }

  // Jn, n or Mm.w.d, then an optional /time (hours up to 167, RFC 8536).
  bool date_and_time(RuleDate& date, std::int32_t& time) {
    if (take('J')) {
      const auto day = number(365);
      if (!day || *day < 1) return false;
      date = {RuleDate::Kind::julian, static_cast<int>(*day), 0, 0, 0};
    } else if (take('M')) {
      const auto month = number(12);
      if (!month || *month < 1 || !take('.')) return false;
      const auto week = number(5);
      if (!week || *week < 1 || !take('.')) return false;
      const auto weekday = number(6);
      if (!weekday) return false;
      date = {RuleDate::Kind::month_week_day, 0, static_cast<int>(*month), static_cast<int>(*week),
              static_cast<int>(*weekday)};
    } else {
      const auto day = number(365);
      if (!day) return false;
      date = {RuleDate::Kind::zero_based, static_cast<int>(*day), 0, 0, 0};
    }
    if (take('/')) {
      const auto seconds = hms(167);
      if (!seconds) return false;
      time = static_cast<std::int32_t>(*seconds);
    }
    return true;
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace

struct TimeZoneRules {
  std::int32_t initial_offset = 0;    // before the first transition (type 0)
  std::vector<std::int64_t> times;    // ascending; each changes the offset
  std::vector<std::int32_t> offsets;  // the offset from times[i]
  std::optional<PosixRule> rule;      // from the last transition on
};

namespace {

// ---- Offsets over time: the transitions, then the footer's rule.

// The footer's rule applies after the last transition, starting from its offset.
std::int64_t rule_floor_time(const TimeZoneRules& zone) {
  return zone.times.empty() ? std::numeric_limits<std::int64_t>::min() : zone.times.back();
}
std::int32_t rule_floor_offset(const TimeZoneRules& zone) {
  return zone.times.empty() ? zone.initial_offset : zone.offsets.back();
}

std::int32_t offset_at(const TimeZoneRules& zone, std::int64_t t) {
  if (!zone.times.empty() && t < zone.times.back()) {
    const auto next = std::upper_bound(zone.times.begin(), zone.times.end(), t);
    if (next == zone.times.begin()) return zone.initial_offset;
    return zone.offsets[static_cast<std::size_t>(next - zone.times.begin() - 1)];
  }
  std::int32_t offset = rule_floor_offset(zone);
  if (zone.rule) {
    const std::int64_t year = year_of(t);
    for (const auto& change : rule_changes(*zone.rule, year - 1, year + 1)) {
      if (change.at > t) break;
      if (change.at > rule_floor_time(zone)) offset = change.offset;
    }
  }
  return offset;
}

// A change of UTC offset at instant `at`.
struct Shift {
  std::int64_t at;
  std::int32_t before;
  std::int32_t after;
};

// The changes of offset at instants in (from, to], in time order.
std::vector<Shift> shifts_between(const TimeZoneRules& zone, std::int64_t from, std::int64_t to) {
  std::vector<OffsetFrom> changes;
  for (auto it = std::upper_bound(zone.times.begin(), zone.times.end(), from);
       it != zone.times.end() && *it <= to; ++it) {
    changes.push_back({*it, zone.offsets[static_cast<std::size_t>(it - zone.times.begin())]});
  }
  const std::int64_t rule_from = std::max(from, rule_floor_time(zone));
  if (zone.rule && rule_from < to) {
    for (const auto& change : rule_changes(*zone.rule, year_of(rule_from) - 1, year_of(to) + 1)) {
      if (change.at > rule_from && change.at <= to) changes.push_back(change);
    }
  }
  std::vector<Shift> shifts;
  std::int32_t current = offset_at(zone, from);
  for (const auto& change : changes) {
    if (change.offset == current) continue;
    shifts.push_back({change.at, current, change.offset});
    current = change.offset;
  }
  return shifts;
}

// ---- Reading a zone.

constexpr std::string_view kZoneDirectory = "/usr/share/zoneinfo/";
constexpr std::size_t kMaxZoneFile = 1 << 20;
// RFC 8536: a UTC offset lies in -25:59:59..+25:59:59.
constexpr std::int64_t kMaxOffset = 26 * kHour - 1;

void check_zone_name(std::string_view zone) {
  const auto refuse = [&](std::string_view why) {
    throw InvalidArgument(fmt::format("time zone {} is not a zone name: {}", shown(zone), why));
  };
  if (zone.size() > 255) refuse("it is longer than 255 characters");
  if (zone.front() == '/') refuse("it must not start with \"/\"");
  // Names whose meaning is the host's, not the tz database's: localtime is a
  // link to /etc/localtime, posixrules to whatever the distribution chose.
  if (zone == "localtime" || zone == "posixrules") {
    refuse("it names the host's own setting, which differs from host to host; name the zone "
           "(such as Europe/Berlin)");
  }
  for (std::size_t begin = 0; begin <= zone.size();) {
    std::size_t end = zone.find('/', begin);
    if (end == std::string_view::npos) end = zone.size();
    const std::string_view component = zone.substr(begin, end - begin);
    if (component == "..") refuse("\"..\" components are not allowed");
    if (component.empty()) refuse("it has an empty component");
    begin = end + 1;
  }
  for (const char c : zone) {
    const bool allowed =
        is_letter(c) || is_digit(c) || c == '_' || c == '+' || c == '-' || c == '/';
    if (!allowed) refuse("only letters, digits and _ + - / are allowed");
  }
}

// Big-endian fields of a TZif file; any read past the end refuses the file.
class TzifReader {
 public:
  TzifReader(std::string_view bytes, std::string_view zone, std::string_view path)
      : bytes_(bytes), zone_(zone), path_(path) {}

  TimeZoneRules rules() {
    const Header first = header();
    if (first.version == 0) {
      return block(first, 4, std::nullopt);
    }
    skip(block_size(first, 4));
    const Header second = header();
    if (second.version == 0) refuse("its second header has no version");
    return block(second, 8, footer_after_block(second));
  }

 private:
  struct Header {
    int version = 0;
    std::uint64_t isutcnt = 0, isstdcnt = 0, leapcnt = 0, timecnt = 0, typecnt = 0, charcnt = 0;
  };

  [[noreturn]] void refuse(std::string_view why) const {
    throw InvalidArgument(
        fmt::format("time zone {}: {} is not a valid TZif file ({})", shown(zone_), path_, why));
  }

  std::string_view take(std::uint64_t size) {
    if (size > bytes_.size() - at_) refuse("it ends early");
    const std::string_view out = bytes_.substr(at_, size);
    at_ += size;
    return out;
  }
  void skip(std::uint64_t size) { take(size); }

  std::uint64_t unsigned_big_endian(std::size_t size) {
    std::uint64_t value = 0;
    for (const char c : take(size)) value = (value << 8) | static_cast<unsigned char>(c);
    return value;
  }
  std::int64_t signed_big_endian(std::size_t size) {
    const std::uint64_t value = unsigned_big_endian(size);
    if (size == 8) return static_cast<std::int64_t>(value);
    const std::uint64_t sign = std::uint64_t{1} << (size * 8 - 1);
    return static_cast<std::int64_t>(value ^ sign) - static_cast<std::int64_t>(sign);
  }

  Header header() {
    if (take(4) != "TZif") refuse("it does not start with \"TZif\"");
    Header h;
    const char version = take(1)[0];
    if (version != '\0' && (version < '2' || version > '9')) refuse("its version is unknown");
    h.version = version == '\0' ? 0 : version - '0';
    skip(15);
    h.isutcnt = unsigned_big_endian(4);
    h.isstdcnt = unsigned_big_endian(4);
    h.leapcnt = unsigned_big_endian(4);
    h.timecnt = unsigned_big_endian(4);
    h.typecnt = unsigned_big_endian(4);
    h.charcnt = unsigned_big_endian(4);
    return h;
  }

  static std::uint64_t block_size(const Header& h, std::uint64_t time_size) {
    return h.timecnt * (time_size + 1) + h.typecnt * 6 + h.charcnt + h.leapcnt * (time_size + 4) +
           h.isstdcnt + h.isutcnt;
  }

  // The footer's rule, read without moving on: nullopt when it is absent,
  // empty or not a rule this reader knows.
  std::optional<PosixRule> footer_after_block(const Header& h) const {
    const std::uint64_t begin = at_ + block_size(h, 8);
    if (begin >= bytes_.size() || bytes_[begin] != '\n') return std::nullopt;
    const std::size_t end = bytes_.find('\n', begin + 1);
    if (end == std::string_view::npos) return std::nullopt;
    const std::string_view text = bytes_.substr(begin + 1, end - begin - 1);
    if (text.empty()) return std::nullopt;
    auto rule = PosixReader(text).rule();
    if (rule &&
        (std::abs(rule->std_offset) > kMaxOffset || std::abs(rule->dst_offset) > kMaxOffset)) {
      return std::nullopt;
    }
    return rule;
  }

  TimeZoneRules block(const Header& h, std::size_t time_size, std::optional<PosixRule> rule) {
    if (h.typecnt == 0) refuse("it has no local time types");
    if (h.leapcnt != 0) refuse("it counts leap seconds, which cron times do not");
    if (block_size(h, time_size) > bytes_.size() - at_) refuse("it ends early");
    std::vector<std::int64_t> times;
    for (std::uint64_t i = 0; i < h.timecnt; ++i) {
      times.push_back(signed_big_endian(time_size));
      if (i > 0 && times[i] <= times[i - 1]) refuse("its transitions are not in order");
    }
    std::vector<std::uint8_t> type_of;
    for (std::uint64_t i = 0; i < h.timecnt; ++i) {
      type_of.push_back(static_cast<std::uint8_t>(take(1)[0]));
      if (type_of.back() >= h.typecnt) refuse("a transition names no local time type");
    }
    std::vector<std::int32_t> type_offsets;
    for (std::uint64_t i = 0; i < h.typecnt; ++i) {
      const std::int64_t offset = signed_big_endian(4);
      if (offset < -kMaxOffset || offset > kMaxOffset) refuse("a UTC offset is out of range");
      type_offsets.push_back(static_cast<std::int32_t>(offset));
      skip(2);  // is-DST, abbreviation index
    }
    skip(h.charcnt + h.leapcnt * (time_size + 4) + h.isstdcnt + h.isutcnt);

    TimeZoneRules zone;
    zone.initial_offset = type_offsets[0];
    std::int32_t current = zone.initial_offset;
    for (std::size_t i = 0; i < times.size(); ++i) {
      const std::int32_t offset = type_offsets[type_of[i]];
      if (offset == current) continue;
      zone.times.push_back(times[i]);
      zone.offsets.push_back(offset);
      current = offset;
    }
    zone.rule = std::move(rule);
    return zone;
  }

  std::string_view bytes_;
  std::string_view zone_;
  std::string_view path_;
  std::uint64_t at_ = 0;
};

std::shared_ptr<const TimeZoneRules> load_zone(std::string_view zone) {
  check_zone_name(zone);
  const std::string path = std::string(kZoneDirectory) + std::string(zone);
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw InvalidArgument(fmt::format("unknown time zone {}", shown(zone)));
  }
  std::ifstream file(path, std::ios::binary);
  std::string bytes;
  if (file) {
    bytes.resize(kMaxZoneFile + 1);
    file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<std::size_t>(file.gcount()));
  }
  if (!file && !file.eof()) {
    throw InvalidArgument(fmt::format("time zone {}: {} could not be read", shown(zone), path));
  }
  if (bytes.size() > kMaxZoneFile) {
    throw InvalidArgument(
        fmt::format("time zone {}: {} is not a valid TZif file (larger than {} bytes)", shown(zone),
                    path, kMaxZoneFile));
  }
  return std::make_shared<const TimeZoneRules>(TzifReader(bytes, zone, path).rules());
}

// ---- Parsing an expression.

constexpr std::array<std::string_view, 12> kMonthNames{"jan", "feb", "mar", "apr", "may", "jun",
                                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 7> kDayNames{"sun", "mon", "tue", "wed",
                                                    "thu", "fri", "sat"};

struct FieldSpec {
  std::string_view name;  // as messages call the field
  std::string_view noun;  // what one value is: "a minute"
  int low;
  int high;
  std::span<const std::string_view> names;  // the names of low, low + 1, ...; may be empty
  std::string_view names_hint;
};

constexpr std::array<FieldSpec, 5> kFields{{
    {"minute", "a minute", 0, 59, {}, ""},
    {"hour", "an hour", 0, 23, {}, ""},
    {"day-of-month", "a day of the month", 1, 31, {}, ""},
    {"month", "a month", 1, 12, kMonthNames, " or jan..dec"},
    {"day-of-week", "a day of the week", 0, 7, kDayNames, " or sun..sat"},
}};

struct Shorthand {
  std::string_view name;
  std::string_view fields;
};

constexpr std::array<Shorthand, 7> kShorthands{{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
}};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::vector<std::string_view> split_fields(std::string_view expr) {
  std::vector<std::string_view> fields;
  std::size_t at = 0;
  while (at < expr.size()) {
    while (at < expr.size() && is_blank(expr[at])) ++at;
    const std::size_t begin = at;
    while (at < expr.size() && !is_blank(expr[at])) ++at;
    if (at > begin) fields.push_back(expr.substr(begin, at - begin));
  }
  return fields;
}

// One field, as the set of its values (bit v for value v).
class FieldParser {
 public:
  FieldParser(const FieldSpec& spec, std::string_view field, std::string_view expr)
      : spec_(spec), field_(field), expr_(expr) {}

  std::uint64_t values() const {
    std::uint64_t bits = 0;
    for (std::size_t begin = 0; begin <= field_.size();) {
      std::size_t end = field_.find(',', begin);
      if (end == std::string_view::npos) end = field_.size();
      bits |= entry(field_.substr(begin, end - begin));
      begin = end + 1;
    }
    return bits;
  }

 private:
  [[noreturn]] void refuse(const std::string& why) const {
    throw InvalidArgument(fmt::format("cron field {}: {} in {}", spec_.name, why, shown(expr_)));
  }

  // `*`, `v`, `a-b`, `*/n` or `a-b/n`.
  std::uint64_t entry(std::string_view entry) const {
    if (entry.empty()) refuse(fmt::format("{} has an empty list entry", shown(field_)));
    const std::size_t slash = entry.find('/');
    const std::string_view range = entry.substr(0, slash);
    int low = spec_.low;
    int high = spec_.high;
    if (range != "*") {
      const std::size_t dash = range.find('-');
      if (dash == std::string_view::npos) {
        if (slash != std::string_view::npos) {
          refuse(fmt::format("{} has a step after a single value (write * or a range before /)",
                             shown(entry)));
        }
        low = high = value(range, entry);
      } else {
        low = value(range.substr(0, dash), entry);
        high = value(range.substr(dash + 1), entry);
        if (low > high) {
          refuse(fmt::format("range {} is reversed (write the lower bound first)", shown(range)));
        }
      }
    }
    std::int64_t step = 1;
    if (slash != std::string_view::npos) {
      const std::string_view text = entry.substr(slash + 1);
      if (text.empty()) refuse(fmt::format("{} has no step after /", shown(entry)));
      if (!all_digits(text)) refuse(fmt::format("step {} is not a number", shown(text)));
      step = text.size() > 9 ? std::numeric_limits<std::int64_t>::max()
                             : std::stoll(std::string(text));
      if (step == 0) {
        refuse(fmt::format("{} has a step of 0 (a step must be 1 or more)", shown(entry)));
      }
      if (step > spec_.high - spec_.low + 1) {
        refuse(fmt::format("step {} is larger than the field's range {}-{}", text, spec_.low,
                           spec_.high));
      }
    }
    std::uint64_t bits = 0;
    for (std::int64_t v = low; v <= high; v += step) bits |= std::uint64_t{1} << v;
    return bits;
  }

  static bool all_digits(std::string_view text) {
    return !text.empty() &&
           std::all_of(text.begin(), text.end(), [](char c) { return is_digit(c); });
  }

  // A number or name, one end of a range; `entry` is what it is part of.
  int value(std::string_view text, std::string_view entry) const {
    if (text.empty()) refuse(fmt::format("{} has a range with an empty end", shown(entry)));
    if (all_digits(text)) {
      const std::int64_t v = text.size() > 9 ? std::numeric_limits<std::int64_t>::max()
                                             : std::stoll(std::string(text));
      if (v < spec_.low || v > spec_.high) {
        refuse(fmt::format("{} is out of range {}-{}", text, spec_.low, spec_.high));
      }
      return static_cast<int>(v);
    }
    for (std::size_t i = 0; i < spec_.names.size(); ++i) {
      if (equals_ignoring_case(text, spec_.names[i])) return static_cast<int>(i) + spec_.low;
    }
    refuse(fmt::format("{} is not {} ({}-{}{})", shown(text), spec_.noun, spec_.low, spec_.high,
                       spec_.names_hint));
  }

  const FieldSpec& spec_;
  std::string_view field_;
  std::string_view expr_;
};

template <std::size_t N>
std::bitset<N> low_bits(std::uint64_t bits) {
  return std::bitset<N>(bits & ((std::uint64_t{1} << N) - 1));
}

// ---- Finding fire times.

bool day_matches(const std::bitset<32>& days_of_month, const std::bitset<7>& days_of_week,
                 bool either, const CivilDate& date, int weekday) {
  const bool by_month = days_of_month[static_cast<std::size_t>(date.day)];
  const bool by_week = days_of_week[static_cast<std::size_t>(weekday)];
  return either ? (by_month || by_week) : (by_month && by_week);
}

template <std::size_t N>
int next_set(const std::bitset<N>& bits, int from) {
  for (int i = from; i < static_cast<int>(N); ++i) {
    if (bits[static_cast<std::size_t>(i)]) return i;
  }
  return static_cast<int>(N);
}

constexpr std::int64_t ceil_to_minute(std::int64_t seconds) {
  return floor_div(seconds + kMinute - 1, kMinute) * kMinute;
}

// The first local time in [from, bound) that the schedule's fields match, in
// seconds of local wall-clock time counted as if it were UTC; `from` is a
// whole minute. Steps a month, a day or an hour at a time.
std::optional<std::int64_t> first_match(const std::bitset<60>& minutes,
                                        const std::bitset<24>& hours,
                                        const std::bitset<32>& days_of_month,
                                        const std::bitset<13>& months,
                                        const std::bitset<7>& days_of_week, bool either_day,
                                        std::int64_t from, std::int64_t bound) {
  std::int64_t day = floor_div(from, kDay);
  const std::int64_t second_of_day = from - day * kDay;
  int hour = static_cast<int>(second_of_day / kHour);
  int minute = static_cast<int>(second_of_day % kHour / kMinute);
  for (; day * kDay < bound; ++day, hour = 0, minute = 0) {
    const CivilDate date = civil_from_days(day);
    if (!months[static_cast<std::size_t>(date.month)]) {
      // To the last day of this month: the loop steps to the next one's first.
      day = days_from_civil(date.year, date.month, days_in_month(date.year, date.month));
      continue;
    }
    if (!day_matches(days_of_month, days_of_week, either_day, date, weekday_of(day))) continue;
    for (int h = next_set(hours, hour); h < 24; h = next_set(hours, h + 1)) {
      const int m = next_set(minutes, h == hour ? minute : 0);
      if (m < 60) {
        const std::int64_t match = day * kDay + h * kHour + m * kMinute;
        if (match >= bound) return std::nullopt;
        return match;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

CronSchedule parse_cron(std::string_view expr, std::string_view zone) {
  const std::vector<std::string_view> words = split_fields(expr);
  if (words.empty()) throw InvalidArgument("cron expression is empty");
  CronSchedule schedule;
  std::string_view fields_text = expr;
  std::vector<std::string_view> fields = words;
  if (words[0].front() == '@') {
    const Shorthand* found = nullptr;
    for (const auto& shorthand : kShorthands) {
      if (equals_ignoring_case(words[0], shorthand.name)) found = &shorthand;
    }
    if (equals_ignoring_case(words[0], "@reboot")) {
      throw InvalidArgument(fmt::format(
          "cron: {} names no time (it fires when a daemon starts) and is not a schedule in {}",
          shown(words[0]), shown(expr)));
    }
    if (found == nullptr) {
      throw InvalidArgument(fmt::format(
          "cron: unknown shorthand {} in {} (known: @yearly @annually @monthly @weekly @daily "
          "@midnight @hourly)",
          shown(words[0]), shown(expr)));
    }
    if (words.size() > 1) {
      throw InvalidArgument(fmt::format("cron: {} takes no fields, but {} follows it in {}",
                                        shown(words[0]), shown(words[1]), shown(expr)));
    }
    schedule.text_ = std::string(words[0]);
    fields = split_fields(found->fields);
    fields_text = found->fields;
  } else {
    if (words.size() != kFields.size()) {
      throw InvalidArgument(fmt::format(
          "cron expression {} has {} field{}: it needs 5 (minute hour day-of-month month "
          "day-of-week) or a shorthand such as @daily",
          shown(expr), words.size(), words.size() == 1 ? "" : "s"));
    }
    for (const auto word : words) {
      if (!schedule.text_.empty()) schedule.text_ += ' ';
      schedule.text_ += word;
    }
  }

  std::array<std::uint64_t, 5> values{};
  for (std::size_t i = 0; i < kFields.size(); ++i) {
    values[i] = FieldParser(kFields[i], fields[i], fields_text).values();
  }
  std::uint64_t days_of_week = values[4];
  if ((days_of_week >> 7) & 1) days_of_week |= 1;  // 7 is Sunday, as 0 is
  schedule.minutes_ = low_bits<60>(values[0]);
  schedule.hours_ = low_bits<24>(values[1]);
  schedule.days_of_month_ = low_bits<32>(values[2]);
  schedule.months_ = low_bits<13>(values[3]);
  schedule.days_of_week_ = low_bits<7>(days_of_week);
  schedule.day_of_month_restricted_ = fields[2].front() != '*';
  schedule.day_of_week_restricted_ = fields[4].front() != '*';
  schedule.fixed_time_ = fields[0].front() != '*' && fields[1].front() != '*';

  if (zone.empty() || zone == "UTC") {
    schedule.zone_name_ = "UTC";
  } else {
    schedule.zone_ = load_zone(zone);
    schedule.zone_name_ = std::string(zone);
  }
  return schedule;
}

std::optional<Micros> next_fire(const CronSchedule& schedule, Micros after) {
  // Instants in whole seconds: every fire time is one (offsets are whole seconds).
  const std::int64_t first = floor_div(after, kMicrosPerSecond) + 1;
  const std::int64_t last = first - 1 + kHorizon;
  const bool either_day = schedule.day_of_month_restricted_ && schedule.day_of_week_restricted_;
  const auto match = [&](std::int64_t from, std::int64_t bound) {
    return first_match(schedule.minutes_, schedule.hours_, schedule.days_of_month_,
                       schedule.months_, schedule.days_of_week_, either_day, ceil_to_minute(from),
                       bound);
  };

  // The first fire in [begin, end), a stretch of one offset that `previous`
  // held before it.
  const auto fire_in = [&](std::int64_t begin, std::int64_t end, std::int32_t offset,
                           std::int32_t previous) -> std::optional<std::int64_t> {
    if (end <= first) return std::nullopt;
    if (schedule.fixed_time_ && begin >= first && offset > previous &&
        match(begin + previous, begin + offset)) {
      return begin;  // a fixed time in the gap fires as the clocks jump
    }
    std::int64_t local_from = std::max(first, begin) + offset;
    if (schedule.fixed_time_ && previous > offset) {
      local_from = std::max(local_from, begin + previous);  // the repeat already fired
    }
    if (const auto local = match(local_from, end + offset)) return *local - offset;
    return std::nullopt;
  };

  std::optional<std::int64_t> fire;
  if (!schedule.zone_) {
    fire = fire_in(first, last + 1, 0, 0);
  } else {
    const TimeZoneRules& zone = *schedule.zone_;
    std::int64_t begin = first - kRepeatLookback;
    std::int32_t offset = offset_at(zone, begin);
    std::int32_t previous = offset;
    for (const Shift& shift : shifts_between(zone, begin, last)) {
      fire = fire_in(begin, shift.at, offset, previous);
      if (fire) break;
      begin = shift.at;
      previous = shift.before;
      offset = shift.after;
    }
    if (!fire) fire = fire_in(begin, last + 1, offset, previous);
  }
  if (!fire || *fire > last || *fire > std::numeric_limits<Micros>::max() / kMicrosPerSecond) {
    return std::nullopt;
  }
  return *fire * kMicrosPerSecond;
}

std::string_view cron_text(const CronSchedule& schedule) { return schedule.text_; }

std::string_view cron_zone(const CronSchedule& schedule) { return schedule.zone_name_; }

}  // namespace cplane
