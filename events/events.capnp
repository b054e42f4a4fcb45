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
# Planned members (later issues): leaseExpired, itemClosed, headMoved,
# sessionOpened, ...

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

struct ItemQueued {
  payload @0 :Text;    # JSON text, validated before it was appended
}

struct ItemClaimed {
  owner @0 :Text;             # the worker that holds the item
  fence @1 :UInt64;           # strictly greater than every earlier fence of the item
  leaseExpiresAt @2 :Int64;   # microseconds; after this the item may be reclaimed
  attempt @3 :UInt32;         # 1 for the first claim, +1 for each reclaim
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
  }

  streamKind @9 :StreamKind;  # the stream this event belongs to
  streamId @10 :Text;
}
