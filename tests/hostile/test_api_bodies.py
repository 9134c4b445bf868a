"""Request bodies are bounded before they are parsed, credentials come first, and reads from the Hub on a
caller's behalf are gated: the API cannot be made to hold a 50 MiB body or fetch eight tokenizers at once.

The body cases run on a real uvicorn server (a body is refused while it arrives, not after) and in
process (the exact answers); the on-demand case sends eight parallel diffs of an unwatched repo
whose tokenizer is 4 MiB a revision, and counts what the Hub stand-in served.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
import uvicorn
from fastapi.testclient import TestClient
from hubstandin import HubStandin

from tests.core.conftest import config_json
from tests.hostile.api_support import stream_post, tokenizer_json
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app
from tracker.surfaces.api_bodies import BODY_LIMITS, DEFAULT_BODY_LIMIT
from tracker.surfaces.api_deps import OnDemandGate
from tracker.surfaces.api_errors import Busy

MiB = 1024 * 1024
SECRET = "hub-webhook-secret"
WATCHED = RepoId("acme/watched")
UNWATCHED = RepoId("stranger/big-tokenizer")
TOKENIZER_BYTES = 4 * MiB


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """A Hub stand-in with a watched repo and an unwatched one (two revisions, a big tokenizer each), a
    tracker with a write token, and the API served by uvicorn on a socket of its own."""
    work = tmp_path_factory.mktemp("bodies")
    hub = HubStandin(work / "hub").start()
    server = None
    try:
        hub.create_repo(WATCHED)
        hub.commit(WATCHED, {"config.json": config_json()})
        hub.create_repo(UNWATCHED)
        old = hub.commit(UNWATCHED, {"config.json": config_json(), "tokenizer.json": tokenizer_json("a", TOKENIZER_BYTES)})
        new = hub.commit(UNWATCHED, {"tokenizer.json": tokenizer_json("b", TOKENIZER_BYTES)}, message="new vocabulary")
        settings = Settings(database={"url": f"sqlite:///{work}/t.sqlite3"}, hub={"endpoint": hub.url})
        tracker = make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))
        tracker.store.repos.add(WATCHED, now=tracker.clock())
        tracker.poll()
        token = tracker.store.tokens.create("ci", now=tracker.clock())
        app = create_app(tracker, webhook_secret=SECRET, bind_host="127.0.0.1")
        listening = socket.create_server(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True).start()
        port = listening.getsockname()[1]
        assert _wait(lambda: server.started)
        yield {"hub": hub, "tracker": tracker, "port": port, "url": f"http://127.0.0.1:{port}", "token": token,
               "old": old, "new": new, "app": app}
    finally:
        if server is not None:
            server.should_exit = True
        hub.stop(wait=False)


def _wait(predicate: Any, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("path, headers", [
    ("/v1/querybatch", {"Content-Type": "application/json"}),
    ("/hooks/hub", {"Content-Type": "application/json", "X-Webhook-Secret": SECRET}),
])
def test_a_50_mib_body_is_refused_while_it_arrives(world, path, headers, chunked):
    answer, sent = stream_post(world["port"], path, total=50 * MiB, headers=headers, chunked=chunked)
    if answer or not chunked:  # a chunked body's answer can be lost to the reset (see stream_post); never a 200
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert f"request body over {BODY_LIMITS[path]:,} bytes: refused unread".encode() in answer
    # The server stopped reading at the limit: what got out of this side is socket buffers, not 50 MiB.
    assert sent < 16 * MiB
    assert httpx2.get(f"{world['url']}/healthz").status_code == 200


@pytest.fixture
def client(world) -> TestClient:
    return TestClient(world["app"], base_url="http://127.0.0.1")


@pytest.mark.parametrize("path, limit", [("/v1/querybatch", 1 * MiB), ("/v1/query", 64 * 1024),
                                         ("/v1/watch", 16 * 1024), ("/v1/vulns/HF-x", DEFAULT_BODY_LIMIT)])
def test_each_route_has_its_limit(client, world, path, limit):
    auth = {"Authorization": f"Bearer {world['token']}"}
    over = client.post(path, content=b" " * (limit + 1), headers=auth)
    assert (over.status_code, over.json()) == (413, {"code": 3, "message": f"request body over {limit:,} bytes: "
                                                                            "refused unread"})


def test_a_body_at_its_limit_is_read_and_parsed(client):
    query = json.dumps({"commit": "0" * 40}).encode()
    answer = client.post("/v1/query", content=query + b" " * (64 * 1024 - len(query)),
                         headers={"Content-Type": "application/json"})
    assert (answer.status_code, answer.json()) == (404, {"code": 5, "message": (
        f"the tracker has not read commit {'0' * 40}: it is in no watched repo's history; name its repo "
        "(package.name) to have it looked up on the Hub")})


def test_the_webhook_secret_is_checked_before_the_body_is_read_or_parsed(client):
    for body in (b"{not json", b"[" * (10 * MiB)):
        answer = client.post("/hooks/hub", content=body, headers={"X-Webhook-Secret": "wrong"})
        assert (answer.status_code, answer.json()) == (401, {"code": 16, "message": "invalid webhook secret"})
    # With the secret, the same broken body reaches the parser, which says so.
    parsed = client.post("/hooks/hub", content=b"{not json",
                         headers={"X-Webhook-Secret": SECRET, "Content-Type": "application/json"})
    assert parsed.status_code == 400


def test_a_write_token_is_checked_before_the_body_is_read_or_parsed(client, world):
    for headers, message in (({}, "this needs a bearer token: make one with `tracker token create NAME`"),
                             ({"Authorization": "Bearer trk_000000000000_nope"}, "invalid or revoked token")):
        answer = client.post("/v1/watch", content=b"{not json" + b" " * MiB, headers=headers)
        assert (answer.status_code, answer.json()) == (401, {"code": 16, "message": message})
        assert answer.headers["www-authenticate"] == "Bearer"
    good = client.post("/v1/watch", json={"repo": "acme/later", "check": False}, headers={"Authorization": f"Bearer {world['token']}"})
    assert (good.status_code, good.json()["repo"]) == (201, "acme/later")


def test_eight_parallel_diffs_of_an_unwatched_repo_fetch_one_diffs_worth(world):
    hub, url = world["hub"], world["url"]
    hub.clear_log()
    barrier = threading.Barrier(8)
    answers: list[httpx2.Response] = []

    def ask() -> None:
        barrier.wait()
        answers.append(httpx2.get(f"{url}/v1/repos/{UNWATCHED}/diff", params={"from": world["old"], "to": world["new"]},
                                  timeout=300))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    statuses = sorted(a.status_code for a in answers)
    assert len(statuses) == 8 and set(statuses) <= {200, 429} and 200 in statuses, statuses
    busy = [a for a in answers if a.status_code == 429]
    assert busy, "all eight ran: nothing bounded them"
    assert {(a.json()["code"], a.headers["retry-after"]) for a in busy} == {(8, "5")}
    assert {a.json()["message"] for a in busy} == {
        "busy: this client already has 1 read(s) from the Hub running ([api] on_demand_per_client); wait for it"}
    # Both tokenizers once (a diff that ran later found them stored), never eight times.
    assert hub.bytes_served() < 3 * TOKENIZER_BYTES, hub.bytes_served()


def test_the_gate_bounds_reads_over_all_clients_and_per_client():
    gate = OnDemandGate(total=2, per_client=1)
    with gate.slot("10.0.0.1"):
        with pytest.raises(Busy, match=r"^busy: this client already has 1 read"):
            with gate.slot("10.0.0.1"):
                pass
        with gate.slot("10.0.0.2"):
            with pytest.raises(Busy, match=r"^busy: 2 reads from the Hub for other requests are running"):
                with gate.slot("10.0.0.3"):
                    pass
        with gate.slot("10.0.0.3"):  # a slot given back is free again
            pass
    with gate.slot("10.0.0.1"), gate.slot("10.0.0.2"):
        pass
