// The public store API. Each command is one write transaction that reads the
// projected rows, decides which events follow, appends them and folds them
// into the rows. A refusal appends nothing and changes nothing.
//
// Errors: FenceRejected, ScopeDenied, InvalidArgument and NotFound are
// refusals (<cplane/errors.hpp>), each with a reason() to branch on;
// StorageError's category says whether to retry. Where a call below names no
// InvalidArgument reason, it is invalid_input.
//
// Thread-safety: a ControlStore is one database connection; use one per
// thread or process. A call made while another thread is inside a call on
// the same store throws InvalidArgument, misuse (nothing is done). Any number of
// stores, in any number of processes, may share one database file.
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <cstdint>
#include <limits>
#include <string_view>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cplane/errors.hpp>
#include <cplane/events.hpp>
#include <cplane/ledger.hpp>
#include <cplane/rows.hpp>
#include <cplane/sqlite_options.hpp>
#include <cplane/verdict.hpp>

namespace cplane {

// Which commits wait for the disk (SQLite `synchronous`). Every level
// survives a crash of the process; they differ on a power loss or OS crash.
enum class Durability {
  // Every commit is FULL. The slowest and the strictest.
  full,
  // The default. Commits that hand out or create something (claim, enqueue,
  // create_project, assign) are FULL: a worker never learns a fence, nor a
  // producer an item id, that a power loss could take back. A finish is
  // NORMAL: if a power loss drops it, the item's lease lapses and the work
  // runs again under a higher fence; nothing is lost, nothing is fenced twice.
  fenced,
  // Every commit is NORMAL. Fastest. A power loss can drop the last claims,
  // so the same fence may be handed out twice after restart: only for data
  // you can afford to redo under a broken fence guarantee.
  normal,
};

std::string_view to_string(Durability durability);
// "full", "fenced" or "normal"; anything else throws InvalidArgument.
Durability parse_durability(std::string_view text);

using Seconds = std::chrono::duration<double>;

struct StoreOptions {
  Seconds lease{900.0};  // the lease a claim gets unless it asks for another
  Durability durability = Durability::fenced;
  // How long a write waits for the write lock before StorageError(busy),
  // whose message names the holder's pid (and says if it is stopped).
  std::chrono::milliseconds lock_timeout{30'000};
  bool create = true;  // create the database if missing or empty (off for rebuild)
  // Read only: no lock, nothing created, migrated or written; never waits
  // for a writer. Write commands then throw InvalidArgument (read_only).
  bool read_only = false;
  SqliteOptions sqlite;  // SQLite's own knobs (<cplane/sqlite_options.hpp>)
};

// The longest lease, and the latest explicit clock, a command accepts.
inline constexpr double kMaxLeaseSeconds = 10.0 * 365 * 24 * 3600;  // ten years
inline constexpr Micros kMaxNow = std::numeric_limits<Micros>::max() / 2;

// The input checks commands make before they touch the database, for callers
// (the CLI) that refuse bad input before they open a store. Each throws
// InvalidArgument with a sentence, or returns the value in microseconds.
Micros require_lease(Seconds lease);   // positive, finite, at most kMaxLeaseSeconds
Micros require_now(Micros now);        // 1 ..= kMaxNow
void require_payload(std::string_view payload_json);  // JSON, at most 1 MiB
void require_outcome(Outcome outcome);  // done or failed
// Ids, owners and actors: printable UTF-8 of 1 to kMaxNameBytes bytes, no
// control characters (C0, DEL, C1). Throws InvalidArgument naming `what` and
// quoting the text cut to 80 characters.
inline constexpr std::size_t kMaxNameBytes = 256;
void require_name(std::string_view text, const char* what);
// A duration as people write it: a positive whole number and a unit, ms, s,
// m, h or d ("500ms", "30s", "10m", "2h"), at most 100 years; in
// microseconds. InvalidArgument otherwise.
Micros parse_duration(std::string_view text);
// A backoff SPEC: "none", "fixed:DURATION" or "exponential:BASE[:CAP]" (CAP
// 1h when left out, at least BASE). InvalidArgument naming what is wrong.
void require_backoff(std::string_view spec);

// A rate "N/PERIOD": N claims (1 to 1,000,000) per PERIOD, a unit (s, m, h,
// d, or second, minute, hour, day) or a duration (30s, 10m): "10/s",
// "100/m", "5/30s". InvalidArgument for anything else ("10/fortnight").
struct Rate {
  std::uint32_t count = 0;
  Micros period = 0;
  bool operator==(const Rate&) const = default;
};
Rate parse_rate(std::string_view text);
// A concurrency key: 1 to 256 bytes, no control characters. InvalidArgument
// otherwise.
void require_concurrency_key(std::string_view key);


using Item = ItemRow;

// What a worker needs to do the work and report it.
struct ClaimedItem {
  std::string item_id;
  std::string project_id;
  std::string payload;           // JSON text
  Fence fence = 0;               // present it to finish
  std::uint32_t attempts = 0;    // 1 on the first claim
  Micros lease_expires_at = 0;
};

// What a session learns from assign_and_lease.
enum class AssignOutcome {
  assigned,      // it holds the item's lease under `fence`
  wait,          // another holds a live lease on it, until `until`
  no_safe_work,  // terminal, not visible to the session's actor, or no such item
};
// "assigned", "wait", "no_safe_work".
std::string_view to_string(AssignOutcome outcome);

struct Assignment {
  AssignOutcome outcome = AssignOutcome::no_safe_work;
  std::string item_id;
  // assigned:
  Fence fence = 0;
  Micros lease_expires_at = 0;
  std::string expected_head;         // the head pinned for the gate ("" for none)
  std::vector<std::string> actions;  // sorted
  // wait: when the holder's lease lapses (it may be renewed before then).
  Micros until = 0;
  bool is_assigned() const { return outcome == AssignOutcome::assigned; }
  explicit operator bool() const { return is_assigned(); }
};

// ---- the allocator ----------------------------------------------------------
// Whether allocate_next reserves its choice or only says what it would be.
enum class AllocateMode {
  preview,  // a dry run: reads one snapshot, writes nothing
  apply,    // reserves the choice through assign_and_lease
};

enum class AllocateOutcome {
  preview,       // a dry run: the item it would assign (nothing written)
  assigned,      // reserved through assign_and_lease, in the same transaction
  wait,          // nothing eligible, but something under a foreign live lease
  no_safe_work,  // nothing eligible at all
};
// "preview", "assigned", "wait", "no_safe_work".
std::string_view to_string(AllocateOutcome outcome);

// Why the allocator passed over a candidate ranked before its choice.
enum class SkipReason {
  routed_to_author,  // changes_requested: it goes back to its author session only
  foreign_lease,     // under another session's (or a plain claim's) live lease
  project_paused,    // its project is paused: the first such item of each is listed
  key_full,          // its concurrency key's live leases are at the limit
  rate_limited,      // its concurrency key's rate has no token yet
};
// "routed_to_author", "foreign_lease", "project_paused", "key_full", "rate_limited".
std::string_view to_string(SkipReason reason);

struct SkippedCandidate {
  std::string item_id;
  SkipReason reason = SkipReason::foreign_lease;
  bool operator==(const SkippedCandidate&) const = default;
};

// How many skipped candidates an allocation lists (skipped_total counts all).
inline constexpr std::size_t kMaxSkippedListed = 100;

struct Allocation {
  AllocateOutcome outcome = AllocateOutcome::no_safe_work;
  // preview and assigned: the item, and the fence and lease it gets (a
  // preview's are what apply would give if nothing changed in between).
  std::string item_id;
  Fence fence = 0;
  Micros lease_expires_at = 0;
  std::string expected_head;
  std::vector<std::string> actions;
  Micros until = 0;  // wait: when the earliest foreign lease skipped lapses
  std::vector<SkippedCandidate> skipped;  // ranked before the choice, in rank order
  std::int64_t skipped_total = 0;
};

// An incident's key: absent scope parts are "".
struct IncidentKey {
  std::string provider;
  std::string fingerprint;
  std::string org;
  std::string repo;
  std::string environment;
  bool operator==(const IncidentKey&) const = default;
};

// What a monitoring tool last said of an incident: each part optional (an
// upsert keeps what it does not give).
struct IncidentObservation {
  std::optional<std::string> status;
  std::optional<std::int64_t> event_count;
  std::optional<std::string> permalink;
  std::optional<std::string> first_seen;
  std::optional<std::string> last_seen;
  std::optional<std::vector<std::string>> linked_prs;
};

// How import_incident_links runs: a dry run writes nothing.
struct IncidentImportOptions {
  bool dry_run = false;
  std::optional<Micros> now;
};

// What migrate-incidents did (or, dry, would do).
struct IncidentImport {
  bool dry_run = false;
  std::int64_t rows = 0;        // legacy rows read
  std::int64_t links = 0;       // distinct links they make
  std::int64_t imported = 0;    // links written (new or changed)
  std::int64_t unchanged = 0;   // links the store already had, identical
  std::int64_t collapsed = 0;   // rows folded into another row of their group
  // Groups that cannot be collapsed: nothing is imported when there is one.
  struct Conflict {
    IncidentKey key;
    std::vector<std::int64_t> rowids;  // the legacy rows of the group
    // field -> the distinct values it holds ("NULL" for NULL; "store: ..."
    // for the link already in the store)
    std::vector<std::pair<std::string, std::vector<std::string>>> fields;
  };
  std::vector<Conflict> conflicts;
};

// Reads an older control plane's incident_links table from `path`, which
// is only read. StorageError (unavailable, corruption) if it is not an
// SQLite file with that table and its columns.
std::vector<LegacyIncidentRow> read_legacy_incident_links(const std::string& path);

// A session as `sessions()` lists it: its row and the items it holds a
// live lease on.
struct SessionInfo {
  SessionRow row;
  std::vector<std::string> items;  // by item id
};

// Action names (assign's allowed actions, the gate's action): names as
// require_name takes them, without commas. Throws InvalidArgument.
void require_action(std::string_view action);

struct ClaimOptions {
  std::optional<std::string> actor;   // scope: claim only from this actor's projects
  std::optional<Seconds> lease;       // else StoreOptions::lease
  std::optional<Micros> now;          // else the wall clock
  // claim only: when nothing is claimable, block up to this long until an
  // item is (enqueued, released, a lease lapses, a key's next token comes or
  // its holder ends), then claim it; nullopt when it comes to nothing.
  // PostgreSQL wakes by LISTEN/NOTIFY; SQLite by inotify on PATH-lock (a
  // commit that made work sets its times) and by asking every 100 ms
  // whether anything else committed (docs/benchmarks.md, "Waiting claims").
  std::optional<Seconds> wait;
  // Take projects in weighted round-robin (ProjectRow::weight) when several
  // have work; false: the item available earliest of any project (the
  // order before fairness; for comparisons).
  bool fair = true;
};

class ControlStore {
 public:
  // Opens (creating if missing, unless options.create is off or read_only)
  // the store `url` names: a file path or "sqlite:PATH" (SQLite), or
  // "postgresql://..." / "postgres://..." (PostgreSQL).
  // Throws InvalidArgument for a bad lease (before touching the file) or an
  // SQLite URI; StorageError otherwise.
  explicit ControlStore(const std::string& url, StoreOptions options = {});
  ~ControlStore();
  // A store moved from answers every call, options() included, with
  // InvalidArgument (misuse).
  ControlStore(ControlStore&&) noexcept;
  ControlStore& operator=(ControlStore&&) noexcept;

  // Appends project_created. InvalidArgument if the id is empty, or taken
  // (already_exists).
  void create_project(const std::string& id, const std::string& title,
                      const std::string& status = "open", std::optional<Micros> now = {});
  // The same with a retry policy, in one transaction (project_created, then
  // retry_policy_set when max_attempts > 0).
  struct ProjectOptions {
    std::string status = "open";
    std::uint32_t max_attempts = 0;  // 0: no policy
    std::string backoff;             // a SPEC (require_backoff); "" is none
    std::optional<Micros> now;
  };
  void create_project(const std::string& id, const std::string& title,
                      const ProjectOptions& options);

  // ---- the job lifecycle ------------------------------------------------------
  // Sets the retry policy of the items queued into the project from now on
  // (appends retry_policy_set; nothing, and false, when it is the policy
  // already). max_attempts 0 removes the policy. NotFound for no project.
  bool set_retry_policy(const std::string& project_id, std::uint32_t max_attempts,
                        const std::string& backoff = "none", std::optional<Micros> now = {});
  // Pauses the project (project_paused): no claim, assign or allocate takes
  // its items until it resumes (project_resumed); claimed work runs on and
  // enqueue still queues. False when it was paused (resumed) already.
  // These are an operator's commands: `actor` names who acted, in the
  // event, and does not scope (as a worker's --actor does).
  struct LifecycleOptions {
    std::optional<std::string> actor;  // who asked, recorded in the event
    std::optional<Micros> now;
  };
  bool pause_project(const std::string& project_id, const std::string& reason = "",
                     const LifecycleOptions& options = {});
  bool resume_project(const std::string& project_id, const LifecycleOptions& options = {});
  // Redrives a failed or cancelled item (appends retried): ready again at
  // the back of the queue with `attempts` more attempts (nullopt: its
  // policy's max_attempts; without a policy, no limit). InvalidArgument
  // (conflict) for any other status; NotFound for no item.
  void retry(const std::string& item_id, std::optional<std::uint32_t> attempts = {},
             const LifecycleOptions& options = {});
  // Runs a ready or scheduled item at `run_at` instead (appends rescheduled;
  // a time already past makes it ready). InvalidArgument (conflict) for a
  // claimed or terminal item.
  void reschedule(const std::string& item_id, Micros run_at, const LifecycleOptions& options = {});
  // The same at the command's time + `delay` (microseconds, > 0).
  void reschedule_in(const std::string& item_id, Micros delay,
                     const LifecycleOptions& options = {});
  // Cancels a ready, scheduled or claimed item (appends cancelled, with the
  // fence of the claim it ends): terminal. The holder's next finish,
  // heartbeat or release is FenceRejected (cancelled); the gate says
  // work_terminal. InvalidArgument (conflict) for a terminal item.
  void cancel(const std::string& item_id, const std::string& reason = "",
              const LifecycleOptions& options = {});
  // cancel or retry of every item of a project in the given statuses, in
  // transactions of at most kBulkBatch items (a claim never waits long
  // behind one); every event names the operation's id. A dry run writes
  // nothing and answers the count and the first ids.
  struct BulkOptions {
    std::vector<ItemStatus> statuses;  // empty: cancel ready, scheduled, claimed; retry failed
    std::string reason;                // cancel's
    std::optional<std::uint32_t> attempts;  // retry's
    bool dry_run = false;
    std::optional<std::string> actor;
    std::optional<Micros> now;
  };
  struct BulkResult {
    std::string operation;  // "" for a dry run
    std::int64_t count = 0;
    std::vector<std::string> first_ids;  // at most kBulkListed, in the order changed
  };
  static constexpr std::size_t kBulkBatch = 500;
  static constexpr std::size_t kBulkListed = 10;
  // A bulk action repeats its pass over the statuses until one changes
  // nothing (items move between them as it runs), at most this many times.
  static constexpr int kBulkPasses = 100;
  BulkResult cancel_matching(const std::string& project_id, const BulkOptions& options);
  BulkResult retry_matching(const std::string& project_id, const BulkOptions& options);
  // ---- cron schedules ---------------------------------------------------------
  // A schedule queues one item per occurrence of its cron expression, in
  // its time zone, with no daemon: any claim (or tick) fires the occurrences
  // that are due, in the claim's transaction, and each fire is an enqueue
  // keyed by (schedule, occurrence), so racing processes make one item.
  enum class Overlap { allow, skip };
  struct ScheduleSpec {
    std::string project_id;
    std::string cron;             // five fields, or @hourly, @daily, ...
    std::string payload = "{}";   // JSON of each item
    std::string zone = "UTC";     // a tz database name
    Overlap overlap = Overlap::allow;  // skip: pass over while the last item is open
    // After downtime, how many missed occurrences fire: 0 only the latest
    // (none), -1 all (kCatchUpAll), N the last N.
    std::int64_t catch_up = 0;
    std::optional<Micros> now;
  };
  static constexpr std::int64_t kCatchUpAll = -1;
  static constexpr std::int64_t kMaxCatchUp = 1000;  // --catch-up N: N at most this
  // The zone "" is UTC; localtime and posixrules are refused (they name
  // the host's setting). InvalidArgument for an expression or zone that does not parse, one
  // that never fires, a name taken (already_exists; a removed schedule's
  // name too); NotFound for no project.
  void add_schedule(const std::string& name, const ScheduleSpec& spec);
  // Each false when it changes nothing; NotFound for no schedule.
  // Occurrences while paused are not fired: resume picks up at the next.
  bool pause_schedule(const std::string& name, std::optional<Micros> now = {});
  bool resume_schedule(const std::string& name, std::optional<Micros> now = {});
  bool remove_schedule(const std::string& name, std::optional<Micros> now = {});
  std::vector<ScheduleRow> schedules();
  // Fires every due occurrence now (what a claim does first); returns how
  // many items it queued.
  std::int64_t tick(std::optional<Micros> now = {});

  // ---- flow control: concurrency keys, rate limits, fairness --------------------
  // A limit on a concurrency key (EnqueueOptions::concurrency_key): at most
  // `concurrency` of the key's items under a live lease at any moment, and
  // claims of its items started no faster than `rate` ("N/PERIOD", a GCRA:
  // spaced PERIOD / N apart, `burst` back to back). A key is global: the
  // items of every project that carry it share it. A slot is a live fenced
  // lease, never a counter: the claim counts the key's claimed rows whose
  // lease has not lapsed, inside its transaction, so a crashed holder's
  // slot frees when its lease lapses and a stale holder frees nothing.
  // set_limit replaces the key's limit whole (limit_set); it takes effect
  // at the next claim and never revokes a live lease. False when it is the
  // limit already. InvalidArgument for a concurrency of 0 with no rate, a
  // rate that does not parse, a burst without a rate, a bad key.
  struct LimitSpec {
    std::uint32_t concurrency = 0;  // 0: no bound on live leases (a rate is then needed)
    std::string rate;               // "N/PERIOD", or "" for none
    std::uint32_t burst = 0;        // with a rate: claims back to back (0: 1)
    std::optional<std::string> actor;
    std::optional<Micros> now;
  };
  bool set_limit(const std::string& key, const LimitSpec& spec);
  // Removes the limit (limit_removed): the key bounds nothing. False when it
  // was removed already; NotFound (unknown_limit) for a key never limited.
  bool remove_limit(const std::string& key, const LifecycleOptions& options = {});
  // A limit with what holds it now.
  struct KeyHolder {
    std::string item_id;
    std::string project_id;
    Fence fence = 0;
    Micros lease_expires_at = 0;
    bool operator==(const KeyHolder&) const = default;
  };
  struct LimitInfo {
    LimitRow row;
    std::int64_t live = 0;            // items of the key under a live lease now
    std::vector<KeyHolder> holders;   // at most kMaxHoldersListed, lease end first
    Micros next_token = 0;            // with a rate: when the next claim may start
  };
  static constexpr std::size_t kMaxHoldersListed = 20;
  // Every limit not removed, by key; `now` is when live leases are counted.
  std::vector<LimitInfo> limits(std::optional<Micros> now = {});
  // Sets the project's weight (project_weight_set): its share of the claims
  // that choose among several projects. 1 to kMaxWeight. False when it is
  // the weight already; NotFound for no project.
  bool set_weight(const std::string& project_id, std::uint32_t weight,
                  const LifecycleOptions& options = {});

  // Why an item is not being claimed now (cplane why): every reason that
  // holds, each with what would change it.
  enum class WhyKind {
    terminal,       // done, failed, closed or cancelled: nothing will claim it
    running,        // claimed under a live lease (until: its end)
    scheduled,      // not before `until` (a delay, a backoff)
    project_paused, // its project is paused: resume it
    key_full,       // its key's live leases are at the limit (holders)
    rate_limited,   // its key's next token is at `until`
    behind,         // `ahead` items its project's claims take first
    out_of_scope,   // the actor asked about may not claim from its project
    exhausted,      // its lease lapsed with no attempts left: the next claim fails it
  };
  struct WhyReason {
    WhyKind kind = WhyKind::behind;
    std::string message;        // what holds it, and what would change it
    Micros until = 0;
    std::string key;
    std::uint32_t limit = 0;
    std::int64_t live = 0;
    std::vector<KeyHolder> holders;
    std::int64_t ahead = 0;
    std::uint32_t weight = 0;   // behind: its project's weight
    std::int64_t competing = 0; // behind: projects with work in the claim's scope
    bool operator==(const WhyReason&) const = default;
  };
  struct Explanation {
    std::string item_id;
    std::string project_id;
    ItemStatus status = ItemStatus::ready;
    Micros at = 0;
    bool claimable = false;  // a claim now could take it (no reason but `behind`)
    std::vector<WhyReason> reasons;
  };
  // NotFound for no item; a scoped actor that may not see it is told
  // out_of_scope (its project's name only).
  Explanation explain(const std::string& item_id, const std::optional<std::string>& actor = {},
                      std::optional<Micros> now = {});

  // The project's row: title, status, retry policy, pause. NotFound (or
  // ScopeDenied for a scoped actor), as enqueue.
  ProjectRow project(const std::string& project_id, const std::optional<std::string>& actor = {});

  // Grants a scoped actor the project: it may then see it, enqueue into it
  // and claim from it (appends actor_assigned; nothing if already granted).
  // NotFound for an unknown project.
  void grant(const std::string& project_id, const std::string& actor,
             std::optional<Micros> now = {});

  // The old name of grant, kept for one release.
  [[deprecated("use grant(project, actor)")]] void assign(const std::string& project_id,
                                                         const std::string& actor,
                                                         std::optional<Micros> now = {}) {
    grant(project_id, actor, now);
  }

  // Sorted project ids: all of them, or only those assigned to `actor`.
  std::vector<std::string> visible_projects(const std::optional<std::string>& actor = {});

  // A work item as the forge knows it (enqueue with options).
  struct EnqueueOptions {
    WorkKind kind = WorkKind::task;
    std::string ref;     // "owner/repo#123": any name, or "" for none
    std::string head;    // a pr's head revision; only for a pr
    std::string author;  // a pr's author (a session id); only for a pr
    std::int32_t priority = 0;  // the allocator's: higher first
    // An idempotency key: a second enqueue with the same key into the same
    // project appends nothing and returns the first item's id (its payload
    // is not compared), so that a caller may retry an enqueue whose outcome
    // it did not learn. "" for none.
    std::string key;
    std::optional<std::string> actor;
    std::optional<Micros> now;
    // Its own retry policy, overriding the project's (max_attempts 0: the
    // project's).
    std::uint32_t max_attempts = 0;
    std::string backoff;
    // Not claimable before run_at, or before now + delay (status scheduled);
    // at most one of the two.
    std::optional<Micros> run_at;
    std::optional<Micros> delay;
    // Its concurrency key (require_concurrency_key), or "": the key's limit
    // bounds how many of its items run at once, across projects.
    std::string concurrency_key;
  };

  // Appends queued and returns the new item id. InvalidArgument for a payload
  // that is not JSON or is over 1 MiB. An unknown project is NotFound for the control plane
  // and ScopeDenied for a scoped actor, exactly as a project not theirs.
  std::string enqueue(const std::string& project_id, const std::string& payload_json,
                      const std::optional<std::string>& actor = {},
                      std::optional<Micros> now = {});
  // The same, for an issue or pull request: InvalidArgument also for a
  // head or author on an item that is not a pr (conflict), and for a bad
  // name.
  std::string enqueue(const std::string& project_id, const std::string& payload_json,
                      const EnqueueOptions& options);

  // Claims an available item for `owner` and appends claimed with a fence
  // one above the item's last. Per unpaused project in scope the candidates
  // are the oldest ready item (queue order), the item whose lease lapsed
  // first (attempts left) and the scheduled item due first; of all
  // candidates the one available earliest wins (queued_at, run_at or
  // retry_at, lease end), ties in queue order. A lapsed item with no
  // attempts left is failed on the way ("lease lapsed, attempts
  // exhausted"), never handed out. nullopt when nothing is available.
  // Every `now` is a non-negative number of microseconds since the epoch.
  // InvalidArgument for an empty owner or a lease that is not a positive,
  // finite number of seconds.
  std::optional<ClaimedItem> claim(const std::string& owner, const ClaimOptions& options = {});

  // Reports the item done or failed (appends done/failed). FenceRejected if
  // `fence` is not the current fence, or the item is not claimed, is
  // terminal, or does not exist (reason() says which). A lapsed lease that
  // nobody reclaimed yet still accepts its current fence: the fence, not the
  // clock, decides. InvalidArgument for an Outcome outside the enum.
  //   finish(id, fence, Outcome::done)
  //   finish(id, fence, Outcome::done, "detail", now)
  //   finish(id, fence, Outcome::done, {.detail = ..., .actor = "alice", .now = ...})
  // With an actor, an item outside its projects (or missing) is ScopeDenied,
  // checked in the same transaction, before the fence: a scoped actor learns
  // nothing, not even a fence, about other projects' items.
  // Under a retry policy a failed finish with attempts left is
  // attempt_failed (the item is scheduled until its backoff ends), unless
  // no_retry: a permanent error ends it at once.
  struct FinishOptions {
    std::string detail;
    std::optional<std::string> actor;
    std::optional<Micros> now;
    bool no_retry = false;
  };
  void finish(const std::string& item_id, Fence fence, Outcome outcome) {
    finish(item_id, fence, outcome, FinishOptions{});
  }
  // (A template so that a braced `{.actor = ...}` picks the options form.)
  template <class Text>
    requires std::convertible_to<const Text&, std::string_view>
  void finish(const std::string& item_id, Fence fence, Outcome outcome, const Text& detail,
              std::optional<Micros> now = {}) {
    finish(item_id, fence, outcome,
           FinishOptions{.detail = std::string(std::string_view(detail)), .now = now});
  }

  void finish(const std::string& item_id, Fence fence, Outcome outcome,
              const FinishOptions& options);

  // ---- the lease lifecycle --------------------------------------------------
  struct LeaseOptions {
    std::optional<Seconds> lease;       // else StoreOptions::lease
    std::optional<std::string> actor;   // scope, as for finish
    std::optional<Micros> now;
  };

  // Extends the lease of the claim under `fence`: it now ends at now + the
  // lease (appends lease_extended). Returns the new end. Refuses exactly as
  // finish does (FenceRejected with its reason; ScopeDenied with an actor
  // outside the item's project). A lapsed lease that nobody reclaimed yet
  // may still be extended: the fence, not the clock, decides.
  Micros heartbeat(const std::string& item_id, Fence fence, const LeaseOptions& options = {});

  // Gives the item back (appends released): it is ready again, in its place
  // in the queue, and the next claim takes a higher fence. Refuses exactly
  // as finish does.
  struct ReleaseOptions {
    std::optional<std::string> actor;
    std::optional<Micros> now;
    // An operator releasing the holder's claim (the console): named as the
    // event's actor instead of the holder. Does not scope; the fence is
    // checked all the same.
    std::optional<std::string> by;
  };
  void release(const std::string& item_id, Fence fence, const std::string& reason = "",
               const ReleaseOptions& options = {});

  // The sweep: records a lease_expired event for every claim whose lease
  // has lapsed (at or before `now`) and that is not recorded yet, so the
  // history shows who lost which item and when. Rows stay claimed: a claim
  // of a lapsed item works whether or not the sweep ran, and a holder that
  // reports under its still-current fence is still accepted. Returns how
  // many it recorded. One write transaction.
  std::int64_t expire_leases(std::optional<Micros> now = {});

  // ---- sessions ------------------------------------------------------------
  // A session is one agent at work: it is given items by assign_and_lease,
  // keeps their leases alive with session_heartbeat, and passes the gate
  // before each mutation. Each call is one write transaction.

  // Opens `session` (appends session_opened). `actor` scopes its work to
  // that actor's projects (none: every project). Opening an open session
  // with the same actor changes nothing; with another actor, or after it
  // was closed (ids are not reused), InvalidArgument (already_exists).
  void open_session(const std::string& session, const std::optional<std::string>& actor = {},
                    std::optional<Micros> now = {});

  // The session is alive: extends every live lease it holds to now + lease
  // (one lease_extended event per item, so each item's history shows it)
  // and appends session_heartbeat. A lapsed lease stays lapsed. Returns the
  // items extended with their new ends. NotFound (unknown_session,
  // session_closed) otherwise.
  std::vector<std::pair<std::string, Micros>> session_heartbeat(
      const std::string& session, std::optional<Seconds> lease = {},
      std::optional<Micros> now = {});

  // Closes the session (appends session_closed) and releases every item it
  // holds (one released event each, reason "session closed"), lapsed or
  // not. Returns the items released. Closing a closed session changes
  // nothing; NotFound (unknown_session) for one never opened.
  std::vector<std::string> close_session(const std::string& session,
                                         std::optional<Micros> now = {});

  // Every session, by id, with the items it holds a live
  // lease on at `now`. Reads one snapshot.
  std::vector<SessionInfo> sessions(std::optional<Micros> now = {});

  // ---- the forge, as observed -----------------------------------------------
  // What the control plane saw on the forge. None needs a fence: they are
  // the world's facts, not a worker's reports. Each returns whether it
  // changed anything (an unchanged value, or an item already terminal,
  // records nothing). NotFound for an unknown item; InvalidArgument
  // (conflict) for a head or review on an item that is not a pr.
  bool observe_head(const std::string& item_id, const std::string& head,
                    std::optional<Micros> now = {});
  bool observe_review(const std::string& item_id, ReviewState review,
                      std::optional<Micros> now = {});
  // Closes the item (merged or closed): terminal for everyone, whoever
  // held it (who did stays in the row, for the gate).
  bool observe_close(const std::string& item_id, CloseReason reason,
                     std::optional<Micros> now = {});

  // ---- atomic assign + lease (R2, R3, R4) ----------------------------------
  // In one write transaction: gives `item_id` to `session` under a fresh
  // fence (one above every fence the item had: claim and assign share the
  // counter), with `allowed_actions` and the item's head pinned (R4); or
  // says `wait` while another holds a live lease on it (R2: never two live
  // assignments on one item), or `no_safe_work` for an item that is
  // terminal, invisible to the session's actor, or missing (R3: the same
  // answer for all three). The session asking again for an item it holds
  // gets `assigned` with its current fence and a renewed lease (a retry
  // after a lost reply is safe). A lapsed lease is taken over, whoever held
  // it. NotFound for an unknown or closed session; InvalidArgument for no
  // actions or a bad one, and a bad lease.
  Assignment assign_and_lease(const std::string& session, const std::string& item_id,
                              const std::vector<std::string>& allowed_actions,
                              std::optional<Seconds> lease = {},
                              std::optional<Micros> now = {});

  // ---- the mutation gate ---------------------------------------------------
  // Before each mutation on the forge: allowed, or denied with exactly one
  // reason, checked in this order: no_live_lease (no lease, lapsed, held by
  // another session, or an unknown session or item), stale_fence,
  // work_terminal (the item was closed, merged, done or failed: told to its
  // holder on record, whose lease ended with the work, lapsed or not),
  // action_not_allowed, head_drift (the item's head moved since it was
  // pinned, even if it moved back, or `head`, the one the caller is about
  // to mutate, is not the pinned one). The time is read once the lock or
  // snapshot is held. It fails closed: what it cannot establish is a
  // denial, and a malformed session or item name is no_live_lease (no such
  // session or item can exist). Reads one snapshot; writes nothing.
  // require(verdict) throws MutationDenied.
  GateVerdict require_valid_assignment(const std::string& session, const std::string& item_id,
                                       Fence fence, const std::string& action,
                                       const std::optional<std::string>& head = {},
                                       std::optional<Micros> now = {});

  // The gate, and when it allows, a mutation_recorded event in the same
  // write transaction: the ledger shows every mutation made under every
  // assignment. A denial records nothing.
  GateVerdict record_mutation(const std::string& session, const std::string& item_id,
                              Fence fence, const std::string& action,
                              const std::optional<std::string>& head = {},
                              std::optional<Micros> now = {});

  // ---- the allocator and the terminal path ----------------------------------
  // Chooses the next item for `session`: among the open items (task, issue,
  // pr) of the projects its actor may see, on the terminal path first, then
  // by priority (higher first), then queue order. An item whose review is
  // changes_requested goes to its author only (others skip it:
  // routed_to_author); one under another's live lease is skipped
  // (foreign_lease); items the session holds are not candidates.
  // AllocateMode::apply reserves the choice through assign_and_lease in the
  // same transaction (assigned); preview is a dry run, writing nothing. Routing is the
  // allocator's: assign_and_lease and claim, which name or take an item
  // directly, do not route. Nothing eligible:
  // wait (until the earliest foreign lease skipped lapses) or no_safe_work.
  // Preview and apply run the same planner. `actions` may be empty (the
  // session then holds the item but may mutate nothing). NotFound for an
  // unknown or closed session.
  Allocation allocate_next(const std::string& session, AllocateMode mode,
                           const std::vector<std::string>& actions = {},
                           std::optional<Seconds> lease = {}, std::optional<Micros> now = {});

  // Puts an open item on the terminal path (terminal_path_entered), or takes
  // it off (terminal_path_left). Each returns whether it changed anything.
  // NotFound for an unknown item; InvalidArgument (conflict) to put a
  // terminal item on.
  bool enter_terminal_path(const std::string& item_id, const std::string& reason = "",
                           std::optional<Micros> now = {});
  bool leave_terminal_path(const std::string& item_id, std::optional<Micros> now = {});
  // The same, by an operator: options.actor is named in the event.
  bool leave_terminal_path(const std::string& item_id, const LifecycleOptions& options);
  // The items on the terminal path, by item id.
  std::vector<TerminalLockRow> terminal_path();

  // ---- incident links --------------------------------------------------------
  // Links a monitoring incident to the forge issue that tracks it (an item
  // id or an external reference): an upsert keyed on (provider,
  // fingerprint, org, repo, environment), whose observation parts replace
  // the stored ones when given and keep them when not. Appends
  // incident_linked (the link whole) unless nothing changed; returns whether
  // it did. Incidents are never work items.
  bool link_incident(const IncidentKey& key, const std::string& target,
                     const IncidentObservation& observation = {},
                     std::optional<Micros> now = {});
  // NotFound (unknown_incident) if there is no such link.
  IncidentLinkRow incident(const IncidentKey& key);
  // Every link, or those of one target, by incident id.
  std::vector<IncidentLinkRow> incidents(const std::optional<std::string>& target = {});
  // Imports legacy rows (read_legacy_incident_links), collapsing rows that
  // differ only by NULL versus '' in their scope when their targets and
  // every piece of metadata agree. Any conflict (within a group, or with a
  // link the store has) fails closed: nothing is written and each
  // conflicting group is listed. One transaction; a dry run writes nothing.
  IncidentImport import_incident_links(const std::vector<LegacyIncidentRow>& rows,
                                       const IncidentImportOptions& options = {});

  // Whether a report under `fence` would be accepted now, as a value: a
  // worker can ask before a costly step whether its claim still stands.
  // Reads one snapshot; writes nothing. With an actor, an item outside its
  // projects is ScopeDenied (thrown: a scoped actor learns nothing of it).
  FenceVerdict check_fence(const std::string& item_id, Fence fence,
                           const std::optional<std::string>& actor = {});

  // ---- batches: fewer transactions per item ------------------------------

  // Queues several items in one transaction; all or nothing. Returns their
  // ids in order. The same refusals as enqueue.
  std::vector<std::string> enqueue_batch(const std::string& project_id,
                                         const std::vector<std::string>& payloads_json,
                                         const std::optional<std::string>& actor = {},
                                         std::optional<Micros> now = {});

  // Claims up to `max_items` items, oldest first, in one transaction (one
  // claimed event each). Empty when nothing is available. InvalidArgument
  // for max_items == 0 and as claim.
  std::vector<ClaimedItem> claim_batch(const std::string& owner, std::size_t max_items,
                                       const ClaimOptions& options = {});

  // The same as claim_batch: `store.claim("worker-1", 8)`. (A template so
  // that `claim(owner, {})` still means one claim with default options.)
  template <std::integral N>
    requires(!std::same_as<N, bool>)
  std::vector<ClaimedItem> claim(const std::string& owner, N max_items,
                                 const ClaimOptions& options = {}) {
    if (max_items <= 0) throw InvalidArgument("a batch claim needs max_items of at least 1");
    return claim_batch(owner, static_cast<std::size_t>(max_items), options);
  }

  struct Report {
    std::string item_id;
    Fence fence = 0;
    Outcome outcome = Outcome::done;
    std::string detail;
  };

  // Finishes several items in one transaction; all or nothing: if any report
  // is refused, FenceRejected names that item and nothing is written.
  // With an actor, every item must be in its projects (else ScopeDenied).
  // InvalidArgument (conflict) for an item listed twice.
  void finish_batch(const std::vector<Report>& reports,
                    const std::optional<std::string>& actor = {},
                    std::optional<Micros> now = {});

  // Finishes one item and, in the same transaction, claims `owner`'s next
  // one: half the transactions of finish + claim. If the finish is refused
  // (FenceRejected; ScopeDenied when options.actor is set and the item is
  // not in its projects) nothing is claimed either. nullopt: finished,
  // nothing left to claim.
  std::optional<ClaimedItem> finish_and_claim(const std::string& item_id, Fence fence,
                                              Outcome outcome, const std::string& owner,
                                              const ClaimOptions& options = {},
                                              const std::string& detail = "");

  // The item's row. Scoped: ScopeDenied for an item of another project or
  // one that does not exist. Unscoped: NotFound if it does not exist.
  Item item(const std::string& item_id, const std::optional<std::string>& actor = {});

  // The item's events, oldest first. Scoped: ScopeDenied unless the item's
  // row exists in one of the actor's projects. Unscoped: also the events of
  // an item whose row is gone; NotFound if there are none.
  std::vector<StoredEvent> events(const std::string& item_id,
                                  const std::optional<std::string>& actor = {});

  // How many items of `project_id` (all projects if nullopt) are in each
  // status. Reads every such row: a report for operators and probes.
  struct StatusCounts {
    std::int64_t ready = 0, claimed = 0, done = 0, failed = 0, closed = 0;
    std::int64_t scheduled = 0, cancelled = 0;
    std::int64_t invalid = 0;  // rows whose status is none of the seven (verify names them)
  };
  StatusCounts status_counts(const std::optional<std::string>& project_id = {});

  // ---- the operator's view ---------------------------------------------------
  // Reads of one snapshot: none takes the write lock or waits for a writer.

  // Which items list_items answers with. Project and status are index
  // seeks (one per status, merged); owner, session, kind and the keys
  // narrow that walk, so a filter that matches rarely reads further.
  struct ItemQuery {
    std::optional<std::string> project;
    std::vector<ItemStatus> statuses;            // empty: every status
    std::optional<std::string> owner;
    std::optional<std::string> session;
    std::optional<WorkKind> kind;
    std::optional<std::string> key;              // the enqueue's idempotency key
    std::optional<std::string> concurrency_key;
    enum class Order { newest, oldest };
    Order order = Order::newest;                 // by the order items were queued
    // The cursor: the last item of the previous page. Paging is stable: an
    // item is on one page only, in queue order, whatever changes meanwhile
    // (an item that changes status may leave or join later pages), except
    // that a redrive (retry) moves an item to the back of the queue: it
    // may then show again on a later page (oldest first) or not at all
    // (newest first).
    std::optional<std::string> after;
    // Where the cursor stood when its page was read (ItemPage::next_seq,
    // its queued_seq then), so that a cursor item redriven since, now at
    // the back of the queue, does not move the next page. Without it, the
    // cursor item's queued_seq now. Needs `after`.
    std::optional<Seq> after_seq;
    std::size_t limit = 50;                      // 1 ..= kMaxListLimit
  };
  static constexpr std::size_t kMaxListLimit = 1000;
  struct ItemPage {
    std::vector<Item> items;
    // Pass as `after` (and next_seq as `after_seq`) for the next page;
    // nullopt when this page is the last.
    std::optional<std::string> next;
    std::optional<Seq> next_seq;
  };
  // InvalidArgument for a limit outside 1..=kMaxListLimit, a malformed
  // id, or an after_seq that is not positive or comes without `after`;
  // NotFound (unknown_item) when `after` names no item (unknown_project
  // for an unknown project, unscoped). Scoped (actor): only the actor's
  // projects; ScopeDenied for a project or cursor outside them.
  ItemPage list_items(const ItemQuery& query, const std::optional<std::string>& actor = {});

  // The log as a stream, oldest first. `after` is a seq already seen (0:
  // from the start). Delivers only events that are final: no event with a
  // lower seq can still commit (on PostgreSQL, where concurrent
  // transactions take seqs out of commit order, a read waits for those in
  // flight). So a consumer that resumes after the last seq it saw misses
  // nothing and sees nothing twice. Unscoped: the operator's call.
  struct LogQuery {
    Seq after = 0;
    std::size_t max = 1000;                      // 1 ..= kMaxLogRead
    std::optional<StreamRef> stream;             // one stream only
    std::vector<std::string> types;              // stored type names; empty: every type
  };
  static constexpr std::size_t kMaxLogRead = 100000;
  struct LogPage {
    std::vector<StoredEvent> events;
    // Resume after this seq: the last event examined, which may be past the
    // last one returned when a filter skipped events. Equal to `after`
    // when nothing new was final.
    Seq next = 0;
  };
  // InvalidArgument for an unknown type name, a max outside its range or a
  // negative `after`. StorageError(corruption) for an examined event that
  // does not decode, or whose stored type or stream is not its body's
  // (filters go by the body, so a lying column is reported, never
  // skipped). StorageError(busy), on PostgreSQL, when a transaction that
  // writes the log has been open for 5 s (a writer stopped mid-command):
  // read again later.
  LogPage read_log(const LogQuery& query);
  LogPage read_log(Seq after_seq, std::size_t max) {
    LogQuery q;
    q.after = after_seq;
    q.max = max;
    return read_log(q);
  }
  // The newest final seq (0 for an empty log): `tail --from-end` starts
  // there. StorageError(busy) as for read_log.
  Seq log_end();
  // Returns once a commit may have added events after `after`, or when
  // `timeout` passes: true if read_log(after) would now return events. No
  // polling loop: the WAL's inotify watch (SQLite), LISTEN (PostgreSQL),
  // with a check every second as the fallback. A writer that crashes
  // leaves nothing to wait for: the call returns at the timeout. A writer
  // stopped mid-command holds back what is final: nothing is, and the
  // call returns false at the timeout (or after the 5 s a look waits for
  // the log's writers, if that is later); it never raises busy.
  bool wait_for_log(Seq after, std::chrono::milliseconds timeout);

  // The schema version of the store's database, in its backend's own
  // numbering (SQLite's and PostgreSQL's count apart): the one this build
  // writes, which an open store is always at. Reads nothing.
  // InvalidArgument (misuse) on a store that was moved from.
  int schema_version();

  const StoreOptions& options() const;

  // The implementation (commands/control_store.hpp): not part of this API.
  class Impl;

 private:
  explicit ControlStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "terminal", "running", "scheduled", "project_paused", "key_full",
// "rate_limited", "behind", "out_of_scope", "exhausted".
std::string_view to_string(ControlStore::WhyKind kind);

}  // namespace cplane
