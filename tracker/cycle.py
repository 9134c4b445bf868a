"""The daemon's poll cycle: which due repos this process checks now, and how cheaply.

Every ``tick`` (a couple of seconds, from the daemon's APScheduler) claims due repos from the
database (:class:`tracker.store.schedule.PollQueue`): the database decides who works, so any
number of replicas on one PostgreSQL share the watch list and a repo is polled by one of them at
a time. What a claimed repo costs on the Hub:

* repos known unchanged-so-far on ``main`` whose owner has several due repos are checked
  together by one listing of the owner's models with their head shas
  (``GET /api/models?author=…&expand=sha``, :meth:`HubClient.owner_heads`), one ``api``
  request per page instead of one ``resolvers`` HEAD per repo; the listing's pages are capped
  below the number of repos it replaces, so it is never dearer. A repo whose head did not move
  costs nothing more; one that moved (or is missing from the listing) is polled as usual;
* every other repo (never read, asked for by a Hub webhook, not on ``main``, gone, renamed, with
  revisions still pending, or alone in its owner's group) is polled by the :class:`Poller`, which
  starts with one HEAD.

Work runs on a small thread pool (``[poll] workers``), so a slow or hanging repo holds one
worker until its per-poll deadline (``hub.poll_deadline``) and never the others. Claims stop
while the Hub budget (:class:`tracker.hub.budget.HubBudget`) has no room, which spreads a large
watch list over the window instead of bursting, and :meth:`Cycle.check_budget` says (a WARNING)
when the schedule needs more than the budget allows.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from tracker import metrics
from tracker.errors import HubRateLimited, NotWatched, TrackerError, first_line
from tracker.hub.budget import WINDOW_SECONDS, HubBudget
from tracker.model import PollOutcome, RepoState
from tracker.polling import LEASE_MARGIN_SECONDS, Poller, PollResult, _dead_here
from tracker.ports import Clock, HubReader
from tracker.settings import Settings, clamp_interval
from tracker.store import SqlStore
from tracker.store.schedule import DueRepo, PollQueue

log = logging.getLogger(__name__)

LISTING_DEADLINE = 120.0  # wall clock for one owner listing, all its pages
ERROR_RETRY = 600.0  # a poll that failed is tried again this soon (or at its interval, if sooner)
DEAD_LEASE_SWEEP = 10.0  # seconds between looks for leases of killed processes of this host


@dataclass
class TickReport:
    """What one tick handed out."""

    claimed: int = 0
    listings: int = 0  # owner listings started
    polls: int = 0  # repos handed to the Poller
    released: int = 0  # claimed but given back (no budget or no worker free)


def _checkable(due: DueRepo) -> bool:
    """Whether an owner listing can tell that this repo did not change."""
    return (due.state == RepoState.ACTIVE and due.hub_uid is not None and due.last_seen_sha is not None
            and due.branch == "main" and due.renamed_to is None and not due.requested and bool(due.owner))


class Cycle:
    """Claims due repos and checks them: by owner listings where cheaper, else by polling each."""

    def __init__(self, settings: Settings, store: SqlStore, hub: HubReader, poller: Poller, *, clock: Clock,
                 budget: HubBudget | None = None, workers: int | None = None,
                 on_result: Callable[[PollResult], None] | None = None,
                 rng: Callable[[], float] = random.random, batch: int = 1000) -> None:
        self.settings = settings
        self.store = store
        self.hub = hub
        self.poller = poller
        self.clock = clock
        self.queue = PollQueue(store)
        self.budget = budget or HubBudget(settings.hub_budget_api, settings.hub_budget_resolvers)
        self.workers = workers or settings.poll_workers
        self.on_result = on_result or (lambda _result: None)
        self.rng = rng
        self.batch = batch
        self.owner = poller.owner
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="poll")
        self._inflight: set[int] = set()
        self._polls_queued = 0
        self._lock = threading.Lock()
        self._pages: dict[str, int] = {}  # owner (lower case) -> pages its last listing needed
        self._webhook_owners = {o.lower() for o in settings.hub_webhook_owners}
        self._last_sweep = 0.0
        self._over_budget: bool | None = None
        hub.on_request = self.budget.spend
        hub.on_rate_limited = self.budget.exhausted

    # -- the schedule -------------------------------------------------------------------------

    def interval(self, repo_id: str, every_seconds: float | None) -> float:
        """Seconds between polls of a repo; a safety net only when its owner's Hub webhooks are set up."""
        every = clamp_interval(every_seconds or self.settings.poll_every)
        owner = repo_id.split("/", 1)[0].lower() if "/" in repo_id else ""
        if owner in self._webhook_owners:
            every = max(every, self.settings.hub_webhook_safety_net)
        return every

    def next_at(self, due: DueRepo, now: datetime, spread: float) -> datetime:
        """When ``due`` is next due: its interval plus jitter (``spread`` in 0..1, one value per owner group)."""
        every = self.interval(due.repo_id, due.every_seconds)
        return now + timedelta(seconds=every + spread * min(self.settings.poll_jitter, every / 2))

    # -- a tick -------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        """Claim what is due and hand it to the workers; returns at once (the work runs on the pool)."""
        report = TickReport()
        if self.poller.stopping.is_set():
            return report
        now = self.clock()
        if time.monotonic() - self._last_sweep >= DEAD_LEASE_SWEEP:
            self._last_sweep = time.monotonic()
            freed = self.queue.free_dead_leases(_dead_here)
            if freed:
                log.info("took over %d repo lease(s) of stopped processes", freed)
        until = now + timedelta(seconds=self.settings.hub_poll_deadline + LEASE_MARGIN_SECONDS)
        room_api, room_res = self.budget.room("api"), self.budget.room("resolvers")
        with self._lock:
            free_workers = max(0, 2 * self.workers - self._polls_queued)
        # Repos that need a poll of their own: at most what the workers can start soon, so that
        # replicas share them, and within the resolvers budget (a poll starts with one HEAD).
        polls = self.queue.claim_due(self.owner, now=now, until=until, checkable=False,
                                     limit=min(free_workers, int(max(room_res, 0.0))))
        # Repos an owner listing may check: as many as the budgets could check now.
        checks = self.queue.claim_due(self.owner, now=now, until=until, checkable=True,
                                      limit=min(self.batch, int(max(room_res, 0.0) + 50 * max(room_api, 0.0))))
        report.claimed = len(polls) + len(checks)
        pending = self.queue.with_pending([d.pk for d in checks])
        by_owner: dict[str, list[DueRepo]] = defaultdict(list)
        for due in checks:
            if due.pk in pending or not _checkable(due):
                polls.append(due)
            else:
                by_owner[due.owner.lower()].append(due)
        give_back: list[DueRepo] = []
        for owner, group in by_owner.items():
            pages = self._pages.get(owner, 1)
            if len(group) < 2 or pages >= len(group):
                polls.extend(group)  # a HEAD each is as cheap
            elif self.budget.room("api") >= pages:
                self.budget.reserve("api", pages)
                self._submit(group, self._check_owner, owner, group, pages)
                report.listings += 1
            elif self.budget.room("resolvers") >= len(group):
                polls.extend(group)  # the api bucket is short: HEADs instead
            else:
                give_back.extend(group)
        for due in polls:
            if self.budget.room("resolvers") >= 1:
                self.budget.reserve("resolvers", 1)
                with self._lock:
                    self._polls_queued += 1
                self._submit([due], self._poll, due, True)
                report.polls += 1
            else:
                give_back.append(due)
        self.queue.release([d.pk for d in give_back], self.owner)
        report.released = len(give_back)
        return report

    def _submit(self, dues: list[DueRepo], fn: Callable[..., None], *args: object) -> None:
        with self._lock:
            self._inflight.update(d.pk for d in dues)
        self.pool.submit(fn, *args)

    def _done(self, due: DueRepo) -> None:
        with self._lock:
            self._inflight.discard(due.pk)

    def in_flight(self) -> int:
        with self._lock:
            return len(self._inflight)

    # -- the work (pool threads) ----------------------------------------------------------------

    def _check_owner(self, owner: str, group: list[DueRepo], pages: int) -> None:
        """One listing of ``owner``'s models checks the group; repos that moved are polled."""
        try:
            try:
                with self.hub.deadline(min(LISTING_DEADLINE, self.settings.hub_poll_deadline)):
                    listing = self.hub.owner_heads(group[0].owner, max_pages=len(group) - 1)
            finally:
                self.budget.unreserve("api", pages)
        except HubRateLimited as exc:
            log.warning("listing the models of %s: %s; its %d repo(s) wait for the budget", owner, exc, len(group))
            self.queue.release([d.pk for d in group], self.owner)
            for due in group:
                self._done(due)
            return
        except TrackerError as exc:  # the listing failed: check each repo on its own
            log.warning("listing the models of %s failed (%s); polling its %d repo(s) one by one", owner,
                        first_line(exc), len(group))
            for due in group:
                self._run_poll(due, reserved=False)
            return
        except Exception:
            log.exception("listing the models of %s failed", owner)
            for due in group:
                self._run_poll(due, reserved=False)
            return
        found = all(d.repo_id.lower() in listing.heads for d in group)
        # Pages this owner's check needs: more than the cap when the walk stopped short of a watched
        # repo (then HEADs are cheaper for this owner from now on).
        self._pages[owner] = listing.pages if listing.complete or found else listing.pages + 1
        now = self.clock()
        spread = self.rng()
        unchanged = [d for d in group if listing.heads.get(d.repo_id.lower()) == d.last_seen_sha]
        moved = [d for d in group if listing.heads.get(d.repo_id.lower()) != d.last_seen_sha]
        try:
            self.queue.finish_unchanged(unchanged, self.owner, next_at=lambda d: self.next_at(d, now, spread),
                                        now=now)
        except TrackerError as exc:
            log.warning("could not record the check of %s's repos: %s", owner, exc)
            self.queue.release([d.pk for d in unchanged], self.owner)
        for due in unchanged:
            self._done(due)
            metrics.poll_done(PollOutcome.UNCHANGED.value)
            self.on_result(PollResult(repo=due.repo_id, status=PollOutcome.UNCHANGED))
        for due in moved:
            self._run_poll(due, reserved=False)

    def _poll(self, due: DueRepo, reserved: bool) -> None:
        with self._lock:
            self._polls_queued -= 1
        self._run_poll(due, reserved=reserved)

    def _run_poll(self, due: DueRepo, *, reserved: bool) -> None:
        """Poll one repo, schedule its next poll, free its lease; never raises."""
        try:
            if self.poller.stopping.is_set():
                self.queue.release([due.pk], self.owner)
                return
            try:
                result = self.poller.poll_repo(due.repo_id, release=False)
            except NotWatched:
                return
            except Exception:  # a bug must cost this repo's poll only
                log.exception("poll of %s failed", due.repo_id)
                self.queue.release([due.pk], self.owner)
                return
            finally:
                if reserved:
                    self.budget.unreserve("resolvers", 1)
            if result.status == PollOutcome.BUSY:
                self.queue.release([due.pk], self.owner)  # only if still ours; it stays due
            else:
                self.queue.finish(due, self.owner, next_at=self._after(due, result), now=self.clock())
            self.on_result(result)
        except Exception:
            log.exception("poll of %s: could not record it", due.repo_id)
        finally:
            self._done(due)

    def _after(self, due: DueRepo, result: PollResult) -> datetime:
        now = self.clock()
        if result.status == PollOutcome.DEFERRED:
            row = self.store.get_repo(due.repo_id)
            if row is not None and row.defer_until is not None and row.defer_until > now:
                return row.defer_until
        if result.status == PollOutcome.ERROR:
            every = self.interval(due.repo_id, due.every_seconds)
            return now + timedelta(seconds=min(every, ERROR_RETRY))
        return self.next_at(due, now, self.rng())

    # -- budget -------------------------------------------------------------------------------

    def needs(self) -> tuple[float, float]:
        """Requests per 5 minutes that checking the watch list on schedule needs: (api, resolvers).

        A lower bound: it counts the checks of unchanged repos (owner listings where an owner
        has several repos on ``main``, a HEAD each otherwise), not the reads of new revisions.
        """
        groups: dict[str, list[float]] = defaultdict(list)
        api = resolvers = 0.0
        for repo_id, branch, every in self.queue.schedule():
            seconds = self.interval(repo_id, every)
            owner = repo_id.split("/", 1)[0].lower() if "/" in repo_id else ""
            if branch == "main" and owner:
                groups[owner].append(seconds)
            else:
                resolvers += WINDOW_SECONDS / seconds
        for owner, intervals in groups.items():
            pages = self._pages.get(owner, 1)
            if len(intervals) >= 2 and pages < len(intervals):
                api += pages * WINDOW_SECONDS / min(intervals)
            else:
                resolvers += sum(WINDOW_SECONDS / s for s in intervals)
        return api, resolvers

    def check_budget(self) -> bool:
        """Log a WARNING when the schedule needs more than the budget (once, until that changes)."""
        api, resolvers = self.needs()
        pace_api, pace_res = self.budget.pace("api"), self.budget.pace("resolvers")
        over = api > pace_api or resolvers > pace_res
        if over and self._over_budget is not True:
            stretch = max(api / pace_api, resolvers / pace_res)
            log.warning(
                "hub budget: checking the watch list on schedule needs about %.0f api and %.0f resolvers requests "
                "per 5 min, more than the %.0f and %.0f the budget spreads over 5 min ([hub] budget_api_per_5min = "
                "%.0f, budget_resolvers_per_5min = %.0f, less a tenth kept for bursts): polls will run about %.1fx "
                "later than scheduled",
                api, resolvers, pace_api, pace_res, self.budget.per_window("api"),
                self.budget.per_window("resolvers"), stretch)
        elif not over and self._over_budget:
            log.info("hub budget: the schedule fits the budget again (about %.0f api and %.0f resolvers requests "
                     "per 5 min)", api, resolvers)
        self._over_budget = over
        return not over

    # -- lifecycle ----------------------------------------------------------------------------

    def stop(self, wait: bool = True) -> None:
        """Finish the polls in hand (the Poller stops between revisions once told), drop the rest."""
        self.poller.stopping.set()
        self.pool.shutdown(wait=wait, cancel_futures=True)
        if wait:
            try:
                self.queue.release_all(self.owner)  # what was claimed but not started is free at once
            except TrackerError as exc:
                log.warning("could not free this process's repo leases: %s", exc)


__all__ = ["Cycle", "TickReport"]
