"""The daemon's poll cycle: which due repos this process checks now, and how cheaply.

Every ``tick`` (a couple of seconds, from the daemon's APScheduler) claims due repos from the
database (the ``Schedule`` port, :class:`tracker.adapters.store.schedule.ScheduleStore`): the database decides who works, so any
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

Each repo gets a check of its own (a HEAD, or an owner listing that lists it: ``repos.last_checked``) at
least once per its interval, stretched evenly when the budget cannot hold them all
(:meth:`Cycle.check_budget`): only such a check sees a deletion, a gating, a rename or a switch to
private. Between them, the Hub-wide change listing (:mod:`tracker.pipeline.changes`) vouches for a
repo's content; the daemon walks it every ``[poll] listen_every``, so a push is read within about
that long. A tick covers a :class:`Scope`: the daemon's (every due repo), or one ``tracker poll`` run's
(:class:`tracker.pipeline.poll_run.PollRun`), whose named repos are each checked with a HEAD of their own.

Work runs on a small thread pool (``[poll] workers``), so a slow or hanging repo holds one
worker until its per-poll deadline (``hub.poll_deadline``) and never the others. Claims stop
while the Hub budget (the ``Budget`` port, :class:`tracker.adapters.hub.budget.HubBudget`) has no room, which spreads a large
watch list over the window instead of bursting, and :meth:`Cycle.check_budget` says (a WARNING)
when the schedule needs more than the budget allows.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from tracker.core.errors import HubRateLimited, NotWatched, TrackerError, first_line
from tracker.core.hub_types import WINDOW_SECONDS
from tracker.core.intervals import clamp_interval
from tracker.core.model import PollOutcome
from tracker.core.store_types import DueRepo
from tracker.pipeline.changes import ChangeFeed, ListingState
from tracker.pipeline.polling import (
    LEASE_MARGIN_SECONDS,
    Poller,
    PollResult,
    dead_here,
)
from tracker.pipeline.ports import Budget, Clock, HubReader, PipelineSettings, Schedule, Store
from tracker.pipeline.watchrules import RuleKeeper

log = logging.getLogger("tracker.cycle")  # the name operators filter logs by, not the module path

LISTING_DEADLINE = 120.0  # wall clock for one owner listing, all its pages
ERROR_RETRY = 600.0  # a poll that failed is tried again this soon (or at its interval, if sooner)
DEAD_LEASE_SWEEP = 10.0  # seconds between looks for leases of killed processes of this host
IDLE_WAIT = 0.5  # seconds a `tracker poll` run waits between looks while polls are in flight
WALK_EVERY = 60.0  # with `[poll] listen_every = "0s"`, the daemon walks the change listing at most this often
CURRENT = frozenset({PollOutcome.UNCHANGED, PollOutcome.NEW, PollOutcome.BASELINE})  # a poll that read the head


@dataclass
class TickReport:
    """What one tick handed out."""

    claimed: int = 0
    listings: int = 0  # owner listings started
    polls: int = 0  # repos handed to the Poller
    released: int = 0  # claimed but given back (no budget or no worker free)
    vouched: int = 0  # found unchanged by the Hub-wide change listing, at no request of their own
    walk_pages: int = 0  # pages of the Hub-wide change listing read in this tick


class Scope:
    """What a tick covers and whom it tells: the daemon's, every due repo (its own :class:`Cycle`'s ``daemon``).

    One `tracker poll` run is another scope (:class:`tracker.pipeline.poll_run.PollRun`), over the same cycle.
    """

    only: set[int] | None = None  # the claims are among these repos (None: any due repo)
    each_on_its_own = False  # every repo checked with a HEAD of its own, vouched for by no walk
    backfill = 0  # older revisions each poll may read
    progress: Callable[[int], object] | None = None  # told as a poll reads revisions

    def __init__(self, cycle: Cycle) -> None:
        self.cycle = cycle

    def start(self, now: datetime) -> None:
        """Before each tick: one due watch rule is evaluated (within the api budget)."""
        self.cycle.evaluate_rules(now, limit=1)

    def walk_due(self, state: ListingState, now: datetime) -> bool:
        """Whether this tick walks the Hub-wide change listing (:meth:`Cycle.walk_due`)."""
        return self.cycle.walk_due(state, now)

    def vouch_since(self, now: datetime) -> datetime:
        """The walks since then vouch for a repo's content: the daemon's recent ones."""
        return now - timedelta(seconds=self.cycle.vouch_for())

    def told(self, result: PollResult) -> None:
        """A repo's result (from a pool thread): the cycle's ``on_result`` (the daemon's log)."""
        self.cycle.on_result(result)


class Cycle:
    """Claims due repos and checks them: by owner listings where cheaper, else by polling each."""

    # Keyword-only past the four collaborators: the composition root hands each part by name, tests their seams.
    def __init__(self, settings: PipelineSettings, store: Store, hub: HubReader, poller: Poller, *,  # noqa: PLR0913
                 clock: Clock, budget: Budget, queue: Schedule, workers: int | None = None,
                 on_result: Callable[[PollResult], None] | None = None,
                 rng: Callable[[], float] = random.random, batch: int = 1000,
                 sleep: Callable[[float], object] | None = None) -> None:
        """``budget`` is the one the Hub client spends (make_tracker hands it to both), so claims stop
        when the client's requests have used it up. ``sleep`` is how `tracker poll` waits for the budget
        to refill: by default on the poller's stop event, so a stop cuts the wait short."""
        self.settings = settings
        self.store = store
        self.hub = hub
        self.poller = poller
        self.metrics = poller.metrics
        self.clock = clock
        self.queue = queue
        self.budget = budget
        self.workers = workers or settings.poll.workers
        self.on_result = on_result or (lambda _result: None)
        self.rng = rng
        self.batch = batch
        self.owner = poller.owner
        self.sleep = sleep or poller.stopping.wait
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="poll")
        self._inflight: set[int] = set()
        self._polls_queued = 0
        self._lock = threading.Lock()
        self.progressed = threading.Event()  # a poll started or finished: a `tracker poll` run looks again
        self._pages: dict[str, int] = {}  # owner (lower case) -> pages its last listing needed
        self._webhook_owners = {o.lower() for o in settings.hub.webhook_owners}
        self._last_sweep = 0.0
        self._over_budget: bool | None = None
        self.changes = ChangeFeed(store, hub)
        self.rules = RuleKeeper(store, hub, every=clamp_interval(settings.poll.every))
        self._last_walk_at: datetime | None = None  # when this process last walked (or tried to), our clock
        self._stretch = 1.0  # every interval times this: what the budget allows (check_budget)
        self.daemon = Scope(self)  # what the daemon's ticks cover: every due repo

    # -- the schedule -------------------------------------------------------------------------

    def interval(self, repo_id: str, every_seconds: float | None) -> float:
        """Seconds between polls of a repo; a safety net only when its owner's Hub webhooks are set up."""
        every = clamp_interval(every_seconds or self.settings.poll.every)
        owner = repo_id.split("/", 1)[0].lower() if "/" in repo_id else ""
        if owner in self._webhook_owners:
            every = max(every, self.settings.hub.webhook_safety_net)
        return every

    def own_interval(self, repo_id: str, every_seconds: float | None) -> float:
        """Seconds between a repo's checks of its own: its interval, stretched when the budget cannot hold them all."""
        return self.interval(repo_id, every_seconds) * self._stretch

    def next_at(self, due: DueRepo, now: datetime, spread: float) -> datetime:
        """When ``due`` is next due: its interval (stretched) plus jitter (``spread`` in 0..1, one value per owner group)."""
        every = self.own_interval(due.repo_id, due.every_seconds)
        return now + timedelta(seconds=every + spread * min(self.settings.poll.jitter, every / 2))

    def own_check_due(self, due: DueRepo, now: datetime) -> bool:
        """Whether ``due`` needs a check of its own (a HEAD, an owner listing): never had one, or not within its interval.

        Only such a check sees a deletion, a gating, a rename or a switch to private: the Hub-wide
        change listing lists what changed, and a repo that is gone is simply not listed.
        """
        if due.last_checked is None:
            return True
        return (now - due.last_checked).total_seconds() >= self.own_interval(due.repo_id, due.every_seconds)

    def _vouched_next_at(self, due: DueRepo, now: datetime, spread: float) -> datetime:
        """When a repo the change listing vouched for is next due: when its own check is."""
        checked = due.last_checked or now
        every = self.own_interval(due.repo_id, due.every_seconds)
        return max(now, checked) + timedelta(seconds=max(0.0, every - (now - checked).total_seconds())
                                             + spread * min(self.settings.poll.jitter, every / 2))

    # -- a tick -------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        """The daemon's tick: claim what is due and hand it to the workers; returns at once (the work runs on
        the pool)."""
        return self.tick_for(self.daemon)

    def tick_for(self, scope: Scope) -> TickReport:
        """One tick over what ``scope`` covers (the daemon's, or a `tracker poll` run's); returns at once."""
        report = TickReport()
        if self.poller.stopping.is_set():
            return report
        now = self.clock()
        self._sweep_dead_leases()
        scope.start(now)
        state = self._maybe_walk(now, report, scope)
        since = scope.vouch_since(now)
        vouch = None if scope.each_on_its_own else self.changes.vouch_epoch(state, since=since)
        epoch = state.epoch
        polls, checks = self._claim(now, vouch, scope.only)
        report.claimed = len(polls) + len(checks)
        by_owner, vouched = self._sort_checks(checks, polls, state, vouch, now=now, scope=scope)
        self._finish_vouched(vouched, vouch, now, scope)
        report.vouched = len(vouched)
        give_back = self._dispatch(by_owner, polls, epoch, report, scope)
        self.queue.release([d.pk for d in give_back], self.owner)
        report.released = len(give_back)
        return report

    def _sweep_dead_leases(self) -> None:
        if time.monotonic() - self._last_sweep >= DEAD_LEASE_SWEEP:
            self._last_sweep = time.monotonic()
            freed = self.queue.free_dead_leases(dead_here)
            if freed:
                log.info("took over %d repo lease(s) of stopped processes", freed)

    def _claim(self, now: datetime, vouch: int | None,
               only: set[int] | None) -> tuple[list[DueRepo], list[DueRepo]]:
        """The due repos this tick claims: (to poll each, that a listing may check)."""
        until = now + timedelta(seconds=self.settings.hub.poll_deadline + LEASE_MARGIN_SECONDS)
        room_api, room_res = self.budget.room("api"), self.budget.room("resolvers")
        with self._lock:
            free_workers = max(0, 2 * self.workers - self._polls_queued)
        # Repos that need a poll of their own: at most what the workers can start soon, so that
        # replicas share them, and within the resolvers budget (a poll starts with one HEAD).
        polls = self.queue.claim_due(self.owner, now=now, until=until, checkable=False, only=only,
                                     limit=min(free_workers, int(max(room_res, 0.0))))
        # Repos a listing may check: as many as the budgets could check now (all of them, when the
        # change listing vouches for them: that costs nothing more).
        limit = self.batch if vouch is not None else min(self.batch, int(max(room_res, 0.0) + 50 * max(room_api, 0.0)))
        checks = self.queue.claim_due(self.owner, now=now, until=until, checkable=True, only=only,
                                      limit=limit)
        return polls, checks

    def _sort_checks(self, checks: list[DueRepo], polls: list[DueRepo], state: ListingState,
                     vouch: int | None, *, now: datetime, scope: Scope) -> tuple[dict[str, list[DueRepo]], list[DueRepo]]:
        """Split the checkable repos: to poll (appended to ``polls``), by owner listing, or vouched for.

        Named repos are each polled (a HEAD of their own). The change listing vouches only for the
        content of a repo whose own check is not due yet (:meth:`own_check_due`).
        """
        pending = self.queue.with_pending([d.pk for d in checks])
        by_owner: dict[str, list[DueRepo]] = defaultdict(list)
        vouched: list[DueRepo] = []
        for due in checks:
            if scope.each_on_its_own or due.pk in pending or not due.checkable:
                polls.append(due)
            elif (not self.own_check_due(due, now)
                  and self.changes.vouches(state, vouch, due.listing_epoch, due.last_polled_at)):
                vouched.append(due)
            else:
                by_owner[due.owner.lower()].append(due)
        return by_owner, vouched

    def _dispatch(self, by_owner: dict[str, list[DueRepo]], polls: list[DueRepo], epoch: int,
                  report: TickReport, scope: Scope) -> list[DueRepo]:
        """Hand owner listings, then polls, to the workers within the budget; what did not fit.

        Every reservation is taken before any work reaches the pool: a worker that starts at once
        spends its requests while its reservation still stands, and would otherwise crowd out the
        rest of this tick's admissions."""
        give_back: list[DueRepo] = []
        work: list[tuple[list[DueRepo], Callable[..., None], tuple[object, ...]]] = []
        for owner, group in by_owner.items():
            pages = self._pages.get(owner, 1)
            if len(group) < 2 or pages >= len(group):
                polls.extend(group)  # a HEAD each is as cheap
            elif self.budget.room("api") >= pages:
                self.budget.reserve("api", pages)
                work.append((group, self._check_owner, (owner, group, pages, epoch, scope)))
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
                work.append(([due], self._poll, (due, True, epoch, scope)))
                report.polls += 1
            else:
                give_back.append(due)
        for dues, fn, args in work:
            self._submit(dues, fn, *args)
        return give_back

    def _submit(self, dues: list[DueRepo], fn: Callable[..., None], *args: object) -> None:
        with self._lock:
            self._inflight.update(d.pk for d in dues)
        self.pool.submit(fn, *args)

    def _done(self, due: DueRepo) -> None:
        with self._lock:
            self._inflight.discard(due.pk)
        self.progressed.set()

    def in_flight(self) -> int:
        with self._lock:
            return len(self._inflight)

    def queued(self) -> int:
        """Polls handed to the pool that no worker has started yet."""
        with self._lock:
            return self._polls_queued

    def await_progress(self) -> None:
        """Until a poll starts or finishes (or IDLE_WAIT passes, for time-driven changes), not spinning."""
        self.progressed.wait(IDLE_WAIT)
        self.progressed.clear()

    # -- the work (pool threads) ----------------------------------------------------------------

    def _check_owner(self, owner: str, group: list[DueRepo], pages: int, epoch: int, scope: Scope) -> None:
        """One listing of ``owner``'s models checks the group; repos that moved are polled."""
        try:
            try:
                with self.hub.deadline(min(LISTING_DEADLINE, self.settings.hub.poll_deadline)):
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
                self._run_poll(due, scope, reserved=False, epoch=epoch)
            return
        except Exception:
            log.exception("listing the models of %s failed", owner)
            for due in group:
                self._run_poll(due, scope, reserved=False, epoch=epoch)
            return
        found = all(d.repo_id.lower() in listing.heads for d in group)
        # Pages this owner's check needs: more than the cap when the walk stopped short of a watched
        # repo (then HEADs are cheaper for this owner from now on).
        self._pages[owner] = listing.pages if listing.complete or found else listing.pages + 1
        now = self.clock()
        spread = self.rng()
        # A repo listed as gated is checked by a HEAD: only that says whether this tracker may still read it.
        unchanged = [d for d in group if listing.heads.get(d.repo_id.lower()) == d.last_seen_sha
                     and d.repo_id.lower() not in listing.gated]
        kept = {d.pk for d in unchanged}
        moved = [d for d in group if d.pk not in kept]
        try:
            self.queue.finish_unchanged(unchanged, self.owner, next_at=lambda d: self.next_at(d, now, spread),
                                        now=now, epoch=epoch, checked=True)
        except TrackerError as exc:
            log.warning("could not record the check of %s's repos: %s", owner, exc)
            self.queue.release([d.pk for d in unchanged], self.owner)
        for due in unchanged:
            self._done(due)
            self.metrics.poll_done(PollOutcome.UNCHANGED.value)
            scope.told(PollResult(repo=due.repo_id, status=PollOutcome.UNCHANGED))
        for due in moved:
            self._run_poll(due, scope, reserved=False, epoch=epoch)

    def _poll(self, due: DueRepo, reserved: bool, epoch: int, scope: Scope) -> None:
        with self._lock:
            self._polls_queued -= 1
        self.progressed.set()
        self._run_poll(due, scope, reserved=reserved, epoch=epoch)

    def _run_poll(self, due: DueRepo, scope: Scope, *, reserved: bool, epoch: int | None = None) -> None:
        """Poll one repo, schedule its next poll, free its lease; never raises."""
        try:
            if self.poller.stopping.is_set():
                self.queue.release([due.pk], self.owner)
                return
            try:
                result = self.poller.poll_repo(due.repo_id, release=False, backfill=scope.backfill,
                                               progress=scope.progress)
            except NotWatched:
                return
            except Exception:  # a bug must cost this repo's poll only
                log.exception("poll of %s failed", due.repo_id)
                self.queue.release([due.pk], self.owner)
                return
            finally:
                if reserved:
                    self.budget.unreserve("resolvers", 1)
            self._compare_listing(due, result)
            if result.status == PollOutcome.BUSY:
                self.queue.release([due.pk], self.owner)  # only if still ours; it stays due
            else:
                self.queue.finish(due, self.owner, next_at=self._after(due, result), now=self.clock(),
                                  epoch=epoch if result.status in CURRENT else None)
            scope.told(result)
        except Exception:
            log.exception("poll of %s: could not record it", due.repo_id)
        finally:
            self._done(due)

    def _compare_listing(self, due: DueRepo, result: PollResult) -> None:
        """The change listing called this repo moved: if its HEAD says it did not, trust neither walk nor chain."""
        listed, sha = self.changes.listed_move(due.repo_id)
        if listed and result.status == PollOutcome.UNCHANGED and not result.new_revisions and not result.events:
            self.changes.break_chain(f"it named {str(sha)[:12]} as the head of {due.repo_id}, but the repo's HEAD "
                                     "still answers the revision read before", self.clock())

    def _finish_vouched(self, vouched: list[DueRepo], epoch: int | None, now: datetime, scope: Scope) -> None:
        """Repos the change listing vouches for: unchanged, scheduled, at no request of their own."""
        if not vouched or epoch is None:
            return
        spread = self.rng()
        try:
            self.queue.finish_unchanged(vouched, self.owner, next_at=lambda d: self._vouched_next_at(d, now, spread),
                                        now=now, epoch=epoch)
        except TrackerError as exc:
            log.warning("could not record the check of %d repo(s): %s", len(vouched), exc)
            self.queue.release([d.pk for d in vouched], self.owner)
            return
        for due in vouched:
            self.metrics.poll_done(PollOutcome.UNCHANGED.value)
            scope.told(PollResult(repo=due.repo_id, status=PollOutcome.UNCHANGED))

    def evaluate_rules(self, now: datetime, *, limit: int | None = None, every: bool = False) -> int:
        """Evaluate the watch rules that are due (``every``: all of them), while the api budget has room; how many."""
        try:
            rules = self.rules.rules.all() if every else self.rules.due(now)
        except TrackerError as exc:
            log.warning("watch rules: %s", first_line(exc))
            return 0
        done = 0
        for rule in rules[:limit]:
            pages = self.rules.pages_needed(rule)
            if self.budget.room("api") < pages:
                log.info("watch rule %d (%s) waits for the Hub budget", rule.id, rule.text)
                break
            try:
                with self.hub.deadline(min(LISTING_DEADLINE, self.settings.hub.poll_deadline)):
                    self.rules.evaluate(rule, now)
            except TrackerError as exc:
                log.warning("watch rule %d (%s): %s", rule.id, rule.text, first_line(exc))
            done += 1
        return done

    def _listen_every(self) -> float:
        """Seconds between the daemon's walks of the change listing (0: only when cheaper than the due repos' checks)."""
        return max(0.0, self.settings.poll.listen_every)

    def vouch_for(self) -> float:
        """A repo is vouched for by a walk at most this old (the daemon; `tracker poll` walks once per run)."""
        return 2 * max(self._listen_every(), WALK_EVERY)

    def walk_due(self, state: ListingState, now: datetime) -> bool:
        """Whether the daemon's tick walks the change listing: every ``listen_every``.

        The daemon's walk is the firehose: whether or not any repo is due, every push to a watched
        repo on ``main`` is seen within ``listen_every`` and polled at once. With ``listen_every``
        "0s" it walks only when that is cheaper than checking the due repos on their own.
        """
        listen = self._listen_every()
        every = listen or WALK_EVERY
        if self._last_walk_at is not None and (now - self._last_walk_at).total_seconds() < every:
            return False
        if state.marks and (now - state.marks[-1].at).total_seconds() < every:
            return False  # another replica walked lately
        return bool(listen) or self.cheaper_than_checks(state, now)

    def cheaper_than_checks(self, state: ListingState, now: datetime, only: set[int] | None = None) -> bool:
        """Whether walking the change listing costs less than checking the due repos (among ``only``) on their own."""
        cost = self.queue.due_owners(now=now, limit=self.batch, only=only)
        return self.changes.worth_walking(state, now, cost)

    def _maybe_walk(self, now: datetime, report: TickReport, scope: Scope) -> ListingState:
        """Walk the Hub-wide change listing when ``scope`` says it is due and the api budget has room."""
        state = self.changes.load()
        if not scope.walk_due(state, now):
            return state
        if self.budget.room("api") < self.changes.pages_expected(state, now):
            return state  # the owner listings and HEADs that fit the budget go first
        self._last_walk_at = now
        try:
            with self.hub.deadline(min(LISTING_DEADLINE, self.settings.hub.poll_deadline)):
                walk = self.changes.walk(now, max_pages=int(self.budget.room("api") // 2))  # half: owner listings
        except TrackerError as exc:  # the database: the repos due are checked on their own
            log.warning("hub change listing: %s", first_line(exc))
            return state
        report.walk_pages = walk.pages
        return self.changes.load()

    def _after(self, due: DueRepo, result: PollResult) -> datetime:
        now = self.clock()
        if result.status == PollOutcome.DEFERRED:
            row = self.store.repos.get(due.repo_id)
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
        """Stretch every interval evenly when the budget cannot hold every repo's own check; a WARNING saying so.

        One WARNING when the stretch starts or changes, e.g. ``10,000 repos every 1h need 833
        resolver requests per 5 min; the budget allows 300: each repo is checked on its own every
        2h47m``; an INFO when the schedule fits again.
        """
        api, resolvers = self.needs()
        api += self._walk_need()
        pace_api, pace_res = max(self.budget.pace("api"), 1e-9), max(self.budget.pace("resolvers"), 1e-9)
        stretch = max(1.0, api / pace_api, resolvers / pace_res)
        over = stretch > 1.0
        if over and (self._over_budget is not True or abs(stretch - self._stretch) > 0.05 * self._stretch):
            bucket, need, allows = (("resolver", resolvers, pace_res) if resolvers / pace_res >= api / pace_api
                                    else ("api", api, pace_api))
            count, typical, uniform = self._intervals()
            every = f"every {about(typical)}" if uniform else f"at their intervals (most often {about(typical)})"
            then = (f"every {about(typical * stretch)}" if uniform
                    else f"{stretch:.1f}x as seldom ({about(typical)}: every {about(typical * stretch)})")
            log.warning("%s repos %s need %s %s requests per 5 min; the budget allows %s: each repo is checked on "
                        "its own %s", f"{count:,}", every, f"{need:,.0f}", bucket, f"{allows:,.0f}", then)
        elif not over and self._over_budget:
            log.info("hub budget: the schedule fits the budget again (about %.0f api and %.0f resolvers requests "
                     "per 5 min)", api, resolvers)
        self._stretch = stretch
        self._over_budget = over
        return not over

    def _walk_need(self) -> float:
        """api requests per 5 minutes the daemon's walks of the change listing take (one page each, at least)."""
        listen = self._listen_every()
        if not listen:
            return 0.0
        state = self.changes.load()
        pages = max(1, math.ceil(state.rate * (listen + self.changes.overlap.total_seconds()) / max(1, state.page_size)))
        return pages * WINDOW_SECONDS / listen

    def _intervals(self) -> tuple[int, float, bool]:
        """(repos watched, their most common interval, whether they all share it)."""
        counts = Counter(self.interval(repo_id, every) for repo_id, _branch, every in self.queue.schedule())
        if not counts:
            return 0, self.settings.poll.every, True
        typical = counts.most_common(1)[0][0]
        return sum(counts.values()), typical, len(counts) == 1

    # -- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        """After a `tracker poll` run: free the workers and the leases (the Poller keeps running)."""
        self.pool.shutdown(wait=True)
        try:
            self.queue.release_all(self.owner)
        except TrackerError as exc:
            log.warning("could not free this process's repo leases: %s", exc)

    def stop(self, wait: bool = True) -> None:
        """Finish the polls in hand (the Poller stops between revisions once told), drop the rest."""
        self.poller.stopping.set()
        self.pool.shutdown(wait=wait, cancel_futures=True)
        if wait:
            try:
                self.queue.release_all(self.owner)  # what was claimed but not started is free at once
            except TrackerError as exc:
                log.warning("could not free this process's repo leases: %s", exc)


def about(seconds: float) -> str:
    """A duration as people read it: to the minute (``2h47m``, ``1d6h``), to the second under 10 minutes (``1m23s``)."""
    if seconds < 600:
        mins, secs = divmod(max(1, round(seconds)), 60)
        return f"{mins}m{secs}s" if mins and secs else f"{mins}m" if mins else f"{secs}s"
    minutes = round(seconds / 60)
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{mins}m" if mins else f"{hours}h"
    return f"{mins}m"


__all__ = ["Cycle", "Scope", "TickReport", "about"]
