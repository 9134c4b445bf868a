"""What the Hub answers, as values: heads, repo facts, listings, and the paths a snapshot left out.

``tracker.adapters.hub.HubClient`` builds them from the Hub's answers; the pipeline's ``HubReader`` port
(tracker/pipeline/ports.py) returns them, and tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tracker.core.model import Commit, CommitSha, RepoId

WINDOW_SECONDS = 300.0  # the Hub counts requests per rate-limit bucket in fixed windows of 5 minutes


@dataclass(frozen=True)
class Head:
    """A branch head as the cheapest request reports it."""

    sha: CommitSha
    renamed_to: RepoId | None = None  # the Hub redirected the request to this id


@dataclass(frozen=True)
class RepoInfo:
    repo_id: RepoId  # as the Hub answers it (differs from the asked id after a rename)
    uid: str | None  # the Hub's internal id: a repo deleted and created again gets a new one
    sha: CommitSha | None
    private: bool
    gated: bool | str


@dataclass(frozen=True)
class OwnerListing:
    """An owner's models with their head commits, as one listing (``list_models(author=…)``) reports them."""

    heads: dict[str, CommitSha | None]  # repo id, lower-cased -> head of the default branch (None: empty repo)
    complete: bool  # False when the page cap stopped the walk before the last page
    pages: int
    gated: frozenset[str] = frozenset()  # repo ids, lower-cased, listed as gated ("auto" or "manual")


@dataclass(frozen=True)
class ListedModel:
    """One model of the Hub-wide change listing."""

    repo_id: RepoId  # as the Hub spells it
    sha: CommitSha | None  # head of the default branch (None: an empty repo)
    last_modified: datetime  # the Hub's clock
    gated: bool = False  # listed as gated ("auto" or "manual")


@dataclass(frozen=True)
class ChangeListing:
    """The models changed most recently, newest first, as far back as a walk went.

    ``reached``: a page's oldest model is older than the stop asked for (or the listing ended),
    so every model changed since then is here, unless a page was skipped. ``repeated``: models
    listed again (a page served twice; ignored). ``disorder``: a model newer than the one
    listed before it (the listing is not in ``lastModified`` order: clocks disagree).
    """

    models: tuple[ListedModel, ...]
    pages: int
    reached: bool
    repeated: int = 0
    disorder: bool = False
    page_size: int = 0  # the most models one page held

    @property
    def top(self) -> datetime | None:
        """The newest ``lastModified`` listed (the next walk's watermark)."""
        return max((m.last_modified for m in self.models), default=None)


@dataclass(frozen=True)
class MatchListing:
    """The models a filtered listing matched, in the listing's order."""

    repo_ids: tuple[RepoId, ...]
    pages: int
    complete: bool  # False when ``max_items`` stopped the walk


@dataclass(frozen=True)
class CommitListing:
    """New commits on a branch, oldest first, and whether the walk met ``since``."""

    commits: tuple[Commit, ...]
    reached_since: bool
    pages: int
    truncated: bool = False  # stopped at ``limit`` commits before meeting ``since``


@dataclass(frozen=True)
class RejectedPath:
    """A tree entry left out of a snapshot because its path is unsafe to request."""

    path: str
    reason: str
