"""`tracker run` end to end: alerts reach a real receiver through failures and a SIGKILL; Hub webhooks in.

The receiver is a real HTTP server on 127.0.0.1 (so the tests put 127.0.0.1 on the allow list). It
verifies every request with the ``standardwebhooks`` package and counts an alert once per
``webhook-id``, as a receiver should.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from click.testing import CliRunner
from sqlalchemy import update

from tests.delivery.conftest import REPO, push_history, start_repo
from tests.waiting import wait_for
from tracker.adapters.store.tables import deliveries
from tracker.surfaces.cli import main

ROOT = Path(__file__).resolve().parents[2]
HUB_SECRET = "hub-shared-secret"


def run_env(tmp_path: Path, hub_standin, db_url: str) -> dict[str, str]:
    config = tmp_path / "tracker.toml"
    config.write_text('[poll]\nevery = "1h"\njitter = "0s"\n\n'
                      '[delivery]\nmax_attempts = 10\nbackoff_base = "0.2s"\nbackoff_max = "1s"\ntimeout = "1s"\n')
    return {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": db_url,
            "TRACKER_CONFIG": str(config), "TRACKER_DELIVERY_ALLOW_HOSTS": "127.0.0.1", "PYTHONPATH": str(ROOT)}


def subscribe(env: dict[str, str], target: str, url: str) -> dict:
    result = CliRunner().invoke(main, ["subscribe", target, "--webhook", url, "--json"], env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def start(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.Popen:
    log = open(tmp_path / "run.log", "ab")
    return subprocess.Popen([sys.executable, "-m", "tracker", "-v", "run", *args], env=env, cwd=tmp_path,
                            stdout=log, stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen, tmp_path: Path) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    return (tmp_path / "run.log").read_text(errors="replace")


def run_out_lease(tracker, delivery_id: int) -> None:
    """As if the lease on this delivery had ended a moment ago."""
    with tracker.store.db.transaction() as conn:
        conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(
            leased_until=datetime.now(UTC) - timedelta(seconds=1)))


def test_every_alert_arrives_once_through_500_429_timeouts_and_a_sigkill(hub_standin, tracker_settings, make,
                                                                          receiver, tmp_path, db_url):
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    env = run_env(tmp_path, hub_standin, db_url)
    # Attempts 1-4 (all of the first alert): a 500, a 429 asking for 1 s, a request held past the
    # 1 s timeout, then one held while the tracker is killed; after that the receiver answers 200.
    got = receiver(script=[500, (429, {"Retry-After": "1"}), ("hang", 2.5), ("hang", 5)])
    sub = subscribe(env, REPO, got.url)
    got.secret = sub["secret"]
    push_history(hub_standin)
    tracker.poll()  # the outbox rows are written with the advisories
    rows = tracker.store.outbox.list_deliveries()
    assert len(rows) == 4 and {r.subscription_id for r in rows} == {sub["id"]}

    proc = start(env, tmp_path, "--no-api")
    try:
        assert wait_for(lambda: len(got.got) >= 4, timeout=60), stop(proc, tmp_path)
        os.kill(proc.pid, signal.SIGKILL)  # mid-delivery: the receiver is holding the 4th attempt
        proc.wait(timeout=30)
        assert [r.answered for r in got.got] == [500, 429, "hang", "hang"]
        held = tracker.store.outbox.get_delivery(rows[0].id)
        assert held.state == "pending"
        # The dead sender's lease (its attempt's deadline and a minute: the delivery worker's test
        # shows it keeps the row from every sender until then) is run out here instead of waited for.
        assert held.leased_until is not None and held.leased_until > datetime.now(UTC)
        run_out_lease(tracker, rows[0].id)

        restarted = start(env, tmp_path, "--no-api")
        try:
            assert wait_for(lambda: all(tracker.store.outbox.get_delivery(r.id).state == "delivered" for r in rows),
                            timeout=90), stop(restarted, tmp_path)
        finally:
            output = stop(restarted, tmp_path)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert restarted.returncode == 0, output

    assert all(r.verified for r in got.got), "every request verifies with standardwebhooks"
    # The first alert arrived three times (the timed-out attempt, the one the kill cut off, the resend);
    # de-duplicated by webhook-id, every announcement is there exactly once, in the outbox order.
    assert [r.webhook_id for r in got.got].count(rows[0].webhook_id) == 5
    unique = got.unique()
    assert list(unique) == [r.webhook_id for r in rows]
    announced = sorted((r.json["type"], r.json["data"]["id"]) for r in unique.values())
    assert announced == sorted((r.event_type, r.advisory_id) for r in rows)
    assert len({a for _t, a in announced}) == 3  # the fix, the risk (created, then fixed) and the removal
    for row, received in zip(rows, unique.values()):
        assert received.json["data"] == row.record
    listed = json.loads(CliRunner().invoke(main, ["deliveries", "--json"], env=env).output)
    assert [(d["id"], d["state"]) for d in listed] == [(r.id, "delivered") for r in rows]
    assert listed[0]["attempts"] == 4  # 500, 429, timeout, success: the attempt cut off by the kill left no trace


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_genuine_hub_webhook_brings_the_alert_in_seconds_and_a_forged_one_nothing(
        hub_standin, tracker_settings, make, receiver, tmp_path, db_url):
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    # The change listing's walk would read the new commit too: off, so the webhook alone brings it in.
    env = {**run_env(tmp_path, hub_standin, db_url), "TRACKER_WEBHOOK_SECRET": HUB_SECRET,
           "TRACKER_POLL_LISTEN_EVERY": "0s"}
    got = receiver()
    got.secret = subscribe(env, REPO, got.url)["secret"]
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    # Just polled, so nothing is due when the daemon starts: the webhook alone brings the next revision in.
    assert tracker.store.schedule.claimable(now=datetime.now(UTC)) == 0
    proc = start(env, tmp_path, "--port", str(port))
    pk = tracker.store.repos.get(REPO).pk

    def healthy() -> bool:
        try:
            return httpx.get(f"{api}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        assert wait_for(healthy, timeout=60), stop(proc, tmp_path)
        new = hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")
        payload = {"event": {"action": "update", "scope": "repo.content"},
                   "repo": {"type": "model", "name": REPO, "headSha": new}, "webhook": {"id": "1", "version": 3}}

        forged = httpx.post(f"{api}/hooks/hub", json=payload, headers={"X-Webhook-Secret": "guess"}, timeout=5)
        assert (forged.status_code, forged.json()) == (401, {"code": 16, "message": "invalid webhook secret"})
        time.sleep(3)
        assert tracker.store.revisions.get(pk, new) is None and got.got == []

        sent = time.monotonic()
        genuine = httpx.post(f"{api}/hooks/hub", json=payload, headers={"X-Webhook-Secret": HUB_SECRET}, timeout=5)
        assert genuine.status_code == 202, genuine.text
        assert wait_for(lambda: got.got, timeout=30, every=0.05), stop(proc, tmp_path)
        latency = time.monotonic() - sent
    finally:
        output = stop(proc, tmp_path)
    assert proc.returncode == 0, output
    print(f"hub webhook -> alert at the receiver: {latency:.2f} s")  # a figure, not a bound: load varies
    (alert,) = got.got
    assert alert.verified
    assert alert.json["type"] == "advisory.created"
    assert alert.json["data"]["database_specific"]["revision"] == new
