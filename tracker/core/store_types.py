"""What the store hands the pipeline and the surfaces and takes back, as values: what a computation read of the
advisories, the change listing's row, what a watch rule did, a claimed repo; the rows the pages, the health
reads, the outbox and the API tokens answer with.

``tracker.adapters.store`` builds them from its rows; the pipeline's ``Store`` port (tracker/pipeline/ports.py)
names them, and tests build them by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.core.advisory.record import OsvJson
from tracker.core.model import Finding, RepoId, RepoRow, RepoState, StoredEstimate


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
    why: str = "moved"  # "moved": a new head; "gated": listed as gated; "renamed?": its head listed under another id


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
    last_polled_at: datetime | None = None  # when it was last checked, or vouched for by the change listing
    last_checked: datetime | None = None  # when it was last checked on its own (a HEAD, an owner listing)

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


# -- the pages' reads (tracker.adapters.store.pages) ----------------------------------------------------


@dataclass(frozen=True)
class LatestRevision:
    """The newest revision read of a repo, for the index."""

    sha: str
    date: datetime | None
    title: str
    summary: str | None
    worst_severity: str | None
    baseline: bool
    analysed_at: datetime | None


@dataclass(frozen=True)
class RepoSummary:
    """One line of the index: the repo, its newest revision read, its open advisories."""

    repo: RepoRow
    revisions_read: int
    latest: LatestRevision | None
    open_by_severity: dict[str, int]  # severity -> live, unfixed advisories
    recent: tuple[str | None, ...] = ()  # worst severity of the newest revisions read, oldest first


@dataclass(frozen=True)
class TimelineRevision:
    """A revision as the timeline shows it: findings, and the charted estimator figures."""

    sha: str
    seq: int
    date: datetime | None
    title: str
    status: str
    baseline: bool
    findings: tuple[Finding, ...]
    worst_severity: str | None
    summary: str | None
    estimate: StoredEstimate | None  # only the charted keys (pages.CHART_KEYS); None when the estimator did not rerun


@dataclass(frozen=True)
class AdvisoryLine:
    """An advisory as lists show it (the record itself stays in the store)."""

    id: str
    revision_sha: str | None
    kind: str
    severity: str
    summary: str
    withdrawn: bool
    fixed_sha: str | None
    published: datetime | None
    measured: Any = None  # database_specific.measured (tracker verify), read for one revision's page only


@dataclass(frozen=True)
class ListedAdvisory:
    """An advisory on the list of all: its line, its repo, when it last changed, what it is about."""

    line: AdvisoryLine
    repo_id: str
    modified: datetime | None
    categories: tuple[str, ...]
    codes: tuple[str, ...]  # the finding codes it carries
    libraries: tuple[str, ...]  # the Python packages its findings name (dependencies), lower case


# -- health: `tracker status`, /readyz, /metrics (tracker.adapters.store.health) -------------------------


@dataclass(frozen=True)
class RepoHealthRow:
    """One watched repo as `tracker status` sees it."""

    repo_id: str
    branch: str
    every_seconds: float | None
    state: str
    last_outcome: str | None
    last_polled_at: datetime | None
    last_error: str | None
    defer_until: datetime | None
    lease_owner: str | None
    lease_until: datetime | None
    created_at: datetime
    pending: int  # revisions listed, not read yet
    oldest_pending_listed_at: datetime | None
    newest_sha: str | None  # the newest revision listed
    newest_date: datetime | None  # its commit date upstream
    newest_status: str | None
    newest_baseline: bool
    newest_analysed_at: datetime | None
    newest_advisory: str | None  # the first advisory raised for it, if any
    newest_advisory_at: datetime | None
    next_poll_at: datetime | None = None  # the daemon's own schedule, where the schema has one (migration 0006)
    unreachable_since: datetime | None = None  # every poll since failed with the Hub unreachable (migration 0012)
    last_checked: datetime | None = None  # its last check of its own: a HEAD or an owner listing (migration 0014)


@dataclass(frozen=True)
class DeliveryBacklog:
    pending: int  # queued or being retried
    retrying: int  # pending with at least one failed attempt
    dead: int
    oldest_pending_at: datetime | None


@dataclass(frozen=True)
class FleetFigures:
    revisions_read: int
    revisions_pending: int
    oldest_pending_listed_at: datetime | None
    advisories_by_severity: dict[str, int]  # live (not withdrawn) advisories


@dataclass(frozen=True)
class HubOutage:
    """The polled repos, how many of them the Hub was unreachable for at their last polls, and since when
    the last of those outages began (the Hub unreachable for all of them since then, when all are)."""

    polled: int
    unreachable: int
    since: datetime | None


# -- subscriptions and the outbox (tracker.adapters.store.delivery) --------------------------------------


@dataclass(frozen=True)
class SubscriptionRow:
    id: int
    target: str
    kind: str  # slack|webhook
    url: str = field(repr=False)  # a Slack webhook URL is a credential
    secret: str | None = field(repr=False)
    min_severity: str
    categories: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True)
class DeliveryRow:
    id: int
    subscription_id: int
    webhook_id: str
    event_type: str
    advisory_id: str
    repo_id: str
    severity: str
    record: OsvJson = field(repr=False)  # the record as announced, posted as it is
    state: str  # pending|delivered|dead
    attempts: int
    next_attempt_at: datetime
    leased_until: datetime | None
    last_status: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


# -- API tokens (tracker.adapters.store.tokens) ---------------------------------------------------------


@dataclass(frozen=True)
class TokenRow:
    name: str
    key_id: str
    created_at: datetime
    last_used_at: datetime | None
