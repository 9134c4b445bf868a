"""The composition root: the one place that picks implementations and wires them together.

The CLI, the daemon, the HTTP API and the tests all build a ``Tracker`` here. It holds the
three orchestrators, each with one job, built in dependency order and never patched into
one another:

- ``Poller`` (tracker/pipeline/polling.py): what to read; repo events;
- ``Processor`` (tracker/pipeline/processing.py): read → report → save, one transaction per revision;
- ``Querier`` (tracker/pipeline/querying.py): which advisories affect a revision, reads only;

and the parts the entry points share: the Hub budget (handed to the Hub client when it is built,
so every request counts against it), the poll queue and the poll cycles built on it
(:meth:`Tracker.new_cycle`), the delivery worker, the coalescer of webhook-asked polls, the API
tokens. ``make_tracker`` closes what it opened when building fails halfway; the Tracker closes it
at the end of its ``with`` block (``with make_tracker(settings) as tracker:``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from tracker.adapters import metrics
from tracker.adapters.delivery.worker import DeliveryWorker
from tracker.adapters.hub import HubClient
from tracker.adapters.hub.budget import HubBudget
from tracker.adapters.settings import Settings
from tracker.adapters.store import SqlStore, open_store
from tracker.adapters.template_sandbox import LeasedSandbox
from tracker.core.bounded import json_object
from tracker.core.errors import HubUnavailable, NotWatched
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import RepoId, RepoRow, StoredEstimate
from tracker.pipeline.analysis import Analysis, RevisionAnalyst, Side, safetensors_headers
from tracker.pipeline.coalescing import PollCoalescer
from tracker.pipeline.cycle import Cycle
from tracker.pipeline.poll_run import PollRun
from tracker.pipeline.polling import Poller, PollResult
from tracker.pipeline.ports import Clock, HubReader, OsvLookup, Schedule, Store, Tokens
from tracker.pipeline.processing import Processor
from tracker.pipeline.querying import Querier, QueryResult, pin
from tracker.pipeline.verification import RevisionVerifier

__all__ = ["Tracker", "make_hub", "make_scheduler", "make_tracker"]


def utcnow() -> datetime:
    return datetime.now(UTC)


def make_hub(settings: Settings, budget: HubBudget | None = None) -> HubClient:
    """The Hub client ``[hub]`` describes; each request (and each 429) is told to ``budget``, if given."""
    if budget is None:
        return HubClient.from_settings(settings)
    return HubClient.from_settings(settings, on_request=budget.spend, on_rate_limited=budget.exhausted)


@dataclass
class Tracker:
    """The tracker as its entry points use it: the collaborators and a few convenient verbs."""

    settings: Settings
    store: Store
    hub: HubReader
    clock: Clock
    processor: Processor
    poller: Poller
    querier: Querier
    budget: HubBudget  # one per process: what the Hub client built here spends, what every cycle claims within
    queue: Schedule  # which repos are due, leased to one process at a time
    tokens: Tokens
    delivery: DeliveryWorker  # the outbox sender (started by `tracker run`)
    poll_soon: Callable[[str], None]  # a poll asked for outside the schedule (a Hub webhook), coalesced per repo
    osv: OsvLookup | None = None
    # What this Tracker opened (the engine, the OSV client, pools), closed by close(); parts handed in stay open.
    resources: ExitStack = field(default_factory=ExitStack, repr=False)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close what :func:`make_tracker` opened, last opened first; parts handed in are left open."""
        self.resources.close()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- watching and polling -------------------------------------------------------------------

    def sync_config_watches(self) -> None:
        """Add the repos listed in the config file (never removes what users added)."""
        known = {r.repo_id for r in self.store.repos.all()}
        for spec in self.settings.watch:
            if spec.repo not in known:
                self.store.repos.add(spec.repo, branch=spec.branch, every=spec.every, now=self.clock())

    def new_cycle(self, *, on_result: Callable[[PollResult], None] | None = None,
                  workers: int | None = None) -> Cycle:
        """A poll cycle over this Tracker's parts (its budget, queue and Poller), with its own pool of
        ``workers`` (default ``[poll] workers``); ``on_result`` is told each poll's result (the daemon's log)."""
        return Cycle(self.settings, self.store, self.hub, self.poller, clock=self.clock, budget=self.budget,
                     queue=self.queue, workers=workers, on_result=on_result)

    def poll(self, repo_ids: Iterable[str] | None = None, *, backfill: int = 0,
             progress: Callable[[int], Any] | None = None) -> list[PollResult]:
        """One `tracker poll` run over every watched repo (or the ones named), then a result per repo: the daemon's
        cycle, once (:class:`PollRun`)."""
        cycle = self.new_cycle()
        try:
            return PollRun(cycle, repo_ids, backfill=backfill, progress=progress).run()
        finally:
            cycle.close()

    def poll_repo(self, repo_id: str, *, backfill: int = 0) -> PollResult:
        return self.poller.poll_repo(repo_id, backfill=backfill)

    def repo(self, repo_id: str) -> RepoRow:
        repo = self.store.repos.get(repo_id)
        if repo is None:
            raise NotWatched(repo_id)
        return repo

    def evict_blobs(self) -> tuple[int, int]:
        """Keep the blob cache within ``[limits] blob_cache_bytes`` and ``blob_cache_age``; (versions, bytes) dropped."""
        older_than = self.clock() - timedelta(seconds=self.settings.limits.blob_cache_age)
        return self.store.blobs.evict(max_bytes=self.settings.limits.blob_cache_bytes, older_than=older_than)

    def reanalyse(self, repo_id: str) -> int:
        return self.processor.reanalyse(self.repo(repo_id))

    def query(self, repo_id: str, revision: str) -> QueryResult:
        return self.querier.query(repo_id, revision)

    # -- reading any repo, watched or not ---------------------------------------------------------

    def pin(self, repo_id: RepoId, revision: str) -> str:
        """A branch, tag or short id pinned to its 40-hex commit (a full sha is taken as it is)."""
        return pin(self.hub, repo_id, revision)

    def snapshot_of(self, repo_id: RepoId, revision: str) -> Side:
        """A revision's sha and file list: from the store when the repo is watched and it was read (a short
        sha of a commit read included, as ``tracker query`` resolves it), else the Hub."""
        repo = self.store.repos.get(repo_id)
        row = self.store.revisions.get(repo.pk, revision) if repo is not None else None
        if row is not None and row.snapshot is not None:
            return row.sha, row.snapshot
        known = self.store.revisions.find_commit(revision, repo.pk) if repo is not None and row is None else []
        sha = row.sha if row is not None else known[0][1] if len(known) == 1 else self.pin(repo_id, revision)
        return sha, self.hub.snapshot(repo_id, sha)

    def analyse(self, repo_id: RepoId, old: Side | None, new: Side, *,
                old_estimate: StoredEstimate | None = None) -> Analysis:
        return self.processor.analyst.analyse(repo_id, old, new, old_estimate=old_estimate)

    def config_and_headers(self, repo_id: RepoId, side: Side) -> tuple[Any, dict[str, Any]]:
        """A repo's config.json and safetensors headers at a revision (its sha and file list, as
        :meth:`snapshot_of` gives them), for ``tracker estimate``."""
        sha, snapshot = side
        if snapshot.get("config.json") is None:
            raise HubUnavailable(f"{repo_id}@{sha[:12]} has no config.json")
        sources = self.processor.analyst.sources(repo_id, old=None, new=(sha, snapshot))
        return json_object(sources.text("new", "config.json")), safetensors_headers(sources, "new")


def _verifier(settings: Settings, store: Store, *, rules: SeverityRules, clock: Clock) -> RevisionVerifier:
    """``[verify] enabled``: the daemon's verifier, running the limited subprocess of tracker/adapters/verify."""
    from tracker.adapters.verify.verifying import VerifyOptions, verify_revisions

    options = VerifyOptions.from_settings(settings)
    return RevisionVerifier(store, min_severity=settings.verify.min_severity, rules=rules, clock=clock,
                            run=lambda repo, old, new: verify_revisions(repo, old, new, options))


def make_tracker(
    settings: Settings,
    *,
    store: SqlStore | None = None,
    hub: HubReader | None = None,
    auto_upgrade: bool | None = None,
    clock: Clock = utcnow,
    budget: HubBudget | None = None,
) -> Tracker:
    """Build the Tracker ``settings`` describe; ``store``, ``hub`` and ``budget``, when given, are used as
    they are (a Hub client handed in spends the budget only if it was built with it: see :func:`make_hub`).

    What is opened here is closed by ``Tracker.close()``; when building fails halfway it is closed
    before the error propagates, so a bad setting leaks no engine or client.
    """
    with ExitStack() as opened:
        if store is None:
            store = open_store(settings.database.url, auto_upgrade=auto_upgrade)
            opened.callback(store.close)
        store.advisories.max_versions = settings.advisories.max_versions
        budget = budget or HubBudget(settings.hub.budget_api_per_5min, settings.hub.budget_resolvers_per_5min)
        hub = hub or make_hub(settings, budget)
        osv = _osv_client(settings, opened)
        rules = SeverityRules.default().with_overrides(settings.severity)
        verifier = _verifier(settings, store, rules=rules, clock=clock) if settings.verify.enabled else None
        analyst = RevisionAnalyst(settings, store.blobs, hub, clock=clock, rules=rules, osv=osv,
                                  renderers=LeasedSandbox)
        processor = Processor(settings, store, hub, clock=clock, rules=rules, metrics=metrics, analyst=analyst,
                              verifier=verifier)
        poller = Poller(settings, store, hub, processor, clock=clock, metrics=metrics)
        querier = Querier(store, hub, requests_per_call=settings.api.max_hub_requests)
        delivery = DeliveryWorker(store.outbox, settings.delivery, tracker_url=settings.public_url)
        opened.callback(delivery.stop)
        coalescer = PollCoalescer(poller.poll_repo)
        opened.callback(coalescer.close)
        tracker = Tracker(settings=settings, store=store, hub=hub, clock=clock, processor=processor,
                          poller=poller, querier=querier, budget=budget, queue=store.schedule,
                          tokens=store.tokens, delivery=delivery, poll_soon=coalescer, osv=osv,
                          resources=opened.pop_all())
    return tracker


def make_scheduler(*, workers: int = 4) -> BackgroundScheduler:
    """The daemon's scheduler (APScheduler, not started): ``workers`` threads, each job one run at a time,
    a missed run coalesced into one. The daemon registers its jobs on it and starts and stops it."""
    return BackgroundScheduler(
        executors={"default": ThreadPoolExecutor(workers)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600},
        timezone=UTC,
    )


def _osv_client(settings: Settings, opened: ExitStack) -> OsvLookup | None:
    """The OSV.dev client ``[osv] api_url`` names (None: no dependency lookups), closed with the Tracker."""
    if not settings.osv.api_url:
        return None
    from tracker.adapters.osvdev import OsvClient

    return opened.enter_context(OsvClient(settings.osv.api_url, cache={}))
