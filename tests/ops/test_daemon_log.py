"""`tracker run` talks: one line at start, one per poll that found something or failed, nothing else."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.core.conftest import config_json
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(port: int, name: str, labels: str = "") -> float:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    except httpx.HTTPError:
        return -1
    for line in text.splitlines():
        if line.startswith(f"{name}{labels} "):
            return float(line.split()[-1])
    return 0


def run_tracker(hub_standin, tmp_path, *args: str):
    """Start `tracker run` watching acme/model (a history) and acme/typo (never existed); yield the port."""
    port = free_port()
    hub_standin.create_repo("acme/model")
    hub_standin.commit("acme/model", {"config.json": config_json(),
                                      "generation_config.json": b'{"eos_token_id": 2}'}, message="initial")
    url = f"sqlite:///{tmp_path}/t.sqlite3"
    (tmp_path / "tracker.toml").write_text(
        '[poll]\nevery = "1h"\njitter = "0s"\n\n[hub]\nmax_retries = 0\n\n'
        '[[watch]]\nrepo = "acme/model"\n\n[[watch]]\nrepo = "acme/typo"\n')
    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml"), "PYTHONPATH": str(ROOT),
           "TRACKER_WEBHOOK_SECRET": "s3cret"}
    env.pop("TRACKER_OSV_API_URL", None)
    log = (tmp_path / "stderr.log").open("w")  # a file, not a pipe: -vv writes more than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "tracker", *args, "run", "--port", str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=log, text=True)
    proc.stderr_path = tmp_path / "stderr.log"
    return proc, port, url


def script(hub_standin, proc, port) -> tuple[str, str]:
    """Baseline, then a change that raises an advisory (announced by a Hub webhook); stop; the output."""
    try:
        assert wait_for(lambda: metric(port, "tracker_polls_total", '{outcome="not_found"}') == 1
                        and metric(port, "tracker_polls_total", '{outcome="baseline"}') == 1), "first polls"
        hub_standin.commit("acme/model", {"generation_config.json": b'{"eos_token_id": 3}'}, message="new eos")
        hook = {"event": {"action": "update", "scope": "repo.content"}, "repo": {"type": "model", "name": "acme/model"}}
        answer = httpx.post(f"http://127.0.0.1:{port}/hooks/hub", json=hook, headers={"X-Webhook-Secret": "s3cret"},
                            timeout=60)
        assert answer.status_code == 202, answer.text
        assert wait_for(lambda: metric(port, "tracker_polls_total", '{outcome="new"}') == 1), "the webhook's poll"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    err = proc.stderr_path.read_text()
    assert proc.returncode == 0, err
    return out, err


def test_the_log_of_a_run_at_default_verbosity(hub_standin, tmp_path):
    proc, port, url = run_tracker(hub_standin, tmp_path)
    out, err = script(hub_standin, proc, port)
    assert out == ""
    lines = [TS.sub("", line) for line in err.splitlines()]
    assert all(TS.match(line) for line in err.splitlines()), err
    database = f"{tmp_path}/t.sqlite3"
    assert lines[0] == (f"INFO tracker.daemon: tracker started: polling 2 repo(s) (every 1h unless set per repo), "
                        f"database {database}, Hub {hub_standin.url}, API http://127.0.0.1:{port}")
    # The two first polls run at once, in either order; a failed one says when it is tried again (in 1h).
    first = sorted(lines[1:3])
    assert first[0] == "INFO tracker.daemon: acme/model: first poll, baseline read (1 revision)"
    typo = re.fullmatch(r"WARNING tracker\.daemon: acme/typo: not found on the Hub \(check the id; private and gated "
                        r"repos need HF_TOKEN\); next try (\S+Z)", first[1])
    assert typo, first[1]
    logged_at = next(line[:24] for line in err.splitlines() if "acme/typo" in line)
    tried = datetime.fromisoformat(typo.group(1).replace("Z", "+00:00"))
    assert tried - datetime.fromisoformat(logged_at.strip().replace("Z", "+00:00")) == pytest.approx(
        timedelta(hours=1), abs=timedelta(seconds=5))
    assert lines[3:] == [
        "INFO tracker.daemon: acme/model: 1 new revision, 1 advisory (high)",
        "INFO tracker.daemon: stopped",
    ]


def test_json_lines_for_log_shippers(hub_standin, tmp_path):
    proc, port, _ = run_tracker(hub_standin, tmp_path, "--log-format", "json")
    _, err = script(hub_standin, proc, port)
    records = [json.loads(line) for line in err.splitlines()]
    for record in records:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record.pop("ts"))
    assert records[0]["message"].startswith("tracker started: polling 2 repo(s)")
    by_message = {r["message"]: r for r in records}
    assert by_message["acme/model: 1 new revision, 1 advisory (high)"] == {
        "level": "info", "logger": "tracker.daemon", "message": "acme/model: 1 new revision, 1 advisory (high)",
        "repo": "acme/model", "outcome": "new", "new_revisions": 1, "processed": 1, "advisories": 1,
        "worst_severity": "high", "events": [], "error": None,
    }
    typo = next(r for m, r in by_message.items() if m.startswith(
        "acme/typo: not found on the Hub (check the id; private and gated repos need HF_TOKEN); next try "))
    assert (typo["level"], typo["outcome"], typo["advisories"]) == ("warning", "not_found", 0)
    assert [r["message"] for r in records][-1] == "stopped"
    assert len(records) == 5


def test_library_internals_only_at_vv(hub_standin, tmp_path):
    proc, port, _ = run_tracker(hub_standin, tmp_path, "-vv")
    _, err = script(hub_standin, proc, port)
    loggers = {m.group(1) for m in re.finditer(r"^\S+ [A-Z]+ ([\w.]+): ", err, re.M)}
    assert {"alembic.runtime.migration", "apscheduler.scheduler", "uvicorn.error"} <= loggers
    assert "INFO tracker.daemon: acme/model: 1 new revision, 1 advisory (high)" in err


def test_the_log_of_a_run_over_the_demo_history(hub_standin, tmp_path):
    """The demo's scripted intfloat/multilingual-e5-large, pushed while `tracker run` watches it."""
    from tracker.surfaces.web.demo import REPO, history

    port = free_port()
    steps = history()
    work = tmp_path / "work"
    work.mkdir()
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, steps[0].files(work), message=steps[0].message)
    url = f"sqlite:///{tmp_path}/t.sqlite3"
    (tmp_path / "tracker.toml").write_text(f'[poll]\nevery = "1h"\njitter = "0s"\n\n[[watch]]\nrepo = "{REPO}"\n')
    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml"), "PYTHONPATH": str(ROOT),
           "TRACKER_WEBHOOK_SECRET": "s3cret"}
    env.pop("TRACKER_OSV_API_URL", None)
    with (tmp_path / "stderr.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tracker", "run", "--port", str(port)], env=env,
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        assert wait_for(lambda: metric(port, "tracker_polls_total", '{outcome="baseline"}') == 1), "baseline"
        hook = {"event": {"action": "update", "scope": "repo.content"}, "repo": {"type": "model", "name": REPO}}
        for done, step in enumerate(steps[1:], start=1):
            hub_standin.commit(REPO, step.files(work), message=step.message)
            answer = httpx.post(f"http://127.0.0.1:{port}/hooks/hub", json=hook,
                                headers={"X-Webhook-Secret": "s3cret"}, timeout=60)
            assert answer.status_code == 202
            assert wait_for(lambda done=done: metric(port, "tracker_polls_total", '{outcome="new"}') == done), step
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    err = (tmp_path / "stderr.log").read_text()
    assert proc.returncode == 0, err
    assert all(TS.match(line) for line in err.splitlines()), err
    assert [TS.sub("", line) for line in err.splitlines()] == [
        f"INFO tracker.daemon: tracker started: polling 1 repo(s) (every 1h unless set per repo), "
        f"database {tmp_path}/t.sqlite3, Hub {hub_standin.url}, API http://127.0.0.1:{port}",
        "INFO tracker.daemon: intfloat/multilingual-e5-large: first poll, baseline read (1 revision)",
        "INFO tracker.daemon: intfloat/multilingual-e5-large: 1 new revision",
        "INFO tracker.daemon: intfloat/multilingual-e5-large: 1 new revision, 1 advisory (high)",
        "INFO tracker.daemon: intfloat/multilingual-e5-large: 1 new revision, 2 advisories (critical)",
        "INFO tracker.daemon: stopped",
    ]
