"""What the store hands the pipeline and takes back, as values: what a computation read of the advisories,
the change listing's row, what a watch rule did, a claimed repo.

``tracker.adapters.store`` builds them from its rows; the pipeline's ``Store`` port (tracker/pipeline/ports.py)
names them, and tests build them by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.core.model import RepoId, RepoState


@dataclass(frozen=True)
class AdvisoriesRead:
    """What a computation read of the advisories, for its save to check that it still holds."""

    each: Mapping[str, datetime | None] = field(default_factory=dict)  # id -> modified as read (None: absent)
    # (repo pk, kind) -> every advisory of that kind of that repo, withdrawn ones too, as read: one
    # created, modified or deleted since is a conflict though the save writes none of them.
    kinds: Mapping[tuple[int, str], Mapping[str, datetime]] = field(default_factory=dict)


SeenAdvisories = AdvisoriesRead | Mapping[str, datetime | None]
"""What a computation read: an :class:`AdvisoriesRead`, or only the ``modified`` of each advisory
(None: read as absent). An advisory it writes without having read it must not exist yet."""


@dataclass(frozen=True)
class ListingRow:
    """The ``hub_listing`` row as stored (``marks`` as JSON: the caller checks each item)."""

    epoch: int
    marks: list[Any]
    rate: float
    page_size: int


@dataclass(frozen=True)
class Moved:
    """A watched repo a walk saw move: made due now."""

    pk: int
    key: str  # its id in lower case
    sha: str | None  # the head the listing named


@dataclass(frozen=True)
class Applied:
    """What ``RuleStore.apply`` (tracker/adapters/store/rules.py) did to the watch list."""

    added: tuple[RepoId, ...]
    dropped: tuple[RepoId, ...]  # gone past the rule's grace


@dataclass(frozen=True)
class DueRepo:
    """A claimed repo, with what the cycle needs to decide how to check it."""

    pk: int
    repo_id: RepoId
    branch: str
    every_seconds: float | None
    state: RepoState
    hub_uid: str | None
    renamed_to: str | None
    last_seen_sha: str | None
    poll_requests: int  # the webhook requests counted when it was claimed
    poll_served: int
    listing_epoch: int | None = None  # the change-listing chain it was last known current in
    last_polled_at: datetime | None = None  # when it was last checked

    @property
    def requested(self) -> bool:
        """A Hub webhook asked for a poll since the last one: check it fully, not through a listing."""
        return self.poll_requests > self.poll_served

    @property
    def owner(self) -> str:
        return self.repo_id.split("/", 1)[0] if "/" in self.repo_id else ""

    @property
    def checkable(self) -> bool:
        """Whether an owner listing can tell that this repo did not change: read before, active, on
        ``main``, not renamed, not asked for by a webhook. :func:`tracker.adapters.store.schedule.checkable_sql`
        is the same rule."""
        return (self.state == RepoState.ACTIVE and self.hub_uid is not None and self.last_seen_sha is not None
                and self.branch == "main" and self.renamed_to is None and not self.requested and bool(self.owner))
