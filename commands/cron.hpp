// Cron schedules: when a recurring job is next due, from a five-field cron
// expression read as crontab(5) reads it, in a zone of the system's tz
// database. Pure: no clock is read and no process state is touched (no TZ,
// no tzset, no localtime); the zone's rules are read from its TZif file once,
// by parse_cron, and kept in the schedule.
//
// The expression: `minute hour day-of-month month day-of-week`, separated by
// spaces or tabs. Each field is `*` or a comma-separated list of values
// (`5`), ranges (`1-5`) and steps (`*/15`, `0-23/2`); month and day-of-week
// values may be names (jan..dec, sun..sat, any case), in ranges too
// (`mon-fri`). Day-of-week runs 0-7, where 0 and 7 are both Sunday. A step
// needs `*` or a range before it (`5/10` is refused), and may not exceed the
// field's span. The shorthands @yearly (= @annually) `0 0 1 1 *`, @monthly
// `0 0 1 * *`, @weekly `0 0 * * 0`, @daily (= @midnight) `0 0 * * *` and
// @hourly `0 * * * *` stand alone; @reboot names no time and is refused.
//
// The day rule of crontab(5): when both day-of-month and day-of-week are
// restricted (neither field starts with `*`), a day matches when either one
// matches (`0 0 1,15 * 1`: the 1st, the 15th and every Monday); otherwise
// both must match (`0 0 */2 * 1`: odd-numbered days that are Mondays).
//
// Time zones and daylight saving. The fields match LOCAL wall-clock time in
// the schedule's zone; a fire time is an instant at which that clock shows a
// whole minute (hh:mm:00). A job is fixed-time when neither its minute nor
// its hour field starts with `*` (`30 2 * * *`, `0 9-17 * * *`, @daily,
// @weekly), and a wildcard job otherwise (`*/15 * * * *`, `0 * * * *`,
// `15 */2 * * *`, @hourly), as Vixie cron tells them apart.
// * Clocks going forward (a gap, say 02:00 -> 03:00): the local times in the
//   gap never show. A wildcard job skips them. A fixed-time job that matches
//   one or more local times in the gap fires once, at the instant the clocks
//   jumped (03:00 local, the first instant after the gap), however many of
//   its times fell in the gap; if that instant matches too, it is still one
//   fire.
// * Clocks going back (a repeat, say 02:00 -> 01:00): the local times from
//   01:00 to 02:00 show twice. A wildcard job fires at every matching time
//   in both passes. A fixed-time job fires only at the first occurrence: from
//   the instant the clocks went back, it fires nothing until the wall clock
//   again reaches the time it showed when they went back (02:00).
// These rules hold for every change of UTC offset in the zone's data, not
// only for daylight saving; a repeat is recognised for 48 hours after the
// change (every real change is far shorter).
//
// The zone: "" and "UTC" are UTC, with no file. Any other name is read from
// /usr/share/zoneinfo/NAME: it must consist of letters, digits and `_ + - /`,
// with no empty or `..` component and no leading `/`. The file's transitions
// (its 64-bit section, or the 32-bit one of a version 1 file) give the
// offsets up to the last transition; after it, the POSIX TZ rule of the
// file's footer (`STDoffset[DST[offset],start[/time],end[/time]]` with Mm.w.d,
// Jn or n dates); when the footer is absent or cannot be read, the offset of
// the last transition holds forever. Files that count leap seconds (right/)
// are refused.
#pragma once

#include <bitset>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <cplane/events.hpp>

namespace cplane {

// A zone's UTC offsets over time, as read from its TZif file (cron.cpp).
struct TimeZoneRules;

struct CronSchedule;

// Parses `expr` to be read in `zone` ("" or "UTC" for UTC). Throws
// InvalidArgument (invalid_input) for an expression that is not one (wrong
// number of fields, an empty field or list entry, a value out of its field's
// range, a reversed range, a step of 0, trailing junk, an unknown shorthand,
// @reboot), naming the field and the text, e.g. `cron field minute: 61 is out
// of range 0-59 in "61 * * * *"`; and for a zone that is not a zone name, is
// not in the tz database (`unknown time zone "Mars/Olympus"`), cannot be read
// or is not a valid TZif file, naming the zone. Reads the zone's file; safe
// to call from many threads at once.
CronSchedule parse_cron(std::string_view expr, std::string_view zone);

// The first fire time strictly after `after` (microseconds since the Unix
// epoch, UTC), by the rules above; nullopt when there is none within
// 5 x 366 days after `after` (`0 0 30 2 *` never fires). Pure and
// deterministic: the same schedule and `after` give the same answer, and
// calling it again with each answer walks the fire times in order, each
// once. Steps by month, day and hour, never minute by minute across days.
std::optional<Micros> next_fire(const CronSchedule& schedule, Micros after);

// The expression as parsed, normalised: fields single-spaced with no spaces
// around them, a shorthand kept as written. Valid while `schedule` lives.
std::string_view cron_text(const CronSchedule& schedule);
// The zone's name as given, except that "" is "UTC". Valid while `schedule` lives.
std::string_view cron_zone(const CronSchedule& schedule);

// A parsed expression and the zone it is read in: a copyable value, made only
// by parse_cron. Copies share the zone's rules, which never change; every
// function above may be called on one schedule from many threads at once.
struct CronSchedule {
 private:
  CronSchedule() = default;

  friend CronSchedule parse_cron(std::string_view expr, std::string_view zone);
  friend std::optional<Micros> next_fire(const CronSchedule& schedule, Micros after);
  friend std::string_view cron_text(const CronSchedule& schedule);
  friend std::string_view cron_zone(const CronSchedule& schedule);

  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_of_month_;         // bits 1-31
  std::bitset<13> months_;                // bits 1-12
  std::bitset<7> days_of_week_;           // bit 0 is Sunday
  bool day_of_month_restricted_ = false;  // the field does not start with `*`
  bool day_of_week_restricted_ = false;
  bool fixed_time_ = false;  // neither minute nor hour starts with `*`
  std::string text_;
  std::string zone_name_;
  std::shared_ptr<const TimeZoneRules> zone_;  // null: UTC
};

}  // namespace cplane
