"""One `tracker poll` run: the daemon's cycle once, over every watched repo (or the ones named), waited for.

A :class:`PollRun` is a :class:`tracker.pipeline.cycle.Scope` of the daemon's :class:`tracker.pipeline.cycle.Cycle`:
the same claims (a repo another process is polling is skipped as busy), owner listings and HEADs as cheapest,
Hub budget and poll workers, with what differs for one run:

* every repo it covers is made due at the start, and the claims are among those only;
* the Hub-wide change listing is walked at most once per run (when cheaper than the repos' own checks), and
  vouches only from walks since the run started; repos named on the command line are each checked with a
  HEAD of their own, vouched for by nothing;
* each poll reads up to ``backfill`` older revisions and reports ``progress``;
* the run ticks until every repo has a result, nothing more can be claimed, or the Hub budget would make it
  wait longer than ``[hub] max_wait``; then it returns a result per repo, saying for each one not polled why
  (another process holds it, the Hub deferred it, the budget is spent, or the run was stopped: Ctrl-C).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from tracker.core.errors import NotWatched
from tracker.core.model import PollOutcome, RepoRow
from tracker.pipeline.changes import ListingState
from tracker.pipeline.cycle import Cycle, Scope
from tracker.pipeline.polling import NOT_POLLED_INTERRUPTED, PollResult


class PollRun(Scope):
    """One `tracker poll` run over ``cycle``'s parts: :meth:`run` it once, for a result per repo."""

    def __init__(self, cycle: Cycle, repo_ids: Iterable[str] | None = None, *, backfill: int = 0,
                 progress: Callable[[int], object] | None = None) -> None:
        """``repo_ids``: the repos named (`tracker poll REPO…`, or a poll an API request asked for), each
        checked on its own; None: every watched repo."""
        super().__init__(cycle)
        self.repo_ids = None if repo_ids is None else list(dict.fromkeys(repo_ids))
        self.backfill = backfill
        self.progress = progress
        self.each_on_its_own = repo_ids is not None
        self.results: dict[str, PollResult] = {}
        self._collect_lock = threading.Lock()
        self._started: datetime | None = None
        self._walked = False
        self._budget_wait = 0.0  # how long the budget would have made the run wait

    # -- the scope of its ticks -----------------------------------------------------------------

    def start(self, now: datetime) -> None:
        """Nothing before each tick: the rules were evaluated once, at the start of the run (:meth:`_rows`)."""

    def walk_due(self, state: ListingState, now: datetime) -> bool:
        """Once per run, when cheaper than the repos' own checks; never for named repos."""
        if self.each_on_its_own or self._walked:
            return False
        self._walked = True
        return self.cycle.cheaper_than_checks(state, now, self.only)

    def vouch_since(self, now: datetime) -> datetime:
        """Only a walk of this run vouches for a repo's content."""
        return self._started or now

    def told(self, result: PollResult) -> None:
        with self._collect_lock:
            self.results.setdefault(result.repo, result)
        self.cycle.on_result(result)

    # -- the run ----------------------------------------------------------------------------------

    def run(self) -> list[PollResult]:
        """Poll every repo of the run (all due now), then return a result per repo, in order."""
        cycle = self.cycle
        rows = self._rows()
        now = cycle.clock()
        self._started = now
        self.only = {r.pk for r in rows} if self.repo_ids is not None else None
        try:
            cycle.queue.make_due([r.pk for r in rows], now=now)
            self._tick_until_done(rows)
        finally:
            while cycle.in_flight():  # a stop mid-run: the polls in hand finish before the run returns
                cycle.await_progress()
        stopped = cycle.poller.stopping.is_set()
        return [self.results.get(r.repo_id) or (self._interrupted(r) if stopped else self._not_polled(r))
                for r in rows]

    @staticmethod
    def _interrupted(row: RepoRow) -> PollResult:
        """The result of a repo a stopped run never reached (Ctrl-C on `tracker poll`): still due, read next time."""
        return PollResult(repo=row.repo_id, status=PollOutcome.DEFERRED, error=NOT_POLLED_INTERRUPTED)

    def _rows(self) -> list[RepoRow]:
        """The watched repos the run covers: all (the rules evaluated first), or the ones named (NotWatched)."""
        cycle = self.cycle
        if self.repo_ids is None:  # a run over the whole watch list: the rules say what it holds first
            cycle.evaluate_rules(cycle.clock(), every=True)
        rows = cycle.store.repos.all()
        if self.repo_ids is None:
            return rows
        by_id: dict[str, RepoRow] = {r.repo_id: r for r in rows}
        for repo_id in self.repo_ids:
            if repo_id not in by_id:
                raise NotWatched(repo_id)
        return [by_id[r] for r in self.repo_ids]

    def _tick_until_done(self, rows: list[RepoRow]) -> None:
        """Tick until every row has a result, nothing more can be claimed, or the budget would wait too long."""
        cycle = self.cycle
        while not cycle.poller.stopping.is_set():
            cycle.progressed.clear()
            report = cycle.tick_for(self)
            while cycle.in_flight() and cycle.queued() >= cycle.workers:
                cycle.await_progress()
            if report.claimed:
                continue
            if cycle.in_flight():  # nothing new is claimable before a poll ends: no claim query meanwhile
                cycle.await_progress()
                continue
            if all(r.repo_id in self.results for r in rows):
                return
            if not cycle.queue.claimable(now=cycle.clock(), only=self.only):
                return  # what is left is leased by another process, or deferred by the Hub
            wait = max(cycle.budget.wait_for("resolvers", 1), cycle.budget.wait_for("api", 1))
            if wait <= 0 or wait > cycle.settings.hub.max_wait:
                self._budget_wait = wait
                return  # nothing claimable now, or the Hub's budget is spent for longer than we wait inline
            cycle.sleep(min(wait, 5.0))

    def _not_polled(self, row: RepoRow) -> PollResult:
        """The result of a repo this run could not claim: another process holds it, or the Hub deferred it."""
        store = self.cycle.store
        result = PollResult(repo=row.repo_id, status=PollOutcome.BUSY)
        fresh = store.repos.get(row.repo_id) or row
        now = self.cycle.clock()
        if fresh.defer_until is not None and fresh.defer_until > now:
            result.status = PollOutcome.DEFERRED
            result.error = f"rate limited until {fresh.defer_until.isoformat(timespec='seconds')}"
            return result
        owner, until = store.schedule.lease_of(fresh.pk)
        if owner is None:
            result.status = PollOutcome.DEFERRED
            result.error = (f"not polled: the Hub request budget is spent for {self._budget_wait:.0f}s; "
                            "the next cycle polls it")
            return result
        result.error = (f"being polled by another process ({owner or '?'}, lease until "
                        f"{until.isoformat(timespec='seconds') if until else '?'}); skipped")
        return result


__all__ = ["PollRun"]
