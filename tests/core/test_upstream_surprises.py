"""Rate limits, server errors, malformed answers, rewrites, renames, deletion: events, not crashes."""

from __future__ import annotations

import pytest

from tests.core.conftest import config_json
from tracker.core.model import RepoId

REPO = RepoId("acme/tiny-model")


@pytest.fixture
def watched(hub_standin, settings, make):
    hub_standin.create_repo(REPO)
    first = hub_standin.commit(REPO, {"config.json": config_json(), "tokenizer_config.json": b'{"eos_token": "</s>"}'})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    (result,) = tracker.poll()
    assert result.status == "baseline"
    return tracker, first


def shas(tracker):
    return [(r.sha, r.status) for r in tracker.store.revisions.of_repo(tracker.store.repos.get(REPO).pk)]


def test_429_with_retry_after_is_honoured(hub_standin, watched, sleeps):
    tracker, first = watched
    second = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add(f"/{REPO}/resolve/", status=429, retry_after=7, times=1)
    hub_standin.faults.add("/commits/", status=429, ratelimit=("api", 0, 3), times=1)
    (result,) = tracker.poll()
    assert result.status == "new" and result.new_revisions == 1
    assert len(sleeps.calls) == 2
    assert 7 <= sleeps.calls[0] < 7.5  # Retry-After: 7
    assert 3 <= sleeps.calls[1] < 3.5  # RateLimit: "api";r=0;t=3
    assert shas(tracker) == [(first, "done"), (second, "done")]


def test_a_retry_after_beyond_the_limit_defers_the_repo(hub_standin, watched, sleeps):
    tracker, first = watched
    hub_standin.faults.add(f"/{REPO}/resolve/", status=429, retry_after=3600, times=1)
    (result,) = tracker.poll()
    assert result.status == "deferred"
    assert "server asks to wait 3600s" in result.error
    assert sleeps.calls == []
    # Until then the repo is skipped without a request.
    hub_standin.clear_log()
    (result,) = tracker.poll()
    assert result.status == "deferred" and hub_standin.requests == []


def test_5xx_is_retried_with_backoff(hub_standin, watched, sleeps):
    tracker, first = watched
    second = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add("/tree/", status=503, times=2)
    (result,) = tracker.poll()
    assert (result.status, result.processed) == ("new", 1)
    assert len(sleeps.calls) == 2 and all(0 <= s <= 30 for s in sleeps.calls)
    assert shas(tracker) == [(first, "done"), (second, "done")]


def test_persistent_5xx_is_an_error_that_loses_nothing(hub_standin, watched, sleeps):
    tracker, first = watched
    second = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add("/tree/", status=500, times=None)
    (result,) = tracker.poll()
    assert result.status == "error" and "HTTP 500" in result.error
    assert len(sleeps.calls) == 5
    # Listed but not processed: the revision waits, pending.
    assert shas(tracker) == [(first, "done"), (second, "pending")]
    hub_standin.faults.clear()
    (result,) = tracker.poll()
    assert (result.status, result.processed) == ("unchanged", 1)
    assert shas(tracker) == [(first, "done"), (second, "done")]


def test_malformed_json_from_the_hub_api_is_an_error_not_a_crash(hub_standin, watched):
    tracker, first = watched
    hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add("/commits/", body=b"{not json", times=1)
    (result,) = tracker.poll()
    assert result.status == "error" and "malformed JSON" in result.error
    assert shas(tracker) == [(first, "done")]
    (result,) = tracker.poll()
    assert result.status == "new"


def test_malformed_json_in_an_upstream_file_is_recorded(hub_standin, watched):
    tracker, first = watched
    bad = hub_standin.commit(REPO, {"config.json": b'{"model_type": "bert",'})
    (result,) = tracker.poll()
    assert result.status == "new"
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, bad)
    assert row.status == "done"
    text = row.diff.texts["config.json"]
    assert text["kind"] == "error" and text["side"] == "new" and text["error"].startswith("JSONDecodeError")
    assert "config.malformed" in [f.code for f in row.findings]


def test_a_file_cut_off_every_time_is_recorded_after_max_attempts(hub_standin, watched, sleeps):
    tracker, first = watched
    second = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add(f"/resolve/{second}/config.json", truncate_after=10, times=None, method="GET")
    pk = tracker.store.repos.get(REPO).pk
    for attempt in range(1, tracker.settings.poll.max_attempts):
        (result,) = tracker.poll()  # a cut-off body may be the network: read again next time
        row = tracker.store.revisions.get(pk, second)
        assert (result.status, row.status, row.attempts) == ("error", "pending", attempt)
        assert "cut off" in row.last_error
    (result,) = tracker.poll()  # the last attempt completes it with what could be read
    row = tracker.store.revisions.get(pk, second)
    assert row.status == "done"
    (problem,) = [f for f in row.findings if f.code == "upstream.file_unreadable"]
    assert problem.path == "config.json" and problem.evidence["side"] == "new"


def test_a_file_cut_off_once_is_read_whole_on_the_next_poll(hub_standin, watched, sleeps):
    tracker, first = watched
    second = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add(f"/resolve/{second}/config.json", truncate_after=10, times=1, method="GET")
    (result,) = tracker.poll()
    assert result.status == "error"
    (result,) = tracker.poll()
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, second)
    assert (result.status, row.status, row.attempts) == ("unchanged", "done", 1)
    assert "upstream.file_unreadable" not in [f.code for f in row.findings]
    assert "config.vocab_size_changed" in [f.code for f in row.findings]


def test_gated_then_deleted_repo_is_an_event_and_keeps_what_was_read(hub_standin, watched):
    tracker, first = watched
    hub_standin.set_gated(REPO, True)
    (result,) = tracker.poll()
    assert result.status == "gated" and result.events == ["gated"]
    (result,) = tracker.poll()  # still gated: no second event
    assert result.status == "gated" and result.events == []
    hub_standin.set_gated(REPO, False)
    hub_standin.delete_repo(REPO)
    (result,) = tracker.poll()
    assert result.status == "gone" and result.events == ["deleted"]
    assert [e.kind for e in tracker.store.events.all()] == ["gated", "deleted"]
    assert shas(tracker) == [(first, "done")]


def test_deleted_and_created_again_is_told_apart(hub_standin, watched):
    tracker, first = watched
    hub_standin.delete_repo(REPO)
    (result,) = tracker.poll()
    assert result.events == ["deleted"]
    hub_standin.create_repo(REPO)
    new_first = hub_standin.commit(REPO, {"config.json": config_json(model_type="evil")})
    (result,) = tracker.poll()
    assert "recreated" in result.events and "history_rewritten" in result.events
    kinds = [e.kind for e in tracker.store.events.all()]
    assert kinds == ["deleted", "recreated", "history_rewritten"]
    recreated = tracker.store.events.all()[1]
    assert recreated.detail["old_uid"] != recreated.detail["new_uid"]
    assert shas(tracker) == [(first, "done"), (new_first, "done")]


def test_squash_with_the_same_content_is_a_rewrite_without_changes(hub_standin, watched):
    tracker, first = watched
    second = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    tracker.poll()
    squashed = hub_standin.squash(REPO)
    (result,) = tracker.poll()
    assert result.events == ["history_rewritten"]
    (event,) = [e for e in tracker.store.events.all() if e.kind == "history_rewritten"]
    assert event.detail["same_content"] is True
    assert event.detail["unreachable_revisions"] == sorted([first, second])
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, squashed)
    assert row.diff.files == {"added": [], "removed": [], "changed": []}
    assert row.findings == ()


def test_rewrite_with_new_content_is_diffed_against_the_last_revision_read(hub_standin, watched):
    tracker, first = watched
    hub_standin.squash(REPO)
    changed = hub_standin.commit(REPO, {"config.json": config_json(vocab_size=32000)})
    (result,) = tracker.poll()
    (event,) = [e for e in tracker.store.events.all() if e.kind == "history_rewritten"]
    assert event.detail["same_content"] is False
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, changed)
    assert row.parent_sha == first
    assert [c["path"] for c in row.diff.files["changed"]] == ["config.json"]


def test_a_rename_is_an_event_and_tracking_follows_the_redirect(hub_standin, watched):
    tracker, first = watched
    hub_standin.rename(REPO, "acme/renamed-model")
    second = hub_standin.commit("acme/renamed-model", {"config.json": config_json(vocab_size=30000)})
    (result,) = tracker.poll()
    assert result.events == ["renamed"]
    (event,) = tracker.store.events.all()
    assert event.detail == {"from": REPO, "to": "acme/renamed-model"}
    assert tracker.store.repos.get(REPO).renamed_to == "acme/renamed-model"
    assert shas(tracker) == [(first, "done"), (second, "done")]
    (result,) = tracker.poll()
    assert result.events == [] and result.status == "unchanged"


def test_a_malformed_commit_id_from_the_hub_is_refused(hub_standin, watched):
    tracker, first = watched
    hub_standin.commit(REPO, {"config.json": config_json(vocab_size=30000)})
    hub_standin.faults.add(f"/{REPO}/resolve/", status=200, headers={"X-Repo-Commit": "not-a-sha"}, body=b"",
                           times=1, method="HEAD")
    (result,) = tracker.poll()
    assert result.status == "error"
    assert result.error == f"{REPO}: the Hub answered a malformed commit id 'not-a-sha'"
    assert shas(tracker) == [(first, "done")]
