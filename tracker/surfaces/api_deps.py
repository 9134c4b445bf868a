"""What the API's routes depend on, as ``Annotated`` dependencies over the app's state.

``create_app`` (:mod:`tracker.surfaces.api`) puts one :class:`ApiState` in ``app.state.api``: at once
when it is handed an open Tracker, or in its lifespan when it opens the Tracker itself. Routes name
what they need (``tracker: TrackerDep``, ``reads: PagesDep``, ``slot: HubSlotDep``...) and never
reach the state any other way, so every router is a module-level ``APIRouter``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import State

from tracker.app import Tracker
from tracker.core.findings.rules import SeverityRules
from tracker.pipeline.ports import Pages
from tracker.services import ApiTokens
from tracker.surfaces.api_errors import Busy, Unauthorized

HubSlot = Callable[[], AbstractContextManager[None]]


class OnDemandGate:
    """How many reads from the Hub the API runs at once for its callers: ``total`` over all clients
    (``[api] on_demand_reads``), ``per_client`` for one client address (``[api] on_demand_per_client``).

    Diffs and estimates read files (a tokenizer can be tens of MiB, twice), an unwatched repo's
    revisions list commits; none of it is stored. A request past either bound is answered 429 at
    once rather than queued, so eight parallel diffs cost what one does, never eight tokenizers'
    worth of memory and Hub traffic. Behind a proxy every client has the proxy's address: then
    ``per_client`` bounds them all together.
    """

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}

    @contextmanager
    def slot(self, client: str) -> Iterator[None]:
        with self._lock:
            if sum(self._running.values()) >= self.total:
                raise Busy(f"busy: {self.total} reads from the Hub for other requests are running "
                           "([api] on_demand_reads); try again shortly")
            if self._running.get(client, 0) >= self.per_client:
                raise Busy(f"busy: this client already has {self.per_client} read(s) from the Hub running "
                           "([api] on_demand_per_client); wait for it")
            self._running[client] = self._running.get(client, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._running[client] -= 1
                if not self._running[client]:
                    del self._running[client]


@dataclass(frozen=True)
class ApiState:
    """The app's state: the Tracker and the pieces built once per app."""

    tracker: Tracker
    page_size: int  # advisories per page of /v1/query
    webhook_secret: str | None  # None: POST /hooks/hub answers 404
    poll_soon: Callable[[str], None]  # how a Hub webhook asks for a poll
    scheduler_running: Callable[[], bool] | None  # None: no scheduler in this process (tracker serve)
    gate: OnDemandGate
    tokens: ApiTokens
    pages: Pages

    @classmethod
    def of(cls, app_state: State) -> ApiState:
        state = getattr(app_state, "api", None)
        if not isinstance(state, ApiState):
            raise RuntimeError("the app's Tracker is not open: serve the app with its lifespan")
        return state

    def token_name(self, token: str) -> str | None:
        """The name of a valid token, None for an unknown or revoked one."""
        return self.tokens.name_of(token)


# Trivial dependencies are ``async``: a plain ``def`` would cost a hop to the threadpool per request.


async def api_state(request: Request) -> ApiState:
    return ApiState.of(request.app.state)


StateDep = Annotated[ApiState, Depends(api_state)]


async def _tracker(state: StateDep) -> Tracker:
    return state.tracker


async def _pages(state: StateDep) -> Pages:
    return state.pages


async def _finding_rules(state: StateDep) -> SeverityRules:
    """The severity rules in force here (the config's [severity] overrides included)."""
    rules = getattr(getattr(state.tracker, "processor", None), "rules", None)
    return rules if isinstance(rules, SeverityRules) else SeverityRules.default()


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def _hub_slot(request: Request, state: StateDep) -> HubSlot:
    """A slot for reads from the Hub on this client's behalf (:class:`OnDemandGate`), taken with ``with slot():``."""
    return partial(state.gate.slot, client_of(request))


TrackerDep = Annotated[Tracker, Depends(_tracker)]
PagesDep = Annotated[Pages, Depends(_pages)]
RulesDep = Annotated[SeverityRules, Depends(_finding_rules)]
HubSlotDep = Annotated[HubSlot, Depends(_hub_slot)]

# -- auth -----------------------------------------------------------------------------------------------

bearer = HTTPBearer(auto_error=False, scheme_name="token",
                    description="A token made with `tracker token create NAME`, sent as `Authorization: Bearer …`.")


def require_token(credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
                  state: StateDep) -> str:
    """The dependency of every write: the token's name, or 401 (a plain ``def``: it reads the database)."""
    if credentials is None:
        raise Unauthorized("this needs a bearer token: make one with `tracker token create NAME`")
    name = state.token_name(credentials.credentials)
    if name is None:
        raise Unauthorized("invalid or revoked token")
    return name
