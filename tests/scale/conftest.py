"""Fixtures for the scale tests: a tracker and its poll cycle over the Hub stand-in, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import update

from tests.core.conftest import RecordingSleep
from tests.waiting import wait_for
from tracker.adapters.hub import HubClient
from tracker.adapters.hub.budget import HubBudget
from tracker.adapters.settings import Settings
from tracker.adapters.store.tables import repos
from tracker.app import Tracker, make_tracker
from tracker.pipeline.cycle import Cycle


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def scale_settings(hub_standin, db_url) -> Settings:
    return Settings(database={"url": db_url},
                    hub={"endpoint": hub_standin.url, "timeout": 5.0, "budget_api_per_5min": 100_000,
                         "budget_resolvers_per_5min": 100_000},
                    poll={"jitter": 0.0})


@pytest.fixture
def build(hub_standin, sleeps) -> Iterator[Callable[..., tuple[Tracker, Cycle]]]:
    """build(settings, budget=None, **overrides) -> (tracker, cycle); cycles are stopped after the test."""
    cycles: list[Cycle] = []

    def make(settings: Settings, budget: HubBudget | None = None, **overrides: Any) -> tuple[Tracker, Cycle]:
        settings = settings.changed(**overrides)
        budget = budget or HubBudget(settings.hub.budget_api_per_5min, settings.hub.budget_resolvers_per_5min)
        hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout,
                        max_retries=settings.hub.max_retries,
                        max_wait=settings.hub.max_wait, request_deadline=settings.hub.request_deadline,
                        sleep=sleeps, on_request=budget.spend, on_rate_limited=budget.exhausted)
        tracker = make_tracker(settings, hub=hub, auto_upgrade=True)
        cycle = Cycle(settings, tracker.store, hub, tracker.poller, clock=tracker.clock, budget=budget,
                      queue=tracker.queue, workers=2)
        cycles.append(cycle)
        return tracker, cycle

    yield make
    for cycle in cycles:
        cycle.stop()
        cycle.store.close()


def run_cycle(cycle: Cycle, timeout: float = 60.0) -> None:
    """Tick until nothing is due or in flight (the work runs on the cycle's pool)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = cycle.tick()
        if not wait_for(lambda: cycle.in_flight() == 0, timeout=deadline - time.monotonic()):
            break
        if report.claimed == 0:
            return
    raise AssertionError("the cycle did not settle")


def make_due(tracker: Tracker, *repo_ids: str) -> None:
    """Every (or the named) watched repo is due now, as if its interval had passed."""
    stmt = update(repos).values(next_poll_at=datetime(2000, 1, 1, tzinfo=UTC))
    if repo_ids:
        stmt = stmt.where(repos.c.repo_id.in_(repo_ids))
    with tracker.store.db.engine.begin() as conn:
        conn.execute(stmt)
