"""What every advisory builder shares: timestamps, shas, urls, the affected entry, the update rules. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

from tracker.core.advisory.record import Advisory, Affected, Credit, Event, Package, Range, to_osv
from tracker.core.model import clip_words

__all__ = [
    "SCHEMA_VERSION",
    "SOURCE",
    "SUMMARY_MAX",
    "TOOL_CREDIT",
    "affected_entry",
    "check_sha",
    "commit_url",
    "finalise",
    "fix_section",
    "format_timestamp",
    "later",
    "one_line",
    "repo_url",
    "with_fix_section",
]

SCHEMA_VERSION = "1.7.5"
SOURCE = "upstream-tracker"
SUMMARY_MAX = 120
TOOL_CREDIT = Credit(name=SOURCE, type="TOOL")

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_FIX_HEADING = "\n\n## Undone\n"


def format_timestamp(value: datetime) -> str:
    """RFC 3339 UTC with a ``Z`` (the OSV schema rejects ``+00:00``); microseconds only when non-zero."""
    if value.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware (UTC); got a naive datetime")
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    return text + "Z"


def _parse_timestamp(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None


def later(now: datetime, previous: str | None) -> str:
    """``now``, or just after ``previous`` if the clock says otherwise: ``modified`` must increase."""
    prev = _parse_timestamp(previous) if previous else None
    if prev is not None and now <= prev:
        now = prev + timedelta(microseconds=1)
    return format_timestamp(now)


def check_sha(value: str, what: str) -> str:
    """``value`` when it is a full commit id; else ValueError naming ``what``."""
    if not isinstance(value, str) or not _SHA_RE.match(value):
        raise ValueError(f"{what} must be a full 40-hex lower-case commit id, got {value!r}")
    return value


def one_line(text: str, limit: int = SUMMARY_MAX) -> str:
    """``text`` on one line, cut at a word to ``limit`` characters."""
    text = " ".join(str(text).split())
    return clip_words(text, limit)


def repo_url(endpoint: str, repo_id: str) -> str:
    return f"{endpoint.rstrip('/')}/{repo_id}"


def commit_url(repo: str, sha: str) -> str:
    return f"{repo}/commit/{sha}"


def fix_section(repo: str, fixes: list[str]) -> str:
    """The "Undone" section of ``details``: one line per revision that undid the advisory."""
    if not fixes:
        return ""
    lines = [
        (f"- revision [`{f[:12]}`]({commit_url(repo, f)}) undoes it; it and its descendants "
         "are no longer affected.")
        for f in fixes
    ]
    return _FIX_HEADING + "\n".join(lines)


def with_fix_section(details: str, repo: str, fixes: list[str]) -> str:
    return details.split(_FIX_HEADING, 1)[0] + fix_section(repo, fixes)


def affected_entry(
    repo_id: str, repo: str, events: Iterable[Mapping[str, str]] | None, versions: Iterable[str]
) -> Affected:
    """The one ``affected`` entry of a tracker record: the repo, its GIT range (if any), the commits listed."""
    package = Package(ecosystem="GIT", name=repo, purl=f"pkg:huggingface/{repo_id}")
    listed = tuple(sorted({check_sha(v, "an affected commit") for v in versions}))
    if events is None:
        return Affected(package=package, versions=listed)
    ranged = Range(type="GIT", repo=repo, events=tuple(Event.model_validate(e) for e in events))
    return Affected(package=package, ranges=(ranged,), versions=listed)


def finalise(record: Advisory, previous: Advisory | None, now: datetime) -> Advisory:
    """Apply the ``published``/``modified`` rules against the stored record.

    ``published`` is kept from ``previous``; when nothing but ``modified`` differs, ``previous``
    itself comes back; otherwise ``modified`` moves to ``now`` (or just after the stored one).
    """
    if previous is None:
        return record
    if previous.id != record.id:
        raise ValueError(f"previous record {previous.id!r} is not {record.id!r}")
    if previous.published:
        record = record.replace(published=previous.published)
    if to_osv(record.replace(modified=previous.modified)) == to_osv(previous):
        return previous
    return record.replace(modified=later(now, previous.modified))
