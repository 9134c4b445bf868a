"""The tracker's errors, translated at the edges with ``raise ... from``.

::

    TrackerError
    ├── ConfigError(ValueError)       bad config file, bad flag value, bad repo id
    ├── HubError                      raised only by tracker.hub
    │   ├── RepoGone                  404 / RepoNotFound (deleted, private and not ours, renamed away)
    │   │   └── RepoGated             401 GatedRepo: access needs accepting terms or a token
    │   ├── RepoDisabled              403 "Access to this resource is disabled."
    │   ├── RevisionGone              RevisionNotFound: a commit we knew is unreachable
    │   ├── EntryGone                 EntryNotFound: the file is not at that revision
    │   ├── HubRateLimited            429 after our own retries; .retry_after seconds
    │   └── HubUnavailable            5xx / timeouts / network after retries, or a malformed answer
    ├── UpstreamFileError             a file upstream is too large or unreadable (recorded, not fatal)
    └── StoreError                    database problems, schema behind
"""

from __future__ import annotations


class TrackerError(Exception):
    """Root of every error the tracker raises on purpose."""


class ConfigError(TrackerError, ValueError):
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


class UpstreamFileError(TrackerError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class StoreError(TrackerError):
    pass


class SchemaBehind(StoreError):
    """The database schema is older than this version of the tracker needs."""
