// Event value types: what the log says happened, independent of how it is
// encoded or stored. Types are past-tense facts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cplane {

using Micros = std::int64_t;  // microseconds since the Unix epoch, UTC
using Fence = std::uint64_t;  // per item; rises strictly with every claim
using Seq = std::int64_t;     // global position in the log, from 1

enum class Outcome { done, failed };

std::string_view to_string(Outcome outcome);
// "done" or "failed"; anything else throws InvalidArgument.
Outcome parse_outcome(std::string_view text);

// What a work item is: plain work (task), or an issue or pull request on a
// code forge, whose state the control plane observes.
enum class WorkKind { task, issue, pr };
// A pull request's review state, as last observed on the forge.
enum class ReviewState { none, approved, changes_requested };
// How the forge closed an item.
enum class CloseReason { merged, closed };

// "task", "issue", "pr"; parse_* throws InvalidArgument for anything else,
// naming what it expected.
std::string_view to_string(WorkKind kind);
WorkKind parse_work_kind(std::string_view text);
// "none", "approved", "changes_requested".
std::string_view to_string(ReviewState review);
ReviewState parse_review_state(std::string_view text);
// "merged", "closed".
std::string_view to_string(CloseReason reason);
CloseReason parse_close_reason(std::string_view text);

struct ProjectCreated {
  std::string title;
  std::string status;
  bool operator==(const ProjectCreated&) const = default;
};

struct ActorAssigned {
  std::string actor;
  bool operator==(const ActorAssigned&) const = default;
};

struct ItemQueued {
  std::string payload;  // JSON text
  WorkKind kind = WorkKind::task;
  std::string ref;      // the forge's reference ("owner/repo#123"), or ""
  std::string head;     // a pr's head revision when queued, or ""
  std::string author;   // a pr's author (a session id), or ""
  std::int32_t priority = 0;  // the allocator's: higher first
  // The caller's idempotency key (enqueue --key), or "": a second enqueue
  // with the same key in the same project returns this item and appends nothing.
  std::string key;
  // The retry policy it runs under, resolved when it was queued (the item's
  // own, else its project's): at most `max_attempts` attempts (0: no
  // policy, the seed's semantics), waiting `backoff` between them ("" or
  // "none", "fixed:30s", "exponential:1s:1h").
  std::uint32_t max_attempts = 0;
  std::string backoff;
  // Not claimable before this time (enqueue --run-at / --delay); 0: at once.
  Micros run_at = 0;
  // Its concurrency key (enqueue --concurrency-key), or "": the limit set
  // on that key (limit set) bounds how many of its items run at once.
  std::string concurrency_key;
  bool operator==(const ItemQueued&) const = default;
};

// An attempt failed while attempts remain: the item waits until `retry_at`
// (status scheduled), then a claim takes it under a higher fence.
struct AttemptFailed {
  Fence fence = 0;
  std::string detail;
  Micros retry_at = 0;
  bool operator==(const AttemptFailed&) const = default;
};

// A person redrove a failed or cancelled item: ready again at the back of
// the queue, with `attempts` more attempts (0: without limit).
struct ItemRetried {
  std::uint32_t attempts = 0;
  std::string operation;  // the bulk operation's id, or "" for one item
  bool operator==(const ItemRetried&) const = default;
};

// An archive with forget_keys (docs/retention.md) released an ended
// item's idempotency key: from here an enqueue with it makes a new item.
// The item's end time (its row's updated_at) stays its terminal event's.
struct KeyReleased {
  std::string key;  // the key it held
  bool operator==(const KeyReleased&) const = default;
};

// A ready or scheduled item runs at another time.
struct ItemRescheduled {
  Micros run_at = 0;  // at or before the event's time: ready at once
  bool operator==(const ItemRescheduled&) const = default;
};

// The item will not run (again): terminal. A claimed item's holder loses
// it under `fence` (0 when nobody held it).
struct ItemCancelled {
  Fence fence = 0;
  std::string reason;
  std::string operation;  // the bulk operation's id, or "" for one item
  bool operator==(const ItemCancelled&) const = default;
};

// A project's retry policy for the items queued from now on (project
// create / project set): max_attempts 0 is no policy.
struct RetryPolicySet {
  std::uint32_t max_attempts = 0;
  std::string backoff;
  bool operator==(const RetryPolicySet&) const = default;
};
// No claim, assign or allocate takes the project's items until it resumes.
struct ProjectPaused {
  std::string reason;
  bool operator==(const ProjectPaused&) const = default;
};
struct ProjectResumed {
  bool operator==(const ProjectResumed&) const = default;
};
// The project's share of claims that choose among several projects
// (project set --weight): weighted round-robin by claims.
struct ProjectWeightSet {
  std::uint32_t weight = 1;
  bool operator==(const ProjectWeightSet&) const = default;
};

// ---- limits: a concurrency key's own stream (the key is the stream id; the
// event's project is ""). The limit is whole in each event.
struct LimitSet {
  std::string key;
  std::uint32_t concurrency = 0;  // at most this many live leases at once; 0: no bound
  std::uint32_t rate_count = 0;   // at most rate_count claims per rate_period; 0: no rate
  Micros rate_period = 0;
  std::uint32_t burst = 0;        // claims that may start back to back (>= 1 with a rate)
  bool operator==(const LimitSet&) const = default;
};
struct LimitRemoved {
  std::string key;
  bool operator==(const LimitRemoved&) const = default;
};
// ---- archive segments: a segment's own stream (its id is the stream id; the
// event's project is ""). An archive wrote segment `segment_id` and moved
// its streams' events there, each leaving an anchor: the record, whole.
struct SegmentArchived {
  std::string segment_id;
  std::string digest;       // BLAKE2b-256 of the file, hex
  std::string file;         // the absolute path it was written to
  Micros before = 0;        // the archive's --before
  std::string project_id;   // the archive's --project; "" every project
  std::int64_t streams = 0;
  std::int64_t events = 0;
  std::int64_t bytes = 0;   // the file's size
  std::int64_t items = 0;   // of the streams: items, sessions, schedules
  std::int64_t sessions = 0;
  std::int64_t schedules = 0;
  std::int64_t redacted = 0;  // payloads kept as their digest
  bool operator==(const SegmentArchived&) const = default;
};

// An archive took claims of the key out of the live log (they went to
// segment `segment_id`): the limit's clock as every claim before this
// event left it. A replay of the live log takes it from here.
struct LimitClockCarried {
  std::string key;
  Micros tat = 0;
  std::string segment_id;
  bool operator==(const LimitClockCarried&) const = default;
};

// ---- cron schedules: the schedule's own stream (its name is the stream id;
// the event's project is the schedule's). Every event that moves the
// schedule on carries `next_at`, the next occurrence as the cron expression
// and the time zone's rules gave it then, so that a replay never depends on
// the tz database of the host that replays.
struct ScheduleCreated {
  std::string name;
  std::string cron;     // the expression as given (five fields or @hourly, ...)
  std::string zone;     // "UTC" or a tz database name
  std::string payload;  // JSON text of each item it makes
  bool overlap_skip = false;  // --overlap skip: pass over while the last item runs
  std::int64_t catch_up = 0;  // after downtime: 0 the latest only, -1 all, N the last N
  Micros next_at = 0;
  bool operator==(const ScheduleCreated&) const = default;
};
// An occurrence fired: the item it queued (key "schedule:NAME@OCCURRENCE",
// in the same transaction). `missed`: earlier occurrences passed over by
// the catch-up rule.
struct ScheduleFired {
  std::string name;
  Micros occurrence = 0;
  std::string item_id;
  std::int64_t missed = 0;
  Micros next_at = 0;
  bool operator==(const ScheduleFired&) const = default;
};
// An occurrence not fired: its previous item was still open (overlap skip).
struct ScheduleSkipped {
  std::string name;
  Micros occurrence = 0;
  std::string reason;  // "overlap"
  Micros next_at = 0;
  bool operator==(const ScheduleSkipped&) const = default;
};
struct SchedulePaused {
  std::string name;
  bool operator==(const SchedulePaused&) const = default;
};
// Resumed: occurrences while paused are not fired; the next is `next_at`.
struct ScheduleResumed {
  std::string name;
  Micros next_at = 0;
  bool operator==(const ScheduleResumed&) const = default;
};
struct ScheduleRemoved {
  std::string name;
  bool operator==(const ScheduleRemoved&) const = default;
};

struct ItemClaimed {
  std::string owner;
  Fence fence = 0;
  Micros lease_expires_at = 0;
  std::uint32_t attempt = 0;
  // The item's concurrency key, recorded so that the key's limit row (its
  // rate state) and verify's replay read it from the claim itself.
  std::string concurrency_key;
  // The project's fair-share pass after this claim (kFairStride / weight
  // added), when the claim chose among several projects; 0: not changed.
  std::int64_t fair_pass = 0;
  bool operator==(const ItemClaimed&) const = default;
};

struct ItemFinished {
  Outcome outcome = Outcome::done;
  Fence fence = 0;
  std::string detail;
  bool operator==(const ItemFinished&) const = default;
};

// The holder of the current fence keeps its lease: it now ends later.
struct LeaseExtended {
  Fence fence = 0;
  Micros lease_expires_at = 0;  // the new end: the command's time + the lease
  bool operator==(const LeaseExtended&) const = default;
};

// The holder of the current fence gives the item back: it is ready again,
// and the next claim takes a higher fence.
struct ItemReleased {
  Fence fence = 0;
  std::string reason;
  bool operator==(const ItemReleased&) const = default;
};

// A claim's lease lapsed and the sweep (expire_leases) recorded it: the
// history shows who lost the item, under which fence, and when. The row
// stays claimed (lapsed): only a new claim, with a higher fence, or the
// holder's own report moves it on.
struct LeaseExpired {
  Fence fence = 0;
  std::string owner;
  Micros lease_expires_at = 0;  // when the lease had ended
  bool operator==(const LeaseExpired&) const = default;
};

// A session took the item (assign_and_lease): a claim under the next fence,
// with the actions it may take and the head it was given, pinned (R4).
struct ItemAssigned {
  std::string session;
  Fence fence = 0;
  Micros lease_expires_at = 0;
  std::uint32_t attempt = 0;
  std::vector<std::string> actions;  // sorted, no duplicates
  std::string expected_head;         // the item's head when assigned ("" for none)
  std::string concurrency_key;       // as ItemClaimed's
  bool operator==(const ItemAssigned&) const = default;
};

// What the control plane observed on the forge: facts of the world, not a
// worker's report, so they carry no fence.
struct HeadMoved {
  std::string head;
  bool operator==(const HeadMoved&) const = default;
};
struct ReviewChanged {
  ReviewState review = ReviewState::none;
  bool operator==(const ReviewChanged&) const = default;
};
// The item is terminal for everyone; the row keeps who held it.
struct ItemClosed {
  CloseReason reason = CloseReason::closed;
  bool operator==(const ItemClosed&) const = default;
};

// A mutation on the forge made under an assignment, recorded after the
// gate allowed it, in the same transaction.
struct MutationRecorded {
  std::string session;
  Fence fence = 0;
  std::string action;
  std::string head;  // the head the caller mutated, or "" if it named none
  bool operator==(const MutationRecorded&) const = default;
};

// The control plane put an open item on the terminal path (say, a pull
// request approved and waiting to merge): the allocator routes it first.
struct TerminalPathEntered {
  std::string reason;
  bool operator==(const TerminalPathEntered&) const = default;
};
// ... and took it off. (Closing or finishing the item takes it off too.)
struct TerminalPathLeft {
  bool operator==(const TerminalPathLeft&) const = default;
};

// A monitoring incident linked to the forge issue that tracks it (an
// upsert: the link as it now stands, whole). Its stream is the incident's,
// keyed by (provider, fingerprint, org, repo, environment); absent scope
// fields are "". Observation metadata is optional: nullopt is absent.
struct IncidentLinked {
  std::string provider;
  std::string fingerprint;
  std::string org;
  std::string repo;
  std::string environment;
  std::string target;  // an item id or an external reference
  std::optional<std::string> status;
  std::optional<std::int64_t> event_count;
  std::optional<std::string> permalink;
  std::optional<std::string> first_seen;
  std::optional<std::string> last_seen;
  std::optional<std::string> linked_prs;  // references, joined by commas
  bool operator==(const IncidentLinked&) const = default;
};

// The stream id of an incident: its key's five parts joined by '/', each
// with '%' and '/' escaped (%25, %2F), so that distinct keys never meet.
std::string incident_stream_id(std::string_view provider, std::string_view fingerprint,
                               std::string_view org, std::string_view repo,
                               std::string_view environment);

// A session's own stream (its id is the stream id).
struct SessionOpened {
  std::string session;
  std::string actor;  // the scope its work comes from; "" for the control plane's
  bool operator==(const SessionOpened&) const = default;
};
// The session said it is alive (session_heartbeat); each live lease it held
// was extended by its own lease_extended event, in the same transaction.
struct SessionSeen {
  std::string session;
  bool operator==(const SessionSeen&) const = default;
};
// The session ended; each lease it held was released by its own released
// event, in the same transaction.
struct SessionClosed {
  std::string session;
  bool operator==(const SessionClosed&) const = default;
};

using EventBody = std::variant<ProjectCreated, ActorAssigned, ItemQueued, ItemClaimed,
                               ItemFinished, LeaseExtended, ItemReleased, LeaseExpired,
                               ItemAssigned, HeadMoved, ReviewChanged, ItemClosed,
                               MutationRecorded, SessionOpened, SessionSeen, SessionClosed,
                               TerminalPathEntered, TerminalPathLeft, IncidentLinked,
                               AttemptFailed, ItemRetried, ItemRescheduled, ItemCancelled,
                               RetryPolicySet, ProjectPaused, ProjectResumed, ScheduleCreated,
                               ScheduleFired, ScheduleSkipped, SchedulePaused, ScheduleResumed,
                               ScheduleRemoved, ProjectWeightSet, LimitSet, LimitRemoved,
                               LimitClockCarried, SegmentArchived, KeyReleased>;

// ---- streams ----------------------------------------------------------------
// Every event belongs to exactly one stream: a kind and an id. Replays,
// scans and projections go by stream; nothing is inferred from an empty id.
enum class StreamKind : std::uint8_t {
  item,     // id: the item id. queued, claimed, done, failed
  project,  // id: the project id. project_created, actor_assigned
  session,  // id: the session id. session_opened, session_heartbeat, session_closed
  incident,  // id: incident_stream_id(key). incident_linked
  schedule,  // id: the schedule's name. schedule_created, schedule_fired, ...
  limit,     // id: the concurrency key. limit_set, limit_removed, limit_clock_carried
  segment,   // id: the segment's id. segment_archived
};

// Every kind, in the order replays and exports go: projects and sessions
// first (items are checked against them), then items.
// Schedules come after items: verify checks each fire against the item it made.
// Segments after the kinds they archive (each is held against the anchors
// those left), and before limits: the flow replay needs to know which
// archives carried the limits' clocks. (An export is written in this order,
// and read back as it is replayed.)
inline constexpr StreamKind kStreamKinds[] = {StreamKind::project, StreamKind::session,
                                              StreamKind::item,    StreamKind::incident,
                                              StreamKind::schedule, StreamKind::segment,
                                              StreamKind::limit};

// "item", "project", "session", "incident", "schedule", "limit", "segment": the stored names (the events table's
// stream_kind).
std::string_view to_string(StreamKind kind);
std::optional<StreamKind> parse_stream_kind(std::string_view text);

struct StreamRef {
  StreamKind kind = StreamKind::item;
  std::string id;
  bool operator==(const StreamRef&) const = default;
};

struct Event {
  Micros at = 0;
  std::string actor;       // "" for the control plane
  std::string project_id;
  std::string item_id;     // "" for events of another stream than an item's
  EventBody body;
  // The group-commit request that made it (0: none); no projection reads it.
  std::uint64_t request_id = 0;
  bool operator==(const Event&) const = default;
};

// The stream an event belongs to: its kind's, with the id of that stream.
StreamRef stream_of(const Event& event);

// An event as read back from the log.
struct StoredEvent {
  Seq seq = 0;
  Event event;
  // "queued", "claimed", "done", ... (see type_name below).
  std::string_view type() const;
};

// The name stored in the `type` column and shown to users:
// "project_created", "actor_assigned", "queued", "claimed", "done", "failed".
std::string_view type_name(const EventBody& body);

// The fence an event carries, if it carries one (claimed, done, failed).
std::optional<Fence> fence_of(const EventBody& body);

// The stream kind an event of this body belongs to.
StreamKind stream_kind_of(const EventBody& body);

// One field of an event body, for what shows an event field by field
// (`cplane events --json`, a binding's dict): its name, and its value as
// text, a number, JSON text (a payload), a list of texts, or absent.
struct EventField {
  struct Json {
    std::string text;
    bool operator==(const Json&) const = default;
  };
  using Value = std::variant<std::monostate, std::string, std::int64_t, Json,
                             std::vector<std::string>>;
  std::string_view name;
  Value value;
};
// Every field of the body but its fence (fence_of), in a fixed order, for
// every kind: enums as their names ("done", "pr", ...). The names never
// repeat an event's own ("seq", "type", "actor", "at", "item_id").
std::vector<EventField> fields_of(const EventBody& body);

}  // namespace cplane
