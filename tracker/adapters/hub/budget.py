"""A request budget per Hub rate-limit bucket, so a large watch list never bursts past the Hub's limits.

The Hub counts requests in 5-minute fixed windows, separately for the ``api`` bucket (``/api/…``)
and the ``resolvers`` bucket (``/…/resolve/…``): 500 and 3,000 for an anonymous IP, 1,000 and
5,000 for a free account, more on paid plans (``shared/hub-protocol.md`` §10). Each bucket here
is a token bucket refilled at the budget's pace: at most a tenth of a window's budget can go out
in a burst, the rest is spread evenly, so any 5-minute window sees at most the budget. Every
request the Hub client makes is charged to its bucket as it is sent (:meth:`HubBudget.spend`);
the cycle asks :meth:`HubBudget.room` before it claims repos, and stops claiming while a bucket
is empty. A 429 empties the bucket until the reset the Hub names (:meth:`HubBudget.exhausted`).

The budget is per process: replicas that share one token (or one IP) should each get a share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracker.core.hub_types import WINDOW_SECONDS

BURST_FRACTION = 0.1
BUCKETS = ("api", "resolvers")


def bucket_of(path: str) -> str:
    """The Hub's rate-limit bucket of a request path: ``resolvers``, ``api`` or ``other`` (pages, CDN)."""
    if "/resolve/" in path:
        return "resolvers"
    if path.startswith("/api/") or "/api/" in path:
        return "api"
    return "other"


@dataclass
class _Bucket:
    per_window: float
    tokens: float
    updated: float
    blocked_until: float = 0.0
    spent: int = 0
    reserved: float = 0.0

    @property
    def capacity(self) -> float:
        return max(1.0, self.per_window * BURST_FRACTION)

    @property
    def rate(self) -> float:
        """Tokens per second: what is left of a window's budget after a full burst, spread over the window."""
        return max(self.per_window - self.capacity, 1.0) / WINDOW_SECONDS


class HubBudget:
    """Token buckets for the Hub's ``api`` and ``resolvers`` rate limits (thread-safe)."""

    def __init__(self, api_per_window: float, resolvers_per_window: float, *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        now = monotonic()
        self._lock = threading.Lock()
        self._buckets = {
            "api": _Bucket(api_per_window, 0.0, now),
            "resolvers": _Bucket(resolvers_per_window, 0.0, now),
        }
        for bucket in self._buckets.values():
            bucket.tokens = bucket.capacity

    def per_window(self, bucket: str) -> float:
        return self._buckets[bucket].per_window

    def _refill(self, bucket: _Bucket, now: float) -> None:
        elapsed = max(0.0, now - bucket.updated)  # nothing refills before a 429's reset
        bucket.tokens = min(bucket.capacity, bucket.tokens + elapsed * bucket.rate)
        bucket.updated = max(bucket.updated, now)

    def spend(self, bucket: str, n: int = 1) -> None:
        """Charge ``n`` requests that went out (any bucket name; unknown ones are not limited)."""
        b = self._buckets.get(bucket)
        if b is None:
            return
        with self._lock:
            self._refill(b, self.monotonic())
            b.tokens -= n
            b.spent += n

    def room(self, bucket: str) -> float:
        """Requests that may go out now in ``bucket`` (less what is reserved; may be negative)."""
        b = self._buckets[bucket]
        with self._lock:
            now = self.monotonic()
            if now < b.blocked_until:
                return 0.0
            self._refill(b, now)
            return b.tokens - b.reserved

    def reserve(self, bucket: str, n: float) -> None:
        """Hold ``n`` requests for work already handed out (a poll in a worker thread)."""
        with self._lock:
            self._buckets[bucket].reserved += n

    def unreserve(self, bucket: str, n: float) -> None:
        with self._lock:
            b = self._buckets[bucket]
            b.reserved = max(0.0, b.reserved - n)

    def exhausted(self, bucket: str, seconds: float) -> None:
        """The Hub answered 429 for ``bucket``: nothing more goes out for ``seconds``."""
        b = self._buckets.get(bucket)
        if b is None:
            return
        with self._lock:
            now = self.monotonic()
            self._refill(b, now)
            b.blocked_until = max(b.blocked_until, now + seconds)
            b.tokens = min(b.tokens, 0.0)
            b.updated = max(b.updated, b.blocked_until)

    def spent(self, bucket: str) -> int:
        """Requests charged to ``bucket`` since this budget was made."""
        return self._buckets[bucket].spent

    def wait_for(self, bucket: str, n: float) -> float:
        """Seconds until ``n`` requests fit in ``bucket`` (0 when they fit now)."""
        b = self._buckets[bucket]
        with self._lock:
            now = self.monotonic()
            self._refill(b, now)
            missing = n + b.reserved - b.tokens
            blocked = max(0.0, b.blocked_until - now)
            return max(blocked, missing / b.rate if missing > 0 else 0.0)

    def pace(self, bucket: str) -> float:
        """Sustained requests per 5 minutes the bucket allows (what a schedule must fit in)."""
        b = self._buckets[bucket]
        return b.rate * WINDOW_SECONDS


__all__ = ["BUCKETS", "WINDOW_SECONDS", "HubBudget", "bucket_of"]
