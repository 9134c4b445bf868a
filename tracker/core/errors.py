"""The tracker's errors, translated at the edges with ``raise ... from``.

::

    TrackerError
    ├── ConfigError(ValueError)       bad config file, bad flag value, bad repo id
    │   └── SettingsError             the config file or a TRACKER_* variable: names the key
    ├── HubError                      raised only by tracker.adapters.hub
    │   ├── RepoGone                  404 / RepoNotFound (deleted, private and not ours, renamed away)
    │   │   └── RepoGated             401 GatedRepo: access needs accepting terms or a token
    │   ├── RepoDisabled              403 "Access to this resource is disabled."
    │   ├── RevisionGone              RevisionNotFound: a commit we knew is unreachable
    │   ├── EntryGone                 EntryNotFound: the file is not at that revision
    │   ├── HubRateLimited            429 after our own retries; .retry_after seconds
    │   └── HubUnavailable            5xx / timeouts / network after retries, or a malformed answer
    │       ├── HubDeadlineExceeded   the wall-clock deadline set around a poll (``hub.deadline``) ran out
    │       └── HubUnreachable        the Hub's name does not resolve or its port refuses: not retried
    ├── UpstreamFileError             a file upstream is too large or unreadable (recorded, not fatal)
    ├── NotWatched(LookupError)       a command or request names a repo that is not on the watch list
    ├── NotFound(LookupError)         no subscription, token, watch rule or watched repo by that id or name
    ├── RevisionUnresolved            a revision the tracker cannot resolve (unknown, or the Hub is unreachable)
    └── StoreError                    database problems, each with a sentence a user can act on
        ├── SchemaBehind              the schema is older than this tracker: run `tracker init`
        ├── StoreUnavailable          cannot connect or open (server down, folder missing, permissions)
        ├── StoreBusy                 locked by another process longer than the busy timeout
        ├── StoreReadOnly             the database (or its folder) is read-only
        ├── StoreCorrupt              not a database, or damaged
        └── StoreConflict             a uniqueness rule refused a write (a bug, or a concurrent writer)
"""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """An error as one line a user can read: the first line of its message, or its class name.

    Library errors carry multi-line text (URLs, hints, docs links); logs, CLI output and API
    answers show one line.
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class TrackerError(Exception):
    """Root of every error the tracker raises on purpose."""


class ConfigError(TrackerError, ValueError):
    pass


class SettingsError(ConfigError):
    pass


class HubError(TrackerError):
    pass


class RepoGone(HubError):
    pass


class RepoGated(RepoGone):
    pass


class RepoDisabled(HubError):
    pass


class RevisionGone(HubError):
    pass


class EntryGone(HubError):
    pass


class HubRateLimited(HubError):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class HubUnavailable(HubError):
    pass


class HubDeadlineExceeded(HubUnavailable):
    """The deadline set with ``HubClient.deadline()`` ran out: no more requests in that scope."""


class HubUnreachable(HubUnavailable):
    """The Hub cannot be reached at all (its name does not resolve, or nothing listens on its port): a
    retry a second later would fail the same way, so it is not retried, and the message says the fix."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(f"cannot reach {endpoint} ({reason}); set HF_ENDPOINT for a mirror, or try `tracker demo`")
        self.endpoint = endpoint
        self.reason = reason


class UpstreamFileError(TrackerError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class BudgetExceeded(Exception):
    """A per-revision budget (range requests, parsed-header memory, CPU time) is spent: what asked is skipped.

    Not a TrackerError: nothing that handles a Hub or store failure may mistake it for one.
    """

    def __init__(self, budget: str, what: str) -> None:
        super().__init__(f"the revision's {budget} budget is spent; {what} skipped")
        self.budget = budget
        self.what = what


class HeaderTooLarge(UpstreamFileError):
    """A weights file's header is larger than the cap it was read with."""


class NotWatched(TrackerError, LookupError):
    def __init__(self, repo_id: str) -> None:
        super().__init__(f"not watched: {repo_id} (add with `tracker watch add {repo_id}`)")
        self.repo_id = repo_id


class NotFound(TrackerError, LookupError):
    """No subscription, token, watch rule or watched repo by the id or name given (the message says which)."""


class RevisionUnresolved(TrackerError):
    """A revision asked about cannot be resolved; ``temporary`` when the Hub could not be asked."""

    def __init__(self, message: str, *, temporary: bool = False) -> None:
        super().__init__(message)
        self.temporary = temporary


class StoreError(TrackerError):
    """The database failed. The message says where it is (its URL: user, host, port, or the file), for the
    operator; ``public`` says what happened without where, for an HTTP client."""

    GENERIC = "the database could not answer (the details are in the server log)"

    def __init__(self, message: str, *, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public or self.GENERIC


class StoreUnavailable(StoreError):
    pass


class StoreBusy(StoreError):
    pass


class StoreReadOnly(StoreError):
    pass


class StoreCorrupt(StoreError):
    pass


class StoreConflict(StoreError):
    pass


class AdvisoryConflict(StoreError):
    """An advisory changed between the read a write was computed from and the write (another process
    saved it first); the write was not made. Recompute from a fresh read and save again."""


class SchemaBehind(StoreError):
    """The database schema is older than this version of the tracker needs."""
