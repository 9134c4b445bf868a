"""Polls asked for from outside the schedule (a Hub webhook), coalesced per repo on a small pool."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger("tracker.api")  # the name operators filter logs by (these polls come through the API)


class PollCoalescer:
    """Hub webhooks ask for polls; per repo at most one poll runs and one waits, on a small pool.

    A burst of deliveries (the Hub retries, or someone replays one a thousand times) costs at most
    two polls per repo, never a thread per delivery.
    """

    def __init__(self, poll: Callable[[str], object], *, workers: int = 2) -> None:
        self._poll = poll
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hook")
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._queued: set[str] = set()
        self._closed = False

    def __call__(self, repo_id: str) -> None:
        with self._lock:
            if self._closed or repo_id in self._queued:
                return
            if repo_id in self._running:
                self._queued.add(repo_id)
                return
            self._running.add(repo_id)
        self._pool.submit(self._run, repo_id)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the waiting polls are dropped by then)."""
        with self._lock:
            return self._closed

    def close(self) -> None:
        """Finish the polls running, drop the ones waiting; later asks are ignored (the schedule polls anyway)."""
        with self._lock:
            self._closed = True
            self._queued.clear()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, repo_id: str) -> None:
        while True:
            try:
                self._poll(repo_id)
            except Exception:  # a failed poll is logged; the next delivery tries again
                log.exception("poll of %s (webhook) failed", repo_id)
            with self._lock:
                if repo_id in self._queued:
                    self._queued.discard(repo_id)
                    continue
                self._running.discard(repo_id)
                return


__all__ = ["PollCoalescer"]
