"""``tracker run``: APScheduler wakes the poll cycle; the database decides what is due and who polls it.

A tick job every couple of seconds runs :meth:`tracker.pipeline.cycle.Cycle.tick`, which claims the due
repos (each repo's ``next_poll_at``, leased to one process at a time), so replicas against one
PostgreSQL share the watch list; a reconcile job keeps the repo count and the Hub budget check
current as repos are added or removed with ``tracker watch``. A Hub webhook makes its repo due
at once. SQLite serves one daemon: a second ``tracker run`` on the same file is refused. SIGTERM
and SIGINT stop the scheduler after the polls in flight finish; a poll killed harder than that
is safe too (its lease runs out, or is freed at once by a process of the same host).
"""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.engine import make_url

from tracker.adapters.settings import format_duration
from tracker.app import Tracker
from tracker.core.errors import StoreBusy, TrackerError, first_line
from tracker.core.intervals import clamp_interval
from tracker.core.model import PollOutcome
from tracker.pipeline.polling import PollResult
from tracker.services import Polling, Watching
from tracker.surfaces.logs import Heartbeat, log_poll, start_line

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from tracker.adapters.delivery.worker import DeliveryWorker

log = logging.getLogger("tracker.daemon")  # the name operators filter logs by, not the module path
RECONCILE_SECONDS = 60
BLOB_CACHE_SECONDS = 3600  # the blob cache is trimmed hourly (tracker/adapters/store/revisions.py, BlobStore.evict)
TICK_SECONDS = 2.0  # how often the cycle looks for due repos (a webhook's repo waits at most this long)
HEARTBEAT_MAX_SECONDS = 600.0  # a summary line at least this often, however long a cycle is


@contextmanager
def sqlite_single_daemon(database_url: str) -> Iterator[None]:
    """Hold an exclusive lock on ``<database>.lock`` while the block runs (SQLite only).

    SQLite is the single-process embedded store: a second daemon on the same file is refused
    with StoreBusy. The lock is the kernel's (``flock``), so it goes with the process however
    it ends. ``tracker poll`` and ``tracker serve`` do not take it: beside a daemon they work
    through the repo leases.
    """
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        yield
        return
    path = Path(url.database + ".lock")
    handle = open(path, "a+")  # held for the life of the daemon
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()[:20] or "?"
            raise StoreBusy(
                f"another `tracker run` (pid {holder}) is using the SQLite database {url.database}; "
                "SQLite serves one daemon: stop that one, or use PostgreSQL to run replicas"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        handle.close()


class Daemon:
    """Registers the poll cycle's jobs (tick, reconcile, heartbeat) on a scheduler built by the composition
    root (:func:`tracker.app.make_scheduler`), starts it and stops it."""

    def __init__(self, tracker: Tracker, scheduler: BackgroundScheduler) -> None:
        self.tracker = tracker
        self.scheduler = scheduler
        self._intervals: dict[str, float] = {}
        self.heartbeat = Heartbeat()
        self._outage_said = False  # the Hub being unreachable was said in this heartbeat period
        self.cycle = tracker.new_cycle(on_result=self._report)
        self.queue = tracker.queue
        # One summary per cycle, or every 10 minutes when cycles are longer: never silent for longer.
        self.heartbeat_every = min(clamp_interval(tracker.settings.poll.every), HEARTBEAT_MAX_SECONDS)

    def _report(self, result: PollResult) -> None:
        self.heartbeat.add(result)
        if result.hub_unreachable:  # one line per heartbeat period, not one per repo and tick
            if not self._outage_said:
                self._outage_said = True
                log.warning("%s; polls wait until it answers", result.error)
            return
        next_try = None
        if result.status in (PollOutcome.ERROR, PollOutcome.NOT_FOUND):  # the cycle has rescheduled it by now
            try:
                next_try = Polling(self.tracker).next_poll_at(result.repo)
            except TrackerError:
                pass  # the line goes out without it
        log_poll(log, result, next_try=next_try)  # one line when it found something or failed (tracker/surfaces/logs.py)

    def tick(self) -> None:
        try:
            self.cycle.tick()
        except TrackerError as exc:  # the database is away: the next tick tries again
            log.warning("poll cycle: %s", first_line(exc))

    def beat(self) -> None:
        """The heartbeat: a summary of the polls since the last one (nothing when none ran)."""
        try:
            pending: int | None = Polling(self.tracker).pending_revisions()
        except TrackerError:
            pending = None
        self._outage_said = False  # an outage still going on is said again in the next period
        line = self.heartbeat.summary(watched=len(self._intervals), period=format_duration(self.heartbeat_every),
                                      pending=pending)
        log.info("%s", line)

    def reconcile(self) -> None:
        """Keep the watched repos' intervals (the count the logs show) and the budget check current."""
        watched = {r.repo_id: r for r in Watching(self.tracker).repos()}
        intervals: dict[str, float] = {repo_id: self.cycle.interval(repo_id, row.every_seconds) for repo_id, row in watched.items()}
        if intervals != self._intervals:
            self._intervals = intervals
            self.cycle.check_budget()  # a WARNING when the schedule needs more Hub requests than the budget

    def evict_blobs(self) -> None:
        """The blob cache kept within its size and age ([limits] blob_cache_bytes, blob_cache_age)."""
        try:
            count, size = self.tracker.evict_blobs()
        except TrackerError as exc:  # the database is away: the next run tries again
            log.warning("blob cache: %s", first_line(exc))
            return
        if count:
            log.info("blob cache: %d cached file versions dropped (%s bytes)", count, f"{size:,}")

    def poll_soon(self, repo_id: str) -> None:
        """Poll a repo soon (a webhook said it changed): due now for whichever replica ticks first."""
        self.queue.request_poll(repo_id, now=datetime.now(UTC))

    def start(self, *, api: tuple[str, int] | None = None) -> None:
        self.tracker.sync_config_watches()
        self.reconcile()
        self.scheduler.add_job(self.reconcile, IntervalTrigger(seconds=RECONCILE_SECONDS), id="reconcile")
        self.scheduler.add_job(self.tick, IntervalTrigger(seconds=TICK_SECONDS), id="cycle",
                               next_run_time=datetime.now(UTC) + timedelta(seconds=1))
        self.scheduler.add_job(self.beat, IntervalTrigger(seconds=self.heartbeat_every), id="heartbeat")
        self.scheduler.add_job(self.evict_blobs, IntervalTrigger(seconds=BLOB_CACHE_SECONDS), id="blob-cache")
        self.scheduler.start()
        log.info("%s", start_line(self.tracker, api=api, watched=len(self._intervals)))

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        self.cycle.stop()


def run_daemon(tracker: Tracker, scheduler: BackgroundScheduler, *, host: str, port: int, api: bool = True) -> None:
    """Poll on schedule (and serve the API) until SIGTERM/SIGINT, then drain and return.

    The first signal stops new work at once and gives the revisions in hand ``[poll] shutdown_grace``
    to be saved (anything not saved stays pending: nothing is lost); a second signal exits at once.
    """
    stop = threading.Event()
    signals = 0

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal signals
        signals += 1
        tracker.poller.stopping.set()  # the polls in hand stop after the revision they are saving
        stop.set()
        if signals > 1:
            log.warning("second %s: exiting now; revisions in hand stay pending", signal.Signals(signum).name)
            os._exit(128 + signum)

    # Our handlers stay installed around uvicorn's: it restores them when it stops and re-raises
    # the signal it caught, which then lands here instead of killing the process mid-drain.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    with sqlite_single_daemon(tracker.settings.database.url):
        _run(Daemon(tracker, scheduler), stop, host=host, port=port, api=api)


def _run(daemon: Daemon, stop: threading.Event, *, host: str, port: int, api: bool) -> None:
    tracker = daemon.tracker
    daemon.start(api=(host, port) if api else None)
    sender = tracker.delivery  # the outbox sender: Slack and signed webhooks
    sender.start()
    try:
        if api:
            import uvicorn

            from tracker.surfaces.api import create_app

            app = create_app(tracker, bind_host=host,
                             poll_soon=daemon.poll_soon, scheduler_running=lambda: daemon.scheduler.running)
            uvicorn.run(app, host=host, port=port, log_config=None, log_level=None)  # logging: tracker/surfaces/logs.py
        else:
            stop.wait()
    finally:
        tracker.poller.stopping.set()
        drain = threading.Thread(target=_drain, args=(daemon, sender), name="drain", daemon=True)
        drain.start()
        drain.join(tracker.settings.poll.shutdown_grace)
        if drain.is_alive():
            log.warning("stopping: polls still in hand after %gs; exiting, their revisions stay pending",
                        tracker.settings.poll.shutdown_grace)
            logging.shutdown()
            os._exit(0)
        log.info("stopped")


def _drain(daemon: Daemon, sender: DeliveryWorker) -> None:
    daemon.stop()
    sender.stop()
