"""Fixtures for the scale tests: a tracker and its poll cycle over the Hub stand-in, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
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
    return Settings(database_url=db_url, hub_endpoint=hub_standin.url, hub_timeout=5.0, poll_jitter=0.0,
                    hub_budget_api=100_000, hub_budget_resolvers=100_000)


@pytest.fixture
def build(hub_standin, sleeps) -> Iterator[Callable[..., tuple[Tracker, Cycle]]]:
    """build(settings, budget=None, **overrides) -> (tracker, cycle); cycles are stopped after the test."""
    cycles: list[Cycle] = []

    def make(settings: Settings, budget: HubBudget | None = None, **overrides: Any) -> tuple[Tracker, Cycle]:
        settings = replace(settings, **overrides)
        budget = budget or HubBudget(settings.hub_budget_api, settings.hub_budget_resolvers)
        hub = HubClient(settings.hub_endpoint, timeout=settings.hub_timeout, max_retries=settings.hub_max_retries,
                        max_wait=settings.hub_max_wait, request_deadline=settings.hub_request_deadline,
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
