"""The composition root: a Tracker closes what make_tracker opened, also when building it fails halfway."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool

from tests.waiting import wait_for
from tracker.adapters.settings import Settings, describe, load_settings, load_with_sources
from tracker.adapters.store import open_store
from tracker.app import make_tracker
from tracker.core.errors import ConfigError, RepoGone
from tracker.core.model import RepoId
from tracker.pipeline.coalescing import PollCoalescer


@dataclass
class Connections:
    """The DBAPI connections every pool opened and closed while the test ran."""

    opened: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)

    @property
    def open_now(self) -> set[int]:
        return set(self.opened) - set(self.closed)


@pytest.fixture
def connections() -> Iterator[Connections]:
    seen = Connections()

    def on_connect(dbapi_connection: object, _record: object) -> None:
        seen.opened.append(id(dbapi_connection))

    def on_close(dbapi_connection: object, _record: object) -> None:
        seen.closed.append(id(dbapi_connection))

    event.listen(Pool, "connect", on_connect)
    event.listen(Pool, "close", on_close)
    yield seen
    event.remove(Pool, "connect", on_connect)
    event.remove(Pool, "close", on_close)


def test_a_bad_hub_endpoint_fails_the_build_and_the_engine_it_opened_is_closed(tmp_path, connections):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": "ftp://hub.example"})
    with pytest.raises(ConfigError) as failed:
        make_tracker(settings)
    assert str(failed.value) == "invalid Hub endpoint 'ftp://hub.example': expected http(s)://host[:port]"
    # The store was opened (the schema was created through it) before the Hub client failed ...
    assert connections.opened
    # ... and every connection it opened is closed, though the traceback still holds the store.
    assert connections.open_now == set()


def test_a_tracker_closes_its_engine_when_its_block_ends(tmp_path, hub_standin, connections):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url})
    with make_tracker(settings) as tracker:
        tracker.store.db.ping()
        assert connections.open_now != set()
    assert connections.open_now == set()


def test_a_store_handed_in_stays_open_for_its_owner(tmp_path, hub_standin, connections):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url})
    store = open_store(settings.database.url, auto_upgrade=True)
    try:
        with make_tracker(settings, store=store) as tracker:
            tracker.store.db.ping()
        assert connections.open_now != set()  # the Tracker did not close what it did not open
        store.db.ping()
    finally:
        store.close()
    assert connections.open_now == set()


def test_the_hub_client_built_here_spends_the_trackers_budget(tmp_path, hub_standin):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url})
    with make_tracker(settings) as tracker:
        with pytest.raises(RepoGone):
            tracker.hub.head(RepoId("acme/not-there"))
        assert (tracker.budget.spent("resolvers"), tracker.budget.spent("api")) == (1, 0)
        cycle = tracker.new_cycle(workers=1)
        try:  # every cycle the Tracker builds claims within that same budget
            assert cycle.budget is tracker.budget
        finally:
            cycle.close()


def test_the_webhook_secret_is_read_once_from_the_settings_and_never_shown():
    env = {"TRACKER_WEBHOOK_SECRET": "s3cret-value"}
    settings, sources = load_with_sources(None, env=env)
    assert settings.hub.webhook_secret == "s3cret-value"
    assert sources["hub.webhook_secret"] == "env TRACKER_WEBHOOK_SECRET"
    assert "s3cret-value" not in repr(settings)
    assert 'webhook_secret = "********"  # env TRACKER_WEBHOOK_SECRET' in describe(settings, sources)
    assert load_settings(None, env={"TRACKER_HUB_WEBHOOK_SECRET": "other"}).hub.webhook_secret == "other"


def test_closing_the_webhook_coalescer_finishes_the_poll_running_and_drops_the_rest():
    running, release, runs = threading.Event(), threading.Event(), []

    def poll(repo_id: str) -> None:
        runs.append(repo_id)
        running.set()
        release.wait(30)

    coalesce = PollCoalescer(poll, workers=1)
    coalesce("acme/a")
    assert wait_for(running.is_set, timeout=30)
    coalesce("acme/a")  # queued behind the running one
    closing = threading.Thread(target=coalesce.close)
    closing.start()
    assert wait_for(lambda: coalesce.closed, timeout=30)  # the queued poll is dropped by now
    release.set()
    closing.join(30)
    assert not closing.is_alive()
    coalesce("acme/b")  # after close: ignored, not an error
    assert runs == ["acme/a"]
