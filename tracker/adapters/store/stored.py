"""A revision's stored JSON values (findings, diff, estimate) read into core types: once, here.

The rest of the tracker sees :class:`~tracker.core.model.Finding`, :class:`~tracker.core.model.RawDiff`
and :class:`~tracker.core.model.StoredEstimate`, never the columns' dicts. A value that does not read
(a database edited by hand, or written by something else) is a :class:`StoreCorrupt` whose one line
names the revision and what is wrong, never a traceback from a reader further on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tracker.core.errors import StoreCorrupt
from tracker.core.model import Finding, RawDiff, StoredEstimate

T = TypeVar("T")


def findings_of(sha: str, value: Any) -> tuple[Finding, ...] | None:
    """The stored findings of revision ``sha`` (None: not analysed yet)."""
    return None if value is None else _read(sha, "findings", _findings, value)


def diff_of(sha: str, value: Any) -> RawDiff | None:
    """The stored raw diff of revision ``sha`` (None: a first revision, or not analysed yet)."""
    return None if value is None else _read(sha, "diff", _diff, value)


def estimate_of(sha: str, value: Any) -> StoredEstimate | None:
    """The stored estimate of revision ``sha`` (None: the estimator did not rerun there)."""
    return None if value is None else _read(sha, "estimate", StoredEstimate.from_json, value)


def _read(sha: str, what: str, parse: Callable[[Any], T], value: Any) -> T:
    try:
        return parse(value)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc).splitlines()[0]
        raise StoreCorrupt(f"revision {sha}: its stored {what} cannot be read ({reason}); the database was "
                           "changed outside the tracker: restore it from a backup",
                           public=f"revision {sha[:12]}: its stored {what} cannot be read") from None


def _findings(value: Any) -> tuple[Finding, ...]:
    if not isinstance(value, list):
        raise ValueError(f"a list was expected, not {type(value).__name__}")
    out = []
    for item in value:
        if not isinstance(item, Mapping):
            raise ValueError(f"a finding is {type(item).__name__}, not an object")
        if not isinstance(item.get("evidence") or {}, Mapping):
            raise ValueError(f"finding {item.get('code')!r}: its evidence is not an object")
        out.append(Finding.from_json(item))
    return tuple(out)


def _diff(value: Any) -> RawDiff:
    if not isinstance(value, Mapping) or not isinstance(value.get("files") or {}, Mapping):
        raise ValueError("an object with 'files' and 'texts' was expected")
    diff = RawDiff.from_json(value)
    for kind, entries in diff.files.items():
        if not all(isinstance(e, Mapping) and isinstance(e.get("path"), str) for e in entries):
            raise ValueError(f"an entry of files.{kind} has no path")
    return diff
