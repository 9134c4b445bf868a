"""The gate in front of every request body: credentials first, then a byte limit enforced while reading.

A request body is parsed only once its sender has shown the credentials its route needs (the Hub
webhook's secret, a write's bearer token) and it has been read whole within the route's limit
(``BODY_LIMITS``, else ``DEFAULT_BODY_LIMIT``). A ``Content-Length`` over the limit is answered
``413`` before a byte is read; a body without one (chunked) is counted as it arrives and answered
``413`` as soon as it passes the limit, the rest never read. What passes is handed to the app as
read, so nothing downstream can read more. A path or query string holding a NUL (``%00``) is a ``400``
before anything else: no database stores one in text, and PostgreSQL's refusal would be an outage.

Hand-written ASGI (about fifty lines) because neither Starlette nor uvicorn bounds a body: uvicorn
limits only the size of the headers.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.surfaces.api_errors import BadRequest, BodyTooLarge, Unauthorized, WrongSecret, error_response

KiB = 1024
MiB = 1024 * KiB
# Each route's largest sensible body: a querybatch of 1,000 queries is about 200 KiB, a Hub webhook
# payload a few KiB, a watch or a subscription a few hundred bytes.
BODY_LIMITS = {
    "/v1/querybatch": 1 * MiB,
    "/v1/query": 64 * KiB,
    "/hooks/hub": 256 * KiB,
    "/v1/watch": 16 * KiB,
    "/v1/subscriptions": 16 * KiB,
}
DEFAULT_BODY_LIMIT = 16 * KiB  # every other route: none takes a body
# The writes: they need a bearer token, checked before their body is read.
WRITES = re.compile(r"^/v1/(watch|subscriptions)(/.*)?$")
# Every refusal leaves its body unread: the connection is closed after the answer, or the server would
# wait on the rest of a chunked body the client may still be sending.
CLOSE = {"Connection": "close"}


def _header(scope: Scope, name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)


def has_nul(scope: Scope) -> bool:
    """Whether the request's path or query string holds a NUL, once percent-decoded."""
    return "\0" in scope["path"] or b"\0" in unquote_to_bytes(scope.get("query_string", b""))


def body_limit(path: str) -> int:
    return BODY_LIMITS.get(path.rstrip("/") or "/", DEFAULT_BODY_LIMIT)


class BodyGate:
    """ASGI middleware: credentials before the body, then the body read within its route's limit.

    ``webhook_secret``: what ``POST /hooks/hub`` must carry in ``X-Webhook-Secret`` (None: the
    route answers 404 itself). ``token_valid(token)``: whether a bearer token may write.
    """

    def __init__(self, app: ASGIApp, *, webhook_secret: str | None,
                 token_valid: Callable[[str], bool]) -> None:
        self.app = app
        self.webhook_secret = webhook_secret
        self.token_valid = token_valid

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if has_nul(scope):  # PostgreSQL stores no NUL in text: refused here, before any query is made
            await error_response(BadRequest("a NUL character (%00) in the request's path or query is refused"),
                                 CLOSE)(scope, receive, send)
            return
        refusal = await self._credentials(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        limit = body_limit(scope["path"])
        declared = _header(scope, b"content-length")
        if declared is not None and (not declared.strip().isdigit() or len(declared.strip()) > 18):
            await error_response(BadRequest("invalid Content-Length"))(scope, receive, send)
            return
        if declared is not None and int(declared) > limit:
            await self._too_large(limit)(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was in
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._too_large(limit)(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(_as_json(scope), _replay(b"".join(chunks), receive), send)

    async def _credentials(self, scope: Scope) -> JSONResponse | None:
        path, method = scope["path"], scope["method"]
        if path == "/hooks/hub" and method == "POST" and self.webhook_secret:
            given = _header(scope, b"x-webhook-secret") or ""
            if not hmac.compare_digest(given.encode("latin-1"), self.webhook_secret.encode()):
                return error_response(WrongSecret("invalid webhook secret"), CLOSE)
        if WRITES.match(path) and method in ("POST", "PUT", "PATCH", "DELETE"):
            scheme, _, token = (_header(scope, b"authorization") or "").partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                return error_response(
                    Unauthorized("this needs a bearer token: make one with `tracker token create NAME`"), CLOSE)
            if not await run_in_threadpool(self.token_valid, token):
                return error_response(Unauthorized("invalid or revoked token"), CLOSE)
        return None

    @staticmethod
    def _too_large(limit: int) -> JSONResponse:
        return error_response(BodyTooLarge(f"request body over {limit:,} bytes: refused unread"), CLOSE)


# The routes whose body is JSON: read as JSON whatever its Content-Type says (`curl -d` sends a form's).
JSON_BODIES = frozenset({"/v1/watch", "/v1/subscriptions"})  # the queries parse raw bodies themselves


def _as_json(scope: Scope) -> Scope:
    """``scope`` with a JSON content type for a JSON route's body, as /docs promises; else as it is."""
    if scope["method"] not in ("POST", "PUT", "PATCH") or (scope["path"].rstrip("/") or "/") not in JSON_BODIES:
        return scope
    headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
    return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}


def _replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A ``receive`` that gives the app the body read, then whatever the client sends next (a disconnect)."""
    given = False

    async def replay() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return replay
