"""A crash anywhere loses nothing: the revision report is one transaction.

A real ``tracker poll`` (and once a ``tracker run``) is killed with SIGKILL at points spread over a
history that yields update, risk, undo and repo-event advisories; after each kill it is polled
again until it completes. The revisions, findings, events, advisories, the reachability index
(commit labels, chains, advisory spans, listed commits) and each advisory's ``versions`` as
served must then be identical to those of a clean run of the same history on a second database. And a fault injected inside the save leaves neither the revision nor its
advisories behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, event, text

from tests.core.conftest import config_json
from tests.core.test_advisories import torch_zip
from tracker.adapters.store import open_store
from tracker.core.advisory.record import to_osv
from tracker.core.model import RepoId
from tracker.surfaces.cli import main

REPO = RepoId("acme/crash-model")
ROOT = Path(__file__).resolve().parents[2]
README = "---\nlicense: apache-2.0\n---\n# Model\n"
# Seconds after a process starts (about 0.9 s of it importing); with a slow Hub (0.5 s per tree) the
# kills land in the listing, in the reads of one revision or another, and in the saves.
KILLS_OVER_REVISIONS = (1.0, 1.2, 1.45, 1.7, 1.95, 2.2, 1.1, 1.6)
KILLS_OVER_EVENTS = (0.95, 1.1, 1.25)


def _env(hub_url: str, db_url: str, config: Path) -> dict[str, str]:
    return {**os.environ, "HF_ENDPOINT": hub_url, "TRACKER_DATABASE_URL": db_url, "TRACKER_CONFIG": str(config),
            "PYTHONPATH": str(ROOT)}


def _tracker(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tracker", *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def _poll_to_completion(env: dict[str, str], cwd: Path) -> str:
    proc = _tracker(["poll"], env, cwd)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, output
    return output


def _in_process(args: list[str], env: dict[str, str]) -> None:
    """The same command run here: for the clean database, which nothing kills."""
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output


def _killed(args: list[str], env: dict[str, str], cwd: Path, after: float) -> None:
    proc = _tracker(args, env, cwd)
    time.sleep(after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def state(db_url: str) -> dict[str, Any]:
    """Everything a revision or an event implies, without the wall-clock timestamps."""
    engine = create_engine(db_url)
    stamps = ("modified", "published", "withdrawn")
    try:
        with engine.connect() as conn:
            revisions = [tuple(r) for r in conn.execute(text(
                "select sha, parent_sha, status, baseline, summary, worst_severity, findings from revisions "
                "order by seq"))]
            events = [(r.kind, r.revision_sha) for r in conn.execute(text("select kind, revision_sha from events "
                                                                         "order by id"))]
            advisories = {}
            for r in conn.execute(text("select id, kind, severity, withdrawn, fixed_sha, record from advisories")):
                record = json.loads(r.record) if isinstance(r.record, str) else r.record
                body = {k: v for k, v in record.items() if k not in stamps}
                body["details"] = "\n".join(line for line in body.get("details", "").splitlines()
                                            if "Withdrawn" not in line)
                advisories[r.id] = (r.kind, r.severity, bool(r.withdrawn), r.fixed_sha, body)
            listed = sorted(tuple(r) for r in conn.execute(text("select advisory_id, sha from advisory_commits")))
            graph = sorted(tuple(r) for r in conn.execute(text("select sha, parent_sha from commits")))
            labels = sorted(tuple(r) for r in conn.execute(text("select sha, chain, pos from commit_labels")))
            chains = sorted((r.chain, r.root, r.tip, bool(r.starts_at_root),
                             json.loads(r.reach) if isinstance(r.reach, str) else r.reach)
                            for r in conn.execute(text("select * from commit_chains")))
            spans = sorted(tuple(r) for r in conn.execute(text("select advisory_id, chain, lo, hi "
                                                                "from advisory_spans")))
    finally:
        engine.dispose()
    store = open_store(db_url, auto_upgrade=False)
    try:
        versions = {a.id: to_osv(a.record)["affected"][0]["versions"] for a in store.advisories.find()}
    finally:
        store.close()
    return {"revisions": revisions, "events": events, "advisories": advisories, "graph": graph,
            "index": {"listed": listed, "labels": labels, "chains": chains, "spans": spans}, "versions": versions}


@pytest.mark.slow
# About 25 tracker processes, each importing the tracker: a minute on 2 idle cores, several times that on
# a loaded machine, where the default 300 s would stop it midway.
@pytest.mark.timeout(1200)
def test_sigkill_anywhere_then_polling_again_matches_a_clean_run(hub_standin, tmp_path):
    hub = hub_standin
    config = tmp_path / "tracker.toml"
    config.write_text('[poll]\nevery = "1h"\njitter = "0s"\n')
    clean = _env(hub.url, f"sqlite:///{tmp_path}/clean.sqlite3", config)
    crashy = _env(hub.url, f"sqlite:///{tmp_path}/crashy.sqlite3", config)
    def step(kills: tuple[float, ...], *, run_daemon: bool = False) -> None:
        """Poll both databases after an upstream change: the clean one once, the other killed first."""
        _in_process(["poll"], clean)
        for after in kills:
            _killed(["run", "--no-api"] if run_daemon else ["poll"], crashy, tmp_path, after + run_daemon * 0.4)
        _poll_to_completion(crashy, tmp_path)

    hub.create_repo(REPO)
    hub.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 1}',
                      "README.md": README}, message="initial")
    for env in (clean, crashy):
        _in_process(["watch", "add", REPO], env)
    step(KILLS_OVER_EVENTS[:1])

    hub.faults.add("/tree/", delay=0.5, times=None)  # a slow Hub spreads the kills over the revisions
    hub.commit(REPO, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")  # update
    hub.commit(REPO, {"evil.bin": torch_zip(b"\0" * 64, ("os", "system"))}, message="add weights")  # risk
    hub.commit(REPO, {"README.md": README + "\nMore words.\n"}, message="docs")
    hub.commit(REPO, {}, delete=["evil.bin"], message="remove pickle")  # undoes the risk
    hub.commit(REPO, {"config.json": config_json(num_hidden_layers=8)}, message="deeper")  # estimate moves
    step(KILLS_OVER_REVISIONS[:6])
    hub.commit(REPO, {"README.md": README + "\nEven more words.\n"}, message="docs again")
    hub.commit(REPO, {"generation_config.json": b'{"eos_token_id": 2}'}, message="eos again")
    step(KILLS_OVER_REVISIONS[6:], run_daemon=True)
    hub.faults.clear()

    hub.squash(REPO)  # history rewritten: every revision read is unreachable
    step(KILLS_OVER_EVENTS)
    hub.set_gated(REPO, True)
    step(KILLS_OVER_EVENTS[:2])
    hub.set_gated(REPO, False)
    hub.delete_repo(REPO)
    step(KILLS_OVER_EVENTS[:2])
    hub.create_repo(REPO)  # re-created under the same id: a possible takeover
    hub.commit(REPO, {"config.json": config_json(), "run.py": b"import os\nos.system('id')\n"}, message="new owner")
    step(KILLS_OVER_EVENTS)

    expected, got = state(clean["TRACKER_DATABASE_URL"]), state(crashy["TRACKER_DATABASE_URL"])
    kinds = {a[0] for a in expected["advisories"].values()}
    assert {"update", "risk", "history_rewritten", "gated", "deleted", "recreated"} <= kinds, kinds
    assert any(a[3] for a in expected["advisories"].values() if a[0] == "risk"), "expected an undone risk"
    assert got["revisions"] == expected["revisions"]
    assert got["events"] == expected["events"]
    assert got["graph"] == expected["graph"]
    assert got["advisories"].keys() == expected["advisories"].keys()
    for advisory_id, want in expected["advisories"].items():
        assert got["advisories"][advisory_id] == want, advisory_id
    assert got["index"] == expected["index"]
    assert got["versions"] == expected["versions"]
    assert expected["index"]["spans"] and expected["index"]["listed"] and expected["index"]["labels"]
    assert any(expected["versions"].values())


def test_a_fault_inside_the_save_leaves_neither_the_revision_nor_its_advisories(hub_standin, settings, make):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 1}'})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    fix = hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")

    def fail_on_index(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO ADVISORY_SPANS"):
            raise RuntimeError("disk full (injected)")

    event.listen(tracker.store.db.engine, "before_cursor_execute", fail_on_index)
    try:
        (result,) = tracker.poll()
    finally:
        event.remove(tracker.store.db.engine, "before_cursor_execute", fail_on_index)
    assert result.status == "error" and "disk full (injected)" in (result.error or "")
    pk = tracker.store.repos.get(REPO).pk
    assert tracker.store.revisions.get(pk, fix).status == "pending"
    assert tracker.store.advisories.find() == []  # the advisory row was written before the fault: rolled back
    assert tracker.store.advisories.ids_for_commit(fix, pk) == []

    (result,) = tracker.poll()  # the next poll completes it, with its advisory, exactly once
    assert result.processed == 1
    assert tracker.store.revisions.get(pk, fix).status == "done"
    assert [a.kind for a in tracker.store.advisories.find()] == ["update"]
