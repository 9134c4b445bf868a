"""How often a repo may be polled: the bounds of a poll interval, and a stored one brought within them."""

from __future__ import annotations

import math

POLL_EVERY_MIN = 60.0  # a minute
POLL_EVERY_MAX = 31 * 86400.0  # 31 days


def clamp_interval(seconds: float) -> float:
    """A stored poll interval brought within 1m..31d (a database written by an older tracker may hold 1ms)."""
    if math.isnan(seconds):
        return POLL_EVERY_MAX
    return min(max(seconds, POLL_EVERY_MIN), POLL_EVERY_MAX)
