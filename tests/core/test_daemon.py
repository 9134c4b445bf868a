"""`tracker run`: polls on schedule, picks up new watches, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.core.conftest import config_json
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def revision_count(url):
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("select count(*) from revisions where status='done'")).scalar()
    except Exception:
        return 0
    finally:
        engine.dispose()


def _answers(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=30).status_code == 200
    except httpx.HTTPError:
        return False


def test_run_polls_at_start_serves_the_api_then_polls_on_a_hub_webhook_and_stops_on_sigterm(hub_standin, tmp_path):
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hub_standin.create_repo("acme/a")
    head = hub_standin.commit("acme/a", {"config.json": config_json()})
    url = f"sqlite:///{tmp_path}/t.sqlite3"
    (tmp_path / "tracker.toml").write_text('[poll]\nevery = "1h"\njitter = "0s"\n\n[[watch]]\nrepo = "acme/a"\n')
    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml"), "PYTHONPATH": str(ROOT),
           "TRACKER_WEBHOOK_SECRET": "s3cret"}
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "-v", "run", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: revision_count(url) == 1), "baseline never read"
        # the first poll can finish before the API listens, on a busy machine
        assert wait_for(lambda: _answers(f"http://127.0.0.1:{port}/healthz")), "API never came up"
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json() == {"status": "ok"}
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/query", json={"commit": head}, timeout=60)
        assert (answer.status_code, answer.json()) == (200, {})  # the API beside polling: the baseline is safe
        hub_standin.commit("acme/a", {"config.json": config_json(vocab_size=1000)})
        hook = {"event": {"action": "update", "scope": "repo.content"}, "repo": {"type": "model", "name": "acme/a"}}
        answer = httpx.post(f"http://127.0.0.1:{port}/hooks/hub", json=hook, headers={"X-Webhook-Secret": "s3cret"},
                            timeout=60)
        assert answer.status_code == 202, answer.text
        assert wait_for(lambda: revision_count(url) == 2), "new revision never read"
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, output
    assert "polling 1 repo(s)" in output


@pytest.mark.postgres
def test_run_refuses_a_postgres_schema_that_is_behind(postgres_server_url, tmp_path):
    from tests.postgres import fresh_database

    url = fresh_database(postgres_server_url)
    (tmp_path / "tracker.toml").write_text("")
    env = {**os.environ, "TRACKER_DATABASE_URL": url, "TRACKER_CONFIG": str(tmp_path / "tracker.toml"),
           "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "tracker", "run"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("error: the database schema at postgresql+psycopg://")
    assert "is at nothing, this tracker needs" in result.stderr and "run `tracker init`" in result.stderr
    init = subprocess.run([sys.executable, "-m", "tracker", "init"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert init.returncode == 0 and "schema migrated from empty to" in init.stdout
