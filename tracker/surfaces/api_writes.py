"""The API's writes, each needing ``Authorization: Bearer <token>`` (``tracker token create NAME``):
``POST /v1/watch``, ``DELETE /v1/watch/{owner}/{name}``, ``POST /v1/subscriptions``,
``DELETE /v1/subscriptions/{id}``. Without a token, or with a revoked or wrong one: 401.

Each parses its input, calls the service the CLI's command calls (:mod:`tracker.services`), so the same
bad input is refused alike, and shapes the answer.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path

from tracker.adapters.delivery import TargetRefused
from tracker.adapters.settings import parse_interval
from tracker.core.errors import ConfigError, first_line
from tracker.core.model import validate_repo_id
from tracker.services import NewSubscription, Subscriptions, Watching, redacted_url
from tracker.surfaces.api_deps import TrackerDep, require_token
from tracker.surfaces.api_errors import BadRequest
from tracker.surfaces.api_models import (
    AUTH_ERRORS,
    ERRORS,
    RemovedOut,
    SubscriptionIn,
    SubscriptionOut,
    UnsubscribedOut,
    WatchIn,
    WatchOut,
)
from tracker.surfaces.api_repos import repo_of

__all__ = ["writes_router"]

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
    # ConfigError: 400 for a bad branch; NotFound: 404 with the close matches, as the CLI says it
    watched = Watching(tracker).add(repo_id, branch=body.branch, every=every, check=body.check)
    row = watched.repo
    return WatchOut(repo=row.repo_id, branch=row.branch, every_seconds=row.every_seconds, created=watched.created)


@writes_router.delete("/v1/watch/{owner}/{name}", response_model=RemovedOut, responses={404: ERRORS[404]})
def unwatch(tracker: TrackerDep, owner: Annotated[str, Path(max_length=96)],
            name: Annotated[str, Path(max_length=96)]) -> RemovedOut:
    """Stop watching a repo (its stored revisions go with it)."""
    repo_id = repo_of(owner, name)
    Watching(tracker).remove(repo_id)  # NotFound: 404
    return RemovedOut(removed=repo_id)


@writes_router.post("/v1/subscriptions", response_model=SubscriptionOut, status_code=201)
def subscribe(tracker: TrackerDep, body: SubscriptionIn) -> SubscriptionOut:
    """Send alerts about a target to Slack or a signed webhook (the webhook's secret is in this answer only)."""
    try:
        wanted = NewSubscription.to_one_of(body.target, slack=body.slack, webhook=body.webhook,
                                           min_severity=body.min_severity, categories=body.categories)
        done = Subscriptions(tracker).subscribe(wanted)
    except (ConfigError, TargetRefused) as exc:  # a bad target or category; a private address, a bad URL
        raise BadRequest(first_line(exc)) from exc
    sub = done.subscription
    return SubscriptionOut(id=sub.id, target=sub.target, kind=sub.kind, url=redacted_url(sub.kind, sub.url),
                           min_severity=sub.min_severity, categories=list(sub.categories),
                           created_at=sub.created_at, secret=done.secret)


@writes_router.delete("/v1/subscriptions/{subscription_id}", response_model=UnsubscribedOut,
                      responses={404: ERRORS[404]})
def unsubscribe(tracker: TrackerDep,
                subscription_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> UnsubscribedOut:
    """Remove a subscription; its deliveries not yet sent are dropped."""
    dropped = Subscriptions(tracker).unsubscribe(subscription_id)  # NotFound: 404
    return UnsubscribedOut(removed=subscription_id, dropped=dropped)
