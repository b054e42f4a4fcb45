// The exceptions cplane raises. Every refusal a caller must handle has its own
// type; all derive from cplane::Error so that a CLI or a test can catch the
// family. Third-party exceptions (KJ, fmt, the database client libraries)
// never escape a module: they are translated into one of these at the
// boundary.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cplane {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Every refusal below carries a reason a program can branch on, besides a
// sentence for a person (the CLI's --json errors print both).

// A finish (or any fenced report) presented a fence that is not the item's
// current one, or the item is not currently claimed, is terminal, or does not
// exist. The work must not be reported; the item belongs to someone else now.
// reason() tells the four cases apart for a program; what() is a sentence.
class FenceRejected : public Error {
 public:
  enum class Reason {
    unknown_item,  // no such item
    terminal,      // the item is already done or failed
    not_claimed,   // the item is ready: nobody holds it
    stale_fence,   // the fence is not the item's current one (older, or never issued)
    cancelled,     // a person cancelled the item: its work is no longer wanted
    // heartbeat only: the lease lapsed and its concurrency key's slots were
    // taken meanwhile; the holder may finish or release, not run on
    slot_taken,
  };

  FenceRejected(Reason reason, const std::string& message) : Error(message), reason_(reason) {}

  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

// "unknown_item", "terminal", "not_claimed", "stale_fence", "cancelled".
const char* to_string(FenceRejected::Reason reason) noexcept;

// A scoped actor asked for a project or item outside its scope, or one that
// does not exist. The message never names the project or item and never tells
// which of the two cases it was.
class ScopeDenied : public Error {
 public:
  ScopeDenied() : Error("access denied: outside this actor's scope") {}
};

// The caller's request was refused as given, and nothing was changed.
// reason() says why, for a program; what() is a sentence for a person.
class InvalidArgument : public Error {
 public:
  enum class Reason {
    invalid_input,   // the input can never succeed as given (malformed JSON, a
                     // non-positive lease, an unknown outcome, an empty id, ...)
    already_exists,  // the id is taken: a project or session of that id exists
    conflict,        // the request contradicts itself or the state the caller
                     // made (options that exclude each other, an item listed
                     // twice, an open item on a closed path, a store that is
                     // not empty)
    read_only,       // the store was opened for reading: it cannot write
    misuse,          // the API was used in a way it cannot be (a moved-from
                     // store, a store used in a forked child, ...)
  };

  explicit InvalidArgument(const std::string& message)
      : InvalidArgument(Reason::invalid_input, message) {}
  InvalidArgument(Reason reason, const std::string& message) : Error(message), reason_(reason) {}

  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

// "invalid_input", "already_exists", "conflict", "read_only", "misuse".
const char* to_string(InvalidArgument::Reason reason) noexcept;

// Our own invariant failed (a bug in cplane, or rows edited behind its
// back): never the caller's fault, never reported as InvalidArgument.
class InternalError : public Error {
 public:
  using Error::Error;
};

// No such item or project. Raised only to unscoped (control-plane) callers;
// scoped actors get ScopeDenied instead.
class NotFound : public Error {
 public:
  enum class Reason {
    unknown_item,
    unknown_project,
    unknown_session,  // no session was opened under this id
    session_closed,   // the session was closed: open a new one
    unknown_incident, // no link under this (provider, fingerprint, scope)
    unknown_schedule, // no schedule of this name
    unknown_limit,    // no limit on this concurrency key
  };
  NotFound(Reason reason, const std::string& message) : Error(message), reason_(reason) {}
  Reason reason() const noexcept { return reason_; }

 private:
  Reason reason_;
};

// "unknown_item", "unknown_project", "unknown_session", "session_closed",
// "unknown_incident", "unknown_schedule", "unknown_limit".
const char* to_string(NotFound::Reason reason) noexcept;

// Why the mutation gate denies (require_valid_assignment), in the order it
// checks: the first that holds is the one reported.
enum class GateReason {
  no_live_lease,       // no lease, lapsed, held by another session; or an unknown session or item
  stale_fence,         // the fence is not the current one
  work_terminal,       // the item was closed, merged, done or failed since
  action_not_allowed,  // not among the assignment's allowed actions
  head_drift,          // the head moved since it was pinned, or the caller's differs
  key_held,            // its concurrency key (limit 1) is held by another live lease
};

// "no_live_lease", "stale_fence", "work_terminal", "action_not_allowed", "head_drift",
// "key_held".
const char* to_string(GateReason reason) noexcept;

// The gate denied a mutation (thrown by require() on a GateVerdict, for
// callers that want an exception). Nothing was recorded.
class MutationDenied : public Error {
 public:
  MutationDenied(GateReason reason, const std::string& message) : Error(message), reason_(reason) {}
  GateReason reason() const noexcept { return reason_; }

 private:
  GateReason reason_;
};

// The storage layer failed. The category says what the caller may do.
class StorageError : public Error {
 public:
  enum class Category {
    busy,            // the write lock could not be had in time: retry
    unavailable,     // the database cannot be opened or reached: fix, reconnect
    commit_unknown,  // the commit may or may not have happened: never retry blindly
    corruption,      // the file is not a cplane database, or its contents are damaged
    io,              // any other failure of the database or the file system
    full,            // the disk, a quota or the file size limit is full: nothing was written
    incompatible,    // a newer cplane wrote this database or event: upgrade, do not restore
  };

  StorageError(Category category, const std::string& message)
      : Error(message), category_(category) {}

  Category category() const noexcept { return category_; }

 private:
  Category category_;
};

// "busy", "unavailable", "commit_unknown", "corruption", "io", "full", "incompatible".
const char* to_string(StorageError::Category category) noexcept;

// A store's URL or path as it may be shown anywhere (a message, a log line,
// a JSON field): a password in it, as `user:secret@` or as a `password`
// parameter (its key matched in any case and after percent-decoding, as
// PostgreSQL's client reads it), becomes `***`. A file path comes back unchanged.
std::string redacted_url(std::string url);
// `message` (say, a client library's own error text, which may quote the
// connection string it was given) with every password in `url`, as written
// and percent-decoded, replaced by `***`.
std::string redacted_message(std::string message, std::string_view url);

// An event body that cannot be decoded: truncated, not Cap'n Proto (category
// corruption), or of a type this build does not know (UnknownEventType).
class UnreadableEvent : public StorageError {
 public:
  explicit UnreadableEvent(const std::string& message)
      : StorageError(Category::corruption, message) {}

 protected:
  UnreadableEvent(Category category, const std::string& message)
      : StorageError(category, message) {}
};

// An event of a type this build does not know (written by a newer cplane):
// category incompatible. Upgrade cplane; the log is not damaged.
class UnknownEventType : public UnreadableEvent {
 public:
  explicit UnknownEventType(const std::string& message)
      : UnreadableEvent(Category::incompatible, message) {}
};

}  // namespace cplane
