"""SQLite serves one daemon; two delivery workers on one database never send the same outbox row."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import insert

from tests.delivery.conftest import Receiver
from tests.waiting import wait_for
from tracker.adapters.delivery.webhook import new_secret
from tracker.adapters.delivery.worker import DeliveryWorker
from tracker.adapters.settings import DeliverySettings
from tracker.adapters.store import open_store
from tracker.adapters.store.tables import deliveries
from tracker.surfaces.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_a_second_tracker_run_on_the_same_sqlite_file_is_refused(hub_standin, tmp_path):
    db = tmp_path / "t.sqlite3"
    (tmp_path / "tracker.toml").write_text("")
    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{db}",
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml"), "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen([sys.executable, "-m", "tracker", "run", "--no-api"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: Path(f"{db}.lock").exists() and Path(f"{db}.lock").read_text().strip()
                        == str(first.pid))
        second = subprocess.run([sys.executable, "-m", "tracker", "run", "--no-api"], env=env, cwd=tmp_path,
                                capture_output=True, text=True, timeout=180)
        assert second.returncode == 1
        assert second.stderr == (f"error: another `tracker run` (pid {first.pid}) is using the SQLite database {db}; "
                                 "SQLite serves one daemon: stop that one, or use PostgreSQL to run replicas\n")
        poll = CliRunner().invoke(main, ["poll"], env=env)  # in-process: the daemon is the other process here
        assert poll.exit_code == 0, poll.output  # beside the daemon, one-off polls work through the leases
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    assert first.returncode == 0
    again = subprocess.Popen([sys.executable, "-m", "tracker", "run", "--no-api"], env=env, cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:  # the lock went with the process: a new daemon starts
        assert wait_for(lambda: Path(f"{db}.lock").exists() and Path(f"{db}.lock").read_text().strip()
                        == str(again.pid))
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=120)
    assert again.returncode == 0


def test_two_delivery_workers_never_send_the_same_outbox_row(db_url):
    receiver = Receiver(secret=new_secret()).start()
    stores = [open_store(db_url, auto_upgrade=True), open_store(db_url, auto_upgrade=False)]
    try:
        now = datetime.now(UTC)
        subs = [stores[0].outbox.add_subscription(target="*", kind="webhook", url=receiver.url, secret=receiver.secret,
                                           min_severity="info", categories=(), now=now) for _ in range(12)]
        rows = [{"subscription_id": sub.id, "webhook_id": f"msg_{sub.id}_{n}", "event_type": "advisory.created",
                 "advisory_id": f"HF-{sub.id}-{n}", "repo_id": "acme/m", "severity": "low", "record": {"n": n},
                 "state": "pending", "attempts": 0, "next_attempt_at": now - timedelta(seconds=1), "created_at": now}
                for sub in subs for n in range(5)]
        with stores[0].db.engine.begin() as conn:
            conn.execute(insert(deliveries), rows)

        # The claim itself: many racers, one winner per row.
        first = stores[0].outbox.list_deliveries()[0]
        wins: list[bool] = []
        barrier = threading.Barrier(8)

        def race(store) -> None:
            barrier.wait()
            wins.append(store.outbox.lease_delivery(first.id, now=now, until=now + timedelta(seconds=30)))

        racers = [threading.Thread(target=race, args=(stores[i % 2],)) for i in range(8)]
        for t in racers:
            t.start()
        for t in racers:
            t.join(30)
        assert sorted(wins) == [False] * 7 + [True]
        stores[0].outbox.delivery_failed(first.id, status=None, error="lease test", retry_at=now)  # back to the queue

        settings = DeliverySettings(timeout=2.0, backoff_base=0.01, backoff_max=0.05, allow_hosts=("127.0.0.1",))
        workers = [DeliveryWorker(store.outbox, settings, parallel=4) for store in stores]
        for worker in workers:
            worker.start()
        try:
            assert wait_for(lambda: len(receiver.got) >= len(rows), timeout=60)
            assert wait_for(lambda: all(d.state == "delivered" for d in stores[0].outbox.list_deliveries()), timeout=30)
        finally:
            for worker in workers:
                worker.stop()
        sent = [r.webhook_id for r in receiver.got]
        assert sorted(sent) == sorted(r["webhook_id"] for r in rows)  # each row sent once, by one worker
        assert all(r.verified for r in receiver.got)
    finally:
        receiver.stop()
        for store in stores:
            store.close()
