// Cron schedules: the crontab(5) grammar and day rule, every refusal, and
// local-time fire times across daylight-saving changes in real zones. The
// expected times are literal UTC seconds, worked out with `date -u -d` and
// their local readings checked with `TZ=ZONE date -d @SECONDS`.
#include <catch2/catch.hpp>

#include <ctime>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/errors.hpp>

#include "commands/cron.hpp"

namespace {

using namespace cplane;

constexpr Micros kSecond = 1'000'000;

constexpr Micros at(std::int64_t seconds) { return seconds * kSecond; }

// The next `count` fire times after `after`, in UTC seconds.
std::vector<std::int64_t> fires(const CronSchedule& schedule, Micros after, std::size_t count) {
  std::vector<std::int64_t> out;
  while (out.size() < count) {
    const auto next = next_fire(schedule, after);
    if (!next) break;
    REQUIRE(*next % kSecond == 0);
    out.push_back(*next / kSecond);
    after = *next;
  }
  return out;
}

struct FireCase {
  std::string_view expr;
  std::string_view zone;
  Micros after;
  std::vector<std::int64_t> expected;  // UTC seconds, in order
};

void check_cases(const std::vector<FireCase>& cases) {
  for (const auto& c : cases) {
    INFO("\"" << c.expr << "\" in \"" << c.zone << "\" after " << c.after / kSecond);
    const CronSchedule schedule = parse_cron(c.expr, c.zone);
    CHECK(fires(schedule, c.after, c.expected.size()) == c.expected);
  }
}

TEST_CASE("the crontab(5) examples fire at the times the manual means", "[cron]") {
  check_cases({
      // 5 past midnight every day.
      {"5 0 * * *", "", at(1768478400),  // 2026-01-15T12:00Z
       {1768521900, 1768608300}},        // 01-16T00:05Z, 01-17T00:05Z
      // 14:15 on the first of every month.
      {"15 14 1 * *", "", at(1768435200),          // 2026-01-15T00:00Z
       {1769955300, 1772374500, 1775052900}},     // 02-01, 03-01, 04-01 T14:15Z
      // 22:00 on weekdays; `after` is a fire time itself, which is not repeated.
      {"0 22 * * 1-5", "", at(1768600800),  // Fri 2026-01-16T22:00Z
       {1768860000, 1768946400, 1769032800, 1769119200, 1769205600, 1769464800}},
      // 23 minutes past every other hour from midnight, across the day's end.
      {"23 0-23/2 * * *", "", at(1768510800),  // 2026-01-15T21:00Z
       {1768515780, 1768522980, 1768530180}},  // 22:23Z, 01-16T00:23Z, 02:23Z
      // 04:05 on Sundays.
      {"5 4 * * sun", "", at(1768435200),  // Thu 2026-01-15
       {1768709100, 1769313900}},         // Sun 01-18, 01-25 T04:05Z
      // The OR rule: the 1st, the 15th and every Monday.
      {"0 0 1,15 * 1", "", at(1767225600),  // Thu 2026-01-01T00:00Z, itself a match
       {1767571200,                         // Mon 01-05
        1768176000,                         // Mon 01-12
        1768435200,                         // Thu 01-15
        1768780800,                         // Mon 01-19
        1769385600,                         // Mon 01-26
        1769904000,                         // Sun 02-01
        1769990400}},                       // Mon 02-02
      // Every quarter hour, from a time between them.
      {"*/15 * * * *", "", at(1768471650),  // 2026-01-15T10:07:30Z
       {1768472100, 1768473000, 1768473900, 1768474800}},
      // A microsecond before the hour fires on the hour.
      {"@hourly", "", at(1768474799) + 999'999,  // 2026-01-15T10:59:59.999999Z
       {1768474800, 1768478400}},                // 11:00Z, 12:00Z
      {"@weekly", "", at(1768435200),  // Thu 2026-01-15
       {1768694400, 1769299200}},     // Sun 01-18, 01-25 T00:00Z
  });
}

TEST_CASE("each shorthand means its five fields", "[cron]") {
  const Micros after = at(1768478400);  // 2026-01-15T12:00Z
  check_cases({
      {"@daily", "", after, {1768521600, 1768608000}},      // 01-16, 01-17
      {"@midnight", "", after, {1768521600, 1768608000}},
      {"@monthly", "", after, {1769904000, 1772323200}},    // 02-01, 03-01
      {"@yearly", "", after, {1798761600, 1830297600}},     // 2027-01-01, 2028-01-01
      {"@annually", "", after, {1798761600, 1830297600}},
      {"@hourly", "", after, {1768482000, 1768485600}},     // 13:00Z, 14:00Z
      {"@weekly", "", after, {1768694400}},
  });
}

TEST_CASE("month and day names work in any case: alone and in ranges and lists", "[cron]") {
  check_cases({
      // Mondays of January and July, from the last Monday of January.
      {"0 12 * jan,JUL Mon", "", at(1769432400),  // Mon 2026-01-26T13:00Z
       {1783339200, 1783944000}},                // Mon 07-06, 07-13 T12:00Z
      {"0 0 1 jun-Aug *", "", at(1768435200),
       {1780272000, 1782864000, 1785542400, 1811808000}},  // 06-01, 07-01, 08-01, 2027-06-01
      {"0 0 * * FRI-sat,Sun", "", at(1768435200),  // Thu 2026-01-15
       {1768521600, 1768608000, 1768694400, 1769126400}},  // Fri, Sat, Sun, next Fri
  });
}

TEST_CASE("day of week 7 is Sunday: as 0 is", "[cron]") {
  const std::vector<std::int64_t> sundays{1768709100, 1769313900};  // 01-18, 01-25 T04:05Z
  check_cases({
      {"5 4 * * 7", "", at(1768435200), sundays},
      {"5 4 * * 0", "", at(1768435200), sundays},
      {"5 4 * * SUN", "", at(1768435200), sundays},
      // A range ending at 7 reaches Sunday.
      {"0 0 * * 5-7", "", at(1768435200), {1768521600, 1768608000, 1768694400, 1769126400}},
  });
}

TEST_CASE("a day field starting with * makes both day fields must-match", "[cron]") {
  check_cases({
      // Odd days of the month that are Mondays; not odd days or Mondays.
      {"0 0 */2 * 1", "", at(1767225600),        // 2026-01-01
       {1767571200, 1768780800, 1770595200}},   // Mon 01-05, Mon 01-19, Mon 02-09
      // Every day, since day-of-week is *: dom alone decides.
      {"0 0 1 * *", "", at(1767225600), {1769904000, 1772323200}},
  });
}

TEST_CASE("a date that never comes gives no fire time", "[cron]") {
  for (const std::string_view expr : {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"}) {
    INFO(expr);
    CHECK_FALSE(next_fire(parse_cron(expr, ""), at(1767225600)).has_value());
  }
  // Feb 29 comes every four years, within the five-year horizon.
  check_cases({{"0 0 29 2 *", "", at(1767225600), {1835395200, 1961625600}}});  // 2028, 2032
}

TEST_CASE("times before 1970 and the epoch itself are fire times like any other", "[cron]") {
  check_cases({{"0 0 1 1 *", "", at(-18489600), {0}}});  // 1969-06-01 -> 1970-01-01T00:00Z
}

// UTC against a minute-by-minute scan with gmtime_r (no zone, no process
// state), so that the month/day/hour stepping misses and invents nothing.
TEST_CASE("stepping by month: day and hour finds what a minute-by-minute scan finds", "[cron]") {
  struct Oracle {
    std::string_view expr;
    std::function<bool(const std::tm&)> matches;
  };
  const std::vector<Oracle> oracles{
      {"*/7 3-5 * * *",
       [](const std::tm& t) { return t.tm_min % 7 == 0 && t.tm_hour >= 3 && t.tm_hour <= 5; }},
      {"0 12 1-7 * sun",  // the OR rule's surprise: the first week, and every Sunday
       [](const std::tm& t) {
         return t.tm_min == 0 && t.tm_hour == 12 && (t.tm_mday <= 7 || t.tm_wday == 0);
       }},
      {"30 23 */10 feb,mar,dec *",
       [](const std::tm& t) {
         return t.tm_min == 30 && t.tm_hour == 23 && t.tm_mday % 10 == 1 &&
                (t.tm_mon == 1 || t.tm_mon == 2 || t.tm_mon == 11);
       }},
      {"59 23 31 * *",
       [](const std::tm& t) { return t.tm_min == 59 && t.tm_hour == 23 && t.tm_mday == 31; }},
      {"0-5,58 0 * * 2-4",
       [](const std::tm& t) {
         return (t.tm_min <= 5 || t.tm_min == 58) && t.tm_hour == 0 && t.tm_wday >= 2 &&
                t.tm_wday <= 4;
       }},
  };
  const std::int64_t begin = 1767225600;             // 2026-01-01T00:00Z
  const std::int64_t end = begin + 120 * 24 * 3600;  // 120 days on
  for (const auto& oracle : oracles) {
    INFO(oracle.expr);
    std::vector<std::int64_t> scanned;
    for (std::int64_t t = begin; t < end; t += 60) {
      const std::time_t seconds = t;
      std::tm fields{};
      gmtime_r(&seconds, &fields);
      if (oracle.matches(fields)) scanned.push_back(t);
    }
    const CronSchedule schedule = parse_cron(oracle.expr, "");
    std::vector<std::int64_t> stepped;
    for (Micros after = at(begin - 1);;) {
      const auto next = next_fire(schedule, after);
      if (!next || *next >= at(end)) break;
      stepped.push_back(*next / kSecond);
      after = *next;
    }
    CHECK(stepped == scanned);
  }
}

TEST_CASE("America/New_York: the spring-forward gap and the fall-back repeat of 2026", "[cron]") {
  const std::string_view ny = "America/New_York";
  check_cases({
      // 02:30 does not exist on 03-08: a fixed time fires once, as the clocks jump (03:00 EDT).
      {"30 2 * * *", ny, at(1772798400),  // 2026-03-06T12:00Z
       {1772868600,                      // 03-07 02:30 EST (07:30Z)
        1772953200,                      // 03-08 03:00 EDT (07:00Z)
        1773037800}},                    // 03-09 02:30 EDT (06:30Z)
      // 02:30 shows once on 11-01 (01:00-02:00 is what repeats).
      {"30 2 * * *", ny, at(1793404800),  // 2026-10-31T00:00Z
       {1793428200, 1793518200, 1793604600}},  // 10-31 02:30 EDT, 11-01 02:30 EST, 11-02 02:30 EST
      // A wildcard job skips the hour that does not exist...
      {"0 * * * *", ny, at(1772947800),       // 03-08 00:30 EST
       {1772949600, 1772953200, 1772956800}},  // 01:00 EST, 03:00 EDT, 04:00 EDT
      // ... and fires in both passes of the hour that repeats.
      {"0 * * * *", ny, at(1793507400),                   // 11-01 00:30 EDT
       {1793509200, 1793512800, 1793516400, 1793520000}},  // 01:00 EDT, 01:00 EST, 02:00, 03:00 EST
      // 01:30 is before the gap: nothing moves.
      {"30 1 * * *", ny, at(1772841600),       // 2026-03-07T00:00Z
       {1772865000, 1772951400, 1773034200}},  // 03-07 01:30 EST, 03-08 01:30 EST, 03-09 01:30 EDT
      // 01:30 shows twice on 11-01: a fixed time fires at the first only.
      {"30 1 * * *", ny, at(1793404800),       // 2026-10-31T00:00Z
       {1793424600, 1793511000, 1793601000}},  // 10-31 01:30 EDT, 11-01 01:30 EDT, 11-02 01:30 EST
      // A wildcard minute fires in both passes.
      {"*/30 1 * * *", ny, at(1793505600),  // 11-01 00:00 EDT
       {1793509200, 1793511000,             // 01:00, 01:30 EDT
        1793512800, 1793514600,             // 01:00, 01:30 EST
        1793599200}},                       // 11-02 01:00 EST
      // A wildcard minute in the missing hour is skipped.
      {"*/30 2 * * *", ny, at(1772884800),  // 2026-03-07T12:00Z
       {1773036000, 1773037800}},           // 03-09 02:00, 02:30 EDT
      // Two fixed times in one gap fire once between them.
      // 03-08 03:00 EDT, 03-09 02:00 EDT.
      {"0,30 2 * * *", ny, at(1772884800), {1772953200, 1773036000}},
      // 03:00 exists: an ordinary fire, not a doubled one.
      {"0 3 * * *", ny, at(1772884800), {1772953200, 1773039600}},
      // Asked from inside the second pass: the fixed 01:30 already fired in the first.
      {"30 1 * * *", ny, at(1793513400), {1793601000}},    // 11-01 01:10 EST: 11-02 01:30 EST
      {"*/30 1 * * *", ny, at(1793513400), {1793514600}},  // from 01:10 EST to 01:30 EST
      // Noon is 16:00Z in summer and 17:00Z in winter.
      {"0 12 * * *", ny, at(1782864000), {1782921600}},  // 2026-07-01T16:00Z
      {"0 12 * * *", ny, at(1767225600), {1767286800}},  // 2026-01-01T17:00Z
  });
}

TEST_CASE("after the zone file's last transition the footer's rule gives the offsets", "[cron]") {
  // A "fat" TZif file lists transitions up to 2037: 2040 comes from its footer's POSIX TZ
  // string (in a "slim" file, so does 2026).
  check_cases({
      {"30 2 * * *", "America/New_York", at(2214993600),  // 2040-03-10T12:00Z
       {2215062000, 2215146600}},                        // 03-11 03:00 EDT, 03-12 02:30 EDT
      {"0 * * * *", "America/New_York", at(2235616200),  // 2040-11-04 00:30 EDT
       {2235618000, 2235621600, 2235625200}},           // 01:00 EDT, 01:00 EST, 02:00 EST
      {"30 2 * * *", "Europe/Berlin", at(2216203200),  // 2040-03-24T12:00Z
       {2216250000, 2216334600}},                     // 03-25 03:00 CEST, 03-26 02:30 CEST
      {"15 2 * * *", "Australia/Lord_Howe", at(2233094400),  // 2040-10-06T00:00Z
       {2233150200, 2233235700}},  // 10-07 02:30 +11 (the gap), 10-08 02:15 +11
  });
}

TEST_CASE("Europe/Berlin: the gap and the repeat of 2026", "[cron]") {
  const std::string_view berlin = "Europe/Berlin";
  check_cases({
      {"30 2 * * *", berlin, at(1774699200),  // 2026-03-28T12:00Z
       {1774746000, 1774830600}},            // 03-29 03:00 CEST (the gap), 03-30 02:30 CEST
      {"30 2 * * *", berlin, at(1792843200),  // 2026-10-24T12:00Z
       {1792888200, 1792978200}},            // 10-25 02:30 CEST (first), 10-26 02:30 CET
      {"*/30 2 * * *", berlin, at(1792843200),
       {1792886400, 1792888200,   // 02:00, 02:30 CEST
        1792890000, 1792891800,   // 02:00, 02:30 CET
        1792976400}},             // 10-26 02:00 CET
  });
}

TEST_CASE("Australia/Lord_Howe: a half-hour daylight saving change", "[cron]") {
  const std::string_view lord_howe = "Australia/Lord_Howe";
  check_cases({
      // 02:00 +10:30 -> 02:30 +11 on 2026-10-04: 02:15 fires at 02:30.
      {"15 2 * * *", lord_howe, at(1790985600),  // 2026-10-03T00:00Z
       {1791041400, 1791126900}},               // 10-04 02:30 +11, 10-05 02:15 +11
      // 02:00 +11 -> 01:30 +10:30 on 2026-04-05: 01:45 shows twice.
      {"45 1 * * *", lord_howe, at(1775260800),  // 2026-04-04T00:00Z
       {1775313900, 1775402100}},               // 04-05 01:45 +11 (first), 04-06 01:45 +10:30
      {"*/15 1 * * *", lord_howe, at(1775307600),  // 04-05 00:00 +11
       {1775311200, 1775312100, 1775313000, 1775313900,  // 01:00 .. 01:45 +11
        1775314800, 1775315700,                          // 01:30, 01:45 +10:30
        1775399400}},                                    // 04-06 01:00 +10:30
  });
}

TEST_CASE("zones with a half-hour offset or a negative daylight saving", "[cron]") {
  check_cases({
      {"0 9 * * *", "Asia/Kolkata", at(1768435200), {1768447800, 1768534200}},  // 03:30Z
      {"30 23 * * *", "Asia/Kolkata", at(1768435200), {1768500000}},            // 18:00Z
      {"0 0 1 * *", "Asia/Kolkata", at(1768435200), {1769884200}},  // 02-01 00:00 IST
      // Dublin's winter time is its "daylight saving" (IST is standard); 01:30 is in the gap.
      {"30 1 * * *", "Europe/Dublin", at(1774699200), {1774746000, 1774830600}},
  });
}

TEST_CASE("the empty zone: UTC and Etc/UTC are all UTC", "[cron]") {
  for (const std::string_view zone : {"", "UTC", "Etc/UTC"}) {
    INFO(zone);
    CHECK(next_fire(parse_cron("5 0 * * *", zone), at(1768478400)) == at(1768521900));
  }
  CHECK(cron_zone(parse_cron("* * * * *", "")) == "UTC");
  CHECK(cron_zone(parse_cron("* * * * *", "UTC")) == "UTC");
  CHECK(cron_zone(parse_cron("* * * * *", "Europe/Berlin")) == "Europe/Berlin");
}

TEST_CASE("the text is kept normalised: fields single-spaced: a shorthand as written", "[cron]") {
  CHECK(cron_text(parse_cron("  5 \t 0  * *\t* ", "")) == "5 0 * * *");
  CHECK(cron_text(parse_cron("@Daily", "")) == "@Daily");
  CHECK(cron_text(parse_cron(" @hourly ", "")) == "@hourly");
  CHECK(cron_text(parse_cron("0 0 1,15 * MON", "")) == "0 0 1,15 * MON");
}

TEST_CASE("a schedule is a value: a copy outlives the original", "[cron]") {
  std::optional<CronSchedule> copy;
  {
    const CronSchedule original = parse_cron("30 2 * * *", "America/New_York");
    copy = original;
  }
  CHECK(next_fire(*copy, at(1772884800)) == at(1772953200));
  CHECK(cron_text(*copy) == "30 2 * * *");
  CHECK(cron_zone(*copy) == "America/New_York");
}

TEST_CASE("walking many fire times stays in order and skips none", "[cron]") {
  // Every five minutes through a whole year in New York: 105120 local slots,
  // less the 12 of the missing hour, plus the 12 of the repeated one.
  const CronSchedule schedule = parse_cron("*/5 * * * *", "America/New_York");
  const Micros begin = at(1767243600);  // 2026-01-01 00:00 EST (05:00Z)
  const Micros end = at(1798779600);    // 2027-01-01 00:00 EST
  std::size_t count = 0;
  Micros previous = begin - 1;
  for (auto next = next_fire(schedule, previous); next && *next < end;
       next = next_fire(schedule, *next)) {
    REQUIRE(*next > previous);
    previous = *next;
    ++count;
  }
  CHECK(count == 365 * 24 * 12);
}

struct RefusalCase {
  std::string_view expr;
  std::string_view message;  // a part of what() that must be there
};

TEST_CASE("an expression that is not one is refused: naming the field and the text", "[cron]") {
  const std::vector<RefusalCase> cases{
      {"61 * * * *", "cron field minute: 61 is out of range 0-59 in \"61 * * * *\""},
      {"* 24 * * *", "cron field hour: 24 is out of range 0-23 in \"* 24 * * *\""},
      {"* * 0 * *", "cron field day-of-month: 0 is out of range 1-31"},
      {"* * 32 * *", "cron field day-of-month: 32 is out of range 1-31"},
      {"* * * 13 *", "cron field month: 13 is out of range 1-12"},
      {"* * * 0 *", "cron field month: 0 is out of range 1-12"},
      {"* * * * 8", "cron field day-of-week: 8 is out of range 0-7"},
      {"99999999999 * * * *", "cron field minute: 99999999999 is out of range 0-59"},
      {"*/0 * * * *", "cron field minute: \"*/0\" has a step of 0"},
      {"0 1-5/0 * * *", "cron field hour: \"1-5/0\" has a step of 0"},
      {"*/61 * * * *", "cron field minute: step 61 is larger than the field's range 0-59"},
      {"5-1 * * * *", "cron field minute: range \"5-1\" is reversed"},
      {"* * * dec-jan *", "cron field month: range \"dec-jan\" is reversed"},
      // sun is 0: a range to Sunday is written to 7.
      {"* * * * fri-sun", "cron field day-of-week: range \"fri-sun\" is reversed"},
      {"1,,2 * * * *", "cron field minute: \"1,,2\" has an empty list entry"},
      {"1, * * * *", "cron field minute: \"1,\" has an empty list entry"},
      {",1 * * * *", "cron field minute: \",1\" has an empty list entry"},
      {"1- * * * *", "cron field minute: \"1-\" has a range with an empty end"},
      {"-1 * * * *", "cron field minute: \"-1\" has a range with an empty end"},
      {"*/ * * * *", "cron field minute: \"*/\" has no step after /"},
      {"*/x * * * *", "cron field minute: step \"x\" is not a number"},
      {"5/10 * * * *", "cron field minute: \"5/10\" has a step after a single value"},
      {"5x * * * *", "cron field minute: \"5x\" is not a minute (0-59)"},
      {"mon * * * *", "cron field minute: \"mon\" is not a minute (0-59)"},
      {"* 1x * * *", "cron field hour: \"1x\" is not an hour (0-23)"},
      {"* * L * *", "cron field day-of-month: \"L\" is not a day of the month (1-31)"},
      {"* * * foo *", "cron field month: \"foo\" is not a month (1-12 or jan..dec)"},
      {"* * * * mon-foo",
       "cron field day-of-week: \"foo\" is not a day of the week (0-7 or sun..sat)"},
      {"* * * * monday", "cron field day-of-week: \"monday\" is not a day of the week"},
      {"* * * *", "cron expression \"* * * *\" has 4 fields: it needs 5"},
      {"* * * * * *", "has 6 fields: it needs 5"},
      {"* * * * * /bin/true", "has 6 fields: it needs 5"},
      {"5", "has 1 field: it needs 5"},
      {"", "cron expression is empty"},
      {" \t ", "cron expression is empty"},
      {"@reboot", "\"@reboot\" names no time"},
      {"@REBOOT", "\"@REBOOT\" names no time"},
      {"@fortnightly", "cron: unknown shorthand \"@fortnightly\""},
      {"@daily *", "cron: \"@daily\" takes no fields, but \"*\" follows it"},
      {"* * * * *\n", "cron field day-of-week: \"*\\n\""},
  };
  for (const auto& c : cases) {
    INFO("expression: " << c.expr);
    try {
      parse_cron(c.expr, "");
      FAIL("accepted");
    } catch (const InvalidArgument& error) {
      CHECK(error.reason() == InvalidArgument::Reason::invalid_input);
      CHECK_THAT(error.what(), Catch::Contains(std::string(c.message)));
    }
  }
}

TEST_CASE("a zone not in the tz database: or not a zone name: is refused naming it", "[cron]") {
  const std::vector<RefusalCase> cases{
      {"Mars/Olympus", "unknown time zone \"Mars/Olympus\""},
      {"America", "unknown time zone \"America\""},  // a directory
      {"../../etc/passwd", "time zone \"../../etc/passwd\" is not a zone name: \"..\""},
      {"America/../../../etc/passwd", "is not a zone name: \"..\" components are not allowed"},
      {"/etc/localtime",
       "time zone \"/etc/localtime\" is not a zone name: it must not start with \"/\""},
      {"America//New_York", "is not a zone name: it has an empty component"},
      {"America/New_York/", "is not a zone name: it has an empty component"},
      {"America/New York", "is not a zone name: only letters, digits and _ + - / are allowed"},
      {"zone.tab", "time zone \"zone.tab\" is not a zone name"},
  };
  for (const auto& c : cases) {
    INFO("zone: " << c.expr);
    try {
      parse_cron("* * * * *", c.expr);
      FAIL("accepted");
    } catch (const InvalidArgument& error) {
      CHECK(error.reason() == InvalidArgument::Reason::invalid_input);
      CHECK_THAT(error.what(), Catch::Contains(std::string(c.message)));
    }
  }
}

TEST_CASE("a file in the zone directory that is not a zone: or counts leap seconds: is refused",
          "[cron]") {
  // Both files ship with Debian's tzdata; where one is missing, it is an unknown zone.
  const std::vector<RefusalCase> cases{
      {"leapseconds",
       "time zone \"leapseconds\": /usr/share/zoneinfo/leapseconds is not a valid TZif file"},
      {"right/UTC", "time zone \"right/UTC\": /usr/share/zoneinfo/right/UTC is not a valid TZif "
                    "file (it counts leap seconds"},
  };
  for (const auto& c : cases) {
    INFO("zone: " << c.expr);
    const bool present =
        std::filesystem::exists(std::filesystem::path("/usr/share/zoneinfo") / c.expr);
    try {
      parse_cron("* * * * *", c.expr);
      FAIL("accepted");
    } catch (const InvalidArgument& error) {
      const std::string expected =
          present ? std::string(c.message) : "unknown time zone \"" + std::string(c.expr) + "\"";
      CHECK_THAT(error.what(), Catch::Contains(expected));
    }
  }
}

}  // namespace
