"""Ctrl-C on `tracker poll`: the first finishes the revision in hand, says what was done and what is left, and
exits 130; a second exits at once; none prints a traceback, during start-up either.

The real command in a subprocess against the stand-in; a request the stand-in holds marks the moment
the poll is busy with a revision (never a sleep).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.core.conftest import config_json
from tests.waiting import wait_for
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker

A, B, C = "a1/model", "b1/model", "c1/model"


@pytest.fixture
def setup(hub_standin, tmp_path):
    """Three repos read once; then three new revisions of A and one each of B and C."""
    for n, repo in enumerate((A, B, C)):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(num_hidden_layers=n + 1)})
    url = f"sqlite:///{tmp_path}/t.sqlite3"
    settings = Settings(database={"url": url}, hub={"endpoint": hub_standin.url, "timeout": 30.0})
    tracker = make_tracker(settings, hub=HubClient(hub_standin.url, timeout=30.0), auto_upgrade=True)
    for repo in (A, B, C):
        tracker.store.repos.add(repo, now=tracker.clock())
    assert {r.status for r in tracker.poll()} == {"baseline"}
    tracker.store.close()
    new = [hub_standin.commit(A, {"config.json": config_json(vocab_size=30000 + n)}) for n in range(3)]
    for repo in (B, C):
        hub_standin.commit(repo, {"config.json": config_json(vocab_size=31000)})
    (tmp_path / "tracker.toml").write_text("[poll]\nworkers = 1\n")
    env = {**os.environ, "HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}
    return env, new, tmp_path


def _as_a_terminal_would() -> None:
    # A shell that runs the suite in the background starts it with SIGINT ignored, and the tracker, as any
    # program, leaves an ignored SIGINT ignored: the child gets Ctrl-C's default, as a terminal gives it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tracker", "poll"], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_as_a_terminal_would)


def held_on(hub_standin, new: list[str]) -> threading.Event:
    """The stand-in holds the reading of A's second new revision until the event is set."""
    release = threading.Event()
    hub_standin.faults.add(f"/api/models/{A}/tree/{new[1]}", hold=release, times=1)
    return release


def asked(hub_standin, sha: str) -> bool:
    return any(f"/tree/{sha}" in r.path for r in hub_standin.requests)


def test_the_first_ctrl_c_finishes_the_revision_in_hand_and_says_what_is_left(hub_standin, setup):
    env, new, cwd = setup
    release = held_on(hub_standin, new)
    proc = start(env, cwd)
    try:
        assert wait_for(lambda: asked(hub_standin, new[1]))
        proc.send_signal(signal.SIGINT)
    finally:
        release.set()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.splitlines() == ["interrupted: finishing the revisions in hand (Ctrl-C again exits at once)"]
    assert out.splitlines() == [
        f"{A}: new, 3 new revision(s), 2 analysed",
        f"{B}: deferred: not polled: interrupted; the next poll reads it",
        f"{C}: deferred: not polled: interrupted; the next poll reads it",
        "interrupted: polled 1 of 3 repo(s), 2 revision(s) analysed; left for the next poll: 2 repo(s) not polled, "
        "1 revision(s) waiting to be read",
    ]
    assert not asked(hub_standin, new[2])  # the third revision was left pending, never read

    again = subprocess.run([sys.executable, "-m", "tracker", "poll"], env=env, cwd=cwd, text=True,
                           capture_output=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == "polled 3 repos: 2 with new revisions, 0 failed"


def test_a_second_ctrl_c_exits_at_once(hub_standin, setup):
    env, new, cwd = setup
    release = held_on(hub_standin, new)
    proc = start(env, cwd)
    try:
        assert wait_for(lambda: asked(hub_standin, new[1]))
        proc.send_signal(signal.SIGINT)
        first = proc.stderr.readline()  # the first was handled: the poll is finishing the revision in hand
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # the held request is still held: nothing waits for it
    finally:
        release.set()
    assert proc.returncode == 130
    assert first == "interrupted: finishing the revisions in hand (Ctrl-C again exits at once)\n"
    assert "Traceback" not in err and err.splitlines() == ["interrupted again: exiting now"]


def opened(pid: int, path: Path) -> bool:
    """Whether the process holds ``path`` open (its start-up has reached the database)."""
    try:
        return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_ctrl_c_during_start_up_is_one_line_and_exit_130(hub_standin, setup):
    env, _new, cwd = setup
    release = threading.Event()
    hub_standin.faults.add("/", hold=release, times=None)  # the Hub is never reached: still starting up
    proc = start(env, cwd)
    try:
        assert wait_for(lambda: opened(proc.pid, cwd / "t.sqlite3"), every=0.001)
        proc.send_signal(signal.SIGINT)
    finally:
        release.set()  # had it reached the Hub by now, the poll finishes what it holds: 130 all the same
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("interrupted")
