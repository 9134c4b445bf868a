"""Waiting on a condition another process or thread makes true, with a deadline (no bare sleeps in tests)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, every: float = 0.05) -> bool:
    """True as soon as ``predicate()`` is truthy; False when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False
