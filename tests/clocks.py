"""A clock a test sets by hand, for the parts that take ``clock=`` (the tracker, its cycle, its reads)."""

from __future__ import annotations

import datetime as dt


class ManualClock:
    """Says ``now`` until the test moves it (``clock.now += timedelta(...)``)."""

    def __init__(self, now: dt.datetime | None = None) -> None:
        self.now = now or dt.datetime.now(dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now
