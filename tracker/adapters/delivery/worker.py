"""The sender: takes due outbox rows and delivers them, at least once, in order per subscription.

Each round asks the store for the oldest pending row of every subscription (a later alert never
overtakes an earlier one), leases it, checks the target again (DNS may have changed since the
subscription: :mod:`tracker.adapters.delivery.guard`), sends it to the checked address and records the
outcome. A failure is retried with exponential backoff and jitter, a ``Retry-After`` (on 429 or
503) is honoured, and after ``max_attempts`` the row is a dead letter until ``tracker deliveries
retry ID``. Nothing is held in memory between rounds: a worker killed mid-send leaves its row
pending, and the next worker sends it again once the lease runs out, with the same ``webhook-id``
(receivers de-duplicate by it).

Attempts are independent. Each has one deadline, ``[delivery] timeout``, for connecting, sending
and the whole answer (enforced on every socket operation, as for the Hub: :mod:`tracker.adapters.hub.deadline`),
and reads at most ``max_response_bytes`` of an error's body. They run on a pool of ``[delivery]
workers`` threads, at most ``per_target`` of them to one receiver (scheme, host and port), and the
running sender never waits for an attempt to end before starting the next one elsewhere: a
receiver that drips its answer holds its own slots until its deadline, never another receiver's
alerts.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Protocol

import httpx2

from tracker.adapters import metrics
from tracker.adapters.delivery.channels import Sending, channel
from tracker.adapters.delivery.guard import (
    Answer,
    CheckedTarget,
    Resolver,
    TargetGuard,
    TargetRefused,
    make_client,
    post_pinned,
)
from tracker.adapters.hub import deadline
from tracker.adapters.hub.guards import clamp_wait
from tracker.adapters.settings import DeliverySettings
from tracker.core.store_types import DeliveryRow, SubscriptionRow

log = logging.getLogger("tracker.delivery.worker")  # the name operators filter logs by, not the module path

RETRY_AFTER_MAX = 86400.0  # a receiver asking for more than a day is asked again after a day
# A lease outlasts the attempt's deadline by this much: resolving the target's name (getaddrinfo
# cannot be interrupted; a resolver's own timeouts and retries end within a minute) and the store.
LEASE_MARGIN = 60.0


class DeliveryStore(Protocol):
    def due_deliveries(self, now: datetime, *, limit: int = 100) -> list[tuple[DeliveryRow, SubscriptionRow]]: ...

    def lease_delivery(self, delivery_id: int, *, now: datetime, until: datetime) -> bool: ...

    def delivery_succeeded(self, delivery_id: int, *, status: int, now: datetime) -> None: ...

    def delivery_failed(self, delivery_id: int, *, status: int | None, error: str,
                        retry_at: datetime | None) -> None: ...


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), None if absent or invalid."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, OverflowError, IndexError):  # as the Hub's waits are read
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - now).total_seconds()
    return clamp_wait(seconds, RETRY_AFTER_MAX)


class Outcome:
    """What one attempt came to: ``status`` (None: no answer) and, on failure, ``error`` and ``wait``."""

    def __init__(self, status: int | None, error: str | None = None, wait: float | None = None,
                 permanent: bool = False) -> None:
        self.status, self.error, self.wait, self.permanent = status, error, wait, permanent


def target_key(url: str) -> str:
    """The receiver a subscription's URL names: scheme, host and port (what ``per_target`` counts)."""
    try:
        parsed = httpx2.URL(url)
    except (httpx2.InvalidURL, TypeError):
        return url
    return f"{parsed.scheme}://{parsed.host.lower()}:{parsed.port or ''}"


class DeliveryWorker:
    """Delivers the outbox. ``run_once()`` is one round, waited for; ``start()`` runs rounds in a thread.

    ``parallel`` (default ``[delivery] workers``) bounds the attempts in flight, and ``per_target``
    (default ``[delivery] per_target``) those to any one receiver.
    """

    # Keyword-only: overrides of the settings' bounds by name, and the seams tests use (resolver, clock, jitter).
    def __init__(self, store: DeliveryStore, settings: DeliverySettings, *, tracker_url: str | None = None,  # noqa: PLR0913
                 resolver: Resolver | None = None, clock: Callable[[], datetime] | None = None,
                 jitter: Callable[[], float] = random.random, parallel: int | None = None,
                 per_target: int | None = None, idle: float = 0.5) -> None:
        self.store = store
        self.settings = settings
        self.tracker_url = tracker_url
        self.guard = TargetGuard(settings.allow_hosts, resolver=resolver)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.jitter = jitter
        self.parallel = parallel or settings.workers
        self.per_target = per_target or settings.per_target
        self.idle = idle
        self._client = make_client(settings.timeout)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}  # receiver -> attempts in flight
        self._wake = threading.Event()  # an attempt ended: a slot is free, its subscription's next row may be due
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lease = timedelta(seconds=settings.timeout + LEASE_MARGIN)

    # -- one round ----------------------------------------------------------------------------

    def run_once(self) -> int:
        """Attempt the due deliveries (one per subscription, in parallel, within the bounds) and wait for
        them; how many were attempted."""
        started = self._dispatch()
        wait(started)
        return len(started)

    def _dispatch(self) -> list[Future[None]]:
        """Lease and start as many due deliveries as the bounds allow, without waiting for them."""
        with self._lock:
            free = self.parallel - sum(self._running.values())
        if free <= 0:
            return []
        now = self.clock()
        started: list[Future[None]] = []
        for delivery, sub in self.store.due_deliveries(now):
            if len(started) >= free:
                break
            key = target_key(sub.url)
            with self._lock:
                if self._running.get(key, 0) >= self.per_target:
                    continue  # that receiver has its share; the next round looks again
                self._running[key] = self._running.get(key, 0) + 1
            if not self.store.lease_delivery(delivery.id, now=now, until=now + self.lease):
                self._release(key)
                continue
            started.append(self._executor().submit(self._attempt_then_release, delivery, sub, key))
        return started

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.parallel, thread_name_prefix="deliver")
            return self._pool

    def _release(self, key: str) -> None:
        with self._lock:
            self._running[key] -= 1
            if not self._running[key]:
                del self._running[key]
        self._wake.set()

    def _attempt_then_release(self, delivery: DeliveryRow, sub: SubscriptionRow, key: str) -> None:
        try:
            self._attempt(delivery, sub)
        finally:
            self._release(key)

    def backoff(self, attempts: int) -> float:
        """Seconds before attempt ``attempts + 1``: exponential, capped, with equal jitter."""
        delay: float = min(self.settings.backoff_max, self.settings.backoff_base * 2 ** max(attempts - 1, 0))
        return delay / 2 + self.jitter() * delay / 2

    def _attempt(self, delivery: DeliveryRow, sub: SubscriptionRow) -> None:
        try:
            outcome = self._send(delivery, sub)
        except Exception as exc:  # a bug must not kill the worker or lose the row: it is retried
            log.exception("delivery %d: unexpected error", delivery.id)
            outcome = Outcome(None, f"internal error: {type(exc).__name__}")
        now = self.clock()
        if outcome.error is None:
            self.store.delivery_succeeded(delivery.id, status=outcome.status or 0, now=now)
            metrics.delivery_attempt("delivered")
            log.info("delivery %d (%s %s) to subscription %d: %s", delivery.id, delivery.event_type,
                     delivery.advisory_id, sub.id, outcome.status)
            return
        attempts = delivery.attempts + 1
        dead = outcome.permanent or attempts >= self.settings.max_attempts
        wait = outcome.wait if outcome.wait is not None else self.backoff(attempts)
        retry_at = None if dead else now + timedelta(seconds=wait)
        self.store.delivery_failed(delivery.id, status=outcome.status, error=outcome.error, retry_at=retry_at)
        metrics.delivery_attempt("dead" if dead else "retry")
        log.warning("delivery %d to subscription %d failed (attempt %d): %s; %s", delivery.id, sub.id, attempts,
                    outcome.error, "dead letter" if dead else f"retry in {wait:.1f}s")

    def _send(self, delivery: DeliveryRow, sub: SubscriptionRow) -> Outcome:
        try:
            target = self.guard.check(sub.url)
        except TargetRefused as exc:
            return Outcome(None, str(exc), permanent=True)
        body, headers = self._payload(delivery, sub)
        try:
            with deadline.active(time.monotonic() + self.settings.timeout):
                answer = post_pinned(self._client, target, content=body, headers=headers,
                                     max_bytes=self.settings.max_response_bytes)
        except httpx2.TimeoutException:
            return Outcome(None, f"timed out after {self.settings.timeout:g}s ({target.display})")
        except httpx2.TransportError as exc:
            return Outcome(None, f"connection failed ({target.display}): {type(exc).__name__}: {exc}")
        return self._judge(answer, target)

    def _payload(self, delivery: DeliveryRow, sub: SubscriptionRow) -> tuple[bytes, dict[str, str]]:
        return channel(sub.kind).payload(delivery, sub, Sending(self.tracker_url, self.clock))

    def _judge(self, response: Answer, target: CheckedTarget) -> Outcome:
        status = response.status
        if 200 <= status < 300:
            return Outcome(status)
        if 300 <= status < 400:
            location = httpx2.URL(response.headers.get("location", ""))
            where = f"{location.scheme}://{location.netloc.decode()}" if location.host else "elsewhere"
            return Outcome(status, f"HTTP {status}: redirect to {where} not followed")
        wait = None
        if status in (429, 503):
            wait = retry_after_seconds(response.headers.get("retry-after"), self.clock())
        text = " ".join(response.text[:200].split())
        return Outcome(status, f"HTTP {status} from {target.display}" + (f": {text}" if text else ""), wait=wait)

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="delivery", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        log.debug("delivery worker started")
        while not self._stop.is_set():
            self._wake.clear()
            try:
                started = len(self._dispatch())
            except Exception:
                log.exception("delivery round failed")
                started = 0
            if not started:  # nothing due, or every slot taken: until an attempt ends, or a while
                self._wake.wait(self.idle)

    def stop(self, timeout: float | None = None) -> None:
        """Start nothing more, let the attempts in flight end (each within its deadline), then stop."""
        self._stop.set()
        self._wake.set()
        limit = timeout if timeout is not None else self.settings.timeout + 5
        if self._thread is not None:
            self._thread.join(limit)
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()
