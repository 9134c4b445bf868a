"""SIGTERM while a poll is stuck on a slow Hub: a bounded drain, then exit; a second SIGTERM exits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.core.conftest import config_json
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/slow"


def _start(hub_standin, tmp_path: Path, grace: str) -> subprocess.Popen[bytes]:
    (tmp_path / "t.toml").write_text(f'[poll]\nevery = "1h"\njitter = "0s"\nshutdown_grace = "{grace}"\n\n'
                                     f'[[watch]]\nrepo = "{REPO}"\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_ENDPOINT": hub_standin.url,
           "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3", "TRACKER_CONFIG": str(tmp_path / "t.toml")}
    return subprocess.Popen([sys.executable, "-m", "tracker", "run", "--no-api"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _tree_requested(hub_standin) -> bool:
    return any("/tree/" in r.path for r in hub_standin.requests)


def _pending(tmp_path: Path) -> int:
    engine = create_engine(f"sqlite:///{tmp_path}/t.sqlite3")
    try:
        with engine.connect() as conn:
            return conn.execute(text("select count(*) from revisions where status = 'pending'")).scalar_one()
    finally:
        engine.dispose()


def test_sigterm_during_a_stuck_poll_exits_after_the_grace_and_loses_nothing(hub_standin, tmp_path):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    hub_standin.faults.add("/tree/", delay=120.0, times=None)  # the Hub hangs on the revision's file list
    proc = _start(hub_standin, tmp_path, grace="2s")
    try:
        assert wait_for(lambda: _tree_requested(hub_standin)), "the poll never reached the tree"
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0].decode()  # the Hub would hang for 120 s
    finally:
        proc.kill()
    assert proc.returncode == 0, output
    assert "polls still in hand after 2s; exiting, their revisions stay pending" in output
    assert "Traceback" not in output
    assert _pending(tmp_path) == 1  # read again by the next poll


def test_a_second_sigterm_exits_at_once(hub_standin, tmp_path):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    hub_standin.faults.add("/tree/", delay=120.0, times=None)
    proc = _start(hub_standin, tmp_path, grace="60s")
    try:
        assert wait_for(lambda: _tree_requested(hub_standin)), "the poll never reached the tree"
        proc.send_signal(signal.SIGTERM)
        # Two signals that arrive before the handler ran for the first count as one (the kernel and Python
        # both coalesce a pending signal), which a busy machine makes likely: repeat it until the process
        # goes, well inside the 60 s grace, which the first one alone would have waited out.
        for _ in range(90):
            try:
                proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=5)[0].decode()
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "second SIGTERM: exiting now; revisions in hand stay pending" in output
