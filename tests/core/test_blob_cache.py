"""The blob cache (small tracked files by content id) kept within ``[limits] blob_cache_bytes`` and
``blob_cache_age``, never dropping what the latest revision of a watched repo lists.

Before: every file version ever read stayed in the database. Three revisions of two repos are
polled from the stand-in; the cache is trimmed by size, then by age; a dropped version that a
later read needs is fetched from the Hub again.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.adapters.store.tables import blobs
from tracker.app import make_tracker, utcnow

REPOS = ("acme/one", "acme/two")


def cached(tracker) -> dict[str, int]:
    with tracker.store.db.read() as conn:
        return {r.content_id: r.size for r in conn.execute(select(blobs.c.content_id, blobs.c.size))}


def latest_ids(tracker, repo: str) -> set[str]:
    pk = tracker.store.repos.get(repo).pk
    head = max(tracker.store.revisions.of_repo(pk), key=lambda r: r.seq)
    return {f.content_id for f in head.snapshot.files}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """A stand-in and a database in which both repos were polled through three revisions of config.json (README
    unchanged, and the same in both): (the stand-in, the database file)."""
    from hubstandin import HubStandin

    root = tmp_path_factory.mktemp("blob-cache")
    hub = HubStandin(root / "hub").start()
    with tracker_on(hub, root / "tracker.sqlite3") as tracker:
        for repo in REPOS:
            hub.create_repo(repo)
            tracker.store.repos.add(repo, now=tracker.clock())
        for version in range(3):
            for repo in REPOS:
                config = {"model_type": "bert", "hidden_size": 64 * (version + 1), "repo": repo}
                hub.commit(repo, {"config.json": json.dumps(config).encode(), "README.md": b"# model\n"})
            assert all(r.error is None for r in tracker.poll(list(REPOS)))
    try:
        yield hub, root / "tracker.sqlite3"
    finally:
        hub.stop(wait=False)


def tracker_on(hub, database: Path, clock=utcnow, **limits):
    settings = Settings(database={"url": f"sqlite:///{database}"},
                        hub={"endpoint": hub.url, "timeout": 60.0}).changed(**limits)
    return make_tracker(settings, hub=HubClient(settings.hub.endpoint, timeout=60.0, sleep=lambda _s: None),
                        clock=clock)


def polled(history, tmp_path, clock=utcnow, **limits):
    """A tracker on a copy of the history's database."""
    hub, database = history
    shutil.copyfile(database, tmp_path / "tracker.sqlite3")
    return tracker_on(hub, tmp_path / "tracker.sqlite3", clock=clock, **limits)


def test_over_its_size_the_cache_keeps_only_what_the_latest_revisions_list(history, tmp_path):
    with polled(history, tmp_path, limits={"blob_cache_bytes": 1}) as tracker:
        before = cached(tracker)
        keep = (latest_ids(tracker, REPOS[0]) | latest_ids(tracker, REPOS[1])) & set(before)
        assert len(before) == 7 and len(keep) == 3  # three configs per repo and their README; the latest ones

        dropped = tracker.evict_blobs()

        assert dropped == (4, sum(size for cid, size in before.items() if cid not in keep))
        assert set(cached(tracker)) == keep
        assert tracker.evict_blobs() == (0, 0)  # what is needed stays, whatever the limit


def test_past_its_age_a_version_goes_and_is_fetched_again_when_needed(history, tmp_path):
    hub_standin = history[0]
    now = [utcnow()]
    with polled(history, tmp_path, clock=lambda: now[0]) as tracker:
        before = cached(tracker)
        assert tracker.evict_blobs() == (0, 0)  # within 1 GiB and 90 days
        now[0] += timedelta(days=91)
        keep = latest_ids(tracker, REPOS[0]) | latest_ids(tracker, REPOS[1])

        assert tracker.evict_blobs()[0] == 4
        assert set(cached(tracker)) == keep & set(before)

        hub_standin.clear_log()
        tracker.reanalyse(REPOS[0])  # the first revisions' configs are read from the Hub again
        reads = sorted(r.path.rsplit("/", 1)[1] for r in hub_standin.requests if "/resolve/" in r.path)
        assert reads == ["config.json", "config.json"]
