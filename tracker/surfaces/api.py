"""The HTTP API: OSV-compatible queries over the tracker's advisories (FastAPI).

Request and response shapes follow OSV.dev's v1 API, so OSV clients work
unchanged: ``POST /v1/query``, ``POST /v1/querybatch``, ``GET /v1/vulns/{id}``.
A package is a watched repo (``{"name": "owner/name"}``, or the purl
``pkg:huggingface/owner/name``) and a version is a commit; a bare
``{"commit": SHA}`` is matched across every watched repo. As OSV.dev does, an
empty answer is ``{}`` and long answers are paged with ``next_page_token``; but a
question the tracker cannot answer is an error, never ``{}``: a repo that is not
watched (404), a revision the Hub says does not exist (404), or one it could not
be asked about now (503; in ``querybatch``, ``{"error": {"code", "message"}}`` for
that query). Revisions not read yet are looked up on the Hub within a budget of
``[api] max_hub_requests`` per call, a whole ``querybatch`` included.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from tracker.adapters.feeds import feeds_router
from tracker.core.bounded import UntrustedInput, json_safe, loads_json
from tracker.core.errors import (
    ConfigError,
    EntryGone,
    HubError,
    NotWatched,
    RepoDisabled,
    RepoGone,
    RevisionGone,
    RevisionUnresolved,
    StoreError,
    TrackerError,
    UpstreamFileError,
)
from tracker.core.model import SHA_RE, validate_repo_id
from tracker.pipeline.querying import LookupBudget
from tracker.surfaces.web import install_site, pages_router

if TYPE_CHECKING:
    from tracker.app import Tracker

log = logging.getLogger("tracker.api")  # the name operators filter logs by, not the module path
PAGE_SIZE = 1000
# A page of /v1/query also ends (after at least one record) once the records' computed ``versions``
# reach this many: a commit affected by thousands of advisories is answered in pages of bounded
# size, and the client follows next_page_token as for any page.
PAGE_VERSIONS = 20_000


class QueryError(ValueError):
    pass


def json_payload(payload: Any) -> Any:
    """A POST body as JSON whatever its content type, as OSV.dev reads it.

    FastAPI parses only ``application/json`` bodies; any other type (curl's ``-d`` sends a form
    type) arrives as the raw bytes, which are parsed here. A body that is not JSON is a 400.
    """
    if not isinstance(payload, bytes | bytearray):
        return payload
    try:
        return loads_json(bytes(payload))
    except UntrustedInput as exc:
        raise QueryError(f"the request body is refused: {exc}") from None
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        raise QueryError("the request body is not JSON") from None


def _error(status: int, code: int, message: str) -> JSONResponse:
    # OSV.dev answers errors as gRPC-style {"code", "message"}: 3 invalid argument, 5 not found.
    return JSONResponse({"code": code, "message": message}, status_code=status)


def _package_repo(package: Any) -> str | None:
    if package is None:
        return None
    if not isinstance(package, dict):
        raise QueryError("package must be an object")
    name = package.get("name")
    purl = package.get("purl")
    if purl:
        if not isinstance(purl, str) or not purl.startswith("pkg:huggingface/"):
            raise QueryError("only pkg:huggingface/OWNER/NAME purls are known here")
        name = purl.removeprefix("pkg:huggingface/").split("@", 1)[0]
    if not isinstance(name, str):
        raise QueryError("package.name (a repo id) or package.purl is required")
    # Records name the package by its URL on the Hub; accept that too.
    if "://" in name:
        name = "/".join(name.rstrip("/").split("/")[-2:])
    try:
        return validate_repo_id(name)
    except ValueError as exc:
        raise QueryError(str(exc)) from exc


# The tracker's errors -> HTTP status and OSV/gRPC-style code, in one place. First match wins.
ERROR_STATUS: tuple[tuple[type[Exception], int, int], ...] = (
    (QueryError, 400, 3),  # invalid argument
    (ConfigError, 400, 3),  # a malformed repo id or revision reached the Hub client
    (NotWatched, 404, 5),  # not found
    (RepoGone, 404, 5),  # the Hub: no such repo (or private, gated)
    (RevisionGone, 404, 5),
    (EntryGone, 404, 5),
    (RepoDisabled, 404, 5),
    (UpstreamFileError, 404, 5),  # a path the tracker refuses to request
    (HubError, 503, 14),  # the Hub is down, rate limiting, or out of time: retry later
    (StoreError, 503, 14),  # unavailable
)


def _unresolved(exc: RevisionUnresolved) -> tuple[int, int]:
    # 14 unavailable: the Hub could not be asked (retry later); 5 not found: it says no such revision.
    return (503, 14) if exc.temporary else (404, 5)


def _status_of(exc: Exception) -> tuple[int, int]:
    if isinstance(exc, RevisionUnresolved):
        return _unresolved(exc)
    for kind, status, code in ERROR_STATUS:
        if isinstance(exc, kind):
            return status, code
    return 500, 13


def create_app(tracker: Tracker, *, page_size: int = PAGE_SIZE, webhook_secret: str | None = None,
               poll_soon: Callable[[str], None] | None = None,
               scheduler_running: Callable[[], bool] | None = None, bind_host: str | None = None) -> FastAPI:
    """The API over a Tracker.

    ``webhook_secret`` turns on ``POST /hooks/hub`` (the Hub's webhooks; the secret arrives in
    ``X-Webhook-Secret``); ``poll_soon(repo_id)`` is how a webhook asks for a poll (the daemon
    hands it to its scheduler; by default a small coalescing pool polls). ``scheduler_running``
    is how the daemon tells ``/readyz`` its scheduler runs (None: no scheduler, as in ``tracker serve``).
    ``bind_host`` is the address the server listens on: the Hosts answered by default are it and
    localhost (see :func:`tracker.surfaces.api_repos.served_hosts`).
    """
    # /docs is a static page (tracker/surfaces/web): Swagger UI would load its script from a CDN.
    app = FastAPI(title="upstream-tracker", version="1", docs_url=None, redoc_url=None)
    store = tracker.store
    app.include_router(feeds_router(store, tracker_url=getattr(tracker.settings, "public_url", None)))
    app.include_router(pages_router(tracker))  # the pages: /, /repos/..., /advisories/{id} (tracker/surfaces/web/)
    install_site(app)  # HEAD, the favicon, /docs, HTML 404s for browsers
    querier = tracker.querier
    poll_soon = poll_soon or tracker.poll_soon

    def target(query: Any, budget: LookupBudget) -> tuple[str, int | None, list[str] | None] | None:
        """The (commit, repo, advisory ids when computed) a query is about; None when it can match nothing.

        A commit the tracker listed is answered from the index (ids None: the hot path); one it has
        not seen is placed on the Hub within ``budget`` and its advisories computed. Raises
        RevisionUnresolved when the revision cannot be resolved.
        """
        if not isinstance(query, dict):
            raise QueryError("a query must be an object")
        commit = query.get("commit")
        version = query.get("version")
        repo_id = _package_repo(query.get("package"))
        if commit is not None and version is not None:
            raise QueryError("give either commit or version, not both")
        revision = commit if commit is not None else version
        if not isinstance(revision, str) or not revision:
            raise QueryError("a query needs a commit, or a package and a version")
        if len(revision) > 255 or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in revision):
            raise QueryError("invalid revision")
        if repo_id is None:
            if not SHA_RE.match(revision):
                raise QueryError("commit must be a full 40-hex sha")
            return revision, None, None  # any watched repo; no repo to look an unseen commit up in
        repo = store.repos.get(repo_id)
        if repo is None:
            raise NotWatched(repo_id)
        placement = querier.place(repo, revision, budget)
        if not placement.on_graph:
            return None
        if not placement.edges:
            return placement.sha, repo.pk, None
        return placement.sha, repo.pk, querier.advisory_ids(repo, placement)

    def offset_of(token: Any) -> int:
        if token is None or token == "":
            return 0
        if not isinstance(token, str) or not token.isdigit() or len(token) > 9:
            raise QueryError("invalid page_token")
        return int(token)

    def matches(query: Any, budget: LookupBudget, *, records: bool = True
                ) -> tuple[list[tuple[str, str, str]], str | None]:
        """One page of (id, modified, record JSON) and the next page token.

        ``records=False`` (querybatch: ids only): the records' versions are not computed. A page
        with records ends early once their versions reach PAGE_VERSIONS (after one record at least).
        """
        offset = offset_of(query.get("page_token") if isinstance(query, dict) else None)
        found = target(query, budget)
        if found is None:
            return [], None
        sha, repo_pk, ids = found
        if ids is None:
            rows, more = store.advisories.live_records_for_commit(sha, repo_pk, limit=page_size, offset=offset,
                                                       versions=records, versions_budget=PAGE_VERSIONS)
            return rows, (str(offset + len(rows)) if more else None)
        live = [r for r in store.advisories.by_ids(ids, versions=records) if not r.withdrawn][offset:]
        shown, listed = 0, 0
        while shown < min(len(live), page_size) and (shown == 0 or listed < PAGE_VERSIONS):
            listed += len(live[shown].record["affected"][0].get("versions") or [])
            shown += 1
        page = [(r.id, r.record["modified"], json.dumps(r.record, allow_nan=False)) for r in live[:shown]]
        return page, (str(offset + shown) if len(live) > shown else None)

    @app.exception_handler(TrackerError)
    async def _tracker_error(_request: Request, exc: TrackerError) -> JSONResponse:
        status, code = _status_of(exc)
        # One line: a Hub client's error text spans several (URL, advice, a docs link).
        return _error(status, code, " ".join(line.strip() for line in str(exc).splitlines() if line.strip()))

    @app.exception_handler(QueryError)
    async def _bad_query(_request: Request, exc: QueryError) -> JSONResponse:
        return _error(*_status_of(exc), str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, 3, f"invalid request body: {exc.errors()[0].get('msg', 'invalid')}")

    # Plain `def` handlers: FastAPI runs them in its threadpool, so a database read or a Hub
    # lookup never blocks the event loop.
    @app.post("/v1/query")
    def query(payload: Any = Body(...)) -> Response:
        payload = json_payload(payload)
        if not isinstance(payload, dict):
            raise QueryError("a query must be an object")
        rows, token = matches(payload, querier.budget())
        # The stored records are served as they are: no decode and re-encode on the hot path.
        parts = []
        if rows:
            parts.append('"vulns":[' + ",".join(r[2] for r in rows) + "]")
        if token:
            parts.append(f'"next_page_token":{json.dumps(token)}')
        return Response("{" + ",".join(parts) + "}", media_type="application/json")

    @app.post("/v1/querybatch")
    def querybatch(payload: Any = Body(...)) -> JSONResponse:
        payload = json_payload(payload)
        queries = payload.get("queries") if isinstance(payload, dict) else None
        if not isinstance(queries, list):
            raise QueryError("queries must be a list")
        if len(queries) > 1000:
            raise QueryError("at most 1000 queries per batch")
        results = []
        budget = querier.budget()  # one budget of Hub look-ups for the whole batch
        for q in queries:
            if not isinstance(q, dict):
                raise QueryError("a query must be an object")
            try:
                rows, token = matches(q, budget, records=False)
            except (RevisionUnresolved, NotWatched) as exc:
                status, code = _status_of(exc)
                results.append({"error": {"code": code, "message": str(exc)}})
                continue
            result: dict[str, Any] = {}
            if rows:
                result["vulns"] = [{"id": vid, "modified": modified} for vid, modified, _ in rows]
            if token:
                result["next_page_token"] = token
            results.append(result)
        return JSONResponse({"results": results})

    @app.get("/v1/vulns/{vuln_id}")
    def get_vuln(vuln_id: str) -> JSONResponse:
        row = store.advisories.get(vuln_id)
        if row is None:
            return _error(404, 5, "Bug not found.")
        return JSONResponse(json_safe(row.record))

    @app.post("/hooks/hub", status_code=202)
    def hub_webhook(request: Request, payload: Any = Body(...)) -> JSONResponse:
        """A Hub webhook: answer at once and poll the repo (its payload is a hint, never trusted as data).

        Deliveries may repeat or arrive out of order, so the poll re-reads the head from the
        Hub rather than using ``headSha``; polling an unchanged repo costs one request.
        """
        if not webhook_secret:
            return _error(404, 5, "webhooks are not enabled (set TRACKER_WEBHOOK_SECRET)")
        given = request.headers.get("x-webhook-secret", "")
        if not hmac.compare_digest(given.encode(), webhook_secret.encode()):
            return _error(401, 16, "invalid webhook secret")
        payload = json_payload(payload)
        repo = payload.get("repo") if isinstance(payload, dict) else None
        event = payload.get("event") if isinstance(payload, dict) else None
        if not isinstance(repo, dict) or not isinstance(event, dict):
            raise QueryError("not a Hub webhook payload")
        if repo.get("type", "model") != "model" or not str(event.get("scope", "")).startswith("repo"):
            return JSONResponse({"status": "ignored", "reason": "not a model repo event"}, status_code=200)
        try:
            repo_id = validate_repo_id(str(repo.get("name", "")))
        except ValueError as exc:
            raise QueryError(str(exc)) from exc
        if store.repos.get(repo_id) is None:
            return JSONResponse({"status": "ignored", "reason": f"{repo_id} is not watched"}, status_code=200)
        poll_soon(repo_id)
        return JSONResponse({"status": "queued", "repo": repo_id}, status_code=202)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """Liveness: the process answers. The database is /readyz's business: an outage of it must
        take replicas out of rotation, not restart them all."""
        return {"status": "ok"}

    # Repos, readyz, metrics and the authenticated writes live in tracker/surfaces/api_repos.py.
    from tracker.surfaces.api_repos import install

    install(app, tracker, scheduler_running=scheduler_running, bind_host=bind_host, webhook_secret=webhook_secret)
    return app
