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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict, Unpack

from fastapi import APIRouter, Body, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from tracker.adapters.settings import Settings
from tracker.app import Tracker, make_tracker
from tracker.core.bounded import UntrustedInput, json_safe, loads_json
from tracker.core.errors import NotFound, NotWatched, RevisionUnresolved, TrackerError
from tracker.core.model import SHA_RE, validate_repo_id
from tracker.pipeline.querying import LookupBudget
from tracker.services import Advisories, ApiTokens, Watching
from tracker.services.revisions import is_revision_name
from tracker.surfaces.api_bodies import BodyGate
from tracker.surfaces.api_deps import ApiState, OnDemandGate, StateDep, TrackerDep
from tracker.surfaces.api_errors import BadRequest, WrongSecret, answer_of, install_error_handlers
from tracker.surfaces.api_feeds import feeds_router
from tracker.surfaces.api_guards import KnownHosts, ReadGuard, served_hosts
from tracker.surfaces.api_ops import ops_router
from tracker.surfaces.api_repos import repos_router
from tracker.surfaces.api_writes import writes_router
from tracker.surfaces.web import install_site, pages_router

PAGE_SIZE = 1000
# FastAPI parses only ``application/json`` bodies; any other type arrives as the raw bytes.
JsonBody = Annotated[Any, Body()]
Page = tuple[list[tuple[str, str, str]], str | None]  # (id, modified, record JSON) rows, next page token


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
        raise BadRequest(f"the request body is refused: {exc}") from None
    except ValueError:  # UnicodeDecodeError and JSONDecodeError included
        raise BadRequest("the request body is not JSON") from None


def _package_repo(package: Any) -> str | None:
    if package is None:
        return None
    if not isinstance(package, dict):
        raise BadRequest("package must be an object")
    name = package.get("name")
    purl = package.get("purl")
    if purl:
        if not isinstance(purl, str) or not purl.startswith("pkg:huggingface/"):
            raise BadRequest("only pkg:huggingface/OWNER/NAME purls are known here")
        name = purl.removeprefix("pkg:huggingface/").split("@", 1)[0]
    if not isinstance(name, str):
        raise BadRequest("package.name (a repo id) or package.purl is required")
    # Records name the package by its URL on the Hub; accept that too.
    if "://" in name:
        name = "/".join(name.rstrip("/").split("/")[-2:])
    try:
        return validate_repo_id(name)
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


# -- OSV queries ------------------------------------------------------------------------------------


def _revision_of(query: dict[str, Any]) -> str:
    """The commit or version a query names, checked."""
    commit = query.get("commit")
    version = query.get("version")
    if commit is not None and version is not None:
        raise BadRequest("give either commit or version, not both")
    revision = commit if commit is not None else version
    if not isinstance(revision, str) or not revision:
        raise BadRequest("a query needs a commit, or a package and a version")
    if not is_revision_name(revision):
        raise BadRequest("invalid revision")
    return revision


def _offset_of(token: Any) -> int:
    if token is None or token == "":
        return 0
    if not isinstance(token, str) or not token.isdigit() or len(token) > 9:
        raise BadRequest("invalid page_token")
    return int(token)


def _matches(state: ApiState, query: Any, budget: LookupBudget, *, records: bool = True) -> Page:
    """One page of (id, modified, record JSON) and the next page token.

    A commit the tracker listed is answered from the index (the hot path); one it has not seen is
    placed on the Hub within ``budget`` and its advisories computed. ``records=False`` (querybatch:
    ids only): the records' versions are not computed. Raises RevisionUnresolved when the revision
    cannot be resolved.
    """
    offset = _offset_of(query.get("page_token") if isinstance(query, dict) else None)
    if not isinstance(query, dict):
        raise BadRequest("a query must be an object")
    repo_id = _package_repo(query.get("package"))
    revision = _revision_of(query)
    if repo_id is None and not SHA_RE.match(revision):
        raise BadRequest("commit must be a full 40-hex sha")  # any watched repo: none to look an unseen commit up in
    page = Advisories(state.tracker).affecting(repo_id, revision, budget, offset=offset, limit=state.page_size,
                                               records=records)
    return page.rows, (str(page.next_offset) if page.next_offset is not None else None)


def _batch_result(state: ApiState, query: Any, budget: LookupBudget) -> dict[str, Any]:
    """One query of a batch: its ids, or the error of a query the tracker cannot answer."""
    if not isinstance(query, dict):
        raise BadRequest("a query must be an object")
    try:
        rows, token = _matches(state, query, budget, records=False)
    except (RevisionUnresolved, NotWatched, NotFound) as exc:
        return {"error": {"code": answer_of(exc).code, "message": str(exc)}}
    result: dict[str, Any] = {}
    if rows:
        result["vulns"] = [{"id": vid, "modified": modified} for vid, modified, _ in rows]
    if token:
        result["next_page_token"] = token
    return result


# Plain `def` handlers: FastAPI runs them in its threadpool, so a database read or a Hub
# lookup never blocks the event loop.
osv_router = APIRouter()


@osv_router.post("/v1/query")
def query(state: StateDep, payload: JsonBody) -> Response:
    payload = json_payload(payload)
    if not isinstance(payload, dict):
        raise BadRequest("a query must be an object")
    rows, token = _matches(state, payload, Advisories(state.tracker).lookup_budget())
    # The stored records are served as they are: no decode and re-encode on the hot path.
    parts = []
    if rows:
        parts.append('"vulns":[' + ",".join(r[2] for r in rows) + "]")
    if token:
        parts.append(f'"next_page_token":{json.dumps(token)}')
    return Response("{" + ",".join(parts) + "}", media_type="application/json")


@osv_router.post("/v1/querybatch")
def querybatch(state: StateDep, payload: JsonBody) -> JSONResponse:
    payload = json_payload(payload)
    queries = payload.get("queries") if isinstance(payload, dict) else None
    if not isinstance(queries, list):
        raise BadRequest("queries must be a list")
    if len(queries) > 1000:
        raise BadRequest("at most 1000 queries per batch")
    budget = Advisories(state.tracker).lookup_budget()  # one budget of Hub look-ups for the whole batch
    return JSONResponse({"results": [_batch_result(state, q, budget) for q in queries]})


@osv_router.get("/v1/vulns/{vuln_id}")
def get_vuln(tracker: TrackerDep, vuln_id: str) -> JSONResponse:
    row = Advisories(tracker).get(vuln_id)
    if row is None:
        raise NotFound("Bug not found.")
    return JSONResponse(json_safe(row.osv))


@osv_router.post("/hooks/hub", status_code=202)
def hub_webhook(state: StateDep, request: Request, payload: JsonBody) -> JSONResponse:
    """A Hub webhook: answer at once and poll the repo (its payload is a hint, never trusted as data).

    Deliveries may repeat or arrive out of order, so the poll re-reads the head from the
    Hub rather than using ``headSha``; polling an unchanged repo costs one request.
    """
    secret = state.webhook_secret
    if not secret:
        raise NotFound("webhooks are not enabled (set TRACKER_WEBHOOK_SECRET)")
    given = request.headers.get("x-webhook-secret", "")
    if not hmac.compare_digest(given.encode(), secret.encode()):
        raise WrongSecret("invalid webhook secret")
    payload = json_payload(payload)
    repo = payload.get("repo") if isinstance(payload, dict) else None
    event = payload.get("event") if isinstance(payload, dict) else None
    if not isinstance(repo, dict) or not isinstance(event, dict):
        raise BadRequest("not a Hub webhook payload")
    if repo.get("type", "model") != "model" or not str(event.get("scope", "")).startswith("repo"):
        return JSONResponse({"status": "ignored", "reason": "not a model repo event"}, status_code=200)
    try:
        repo_id = validate_repo_id(str(repo.get("name", "")))
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    if Watching(state.tracker).get(repo_id) is None:
        return JSONResponse({"status": "ignored", "reason": f"{repo_id} is not watched"}, status_code=200)
    state.poll_soon(repo_id)
    return JSONResponse({"status": "queued", "repo": repo_id}, status_code=202)


@osv_router.get("/healthz")
def healthz() -> dict[str, str]:
    """Liveness: the process answers. The database is /readyz's business: an outage of it must
    take replicas out of rotation, not restart them all."""
    return {"status": "ok"}


# -- the app ------------------------------------------------------------------------------------------


class AppOptions(TypedDict, total=False):
    """What ``create_app`` may be told besides the Tracker (see there)."""

    page_size: int
    webhook_secret: str | None
    poll_soon: Callable[[str], None] | None
    scheduler_running: Callable[[], bool] | None
    bind_host: str | None
    opened: Callable[[Tracker], None] | None


def _api_state(tracker: Tracker, options: AppOptions) -> ApiState:
    settings = tracker.settings
    return ApiState(
        tracker=tracker, page_size=options.get("page_size", PAGE_SIZE),
        webhook_secret=options.get("webhook_secret"),
        poll_soon=options.get("poll_soon") or tracker.poll_soon,
        scheduler_running=options.get("scheduler_running"),
        gate=OnDemandGate(settings.api.on_demand_reads, settings.api.on_demand_per_client),
        tokens=ApiTokens(tracker), pages=Advisories(tracker).pages())


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the Tracker when the app owns it (``create_app(settings)``) and close it on shutdown; a
    Tracker handed in stays open: whoever opened it closes it."""
    settings: Settings | None = app.state.owned_settings
    if settings is None:
        yield
        return
    try:
        tracker = await run_in_threadpool(make_tracker, settings)  # opening connects to the database
    except TrackerError as exc:
        app.state.startup_error = exc  # for the server's runner to report (tracker serve: one line, exit 1)
        raise
    try:
        app.state.api = _api_state(tracker, app.state.options)
        opened = app.state.options.get("opened")
        if opened is not None:
            opened(tracker)
        yield
    finally:
        app.state.api = None
        await run_in_threadpool(tracker.close)


def create_app(tracker: Tracker | Settings, **options: Unpack[AppOptions]) -> FastAPI:
    """The API over a Tracker: one open already (its opener closes it), or one the app opens from
    ``Settings`` in its lifespan and closes on shutdown.

    ``webhook_secret`` turns on ``POST /hooks/hub`` (the Hub's webhooks; the secret arrives in
    ``X-Webhook-Secret``); ``poll_soon(repo_id)`` is how a webhook asks for a poll (the daemon
    hands it to its scheduler; by default a small coalescing pool polls). ``scheduler_running``
    is how the daemon tells ``/readyz`` its scheduler runs (None: no scheduler, as in ``tracker serve``).
    ``bind_host`` is the address the server listens on: the Hosts answered by default are it and
    localhost (see :func:`tracker.surfaces.api_guards.served_hosts`). ``page_size``: advisories per
    page of ``/v1/query``. ``webhook_secret`` defaults to the settings' ``[hub] webhook_secret``
    (None turns the hooks off). ``opened(tracker)`` is told the Tracker the lifespan opened (``tracker
    serve`` logs its start line); a tracker error opening it is left in ``app.state.startup_error``.
    """
    settings = tracker if isinstance(tracker, Settings) else tracker.settings
    if "webhook_secret" not in options:
        options = {**options, "webhook_secret": settings.hub.webhook_secret}
    # /docs is a static page (tracker/surfaces/web): Swagger UI would load its script from a CDN.
    app = FastAPI(title="upstream-tracker", version="1", docs_url=None, redoc_url=None, lifespan=_lifespan)
    app.state.options = options
    app.state.owned_settings = tracker if isinstance(tracker, Settings) else None
    app.state.startup_error = None
    app.state.api = None if isinstance(tracker, Settings) else _api_state(tracker, options)
    app.include_router(feeds_router)
    app.include_router(pages_router)  # the pages: /, /repos/..., /advisories/{id} (tracker/surfaces/web/)
    install_error_handlers(app)  # before install_site: its HTML 404s for browsers replace the JSON one
    install_site(app)  # HEAD, the favicon, /docs, HTML 404s for browsers (OSV's error shape for the rest)
    app.include_router(osv_router)
    # Repos (api_repos.py), readyz and metrics (api_ops.py), the authenticated writes (api_writes.py).
    for router in (repos_router, ops_router, writes_router):
        app.include_router(router)
    _install_middleware(app, settings, options)
    return app


def _install_middleware(app: FastAPI, settings: Settings, options: AppOptions) -> None:
    """The middleware, outermost first: the Host check (a forged Host is refused before anything else
    is looked at), the read guard (``[api] read_requires_token``), and the body gate (credentials,
    then bodies read within their limits: :mod:`tracker.surfaces.api_bodies`). Tokens are checked
    through the app's state, so an app that opens its Tracker in its lifespan checks them too."""

    def token_valid(token: str) -> bool:
        return ApiState.of(app.state).token_name(token) is not None

    app.add_middleware(BodyGate, webhook_secret=options.get("webhook_secret"), token_valid=token_valid)
    if settings.api.read_requires_token:
        app.add_middleware(ReadGuard, check=token_valid)
    hosts = served_hosts(settings, options.get("bind_host"))
    if hosts is not None:
        app.add_middleware(KnownHosts, hosts=hosts)
