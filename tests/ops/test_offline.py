"""Offline: a Hub that cannot be reached at all (its name does not resolve, its port refuses) is said once, with
the URL and the fix, and neither retried nor asked again per repo; the scheduler's overlap notices stay quiet."""

from __future__ import annotations

import io
import logging
import socket
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_scheduler, make_tracker
from tracker.core.errors import HubUnreachable
from tracker.core.model import RepoId
from tracker.pipeline.poll_run import PollRun
from tracker.surfaces.cli import main
from tracker.surfaces.daemon import Daemon
from tracker.surfaces.logs import setup_logging

FIX = "set HF_ENDPOINT for a mirror, or try `tracker demo`"
NOWHERE = "http://nowhere.invalid"  # .invalid never resolves (RFC 2606)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(("endpoint", "reason"), [
    (NOWHERE, "its name does not resolve"),
    ("closed", "connection refused"),
])
def test_an_unreachable_hub_is_not_retried_and_not_asked_again_per_repo(endpoint, reason):
    endpoint = f"http://127.0.0.1:{closed_port()}" if endpoint == "closed" else endpoint
    slept: list[float] = []
    hub = HubClient(endpoint, max_retries=5, sleep=slept.append)
    with pytest.raises(HubUnreachable) as caught:
        hub.head(RepoId("acme/a"))
    assert str(caught.value) == f"cannot reach {endpoint} ({reason}); {FIX}"
    assert (slept, hub.requests_made) == ([], 1)  # one try, no back-off
    with pytest.raises(HubUnreachable) as again:
        hub.head(RepoId("acme/b"))
    assert again.value is caught.value and hub.requests_made == 1  # the next repo is not tried in this cycle


def test_tracker_poll_offline_says_it_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = {"HF_ENDPOINT": endpoint, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3", "TRACKER_CONFIG": ""}
    runner = CliRunner()
    added = runner.invoke(main, ["watch", "add", "acme/a", "acme/b", "acme/c", "--no-check"], env=env)
    assert added.exit_code == 0, added.output
    result = runner.invoke(main, ["poll"], env=env, catch_exceptions=False)
    assert (result.exit_code, result.stderr) == (1, f"error: cannot reach {endpoint} (connection refused); {FIX}\n")
    assert result.stdout == ("acme/a: error: the Hub is unreachable\n"
                             "acme/b: error: the Hub is unreachable\n"
                             "acme/c: error: the Hub is unreachable\n"
                             "polled 3 repos: 0 with new revisions, 3 failed\n")


def test_the_daemon_says_an_outage_once_per_heartbeat(tmp_path, caplog):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"}, hub={"endpoint": NOWHERE},
                        poll={"jitter": 0.0})
    tracker = make_tracker(settings, hub=HubClient(NOWHERE, max_retries=5, sleep=lambda _s: None), auto_upgrade=True)
    for repo in ("acme/a", "acme/b", "acme/c"):
        tracker.store.repos.add(RepoId(repo), now=datetime.now(UTC))
    daemon = Daemon(tracker, make_scheduler())
    try:
        daemon.reconcile()
        caplog.set_level(logging.INFO, logger="tracker.daemon")
        caplog.clear()
        PollRun(daemon.cycle).run()  # the cycle tells the daemon each poll's result (its on_result)
        daemon.beat()
        PollRun(daemon.cycle).run()
        said = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "tracker.daemon"]
    finally:
        daemon.stop()
        tracker.store.close()
    outage = ("WARNING", f"cannot reach {NOWHERE} (its name does not resolve); {FIX}; polls wait until it answers")
    assert said == [outage, ("INFO", "heartbeat: 3 repos watched; last 10m: 3 polls (3 error), 0 new revisions, "
                                     "0 advisories; 0 revisions pending"), outage]


@pytest.mark.parametrize(("verbose", "shown"), [(0, False), (1, False), (2, True)])
def test_the_schedulers_overlap_notice_only_at_vv(verbose, shown):
    buffer = io.StringIO()
    setup_logging(verbose, "text", talkative=True, stream=buffer)
    try:
        logging.getLogger("apscheduler.scheduler").warning(
            'Execution of job "%s" skipped: maximum number of running instances reached (%d)', "tick", 1)
        logging.getLogger("apscheduler.scheduler").warning("Run time of job %s was missed by %s", "tick", "0:00:03")
    finally:
        setup_logging(0, "text")
    lines = [line.split(" ", 1)[1] for line in buffer.getvalue().splitlines()]
    overlap = ('WARNING apscheduler.scheduler: Execution of job "tick" skipped: maximum number of running instances '
               "reached (1)")
    missed = "WARNING apscheduler.scheduler: Run time of job tick was missed by 0:00:03"
    assert lines == ([overlap, missed] if shown else [missed])

