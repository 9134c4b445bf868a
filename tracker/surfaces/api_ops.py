"""The API's operations: ``GET /readyz`` (the database answers and, in ``tracker run``, the scheduler runs;
``tracker serve`` has no scheduler, so there it means the database answers) and ``GET /metrics``
(Prometheus text format, tracker/adapters/metrics.py, with the backlog gauges read from the database)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from tracker.adapters import metrics
from tracker.app import Tracker
from tracker.core.errors import TrackerError, first_line
from tracker.services import Polling
from tracker.surfaces.api_deps import StateDep, TrackerDep
from tracker.surfaces.api_errors import error_message
from tracker.surfaces.api_models import ReadyOut

__all__ = ["ops_router"]

log = logging.getLogger("tracker.api_repos")  # the name operators filter logs by, not the module path

ops_router = APIRouter(tags=["operations"])


def _hub_check(tracker: Tracker) -> str:
    """Said, never a reason to leave rotation: the API serves from the database while the Hub is away."""
    from tracker.surfaces.status import hub_unreachable

    try:
        outage = Polling(tracker).hub_outage()
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
        Polling(state.tracker).ping()
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
    figures = Polling(tracker).figures(max_repos=metrics.MAX_REPO_SERIES)
    backlog, fleet, stalest, watched = figures.deliveries, figures.fleet, figures.stalest, figures.watched
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


