"""Shared helpers for advisory tests: every record a test produces goes through ``checked``."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tracker.advisory.validate import validate

ENDPOINT = "https://huggingface.co"
T0 = datetime(2026, 8, 20, 9, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 8, 21, 10, 15, tzinfo=timezone.utc)
T2 = datetime(2026, 8, 22, 11, 30, tzinfo=timezone.utc)


def sha(n: int) -> str:
    """A readable fake 40-hex commit id: ``sha(3)`` is ``"c3" + "0" * 38``... (always valid hex)."""
    return f"c{n:x}".ljust(40, "0")


def checked(record):
    """Validate (schema + strict keys) and return ``record``; None passes through."""
    if record is not None:
        validate(record)
    return record


@pytest.fixture
def linear5():
    """c1 <- c2 <- c3 <- c4 <- c5, as in NOTES.md §2.6."""
    c = {i: sha(i) for i in range(1, 6)}
    return c, {c[1]: [], c[2]: [c[1]], c[3]: [c[2]], c[4]: [c[3]], c[5]: [c[4]]}
