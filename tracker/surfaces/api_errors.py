"""The API's errors and the one table that turns every tracker error into an HTTP answer.

Errors are answered as OSV.dev answers them, gRPC-style ``{"code": ..., "message": ...}``: 3 invalid
argument, 5 not found, 8 resource exhausted, 13 internal, 14 unavailable, 16 unauthenticated.
``ERROR_TABLE`` says which status and code each error gets (first match wins);
:func:`install_error_handlers` registers it once on an app, and the ASGI middleware in front of the
app (:mod:`tracker.surfaces.api_bodies`, the read guard) answer through :func:`error_response` too.

::

    TrackerError (tracker.core.errors)
    └── ApiError                      a request the API refuses; its message is shown as written
        ├── BadRequest(ValueError)    400, 3: malformed (a query, a repo id, a body...)
        ├── Unauthorized              401, 16 with ``WWW-Authenticate: Bearer``: no token, or a bad one
        ├── WrongSecret               401, 16: the Hub webhook's secret does not match
        ├── BodyTooLarge              413, 3: a request body over its route's limit
        └── Busy                      429, 8 with ``Retry-After: 5``: too many reads from the Hub running
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tracker.core.errors import (
    ConfigError,
    EntryGone,
    HubError,
    NotFound,
    NotWatched,
    RepoDisabled,
    RepoGone,
    RevisionGone,
    RevisionUnresolved,
    StoreError,
    TrackerError,
    UpstreamFileError,
)
from tracker.services.subscriptions import NotRetried
from tracker.services.watching import ListedInConfig

logger = logging.getLogger(__name__)


class ApiError(TrackerError):
    """A request the API refuses; the message is written for the client and shown as it is."""


class BadRequest(ApiError, ValueError):
    """A request the API refuses as malformed (400)."""


class Unauthorized(ApiError):
    """No token, or one that is malformed, unknown or revoked (401)."""


class WrongSecret(ApiError):
    """The Hub webhook's ``X-Webhook-Secret`` does not match (401; no bearer scheme to offer)."""


class BodyTooLarge(ApiError):
    """A request body over its route's limit (413)."""


class Busy(ApiError):
    """Too many reads from the Hub on behalf of requests are running (429): try again shortly."""


@dataclass(frozen=True)
class ErrorAnswer:
    """How one kind of error is answered: HTTP status, OSV/gRPC code, extra headers."""

    status: int
    code: int
    headers: Mapping[str, str] = field(default_factory=dict)


INVALID: Final = ErrorAnswer(400, 3)
NOT_FOUND: Final = ErrorAnswer(404, 5)
UNAVAILABLE: Final = ErrorAnswer(503, 14)  # retry later
INTERNAL: Final = ErrorAnswer(500, 13)

# Every error -> its answer, in one place. First match wins, so subclasses come before their bases.
ERROR_TABLE: Final[tuple[tuple[type[Exception], ErrorAnswer], ...]] = (
    (BadRequest, INVALID),
    (Unauthorized, ErrorAnswer(401, 16, {"WWW-Authenticate": "Bearer"})),
    (WrongSecret, ErrorAnswer(401, 16)),
    (BodyTooLarge, ErrorAnswer(413, 3)),
    (Busy, ErrorAnswer(429, 8, {"Retry-After": "5"})),
    (ConfigError, INVALID),  # a malformed repo id or revision reached the Hub client
    (ListedInConfig, INVALID),  # unwatching a repo the config file lists: it would be back at once
    (NotRetried, INVALID),  # retrying a delivery that is not dead
    (NotWatched, NOT_FOUND),
    (NotFound, NOT_FOUND),  # no subscription, token, rule, advisory, feed... by that id or name
    (RepoGone, NOT_FOUND),  # the Hub: no such repo (or private, gated)
    (RevisionGone, NOT_FOUND),
    (EntryGone, NOT_FOUND),
    (RepoDisabled, NOT_FOUND),
    (UpstreamFileError, NOT_FOUND),  # a path the tracker refuses to request
    (HubError, UNAVAILABLE),  # the Hub is down, rate limiting, or out of time
    (StoreError, UNAVAILABLE),
)


def answer_of(exc: Exception) -> ErrorAnswer:
    """The answer ``exc`` gets (500, 13 for an error the table does not name)."""
    if isinstance(exc, RevisionUnresolved):
        # Unavailable: the Hub could not be asked (retry later); not found: it says no such revision.
        return UNAVAILABLE if exc.temporary else NOT_FOUND
    return next((answer for kind, answer in ERROR_TABLE if isinstance(exc, kind)), INTERNAL)


def error_message(exc: Exception) -> str:
    """The message shown: the API's own as written; a database's without where the database is (its
    URL, user, host and port go to the log); any other on one line (a Hub client's error text spans
    several: the URL, advice, a docs link)."""
    if isinstance(exc, ApiError):
        return str(exc)
    if isinstance(exc, StoreError):
        return exc.public
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


def error_body(code: int, message: str) -> dict[str, object]:
    return {"code": code, "message": message}


def error_response(exc: Exception, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``exc`` answered as the table says, with ``headers`` added to the table's own."""
    answer = answer_of(exc)
    return JSONResponse(error_body(answer.code, error_message(exc)), status_code=answer.status,
                        headers={**answer.headers, **(headers or {})} or None)


async def _tracker_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, StoreError):  # the client is told what failed, the operator where
        logger.warning("api.database_error %s %s: %s", request.method, request.url.path, exc)
    return error_response(exc)


async def _invalid_body(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(BadRequest(f"invalid request body: {exc.errors()[0].get('msg', 'invalid')}"))


# Starlette's own refusals (no route, a method the route does not take), as the gRPC codes OSV uses.
HTTP_CODES: Final[Mapping[int, int]] = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 413: 3, 429: 8, 503: 14}


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's HTTPException answered in OSV's error shape (the pages answer browsers in HTML first)."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
        allowed = next((v for k, v in (exc.headers or {}).items() if k.lower() == "allow"), None)
        message += f": use {allowed}" if allowed else ""
    elif exc.status_code == 404 and exc.detail == "Not Found":
        message = f"no such endpoint: {request.url.path} (see /docs)"
    else:
        message = str(exc.detail)
    code = HTTP_CODES.get(exc.status_code, 13 if exc.status_code >= 500 else 3)
    return JSONResponse(error_body(code, message), status_code=exc.status_code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """The table's answers for every tracker error a route raises, a 400 for a body FastAPI rejects,
    and OSV's error shape for Starlette's own answers (404 no route, 405 method not allowed)."""
    app.add_exception_handler(TrackerError, _tracker_error)
    app.add_exception_handler(RequestValidationError, _invalid_body)
    app.add_exception_handler(StarletteHTTPException, http_error)
