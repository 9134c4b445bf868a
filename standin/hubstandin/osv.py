"""Local stand-in for the OSV.dev API, serving real OSV records from disk.

Tests of the dependency check run the real client (:mod:`tracker.adapters.osvdev`)
against it instead of ``https://api.osv.dev``, which no test machine reaches.
It serves the records in ``shared/osv/pypi/`` (YAML and JSON) with OSV.dev's
request and response shapes (``shared/osv/NOTES.md`` §2):

* ``POST /v1/query``: ``{"package": {"name", "ecosystem"} | {"purl"}, "version", "page_token"}``
  or ``{"commit": SHA}``; ``{"vulns": [full records], "next_page_token"?}``, or ``{}``;
* ``POST /v1/querybatch``: ``{"queries": [...]}`` (at most 1000); each result
  holds ``id`` and ``modified`` only, ``{}`` when empty, its own ``next_page_token``;
* ``GET /v1/vulns/{id}``: the full record, 404 ``{"code": 5, ...}`` when unknown;
* errors as gRPC status JSON (``{"code": 3, "message": ...}`` for HTTP 400).

Matching follows OSV.dev (§2.5): the ``versions`` list first, then each
``ECOSYSTEM``/``SEMVER`` range walked from its highest event down, the first
event at or below the version deciding; PyPI versions compare with
``packaging``; **events that do not parse (``2.6.0-cu124``) are skipped**, as the
Go matcher skips them, which may leave ``introduced: "0"`` unbounded - the
``versions`` list still applies. Names are PEP 503-normalised for PyPI.
Commit queries are the one simplification: there is no repo to clone, so a
commit matches a record only when it is an ``introduced``/``last_affected``
event of a GIT range or listed in ``versions``.

Knobs for tests: ``page_size`` and ``batch_page_size`` (small values force
pagination), :meth:`OsvStandin.fail_next` (answer the next N requests with 500,
429, ...), and :attr:`OsvStandin.requests`, the log of requests served.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import os
import re
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from packaging.version import InvalidVersion, Version
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["OsvDatabase", "OsvStandin", "build_osv_app", "default_records_dir", "load_records"]

MAX_BATCH = 1000
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader when libyaml is there
_GRPC_CODE = {400: 3, 404: 5, 429: 8, 500: 13, 503: 14}


def default_records_dir() -> Path:
    """``$TRACKER_OSV_RECORDS``, else the real records the tests ship (``tests/fixtures/shared/osv/pypi``)."""
    if env := os.environ.get("TRACKER_OSV_RECORDS"):
        return Path(env)
    root = Path(__file__).resolve().parents[2]  # the repo: standin/hubstandin/osv.py
    for candidate in (root / "tests" / "fixtures" / "shared" / "osv" / "pypi", root.parent / "shared" / "osv" / "pypi"):
        if candidate.is_dir():
            return candidate
    return root / "tests" / "fixtures" / "shared" / "osv" / "pypi"


# ------------------------------------------------------------------ loading


def _rfc3339(value: dt.datetime) -> str:
    value = value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".") + "Z"


def _fix_yaml(value: Any) -> Any:
    """PyYAML turns unquoted timestamps into datetimes (12 PYSEC files): back to RFC 3339 ``Z`` strings."""
    if isinstance(value, dt.datetime):
        return _rfc3339(value)
    if isinstance(value, dt.date):
        return value.isoformat() + "T00:00:00Z"
    if isinstance(value, dict):
        return {str(k): _fix_yaml(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fix_yaml(v) for v in value]
    return value


def load_records(root: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``*.json``/``*.yaml``/``*.yml`` OSV record under ``root``, by id (later ``modified`` wins)."""
    records: dict[str, dict[str, Any]] = {}
    for path in sorted(Path(root).rglob("*")):
        if path.suffix == ".json":
            record = json.loads(path.read_text("utf-8"))
        elif path.suffix in (".yaml", ".yml"):
            record = _fix_yaml(yaml.load(path.read_text("utf-8"), Loader=_YAML_LOADER))
        else:
            continue
        current = records.get(record["id"])
        if current is None or str(record.get("modified", "")) > str(current.get("modified", "")):
            records[record["id"]] = record
    return records


# ----------------------------------------------------------------- matching


def _normalise(ecosystem: str | None, name: str) -> str:
    if ecosystem == "PyPI" or ecosystem is None:
        return re.sub(r"[-_.]+", "-", name).lower()
    if ecosystem == "GIT":
        name = re.sub(r"^[a-z]+://", "", name).rstrip("/")
        return name.removesuffix(".git")
    return name


@lru_cache(maxsize=65536)
def _parse(ecosystem: str, value: str) -> Version | None:
    if ecosystem != "PyPI":
        return None
    try:
        return Version(value)
    except InvalidVersion:
        return None


_ZERO = Version("0")


def _range_affects(rng: Mapping[str, Any], ecosystem: str, version: Version) -> bool:
    events: list[tuple[Version, str]] = []
    limits: list[Version] = []
    for event in rng.get("events") or []:
        for kind, raw in event.items():
            parsed = _ZERO if (kind == "introduced" and raw == "0") else _parse(ecosystem, str(raw))
            if parsed is None:
                continue  # OSV.dev skips events it cannot parse
            if kind == "limit":
                limits.append(parsed)
            else:
                events.append((parsed, kind))
    if limits and not any(version < limit for limit in limits):
        return False
    # Walk from the highest event down; on equal versions, fixed/last_affected sort above introduced.
    order = {"introduced": 0, "last_affected": 1, "fixed": 2}
    for value, kind in sorted(events, key=lambda e: (e[0], order.get(e[1], 0)), reverse=True):
        if value <= version:
            if kind == "introduced":
                return True
            if kind == "last_affected":
                return value == version
            return False  # fixed
    return False


def _affects(affected: Mapping[str, Any], ecosystem: str, version: str) -> bool:
    parsed = _parse(ecosystem, version)
    for listed in affected.get("versions") or []:
        if listed == version:
            return True
        if parsed is not None and _parse(ecosystem, str(listed)) == parsed:
            return True
    if parsed is None:
        return False
    return any(
        _range_affects(rng, ecosystem, parsed)
        for rng in affected.get("ranges") or []
        if rng.get("type") in ("ECOSYSTEM", "SEMVER")
    )


@dataclass
class OsvDatabase:
    """Records by id, with OSV.dev's package/version and (simplified) commit matching."""

    records: dict[str, dict[str, Any]]

    @classmethod
    def from_dir(cls, root: str | Path) -> OsvDatabase:
        return cls(load_records(root))

    def match_package(self, ecosystem: str | None, name: str, version: str | None) -> list[dict[str, Any]]:
        """Records affecting ``name`` (at ``version``; every record for the package when None), by id."""
        out = []
        for record in self.records.values():
            if record.get("withdrawn"):
                continue
            for affected in record.get("affected") or []:
                package = affected.get("package") or {}
                eco = package.get("ecosystem")
                if ecosystem is not None and eco != ecosystem:
                    continue
                if _normalise(eco, package.get("name", "")) != _normalise(eco, name):
                    continue
                if version is None or _affects(affected, eco, version):
                    out.append(record)
                    break
        return sorted(out, key=lambda r: r["id"])

    def match_commit(self, commit: str) -> list[dict[str, Any]]:
        commit = commit.lower()
        out = []
        for record in self.records.values():
            if record.get("withdrawn"):
                continue
            for affected in record.get("affected") or []:
                hit = commit in {str(v).lower() for v in affected.get("versions") or []} or any(
                    str(value).lower() == commit
                    for rng in affected.get("ranges") or []
                    if rng.get("type") == "GIT"
                    for event in rng.get("events") or []
                    for kind, value in event.items()
                    if kind in ("introduced", "last_affected")
                )
                if hit:
                    out.append(record)
                    break
        return sorted(out, key=lambda r: r["id"])


def _ecosystems() -> set[str]:
    from tracker.core.advisory.validate import schema

    return set(schema()["$defs"]["ecosystemName"]["enum"]) | {"GIT"}


# ---------------------------------------------------------------------- app


class _Invalid(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": _GRPC_CODE.get(status, 2), "message": message}, status_code=status)


def _encode_token(offset: int) -> str:
    return base64.b64encode(f"P:{offset}".encode()).decode()


def _decode_token(token: str) -> int:
    try:
        text = base64.b64decode(token, validate=True).decode()
        if not text.startswith("P:"):
            raise ValueError(text)
        return int(text[2:])
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise _Invalid("invalid page token") from exc


@dataclass
class RequestLog:
    method: str
    path: str
    body: Any
    status: int


@dataclass
class _State:
    db: OsvDatabase
    page_size: int = 1000
    batch_page_size: int = 1000
    faults: list[int] = field(default_factory=list)
    requests: list[RequestLog] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    ecosystems: set[str] = field(default_factory=_ecosystems)

    def take_fault(self) -> int | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None

    def log(self, entry: RequestLog) -> None:
        with self.lock:
            self.requests.append(entry)


def _parse_purl(purl: str) -> tuple[str | None, str, str | None]:
    """``pkg:pypi/name@version`` -> (ecosystem or None for unknown types, name, version)."""
    if not purl.startswith("pkg:") or "/" not in purl:
        raise _Invalid("invalid purl")
    body = purl[4:].split("?", 1)[0].split("#", 1)[0]
    ptype, rest = body.split("/", 1)
    name, _, version = rest.partition("@")
    ecosystem = {"pypi": "PyPI"}.get(ptype.lower())
    return ecosystem, name, version or None


def _matches(state: _State, query: Any) -> list[dict[str, Any]] | None:
    """The records a query matches, or None for "answer {}" (unknown purl type); raises _Invalid."""
    if not isinstance(query, dict):
        raise _Invalid("query must be an object")
    if "commit" in query:
        commit = query["commit"]
        if not isinstance(commit, str) or not commit or not _HEX.match(commit) or len(commit) % 2:
            raise _Invalid("invalid hash")
        return state.db.match_commit(commit)
    package = query.get("package") or {}
    version = query.get("version") or None
    if not isinstance(package, dict):
        raise _Invalid("package must be an object")
    if package.get("purl"):
        if package.get("name") or package.get("ecosystem"):
            raise _Invalid("name/ecosystem specified in a PURL query")
        ecosystem, name, purl_version = _parse_purl(package["purl"])
        if purl_version and version:
            raise _Invalid("version specified in params and PURL query")
        if ecosystem is None:
            return None
        return state.db.match_package(ecosystem, name, purl_version or version)
    name = package.get("name")
    if not name:
        raise _Invalid("package name is required")
    ecosystem = package.get("ecosystem") or None
    if ecosystem is not None and ecosystem.split(":", 1)[0] not in state.ecosystems:
        raise _Invalid("invalid ecosystem")
    return state.db.match_package(ecosystem, name, version)


def _page(items: list[Any], token: str | None, size: int) -> tuple[list[Any], str | None]:
    offset = _decode_token(token) if token else 0
    chunk = items[offset : offset + size]
    nxt = _encode_token(offset + size) if offset + size < len(items) else None
    return chunk, nxt


def build_osv_app(state: _State) -> Starlette:
    """The Starlette app serving ``state`` (see the module docstring for routes and shapes)."""

    async def guarded(request: Request, handler) -> JSONResponse:
        body: Any = None
        if request.method == "POST":
            raw = await request.body()
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = raw.decode("utf-8", "replace")
        fault = state.take_fault()
        if fault is not None:
            response = _error(fault, "injected fault")
        elif request.method == "POST" and not isinstance(body, dict):
            response = _error(400, "invalid JSON body")
        else:
            try:
                response = handler(request, body)
            except _Invalid as exc:
                response = _error(exc.status, str(exc))
        state.log(RequestLog(request.method, request.url.path, body, response.status_code))
        return response

    def query(request: Request, body: dict) -> JSONResponse:
        found = _matches(state, body)
        if not found:
            return JSONResponse({})
        vulns, token = _page(found, body.get("page_token"), state.page_size)
        out: dict[str, Any] = {"vulns": vulns}
        if token:
            out["next_page_token"] = token
        return JSONResponse(out)

    def querybatch(request: Request, body: dict) -> JSONResponse:
        queries = body.get("queries") or []
        if not isinstance(queries, list):
            raise _Invalid("queries must be a list")
        if len(queries) > MAX_BATCH:
            raise _Invalid("too many queries")
        results = []
        for index, q in enumerate(queries):
            try:
                found = _matches(state, q) or []
                vulns, token = _page(found, q.get("page_token"), state.batch_page_size)
            except _Invalid as exc:
                raise _Invalid(f"error in query at index {index}: {exc}") from exc
            result: dict[str, Any] = {}
            if vulns:
                result["vulns"] = [{"id": r["id"], "modified": r["modified"]} for r in vulns]
            if token:
                result["next_page_token"] = token
            results.append(result)
        return JSONResponse({"results": results})

    def get_vuln(request: Request, body: Any) -> JSONResponse:
        vuln_id = request.path_params["id"]
        if len(vuln_id) > 100:
            raise _Invalid("id too long")
        record = state.db.records.get(vuln_id)
        if record is None:
            return _error(404, "Vulnerability not found")
        return JSONResponse(record)

    async def query_route(request: Request) -> JSONResponse:
        return await guarded(request, query)

    async def batch_route(request: Request) -> JSONResponse:
        return await guarded(request, querybatch)

    async def vuln_route(request: Request) -> JSONResponse:
        return await guarded(request, get_vuln)

    return Starlette(
        routes=[
            Route("/v1/query", query_route, methods=["POST"]),
            Route("/v1/querybatch", batch_route, methods=["POST"]),
            Route("/v1/vulns/{id:path}", vuln_route, methods=["GET"]),
        ]
    )


# ------------------------------------------------------------------- runner


class OsvStandin:
    """The stand-in served by uvicorn on 127.0.0.1 (a free port) in a background thread.

    ``with OsvStandin() as osv: OsvClient(base_url=osv.url)``. ``records_dir``
    defaults to :func:`default_records_dir`.
    """

    def __init__(
        self,
        records_dir: str | Path | None = None,
        *,
        page_size: int = 1000,
        batch_page_size: int = 1000,
        records: Mapping[str, dict[str, Any]] | None = None,
    ):
        db = OsvDatabase(dict(records)) if records is not None else OsvDatabase.from_dir(
            records_dir or default_records_dir()
        )
        self.state = _State(db=db, page_size=page_size, batch_page_size=batch_page_size)
        self.app = build_osv_app(self.state)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    @property
    def url(self) -> str:
        if self._port is None:
            raise RuntimeError("OSV stand-in is not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[RequestLog]:
        """Requests served so far (a copy), faults included."""
        with self.state.lock:
            return list(self.state.requests)

    def fail_next(self, count: int, status: int = 500) -> None:
        """Answer the next ``count`` requests (any route) with ``status`` and a gRPC-style error body."""
        with self.state.lock:
            self.state.faults.extend([status] * count)

    def set_page_size(self, page_size: int | None = None, batch_page_size: int | None = None) -> None:
        if page_size is not None:
            self.state.page_size = page_size
        if batch_page_size is not None:
            self.state.batch_page_size = batch_page_size

    def reset(self, *, page_size: int = 1000, batch_page_size: int = 1000) -> None:
        """Forget faults and the request log; restore page sizes (between tests)."""
        with self.state.lock:
            self.state.faults.clear()
            self.state.requests.clear()
        self.set_page_size(page_size, batch_page_size)

    def start(self) -> OsvStandin:
        """Serve in a background thread; returns once the socket accepts connections."""
        if self._server is not None:
            return self
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="osv-standin", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("OSV stand-in failed to start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None
        self._thread = None
        self._port = None

    def __enter__(self) -> OsvStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

