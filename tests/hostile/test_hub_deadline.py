"""Wall-clock deadlines: per request (body and headers included) and per poll, thread by thread.

A server dripping one byte at a time never trips a per-read timeout; only a deadline ends it.
"""

from __future__ import annotations

import json
import threading

import pytest
from hubstandin import HubStandin

from tests.hostile.hub_support import drip_server, make_repo
from tracker.adapters.hub import HubClient
from tracker.core.errors import HubDeadlineExceeded, HubUnavailable
from tracker.core.model import RepoId

INFO = "/api/models/acme/tiny?expand=sha&expand=gated&expand=private"  # an identity check: never the siblings list

REPO = RepoId("acme/tiny")


def client(endpoint: str, **options: object) -> HubClient:
    options = {"token": False, "timeout": 30.0, "max_retries": 0, "sleep": lambda _s: None, **options}
    return HubClient(endpoint, **options)  # type: ignore[arg-type]


def info_body(sha: str) -> bytes:
    return json.dumps({"id": "acme/tiny", "sha": sha, "padding": "x" * 200}).encode()


def test_a_body_dripping_a_byte_at_a_time_is_cut_at_the_request_deadline(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=info_body(sha), drip=0.2)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin.url, request_deadline=1.0).repo_info(REPO)
    assert type(caught.value) is HubUnavailable
    assert str(caught.value) == f"GET {hub_standin.url}{INFO}: body not read within the 1s deadline"


def test_headers_dripping_a_byte_at_a_time_are_cut_at_the_request_deadline() -> None:
    with drip_server(0.2) as url:
        with pytest.raises(HubUnavailable) as caught:
            client(url, request_deadline=1.0).head(REPO)
    assert str(caught.value) == (
        f"HEAD {url}/acme/tiny/resolve/main/config.json: no answer within the 1s deadline (after 0 retries)"
    )


def test_retries_each_get_their_own_request_deadline() -> None:
    with drip_server(0.2) as url:
        with pytest.raises(HubUnavailable, match=r"no answer within the 0.5s deadline \(after 2 retries\)"):
            client(url, request_deadline=0.5, max_retries=2).head(REPO)


def test_the_poll_deadline_ends_a_slow_request_and_refuses_the_next(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=info_body(sha), drip=0.2)
    hub = client(hub_standin.url, request_deadline=60.0)
    with hub.deadline(1.0):
        with pytest.raises(HubDeadlineExceeded) as caught:
            hub.repo_info(REPO)
        assert str(caught.value) == f"GET {hub_standin.url}{INFO}: the poll's deadline of 1s ran out"
        asked = len(hub_standin.requests)
        with pytest.raises(HubDeadlineExceeded, match="the poll's deadline of 1s ran out"):
            hub.head(REPO)
        assert len(hub_standin.requests) == asked  # refused without asking
    assert hub.head(REPO).sha == sha  # outside the block: no deadline


def test_the_poll_deadline_is_per_thread(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    hub = client(hub_standin.url)
    expired = threading.Event()
    release = threading.Event()
    outcome: list[str] = []

    def poll() -> None:
        with hub.deadline(0.05):
            expired.wait(0.1)  # let it run out
            expired.set()
            release.wait(5)
            try:
                hub.head(REPO)
                outcome.append("answered")
            except HubDeadlineExceeded:
                outcome.append("deadline")

    worker = threading.Thread(target=poll)
    worker.start()
    expired.wait(5)
    assert hub.head(REPO).sha == sha  # this thread has no deadline
    release.set()
    worker.join(5)
    assert outcome == ["deadline"]


def test_a_backoff_that_would_outlast_the_poll_deadline_is_not_slept(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=503, retry_after=30)
    slept: list[float] = []
    hub = client(hub_standin.url, max_retries=3, sleep=slept.append)
    with hub.deadline(5.0), pytest.raises(HubDeadlineExceeded) as caught:
        hub.repo_info(REPO)
    assert str(caught.value).startswith("retrying in 30s would pass the poll's deadline of 5s")
    assert slept == []
    assert len(hub_standin.requests) == 1


def test_nested_deadlines_keep_the_earlier_one(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=info_body(sha), drip=0.2)
    hub = client(hub_standin.url)
    with hub.deadline(0.6), hub.deadline(30.0), pytest.raises(HubDeadlineExceeded, match="deadline of 0.6s"):
        hub.repo_info(REPO)


def test_a_proxy_from_the_environment_is_used_and_bounded_too(monkeypatch) -> None:
    """HTTP_PROXY is honoured as huggingface_hub's session would; a proxy dripping its answer is cut the same."""
    from tracker.adapters.hub import deadline

    with drip_server(0.2) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        with pytest.raises(HubUnavailable) as caught:
            client("http://hub.invalid", request_deadline=1.0).head(REPO)  # resolvable by the proxy alone
    assert str(caught.value) == ("HEAD http://hub.invalid/acme/tiny/resolve/main/config.json: "
                                 "no answer within the 1s deadline (after 0 retries)")
    assert deadline.shared_client() is deadline.shared_client()
