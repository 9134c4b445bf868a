"""Polling: how the polls are doing (the backlog, the Hub's outages, each repo's health), for `tracker status`,
the daemon's log lines, ``/readyz`` and ``/metrics``. The polls themselves are the Tracker's cycles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from tracker.core.store_types import DeliveryBacklog, FleetFigures, HubOutage, RepoHealthRow

if TYPE_CHECKING:
    from tracker.app import Tracker

__all__ = ["Polling", "Figures"]


@dataclass(frozen=True)
class Figures:
    """The backlog figures /metrics serves, read from the database now."""

    deliveries: DeliveryBacklog
    fleet: FleetFigures
    stalest: list[tuple[str, datetime]]  # the repos longest without a successful poll, stalest first
    watched: int


@dataclass(frozen=True)
class Polling:
    """The state of the polls, as the database holds it (every process's polls)."""

    tracker: Tracker

    def ping(self) -> None:
        """Raises a StoreError when the database does not answer."""
        self.tracker.store.db.ping()

    def pending_revisions(self) -> int:
        """Revisions listed and not read yet."""
        return self.tracker.store.health.pending_revisions()

    def next_poll_at(self, repo_id: str) -> datetime | None:
        return self.tracker.store.health.next_poll_at(repo_id)

    def hub_outage(self) -> HubOutage:
        return self.tracker.store.health.hub_outage()

    def repo_health(self) -> list[RepoHealthRow]:
        return self.tracker.store.health.repos()

    def deliveries(self) -> DeliveryBacklog:
        return self.tracker.store.health.deliveries()

    def figures(self, *, max_repos: int) -> Figures:
        """The backlog figures; ``max_repos``: the most repos listed in ``stalest``."""
        reads = self.tracker.store.health
        stalest, watched = reads.last_successes(limit=max_repos)
        return Figures(deliveries=reads.deliveries(), fleet=reads.fleet(), stalest=stalest, watched=watched)

    def watched_count(self) -> int:
        return len(self.tracker.store.repos.all())

    def hub_endpoint(self) -> str:
        return self.tracker.hub.endpoint
