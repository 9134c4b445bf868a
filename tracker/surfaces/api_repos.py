"""The API beyond OSV: repos, revisions, diffs and estimates; readiness and metrics; authenticated writes.

Three module-level routers, included by ``tracker.surfaces.api.create_app``; their endpoints get the
Tracker and the app's pieces as dependencies (:mod:`tracker.surfaces.api_deps`):

- reads: ``GET /v1/repos``, ``GET /v1/rules`` (the watch rules and their repos), ``GET /v1/repos/{owner}/{name}/revisions``, ``.../diff?from=&to=``,
  ``.../estimate?revision=``. A repo that is not watched is read from the Hub and nothing is stored
  (its revisions are then its newest commits, not analysed);
- operations: ``GET /readyz`` (the database answers and, in ``tracker run``, the scheduler runs;
  ``tracker serve`` has no scheduler, so there it means the database answers), ``GET /metrics``
  (Prometheus text format, tracker/adapters/metrics.py);
- writes, each needing ``Authorization: Bearer <token>`` (``tracker token create NAME``):
  ``POST /v1/watch``, ``DELETE /v1/watch/{owner}/{name}``, ``POST /v1/subscriptions``,
  ``DELETE /v1/subscriptions/{id}``. Without a token, or with a revoked or wrong one: 401.

Reading is open unless ``[api] read_requires_token = true``; then every request but ``/healthz``,
``/readyz``, the Hub webhook (it has its own secret) and the API's own description needs a token.

Links (feeds, pages) point at ``[api] public_url`` when it is set; otherwise at the request's own
``Host``, so that Host must be one the tracker knows (``[api] allowed_hosts``; by default the
address it listens on and localhost): any other is answered 400, or a shared cache would hand
everyone links to wherever a forged Host said (:class:`KnownHosts`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from tracker import services as usecases
from tracker.adapters import metrics
from tracker.adapters.delivery import TargetRefused
from tracker.adapters.settings import parse_interval
from tracker.app import Tracker
from tracker.core.errors import ConfigError, TrackerError, first_line
from tracker.core.model import RepoId, RevisionRow, validate_repo_id
from tracker.surfaces.api_deps import (
    HubSlotDep,
    OnDemandGate,
    StateDep,
    StoreDep,
    TrackerDep,
    require_token,
)
from tracker.surfaces.api_errors import BadRequest, Busy, Unauthorized, error_message, error_response

__all__ = ["BadRequest", "Busy", "OnDemandGate", "Unauthorized", "ops_router", "repos_router", "writes_router"]

log = logging.getLogger("tracker.api_repos")  # the name operators filter logs by, not the module path

# Open even when reads need a token: probes, the Hub's webhook (its own secret), the API's description.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/hooks/hub", "/openapi.json", "/docs", "/docs/oauth2-redirect"})
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$"  # a repo id part as the Hub allows it (checked fully below)
MAX_UPSTREAM_COMMITS = 1000
PROBES = frozenset({"/healthz", "/readyz"})  # answered whatever the Host: probes use the pod's address


# -- response and request models (the OpenAPI document is built from these) ------------------------


class ErrorOut(BaseModel):
    code: int = Field(description="gRPC-style code, as OSV.dev answers: 3 invalid, 5 not found, 14 unavailable, "
                                  "16 unauthenticated")
    message: str


class RepoOut(BaseModel):
    repo: str
    branch: str
    state: str = Field(description="active, gone (deleted or made private after being read), gated, disabled, "
                                   "or not_found (never read)")
    every_seconds: float | None = Field(description="poll interval; null: the configured default")
    last_seen_sha: str | None
    last_polled_at: datetime | None
    last_error: str | None
    renamed_to: str | None


class ReposOut(BaseModel):
    repos: list[RepoOut]


class RuleRepoOut(BaseModel):
    repo: str
    missing_since: datetime | None = Field(None, description="since when the rule no longer matches it "
                                                             "(dropped after the grace)")


class RuleOut(BaseModel):
    id: int
    rule: str = Field(description="the rule as `tracker watch add --rule` takes it")
    max: int = Field(description="the most repos the rule holds")
    grace_seconds: float
    created_at: datetime
    evaluated_at: datetime | None
    matched: int | None = Field(description="models the last evaluation matched (more than max: capped)")
    capped: bool
    last_error: str | None
    repos: list[RuleRepoOut]


class RulesOut(BaseModel):
    rules: list[RuleOut]


class TopFinding(BaseModel):
    code: str
    severity: str
    summary: str


class RevisionOut(BaseModel):
    sha: str
    date: datetime | None
    title: str
    status: str = Field(description="pending, done, unreachable; not_read for a repo that is not watched")
    baseline: bool
    parent: str | None
    summary: str | None
    worst_severity: str | None
    findings: int | None
    top_findings: list[TopFinding]
    files: dict[str, list[str]]
    libraries: list[str] = Field(default_factory=list, description="what the revision is loaded with; empty when not recorded")


class RevisionsOut(BaseModel):
    repo: str
    watched: bool = Field(description="false: the newest commits read from the Hub, not analysed or stored")
    revisions: list[RevisionOut]


class FindingOut(BaseModel):
    code: str
    category: str
    severity: str
    summary: str
    path: str | None
    before: Any = None
    after: Any = None
    evidence: dict[str, Any]
    library: str | None = Field(None, description="the library whose analyser found it; null: any library")


class LibrariesOut(BaseModel):
    old: list[str]
    new: list[str]


class DiffOut(BaseModel):
    repo: str
    from_: str = Field(alias="from")
    to: str
    libraries: LibrariesOut = Field(description="what each side is loaded with (sentence-transformers, diffusers...)")
    findings: list[FindingOut]
    by_library: dict[str, list[FindingOut]] = Field(
        description="the same findings grouped by library ('any': the repo's files whatever loads them), "
                    "most severe group first")
    files: dict[str, Any]
    texts: dict[str, Any]

    model_config = {"populate_by_name": True}


class ReadyOut(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, str]


class WatchIn(BaseModel):
    repo: str = Field(description="owner/name", max_length=200)
    branch: str = Field(default="main", min_length=1, max_length=200)
    every: str | None = Field(default=None, max_length=40, description="poll interval, e.g. 15m, 1h, 1d (1m..31d)")
    check: bool = Field(default=True, description="ask the Hub whether the repo exists first (404 with close "
                                                  "matches when it does not); false adds it unasked, as --no-check")


class WatchOut(BaseModel):
    repo: str
    branch: str
    every_seconds: float | None
    created: bool


class RemovedOut(BaseModel):
    removed: str


class SubscriptionIn(BaseModel):
    target: str = Field(description="a repo owner/name, an owner, or '*'", max_length=200)
    slack: str | None = Field(default=None, max_length=2000, description="a Slack incoming-webhook URL")
    webhook: str | None = Field(default=None, max_length=2000,
                                description="an HTTPS endpoint; alerts are signed per Standard Webhooks")
    min_severity: Literal["critical", "high", "moderate", "low", "info"] = "info"
    categories: list[str] = Field(default_factory=list, max_length=20)


class SubscriptionOut(BaseModel):
    id: int
    target: str
    kind: str
    url: str = Field(description="a Slack URL is a credential: only its host is shown")
    min_severity: str
    categories: list[str]
    created_at: datetime
    secret: str | None = Field(description="the webhook signing secret: shown in this answer only")


class UnsubscribedOut(BaseModel):
    removed: int
    dropped: int = Field(description="deliveries still pending that were dropped with it")


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "malformed request"},
    404: {"model": ErrorOut, "description": "no such repo or revision"},
    503: {"model": ErrorOut, "description": "the Hub or the database cannot answer now"},
}
AUTH_ERRORS: dict[int | str, dict[str, Any]] = {401: {"model": ErrorOut, "description": "no valid bearer token"}}


# -- helpers ------------------------------------------------------------------------------------------


def _repo(owner: str, name: str) -> RepoId:
    try:
        return validate_repo_id(f"{owner}/{name}")
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc


def _revision(value: str, what: str) -> str:
    if not value or len(value) > 255 or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in value):
        raise BadRequest(f"invalid {what}: a commit id, branch or tag without spaces or control characters")
    return value


def _revision_out(rev: RevisionRow) -> RevisionOut:
    findings = rev.findings or []
    return RevisionOut(
        sha=rev.sha, date=rev.date, title=rev.title, status=rev.status, baseline=rev.baseline,
        parent=rev.parent_sha, summary=rev.summary, worst_severity=rev.worst_severity, findings=len(findings),
        top_findings=[TopFinding(code=f["code"], severity=f["severity"], summary=f["summary"]) for f in findings[:3]],
        files={k: [e["path"] for e in v] for k, v in (rev.diff or {}).get("files", {}).items()},
        libraries=list(rev.libraries),
    )


def _bearer_token(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


# -- middleware ---------------------------------------------------------------------------------------


class ReadGuard:
    """ASGI middleware for ``read_requires_token``: every path but ``OPEN_PATHS`` needs a valid token."""

    def __init__(self, app: ASGIApp, check: Callable[[str], bool]) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None)
        token = _bearer_token(header)
        if token is None or not await run_in_threadpool(self.check, token):
            message = "reading needs a bearer token here ([api] read_requires_token)" if token is None \
                else "invalid or revoked token"
            await error_response(Unauthorized(message))(scope, receive, send)
            return
        await self.app(scope, receive, send)


def served_hosts(settings: Any, bind_host: str | None) -> list[str] | None:
    """The Host names answered, or None for any.

    ``[api] allowed_hosts`` when set. Otherwise, when links do not depend on the Host (``public_url``
    is set) any; else the address served on and localhost. An app built without ``bind_host`` (in
    process, as tests do) checks only what ``allowed_hosts`` names.
    """
    configured = list(getattr(settings, "api_allowed_hosts", ()) or ())
    if configured:
        return [_host_pattern(h) for h in configured]
    if getattr(settings, "public_url", None) or bind_host is None:
        return None
    return list(dict.fromkeys(_host_pattern(h) for h in (bind_host, "localhost", "127.0.0.1", "::1")))


def _host_pattern(host: str) -> str:
    """A host as it appears in a ``Host`` header: lower case, an IPv6 address in brackets."""
    host = host.strip().lower().strip("[]")
    return f"[{host}]" if ":" in host else host


class KnownHosts:
    """ASGI middleware: a request whose ``Host`` is not one of ``hosts`` gets 400 (Starlette's
    TrustedHostMiddleware), but for the probes (``PROBES``), which make no links."""

    def __init__(self, app: ASGIApp, hosts: list[str]) -> None:
        self.app = app
        self.checked = TrustedHostMiddleware(app, allowed_hosts=hosts, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in PROBES:
            await self.app(scope, receive, send)
            return
        await self.checked(scope, receive, send)


# -- the routers ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RepoPath:
    """The ``{owner}/{name}`` of a route's path; checked as a repo id when the route asks for it."""

    owner: str
    name: str

    def repo_id(self) -> RepoId:
        return _repo(self.owner, self.name)


async def _repo_path(owner: Annotated[str, Path(pattern=NAME, max_length=96)],
                     name: Annotated[str, Path(pattern=NAME, max_length=96)]) -> RepoPath:
    return RepoPath(owner, name)


@dataclass(frozen=True)
class EstimateKnobs:
    seq_len: int | None
    lora_rank: int


async def _estimate_knobs(
    seq_len: Annotated[int | None, Query(ge=1, le=1 << 30, description="sequence length")] = None,
    lora_rank: Annotated[int, Query(ge=1, le=65_536)] = 16,
) -> EstimateKnobs:
    return EstimateKnobs(seq_len, lora_rank)


RepoPathDep = Annotated[RepoPath, Depends(_repo_path)]

# Plain `def` handlers: FastAPI runs them in its threadpool, off the event loop.
repos_router = APIRouter(tags=["repos"])


@repos_router.get("/v1/repos", response_model=ReposOut, responses={503: ERRORS[503]})
def list_repos(store: StoreDep) -> ReposOut:
    """The watched repos, by id."""
    return ReposOut(repos=[
        RepoOut(repo=r.repo_id, branch=r.branch, state=r.state.value, every_seconds=r.every_seconds,
                last_seen_sha=r.last_seen_sha, last_polled_at=r.last_polled_at, last_error=r.last_error,
                renamed_to=r.renamed_to)
        for r in store.repos.all()
    ])


@repos_router.get("/v1/rules", response_model=RulesOut, responses={503: ERRORS[503]})
def list_rules(store: StoreDep) -> RulesOut:
    """The watch rules (``tracker watch add --rule``), with the repos each one watches."""
    rules = store.rules
    return RulesOut(rules=[
        RuleOut(id=r.id, rule=r.text, max=r.max_repos, grace_seconds=r.grace_seconds, created_at=r.created_at,
                evaluated_at=r.evaluated_at, matched=r.matched, capped=r.capped, last_error=r.last_error,
                repos=[RuleRepoOut(repo=repo, missing_since=since) for repo, since in rules.repos_of(r.id)])
        for r in rules.all()
    ])


@repos_router.get("/v1/repos/{owner}/{name}/revisions", response_model=RevisionsOut, responses=ERRORS)
def list_revisions(
    tracker: TrackerDep, slot: HubSlotDep, path: RepoPathDep,
    branch: Annotated[str, Query(min_length=1, max_length=200,
                                 description="for a repo not watched: the branch to list")] = "main",
    limit: Annotated[int, Query(ge=1, le=MAX_UPSTREAM_COMMITS,
                                description="for a repo not watched: how many of its newest commits")] = 100,
) -> RevisionsOut:
    """The revisions read, oldest first, with what changed in each; for a repo not watched, its newest
    commits on the Hub (nothing analysed or stored)."""
    store = tracker.store
    repo_id = path.repo_id()
    row = store.repos.get(repo_id)
    if row is not None:
        return RevisionsOut(repo=repo_id, watched=True, revisions=[_revision_out(r) for r in store.revisions.of_repo(row.pk)])
    with slot():
        listing = tracker.hub.commits_since(repo_id, _revision(branch, "branch"), None, limit=limit)
    return RevisionsOut(repo=repo_id, watched=False, revisions=[
        RevisionOut(sha=c.sha, date=c.date, title=c.title, status="not_read", baseline=False,
                    parent=c.parents[0] if c.parents else None, summary=None, worst_severity=None,
                    findings=None, top_findings=[], files={})
        for c in listing.commits
    ])


@repos_router.get("/v1/repos/{owner}/{name}/diff", response_model=DiffOut, response_model_by_alias=True,
                  responses=ERRORS)
def diff(tracker: TrackerDep, slot: HubSlotDep, path: RepoPathDep,
         from_: Annotated[str, Query(alias="from", max_length=255, description="the older revision")],
         to: Annotated[str, Query(max_length=255, description="the newer revision")]) -> DiffOut:
    """What changed between two revisions of any repo: stored when watched and read, else read from the Hub."""
    store = tracker.store
    repo_id = path.repo_id()
    with slot():
        old_side = tracker.snapshot_of(repo_id, _revision(from_, "from"))
        new_side = tracker.snapshot_of(repo_id, _revision(to, "to"))
        row = store.repos.get(repo_id)
        stored_old = store.revisions.get(row.pk, old_side[0]) if row is not None else None
        analysis = tracker.analyse(repo_id, old_side, new_side,
                                   old_estimate=stored_old.estimate if stored_old else None)
    return DiffOut.model_validate({"repo": repo_id, **analysis.diff_json(old_side[0], new_side[0])})


@repos_router.get("/v1/repos/{owner}/{name}/estimate", response_model=dict[str, Any], responses=ERRORS)
def estimate(tracker: TrackerDep, slot: HubSlotDep, path: RepoPathDep,
             knobs: Annotated[EstimateKnobs, Depends(_estimate_knobs)],
             revision: Annotated[str, Query(max_length=255, description="a commit id, branch or tag")] = "main",
             ) -> dict[str, Any]:
    """Parameters and GPU memory to fine-tune and serve, per card, at a revision of any repo."""
    from tracker.core.bounded import json_safe
    from tracker.core.estimate import estimate as run_estimate

    repo_id = path.repo_id()
    with slot():
        config, headers = tracker.config_and_headers(repo_id, tracker.snapshot_of(repo_id, _revision(revision, "revision")))
    if not isinstance(config, dict):
        raise BadRequest(f"{repo_id}@{revision}: config.json does not hold a JSON object")
    result = run_estimate(config, seq_len=knobs.seq_len, lora_rank=knobs.lora_rank,
                          checkpoint_headers=headers or None)
    out: dict[str, Any] = json_safe(result.to_json())
    return out


ops_router = APIRouter(tags=["operations"])


def _hub_check(tracker: Tracker) -> str:
    """Said, never a reason to leave rotation: the API serves from the database while the Hub is away."""
    from tracker.surfaces.status import hub_unreachable

    try:
        outage = tracker.store.health.hub_outage()
    except TrackerError as exc:
        return f"unknown: {error_message(exc)}"  # a database error, said without where the database is
    said = hub_unreachable(outage.polled, outage.unreachable, outage.since, now=tracker.clock())
    return said or "serving"


def _scheduler_check(scheduler_running: Callable[[], bool] | None) -> tuple[str, bool]:
    if scheduler_running is None:
        return "none in this process (tracker serve): only the database is checked", True
    if scheduler_running():
        return "running", True
    return "stopped", False


@ops_router.get("/readyz", response_model=ReadyOut, responses={503: {"model": ReadyOut, "description": "not ready"}})
def readyz(state: StateDep) -> JSONResponse:
    """Ready to serve: the database answers and (in `tracker run`) the scheduler runs. `tracker serve` has no
    scheduler: there, ready means the database answers."""
    checks: dict[str, str] = {}
    ready = True
    try:
        state.tracker.store.db.ping()
        checks["database"] = "ok"
    except TrackerError as exc:
        log.info("readyz: %s", first_line(exc))  # where the database is: for the log, not the client
        checks["database"] = error_message(exc)
        ready = False
    if ready:
        checks["hub"] = _hub_check(state.tracker)
    checks["scheduler"], running = _scheduler_check(state.scheduler_running)
    ready = ready and running
    body = ReadyOut(status="ready" if ready else "not ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


Gauges = dict[str, tuple[str, float]]
Labelled = dict[str, tuple[str, str, dict[str, float]]]


def _gauges(tracker: Tracker) -> tuple[Gauges, Labelled]:
    """The backlog gauges, read from the database now."""
    store = tracker.store
    reads = store.health
    backlog = reads.deliveries()
    fleet = reads.fleet()
    now = tracker.clock()
    oldest = fleet.oldest_pending_listed_at
    gauges: Gauges = {
        "tracker_database_up": ("1 when the database answered this scrape.", 1),
        "tracker_revisions": ("Revisions read and stored (every process's polls).", fleet.revisions_read),
        "tracker_revisions_pending": ("Revisions listed and not read yet.", fleet.revisions_pending),
        "tracker_revisions_pending_oldest_age_seconds": (
            "Age of the oldest revision listed and not read yet (0: none pending).",
            max(0.0, (now - oldest).total_seconds()) if oldest else 0.0),
        "tracker_deliveries_pending": ("Alerts queued or being retried (the outbox backlog).", backlog.pending),
        "tracker_deliveries_dead": ("Alerts given up on (dead letters).", backlog.dead),
    }
    stalest, watched = reads.last_successes(limit=metrics.MAX_REPO_SERIES)
    gauges["tracker_repos_watched"] = ("Repos watched.", watched)
    gauges["tracker_repo_last_success_age_omitted"] = (
        f"Watched repos left out of tracker_repo_last_success_age_seconds (it has the "
        f"{metrics.MAX_REPO_SERIES} stalest).", max(0, watched - len(stalest)))
    labelled: Labelled = {
        "tracker_advisories_live": (
            "Advisories in the store, not withdrawn, by severity.", "severity",
            {sev: float(fleet.advisories_by_severity.get(sev, 0)) for sev in metrics.SEVERITIES}),
        "tracker_repo_last_success_age_seconds": (
            "Time since each repo's last successful poll (since it was watched, when none yet).", "repo",
            {repo_id: max(0.0, (now - when).total_seconds()) for repo_id, when in stalest}),
    }
    return gauges, labelled


@ops_router.get("/metrics", response_class=Response,
                responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                                 "description": "Prometheus text format"}})
def metrics_endpoint(tracker: TrackerDep) -> Response:
    """Prometheus metrics: polls by outcome, Hub answers by status, revisions read, findings and advisories
    by severity, deliveries by outcome, poll lag; the backlogs, read from the database now."""
    from prometheus_client import CONTENT_TYPE_LATEST

    try:
        gauges, labelled = _gauges(tracker)
    except TrackerError as exc:
        log.warning("metrics: the database did not answer: %s", exc)
        gauges = {"tracker_database_up": ("1 when the database answered this scrape.", 0)}
        labelled = {}
    return Response(metrics.exposition(gauges, labelled), media_type=CONTENT_TYPE_LATEST)


writes_router = APIRouter(tags=["writes"], dependencies=[Depends(require_token)],
                          responses={**AUTH_ERRORS, 400: ERRORS[400]})


@writes_router.post("/v1/watch", response_model=WatchOut, status_code=201, responses={404: ERRORS[404]})
def watch(tracker: TrackerDep, body: WatchIn) -> WatchOut:
    """Watch a repo (re-adding one updates its branch and interval); the daemon picks it up within a minute."""
    try:
        repo_id = validate_repo_id(body.repo.strip())
        every = parse_interval(body.every) if body.every else None
    except (ValueError, ConfigError) as exc:
        raise BadRequest(str(exc)) from exc
    branch = _revision(body.branch, "branch")
    if body.check:
        usecases.require_on_hub(tracker, repo_id)  # NotFound: 404 with the close matches, as the CLI says it
    watched = usecases.watch(tracker, repo_id, branch=branch, every=every)
    row = watched.repo
    return WatchOut(repo=row.repo_id, branch=row.branch, every_seconds=row.every_seconds, created=watched.created)


@writes_router.delete("/v1/watch/{owner}/{name}", response_model=RemovedOut, responses={404: ERRORS[404]})
def unwatch(tracker: TrackerDep, owner: Annotated[str, Path(max_length=96)],
            name: Annotated[str, Path(max_length=96)]) -> RemovedOut:
    """Stop watching a repo (its stored revisions go with it)."""
    repo_id = _repo(owner, name)
    usecases.unwatch(tracker, repo_id)  # NotFound: 404
    return RemovedOut(removed=repo_id)


@writes_router.post("/v1/subscriptions", response_model=SubscriptionOut, status_code=201)
def subscribe(tracker: TrackerDep, body: SubscriptionIn) -> SubscriptionOut:
    """Send alerts about a target to Slack or a signed webhook (the webhook's secret is in this answer only)."""
    try:
        wanted = usecases.NewSubscription.to_one_of(body.target, slack=body.slack, webhook=body.webhook,
                                                    min_severity=body.min_severity, categories=body.categories)
        done = usecases.subscribe(tracker, wanted)
    except (ConfigError, TargetRefused) as exc:  # a bad target or category; a private address, a bad URL
        raise BadRequest(first_line(exc)) from exc
    sub = done.subscription
    return SubscriptionOut(id=sub.id, target=sub.target, kind=sub.kind, url=usecases.redacted_url(sub.kind, sub.url),
                           min_severity=sub.min_severity, categories=list(sub.categories),
                           created_at=sub.created_at, secret=done.secret)


@writes_router.delete("/v1/subscriptions/{subscription_id}", response_model=UnsubscribedOut,
                      responses={404: ERRORS[404]})
def unsubscribe(tracker: TrackerDep,
                subscription_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> UnsubscribedOut:
    """Remove a subscription; its deliveries not yet sent are dropped."""
    dropped = usecases.unsubscribe(tracker, subscription_id)  # NotFound: 404
    return UnsubscribedOut(removed=subscription_id, dropped=dropped)
