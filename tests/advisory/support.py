"""Helpers for advisory tests: every record a test produces goes through ``checked``."""

from __future__ import annotations

from datetime import UTC, datetime

from tracker.core.advisory.validate import validate

ENDPOINT = "https://huggingface.co"
T0 = datetime(2026, 8, 20, 9, 0, tzinfo=UTC)
T1 = datetime(2026, 8, 21, 10, 15, tzinfo=UTC)
T2 = datetime(2026, 8, 22, 11, 30, tzinfo=UTC)


def sha(n: int) -> str:
    """A readable fake 40-hex commit id: ``sha(3)`` is ``"c3" + "0" * 38``... (always valid hex)."""
    return f"c{n:x}".ljust(40, "0")


def checked(record):
    """Validate (schema + strict keys) and return ``record``; None passes through."""
    if record is not None:
        validate(record)
    return record


def linear(n: int = 5) -> tuple[dict[int, str], dict[str, list[str]]]:
    """c1 <- c2 <- ... <- cn (NOTES.md §2.6 uses n=5): the ids by number, and the parents map."""
    c = {i: sha(i) for i in range(1, n + 1)}
    return c, {c[i]: ([c[i - 1]] if i > 1 else []) for i in c}
