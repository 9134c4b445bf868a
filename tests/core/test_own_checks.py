"""Every upstream surprise is seen: named polls check each repo on its own, and every repo gets a check of
its own once per its interval, whatever the Hub-wide change listing says.

Seven watched repos (distinct owners, so each check of its own is a HEAD) and their baselines; then a
deletion, a gating, a rename, a switch to private, a squash with the same content, a squash followed
by a real change, and a normal push. The listing shows the three pushes (new heads), the gating
(``expand=gated``) and the rename (the head under another id); only a check of its own shows the deletion
and the switch to private. Time is the tracker's injected clock; the Hub's is the stand-in's.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from tests.clocks import ManualClock
from tests.core.conftest import config_json
from tracker.adapters.hub import HubClient
from tracker.adapters.hub.budget import HubBudget
from tracker.adapters.store.tables import repos
from tracker.app import make_tracker
from tracker.core.model import RepoId
from tracker.pipeline.cycle import Cycle

DELETED, GATED, RENAMED, PRIVATE = (RepoId("del/model"), RepoId("gate/model"), RepoId("ren/model"),
                                    RepoId("priv/model"))
SQUASHED, SQUASH_CHANGED, PUSHED = RepoId("sq/model"), RepoId("sqc/model"), RepoId("push/model")
SEVEN = [DELETED, GATED, RENAMED, PRIVATE, SQUASHED, SQUASH_CHANGED, PUSHED]
T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def surprised(hub_standin, settings, sleeps):
    """The seven repos watched `--every 1m` and read once at T0; then each one's surprise upstream."""
    for n, repo in enumerate(SEVEN):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(num_hidden_layers=n + 1)})
    clock = ManualClock(T0)
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    max_wait=settings.hub.max_wait, sleep=sleeps)
    tracker = make_tracker(settings, hub=hub, clock=clock)
    for repo in SEVEN:
        tracker.store.repos.add(repo, every=60.0, now=clock())
    assert {r.status for r in tracker.poll()} == {"baseline"}
    hub_standin.delete_repo(DELETED)
    hub_standin.set_gated(GATED, True)
    hub_standin.rename(RENAMED, "ren/model-renamed")
    hub_standin.set_private(PRIVATE, True)
    hub_standin.squash(SQUASHED)
    hub_standin.squash(SQUASH_CHANGED)
    changed = hub_standin.commit(SQUASH_CHANGED, {"config.json": config_json(vocab_size=32000)})
    pushed = hub_standin.commit(PUSHED, {"config.json": config_json(vocab_size=31000)})
    yield tracker, clock, {SQUASH_CHANGED: changed, PUSHED: pushed}
    tracker.store.close()


def lines(results) -> dict[str, tuple[str, list[str], int]]:
    return {r.repo: (r.status.value, r.events, r.new_revisions) for r in results}


EVENTS = {
    DELETED: ("gone", ["deleted"], 0),
    GATED: ("gated", ["gated"], 0),
    RENAMED: ("unchanged", ["renamed"], 0),
    PRIVATE: ("gone", ["deleted"], 0),  # the Hub answers a private repo as it does a deleted one
}
PUSHES = {
    SQUASHED: ("new", ["history_rewritten"], 1),
    SQUASH_CHANGED: ("new", ["history_rewritten"], 1),
    PUSHED: ("new", [], 1),
}


def test_a_poll_naming_the_seven_records_every_event_and_both_new_revisions(hub_standin, surprised):
    tracker, clock, new = surprised
    clock.now += dt.timedelta(seconds=10)  # well within every repo's interval: no own check is due
    hub_standin.clear_log()
    results = tracker.poll(SEVEN)
    assert lines(results) == {**EVENTS, **PUSHES}
    kinds = sorted((e.kind, e.repo_id) for e in tracker.store.events.all())
    assert kinds == sorted([("deleted", DELETED), ("gated", GATED), ("renamed", RENAMED), ("deleted", PRIVATE),
                            ("history_rewritten", SQUASHED), ("history_rewritten", SQUASH_CHANGED)])
    advised = {a.repo_id for a in tracker.store.advisories.find(since=T0, include_withdrawn=False, versions=False)}
    assert {DELETED, GATED, RENAMED, PRIVATE, SQUASHED, SQUASH_CHANGED} <= advised
    for repo, sha in new.items():
        row = tracker.store.repos.get(repo)
        assert row.last_seen_sha == sha and tracker.store.revisions.get(row.pk, sha).status == "done"
    # Each named repo was asked with a HEAD of its own; no listing vouched for any of them.
    assert not [r for r in hub_standin.requests if r.url_path.startswith("/api/models?")]
    heads = {r.url_path for r in hub_standin.requests if r.method == "HEAD" and r.url_path.endswith("/main/config.json")}
    assert {f"/{repo}/resolve/main/config.json" for repo in SEVEN} <= heads


def test_without_names_the_listing_reads_the_pushes_and_the_own_checks_find_the_rest(hub_standin, surprised):
    tracker, clock, new = surprised
    clock.now += dt.timedelta(seconds=30)  # before the 1m interval: the listing's doing only
    before = tracker.poll()
    # The listing shows the three new heads, the gated flag (expand=gated) and the renamed repo's head under
    # its new id: each of those repos is checked at once. A deleted or private repo is simply not listed.
    listed = {GATED: EVENTS[GATED], RENAMED: EVENTS[RENAMED]}
    assert lines(before) == {DELETED: ("unchanged", [], 0), PRIVATE: ("unchanged", [], 0), **listed, **PUSHES}
    assert sorted(e.kind for e in tracker.store.events.all()) == ["gated", "history_rewritten", "history_rewritten",
                                                                  "renamed"]
    for repo in (DELETED, PRIVATE):
        assert tracker.store.repos.get(repo).last_checked == T0  # vouched for, not checked

    clock.now += dt.timedelta(seconds=60)  # past the interval: each repo is checked on its own
    after = tracker.poll()
    assert lines(after) == {DELETED: EVENTS[DELETED], PRIVATE: EVENTS[PRIVATE], GATED: ("gated", [], 0),
                            RENAMED: ("unchanged", [], 0), **{r: ("unchanged", [], 0) for r in PUSHES}}
    assert sorted(e.kind for e in tracker.store.events.all()) == sorted(
        ["deleted", "deleted", "gated", "renamed", "history_rewritten", "history_rewritten"])
    for repo in SEVEN:
        assert tracker.store.repos.get(repo).last_checked == clock.now


def test_a_repo_whose_model_info_lists_a_million_files_is_pollable(hub_standin, settings, make):
    """The identity check asks only for what it needs (expand=sha, gated, private), never the siblings list."""
    repo = RepoId("huge/model")
    hub_standin.create_repo(repo)
    hub_standin.commit(repo, {"config.json": config_json()})
    hub_standin.extra_siblings[repo] = 1_200_000  # 48 MB of model info, with the siblings
    tracker = make(settings)
    tracker.store.repos.add(repo, now=tracker.clock())
    (result,) = tracker.poll()
    assert (result.status, result.error) == ("baseline", None)
    hub_standin.delete_repo(repo)
    hub_standin.create_repo(repo)  # a new repo under the same name: the identity check tells
    hub_standin.commit(repo, {"config.json": config_json(vocab_size=31000)})
    hub_standin.extra_siblings[repo] = 1_200_000
    (result,) = tracker.poll()
    assert result.events == ["recreated", "history_rewritten"] and result.error is None
    infos = [r.query for r in hub_standin.requests if r.path == f"/api/models/{repo}"]
    assert infos and set(infos) == {"expand=sha&expand=gated&expand=private"}
    tracker.store.close()


def test_a_gating_seen_by_an_owner_listing_is_checked_on_its_own(hub_standin, settings, make):
    """Owner listings count as the repos' own checks: they ask for `gated`, and a gated repo gets a HEAD."""
    repos = [RepoId(f"acme/m{n}") for n in range(3)]
    for n, repo in enumerate(repos):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(num_hidden_layers=n + 1)})
    tracker = make(settings)
    for repo in repos:
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    hub_standin.set_gated(repos[1], True)
    hub_standin.clear_log()
    results = tracker.poll(None)
    assert lines(results) == {repos[0]: ("unchanged", [], 0), repos[1]: ("gated", ["gated"], 0),
                              repos[2]: ("unchanged", [], 0)}
    assert [(r.method, r.url_path) for r in hub_standin.requests] == [
        ("GET", "/api/models?author=acme&expand=sha&expand=lastModified&expand=gated"),
        ("HEAD", f"/{repos[1]}/resolve/main/config.json")]
    tracker.store.close()


def test_a_budget_too_small_stretches_every_interval_evenly_and_says_so(settings, make, caplog):
    tracker = make(settings, poll={"every": 3600.0})
    now = tracker.clock()
    with tracker.store.db.engine.begin() as conn:
        conn.execute(repos.insert(), [{"repo_id": f"owner{i:05d}/model", "branch": "main", "state": "active",
                                       "created_at": now} for i in range(10_000)])
    budget = HubBudget(100_000, 1000 / 3)  # 300 resolvers requests per 5 minutes, a tenth kept for bursts
    cycle = Cycle(tracker.settings, tracker.store, tracker.hub, tracker.poller, clock=tracker.clock, budget=budget,
                  queue=tracker.queue)
    caplog.set_level(logging.INFO, logger="tracker.cycle")
    try:
        assert cycle.check_budget() is False
        assert cycle.check_budget() is False  # said once
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
            "10,000 repos every 1h need 833 resolver requests per 5 min; the budget allows 300: each repo is "
            "checked on its own every 2h47m"]
        assert cycle.own_interval(RepoId("owner00001/model"), None) == pytest.approx(3600 * (10_000 / 12) / 300)
    finally:
        cycle.close()
        tracker.store.close()


def test_the_listings_ask_for_private_only_with_a_token(hub_standin, sleeps):
    hub_standin.create_repo("acme/m")
    hub_standin.commit("acme/m", {"config.json": config_json()})
    for token, expand in ((False, "expand=sha&expand=lastModified&expand=gated"),
                          ("hf_reader", "expand=sha&expand=lastModified&expand=gated&expand=private")):
        hub_standin.clear_log()
        client = HubClient(hub_standin.url, token=token, sleep=sleeps)
        assert client.owner_heads("acme", max_pages=1).heads == {"acme/m": hub_standin.head("acme/m")}
        client.recent_models(stop_before=None, max_pages=1)
        assert [r.query for r in hub_standin.requests] == [
            f"author=acme&{expand}", f"sort=lastModified&direction=-1&{expand}"]
