"""Three `tracker run` replicas on one PostgreSQL share 60 repos; one is killed with SIGKILL midway.

The repos (a few owners with many repos, many owners with one) are read at start-up, then every
one gets a new revision that raises an advisory (and every third one a second, harmless revision),
announced by Hub webhooks spread over the replicas. One replica is SIGKILLed while it holds
leases. In the end every revision is stored once and analysed once (the stand-in's log shows each
revision's file list read once, except for the few the killed replica was reading), every
advisory is unique, and each subscriber's receiver (a real HTTP server verifying Standard Webhooks
signatures) holds every advisory it subscribed to exactly once after de-duplication by webhook-id,
never under two ids.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.core.conftest import config_json
from tests.delivery.conftest import Receiver
from tests.postgres import fresh_database
from tests.waiting import wait_for
from tracker.adapters.delivery.webhook import new_secret
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.model import RepoId

ROOT = Path(__file__).resolve().parents[2]
HUB_SECRET = "hub-webhook-secret"
EOS_OLD = b'{"eos_token_id": 128001}'
WORKERS = 3  # poll workers per replica


def repo_ids() -> list[RepoId]:
    """60 repos: 3 owners with 10 each, 30 owners with one."""
    many = [RepoId(f"org{o}/model-{i}") for o in range(3) for i in range(10)]
    single = [RepoId(f"user{u}/only") for u in range(30)]
    return many + single


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scalar(engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(sql)).scalar() or 0)


@pytest.mark.postgres
@pytest.mark.slow
def test_three_replicas_and_a_sigkill_process_every_revision_and_alert_once(hub_standin, postgres_server_url,
                                                                           tmp_path):
    hub = hub_standin
    db_url = fresh_database(postgres_server_url)
    repos = repo_ids()
    fleet = len(repos)
    for repo_id in repos:
        hub.create_repo(repo_id)
        hub.commit(repo_id, {"config.json": config_json(), "generation_config.json": EOS_OLD}, message="initial")
    everyone, org0 = Receiver(secret=new_secret()).start(), Receiver(secret=new_secret()).start()
    setup = make_tracker(Settings(database={"url": db_url}, hub={"endpoint": hub.url}), auto_upgrade=True)
    for repo_id in repos:
        setup.store.repos.add(repo_id, now=setup.clock())
    for target, receiver in (("*", everyone), ("org0", org0)):
        assert receiver.secret is not None
        setup.store.outbox.add_subscription(target=target, kind="webhook", url=receiver.url, secret=receiver.secret,
                                     min_severity="info", categories=(), now=setup.clock())
    setup.store.close()

    config = tmp_path / "tracker.toml"
    config.write_text(f'[poll]\nevery = "1h"\njitter = "0s"\nworkers = {WORKERS}\n\n'
                      '[delivery]\nbackoff_base = "0.2s"\nbackoff_max = "1s"\ntimeout = "2s"\n')
    env = {**os.environ, "HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": db_url, "TRACKER_CONFIG": str(config),
           "TRACKER_DELIVERY_ALLOW_HOSTS": "127.0.0.1", "TRACKER_WEBHOOK_SECRET": HUB_SECRET,
           "PYTHONPATH": str(ROOT)}
    ports = [free_port() for _ in range(3)]
    logs = [tmp_path / f"replica{i}.log" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, "-m", "tracker", "-v", "run", "--port", str(port)], env=env,
                              cwd=tmp_path, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
             for port, log in zip(ports, logs, strict=True)]
    engine = create_engine(db_url)
    try:
        assert wait_for(lambda: scalar(engine, "select count(*) from revisions where status='done'") == fleet,
                        timeout=120), "the start-up polls did not read every repo"

        new: dict[str, list[str]] = {}
        for n, repo_id in enumerate(repos):
            shas = [hub.commit(repo_id, {"generation_config.json": f'{{"eos_token_id": [128001, {n}]}}'.encode()},
                               message="fix eos")]
            if n % 3 == 0:
                shas.append(hub.commit(repo_id, {"README.md": b"# notes\n"}, message="docs"))
            new[repo_id] = shas
        expected = fleet + sum(len(s) for s in new.values())
        with httpx.Client(timeout=10) as client:
            for n, repo_id in enumerate(repos):  # each webhook to one replica; every tenth to all of them
                targets = ports if n % 10 == 0 else [ports[n % 3]]
                for port in targets:
                    answer = client.post(f"http://127.0.0.1:{port}/hooks/hub", headers={"X-Webhook-Secret": HUB_SECRET},
                                         json={"event": {"action": "update", "scope": "repo.content"},
                                               "repo": {"type": "model", "name": repo_id}})
                    assert answer.status_code == 202, answer.text

        # Midway, kill the replica that holds the most leases, mid-poll.
        assert wait_for(lambda: scalar(engine, "select count(*) from revisions where status='done'") >= fleet * 13 // 10,
                        timeout=120)
        with engine.connect() as conn:
            holders = Counter(r[0] for r in conn.execute(text(
                "select lease_owner from repos where lease_owner is not null")))
        pids = {p.pid: p for p in procs}
        victim_pid = next((int(owner.split(":")[1]) for owner, _ in holders.most_common()
                           if int(owner.split(":")[1]) in pids), procs[0].pid)
        victim = pids[victim_pid]
        victim_held = sum(n for owner, n in holders.items() if int(owner.split(":")[1]) == victim_pid)
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)

        assert wait_for(lambda: scalar(engine, "select count(*) from revisions where status='done'") == expected,
                        timeout=150), "revisions left unread after the kill"
        advisories = scalar(engine, "select count(*) from advisories")
        assert wait_for(lambda: scalar(engine, "select count(*) from deliveries where state='delivered'")
                        == scalar(engine, "select count(*) from deliveries"), timeout=60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        everyone.stop()
        org0.stop()

    survivors = [log.read_text(errors="replace") for proc, log in zip(procs, logs, strict=True) if proc is not victim]
    for proc, log in zip(procs, logs, strict=True):
        if proc is not victim:
            assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
    if victim_held:  # its leases were freed at once by a replica on the same host, not at expiry
        assert any("repo lease(s) of stopped processes" in text for text in survivors)

    # Every revision stored once, done, none given up on.
    with engine.connect() as conn:
        rows = conn.execute(text("select r.repo_id, v.sha, v.status, v.attempts from revisions v "
                                 "join repos r on r.id = v.repo_pk")).all()
        stored = Counter((r.repo_id, r.sha) for r in rows)
        assert len(rows) == expected and set(stored.values()) == {1}
        assert {(r.status, r.attempts) for r in rows} == {("done", 0)}
        for repo_id, shas in new.items():
            assert all(stored[(repo_id, sha)] == 1 for sha in shas), repo_id
        # Every advisory unique: one per eos change, none for the docs revisions.
        ads = conn.execute(text("select a.id, r.repo_id, a.revision_sha, a.kind from advisories a "
                                "join repos r on r.id = a.repo_pk")).all()
        assert advisories == len(ads) == fleet
        assert sorted((a.repo_id, a.revision_sha) for a in ads) == sorted((r, s[0]) for r, s in new.items())
        assert {a.kind for a in ads} == {"update"}
        ids_by_repo = {a.repo_id: a.id for a in ads}
    engine.dispose()

    # Analysed once: each revision's file list was read once, except those the killed replica was
    # reading when it died (at most one per poll worker), read once more by the replica that took over.
    trees = Counter(r.path.rsplit("/tree/", 1)[1] for r in hub.requests if r.method == "GET" and "/tree/" in r.path)
    new_shas = [sha for shas in new.values() for sha in shas]
    reads = Counter(trees[sha] for sha in new_shas)
    assert set(reads) <= {1, 2} and reads[2] <= WORKERS, reads

    # Every subscriber holds every advisory it asked for, exactly once after de-duplication by webhook-id.
    for receiver, wanted in ((everyone, set(ids_by_repo.values())),
                             (org0, {i for r, i in ids_by_repo.items() if r.startswith("org0/")})):
        assert all(r.verified for r in receiver.got)
        unique = receiver.unique()
        announced = Counter((json.loads(r.body)["type"], json.loads(r.body)["data"]["id"]) for r in unique.values())
        assert set(announced.values()) == {1}, "an advisory arrived under two webhook-ids"
        assert {advisory for (_type, advisory) in announced} == wanted
        assert {t for (t, _a) in announced} == {"advisory.created"}
