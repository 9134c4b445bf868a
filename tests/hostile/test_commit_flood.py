"""A flood of new commits cannot jam a repo: the head is read at once, the next real commit too.

The flood, ten times ``[poll] max_new_commits`` (10,000 commits: the tracker lists no more of a larger
one), is written straight into the stand-in's git repository (``git fast-import``: thousands of
commits in seconds, where the stand-in's one-commit API takes a fraction of a second each), on top of
the last revision read, with the head fixing ``eos_token_id``. The tracker lists at most ``[poll]
max_new_commits`` + 1 of them (the default 1,000), reads the head in the same poll, diffed against the
last revision read, reports ``upstream.commit_flood`` with its advisory, and reads the revisions in
between ``[poll] backlog_per_poll`` at a time (5 here, to keep the test short), after everything
else: a repo beside it and a real commit pushed after the flood are read in the next poll.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tests.hostile.hub_support import write_flood
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.advisory import advisory_id
from tracker.core.advisory.record import to_osv
from tracker.core.model import RevisionStatus
from tracker.surfaces.api import create_app

FLOODED, FINE = "acme/flooded", "acme/fine"
FLOOD = 10_000  # ten times the default max_new_commits


@pytest.mark.slow
@pytest.mark.timeout(900)  # writing and listing 10,000 commits in the stand-in's git takes a while
def test_a_flood_reads_the_head_at_once_and_the_next_real_commit(hub_standin, tmp_path):
    for repo in (FLOODED, FINE):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 1}'})
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 10.0}, poll={"backlog_per_poll": 5})
    assert settings.poll.max_new_commits == 1000  # the default
    tracker = make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))
    for repo in (FLOODED, FINE):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    pk = tracker.store.repos.get(FLOODED).pk
    (last_read,) = [r.sha for r in tracker.store.revisions.of_repo(pk)]

    head = write_flood(hub_standin, FLOODED, FLOOD)
    fine_next = hub_standin.commit(FINE, {"README.md": "# fine\n"}, message="docs")
    fine, flooded = tracker.poll()  # in repo id order
    assert flooded.events == ["upstream.commit_flood"], flooded.line()
    assert (flooded.new_revisions, flooded.processed) == (1001, 6)  # the head, then 5 in between
    assert fine.processed == 1 and tracker.store.revisions.get(tracker.store.repos.get(FINE).pk, fine_next).status \
        == RevisionStatus.DONE

    # The head, diffed against the last revision read: its eos fix is an update advisory already.
    row = tracker.store.revisions.get(pk, head)
    assert (row.status, row.parent_sha, row.backlog) == (RevisionStatus.DONE, last_read, False)
    assert "generation.eos_token_id_changed" in [f.code for f in row.findings]
    fix = tracker.store.advisories.get(advisory_id(FLOODED, head, "update"))
    assert fix is not None

    # The flood's advisory covers the 1,000 revisions listed in between, until they are read.
    (event,) = [e for e in tracker.store.events.all(pk) if e.kind == "upstream.commit_flood"]
    between = [r.sha for r in tracker.store.revisions.of_repo(pk) if r.backlog]
    assert len(between) == 1000 and event.detail["head"] == head and event.detail["first"] == between[0]
    assert (event.detail["new_commits"], event.detail["all_listed"], event.detail["max_new_commits"]) == \
        (1001, False, 1000)
    (flood_adv,) = [a for a in tracker.store.advisories.find(repo_pk=pk) if a.kind == "commit_flood"]
    assert flood_adv.severity == "moderate"
    assert to_osv(flood_adv.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": between[0]}, {"fixed": head}]
    assert to_osv(flood_adv.record)["affected"][0]["versions"] == sorted(between)
    # The fix affects the last revision read and the 1,000 in between: versions bounded to the newest 1,000.
    assert to_osv(fix.record)["affected"][0]["versions"] == sorted(between)
    assert to_osv(fix.record)["database_specific"]["versions"]["affected"] == 1001
    client = TestClient(create_app(tracker))
    assert fix.id in {v["id"] for v in client.post("/v1/query", json={"commit": last_read}).json()["vulns"]}
    ids = {v["id"] for v in client.post("/v1/query", json={"commit": between[500]}).json().get("vulns", [])}
    assert flood_adv.id in ids
    assert flood_adv.id not in {v["id"] for v in client.post("/v1/query", json={"commit": head}).json().get(
        "vulns", [])}
    pending = [r for r in tracker.store.revisions.pending(pk)]
    assert len(pending) == 995 and all(r.backlog for r in pending)

    # The next real commit is read in the next poll, ahead of the backlog; 5 more of it are read.
    real = hub_standin.commit(FLOODED, {"README.md": "# after the flood\n"}, message="docs")
    (again,) = tracker.poll([FLOODED])
    assert again.events == [] and (again.new_revisions, again.processed) == (1, 6), again.line()
    assert tracker.store.revisions.get(pk, real).status == RevisionStatus.DONE
    assert tracker.store.revisions.get(pk, real).parent_sha == head
    assert len(tracker.store.revisions.pending(pk)) == 990
    # Backlog revisions are diffed one against the other, oldest first.
    done_between = [r for r in tracker.store.revisions.of_repo(pk) if r.backlog and r.status == RevisionStatus.DONE]
    assert [r.sha for r in done_between] == between[:10]
    assert done_between[1].parent_sha == between[0]
