"""The daemon walks the Hub-wide change listing every `[poll] listen_every`, whether or not a repo is due:
a push to a repo polled every hour is read at the next walk.

The daemon's tick job is fired by hand, as its scheduler would, on the tracker's injected clock; the
Hub's clock is the stand-in's. Nothing here waits on wall time but the poll workers.
"""

from __future__ import annotations

import datetime as dt

import pytest

from tests.clocks import ManualClock
from tests.core.conftest import config_json
from tests.waiting import wait_for
from tracker.adapters.hub import HubClient
from tracker.app import make_scheduler, make_tracker
from tracker.core.model import RepoId
from tracker.surfaces.daemon import Daemon

REPOS = [RepoId(f"owner{i}/model") for i in range(3)]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def daemon(hub_standin, settings, sleeps):
    for n, repo in enumerate(REPOS):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(num_hidden_layers=n + 1)})
    clock = ManualClock(T0)
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    sleep=sleeps)
    tracker = make_tracker(settings, hub=hub, clock=clock)
    for repo in REPOS:
        tracker.store.repos.add(repo, every=3600.0, now=clock())
    daemon = Daemon(tracker, make_scheduler())
    yield daemon, clock
    daemon.stop()
    tracker.store.close()


def fire(daemon: Daemon) -> None:
    """The scheduler's tick job, once, and the polls it started."""
    daemon.tick()
    assert wait_for(lambda: daemon.cycle.in_flight() == 0)


def test_a_push_to_a_repo_polled_hourly_is_read_at_the_next_walk(hub_standin, daemon):
    daemon, clock = daemon
    fire(daemon)  # every repo's baseline, and the listing's first watermark
    store = daemon.tracker.store
    assert all(r.last_seen_sha for r in store.repos.all())
    pushed = hub_standin.commit(REPOS[1], {"config.json": config_json(vocab_size=31000)})

    clock.now += dt.timedelta(seconds=30)  # before the next walk: nothing is due, nothing is asked
    hub_standin.clear_log()
    fire(daemon)
    assert hub_standin.requests == []
    assert store.repos.get(REPOS[1]).last_seen_sha != pushed

    clock.now += dt.timedelta(seconds=31)  # [poll] listen_every (1m) since the last walk: the next walk
    fire(daemon)
    row = store.repos.get(REPOS[1])
    assert row.last_seen_sha == pushed and store.revisions.get(row.pk, pushed).status == "done"
    paths = [(r.method, r.url_path.split("?")[0]) for r in hub_standin.requests]
    assert paths[0] == ("GET", "/api/models")  # one page of the walk, then the pushed repo alone
    assert {p for _m, p in paths[1:]} >= {f"/{REPOS[1]}/resolve/main/config.json"}
    assert not [p for _m, p in paths if str(REPOS[0]) in p or str(REPOS[2]) in p]


def test_listen_every_0s_turns_the_walks_off(hub_standin, settings, sleeps):
    hub_standin.create_repo(REPOS[0])
    hub_standin.commit(REPOS[0], {"config.json": config_json()})
    clock = ManualClock(T0)
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, sleep=sleeps)
    tracker = make_tracker(settings.changed(poll={"listen_every": 0.0}), hub=hub, clock=clock)
    tracker.store.repos.add(REPOS[0], every=3600.0, now=clock())
    daemon = Daemon(tracker, make_scheduler())
    try:
        fire(daemon)
        hub_standin.commit(REPOS[0], {"config.json": config_json(vocab_size=31000)})
        hub_standin.clear_log()
        for _ in range(3):
            clock.now += dt.timedelta(minutes=5)
            fire(daemon)
        assert hub_standin.requests == []  # no repo due, no walk: the push waits for the hourly check
    finally:
        daemon.stop()
        tracker.store.close()
