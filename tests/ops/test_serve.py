"""The real `tracker serve` in a process of its own: its app's lifespan opens the Tracker (the start line
says so, the webhook secret comes from the settings), a SIGTERM stops it cleanly with exit status 0, and a
database it cannot open is one line and exit 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.core.conftest import config_json
from tests.ops.test_daemon_log import ROOT, free_port
from tests.waiting import wait_for

SECRET = "s3cret"


def serve(tmp_path: Path, hub_url: str, database_url: str, port: int) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "tracker.toml").write_text('[hub]\nmax_retries = 0\n')
    env = {**os.environ, "HF_ENDPOINT": hub_url, "TRACKER_DATABASE_URL": database_url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml"), "PYTHONPATH": str(ROOT),
           "TRACKER_WEBHOOK_SECRET": SECRET}
    env.pop("TRACKER_OSV_API_URL", None)
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tracker", "serve", "--port", str(port)], env=env,
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err, text=True)
    return proc, log


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def test_serve_opens_its_tracker_in_the_lifespan_and_exits_0_on_sigterm(hub_standin, tmp_path):
    hub_standin.create_repo("acme/model")
    hub_standin.commit("acme/model", {"config.json": config_json()}, message="initial")
    url = f"sqlite:///{tmp_path}/t.sqlite3"
    port = free_port()
    proc, log = serve(tmp_path, hub_standin.url, url, port)
    try:
        assert wait_for(lambda: healthy(port) or proc.poll() is not None), log.read_text()
        assert proc.poll() is None, log.read_text()
        hook = {"event": {"action": "update", "scope": "repo.content"}, "repo": {"type": "model", "name": "acme/model"}}
        answer = httpx.post(f"http://127.0.0.1:{port}/hooks/hub", json=hook, headers={"X-Webhook-Secret": SECRET},
                            timeout=30)
        assert (answer.status_code, answer.json()) == (
            200, {"status": "ignored", "reason": "acme/model is not watched"})  # the hooks are on: the settings' secret
        wrong = httpx.post(f"http://127.0.0.1:{port}/hooks/hub", json=hook, headers={"X-Webhook-Secret": "x"},
                           timeout=30)
        assert wrong.status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    err = log.read_text()
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].endswith(
        f"INFO tracker.serve: tracker serving the API (no polling here): 0 repo(s) watched, database "
        f"{tmp_path}/t.sqlite3, Hub {hub_standin.url}, API http://127.0.0.1:{port}"), err


def test_serve_with_a_database_it_cannot_open_is_one_line_and_exit_1(hub_standin, tmp_path):
    proc, log = serve(tmp_path, hub_standin.url, "postgresql+psycopg://nobody@127.0.0.1:9/none", free_port())
    assert proc.wait(timeout=120) == 1
    assert log.read_text() == ("error: cannot connect to the database at postgresql+psycopg://nobody@127.0.0.1:9/none: "
                               "is the server running and reachable?\n")
