"""Waiting on a condition another process or thread makes true, with a deadline (no bare sleeps in tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# A deadline for things that happen in well under a second on an idle machine: waits end as soon as the
# condition holds, so a deadline generous enough for a loaded one (load ~20 on 2 cores, a cold interpreter
# importing the tracker) costs nothing when the test passes.
CONDITION_DEADLINE = 180.0


def wait_for(predicate: Callable[[], Any], timeout: float = CONDITION_DEADLINE, every: float = 0.05) -> bool:
    """True as soon as ``predicate()`` is truthy; False when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False
