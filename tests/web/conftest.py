"""The pages over a real history: the demo's scripted intfloat/multilingual-e5-large, pushed to the Hub
stand-in and polled by a real tracker once per test module, served by uvicorn on a free port."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from hubstandin import HubStandin

from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import Tracker, make_tracker
from tracker.surfaces.api import create_app
from tracker.surfaces.web.demo import REPO, play


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class History:
    """The demo history as polled: the tracker, the four shas (oldest first) and the live server's URL."""

    tracker: Tracker
    shas: list[str]
    url: str

    @property
    def baseline(self) -> str:
        return self.shas[0]

    @property
    def readme(self) -> str:
        return self.shas[1]

    @property
    def template(self) -> str:
        return self.shas[2]

    @property
    def context(self) -> str:
        return self.shas[3]

    def advisory(self, sha: str, kind: str) -> str:
        pk = self.tracker.store.repos.get(REPO).pk
        (found,) = [a.id for a in self.tracker.store.advisories.find(repo_pk=pk)
                    if a.revision_sha == sha and a.kind == kind]
        return found


class Served:
    """uvicorn in a thread, stopped at teardown."""

    def __init__(self, app: object) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, name="pages-server", daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 120
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[History]:
    work = tmp_path_factory.mktemp("web-history")
    hub = HubStandin(work / "hub").start()
    settings = Settings(database={"url": f"sqlite:///{work}/tracker.sqlite3"},
                        hub={"endpoint": hub.url, "timeout": 10.0})
    client = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout,
                       max_retries=settings.hub.max_retries,
                       max_wait=settings.hub.max_wait, sleep=lambda _seconds: None)
    tracker = make_tracker(settings, hub=client, auto_upgrade=True)
    lines: list[str] = []
    try:
        shas = play(hub, tracker, work, say=lines.append)
        assert lines == [f"  {REPO}: baseline, 1 new revision(s), 1 analysed"] + [
            f"  {REPO}: new, 1 new revision(s), 1 analysed"] * 3
        with Served(create_app(tracker)) as url:
            yield History(tracker=tracker, shas=shas, url=url)
    finally:
        tracker.store.close()
        hub.stop(wait=False)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $TRACKER_TEST_ARTIFACTS (CI keeps it), else a temporary directory."""
    given = os.environ.get("TRACKER_TEST_ARTIFACTS")
    path = Path(given) if given else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
