// The projected rows: what commands read to decide and queries answer from.
// Each is a cache of the fold of its stream of events (see apply.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cplane/events.hpp>

namespace cplane {

// closed: the forge closed the item (merged or closed): terminal, like done
// and failed, but the world's fact rather than a worker's report.
// scheduled: waiting until run_at (a delay, or a retry's backoff), then
// claimable. cancelled: a person ended it; terminal.
enum class ItemStatus { ready, claimed, done, failed, closed, scheduled, cancelled };
inline constexpr std::size_t kItemStatuses = 7;

std::string_view to_string(ItemStatus status);
std::optional<ItemStatus> parse_item_status(std::string_view text);
inline bool is_terminal(ItemStatus s) {
  return s == ItemStatus::done || s == ItemStatus::failed || s == ItemStatus::closed ||
         s == ItemStatus::cancelled;
}

struct ItemRow {
  std::string item_id;
  std::string project_id;
  std::string payload;            // JSON text
  ItemStatus status = ItemStatus::ready;
  std::string owner;              // "" until first claimed; kept after finish
  Fence fence = 0;                // 0 until first claimed
  std::uint32_t attempts = 0;     // number of claims
  Micros lease_expires_at = 0;    // 0 unless claimed
  std::string detail;             // the finish detail, "" otherwise
  Seq queued_seq = 0;             // seq of the queued event: claim order
  Micros queued_at = 0;
  Micros updated_at = 0;          // `at` of the last event applied
  Seq last_seq = 0;               // seq of the last event applied
  // What the forge knows (kind, ref; a pr's head, review and author).
  WorkKind kind = WorkKind::task;
  std::string ref;
  std::string head;               // the head as last observed
  ReviewState review = ReviewState::none;
  std::string author;
  // The assignment (assign_and_lease): the session holding it, the actions
  // it may take and the head pinned when it was assigned. Kept once the
  // item is terminal, so that its holder is told work_terminal; cleared by
  // a release and by a plain claim.
  std::string session;
  std::vector<std::string> actions;  // sorted, no duplicates
  std::string expected_head;
  // The head moved after the assignment pinned it, even if it moved back
  // since (R4: the gate says head_drift until the item is assigned again).
  bool head_moved = false;
  std::string close_reason;       // "merged" or "closed" once closed, else ""
  std::int32_t priority = 0;      // the allocator's: higher first
  // On the terminal path since this time (0: not on it), and why. Closing
  // or finishing the item takes it off.
  Micros terminal_since = 0;
  std::string terminal_reason;
  std::string key;                // the enqueue's idempotency key, or ""
  // The retry policy (queued with it): at most max_attempts attempts (0: no
  // policy), `backoff` between them. attempt_limit is the attempts count at
  // which it stops (0: never): max_attempts when queued, raised by a retry.
  std::uint32_t max_attempts = 0;
  std::string backoff;
  std::uint32_t attempt_limit = 0;
  // While scheduled: the time it becomes claimable (run_at or retry_at); 0 otherwise.
  Micros run_at = 0;
  // The fence of the last attempt the lifecycle ended (attempt_failed, or a
  // failed item retried), until the next claim: a late report under it is
  // stale_fence, where one after a release is not_claimed.
  Fence ended_fence = 0;
  // Its concurrency key (enqueue --concurrency-key), or "": the key's limit
  // (LimitRow) bounds its claims.
  std::string concurrency_key;
  bool operator==(const ItemRow&) const = default;
};

// The terminal path's index: one row per open item on it (terminal_locks),
// the projection of its item's stream.
struct TerminalLockRow {
  std::string item_id;
  Micros since = 0;
  std::string reason;
  bool operator==(const TerminalLockRow&) const = default;
};

// The lock row an item's row implies, if it is on the terminal path.
inline std::optional<TerminalLockRow> terminal_lock_of(const ItemRow& row) {
  if (row.terminal_since == 0) return std::nullopt;
  return TerminalLockRow{row.item_id, row.terminal_since, row.terminal_reason};
}

// A row of an older control plane's incident_links table, as read (with
// NULL told apart from '' by the column's type): migrate-incidents' input.
struct LegacyIncidentRow {
  std::int64_t rowid = 0;
  std::string provider, fingerprint;
  std::optional<std::string> org, repo, environment;
  std::string target;
  std::optional<std::string> status;
  std::optional<std::int64_t> event_count;
  std::optional<std::string> permalink, first_seen, last_seen, linked_prs;
};

// A monitoring incident's link to the forge issue that tracks it
// (incident_links): the fold of the incident's stream.
struct IncidentLinkRow {
  std::string incident_id;  // the stream id: incident_stream_id(key)
  std::string provider, fingerprint, org, repo, environment;  // the key; "" when absent
  std::string target;
  std::optional<std::string> status;
  std::optional<std::int64_t> event_count;
  std::optional<std::string> permalink;
  std::optional<std::string> first_seen;
  std::optional<std::string> last_seen;
  std::optional<std::string> linked_prs;  // joined by commas
  Micros linked_at = 0;   // the first incident_linked
  Micros updated_at = 0;  // the last
  Seq last_seq = 0;
  bool operator==(const IncidentLinkRow&) const = default;
};

// One session: an agent at work. Its leases are the items whose `session`
// is its id.
struct SessionRow {
  std::string session_id;
  std::string actor;              // its scope; "" for the control plane's
  Micros opened_at = 0;
  Micros last_seen_at = 0;        // the last session event (open, heartbeat, close)
  Micros closed_at = 0;           // 0 while open
  Seq last_seq = 0;
  bool is_open() const { return closed_at == 0; }
  bool operator==(const SessionRow&) const = default;
};

struct ProjectRow {
  std::string project_id;
  std::string title;
  std::string status;
  Micros created_at = 0;
  Seq last_seq = 0;
  // The retry policy of items queued from now on (0: none), and whether
  // claims pass over its items (project pause / resume).
  std::uint32_t max_attempts = 0;
  std::string backoff;
  bool paused = false;
  std::string pause_reason;
  // Its share of the claims that choose among several projects (project
  // set --weight, at least 1), and its pass in the weighted round-robin:
  // the claim takes the project with the lowest pass, which then rises by
  // kFairStride / weight (the fair_pass its claimed event records).
  std::uint32_t weight = 1;
  std::int64_t fair_pass = 0;
  bool operator==(const ProjectRow&) const = default;
};

// One stride of the fair-share round-robin at weight 1.
inline constexpr std::int64_t kFairStride = 1'000'000;
inline constexpr std::uint32_t kMaxWeight = 1000;

// A concurrency key's limit (limits): the fold of the key's stream, and its
// rate state, the GCRA's theoretical arrival time, moved on by each claim
// of an item with the key (the claimed or assigned event names the key).
// A removed limit keeps its row (removed): it bounds nothing.
struct LimitRow {
  std::string key;
  std::uint32_t concurrency = 0;  // live leases at most; 0: no bound
  std::uint32_t rate_count = 0;   // claims per rate_period; 0: no rate
  Micros rate_period = 0;
  std::uint32_t burst = 0;
  Micros tat = 0;                 // the rate's theoretical arrival time; 0: none yet
  bool removed = false;
  Micros created_at = 0;
  Micros updated_at = 0;          // the last limit_set or limit_removed
  Seq last_seq = 0;               // of the key's own stream
  bool operator==(const LimitRow&) const = default;
};

// One archive segment (segments): the fold of its stream, segment_archived
// (or, in a store archived before archives were events, the record written
// with its anchors).
struct SegmentRow {
  std::string segment_id;
  std::string digest;        // BLAKE2b-256 of the file, 32 bytes
  std::string file;          // the absolute path it was written to
  Micros before = 0;
  std::string project_id;    // the project archived; "" every project
  std::int64_t streams = 0;
  std::int64_t events = 0;
  std::int64_t bytes = 0;    // -1: unknown (recorded again by a restore)
  Micros archived_at = 0;
  bool operator==(const SegmentRow&) const = default;
};

// The longest concurrency key, in bytes.
inline constexpr std::size_t kMaxConcurrencyKey = 256;

// A cron schedule (schedules): the fold of its stream. A removed schedule
// keeps its row (removed), so that its name is not reused.
struct ScheduleRow {
  std::string name;
  std::string project_id;
  std::string cron;
  std::string zone;
  std::string payload;
  bool overlap_skip = false;
  std::int64_t catch_up = 0;  // 0: the latest only; -1: all; N: the last N
  Micros next_at = 0;         // the next occurrence to fire
  bool paused = false;
  bool removed = false;
  std::string last_item;      // the item its last fire queued, or ""
  Micros last_occurrence = 0; // the last occurrence fired or skipped
  std::int64_t fired = 0;     // how many items it made
  Micros created_at = 0;
  Micros updated_at = 0;
  Seq last_seq = 0;
  bool active() const { return !paused && !removed; }
  bool operator==(const ScheduleRow&) const = default;
};

// The idempotency key of the item a schedule's occurrence makes: one item
// per (schedule, occurrence), whoever fires it.
inline std::string schedule_item_key(std::string_view name, Micros occurrence) {
  return "schedule:" + std::string(name) + "@" + std::to_string(occurrence);
}

struct ProjectActorRow {
  std::string project_id;
  std::string actor;
  Micros assigned_at = 0;
  Seq last_seq = 0;
  bool operator==(const ProjectActorRow&) const = default;
};

}  // namespace cplane
