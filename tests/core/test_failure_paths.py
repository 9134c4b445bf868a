"""The failure paths of processing and polling, in-process, over the in-memory Hub (tests/fakehub.py).

A step that raises is a bug we cannot write content for (every parser is bounded), so those
tests put the fault in with monkeypatch: the point is what the pipeline does around it.
"""

from __future__ import annotations

import json

import pytest

from tests.fakehub import FakeHub
from tracker.adapters.hub.budget import HubBudget
from tracker.adapters.settings import Settings
from tracker.app import Tracker, make_tracker
from tracker.core.errors import HubUnavailable, RevisionGone, StoreBusy
from tracker.core.model import PollOutcome, RepoId, RevisionStatus
from tracker.pipeline import analysis

REPO = RepoId("acme/tiny")
CONFIG = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6,
          "num_attention_heads": 12, "intermediate_size": 1536, "vocab_size": 30522,
          "max_position_embeddings": 512}


@pytest.fixture
def hub() -> FakeHub:
    hub = FakeHub()
    hub.commit(REPO, {"config.json": CONFIG, "README.md": "---\nlicense: mit\n---\n"}, title="first")
    return hub


@pytest.fixture
def tracker(hub: FakeHub, tmp_path) -> Tracker:
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"}, hub={"endpoint": hub.endpoint},
                        poll={"max_attempts": 2})
    budget = HubBudget(settings.hub.budget_api_per_5min, settings.hub.budget_resolvers_per_5min)
    hub.on_request, hub.on_rate_limited = budget.spend, budget.exhausted  # as make_hub wires a real client
    tracker = make_tracker(settings, hub=hub, budget=budget, auto_upgrade=True)
    tracker.store.repos.add(REPO, now=tracker.clock())
    [baseline] = tracker.poll()
    assert baseline.status == PollOutcome.BASELINE
    return tracker


def revisions(tracker: Tracker) -> list[tuple[str, str]]:
    pk = tracker.store.repos.get(REPO).pk
    return [(r.sha, r.status) for r in tracker.store.revisions.of_repo(pk)]


def failed(tracker: Tracker, sha: str) -> list[dict]:
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, sha)
    assert row is not None and row.status == RevisionStatus.DONE
    return [f.evidence for f in row.findings if f.code == "analysis.failed"]


def boom(*args, **kwargs):
    raise RuntimeError("a bug\nwith a second line")


@pytest.mark.parametrize("step", ["diff", "findings", "estimate"])
def test_a_step_that_raises_is_an_analysis_failed_finding_and_the_revision_is_done(
        hub, tracker, monkeypatch, step) -> None:
    target = {"diff": (analysis, "diff_revisions"), "findings": (analysis, "analyse_change"),
              "estimate": (analysis.RevisionAnalyst, "_estimate")}[step]
    monkeypatch.setattr(*target, boom)
    new = hub.commit(REPO, {"config.json": dict(CONFIG, vocab_size=1000)}, title="second")
    [result] = tracker.poll()
    assert (result.status, result.processed, result.error) == (PollOutcome.NEW, 1, None)
    assert failed(tracker, new) == [{"step": step, "exception": "RuntimeError", "reason": "RuntimeError: a bug"}]


def test_a_transient_hub_failure_leaves_the_revision_pending_then_gives_up(hub, tracker) -> None:
    new = hub.commit(REPO, {"config.json": dict(CONFIG, vocab_size=1000)}, title="second")
    hub.fail["snapshot"] = HubUnavailable("the Hub is down")
    [first] = tracker.poll()
    assert (first.status, first.error) == (PollOutcome.ERROR, "the Hub is down")
    assert revisions(tracker)[-1] == (new, RevisionStatus.PENDING)
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, new)
    assert row.attempts == 1
    [second] = tracker.poll()  # poll.max_attempts = 2: completed with what could be read, and here nothing
    assert (second.status, second.error) == (PollOutcome.ERROR, "the Hub is down")
    assert revisions(tracker)[-1] == (new, RevisionStatus.UNREACHABLE)
    hub.fail.clear()
    newer = hub.commit(REPO, {"config.json": dict(CONFIG, vocab_size=2000)}, title="third")
    [third] = tracker.poll()  # the one given up on no longer holds the next back
    assert (third.status, third.processed) == (PollOutcome.NEW, 1)
    assert revisions(tracker)[-2:] == [(new, RevisionStatus.UNREACHABLE), (newer, RevisionStatus.DONE)]


def test_a_revision_rewritten_away_is_unreachable_and_the_next_one_is_processed(hub, tracker) -> None:
    gone = hub.commit(REPO, {"config.json": dict(CONFIG, vocab_size=1000)}, title="second")
    kept = hub.commit(REPO, {"config.json": dict(CONFIG, vocab_size=2000)}, title="third")
    hub.fail["snapshot"] = RevisionGone(f"{REPO}@{gone[:12]}: not found")
    hub.fail_times["snapshot"] = 1
    [result] = tracker.poll()
    assert (result.status, result.processed) == (PollOutcome.NEW, 1)
    assert revisions(tracker)[-2:] == [(gone, RevisionStatus.UNREACHABLE), (kept, RevisionStatus.DONE)]


def test_a_busy_store_is_a_busy_poll_not_an_error(hub, tracker, monkeypatch) -> None:
    hub.commit(REPO, {"config.json": dict(CONFIG, vocab_size=1000)}, title="second")

    def locked(*args, **kwargs):
        raise StoreBusy("the database at t.sqlite3 is locked by another process\n(waited 30 s)")

    monkeypatch.setattr(tracker.store.revisions, "save_report", locked)
    result = tracker.poller.poll_repo(REPO)  # one poll (a cycle would try the repo again, as it should)
    assert (result.status, result.error) == (PollOutcome.BUSY,
                                             "the database at t.sqlite3 is locked by another process")
    assert revisions(tracker)[-1][1] == RevisionStatus.PENDING  # read again by the next poll


def test_a_bug_in_a_poll_costs_that_repo_only(hub, tracker, monkeypatch) -> None:
    other = RepoId("acme/other")
    hub.commit(other, {"config.json": CONFIG})
    tracker.store.repos.add(other, now=tracker.clock())
    real = tracker.poller._poll_guarded  # noqa: SLF001 - the bug goes into one repo's poll, inside the guard

    def buggy(repo, *args, **kwargs):
        if repo.repo_id == REPO:
            raise KeyError("oops")
        return real(repo, *args, **kwargs)

    monkeypatch.setattr(tracker.poller, "_poll_guarded", buggy)
    results = {r.repo: (r.status, r.error) for r in (tracker.poller.poll_repo(REPO), tracker.poller.poll_repo(other))}
    assert results == {REPO: (PollOutcome.ERROR, "internal error: 'oops'"), other: (PollOutcome.BASELINE, None)}
    assert tracker.store.schedule.lease_of(tracker.store.repos.get(REPO).pk)[0] is None  # the lease was released


def test_a_repo_deleted_upstream_is_gone_with_one_event(hub, tracker) -> None:
    del hub.repos[REPO]
    [first] = tracker.poll()
    [second] = tracker.poll()
    assert (first.status, first.events, second.status, second.events) == (
        PollOutcome.GONE, ["deleted"], PollOutcome.GONE, [])


def test_a_repo_never_read_and_not_on_the_hub_is_not_found(hub, tracker) -> None:
    missing = RepoId("acme/missing")
    tracker.store.repos.add(missing, now=tracker.clock())
    result = tracker.poller.poll_repo(missing)
    assert (result.status, result.error, result.events) == (
        PollOutcome.NOT_FOUND, "not found on the Hub (check the id; private and gated repos need HF_TOKEN)", [])


def test_the_fake_hub_answers_the_port_as_the_stand_in_does(hub) -> None:
    """The fake's own contract, so that tests over it mean something."""
    [first] = [r.commit.sha for r in hub.repos[REPO].history]
    second = hub.commit(REPO, {"tokenizer_config.json": "{}"})
    assert hub.head(REPO).sha == second
    listing = hub.commits_since(REPO, "main", first)
    assert ([c.sha for c in listing.commits], listing.reached_since) == ([second], True)
    assert hub.commits_since(REPO, "main", "f" * 40).reached_since is False
    assert [f.path for f in hub.snapshot(REPO, second).files] == ["README.md", "config.json", "tokenizer_config.json"]
    assert json.loads(hub.read_file(REPO, second, "config.json", max_bytes=10_000)) == CONFIG
    assert hub.owner_heads("ACME", max_pages=1).heads == {"acme/tiny": second}


# -- the cycle's owner listing (tracker/pipeline/cycle.py) ---------------------------------------------


@pytest.fixture
def owners(hub: FakeHub, tracker: Tracker) -> tuple[FakeHub, Tracker]:
    """Two repos of one owner, both read once; the Hub-wide change listing unavailable, so the owner's is used."""
    hub.commit(OTHER, {"config.json": CONFIG})
    tracker.store.repos.add(OTHER, now=tracker.clock())
    tracker.poll()
    hub.fail["recent_models"] = HubUnavailable("the change listing is down")
    hub.calls.clear()
    return hub, tracker


OTHER = RepoId("acme/other")


def test_an_owner_listing_checks_the_owners_repos_and_polls_only_the_one_that_moved(owners) -> None:
    hub, tracker = owners
    moved = hub.commit(OTHER, {"config.json": dict(CONFIG, vocab_size=1000)})
    results = {r.repo: r.status for r in tracker.poll()}
    assert results == {REPO: PollOutcome.UNCHANGED, OTHER: PollOutcome.NEW}
    assert (hub.calls["owner_heads"], hub.calls["head"]) == (1, 1)
    assert tracker.store.repos.get(OTHER).last_seen_sha == moved


@pytest.mark.parametrize("error", [HubUnavailable("listing down"), RuntimeError("a bug in the listing")])
def test_a_failed_owner_listing_falls_back_to_a_poll_of_each_repo(owners, error) -> None:
    hub, tracker = owners
    hub.fail["owner_heads"] = error
    moved = hub.commit(OTHER, {"config.json": dict(CONFIG, vocab_size=1000)})
    results = {r.repo: r.status for r in tracker.poll()}
    assert results == {REPO: PollOutcome.UNCHANGED, OTHER: PollOutcome.NEW}
    assert (hub.calls["owner_heads"], hub.calls["head"]) == (1, 2)
    assert tracker.store.repos.get(OTHER).last_seen_sha == moved


def test_a_rate_limited_owner_listing_is_not_retried_and_the_repos_are_checked_by_head(owners) -> None:
    from tracker.core.errors import HubRateLimited

    hub, tracker = owners
    hub.fail["owner_heads"] = HubRateLimited("429, server asks to wait 300s", retry_after=300)
    results = {r.repo: r.status for r in tracker.poll()}
    # The api bucket waits out the 429; a HEAD each comes from the other bucket.
    assert (hub.calls["owner_heads"], hub.calls["head"]) == (1, 2)
    assert results == {REPO: PollOutcome.UNCHANGED, OTHER: PollOutcome.UNCHANGED}
