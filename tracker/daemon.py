"""``tracker run``: APScheduler decides *when* to poll; the store decides what is done.

One interval job per watched repo (with jitter, ``max_instances=1``,
``coalesce=True``), plus a reconcile job that picks up repos added or removed
with ``tracker watch`` while the daemon runs. SIGTERM and SIGINT stop the
scheduler after the polls in flight finish; a poll killed harder than that
is safe too (see ``service``).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from datetime import UTC, datetime, timedelta

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from tracker.app import Tracker
from tracker.errors import NotWatched, TrackerError
from tracker.logs import Heartbeat, log_poll, start_line
from tracker.settings import clamp_interval, format_duration

log = logging.getLogger(__name__)
RECONCILE_SECONDS = 60


def _job_id(repo_id: str) -> str:
    return f"poll:{repo_id}"


class Daemon:
    def __init__(self, tracker: Tracker, *, workers: int = 4) -> None:
        self.tracker = tracker
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(workers)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 3600},
            timezone=UTC,
        )
        self._intervals: dict[str, float] = {}
        self.heartbeat = Heartbeat()

    def _poll(self, repo_id: str) -> None:
        try:
            result = self.tracker.poll_repo(repo_id)
        except NotWatched:
            log.info("%s is no longer watched", repo_id)
            return
        except Exception:
            log.exception("poll of %s failed", repo_id)
            return
        self.heartbeat.add(result)
        log_poll(log, result)  # one line when it found something or failed (tracker/logs.py)

    def beat(self) -> None:
        """The heartbeat: a summary of the polls since the last one (nothing when none ran)."""
        try:
            from tracker.store.health import HealthReads

            pending: int | None = HealthReads(self.tracker.store).pending_revisions()
        except TrackerError:
            pending = None
        every = clamp_interval(self.tracker.settings.poll_every)
        line = self.heartbeat.summary(watched=len(self._intervals), period=format_duration(every), pending=pending)
        if line:
            log.info("%s", line)

    def reconcile(self) -> None:
        """Make the jobs match the watch list."""
        settings = self.tracker.settings
        watched = {r.repo_id: r for r in self.tracker.store.list_watches()}
        for repo_id in list(self._intervals):
            if repo_id not in watched:
                self.scheduler.remove_job(_job_id(repo_id))
                del self._intervals[repo_id]
        for repo_id, row in watched.items():
            every = clamp_interval(row.every_seconds or settings.poll_every)
            if self._intervals.get(repo_id) == every:
                continue
            if repo_id in self._intervals:
                self.scheduler.remove_job(_job_id(repo_id))
            self.scheduler.add_job(
                self._poll, IntervalTrigger(seconds=every, jitter=min(settings.poll_jitter, every / 2)),
                args=[repo_id], id=_job_id(repo_id), name=repo_id,
                next_run_time=datetime.now(UTC) + timedelta(seconds=1),
            )
            self._intervals[repo_id] = every

    def poll_soon(self, repo_id: str) -> None:
        """Poll a repo now (a webhook said it changed); coalesces with a poll already queued."""
        self.scheduler.add_job(self._poll, args=[repo_id], id=f"hook:{repo_id}", replace_existing=True,
                               misfire_grace_time=None)

    def start(self, *, api: tuple[str, int] | None = None) -> None:
        self.tracker.sync_config_watches()
        self.reconcile()
        self.scheduler.add_job(self.reconcile, IntervalTrigger(seconds=RECONCILE_SECONDS), id="reconcile")
        self.scheduler.add_job(self.beat, IntervalTrigger(seconds=clamp_interval(self.tracker.settings.poll_every)),
                               id="heartbeat")  # at most one summary per cycle
        self.scheduler.start()
        log.info("%s", start_line(self.tracker, api=api, watched=len(self._intervals)))

    def stop(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)


def run_daemon(tracker: Tracker, *, host: str, port: int, api: bool = True) -> None:
    """Poll on schedule (and serve the API) until SIGTERM/SIGINT, then drain and return."""
    stop = threading.Event()
    # Our handlers stay installed around uvicorn's: it restores them when it stops and re-raises
    # the signal it caught, which then lands here instead of killing the process mid-drain.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    daemon = Daemon(tracker)
    daemon.start(api=(host, port) if api else None)
    from tracker.delivery.worker import DeliveryWorker  # the outbox sender: Slack and signed webhooks

    sender = DeliveryWorker(tracker.store, tracker.settings.delivery, tracker_url=tracker.settings.tracker_url)
    sender.start()
    try:
        if api:
            import uvicorn

            from tracker.api import create_app

            app = create_app(tracker, webhook_secret=os.environ.get("TRACKER_WEBHOOK_SECRET"),
                             poll_soon=daemon.poll_soon, scheduler_running=lambda: daemon.scheduler.running)
            uvicorn.run(app, host=host, port=port, log_config=None, log_level=None)  # logging: tracker/logs.py
        else:
            stop.wait()
    finally:
        daemon.stop()
        sender.stop()
        log.info("stopped")
