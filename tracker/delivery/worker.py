"""The sender: takes due outbox rows and delivers them, at least once, in order per subscription.

Each round asks the store for the oldest pending row of every subscription (a later alert never
overtakes an earlier one), leases it, checks the target again (DNS may have changed since the
subscription: :mod:`tracker.delivery.guard`), sends it to the checked address and records the
outcome. A failure is retried with exponential backoff and jitter, a ``Retry-After`` (on 429 or
503) is honoured, and after ``max_attempts`` the row is a dead letter until ``tracker deliveries
retry ID``. Nothing is held in memory between rounds: a worker killed mid-send leaves its row
pending, and the next worker sends it again once the lease runs out, with the same ``webhook-id``
(receivers de-duplicate by it).
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Protocol

import httpx2

from tracker import metrics
from tracker.delivery.guard import (
    CheckedTarget,
    Resolver,
    TargetGuard,
    TargetRefused,
    make_client,
    post_pinned,
)
from tracker.delivery.slack import slack_message
from tracker.delivery.webhook import signed_headers, webhook_body
from tracker.hub.guards import clamp_wait
from tracker.settings import DeliverySettings
from tracker.store.delivery import DeliveryRow, SubscriptionRow

log = logging.getLogger(__name__)

RETRY_AFTER_MAX = 86400.0  # a receiver asking for more than a day is asked again after a day


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


class DeliveryWorker:
    """Delivers the outbox. ``run_once()`` is one round; ``start()`` runs rounds in a thread."""

    def __init__(self, store: DeliveryStore, settings: DeliverySettings, *, tracker_url: str | None = None,
                 resolver: Resolver | None = None, clock: Callable[[], datetime] | None = None,
                 jitter: Callable[[], float] = random.random, parallel: int = 4, idle: float = 0.5) -> None:
        self.store = store
        self.settings = settings
        self.tracker_url = tracker_url
        self.guard = TargetGuard(settings.allow_hosts, resolver=resolver)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.jitter = jitter
        self.parallel = parallel
        self.idle = idle
        self._client = make_client(settings.timeout)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Longer than any one attempt can take (connect, write, read each bounded by the timeout).
        self.lease = timedelta(seconds=4 * settings.timeout + 5)

    # -- one round ----------------------------------------------------------------------------

    def run_once(self) -> int:
        """Attempt every due delivery (one per subscription, in parallel); how many were attempted."""
        now = self.clock()
        due = [(d, s) for d, s in self.store.due_deliveries(now)
               if self.store.lease_delivery(d.id, now=now, until=now + self.lease)]
        if not due:
            return 0
        if len(due) == 1:
            self._attempt(*due[0])
        else:
            with ThreadPoolExecutor(min(self.parallel, len(due)), thread_name_prefix="deliver") as pool:
                list(pool.map(lambda pair: self._attempt(*pair), due))
        return len(due)

    def backoff(self, attempts: int) -> float:
        """Seconds before attempt ``attempts + 1``: exponential, capped, with equal jitter."""
        delay = min(self.settings.backoff_max, self.settings.backoff_base * 2 ** max(attempts - 1, 0))
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
            response = post_pinned(self._client, target, content=body, headers=headers)
        except httpx2.TimeoutException:
            return Outcome(None, f"timed out after {self.settings.timeout:g}s ({target.display})")
        except httpx2.TransportError as exc:
            return Outcome(None, f"connection failed ({target.display}): {type(exc).__name__}: {exc}")
        return self._judge(response, target)

    def _payload(self, delivery: DeliveryRow, sub: SubscriptionRow) -> tuple[bytes, dict[str, str]]:
        if sub.kind == "slack":
            message = slack_message(delivery.event_type, delivery.record, tracker_url=self.tracker_url)
            return json.dumps(message, ensure_ascii=False).encode(), {"Content-Type": "application/json"}
        body = webhook_body(delivery.event_type, delivery.record, delivery.created_at)
        assert sub.secret is not None, "a webhook subscription has a secret"
        return body, signed_headers(sub.secret, delivery.webhook_id, body, self.clock())

    def _judge(self, response: httpx2.Response, target: CheckedTarget) -> Outcome:
        status = response.status_code
        if 200 <= status < 300:
            return Outcome(status)
        if 300 <= status < 400:
            location = httpx2.URL(response.headers.get("location", ""))
            where = f"{location.scheme}://{location.netloc.decode()}" if location.host else "elsewhere"
            return Outcome(status, f"HTTP {status}: redirect to {where} not followed")
        wait = None
        if status in (429, 503):
            wait = retry_after_seconds(response.headers.get("retry-after"), self.clock())
        text = response.text[:200].strip().replace("\n", " ")
        return Outcome(status, f"HTTP {status} from {target.display}" + (f": {text}" if text else ""), wait=wait)

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="delivery", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        log.debug("delivery worker started")
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception:
                log.exception("delivery round failed")
                busy = 0
            if not busy:
                self._stop.wait(self.idle)

    def stop(self, timeout: float | None = None) -> None:
        """Finish the round in flight, then stop."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout if timeout is not None else 4 * self.settings.timeout + 5)
        self._client.close()
