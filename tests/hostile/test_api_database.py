"""The API in front of PostgreSQL (and SQLite, which must behave the same): a NUL in a path or query is a 400,
never a database error; a database error never tells the client where the database is (the log does); and
sixteen concurrent watches of one repo are one row, every answer a 201.

PostgreSQL runs as a throwaway server (``tests/postgres.py``); the API is served by uvicorn on a socket of its
own, so the concurrent writes really are concurrent.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx2
import pytest
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.ops.conftest import migrated
from tracker.adapters.settings import Settings
from tracker.adapters.store.db import database_error
from tracker.app import make_tracker
from tracker.core.errors import StoreError
from tracker.surfaces.api import create_app

NUL_REFUSED = {"code": 3, "message": "a NUL character (%00) in the request's path or query is refused"}


@pytest.fixture
def served(db_url, tmp_path) -> Iterator[dict[str, Any]]:
    settings = Settings(database={"url": migrated(db_url)},
                        hub={"endpoint": "http://127.0.0.1:9", "timeout": 1.0})
    tracker = make_tracker(settings)
    token = tracker.store.tokens.create("ci", now=tracker.clock())
    app = create_app(tracker, bind_host="127.0.0.1")
    try:
        yield {"tracker": tracker, "token": token, "app": app, "url": db_url,
               "client": TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)}
    finally:
        tracker.close()


@pytest.mark.parametrize("method, path", [
    ("GET", "/search?q=%00"),
    ("GET", "/advisories?library=%00"),
    ("GET", "/v1/vulns/x%00"),
    ("GET", "/v1/repos/acme/x%00y"),
    ("GET", "/feeds/all.atom?severity=high%00"),
    ("POST", "/v1/query?page=%00"),
    ("DELETE", "/v1/watch/acme/x%00"),
])
def test_a_nul_in_the_path_or_query_is_a_400(served, method, path):
    answer = served["client"].request(method, path, headers={"Authorization": f"Bearer {served['token']}"})
    assert (answer.status_code, answer.json()) == (400, NUL_REFUSED)


@pytest.mark.parametrize("path, body, message", [
    ("/v1/query", {"package": {"name": "acme/x\u0000"}, "commit": "a" * 40},
     "invalid repo id 'acme/x\\x00': each part must be 1-96 letters, digits, '-', '_' or '.'"),
    ("/v1/query", {"commit": "a" * 40, "page_token": "1\u0000"}, "invalid page_token"),
    ("/v1/watch", {"repo": "acme/x", "branch": "ma\u0000in"},
     "invalid branch: a commit id, branch or tag without spaces or control characters"),
])
def test_a_nul_in_a_body_is_a_400_too(served, path, body, message):
    answer = served["client"].post(path, json=body, headers={"Authorization": f"Bearer {served['token']}"})
    assert answer.status_code == 400 and answer.json()["code"] == 3
    assert answer.json()["message"].startswith(message)


def _where(url: str) -> list[str]:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return [str(parsed.database)]
    return [url.split("://", 1)[1].split("/", 1)[0], str(parsed.username), str(parsed.host), str(parsed.port)]


def test_a_database_error_never_names_the_database_to_a_client(served, caplog):
    """The table the route reads is gone: the client learns that the database failed, the log where."""
    engine = create_engine(served["url"])
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE repos" + (" CASCADE" if engine.dialect.name == "postgresql" else "")))
    engine.dispose()
    client = served["client"]
    with caplog.at_level(logging.WARNING):
        answer = client.get("/v1/repos")
        page = client.get("/repos/acme/x")
    assert (answer.status_code, answer.json()) == (503, {"code": 14, "message": StoreError.GENERIC})
    assert page.status_code == 503 and StoreError.GENERIC in page.text
    for secret in _where(served["url"]):
        assert secret not in answer.text
    assert _where(served["url"])[0] not in page.text and _where(served["url"])[-1] not in page.text  # the page's
    # own words include "tracker", the user's name in the throwaway server's URL
    logged = [r.getMessage() for r in caplog.records if "database_error" in r.getMessage()]
    assert len(logged) == 2 and all(_where(served["url"])[0] in line for line in logged), logged


@pytest.mark.parametrize("driver, public", [
    ("connection to server at \"10.0.0.5\", port 5433 failed: Connection refused",
     "cannot connect to the database: is the server running and reachable?"),
    ("FATAL:  password authentication failed for user \"tracker\"",
     "the database refused the connection: check the URL's user, password and database name"),
    ("server closed the connection unexpectedly (host 10.0.0.5 port 5433)", StoreError.GENERIC),
])
def test_the_public_message_of_a_driver_error_leaves_out_where(driver, public):
    error = database_error(RuntimeError(driver), "postgresql+psycopg://tracker@10.0.0.5:5433/db")
    assert error.public == public
    assert "10.0.0.5" in str(error) and "10.0.0.5" not in error.public and "5433" not in error.public


def _serve(app) -> tuple[uvicorn.Server, str]:
    listening = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True).start()
    for _ in range(1200):
        if server.started:
            break
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{listening.getsockname()[1]}"


def test_sixteen_concurrent_watches_of_one_repo_are_one_upsert(served):
    server, url = _serve(served["app"])
    barrier = threading.Barrier(16)

    def watch(n: int) -> tuple[int, Any]:
        barrier.wait()
        answer = httpx2.post(f"{url}/v1/watch", json={"repo": "acme/raced", "every": f"{10 + n}m"},
                             headers={"Authorization": f"Bearer {served['token']}"}, timeout=60)
        return answer.status_code, answer.json()

    try:
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(watch, range(16)))
    finally:
        server.should_exit = True
    assert [status for status, _ in answers] == [201] * 16, answers
    assert sum(body["created"] for _, body in answers) == 1
    assert {body["repo"] for _, body in answers} == {"acme/raced"}
    rows = [r for r in served["tracker"].store.repos.all() if r.repo_id == "acme/raced"]
    assert len(rows) == 1 and rows[0].every_seconds in {(10 + n) * 60 for n in range(16)}
