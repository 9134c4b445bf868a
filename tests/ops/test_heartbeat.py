"""The daemon is never silent for longer than 10 minutes: a heartbeat per cycle, capped at 10 minutes, with a
line even when nothing was polled. The scheduler's own trigger gives the fire times (no minutes slept)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from tracker.app import make_scheduler
from tracker.core.model import PollOutcome, RepoId
from tracker.pipeline.polling import PollResult
from tracker.surfaces.daemon import Daemon


def fire_times(daemon: Daemon, count: int) -> list[datetime]:
    """The heartbeat job's next ``count`` fire times from now, from the trigger the scheduler runs it on."""
    trigger = daemon.scheduler.get_job("heartbeat").trigger
    times: list[datetime] = []
    previous = None
    now = datetime.now(UTC)
    for _ in range(count):
        fire = trigger.get_next_fire_time(previous, now)
        times.append(fire)
        previous, now = fire, fire
    return times


@pytest.fixture
def started(settings, make):
    """A daemon with a given `[poll] every`: started (its scheduler running, nothing watched), or only built over
    one watched repo (so no tick polls behind the test's back); stopped at teardown."""
    daemons: list[Daemon] = []

    def start(every: float, *, run: bool = True) -> Daemon:
        tracker = make(settings, poll={"every": every})
        if not run:
            tracker.store.repos.add(RepoId("acme/quiet"), now=datetime.now(UTC))
        daemon = Daemon(tracker, make_scheduler())
        daemons.append(daemon)
        if run:
            daemon.start()
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop()
        daemon.tracker.store.close()


@pytest.mark.parametrize(("every", "gap"), [(3600.0, 600.0), (86400.0, 600.0), (300.0, 300.0), (60.0, 60.0)])
def test_heartbeats_come_once_a_cycle_and_at_least_every_10_minutes(started, every, gap):
    daemon = started(every)
    times = fire_times(daemon, 7)
    assert [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)] == [gap] * 6
    assert daemon.scheduler.get_job("heartbeat").next_run_time == times[0]


def test_a_heartbeat_with_no_poll_still_says_so(started, caplog):
    daemon = started(3600.0, run=False)
    daemon.reconcile()
    caplog.set_level(logging.INFO, logger="tracker.daemon")
    caplog.clear()
    # What the cycle tells the daemon after a poll (its on_result callback), without running one.
    daemon._report(PollResult(repo=RepoId("acme/quiet"), status=PollOutcome.UNCHANGED))  # noqa: SLF001
    daemon.beat()  # the heartbeat after a cycle of the hourly schedule
    daemon.beat()  # ten minutes later: no repo was due
    daemon.beat()
    said = [r.getMessage() for r in caplog.records if r.name == "tracker.daemon"]
    assert said == [
        "heartbeat: 1 repo watched; last 10m: 1 poll (1 unchanged), 0 new revisions, 0 advisories; 0 revisions pending",
        "heartbeat: 1 repo watched; last 10m: 0 polls; 0 revisions pending",
        "heartbeat: 1 repo watched; last 10m: 0 polls; 0 revisions pending",
    ]
