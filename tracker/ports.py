"""What the orchestrators depend on, as small Protocols: the Hub, the clock, OSV lookups.

The implementations live at the edges (``tracker.hub.HubClient``, ``tracker.osvdev.OsvClient``,
``tracker.store.SqlStore``); tests may pass anything with the same shape.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from tracker.hub import CommitListing, Head, RepoInfo
from tracker.hub.client import RejectedPath
from tracker.model import RepoId, Snapshot

Clock = Callable[[], datetime]


class HubReader(Protocol):
    """Read-only access to model repos on a Hub: heads, listings, trees, capped file and range reads."""

    endpoint: str

    def deadline(self, seconds: float) -> AbstractContextManager[None]:
        """Every request of this thread inside the block ends within ``seconds`` from now."""
        ...

    def head(self, repo: RepoId, branch: str = "main") -> Head: ...

    def repo_info(self, repo: RepoId, revision: str | None = None) -> RepoInfo: ...

    def commits_since(self, repo: RepoId, branch: str, since: str | Collection[str] | None, *,
                      limit: int | None = None) -> CommitListing: ...

    def snapshot(self, repo: RepoId, sha: str) -> Snapshot: ...

    def snapshot_checked(self, repo: RepoId, sha: str) -> tuple[Snapshot, tuple[RejectedPath, ...]]: ...

    def read_file(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> bytes: ...

    def read_range(self, repo: RepoId, sha: str, path: str, start: int, end: int) -> bytes: ...

    def safetensors_header(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> dict[str, Any]: ...


class OsvBatch(Protocol):
    vulns: Any

    @property
    def ok(self) -> bool: ...


class OsvLookup(Protocol):
    """Known vulnerabilities of (ecosystem, package, version) triples (OSV.dev's querybatch)."""

    def querybatch(self, queries: Sequence[tuple[str, str, str]]) -> OsvBatch: ...
