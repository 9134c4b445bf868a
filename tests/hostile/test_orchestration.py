"""Hostile upstream, seen from the poll cycle: no repo can stop the others, jam a revision or the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

from click.testing import CliRunner
from fastapi.testclient import TestClient
from sqlalchemy import select

from tests.core.conftest import config_json
from tests.waiting import wait_for
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.adapters.store.tables import revisions
from tracker.app import make_tracker
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

ROOT = Path(__file__).resolve().parents[2]
HOSTILE, FINE = "acme/hostile", "acme/fine"


def _tracker(hub_standin, tmp_path, **overrides):
    # no test here waits for a timeout; a busy machine is slow
    overrides.setdefault("hub", {}).setdefault("timeout", 60.0)
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url}).changed(**overrides)
    return make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))


def _watch(tracker, *repos):
    for repo in repos:
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()


def test_a_hostile_revision_is_completed_with_findings_and_the_neighbours_are_read(hub_standin, tmp_path):
    for repo in (HOSTILE, FINE):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(), "README.md": "---\nlicense: mit\n---\n"})
    tracker = _tracker(hub_standin, tmp_path)
    _watch(tracker, HOSTILE, FINE)
    deep = b"[" * 100_000 + b"]" * 100_000
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "---\n"
    bad = hub_standin.commit(HOSTILE, {"config.json": b'{"a": ' + deep + b"}", "README.md": bomb,
                                       "generation_config.json": deep, "tokenizer_config.json": deep,
                                       "model.safetensors.index.json": deep}, message="hostile")
    good = hub_standin.commit(FINE, {"config.json": config_json(vocab_size=1000)}, message="fine")
    results = {r.repo: r for r in tracker.poll()}
    assert (results[HOSTILE].status, results[HOSTILE].processed) == ("new", 1)
    assert (results[FINE].status, results[FINE].processed) == ("new", 1)
    hostile = tracker.store.revisions.get(tracker.store.repos.get(HOSTILE).pk, bad)
    assert hostile.status == "done" and hostile.findings
    # Every analyser bounded its own parse: nothing fell through to the orchestrator's last resort.
    assert [f.summary for f in hostile.findings if f.code == "analysis.failed"] == []
    assert tracker.store.revisions.get(tracker.store.repos.get(FINE).pk, good).status == "done"
    with tracker.store.db.read() as conn:
        column = conn.execute(select(revisions.c.findings).where(revisions.c.id == hostile.pk)).scalar()
    assert json.dumps(column, allow_nan=False)  # stored strict JSON

    fix = hub_standin.commit(HOSTILE, {"config.json": config_json(), "README.md": "---\nlicense: mit\n---\n",
                                       "generation_config.json": b'{"eos_token_id": 2}'}, message="fix")
    (result,) = tracker.poll([HOSTILE])
    assert result.processed == 1
    assert tracker.store.revisions.get(tracker.store.repos.get(HOSTILE).pk, fix).status == "done"


def test_a_huge_retry_after_defers_by_at_most_a_day(hub_standin, tmp_path):
    hub_standin.create_repo(HOSTILE)
    hub_standin.commit(HOSTILE, {"config.json": config_json()})
    tracker = _tracker(hub_standin, tmp_path, hub={"max_wait": 1.0})
    _watch(tracker, HOSTILE)
    hub_standin.faults.add("/resolve/", status=429, retry_after=99999999999, times=None)
    (result,) = tracker.poll()
    assert result.status == "deferred"
    repo = tracker.store.repos.get(HOSTILE)
    assert repo.defer_until is not None
    assert repo.defer_until <= tracker.clock() + timedelta(days=1, seconds=5)


def test_a_failed_repo_is_counted_in_the_cycle_summary(hub_standin, tmp_path):
    hub_standin.create_repo(FINE)
    hub_standin.commit(FINE, {"config.json": config_json()})
    (tmp_path / "t.toml").write_text("")
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
           "TRACKER_CONFIG": str(tmp_path / "t.toml")}

    def tracker(*args):
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)  # a traceback raises here

    assert tracker("watch", "add", FINE, "acme/typo-that-never-existed", "--no-check").exit_code == 0
    result = tracker("poll")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "acme/fine: baseline, 1 new revision(s), 1 analysed",
        "acme/typo-that-never-existed: not_found: not found on the Hub (check the id; private and gated repos "
        "need HF_TOKEN)",
        "polled 2 repos: 1 with new revisions, 1 failed",
    ]
    assert result.stderr == ""


def test_two_polls_at_once_share_the_work_without_a_traceback(hub_standin, tmp_path):
    """Two `tracker poll` processes at once: the one that takes the repo's lease is held at its tree
    listing until the other has said "busy" and exited, however slowly either starts."""
    hub_standin.create_repo(FINE)
    hub_standin.commit(FINE, {"config.json": config_json()})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": hub_standin.url,
           "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3", "TRACKER_CONFIG": str(tmp_path / "t.toml")}
    (tmp_path / "t.toml").write_text("")
    in_process = {k: env[k] for k in ("HF_ENDPOINT", "TRACKER_DATABASE_URL", "TRACKER_CONFIG")}
    for args in (["watch", "add", FINE], ["poll"]):
        assert CliRunner().invoke(main, args, env=in_process, catch_exceptions=False).exit_code == 0
    new = [hub_standin.commit(FINE, {"config.json": config_json(num_hidden_layers=n)}) for n in range(7, 11)]
    release = threading.Event()
    hub_standin.faults.add("/tree/", hold=release, times=None)
    procs = [subprocess.Popen([sys.executable, "-m", "tracker", "poll"], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        wait_for(lambda: any(p.poll() is not None for p in procs))  # the one skipped; on timeout, fails below
    finally:
        release.set()
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert not any("Traceback" in err for _, err in outputs)
    lines = sorted(out.strip() for out, _ in outputs)
    assert lines[0].startswith(f"{FINE}: busy: being polled by another process (")
    assert lines[0].endswith("; skipped")
    assert lines[1] == f"{FINE}: new, 4 new revision(s), 4 analysed"
    tracker = _tracker(hub_standin, tmp_path)
    rows = tracker.store.revisions.of_repo(tracker.store.repos.get(FINE).pk)
    assert [(r.sha, r.status) for r in rows[1:]] == [(sha, "done") for sha in new]


def test_replays_arriving_during_a_poll_coalesce_into_one_queued_poll_on_a_small_pool():
    from tracker.pipeline.coalescing import PollCoalescer

    release, runs, lock = threading.Event(), [], threading.Lock()

    def poll(repo_id: str) -> None:
        with lock:
            runs.append(repo_id)
        release.wait(10)

    coalesce = PollCoalescer(poll, workers=2)
    threads_before = threading.active_count()
    for _ in range(1000):
        coalesce(FINE)
    coalesce("acme/other")
    assert threading.active_count() <= threads_before + 2  # a small pool, never a thread per delivery
    assert wait_for(lambda: len(runs) >= 2, timeout=60)
    time.sleep(0.2)  # anything wrongly started beside them would show by now
    assert sorted(runs) == ["acme/fine", "acme/other"]  # one in flight per repo, the rest queued once
    release.set()
    assert wait_for(lambda: len(runs) >= 3, timeout=60)
    time.sleep(0.3)
    assert sorted(runs) == ["acme/fine", "acme/fine", "acme/other"]


def test_a_thousand_replays_of_one_hub_webhook_cost_a_few_polls(hub_standin, tmp_path):
    """Every poll starts with one HEAD of the head's config.json: held until the thousand deliveries are
    answered, so the first poll is still running when the last arrives, however slow the machine."""
    hub_standin.create_repo(FINE)
    hub_standin.commit(FINE, {"config.json": config_json()})
    tracker = _tracker(hub_standin, tmp_path, hub={"timeout": 60.0})
    _watch(tracker, FINE)
    hub_standin.commit(FINE, {"config.json": config_json(vocab_size=1000)})
    release = threading.Event()
    hub_standin.faults.add("/resolve/", hold=release, times=None, method="HEAD")
    hub_standin.clear_log()
    client = TestClient(create_app(tracker, webhook_secret="s3cret"))
    hook = {"event": {"action": "update", "scope": "repo.content"}, "repo": {"type": "model", "name": FINE}}
    pk = tracker.store.repos.get(FINE).pk

    def heads() -> int:
        return len([r for r in hub_standin.requests if r.method == "HEAD"])

    try:
        for _ in range(1000):
            answer = client.post("/hooks/hub", json=hook, headers={"X-Webhook-Secret": "s3cret"})
            assert answer.status_code == 202
    finally:
        release.set()
    assert wait_for(lambda: heads() >= 2 and [r.status for r in tracker.store.revisions.of_repo(pk)] == [
        "done", "done"]), heads()
    time.sleep(0.5)  # a third poll, wrongly queued, would show by now
    # The poll in flight and one queued behind it: two polls for a thousand deliveries.
    assert heads() == 2
    assert [r.status for r in tracker.store.revisions.of_repo(pk)] == ["done", "done"]


def test_a_read_only_database_is_one_line(tmp_path):
    env = {"TRACKER_CONFIG": str(tmp_path / "t.toml")}
    (tmp_path / "t.toml").write_text("")
    db = tmp_path / "t.sqlite3"
    made = CliRunner().invoke(main, ["watch", "list"], env={**env, "TRACKER_DATABASE_URL": f"sqlite:///{db}"},
                              catch_exceptions=False)
    assert made.exit_code == 0, made.stderr
    read_only = f"sqlite:///file:{db}?mode=ro&uri=true"
    result = CliRunner().invoke(main, ["watch", "add", FINE, "--no-check"],
                                env={**env, "TRACKER_DATABASE_URL": read_only}, catch_exceptions=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: the database at ") and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.endswith("is read-only: check the file's and its folder's permissions\n")
