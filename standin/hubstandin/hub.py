"""A local stand-in for the Hugging Face Hub HTTP API, backed by git repos on disk.

Why: the tracker must be tested against the *real* ``huggingface_hub`` client
(its retries, error mapping, redirects and cache all live in the client), and
no machine here can reach huggingface.co. This server speaks the endpoints the
client uses closely enough that the client cannot tell (see
the project's Hub protocol notes (``shared/hub-protocol.md``) sections 2-4, 6, 7, 11, 12 for the contract):

* ``GET /api/models/{repo}[/revision/{rev}]`` (``blobs``, ``expand``, ``securityStatus``),
  ``/refs``, ``/commits/{rev}`` (``p``/``limit`` pages, absolute ``Link``), ``/tree/{rev}[/{path}]``
  (cursor pages: 1000, or 50 with ``expand``), ``POST /paths-info/{rev}``,
  ``POST /super-squash/{branch}``, ``GET /api/models`` (list), ``GET /api/agent-harnesses``.
* ``HEAD``/``GET /{repo}/resolve/{rev}/{path}``: regular files answer 200 with ``ETag``
  (blob sha1), ``X-Repo-Commit`` and the true ``Content-Length``; LFS files answer 302
  to a "CDN" on another origin (``localhost`` when the API is addressed as
  ``127.0.0.1`` and vice versa) with ``X-Linked-Etag``/``X-Linked-Size``. ``Range`` gives
  206 + ``Content-Range`` on both origins. No Xet headers are ever sent.
* Errors carry ``X-Error-Code``/``X-Error-Message`` and a ``{"error": ...}`` body, so the
  client raises its typed errors (RepositoryNotFound, RevisionNotFound, EntryNotFound,
  GatedRepo, DisabledRepo).
* Renamed repos answer 307 with a *relative* ``Location``, as the Hub does.
* Routing uses the raw path, because revisions arrive as ``refs%2Fpr%2F1``.
* ``POST /api/_standin/commit/{repo}`` is the stand-in's own (the Hub has no such endpoint): it commits
  to a running stand-in from another process (``python -m hubstandin commit``), with a JSON body
  ``{"files": {path: base64}, "delete": [path], "message": str, "branch": str, "create": bool}``.

Gating follows the Hub: metadata (model_info, tree, commits) stays public; file
content (``/resolve``) needs an allowed bearer token. Private repos answer
``RepoNotFound`` (401 without a token, 404 with a token that is not allowed).

Testing hooks: every request is logged (:attr:`HubStandin.requests`) with the body
bytes really sent, and :attr:`HubStandin.faults` injects 429/5xx answers, slow
answers, truncated bodies and malformed JSON.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import datetime as dt
import html
import json
import logging
import mimetypes
import os
import re
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl, quote, unquote, urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .gitrepos import (
    CommitRecord,
    Entry,
    RepoMeta,
    RepoStore,
    RevisionNotFound,
    format_date,
)

__all__ = ["Fault", "FaultSet", "HubStandin", "RequestRecord", "build_app"]

_API_ACTIONS = frozenset(
    {"revision", "refs", "commits", "tree", "paths-info", "safetensors-metadata", "super-squash", "treesize"}
)
_EXPANDABLE = frozenset(
    {
        "author",
        "baseModels",
        "cardData",
        "childrenModelCount",
        "config",
        "createdAt",
        "disabled",
        "downloads",
        "downloadsAllTime",
        "evalResults",
        "gated",
        "gguf",
        "inference",
        "inferenceProviderMapping",
        "lastModified",
        "library_name",
        "likes",
        "mask_token",
        "model-index",
        "pipeline_tag",
        "private",
        "resourceGroup",
        "safetensors",
        "sha",
        "siblings",
        "spaces",
        "tags",
        "transformersInfo",
        "trendingScore",
        "usedStorage",
        "widgetData",
    }
)
_SAFETENSORS_DTYPE_SIZES = {
    "F64",
    "F32",
    "F16",
    "BF16",
    "I64",
    "I32",
    "I16",
    "I8",
    "U8",
    "BOOL",
    "F8_E4M3",
    "F8_E5M2",
}
_CHUNK = 1024 * 1024
_JSON = "application/json; charset=utf-8"


# ---------------------------------------------------------------------------- request log


@dataclass
class RequestRecord:
    """One request as the server saw it.

    ``path`` is the raw (still percent-encoded) path, ``query`` the raw query string,
    ``headers`` the request headers (lower-case keys), ``range`` the Range header if any,
    ``status`` the status sent (None if the connection died first), ``bytes_out`` the
    response body bytes actually handed to the socket (0 for HEAD), ``fault`` whether an
    injected fault answered or altered it.
    """

    method: str
    path: str
    query: str
    headers: dict[str, str]
    host: str
    range: str | None = None
    status: int | None = None
    bytes_out: int = 0
    fault: bool = False
    started: float = field(default_factory=time.monotonic)

    @property
    def url_path(self) -> str:
        """``path?query`` as a convenience for assertions."""
        return f"{self.path}?{self.query}" if self.query else self.path


# ---------------------------------------------------------------------------- faults


@dataclass
class Fault:
    """One injected misbehaviour; see :meth:`FaultSet.add`."""

    match: str | re.Pattern[str]
    status: int | None = None
    retry_after: int | str | None = None
    ratelimit: tuple[Any, ...] | None = None
    delay: float = 0.0
    truncate_after: int | None = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    times: int | None = 1
    method: str | None = None
    drip: float = 0.0
    endless: bool = False
    reset: bool = False
    hold: threading.Event | None = None
    fired: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        if isinstance(self.match, re.Pattern):
            return self.match.search(path) is not None
        return self.match in path or unquote(self.match) in unquote(path)


class FaultSet:
    """Faults waiting to fire. Each matching request consumes one firing of the first live fault."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(
        self,
        match: str | re.Pattern[str],
        *,
        status: int | None = None,
        retry_after: int | str | None = None,
        ratelimit: tuple[Any, ...] | None = None,
        delay: float = 0.0,
        truncate_after: int | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        times: int | None = 1,
        method: str | None = None,
        drip: float = 0.0,
        endless: bool = False,
        reset: bool = False,
        hold: threading.Event | None = None,
    ) -> Fault:
        """Inject a fault for requests whose raw path contains ``match`` (str) or matches it (regex).

        * ``status``: answer with this status instead of the real answer (default JSON body
          ``{"error": ...}``); ``retry_after`` adds ``Retry-After``; ``ratelimit=("api", 0, 2)``
          adds ``RateLimit: "api";r=0;t=2`` and ``RateLimit-Policy: "fixed window";"api";q=500;w=300``
          (a 4th item overrides the quota ``q``).
        * ``body``: canned body (status defaults to 200), e.g. ``b"{not json"``.
        * ``delay``: seconds to wait before answering (real or canned answer): a slow server.
        * ``truncate_after``: let the real answer through but cut its body after this many bytes
          while still declaring the full ``Content-Length``, then close the connection.
        * ``times``: how many requests it fires for (``None``: until :meth:`clear`).
        * ``method``: only for this HTTP method.
        * ``drip``: send the canned body one byte at a time, this many seconds apart (a
          slow-drip server: every read succeeds, so per-read timeouts never fire).
        * ``endless``: send the canned body again and again until the client hangs up (no
          ``Content-Length`` unless ``headers`` gives one, e.g. a huge one).
        * ``reset``: answer nothing and reset the connection (TCP RST), after ``delay`` if any.
        * ``hold``: wait until this event is set (or the server stops) before answering, after
          ``delay`` if any: requests kept in flight until the test says so, however slow the machine.
        """
        fault = Fault(
            match=match,
            status=status,
            retry_after=retry_after,
            ratelimit=ratelimit,
            delay=delay,
            truncate_after=truncate_after,
            body=body,
            headers=dict(headers or {}),
            times=times,
            method=method,
            drip=drip,
            endless=endless,
            reset=reset,
            hold=hold,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every pending fault."""
        with self._lock:
            self._faults.clear()

    def pending(self) -> list[Fault]:
        """Faults that can still fire."""
        with self._lock:
            return list(self._faults)

    def take(self, method: str, path: str) -> Fault | None:
        """Consume one firing of the first fault matching this request, if any."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.fired += 1
                    if fault.times is not None and fault.fired >= fault.times:
                        self._faults.remove(fault)
                    return fault
        return None


class ListingFaults:
    """Faults of the model listing's pages (``GET /api/models``), by page number (0: the first page).

    ``fail``: the page answers 500; ``repeat``: its ``Link`` points at the same page again (the
    client gets it twice); ``skip``: its ``Link`` passes over the next page, whose models are
    never listed in that walk. Each fault fires ``times`` times (``None``: until :meth:`clear`).
    """

    KINDS = ("fail", "repeat", "skip")

    def __init__(self) -> None:
        self._faults: list[list[Any]] = []  # [kind, page, times left]
        self._lock = threading.Lock()

    def add(self, kind: str, page: int, *, times: int | None = 1) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"listing fault must be one of {self.KINDS}, not {kind!r}")
        with self._lock:
            self._faults.append([kind, page, times])

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, page: int) -> str | None:
        """The fault for this page, if one is left (consumes one firing)."""
        with self._lock:
            for fault in self._faults:
                if fault[1] == page:
                    if fault[2] is not None:
                        fault[2] -= 1
                        if fault[2] <= 0:
                            self._faults.remove(fault)
                    return str(fault[0])
        return None


class _Truncated(Exception):
    """Raised inside the send wrapper to abort a response mid-body (truncate fault)."""


class _LogAndFaults:
    """Outer ASGI layer: logs every request and applies injected faults.

    It sits outside Starlette so that byte counts are what really went to the socket
    and a truncated body can end the connection without Starlette interfering.
    """

    def __init__(self, app: ASGIApp, hub: HubStandin) -> None:
        self.app = app
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        for key_b, value_b in scope["headers"]:
            key, value = key_b.decode("latin-1").lower(), value_b.decode("latin-1")
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        raw_path = scope.get("raw_path") or scope["path"].encode()
        record = RequestRecord(
            method=scope["method"],
            path=raw_path.decode("latin-1"),
            query=scope["query_string"].decode("latin-1"),
            headers=headers,
            host=headers.get("host", ""),
            range=headers.get("range"),
        )
        self.hub._record(record)
        fault = self.hub.faults.take(record.method, record.path)
        if fault is not None:
            record.fault = True
            if fault.delay:
                await self.hub._sleep(fault.delay)
            if fault.hold is not None:
                await self.hub._hold(fault.hold)
            if fault.reset:
                self._reset(receive)
                return
            if fault.status is not None or fault.body is not None:
                await self._canned(fault, record, send, receive)
                return
        truncate = fault.truncate_after if fault is not None else None

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.status = message["status"]
            elif message["type"] == "http.response.body":
                body: bytes = message.get("body", b"")
                if truncate is not None and record.bytes_out + len(body) >= truncate:
                    body = body[: max(truncate - record.bytes_out, 0)]
                    record.bytes_out += len(body)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    raise _Truncated
                if record.method != "HEAD":  # uvicorn drops HEAD bodies; count what really goes out
                    record.bytes_out += len(body)
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except _Truncated:
            # Returning without finishing the body makes uvicorn close the connection:
            # the client sees fewer bytes than Content-Length promised.
            return

    @staticmethod
    def _reset(receive: Receive) -> None:
        """Abort the connection with a TCP RST (SO_LINGER 0), through uvicorn's transport."""
        transport = getattr(getattr(receive, "__self__", None), "transport", None)
        if transport is None:
            raise RuntimeError("the reset fault needs uvicorn's HTTP transport")
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    async def _canned(self, fault: Fault, record: RequestRecord, send: Send, receive: Receive) -> None:
        status = fault.status if fault.status is not None else 200
        body = (
            fault.body
            if fault.body is not None
            else json.dumps({"error": f"Injected fault: HTTP {status}"}).encode()
        )
        out: dict[str, str] = {"content-type": _JSON}
        if not fault.endless:
            out["content-length"] = str(len(body))
        if fault.retry_after is not None:
            out["retry-after"] = str(fault.retry_after)
        if fault.ratelimit is not None:
            bucket, remaining, reset, *quota = fault.ratelimit
            out["ratelimit"] = f'"{bucket}";r={remaining};t={reset}'
            out["ratelimit-policy"] = f'"fixed window";"{bucket}";q={quota[0] if quota else 500};w=300'
        out.update({k.lower(): v for k, v in fault.headers.items()})
        record.status = status
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out.items()],
            }
        )
        payload = b"" if record.method == "HEAD" else body
        if not (fault.drip or fault.endless) or not payload:
            record.bytes_out += len(payload)
            await send({"type": "http.response.body", "body": payload})
            return
        await self._stream_canned(fault, record, send, receive, payload)

    async def _stream_canned(
        self, fault: Fault, record: RequestRecord, send: Send, receive: Receive, payload: bytes
    ) -> None:
        """Drip and/or repeat a canned body until done, the client hangs up or the server stops."""
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        step = 1 if fault.drip else len(payload)
        try:
            while True:
                for i in range(0, len(payload), step):
                    if gone.is_set() or self.hub._closing:
                        return
                    piece = payload[i : i + step]
                    await send({"type": "http.response.body", "body": piece, "more_body": True})
                    record.bytes_out += len(piece)
                    if fault.drip:
                        await self.hub._sleep(fault.drip)
                    else:
                        await asyncio.sleep(0)
                if not fault.endless:
                    break
            await send({"type": "http.response.body", "body": b""})
        finally:
            watcher.cancel()


# ---------------------------------------------------------------------------- responses


class _HubError(Exception):
    """An error answer with the Hub's X-Error-Code / X-Error-Message headers."""

    def __init__(
        self, status: int, message: str, code: str | None = None, headers: Mapping[str, str] | None = None
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})

    def response(self) -> Response:
        if 300 <= self.status < 400:
            location = self.headers["Location"]
            text = f"Temporary Redirect. Redirecting to {location}".encode()
            return Response(
                text, status_code=self.status, headers=self.headers, media_type="text/plain; charset=utf-8"
            )
        headers = {"X-Error-Message": self.message, **self.headers}
        if self.code:
            headers["X-Error-Code"] = self.code
        return _json({"error": self.message}, status=self.status, headers=headers)


def _json(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(
        json.dumps(data).encode(), status_code=status, headers=dict(headers or {}), media_type=_JSON
    )


class _BlobResponse(Response):
    """Serves bytes or a file with HEAD (true Content-Length, no body) and single-range support.

    Files are streamed in 1 MB chunks so a multi-GB LFS object never sits in memory.
    """

    def __init__(
        self,
        method: str,
        range_header: str | None,
        *,
        data: bytes | None = None,
        path: Path | None = None,
        headers: Mapping[str, str],
        media_type: str = "application/octet-stream",
    ) -> None:
        self.method = method
        self.data = data
        self.path = path
        total = len(data) if data is not None else os.path.getsize(path)  # type: ignore[arg-type]
        out = {
            "accept-ranges": "bytes",
            "content-type": media_type,
            **{k.lower(): v for k, v in headers.items()},
        }
        status, self.start, self.end = 200, 0, total - 1
        if range_header:
            parsed = _parse_range(range_header, total)
            if parsed is None:
                status = 416
                out["content-range"] = f"bytes */{total}"
                self.start, self.end = 0, -1
            else:
                status, (self.start, self.end) = 206, parsed
                out["content-range"] = f"bytes {self.start}-{self.end}/{total}"
        out["content-length"] = str(self.end - self.start + 1)
        self.status_code = status
        self.background = None
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in out.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        if self.method == "HEAD" or self.end < self.start:
            await send({"type": "http.response.body", "body": b""})
            return
        # Stop streaming when the client hangs up: uvicorn silently drops sends after a
        # disconnect, and a 1 GB body would otherwise still be read to the end.
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            async for chunk, more in self._chunks():
                if gone.is_set():
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": more})
                await asyncio.sleep(0)  # sends to a dead client return at once: let the watcher run
        finally:
            watcher.cancel()

    async def _chunks(self) -> AsyncIterator[tuple[bytes, bool]]:
        if self.data is not None:
            yield self.data[self.start : self.end + 1], False
            return
        assert self.path is not None
        # Blocking 1 MB reads of a local file are fine here: the server only serves tests.
        with open(self.path, "rb") as fh:
            fh.seek(self.start)
            left = self.end - self.start + 1
            while left > 0:
                chunk = fh.read(min(_CHUNK, left))
                if not chunk:
                    break
                left -= len(chunk)
                yield chunk, left > 0
        if left > 0:
            yield b"", False


def _parse_range(header: str, total: int) -> tuple[int, int] | None:
    """Parse one ``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` range; None if unsatisfiable."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if not m or (not m.group(1) and not m.group(2)):
        return None
    if not m.group(1):
        n = int(m.group(2))
        if n == 0 or total == 0:
            return None
        return max(total - n, 0), total - 1
    start = int(m.group(1))
    end = int(m.group(2)) if m.group(2) else total - 1
    if start >= total or end < start:
        return None
    return start, min(end, total - 1)


# ---------------------------------------------------------------------------- the app


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def _unb64(cursor: str) -> dict[str, Any]:
    try:
        return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except ValueError:
        raise _HubError(400, "Invalid cursor", "BadRequest") from None


class _Handlers:
    """The Hub endpoints. Routing is done here on the raw path (see module docstring)."""

    def __init__(self, hub: HubStandin) -> None:
        self.hub = hub
        self.store = hub.store
        self._index: tuple[int, list[tuple[str, str]], dict[str, str | None]] | None = None

    # -------------------------------------------------------------- dispatch
    async def dispatch(self, request: Request) -> Response:
        try:
            return self._dispatch(request, await request.body())
        except _HubError as err:
            return err.response()

    def _dispatch(self, request: Request, body: bytes) -> Response:
        raw = (request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1")
        raw = raw.split("?", 1)[0]
        segs = raw.strip("/").split("/") if raw.strip("/") else []
        method = request.method
        query = parse_qsl(request.scope["query_string"].decode("latin-1"), keep_blank_values=True)
        if segs[:2] == ["api", "agent-harnesses"] and len(segs) == 2:
            return _json({"standardEnvVars": [], "harnesses": {}})
        if segs[:1] == ["cdn-lfs"] and len(segs) >= 2 and method in ("GET", "HEAD"):
            return self.cdn(request, unquote(segs[1]))
        if segs[:3] == ["api", "_standin", "commit"] and method == "POST" and len(segs) in (4, 5):
            return self.standin_commit(unquote("/".join(segs[3:])), body)
        if segs[:2] == ["api", "models"]:
            if len(segs) == 2:
                return self.list_models(request, query)
            return self.api_repo(request, segs[2:], query, body)
        if segs[:2] in (["api", "datasets"], ["api", "spaces"]):
            raise _HubError(404, "Repository not found", "RepoNotFound")
        if method in ("GET", "HEAD"):
            # /{ns}/{name}/resolve/{rev}/{path} or legacy /{name}/resolve/{rev}/{path}
            for n in (2, 1):
                if len(segs) > n + 2 and segs[n] == "resolve":
                    return self.resolve(request, unquote("/".join(segs[:n])), segs, n, query)
        raise _HubError(404, "Sorry, we can't find the page you are looking for.")

    def standin_commit(self, repo_id: str, body: bytes) -> Response:
        """The stand-in's own commit endpoint (module docstring): the new commit's sha, or a 400 saying why."""
        try:
            spec = json.loads(body)
            files = {str(path): base64.b64decode(data, validate=True) for path, data in spec.get("files", {}).items()}
            delete = [str(path) for path in spec.get("delete", [])]
        except (ValueError, TypeError, AttributeError) as exc:
            raise _HubError(400, f"bad commit body: {exc}", "BadRequest") from None
        if not files and not delete:
            raise _HubError(400, "nothing to commit: give files or paths to delete", "BadRequest")
        if repo_id not in self.store.repo_ids():
            if not spec.get("create"):
                raise _HubError(404, f"no repo {repo_id} here (--create makes it)", "RepoNotFound")
            self.store.create_repo(repo_id)
        try:
            sha = self.store.commit(repo_id, files, delete=delete, message=str(spec.get("message") or "update"),
                                    branch=str(spec.get("branch") or "main"))
        except (FileNotFoundError, ValueError) as exc:
            raise _HubError(400, f"cannot commit: {exc}", "BadRequest") from None
        return _json({"sha": sha, "repo": repo_id})

    def _known(self, repo_id: str) -> bool:
        meta, moved = self.store.lookup(repo_id)
        return meta is not None or moved is not None

    # -------------------------------------------------------------- access
    def _repo(self, request: Request, repo_id: str, segs_after: list[str], prefix: str) -> RepoMeta:
        """Repo lookup + private/disabled checks; renamed ids raise a 307 to the new id."""
        meta, moved = self.store.lookup(repo_id)
        if meta is None and moved is not None:
            qs = request.scope["query_string"].decode("latin-1")
            location = f"{prefix}/{moved}" + ("/" + "/".join(segs_after) if segs_after else "")
            raise _HubError(307, "Repository moved", None, {"Location": location + (f"?{qs}" if qs else "")})
        if meta is None:
            raise _HubError(404 if self._token(request) else 401, "Repository not found", "RepoNotFound")
        if meta.private and not self._allowed(request, meta):
            # The Hub does not reveal private repos: 401 anonymous, 404 with a foreign token.
            raise _HubError(404 if self._token(request) else 401, "Repository not found", "RepoNotFound")
        if meta.disabled:
            raise _HubError(403, "Access to this resource is disabled.")
        return meta

    @staticmethod
    def _token(request: Request) -> str | None:
        auth = request.headers.get("authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _allowed(self, request: Request, meta: RepoMeta) -> bool:
        token = self._token(request)
        return token is not None and token in meta.tokens

    def _check_gate(self, request: Request, meta: RepoMeta) -> None:
        if meta.gated and not self._allowed(request, meta):
            if self._token(request):
                msg = f"Access to model {meta.repo_id} is restricted and you are not in the authorized list."
                raise _HubError(403, msg, "GatedRepo")
            msg = (
                f"Access to model {meta.repo_id} is restricted. You must have access to it "
                "and be authenticated to access it. Please log in."
            )
            raise _HubError(401, msg, "GatedRepo")

    def _rev(self, meta: RepoMeta, revision: str) -> str:
        try:
            return self.store.resolve(meta.repo_id, revision)
        except RevisionNotFound:
            raise _HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound") from None

    def _base(self, request: Request) -> str:
        """Absolute origin the client used (Link headers must be absolute)."""
        return f"{request.url.scheme}://{request.headers.get('host', f'127.0.0.1:{self.hub.port}')}"

    def _cdn_base(self, request: Request) -> str:
        """The "CDN" is this same server under the other loopback name, i.e. another origin."""
        host = request.headers.get("host", f"127.0.0.1:{self.hub.port}")
        name, _, port = host.rpartition(":")
        other = "localhost" if name != "localhost" else "127.0.0.1"
        return f"{request.url.scheme}://{other}:{port or self.hub.port}"

    # -------------------------------------------------------------- /api/models/{repo}/...
    def api_repo(
        self, request: Request, segs: list[str], query: list[tuple[str, str]], body: bytes
    ) -> Response:
        if (
            len(segs) >= 2
            and (len(segs) == 2 or segs[2] in _API_ACTIONS)
            and (self._known(unquote(f"{segs[0]}/{segs[1]}")) or segs[1] not in _API_ACTIONS)
        ):
            repo_id, rest = unquote(f"{segs[0]}/{segs[1]}"), segs[2:]
        else:
            repo_id, rest = unquote(segs[0]), segs[1:]
        meta = self._repo(request, repo_id, rest, "/api/models")
        action = rest[0] if rest else None
        method = request.method
        if action is None and method in ("GET", "HEAD"):
            return self.model_info(request, meta, None, query)
        if action == "revision" and len(rest) >= 2 and method in ("GET", "HEAD"):
            return self.model_info(request, meta, unquote("/".join(rest[1:])), query)
        if action == "refs" and len(rest) == 1:
            return self.refs(meta, query)
        if action == "commits" and len(rest) >= 2:
            return self.commits(request, meta, unquote("/".join(rest[1:])), query)
        if action == "tree" and len(rest) >= 2:
            path = unquote("/".join(rest[2:])).strip("/")
            return self.tree(request, meta, unquote(rest[1]), path, query)
        if action == "paths-info" and len(rest) >= 2 and method == "POST":
            return self.paths_info(request, meta, unquote("/".join(rest[1:])), body)
        if action == "super-squash" and len(rest) >= 2 and method == "POST":
            return self.super_squash(meta, unquote("/".join(rest[1:])), body)
        if action == "safetensors-metadata" and len(rest) >= 2:
            return self.safetensors_metadata(request, meta, unquote("/".join(rest[1:])))
        raise _HubError(404, "Sorry, we can't find the page you are looking for.")

    # -------------------------------------------------------------- model info
    def _siblings(self, meta: RepoMeta, sha: str | None, blobs: bool) -> list[dict[str, Any]]:
        if sha is None:
            return []
        out: list[dict[str, Any]] = []
        for entry in self.store.tree(meta.repo_id, sha).values():
            if entry.type != "file":
                continue
            item: dict[str, Any] = {"rfilename": entry.path}
            if blobs:
                item["blobId"] = entry.oid
                item["size"] = entry.size
                if entry.lfs:
                    item["lfs"] = {
                        "sha256": entry.lfs.sha256,
                        "size": entry.lfs.size,
                        "pointerSize": entry.lfs.pointer_size,
                    }
            out.append(item)
        out.extend({"rfilename": f"extra/{n:07d}.bin"} for n in range(self.hub.extra_siblings.get(meta.repo_id, 0)))
        return out

    def _safetensors_summary(self, meta: RepoMeta, sha: str | None) -> dict[str, Any] | None:
        """Server-side parameter count, like the Hub's ``safetensors`` key (None if no safetensors)."""
        if sha is None:
            return None
        params: dict[str, int] = {}
        found = False
        for entry in self.store.tree(meta.repo_id, sha).values():
            if entry.type == "file" and entry.lfs and entry.path.endswith(".safetensors"):
                header = self.store.safetensors_header(entry.lfs.sha256)
                if header is None:
                    continue
                found = True
                for name, info in header.items():
                    if name == "__metadata__" or not isinstance(info, dict):
                        continue
                    numel = 1
                    for dim in info.get("shape", []):
                        numel *= int(dim)
                    params[info.get("dtype", "?")] = params.get(info.get("dtype", "?"), 0) + numel
        if not found:
            return None
        return {"parameters": params, "total": sum(params.values())}

    def _model_payload(
        self, meta: RepoMeta, sha: str | None, *, blobs: bool, full: bool = True
    ) -> dict[str, Any]:
        head = self.store.log(meta.repo_id, sha)[0] if sha else None
        used = 0
        if sha:
            used = sum(e.size for e in self.store.tree(meta.repo_id, sha).values() if e.type == "file")
        payload: dict[str, Any] = {
            "_id": meta.internal_id,
            "id": meta.repo_id,
            "modelId": meta.repo_id,
            "author": meta.repo_id.split("/")[0] if "/" in meta.repo_id else None,
            "sha": sha,
            "lastModified": format_date(head.date) if head else meta.created_at,
            "createdAt": meta.created_at,
            "private": meta.private,
            "gated": meta.gated,
            "disabled": meta.disabled,
            "downloads": 0,
            "likes": 0,
            "trendingScore": 0,
            "tags": [],
            "library_name": None,
            "pipeline_tag": None,
            "spaces": [],
            "usedStorage": used,
        }
        if full:
            payload["siblings"] = self._siblings(meta, sha, blobs)
            st = self._safetensors_summary(meta, sha)
            if st is not None:
                payload["safetensors"] = st
        return {k: v for k, v in payload.items() if v is not None or k == "sha"}

    def model_info(
        self, request: Request, meta: RepoMeta, revision: str | None, query: list[tuple[str, str]]
    ) -> Response:
        if revision is None:
            try:
                sha: str | None = self.store.resolve(meta.repo_id, "main")
            except RevisionNotFound:
                sha = None  # empty repo: the Hub would show no sha and no files
        else:
            sha = self._rev(meta, revision)
        params = dict(query)
        expand = [v for k, v in query if k in ("expand", "expand[]")]
        blobs = params.get("blobs", "").lower() in ("1", "true")
        # With ``expand`` the Hub builds only what was asked for: no tree walk unless siblings (or the
        # safetensors summary) are among it, so a repo of a million files answers its identity cheaply.
        full = not expand or bool({"siblings", "safetensors"} & set(expand))
        payload = self._model_payload(meta, sha, blobs=blobs, full=full)
        if sha is None:
            payload.pop("sha")
        if params.get("securityStatus", "").lower() in ("1", "true"):
            payload["securityRepoStatus"] = {"scansDone": True, "filesWithIssues": []}
        if expand:
            unknown = sorted(set(expand) - _EXPANDABLE)
            if unknown:
                raise _HubError(
                    400, f'"expand" must be one of {sorted(_EXPANDABLE)}, got {unknown}', "BadRequest"
                )
            payload = {k: v for k, v in payload.items() if k in ("_id", "id") or k in expand}
        return _json(payload)

    # -------------------------------------------------------------- list models
    def _listing_index(self) -> tuple[list[tuple[str, str]], dict[str, str | None]]:
        """Live repos by (lastModified, id), ascending, and their head shas: rebuilt once per store version.

        The Hub-wide change listing (``sort=lastModified``) is read from this index with a
        bisect, so a page of a 300,000-model stand-in costs the page, not the whole catalogue.
        """
        version = self.store.version
        cached = self._index
        if cached is not None and cached[0] == version:
            return cached[1], cached[2]
        heads = self.store.main_heads()
        keys: list[tuple[str, str]] = []
        shas: dict[str, str | None] = {}
        for repo_id, (sha, date) in heads.items():
            meta = self.store._meta.get(repo_id)
            if meta is None:
                continue
            keys.append((format_date(date) if date else meta.created_at, repo_id))
            shas[repo_id] = sha
        keys.sort()
        self._index = (version, keys, shas)
        return keys, shas

    def _listed(self, request: Request, meta: RepoMeta, sha: str | None, last_modified: str,
                query: list[tuple[str, str]], expand: list[str], full: bool) -> dict[str, Any] | None:
        """One model as a list item, or None when the query's filters leave it out."""
        params = dict(query)
        author = params.get("author")
        if author and not meta.repo_id.startswith(f"{author}/"):
            return None
        search = params.get("search", "").lower()
        if search and search not in meta.repo_id.lower():
            return None
        tags = {*meta.tags, *(t for t in (meta.library_name, meta.pipeline_tag) if t)}
        if any(v not in tags for k, v in query if k == "filter"):
            return None
        if params.get("pipeline_tag") and params["pipeline_tag"] != meta.pipeline_tag:
            return None
        if params.get("library") and params["library"] not in tags:
            return None
        if meta.private and not self._allowed(request, meta):
            return None
        if full or "siblings" in expand:
            payload = self._model_payload(meta, sha, blobs=False, full=True)
        else:  # what a list item needs, without reading the tree
            payload = {
                "_id": meta.internal_id, "id": meta.repo_id, "modelId": meta.repo_id,
                "author": meta.repo_id.split("/")[0] if "/" in meta.repo_id else None,
                "sha": sha, "lastModified": last_modified, "createdAt": meta.created_at,
                "private": meta.private, "gated": meta.gated, "disabled": meta.disabled,
                "downloads": meta.downloads, "likes": meta.likes, "trendingScore": 0, "tags": sorted(tags),
                "library_name": meta.library_name, "pipeline_tag": meta.pipeline_tag,
            }
            payload = {k: v for k, v in payload.items() if v is not None or k == "sha"}
        payload["downloads"], payload["likes"] = meta.downloads, meta.likes
        payload["tags"] = sorted(tags)
        if meta.library_name:
            payload["library_name"] = meta.library_name
        if meta.pipeline_tag:
            payload["pipeline_tag"] = meta.pipeline_tag
        if expand:
            return {k: v for k, v in payload.items() if k in ("_id", "id") or k in expand}
        keys = {"_id", "id", "modelId", "likes", "trendingScore", "private", "downloads", "tags", "createdAt",
                "library_name", "pipeline_tag"}
        if full:
            keys |= {"sha", "lastModified", "siblings", "gated", "disabled", "author"}
        return {k: v for k, v in payload.items() if k in keys}

    def list_models(self, request: Request, query: list[tuple[str, str]]) -> Response:
        """``GET /api/models``: filters, ``sort`` (``direction``: -1, the default, is newest/highest first),
        keyset ``cursor`` pages behind an absolute ``Link``, and the listing faults of :attr:`HubStandin.listing_faults`."""
        params = dict(query)
        expand = [v for k, v in query if k in ("expand", "expand[]")]
        unknown = sorted(set(expand) - _EXPANDABLE)
        if unknown:
            raise _HubError(
                400, f'"expand" must be one of {sorted(_EXPANDABLE)}, got {unknown}', "BadRequest"
            )
        full = params.get("full", "").lower() in ("1", "true")
        sort = params.get("sort")
        if sort not in (None, "", "lastModified", "createdAt", "downloads", "likes", "trendingScore", "id"):
            raise _HubError(400, f"Invalid sort parameter {sort!r}", "BadRequest")
        descending = params.get("direction", "-1") != "1"
        cursor = _unb64(params["cursor"]) if "cursor" in params else {}
        after = tuple(cursor["k"]) if isinstance(cursor.get("k"), list) else None
        page_no = int(cursor.get("p", 0))
        limit = int(params["limit"]) if params.get("limit", "").isdigit() else None
        served = int(cursor.get("n", 0))
        size = self.hub.models_page_size
        if limit is not None:
            size = min(size, max(0, limit - served))
        fault = self.hub.listing_faults.take(page_no)
        if fault == "fail":
            raise _HubError(500, "Internal Error (listing fault)")
        keys, shas = self._listing_index()
        if sort == "lastModified":
            ordered: Iterable[tuple[Any, str]] = self._walk(keys, after, descending)
        else:
            def value(repo_id: str) -> Any:
                meta = self.store._meta[repo_id]
                return {"createdAt": meta.created_at, "downloads": meta.downloads, "likes": meta.likes,
                        "trendingScore": 0}.get(sort or "", repo_id)
            down = descending and bool(sort)  # unsorted: by id, as the store holds them
            rows = sorted(((value(r), r) for _lm, r in keys), reverse=down)
            ordered = (row for row in rows if after is None
                       or (tuple(row) < after if down else tuple(row) > after))
        last_modified = {r: lm for lm, r in keys} if sort != "lastModified" else None
        page: list[dict[str, Any]] = []
        extra: list[tuple[Any, str]] = []  # a "skip" fault: the page after this one is passed over
        want_extra = size if fault == "skip" else 0
        last_key: tuple[Any, str] | None = None
        more = False
        for key in ordered:
            repo_id = key[1]
            meta = self.store._meta.get(repo_id)
            if meta is None:
                continue
            lm = key[0] if last_modified is None else last_modified[repo_id]
            item = self._listed(request, meta, shas.get(repo_id), lm, query, expand, full)
            if item is None:
                continue
            if len(page) < size:
                page.append(item)
                last_key = key
            elif len(extra) < want_extra:
                extra.append(key)
                last_key = key
            else:
                more = True
                break
        headers = {}
        if more and last_key is not None and (limit is None or served + len(page) < limit):
            next_key = after if fault == "repeat" else last_key
            nxt_cursor: dict[str, Any] = {"p": page_no + 1, "n": served + len(page)}
            if next_key is not None:
                nxt_cursor["k"] = list(next_key)
            nxt = [(k, v) for k, v in query if k != "cursor"] + [("cursor", _b64(nxt_cursor))]
            headers["Link"] = f'<{self._base(request)}/api/models?{urlencode(nxt)}>; rel="next"'
        return _json(page, headers=headers)

    @staticmethod
    def _walk(keys: list[tuple[str, str]], after: tuple[Any, ...] | None,
              descending: bool) -> Iterator[tuple[str, str]]:
        """``keys`` (ascending) from just past ``after``, in the asked direction."""
        if descending:
            i = (bisect.bisect_left(keys, after) if after is not None else len(keys)) - 1
            while i >= 0:
                yield keys[i]
                i -= 1
        else:
            i = bisect.bisect_right(keys, after) if after is not None else 0
            while i < len(keys):
                yield keys[i]
                i += 1

    # -------------------------------------------------------------- refs / commits
    def refs(self, meta: RepoMeta, query: list[tuple[str, str]]) -> Response:
        refs = self.store.refs(meta.repo_id)
        out: dict[str, Any] = {"branches": [], "converts": [], "tags": []}
        prs: list[dict[str, str]] = []
        for ref, sha in sorted(refs.items()):
            if ref.startswith("refs/heads/"):
                out["branches"].append({"name": ref[len("refs/heads/") :], "ref": ref, "targetCommit": sha})
            elif ref.startswith("refs/tags/"):
                out["tags"].append({"name": ref[len("refs/tags/") :], "ref": ref, "targetCommit": sha})
            elif ref.startswith("refs/convert/"):
                out["converts"].append({"name": ref[len("refs/convert/") :], "ref": ref, "targetCommit": sha})
            elif ref.startswith("refs/pr/"):
                prs.append({"name": ref, "ref": ref, "targetCommit": sha})
        if dict(query).get("include_prs", "") in ("1", "true"):
            out["pullRequests"] = prs
        return _json(out)

    @staticmethod
    def _commit_json(rec: CommitRecord, formatted: bool) -> dict[str, Any]:
        item: dict[str, Any] = {
            "id": rec.id,
            "title": rec.title,
            "message": rec.message,
            "date": format_date(rec.date),
            "authors": [{"user": rec.author, "avatar": f"/avatars/{rec.author}.svg"}],
        }
        if formatted:
            item["formatted"] = {"title": html.escape(rec.title), "message": html.escape(rec.message)}
        return item

    def commits(
        self, request: Request, meta: RepoMeta, revision: str, query: list[tuple[str, str]]
    ) -> Response:
        """Newest first, ``p``-numbered pages (0-based) of ``limit`` (default page size) commits."""
        sha = self._rev(meta, revision)
        params = dict(query)
        formatted = any(k in ("expand", "expand[]") and v == "formatted" for k, v in query)
        history = self.store.log(meta.repo_id, sha)
        size = (
            int(params["limit"])
            if params.get("limit", "").isdigit() and int(params["limit"]) > 0
            else self.hub.commits_page_size
        )
        page_no = int(params["p"]) if params.get("p", "").isdigit() else 0
        page = history[page_no * size : (page_no + 1) * size]
        headers = {"X-Total-Count": str(len(history))}
        if (page_no + 1) * size < len(history):
            nxt = [(k, v) for k, v in query if k != "p"] + [("p", str(page_no + 1))]
            path = request.scope.get("raw_path", b"").decode("latin-1").split("?")[0]
            headers["Link"] = f'<{self._base(request)}{path}?{urlencode(nxt)}>; rel="next"'
        return _json([self._commit_json(r, formatted) for r in page], headers=headers)

    # -------------------------------------------------------------- tree / paths-info
    def _entry_json(self, meta: RepoMeta, sha: str, entry: Entry, expand: bool) -> dict[str, Any]:
        item: dict[str, Any] = {"type": entry.type, "oid": entry.oid, "size": entry.size, "path": entry.path}
        if entry.lfs:
            item["lfs"] = {
                "oid": entry.lfs.sha256,
                "size": entry.lfs.size,
                "pointerSize": entry.lfs.pointer_size,
            }
        if expand:
            last = self.store.last_commit(meta.repo_id, sha, entry.path)
            item["lastCommit"] = {"id": last.id, "title": last.title, "date": format_date(last.date)}
            if entry.type == "file":
                item["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": {"virusFound": False, "virusNames": None},
                    "pickleImportScan": None,
                }
        return item

    def tree(
        self, request: Request, meta: RepoMeta, revision: str, path: str, query: list[tuple[str, str]]
    ) -> Response:
        sha = self._rev(meta, revision)
        params = dict(query)
        recursive = params.get("recursive", "").lower() in ("1", "true")
        expand = params.get("expand", "").lower() in ("1", "true")
        entries = self.store.tree(meta.repo_id, sha)
        if path and (path not in entries or entries[path].type != "directory"):
            raise _HubError(404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": sha})
        prefix = f"{path}/" if path else ""
        selected = [
            e
            for p, e in entries.items()
            if p.startswith(prefix) and (recursive or "/" not in p[len(prefix) :])
        ]
        size = self.hub.tree_expand_page_size if expand else self.hub.tree_page_size
        offset = int(_unb64(params["cursor"]).get("o", 0)) if "cursor" in params else 0
        page = selected[offset : offset + size]
        headers = {}
        if offset + size < len(selected):
            nxt = [(k, v) for k, v in query if k != "cursor"] + [
                ("cursor", _b64({"o": offset + size, "c": sha}))
            ]
            raw = request.scope.get("raw_path", b"").decode("latin-1").split("?")[0]
            headers["Link"] = f'<{self._base(request)}{raw}?{urlencode(nxt)}>; rel="next"'
        return _json([self._entry_json(meta, sha, e, expand) for e in page], headers=headers)

    def paths_info(self, request: Request, meta: RepoMeta, revision: str, body: bytes) -> Response:
        """Form-encoded (``paths=a&paths=b&expand=true``) or JSON body; missing paths are dropped."""
        sha = self._rev(meta, revision)
        ctype = request.headers.get("content-type", "")
        if "json" in ctype:
            data = json.loads(body or b"{}")
            paths, expand = list(data.get("paths", [])), bool(data.get("expand", False))
        else:
            form = parse_qsl(body.decode(), keep_blank_values=True)
            paths = [v for k, v in form if k in ("paths", "paths[]")]
            expand = any(k == "expand" and v.lower() in ("1", "true") for k, v in form)
        entries = self.store.tree(meta.repo_id, sha)
        out = []
        for path in paths:
            entry = entries.get(path.strip("/"))
            if entry is not None:
                out.append(self._entry_json(meta, sha, entry, expand))
        return _json(out)

    def super_squash(self, meta: RepoMeta, branch: str, body: bytes) -> Response:
        data = json.loads(body or b"{}") if body else {}
        self._rev(meta, branch)
        message = data.get("message") or f"Super-squash branch '{branch}' using huggingface_hub"
        sha = self.store.squash(meta.repo_id, branch, message=message)
        return _json({"commitId": sha})

    def safetensors_metadata(self, request: Request, meta: RepoMeta, filename: str) -> Response:
        """``{index: {metadata, weight_map}, headers: {shard: header}}`` for the index on main."""
        self._check_gate(request, meta)
        sha = self._rev(meta, "main")
        entries = self.store.tree(meta.repo_id, sha)
        entry = entries.get(filename)
        if entry is None or entry.type != "file":
            raise _HubError(404, f"Entry not found: {filename}", "EntryNotFound", {"X-Repo-Commit": sha})
        index = json.loads(self._content(meta, entry))
        headers: dict[str, Any] = {}
        for shard in sorted(set(index.get("weight_map", {}).values())):
            shard_entry = entries.get(shard)
            if shard_entry is not None and shard_entry.lfs:
                header = self.store.safetensors_header(shard_entry.lfs.sha256)
                if header is not None:
                    headers[shard] = header
        # Like the Hub, leave out the weight_map: the shard headers already name every tensor.
        return _json({"index": {k: v for k, v in index.items() if k != "weight_map"}, "headers": headers})

    def _content(self, meta: RepoMeta, entry: Entry) -> bytes:
        if entry.lfs:
            return self.store.lfs_path(entry.lfs.sha256).read_bytes()
        return self.store.blob(meta.repo_id, entry.oid)

    # -------------------------------------------------------------- resolve / cdn
    def resolve(
        self, request: Request, repo_id: str, segs: list[str], n: int, query: list[tuple[str, str]]
    ) -> Response:
        meta = self._repo(request, repo_id, segs[n:], "")
        self._check_gate(request, meta)
        revision = unquote(segs[n + 1])
        path = unquote("/".join(segs[n + 2 :]))
        sha = self._rev(meta, revision)
        entry = self.store.tree(meta.repo_id, sha).get(path)
        if entry is None or entry.type != "file":
            raise _HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": sha})
        common = {"X-Repo-Commit": sha, "Vary": "Origin, Accept", "Access-Control-Allow-Origin": "*"}
        if entry.lfs is not None:
            name = quote(path.rsplit("/", 1)[-1])
            location = (
                f"{self._cdn_base(request)}/cdn-lfs/{entry.lfs.sha256}"
                f"?response-content-disposition=attachment%3B%20filename%3D%22{name}%22"
            )
            text = f"Found. Redirecting to {location}".encode()
            headers = {
                **common,
                "Location": location,
                "ETag": f'"{entry.oid}"',
                "X-Linked-Etag": f'"{entry.lfs.sha256}"',
                "X-Linked-Size": str(entry.lfs.size),
                "Content-Type": "text/plain; charset=utf-8",
                "Content-Length": str(len(text)),
            }
            return Response(b"" if request.method == "HEAD" else text, status_code=302, headers=headers)
        data = self.store.blob(meta.repo_id, entry.oid)
        media = mimetypes.guess_type(path)[0] or "application/octet-stream"
        if media.startswith("text/") or media == "application/json":
            media += "; charset=utf-8"
        return _BlobResponse(
            request.method,
            request.headers.get("range"),
            data=data,
            media_type=media,
            headers={
                **common,
                "ETag": f'"{entry.oid}"',
                "Content-Disposition": f'inline; filename="{path.rsplit("/", 1)[-1]}"',
            },
        )

    def cdn(self, request: Request, sha256: str) -> Response:
        """The "CDN": content-addressed LFS objects, no auth, Range aware."""
        if not re.fullmatch(r"[0-9a-f]{64}", sha256) or not self.store.lfs_path(sha256).exists():
            return Response(
                b"<Error><Code>NoSuchKey</Code></Error>", status_code=404, media_type="application/xml"
            )
        return _BlobResponse(
            request.method,
            request.headers.get("range"),
            path=self.store.lfs_path(sha256),
            headers={"ETag": f'"{sha256}"'},
        )


def build_app(hub: HubStandin) -> ASGIApp:
    """The ASGI app: a Starlette catch-all route (raw-path routing) wrapped in the log/fault layer."""
    handlers = _Handlers(hub)
    app = Starlette(
        routes=[Route("/{path:path}", handlers.dispatch, methods=["GET", "HEAD", "POST", "PUT", "DELETE"])]
    )
    return _LogAndFaults(app, hub)


class _QuietTruncation(logging.Filter):
    """Drop uvicorn's error line for responses we cut short on purpose (truncate and reset faults)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return ("ASGI callable returned without completing response" not in message
                and "ASGI callable returned without starting response" not in message)  # reset faults


# ---------------------------------------------------------------------------- the server object


class HubStandin:
    """A running (or startable) local Hub: storage, builder API, request log and faults.

    Usage::

        with HubStandin(tmp_path / "hub") as hub:
            hub.create_repo("acme/tiny")
            sha = hub.commit("acme/tiny", {"config.json": b"{}", "model.safetensors": Path("w.st")})
            HfApi(endpoint=hub.url).model_info("acme/tiny").sha == sha

    Args:
        root: storage directory (a temp dir if None); existing repos under it are served.
        host: interface to bind (the API origin); the CDN uses the other loopback name.
        port: 0 picks a free port.
        commits_page_size: commits per /commits page (the Hub uses 50).
        tree_page_size, tree_expand_page_size: entries per /tree page (Hub: 1000 / 50 with expand).
        models_page_size: items per /api/models page.
        lfs_threshold: size above which any committed file goes to LFS.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        commits_page_size: int = 50,
        tree_page_size: int = 1000,
        tree_expand_page_size: int = 50,
        models_page_size: int = 1000,
        lfs_threshold: int | None = None,
        log_level: str = "warning",
    ) -> None:
        if root is None:
            import tempfile

            root = tempfile.mkdtemp(prefix="hub-standin-")
        kwargs = {"lfs_threshold": lfs_threshold} if lfs_threshold is not None else {}
        self.store = RepoStore(root, **kwargs)
        self.host = host
        self.port = port
        self.commits_page_size = commits_page_size
        self.tree_page_size = tree_page_size
        self.tree_expand_page_size = tree_expand_page_size
        self.models_page_size = models_page_size
        self.faults = FaultSet()
        self.listing_faults = ListingFaults()
        # Repo id -> extra files its model info lists in ``siblings`` (not in its tree): a repo with a
        # million files, at no disk cost. Only a request that asks for siblings pays for them.
        self.extra_siblings: dict[str, int] = {}
        self.log_level = log_level
        self.app = build_app(self)
        self._log: list[RequestRecord] = []
        self._log_lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._closing = False

    # -------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """The API endpoint to give ``HfApi(endpoint=...)`` / ``HF_ENDPOINT`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    @property
    def cdn_url(self) -> str:
        """Origin of the fake CDN that LFS downloads are redirected to."""
        other = "localhost" if self.host != "localhost" else "127.0.0.1"
        return f"http://{other}:{self.port}"

    def start(self) -> Self:
        """Serve in a background thread; returns once the socket accepts connections."""
        if self._thread is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level=self.log_level,
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )
        logging.getLogger("uvicorn.error").addFilter(_QuietTruncation())
        self._server = uvicorn.Server(config)
        self._closing = False
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="hub-standin", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("hub stand-in failed to start")
            time.sleep(0.005)
        return self

    def stop(self, wait: bool = True) -> None:
        """Stop serving; pending slow answers are cut short.

        uvicorn needs ~0.15 s to notice and drain; ``wait=False`` returns at once and lets the
        daemon thread finish on its own (what the pytest fixture does, to keep suites fast).
        """
        if self._server is None or self._thread is None:
            return
        self._closing = True
        self._server.should_exit = True
        if wait:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def _sleep(self, seconds: float) -> None:
        """A slow answer that still ends promptly when the server stops."""
        end = time.monotonic() + seconds
        while not self._closing and time.monotonic() < end:
            await asyncio.sleep(min(0.05, end - time.monotonic()))

    async def _hold(self, event: threading.Event) -> None:
        """An answer held until ``event`` is set; ends promptly when the server stops."""
        while not self._closing and not event.is_set():
            await asyncio.sleep(0.05)

    # -------------------------------------------------------------- request log
    def _record(self, record: RequestRecord) -> None:
        with self._log_lock:
            self._log.append(record)

    @property
    def requests(self) -> list[RequestRecord]:
        """Snapshot of the request log, oldest first (since the last :meth:`clear_log`)."""
        with self._log_lock:
            return list(self._log)

    def clear_log(self) -> None:
        """Forget logged requests (and reset :meth:`bytes_served`)."""
        with self._log_lock:
            self._log.clear()

    def bytes_served(self) -> int:
        """Response body bytes sent since the last :meth:`clear_log`, both origins together."""
        with self._log_lock:
            return sum(r.bytes_out for r in self._log)

    # -------------------------------------------------------------- builder API
    def create_repo(
        self, repo_id: str, *, gated: bool | str = False, private: bool = False, exist_ok: bool = False
    ) -> None:
        """Create an empty model repo (no commit yet). ``gated=True`` means ``"auto"``; ``"manual"`` works too."""
        self.store.create_repo(repo_id, gated=gated, private=private, exist_ok=exist_ok)

    def commit(
        self,
        repo_id: str,
        files: Mapping[str, bytes | str | os.PathLike[str]],
        *,
        delete: Iterable[str] = (),
        message: str = "update",
        branch: str = "main",
        date: dt.datetime | None = None,
        lfs: set[str] | None = None,
        author: str = "standin",
    ) -> str:
        """Commit files on ``branch`` and return the 40-hex sha.

        ``files`` values are ``bytes``, ``str`` (UTF-8 text) or a path (``os.PathLike``) whose
        content is hashed in chunks and linked into the LFS store (use this for huge/sparse
        files). ``delete`` removes paths or whole directories. ``date`` defaults to a fake clock
        that advances one minute per commit (2026-01-01T00:00Z first). ``lfs=None`` applies the
        default rule (weight suffixes or > ``lfs_threshold``); a set makes exactly those paths LFS.
        ``branch`` may be a full ref such as ``refs/pr/1`` (a PR branches off main).
        """
        return self.store.commit(
            repo_id, files, delete=delete, message=message, branch=branch, date=date, lfs=lfs, author=author
        )

    def head(self, repo_id: str, branch: str = "main") -> str:
        """Current sha of ``branch`` (or any revision name)."""
        return self.store.resolve(repo_id, branch)

    def commits(self, repo_id: str, branch: str = "main") -> list[str]:
        """Shas of ``branch``'s first-parent history, oldest first."""
        return [rec.id for rec in reversed(self.store.log(repo_id, branch))]

    def squash(
        self,
        repo_id: str,
        branch: str = "main",
        message: str = "Super-squash",
        date: dt.datetime | None = None,
    ) -> str:
        """Super-squash ``branch`` into one new root commit (same tree); old shas become unreachable."""
        return self.store.squash(repo_id, branch, message=message, date=date)

    def rename(self, old_id: str, new_id: str) -> None:
        """Rename/transfer a repo; requests for ``old_id`` get a 307 with a relative Location."""
        self.store.rename(old_id, new_id)

    def delete_repo(self, repo_id: str) -> None:
        """Delete a repo; a later ``create_repo`` with the same id gets a new ``_id``."""
        self.store.delete_repo(repo_id)

    def set_gated(self, repo_id: str, gated: bool | str) -> None:
        """Gate file downloads (``True`` == ``"auto"``, or ``"manual"``); ``False`` ungates."""
        self.store.update_meta(repo_id, gated="auto" if gated is True else gated)

    def set_private(self, repo_id: str, private: bool) -> None:
        """Private repos answer RepoNotFound unless the bearer token is allowed."""
        self.store.update_meta(repo_id, private=private)

    def disable(self, repo_id: str, disabled: bool = True) -> None:
        """Disabled repos answer 403 "Access to this resource is disabled." everywhere."""
        self.store.update_meta(repo_id, disabled=disabled)

    def allow_token(self, repo_id: str, token: str) -> None:
        """Let requests with ``Authorization: Bearer <token>`` through the gate / privacy check."""
        meta = self.store.meta(repo_id)
        if token not in meta.tokens:
            self.store.update_meta(repo_id, tokens=[*meta.tokens, token])

    def tag(self, repo_id: str, name: str, sha: str) -> None:
        """Create or move tag ``name`` (``refs/tags/<name>``) to ``sha``."""
        self.store.set_ref(repo_id, f"refs/tags/{name}", sha)

    def branch(self, repo_id: str, name: str, sha: str | None) -> None:
        """Create/move branch ``name`` to ``sha``; ``None`` deletes it."""
        self.store.set_ref(repo_id, f"refs/heads/{name}" if not name.startswith("refs/") else name, sha)

    def set_listing(self, repo_id: str, *, downloads: int | None = None, likes: int | None = None,
                    library_name: str | None = None, pipeline_tag: str | None = None,
                    tags: Iterable[str] | None = None) -> None:
        """What the model listing says of a repo and filters on (``filter=``, ``pipeline_tag=``, ``sort=downloads``)."""
        changes: dict[str, object] = {}
        if downloads is not None:
            changes["downloads"] = downloads
        if likes is not None:
            changes["likes"] = likes
        if library_name is not None:
            changes["library_name"] = library_name or None
        if pipeline_tag is not None:
            changes["pipeline_tag"] = pipeline_tag or None
        if tags is not None:
            changes["tags"] = list(tags)
        self.store.update_meta(repo_id, **changes)

    def tree(self, repo_id: str, revision: str = "main") -> dict[str, Entry]:
        """What the server reports for ``revision``: path -> :class:`~hubstandin.gitrepos.Entry`."""
        return self.store.tree(repo_id, self.store.resolve(repo_id, revision))

    def iter_repo_ids(self) -> Iterator[str]:
        """Ids of live repos."""
        yield from self.store.repo_ids()
