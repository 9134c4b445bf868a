"""The Hub-wide change listing misbehaving (a page that fails, repeats or skips) ends like a clean run.

Two trackers on their own databases watch the same 12 repos (distinct owners, so the listing is
the cheapest check) on a stand-in that serves 3 models a page. Both read everything, then 5
repos change; the clean one polls twice with a well-behaved listing, the other twice with the
fault. They end with the same revisions, read and done.
"""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from tests.core.conftest import config_json
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import Tracker, make_tracker
from tracker.core.model import RepoId
from tracker.pipeline.changes import ChangeFeed

REPOS = [RepoId(f"owner{i:02d}/model") for i in range(12)]
START = dt.datetime(2026, 5, 1, tzinfo=dt.UTC)


def tracker_on(hub_standin, path) -> Tracker:
    settings = Settings(database={"url": f"sqlite:///{path}"},
                        hub={"endpoint": hub_standin.url, "timeout": 5.0, "max_retries": 2,
                             "budget_api_per_5min": 100_000, "budget_resolvers_per_5min": 100_000})
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    sleep=lambda _s: None)
    return make_tracker(settings, hub=hub, auto_upgrade=True)


def revisions(tracker: Tracker) -> dict[str, list[tuple[str, str]]]:
    return {r.repo_id: [(rev.sha, rev.status) for rev in tracker.store.revisions.of_repo(r.pk)]
            for r in tracker.store.repos.all()}


@pytest.mark.parametrize("fault", [
    pytest.param(("fail", 0, 3), id="first-page-fails"),
    pytest.param(("fail", 1, 3), id="second-page-fails"),
    pytest.param(("repeat", 0, 1), id="a-page-repeats"),
    pytest.param(("repeat", 0, None), id="a-page-repeats-for-ever"),
    pytest.param(("skip", 0, 1), id="a-page-is-skipped"),
])
def test_a_listing_fault_ends_with_the_revisions_of_a_clean_run(hub_standin, tmp_path, fault):
    hub_standin.models_page_size = 3
    for n, repo in enumerate(REPOS):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()}, date=START + dt.timedelta(minutes=n))
    clean, faulty = tracker_on(hub_standin, tmp_path / "clean.sqlite3"), tracker_on(hub_standin, tmp_path / "f.sqlite3")
    for tracker in (clean, faulty):
        for repo in REPOS:
            tracker.store.repos.add(repo, now=tracker.clock())
        assert {r.status for r in tracker.poll()} == {"baseline"}
    changed = REPOS[1::2][:5]
    for n, repo in enumerate(changed):  # an hour later: far past the first watermark and its overlap
        hub_standin.commit(repo, {"config.json": config_json(vocab_size=2000 + n)},
                           date=START + dt.timedelta(hours=1, minutes=n))

    clean_runs = [clean.poll(), clean.poll()]
    assert sorted(r.repo for r in clean_runs[0] if r.new_revisions) == sorted(changed)
    kind, page, times = fault
    hub_standin.listing_faults.add(kind, page, times=times)
    faulty_runs = [faulty.poll(), faulty.poll()]
    hub_standin.listing_faults.clear()

    assert not any(r.error for run in faulty_runs for r in run)
    assert revisions(faulty) == revisions(clean)
    assert all(status == "done" for revs in revisions(faulty).values() for _sha, status in revs)
    assert sum(len(revs) for revs in revisions(clean).values()) == len(REPOS) + len(changed)
    for tracker in (clean, faulty):
        tracker.store.close()


def test_a_listing_that_a_head_contradicts_is_trusted_no_more_until_every_repo_is_checked_again(hub_standin, tmp_path):
    for n, repo in enumerate(REPOS[:4]):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()}, date=START + dt.timedelta(minutes=n))
    tracker = tracker_on(hub_standin, tmp_path / "t.sqlite3")
    for repo in REPOS[:4]:
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    epoch = ChangeFeed(tracker.store, tracker.hub).load().epoch
    # The listing says the first repo moved to a head its HEAD does not know.
    lying = [{"id": REPOS[0], "sha": "f" * 40, "lastModified": "2026-05-01T05:00:00.000Z"}]
    hub_standin.faults.add(re.compile(r"^/api/models$"), body=json.dumps(lying).encode(),
                           headers={"Content-Type": "application/json"})
    hub_standin.clear_log()
    assert [r.status for r in tracker.poll()] == ["unchanged"] * 4
    state = ChangeFeed(tracker.store, tracker.hub).load()
    assert (state.epoch, state.marks) == (epoch + 1, [])
    # The next cycle checks every repo on its own (a HEAD each), whatever the listing says.
    hub_standin.clear_log()
    assert [r.status for r in tracker.poll()] == ["unchanged"] * 4
    heads = sorted(r.path for r in hub_standin.requests if r.method == "HEAD")
    assert heads == sorted(f"/{repo}/resolve/main/config.json" for repo in REPOS[:4])
    tracker.store.close()


def test_an_owner_listing_whose_cursor_repeats_a_page_ends_at_the_second_reading(hub_standin, tmp_path):
    """12 repos of one owner, 3 to a page: a cursor that answers the first page for ever costs two pages, not the
    eleven the listing may take; the repos it did not list are checked on their own."""
    hub_standin.models_page_size = 3
    repos = [RepoId(f"acme/m{n:02d}") for n in range(12)]
    for n, repo in enumerate(repos):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()}, date=START + dt.timedelta(minutes=n))
    tracker = tracker_on(hub_standin, tmp_path / "t.sqlite3")
    for repo in repos:
        tracker.store.repos.add(repo, now=tracker.clock())
    assert {r.status for r in tracker.poll()} == {"baseline"}
    for page in range(20):
        hub_standin.listing_faults.add("repeat", page, times=None)
    hub_standin.clear_log()
    assert {r.status for r in tracker.poll()} == {"unchanged"}
    hub_standin.listing_faults.clear()
    listing = [r for r in hub_standin.requests if r.path == "/api/models"]
    assert [r.query.split("&cursor=")[0] for r in listing] == ["author=acme&expand=sha&expand=lastModified&expand=gated"] * 2
    heads = sorted(r.path.split("/resolve/")[0].strip("/") for r in hub_standin.requests if r.method == "HEAD")
    assert heads == sorted(repos[3:])  # the page read lists the first three (by id); the other nine get a HEAD
    tracker.store.close()
