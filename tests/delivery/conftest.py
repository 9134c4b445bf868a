"""Fixtures for delivery tests: a tracker on the Hub stand-in (SQLite and PostgreSQL), a real HTTP receiver."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner
from standardwebhooks import Webhook, WebhookVerificationError

from tests.core.conftest import config_json
from tests.core.test_advisories import README, torch_zip
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import DeliverySettings, Settings
from tracker.app import Tracker, make_tracker
from tracker.core.model import RepoId
from tracker.surfaces.cli import main

REPO = RepoId("acme/chat-model")
OTHER = RepoId("other/tool-model")
EOS_OLD = b'{"eos_token_id": 128001}'
EOS_NEW = b'{"eos_token_id": [128001, 128009]}'


def settings_for(hub_url: str, db_url: str) -> Settings:
    """The delivery tests' settings: a tracker on this Hub and database, sending to 127.0.0.1."""
    return Settings(database={"url": db_url}, hub={"endpoint": hub_url, "timeout": 5.0},
                    delivery=DeliverySettings(max_attempts=3, backoff_base=0.05, backoff_max=0.2, timeout=2.0,
                                              allow_hosts=("127.0.0.1",)))


def build_tracker(settings: Settings, **overrides: Any) -> Tracker:
    """A tracker on ``settings`` (with ``overrides``) whose Hub client never sleeps between retries."""
    settings = settings.changed(**overrides)
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    max_wait=settings.hub.max_wait, sleep=lambda _s: None)
    return make_tracker(settings, hub=hub, auto_upgrade=True)


@pytest.fixture
def tracker_settings(hub_standin, db_url) -> Settings:
    return settings_for(hub_standin.url, db_url)


@pytest.fixture
def make(hub_standin):
    return build_tracker


def push_history(hub, repo: str = REPO) -> list[str]:
    """After the baseline r0: r1 fixes eos (update), r2 typo, r3 adds a pickle (risk), r4 docs, r5 removes it."""
    return [
        hub.commit(repo, {"generation_config.json": EOS_NEW}, message="fix eos"),
        hub.commit(repo, {"README.md": README + "\nBetter words.\n"}, message="typo"),
        hub.commit(repo, {"pytorch_model.bin": torch_zip(b"\0" * 4096)}, message="add pt weights"),
        hub.commit(repo, {"README.md": README + "\nEven better words.\n"}, message="docs"),
        hub.commit(repo, {}, delete=["pytorch_model.bin"], message="remove pickle"),
    ]


def start_repo(hub, repo: str = REPO) -> str:
    hub.create_repo(repo)
    return hub.commit(repo, {"config.json": config_json(), "generation_config.json": EOS_OLD, "README.md": README},
                      message="initial")


# -- a real receiver ---------------------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    verified: bool
    answered: int | str

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A threaded HTTP server on 127.0.0.1 that records every request and answers from a script.

    ``script`` holds one step per request, in order (then 200 for good): an int status, a
    (status, headers) pair, or ("hang", seconds) to hold the request that long before answering 200.
    Webhook signatures are verified on arrival with the ``standardwebhooks`` package when
    ``secret`` is set; a bad signature is answered 400.
    """

    secret: str | None = None
    script: list[Any] = field(default_factory=list)
    got: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Event = field(default_factory=threading.Event)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified = False
                if receiver.secret is not None:
                    try:
                        Webhook(receiver.secret).verify(body, headers)
                        verified = True
                    except WebhookVerificationError:
                        verified = False
                with receiver.lock:
                    step = receiver.script.pop(0) if receiver.script else 200
                if receiver.secret is not None and not verified:
                    step = 400
                answered: int | str = step if isinstance(step, int) else (
                    step[0] if isinstance(step[0], int) else "hang")
                with receiver.lock:
                    receiver.got.append(Received(headers, body, verified, answered))
                receiver.arrived.set()
                if isinstance(step, tuple) and step[0] == "hang":
                    time.sleep(step[1])
                    step = 200
                status, extra = (step, {}) if isinstance(step, int) else step
                try:
                    self.send_response(status)
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the sender gave up (timed out or was killed)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def unique(self) -> dict[str, Received]:
        """The verified requests answered 2xx or held, de-duplicated by webhook-id (first arrival kept)."""
        out: dict[str, Received] = {}
        with self.lock:
            for r in self.got:
                if r.answered == 200 or r.answered == "hang":
                    out.setdefault(r.webhook_id, r)
        return out


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []

    def start(secret: str | None = None, script: list[Any] | None = None) -> Receiver:
        r = Receiver(secret=secret, script=list(script or [])).start()
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


@pytest.fixture
def cli(tmp_path, hub_standin, db_url):
    """`tracker ...` on this test's database, with a config that allows 127.0.0.1 as a target."""
    config = tmp_path / "tracker.toml"
    config.write_text('[delivery]\nallow_hosts = ["127.0.0.1"]\n')
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": db_url, "TRACKER_CONFIG": str(config)}
    if db_url.startswith("postgresql"):
        assert CliRunner().invoke(main, ["init"], env=env).exit_code == 0

    def run(*args: str):
        return CliRunner().invoke(main, list(args), env=env)

    return run
