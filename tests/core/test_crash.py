"""Kill a real `tracker poll` process mid-poll, poll again: nothing lost, nothing duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from sqlalchemy import create_engine, text

from tests.core.conftest import config_json
from tracker.core.model import RepoId
from tracker.surfaces.cli import main

REPO = RepoId("acme/crashy-model")
ROOT = Path(__file__).resolve().parents[2]


def run_tracker(args, env, cwd, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "tracker", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kwargs)


def done_count(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("select count(*) from revisions where status = 'done'")).scalar()
    except Exception:
        return 0
    finally:
        engine.dispose()


def test_kill_mid_poll_then_poll_again(hub_standin, tmp_path):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    url = f"sqlite:///{tmp_path}/tracker.sqlite3"
    (tmp_path / "tracker.toml").write_text("")
    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml"), "PYTHONPATH": str(ROOT)}

    # Only the poll that is killed needs a process of its own; the others run here.
    cli = CliRunner()
    add = cli.invoke(main, ["watch", "add", REPO], env=env, catch_exceptions=False)
    assert add.exit_code == 0, add.output
    first = cli.invoke(main, ["poll"], env=env, catch_exceptions=False)
    assert first.exit_code == 0, first.output

    new = [hub_standin.commit(REPO, {"config.json": config_json(num_hidden_layers=n)}, message=f"layers {n}")
           for n in range(7, 13)]
    hub_standin.faults.add("/tree/", delay=0.7, times=None)  # a slow Hub: time to kill mid-poll
    victim = run_tracker(["poll"], env, tmp_path)
    deadline = time.monotonic() + 60
    while done_count(url) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    killed_at = done_count(url)
    assert 3 <= killed_at < 7, killed_at

    hub_standin.faults.clear()
    again = cli.invoke(main, ["poll"], env=env, catch_exceptions=False)
    output = again.output
    assert again.exit_code == 0, output
    assert f"{REPO}: unchanged, {7 - killed_at} analysed" in output

    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("select sha, parent_sha, status, diff from revisions order by seq")).all()
    engine.dispose()
    assert [r.sha for r in rows][1:] == new
    assert all(r.status == "done" for r in rows)
    parents = [r.parent_sha for r in rows]
    assert parents == [None, rows[0].sha, *new[:-1]]
    import json

    for n, row in zip(range(7, 13), rows[1:]):
        diff = json.loads(row.diff) if isinstance(row.diff, str) else row.diff
        assert diff["texts"]["config.json"]["deepdiff"]["values_changed"]["root['num_hidden_layers']"] == {
            "new_value": n, "old_value": n - 1 if n > 7 else 6}
