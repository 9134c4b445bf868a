"""A whole run through the Hub's faults ends in the same advisories as a clean run.

Three repos (two of one owner, checked by one listing, and one alone) go through a history with
update, risk, undo and repo-event advisories. After each upstream change the poll cycle runs
twice: on a clean database with a well-behaved Hub, and on a second database through bursts of
429 with Retry-After (short ones waited inline, long ones deferring the repo), 5xx, timeouts,
cut-off bodies, connection resets and slow answers, repeating until that database has caught
up. Then the two databases must hold the same revisions, events and advisories (ids, kinds,
severities, versions, fixed), the Retry-After waits must have been honoured, and a repo whose
every HEAD fails must not have held the others back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from sqlalchemy import create_engine, text, update

from tests.core.conftest import config_json
from tests.core.test_advisories import torch_zip
from tests.scale.conftest import make_due, run_cycle
from tracker.adapters.hub.budget import HubBudget
from tracker.adapters.store.tables import repos
from tracker.core.model import RepoId
from tracker.pipeline.polling import PollResult

A, B, C = RepoId("acme/a"), RepoId("acme/b"), RepoId("solo/c")
README = "---\nlicense: apache-2.0\n---\n# Model\n"
LISTING = re.compile(r"^/api/models$")  # the owner listings
RETRY_AFTER = 7  # seconds: under hub.max_wait, waited inline (recorded, not slept, in tests)


def faults(hub) -> None:
    """One of each fault the Hub can throw, each a few times; every request kind is hit somewhere."""
    hub.faults.add(LISTING, status=429, retry_after=RETRY_AFTER, times=2)  # a burst
    hub.faults.add("/resolve/main/config.json", status=429, retry_after=RETRY_AFTER, method="HEAD", times=2)
    hub.faults.add("/tree/", status=503, times=2)
    hub.faults.add("/commits/", status=500, times=1)
    hub.faults.add("/commits/", status=502, times=1)
    hub.faults.add("/tree/", delay=3.0, times=1)  # over hub.timeout (1s): a timeout
    hub.faults.add("/resolve/", method="GET", truncate_after=3, times=2)  # a cut-off body
    hub.faults.add("/api/models/", reset=True, times=2)  # connection resets (model info, commits, trees)
    hub.faults.add("/resolve/", method="HEAD", reset=True, times=1)
    hub.faults.add(LISTING, delay=0.5, times=2)  # slow answers
    hub.faults.add("/resolve/", method="GET", delay=0.3, times=3)
    hub.faults.add("/api/models/solo/c/commits/", status=429, retry_after=3600, times=1)  # defers the repo


def state(db_url: str) -> dict[str, Any]:
    """Everything the run stored that must not depend on faults: no timestamps."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            revisions = [tuple(r) for r in conn.execute(text(
                "select p.repo_id, v.sha, v.parent_sha, v.status, v.baseline, v.summary, v.worst_severity, "
                "v.findings from revisions v join repos p on p.id = v.repo_pk order by p.repo_id, v.seq"))]
            events = [tuple(r) for r in conn.execute(text(
                "select p.repo_id, e.kind, e.revision_sha from events e join repos p on p.id = e.repo_pk "
                "order by p.repo_id, e.id"))]
            advisories = {}
            for r in conn.execute(text("select id, kind, severity, withdrawn, fixed_sha, record from advisories")):
                record = json.loads(r.record) if isinstance(r.record, str) else r.record
                body = {k: v for k, v in record.items() if k not in ("modified", "published", "withdrawn")}
                advisories[r.id] = (r.kind, r.severity, bool(r.withdrawn), r.fixed_sha, body)
            index = sorted(tuple(r) for r in conn.execute(text("select advisory_id, sha from advisory_commits")))
    finally:
        engine.dispose()
    return {"revisions": revisions, "events": events, "advisories": advisories, "index": index}


def caught_up(tracker, hub) -> bool:
    rows = {r.repo_id: r for r in tracker.store.repos.all()}
    heads = {repo_id: hub.head(repo_id) for repo_id in (A, B, C)}
    return all(rows[r].last_seen_sha == heads[r] and not tracker.store.revisions.pending(rows[r].pk)
               for r in (A, B, C))


def test_a_run_through_hub_faults_ends_as_a_clean_run(hub_standin, scale_settings, build, sleeps, tmp_path):
    hub = hub_standin
    clean, clean_cycle = build(scale_settings, database={"url": f"sqlite:///{tmp_path}/clean.sqlite3"})
    hours = [0.0]  # the faulty run's budget clock: each round is an hour later (429s block a bucket a while)
    budget = HubBudget(100_000, 100_000, monotonic=lambda: hours[0] * 3600)
    faulty, faulty_cycle = build(scale_settings, budget=budget,
                                 database={"url": f"sqlite:///{tmp_path}/faulty.sqlite3"},
                                 hub={"timeout": 1.0, "max_retries": 4})

    results: list[PollResult] = []
    faulty_cycle.on_result = results.append

    def step(*, faulted: bool = True) -> int:
        """Catch both databases up with the Hub: the clean one in one cycle, the other through faults."""
        make_due(clean)
        run_cycle(clean_cycle)
        assert caught_up(clean, hub)
        if faulted:
            faults(hub)
        for rounds in range(1, 30):
            make_due(faulty)
            with faulty.store.db.engine.begin() as conn:  # as if the deferrals' time had passed
                conn.execute(update(repos).values(defer_until=None))
            hours[0] += 1
            run_cycle(faulty_cycle)
            if caught_up(faulty, hub):
                hub.faults.clear()
                return rounds
        raise AssertionError(f"not caught up; faults left: {hub.faults.pending()}; "
                             f"{[(r.repo_id, r.last_error, r.defer_until, r.last_seen_sha) for r in faulty.store.repos.all()]} {[(r.repo, r.status) for r in results[-6:]]}")

    for repo_id in (A, B, C):
        hub.create_repo(repo_id)
        hub.commit(repo_id, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 1}',
                             "README.md": README}, message="initial")
        clean.store.repos.add(repo_id, now=clean.clock())
        faulty.store.repos.add(repo_id, now=faulty.clock())
    step()
    for repo_id in (A, B, C):
        hub.commit(repo_id, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")  # update
        hub.commit(repo_id, {"evil.bin": torch_zip(b"\0" * 64, ("os", "system"))}, message="add weights")  # risk
        hub.commit(repo_id, {"README.md": README + "\nMore words.\n"}, message="docs")
        hub.commit(repo_id, {}, delete=["evil.bin"], message="remove pickle")  # undoes the risk
        hub.commit(repo_id, {"config.json": config_json(num_hidden_layers=8)}, message="deeper")
    assert step() > 1  # the faults cost rounds
    step()  # nothing new: the listing and HEAD checks through faults

    # One repo's HEADs fail every time: the others are caught up all the same.
    hub.commit(A, {"README.md": README + "\nA again.\n"}, message="docs a")
    hub.commit(C, {"README.md": README + "\nC again.\n"}, message="docs c")
    hub.faults.add("/acme/a/resolve/main/config.json", status=503, method="HEAD", times=None)
    make_due(faulty)
    hours[0] += 1
    run_cycle(faulty_cycle)
    rows = {r.repo_id: r for r in faulty.store.repos.all()}
    assert rows[C].last_seen_sha == hub.head(C) and rows[A].last_seen_sha != hub.head(A)
    assert rows[A].last_error and "503" in rows[A].last_error
    hub.faults.clear()
    step(faulted=False)

    hub.squash(B)  # history rewritten: an event and its advisory
    step()

    waits = [s for s in sleeps.calls if RETRY_AFTER <= s <= RETRY_AFTER + 0.25]
    assert len(waits) >= 4, sleeps.calls  # every 429 with Retry-After: 7 was waited out, not retried at once
    assert max(sleeps.calls) < 3600  # the 1-hour Retry-After deferred solo/c instead of blocking a worker
    assert ("solo/c", "deferred") in {(r.repo, r.status) for r in results}

    expected, got = state(clean.settings.database.url), state(faulty.settings.database.url)
    kinds = {a[0] for a in expected["advisories"].values()}
    assert {"update", "risk", "history_rewritten"} <= kinds, kinds
    assert any(a[3] for a in expected["advisories"].values() if a[0] == "risk"), "expected an undone risk"
    assert got["revisions"] == expected["revisions"]
    assert got["events"] == expected["events"]
    assert got["advisories"].keys() == expected["advisories"].keys()
    for advisory_id, want in expected["advisories"].items():
        assert got["advisories"][advisory_id] == want, advisory_id
    assert got["index"] == expected["index"]
