# The event log's wire format: the canonical record of everything cplane did.
#
# Every row of the `events` table holds one `Event`, encoded as a single-segment
# Cap'n Proto message (unpacked, `capnp::messageToFlatArray`). The body is the
# truth; the table's other columns (`item_id`, `project_id`, `type`, `at`) are
# indexes that `verify` checks against it.
#
# Compatibility rules, so that stored logs stay readable forever:
#   * Fields and union members are only ever added, with the next ordinal.
#     Nothing is renamed in a way that changes meaning, removed or renumbered.
#   * A reader that meets a union member it does not know reports the event as
#     `unknown_event_type` (verify) or refuses the command (StorageError); it
#     never guesses.
#   * Times are integer microseconds since the Unix epoch (UTC).
#   * Every event names its stream (`streamKind`, `streamId`): the item for
#     item events, the project for project events. The kind follows from the
#     body's member (the traits table in event.hpp); a body that names another
#     stream is unreadable. Events written before streams (schema 1 and 2)
#     leave them unset (`unspecified`) and are filed by their member.
#   * `itemId` is empty for events of a project stream.
#
# Events of a session's stream (sessionOpened, sessionSeen, sessionClosed)
# leave itemId and projectId empty and name the session in their body.
#
# Planned members (later issues): incidents, allocator decisions, ...

@0xa77279471f4af3a6;

$import "/capnp/c++.capnp".namespace("cplane::wire");

enum Outcome {
  done @0;
  failed @1;
}

struct ProjectCreated {
  title @0 :Text;
  status @1 :Text;
}

struct ActorAssigned {
  actor @0 :Text;      # the scoped actor that may now see the project
}

enum WorkKind {
  task @0;             # plain work: what every item was before forge items
  issue @1;
  pr @2;
}

struct ItemQueued {
  payload @0 :Text;    # JSON text, validated before it was appended
  kind @1 :WorkKind;   # task for every item queued before kinds existed
  ref @2 :Text;        # the forge's reference, "owner/repo#123", or empty
  head @3 :Text;       # a pr's head revision (a commit sha) when queued
  author @4 :Text;     # a pr's author (a session id)
  priority @5 :Int32;  # the allocator's: higher first (0 before priorities existed)
  key @6 :Text;        # the caller's idempotency key, or empty
  maxAttempts @7 :UInt32;  # 0: no retry policy (every item before policies)
  backoff @8 :Text;        # the policy's wait between attempts: "", "none", "fixed:30s", ...
  runAt @9 :Int64;         # not claimable before this time; 0: at once
  concurrencyKey @10 :Text;  # the limit it runs under, or empty
  payloadSalt @11 :Data;     # chain 2: 16 random bytes hashed with the payload (events/chain.hpp)
}

struct AttemptFailed {
  fence @0 :UInt64;
  detail @1 :Text;
  retryAt @2 :Int64;
}

struct ItemRetried {
  attempts @0 :UInt32;  # more attempts; 0: without limit
  operation @1 :Text;
}

# An archive that forgets keys released this ended item's idempotency key:
# an enqueue with it makes a new item from here on.
struct KeyReleased {
  key @0 :Text;
}

struct ItemRescheduled {
  runAt @0 :Int64;
}

struct ItemCancelled {
  fence @0 :UInt64;     # the claim it ended; 0 when nobody held the item
  reason @1 :Text;
  operation @2 :Text;
}

struct RetryPolicySet {
  maxAttempts @0 :UInt32;
  backoff @1 :Text;
}

struct ProjectPaused {
  reason @0 :Text;
}

struct ProjectResumed {}

struct ScheduleCreated {
  name @0 :Text;
  cron @1 :Text;
  zone @2 :Text;
  payload @3 :Text;
  overlapSkip @4 :Bool;
  catchUp @5 :Int64;   # 0: the latest only; -1: all; N: the last N
  nextAt @6 :Int64;
  payloadSalt @7 :Data;  # chain 2: 16 random bytes hashed with the payload (events/chain.hpp)
}

struct ScheduleFired {
  name @0 :Text;
  occurrence @1 :Int64;
  itemId @2 :Text;
  missed @3 :Int64;
  nextAt @4 :Int64;
}

struct ScheduleSkipped {
  name @0 :Text;
  occurrence @1 :Int64;
  reason @2 :Text;
  nextAt @3 :Int64;
}

struct SchedulePaused {
  name @0 :Text;
}

struct ScheduleResumed {
  name @0 :Text;
  nextAt @1 :Int64;
}

struct ScheduleRemoved {
  name @0 :Text;
}

struct ItemClaimed {
  owner @0 :Text;             # the worker that holds the item
  fence @1 :UInt64;           # strictly greater than every earlier fence of the item
  leaseExpiresAt @2 :Int64;   # microseconds; after this the item may be reclaimed
  attempt @3 :UInt32;         # 1 for the first claim, +1 for each reclaim
  concurrencyKey @4 :Text;    # the item's concurrency key, or empty
  fairPass @5 :Int64;         # the project's fair-share pass after it; 0: unchanged
}

struct ProjectWeightSet {
  weight @0 :UInt32;
}

struct LimitSet {
  key @0 :Text;
  concurrency @1 :UInt32;     # 0: no bound
  rateCount @2 :UInt32;       # 0: no rate
  ratePeriod @3 :Int64;       # microseconds
  burst @4 :UInt32;
}

struct LimitRemoved {
  key @0 :Text;
}

# An archive took claims of this key out of the live log: the limit's clock
# (tat) as every claim up to this event left it, so that a replay of the
# live log is exact again from here.
# An archive wrote a segment file and moved its streams' events there
# (each stream leaves an anchor): the segment's record, whole.
struct SegmentArchived {
  segmentId @0 :Text;
  digest @1 :Text;            # BLAKE2b-256 of the file, hex
  file @2 :Text;              # the absolute path it was written to
  before @3 :Int64;           # the archive's --before
  projectId @4 :Text;         # the archive's --project; "" every project
  streams @5 :Int64;
  events @6 :Int64;
  bytes @7 :Int64;            # the file's size
  items @8 :Int64;            # of the streams: items, sessions, schedules
  sessions @9 :Int64;
  schedules @10 :Int64;
  redacted @11 :Int64;        # payloads kept as their digest (--redact-payloads)
}

struct LimitClockCarried {
  key @0 :Text;
  tat @1 :Int64;              # microseconds
  segmentId @2 :Text;         # the segment the claims went to
}

struct ItemFinished {
  outcome @0 :Outcome;
  fence @1 :UInt64;           # the fence the worker presented (the current one)
  detail @2 :Text;
}

enum StreamKind {
  unspecified @0;  # written before streams were recorded: filed by the body's member
  item @1;
  project @2;
  session @3;
  incident @4;
  schedule @5;
  limit @6;
  segment @7;
}

struct LeaseExtended {
  fence @0 :UInt64;           # the current fence, presented by its holder
  leaseExpiresAt @1 :Int64;   # the lease's new end
}

struct ItemReleased {
  fence @0 :UInt64;           # the current fence, presented by its holder
  reason @1 :Text;
}

struct LeaseExpired {
  fence @0 :UInt64;           # the fence of the claim whose lease lapsed
  owner @1 :Text;             # who held it
  leaseExpiresAt @2 :Int64;   # when the lease had ended
}

struct ItemAssigned {
  session @0 :Text;           # the session that holds the item now
  fence @1 :UInt64;           # one above the item's last fence (claims and assignments share it)
  leaseExpiresAt @2 :Int64;
  attempt @3 :UInt32;
  actions @4 :List(Text);     # what the session may do on the forge: sorted, no duplicates
  expectedHead @5 :Text;      # the item's head when assigned, pinned (empty: none)
  concurrencyKey @6 :Text;
}

struct HeadMoved {
  head @0 :Text;              # the item's new head, as observed on the forge
}

enum ReviewState {
  none @0;
  approved @1;
  changesRequested @2;
}

struct ReviewChanged {
  review @0 :ReviewState;
}

enum CloseReason {
  merged @0;
  closed @1;
}

struct ItemClosed {
  reason @0 :CloseReason;     # the forge closed it: terminal for everyone, no fence
}

struct MutationRecorded {
  session @0 :Text;           # who mutated, under ...
  fence @1 :UInt64;           # ... which assignment (the gate allowed it)
  action @2 :Text;
  head @3 :Text;              # the head it mutated, or empty
}

struct SessionOpened {
  session @0 :Text;
  actor @1 :Text;             # the scope its work comes from; empty: the control plane's
}

struct SessionSeen {
  session @0 :Text;
}

struct SessionClosed {
  session @0 :Text;
}

struct TerminalPathEntered {
  reason @0 :Text;            # why the item is on the terminal path (say, approved)
}

struct TerminalPathLeft {
}

# An incident's link, whole, as it stands after an upsert. The key is
# (provider, fingerprint, org, repo, environment), absent scope fields "".
# Observation metadata is optional: a null pointer (has...() false), or
# hasEventCount false, is absent; an empty text is present and empty.
struct IncidentLinked {
  provider @0 :Text;
  fingerprint @1 :Text;
  org @2 :Text;
  repo @3 :Text;
  environment @4 :Text;
  target @5 :Text;            # an item id or an external reference
  status @6 :Text;
  eventCount @7 :Int64;
  hasEventCount @8 :Bool;
  permalink @9 :Text;
  firstSeen @10 :Text;
  lastSeen @11 :Text;
  linkedPrs @12 :Text;        # references, joined by commas
}

struct Event {
  at @0 :Int64;               # when the command ran, microseconds since the epoch
  actor @1 :Text;             # who asked: a scoped actor, a worker, or "" (control plane)
  projectId @2 :Text;
  itemId @3 :Text;            # empty for project events

  body :union {
    projectCreated @4 :ProjectCreated;
    actorAssigned @5 :ActorAssigned;
    itemQueued @6 :ItemQueued;
    itemClaimed @7 :ItemClaimed;
    itemFinished @8 :ItemFinished;
    leaseExtended @11 :LeaseExtended;
    itemReleased @12 :ItemReleased;
    leaseExpired @13 :LeaseExpired;
    itemAssigned @14 :ItemAssigned;
    headMoved @15 :HeadMoved;
    reviewChanged @16 :ReviewChanged;
    itemClosed @17 :ItemClosed;
    mutationRecorded @18 :MutationRecorded;
    sessionOpened @19 :SessionOpened;
    sessionSeen @20 :SessionSeen;
    sessionClosed @21 :SessionClosed;
    terminalPathEntered @22 :TerminalPathEntered;
    terminalPathLeft @23 :TerminalPathLeft;
    incidentLinked @24 :IncidentLinked;
    attemptFailed @26 :AttemptFailed;
    itemRetried @27 :ItemRetried;
    itemRescheduled @28 :ItemRescheduled;
    itemCancelled @29 :ItemCancelled;
    retryPolicySet @30 :RetryPolicySet;
    projectPaused @31 :ProjectPaused;
    projectResumed @32 :ProjectResumed;
    scheduleCreated @33 :ScheduleCreated;
    scheduleFired @34 :ScheduleFired;
    scheduleSkipped @35 :ScheduleSkipped;
    schedulePaused @36 :SchedulePaused;
    scheduleResumed @37 :ScheduleResumed;
    scheduleRemoved @38 :ScheduleRemoved;
    projectWeightSet @39 :ProjectWeightSet;
    limitSet @40 :LimitSet;
    limitRemoved @41 :LimitRemoved;
    limitClockCarried @43 :LimitClockCarried;
    segmentArchived @44 :SegmentArchived;
    keyReleased @45 :KeyReleased;
  }

  streamKind @9 :StreamKind;  # the stream this event belongs to
  streamId @10 :Text;

  # The request this event answers, when a combiner ran it for another
  # process (SQLite's group commit): after a combiner's crash, the next one
  # finds the ids of the batch it took over here and tells a committed
  # batch from one that never happened. 0: none (every event before group
  # commit, and commands run in their own transaction).
  requestId @25 :UInt64;

  # Which hash chain covers this event (events/chain.hpp): 2 for every
  # event written since chains were versioned, whose hash covers its
  # payload by the payload's BLAKE2b-256, so that an archive can leave the
  # payload out (archive --redact-payloads) and the chain still be checked;
  # 0 for every event written before, hashed over its body as it is
  # (chain 1).
  chain @42 :UInt8;
}
