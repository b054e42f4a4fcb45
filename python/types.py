# The module's exception and value classes, in Python so that they read,
# pickle (multiprocessing sends them between processes) and print as Python
# classes do. cplane_module.cpp embeds this file and runs it in the module's
# namespace at import; it holds no engine logic.


class Error(Exception):
    """Every refusal and failure cplane raises. `str(e)` is a sentence for a
    person; the subclasses carry a value a program can branch on."""

    def __init__(self, message="", reason=None):
        super().__init__(message)
        self.message = message
        self.reason = reason

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (type(self), (self.message, self.reason))


class FenceRejected(Error):
    """A finish, heartbeat or release under a fence that is not the item's
    current one, or on an item that is not claimed, terminal, cancelled or
    unknown. Drop the result: the item belongs to someone else now.
    `reason`: "stale_fence", "not_claimed", "terminal", "unknown_item",
    "cancelled" or "slot_taken"."""


class ScopeDenied(Error):
    """A scoped actor asked for a project or item outside its scope, or one
    that does not exist; the message never says which, nor names it.
    `reason` is "out_of_scope"."""


class NotFound(Error, LookupError):
    """No such item, project, session, incident, schedule or limit (asked
    unscoped). `reason`: "unknown_item", "unknown_project",
    "unknown_session", "session_closed", "unknown_incident",
    "unknown_schedule", "unknown_limit"."""


class InvalidArgument(Error, ValueError):
    """The request was refused as given and nothing was written. `reason`:
    "invalid_input" (a bad payload, lease, fence, status, name ...),
    "already_exists", "conflict", "read_only", or "misuse" (a closed store,
    a store inherited through fork)."""


class StorageError(Error):
    """The database failed. `category` says what to do: "busy" (retry),
    "unavailable" (fix, reconnect), "commit_unknown" (never retry blindly),
    "corruption", "io", "full" (nothing was written) or "incompatible"
    (upgrade cplane). `reason` is the same value."""

    @property
    def category(self):
        return self.reason


class MutationDenied(Error):
    """The mutation gate denied (cplane.require on a gate verdict). `reason`:
    "no_live_lease", "stale_fence", "work_terminal", "action_not_allowed",
    "head_drift" or "key_held". Nothing was recorded."""


class InternalError(Error):
    """An invariant of cplane's failed: a bug, or rows edited behind its back.
    Never the caller's mistake."""


class ClaimedItem:
    """What a worker needs to do the work and report it: `item_id`,
    `project_id`, `payload` (the JSON parsed: a dict for an object), `fence`
    (present it to finish, heartbeat, release), `attempts` (1 on the first
    claim) and `lease_expires_at` (microseconds since the epoch)."""

    __slots__ = ("item_id", "project_id", "payload", "fence", "attempts", "lease_expires_at")

    def __init__(self, item_id, project_id, payload, fence, attempts, lease_expires_at):
        self.item_id = item_id
        self.project_id = project_id
        self.payload = payload
        self.fence = fence
        self.attempts = attempts
        self.lease_expires_at = lease_expires_at

    def __repr__(self):
        return (f"ClaimedItem(item_id={self.item_id!r}, project_id={self.project_id!r}, "
                f"fence={self.fence}, attempts={self.attempts}, "
                f"lease_expires_at={self.lease_expires_at})")

    def __eq__(self, other):
        return isinstance(other, ClaimedItem) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __reduce__(self):
        return (ClaimedItem, tuple(getattr(self, n) for n in self.__slots__))


class LedgerProblem:
    """One disagreement verify or audit found: `kind` (a stable name, as
    `cplane verify --json` prints it), `item_id` ("" for another stream's
    row), `project_id` ("" where unknown) and `detail` (a sentence)."""

    __slots__ = ("kind", "item_id", "project_id", "detail")

    def __init__(self, kind, item_id, project_id, detail):
        self.kind = kind
        self.item_id = item_id
        self.project_id = project_id
        self.detail = detail

    def __repr__(self):
        return (f"LedgerProblem(kind={self.kind!r}, item_id={self.item_id!r}, "
                f"project_id={self.project_id!r}, detail={self.detail!r})")

    def __reduce__(self):
        return (LedgerProblem, (self.kind, self.item_id, self.project_id, self.detail))


class Verdict:
    """A check's answer as a value: true when allowed; else `reason` and
    `message`. `kind` is "gate" (require_valid_assignment, record_mutation)
    or "fence" (check_fence); cplane.require(verdict) raises MutationDenied
    or FenceRejected for a denial."""

    __slots__ = ("allowed", "reason", "message", "kind")

    def __init__(self, allowed, reason=None, message="", kind="gate"):
        self.allowed = allowed
        self.reason = reason
        self.message = message
        self.kind = kind

    def __bool__(self):
        return self.allowed

    def __repr__(self):
        if self.allowed:
            return "Verdict(allowed)"
        return f"Verdict(denied, reason={self.reason!r}, message={self.message!r})"


def require(verdict):
    """Raises MutationDenied (a gate verdict) or FenceRejected (a fence
    verdict) with the verdict's reason unless it allows; returns None."""
    if verdict.allowed:
        return None
    if verdict.kind == "fence":
        raise FenceRejected(verdict.message, verdict.reason)
    raise MutationDenied(verdict.message, verdict.reason)
