"""The feed routes: ``/feeds/{owner}/{name}.atom|.json``, ``/feeds/{owner}.atom|.json``, ``/feeds/all.atom|.json``.

Filtered with ``?min_severity=`` and ``?category=`` (repeatable, or comma-separated). The documents,
their ETags and the conditional GET rules are :mod:`tracker.adapters.feeds`; links point at
``[api] public_url`` when set, else at the request's own base URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from email.utils import format_datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from tracker.adapters.delivery.plan import CATEGORIES
from tracker.adapters.feeds import FEED_LIMIT, ID_PREFIX, FeedHead, feed_etag, not_modified, render_feed
from tracker.app import Tracker
from tracker.core.errors import NotFound
from tracker.core.model import AdvisoryRow, Severity, validate_repo_id
from tracker.services import Advisories, FeedWanted
from tracker.surfaces.api_deps import TrackerDep
from tracker.surfaces.api_errors import BadRequest

__all__ = ["feeds_router"]


@dataclass(frozen=True)
class FeedFilters:
    """A feed's ``?min_severity=`` and ``?category=`` as given."""

    min_severity: str | None
    categories: list[str]


async def _feed_filters(min_severity: str | None = None, category: list[str] = Query(default=[])) -> FeedFilters:
    return FeedFilters(min_severity, category)


FiltersDep = Annotated[FeedFilters, Depends(_feed_filters)]


@dataclass(frozen=True)
class FeedScope:
    """Which advisories a feed shows: one repo's, one owner's, or all (both None), and the filters."""

    title: str  # "acme/model", "acme", "all watched repos"
    fmt: str
    repo_id: str | None
    owner: str | None
    filters: FeedFilters

    @property
    def min_severity(self) -> str | None:
        return self.filters.min_severity

    def threshold(self) -> Severity | None:
        if not self.min_severity:
            return None
        try:
            return Severity(self.min_severity.strip().lower())
        except ValueError:
            raise BadRequest(f"invalid min_severity {self.min_severity!r}: expected one of "
                             f"{', '.join(s.value for s in Severity)}") from None

    def wanted(self) -> set[str]:
        wanted = {c.strip().lower() for value in self.filters.categories for c in value.split(",") if c.strip()}
        unknown = sorted(wanted - set(CATEGORIES))
        if unknown:
            raise BadRequest(f"unknown category {unknown[0]!r}: expected one of {', '.join(CATEGORIES)}")
        return wanted


def _items(tracker: Tracker, scope: FeedScope, threshold: Severity | None, wanted: set[str]) -> list[AdvisoryRow]:
    return Advisories(tracker).feed(FeedWanted(repo_id=scope.repo_id, owner=scope.owner, min_severity=threshold,
                                               categories=frozenset(wanted), limit=FEED_LIMIT))


def _serve(request: Request, tracker: Tracker, scope: FeedScope) -> Response:
    if scope.fmt not in ("atom", "json"):
        raise NotFound("feeds end in .atom or .json")
    threshold = scope.threshold()
    items = _items(tracker, scope, threshold, scope.wanted())
    query = "&".join(f"{k}={v}" for k, v in sorted(request.query_params.multi_items()))
    base = (tracker.settings.public_url or str(request.base_url)).rstrip("/")
    self_url = f"{base}{request.url.path}" + (f"?{query}" if query else "")
    etag = feed_etag(scope.fmt, query, base, items)
    last_modified = max((i.modified for i in items), default=None)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if last_modified is not None:
        headers["Last-Modified"] = format_datetime(last_modified.astimezone(UTC), usegmt=True)
    if not_modified(request.headers.get("if-none-match"), request.headers.get("if-modified-since"), etag,
                    last_modified):
        return Response(status_code=304, headers=headers)
    # The page a feed mirrors: the repo's, the owner's, or the site's.
    page = f"{base}/repos/{scope.repo_id}" if scope.repo_id else f"{base}/repos/{scope.owner}" if scope.owner else base
    head = FeedHead(feed_id=f"{ID_PREFIX}feed:{request.url.path}" + (f"?{query}" if query else ""),
                    title=f"upstream-tracker: {scope.title}"
                          + (f" ({scope.min_severity} and above)" if threshold else ""),
                    self_url=self_url, home=base, page=page)
    body, media_type = render_feed(items, scope.fmt, head)
    return Response(body, media_type=media_type, headers=headers)


# Plain `def` handlers: FastAPI runs them in its threadpool, off the event loop.
feeds_router = APIRouter()


@feeds_router.get("/feeds/{owner}/{filename}")
def repo_feed(request: Request, tracker: TrackerDep, owner: str, filename: str, filters: FiltersDep) -> Response:
    name, _, fmt = filename.rpartition(".")
    try:
        repo_id = validate_repo_id(f"{owner}/{name}")
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    return _serve(request, tracker, FeedScope(repo_id, fmt, repo_id=repo_id, owner=None, filters=filters))


@feeds_router.get("/feeds/{filename}")
def owner_feed(request: Request, tracker: TrackerDep, filename: str, filters: FiltersDep) -> Response:
    owner, _, fmt = filename.rpartition(".")
    if owner == "all":
        return _serve(request, tracker, FeedScope("all watched repos", fmt, repo_id=None, owner=None, filters=filters))
    try:
        validate_repo_id(f"{owner}/x")
    except ValueError:
        raise BadRequest(f"invalid owner {owner!r}") from None
    return _serve(request, tracker, FeedScope(owner, fmt, repo_id=None, owner=owner, filters=filters))
