"""The API's lifespan and its one error table.

``create_app(settings)`` opens its own Tracker when the app starts and closes it on shutdown;
``create_app(tracker)`` serves a Tracker its caller opened and leaves it open. Every tracker error
gets the status and OSV-style code the table says.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from tracker.core import errors
from tracker.surfaces.api import create_app
from tracker.surfaces.api_deps import ApiState
from tracker.surfaces.api_errors import (
    BadRequest,
    BodyTooLarge,
    Busy,
    Unauthorized,
    WrongSecret,
    answer_of,
    error_response,
)

REPO = "acme/chat-model"


def closes_counted(tracker) -> list[object]:
    """The database connections closed from now on (a disposed engine closes the ones it pooled)."""
    closed: list[object] = []
    event.listen(tracker.store.db.engine.pool, "close", lambda conn, record: closed.append(conn))
    return closed


def test_an_app_given_settings_opens_its_tracker_at_start_and_closes_it_at_shutdown(settings, make):
    owner = make(settings)
    owner.store.repos.add(REPO, now=owner.clock())
    token = owner.store.tokens.create("bot", now=owner.clock())
    app = create_app(settings)
    assert app.state.api is None  # nothing opened before the app starts
    with TestClient(app) as client:
        served = ApiState.of(app.state).tracker
        assert served is not owner and served.settings == settings
        closed = closes_counted(served)
        assert [r["repo"] for r in client.get("/v1/repos").json()["repos"]] == [REPO]
        # The writes' token check (middleware and dependency) reads the tracker the lifespan opened.
        added = client.post("/v1/watch", json={"repo": "acme/other", "check": False}, headers={"Authorization": f"Bearer {token}"})
        assert (added.status_code, added.json()["repo"]) == (201, "acme/other")
        assert closed == []
    assert app.state.api is None
    assert len(closed) >= 1  # the engine was disposed: its pooled connection closed
    assert sorted(r.repo_id for r in owner.store.repos.all()) == ["acme/chat-model", "acme/other"]


def test_an_app_given_an_open_tracker_leaves_it_open_at_shutdown(settings, make):
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    app = create_app(tracker)
    closed = closes_counted(tracker)
    with TestClient(app) as client:
        assert ApiState.of(app.state).tracker is tracker
        assert client.get("/v1/repos").status_code == 200
    assert closed == []
    assert ApiState.of(app.state).tracker is tracker
    assert [r.repo_id for r in tracker.store.repos.all()] == [REPO]


def test_an_app_that_opens_its_tracker_refuses_requests_before_it_starts(settings):
    client = TestClient(create_app(settings))  # not entered: the lifespan has not run
    with pytest.raises(RuntimeError, match="the app's Tracker is not open: serve the app with its lifespan"):
        client.get("/v1/repos")


ANSWERS = [
    (BadRequest("x"), 400, 3),
    (errors.ConfigError("x"), 400, 3),
    (errors.SettingsError("x"), 400, 3),
    (Unauthorized("x"), 401, 16),
    (WrongSecret("x"), 401, 16),
    (errors.NotFound("x"), 404, 5),
    (errors.NotWatched(REPO), 404, 5),
    (errors.RepoGone("x"), 404, 5),
    (errors.RepoGated("x"), 404, 5),
    (errors.RepoDisabled("x"), 404, 5),
    (errors.RevisionGone("x"), 404, 5),
    (errors.EntryGone("x"), 404, 5),
    (errors.UpstreamFileError("config.json", "too large"), 404, 5),
    (errors.HeaderTooLarge("model.safetensors", "header over the cap"), 404, 5),
    (errors.RevisionUnresolved("x"), 404, 5),
    (errors.RevisionUnresolved("x", temporary=True), 503, 14),
    (BodyTooLarge("x"), 413, 3),
    (Busy("x"), 429, 8),
    (errors.HubError("x"), 503, 14),
    (errors.HubRateLimited("x", retry_after=3), 503, 14),
    (errors.HubUnavailable("x"), 503, 14),
    (errors.HubDeadlineExceeded("x"), 503, 14),
    (errors.HubUnreachable("https://huggingface.co", "its name does not resolve"), 503, 14),
    (errors.StoreError("x"), 503, 14),
    (errors.StoreUnavailable("x"), 503, 14),
    (errors.StoreBusy("x"), 503, 14),
    (errors.StoreReadOnly("x"), 503, 14),
    (errors.StoreCorrupt("x"), 503, 14),
    (errors.StoreConflict("x"), 503, 14),
    (errors.AdvisoryConflict("x"), 503, 14),
    (errors.SchemaBehind("x"), 503, 14),
    (errors.TrackerError("x"), 500, 13),
]


@pytest.mark.parametrize(("error", "status", "code"), ANSWERS)
def test_every_tracker_error_has_its_status_and_code(error, status, code):
    answer = answer_of(error)
    assert (answer.status, answer.code) == (status, code)


def test_the_table_names_every_error_of_the_tracker():
    """A new error class in tracker/core/errors.py is a row above, or this fails."""
    listed = {type(e) for e, _, _ in ANSWERS}
    defined = {c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.TrackerError)}
    assert defined - listed == set()


def test_error_answers_carry_the_tables_headers_and_one_line_messages():
    busy = error_response(Busy("busy now"), {"Connection": "close"})
    assert (busy.status_code, busy.body, busy.headers["retry-after"], busy.headers["connection"]) == (
        429, b'{"code":8,"message":"busy now"}', "5", "close")
    assert error_response(Unauthorized("no")).headers["www-authenticate"] == "Bearer"
    # A Hub client's error spans lines (URL, advice); the API's own messages are shown as written.
    assert error_response(errors.HubUnavailable("down\n  see https://x\n")).body == (
        b'{"code":14,"message":"down see https://x"}')
