# The export format: a stream of Cap'n Proto messages (standard stream
# framing: segment table, then segments), each an `ExportRecord`, readable
# with `capnp decode events/export.capnp ExportRecord`.
#
#   header, then for each stream (project streams, then item streams, each in
#   stream id order, bytewise): its events in seq order, then its head (or,
#   for an archived stream, its anchor alone: format version 2); then
#   events and heads of stream kinds this build does not know; then footer.
#
# Stream order lets an audit fold one stream at a time in flat memory, as
# verify does. The footer's contentHash is BLAKE2b-256 over every byte of
# the file before the footer: a truncated or damaged export is told apart
# from a damaged log. Compatibility: fields are only ever added; a reader
# refuses a formatVersion above its own.

@0x89b761a0c7eccfad;

$import "/capnp/c++.capnp".namespace("cplane::wire");

struct ExportHeader {
  formatVersion @0 :UInt32;    # 1
  schemaId @1 :UInt64;         # the id of events.capnp: what the event bodies are
  sourceDatabase @2 :Text;     # the source's database id (store_info)
  eventCount @3 :Int64;        # events in this file
  sinceSeq @4 :Int64;          # 0: the whole log; else only events after this seq
  logEvents @5 :Int64;         # the source log's digest: its events,
  logLastSeq @6 :Int64;        # its newest seq,
  logDigest @7 :Data;          # and the XOR of its heads' hashes (the chain head)
  hasDigest @8 :Bool;          # false: the source had no digest row (tampering)
  denseSeqs @9 :Bool;          # the source hands out seqs with no gaps
  exportedAt @10 :Int64;       # microseconds since the epoch
  cplaneVersion @11 :Text;
  segmentId @12 :Text;         # "" an export; else the archive segment's id (docs/retention.md):
                               # its streams only, their projects' streams live elsewhere
  payloadsRedacted @13 :Bool;  # a segment written by archive --redact-payloads: each payload is
                               # its digest (ExportEvent.payloadHash); restore refuses it
}

struct ExportEvent {
  seq @0 :Int64;
  streamKind @1 :Text;
  streamId @2 :Text;
  revision @3 :Int64;
  hash @4 :Data;
  itemId @5 :Text;
  projectId @6 :Text;
  type @7 :Text;
  at @8 :Int64;
  body @9 :Data;               # the canonical event (events.capnp), as stored
  prevHash @10 :Data;          # --since only: the hash before the first exported event of a stream
  payloadHash @11 :Data;       # a redacted segment's (archive --redact-payloads): the payload's
                               # digest; the body's payload bytes are filler (events/chain.hpp)
}

struct ExportHead {
  streamKind @0 :Text;
  streamId @1 :Text;
  revision @2 :Int64;
  lastSeq @3 :Int64;
  hash @4 :Data;
}

# An archived stream's anchor (docs/retention.md): in its stream's place,
# instead of its events and head, which are in the segment it names.
# Written from format version 2, and only by a store that archived.
struct ExportAnchor {
  streamKind @0 :Text;
  streamId @1 :Text;
  revision @2 :Int64;
  lastSeq @3 :Int64;
  hash @4 :Data;
  events @5 :Int64;
  seqs @6 :Data;               # the stream's seqs, 8 bytes big-endian each
  projectId @7 :Text;
  state @8 :Text;
  fence @9 :Int64;
  idemKey @10 :Text;
  endedAt @11 :Int64;
  segmentId @12 :Text;
  segmentDigest @13 :Data;
}

struct ExportFooter {
  events @0 :Int64;
  heads @1 :Int64;
  contentHash @2 :Data;        # BLAKE2b-256 over the file's bytes before the footer
}

struct ExportRecord {
  union {
    header @0 :ExportHeader;
    event @1 :ExportEvent;
    head @2 :ExportHead;
    footer @3 :ExportFooter;
    anchor @4 :ExportAnchor;
  }
}
