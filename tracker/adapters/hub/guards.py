"""Checks on what the Hub (or whatever it redirects to) answers, before the tracker acts on it.

Pure functions, no I/O: parsing of wait hints (``Retry-After``, ``RateLimit``) that never
overflows and never exceeds a cap, header integers, origins, and repo file paths that are
safe to put in a URL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2

# RateLimit: "api";r=0;t=55 (IETF draft, as huggingface_hub parses it). Our own, because
# huggingface_hub's int() of a 5,000-digit ``t`` raises ValueError (Python's digit limit).
_RATELIMIT = re.compile(r"\"(?P<bucket>\w+)\"\s*;\s*r\s*=\s*(?P<r>\d+)\s*;\s*t\s*=\s*(?P<t>\d+)")
_DIGITS = re.compile(r"\d+")
_MAX_HEADER = 200  # longer wait headers are garbage; do not even parse them


def server_wait(headers: Mapping[str, str], *, cap: float, now: datetime | None = None) -> float | None:
    """Seconds the server asks us to wait, within ``0..cap``; None if it asks nothing readable.

    ``RateLimit`` ``t`` counts when the bucket is exhausted (``r=0``), else ``Retry-After``
    as delta-seconds or an HTTP date. Huge values are capped, negative ones and garbage
    ignored, dates in the past are 0.
    """
    limit = headers.get("ratelimit")
    if limit and len(limit) <= _MAX_HEADER:
        m = _RATELIMIT.search(limit)
        if m and float(m.group("r")) == 0:  # float(): never raises, however many digits
            return clamp_wait(float(m.group("t")), cap)
    value = (headers.get("retry-after") or "").strip()
    if not value or len(value) > _MAX_HEADER:
        return None
    if _DIGITS.fullmatch(value):
        return clamp_wait(float(value), cap)
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:  # "-0000" reads as naive; HTTP dates are GMT
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    return clamp_wait(seconds, cap)


def clamp_wait(seconds: float, cap: float) -> float:
    """A wait within ``0..cap``; NaN (a garbage header read as a float) is the cap, never a NaN wait."""
    if math.isnan(seconds):
        return cap
    return min(max(seconds, 0.0), cap)


def header_int(value: str | None) -> int | None:
    """A non-negative integer header such as Content-Length, or None if absent or not one."""
    if value is None:
        return None
    value = value.strip()
    return int(value) if len(value) <= 30 and _DIGITS.fullmatch(value) else None


def origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the default port made explicit: what "same origin" compares."""
    port = url.port or {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host.lower(), port


def unsafe_path_reason(path: object) -> str | None:
    """Why a repo file path is unsafe to put in a ``/resolve/`` URL, or None if it is fine.

    A path like ``../../etc/config.json`` is normalised by the HTTP client into a request
    for ``/etc/config.json`` on the Hub's origin; a backslash or control character can split
    or reshape the URL. The Hub never lists such paths for a real repo.
    """
    if not isinstance(path, str) or not path:
        return "empty path"
    if len(path) > 4096:
        return "path longer than 4096 characters"
    if path.startswith("/"):
        return "absolute path"
    if "\\" in path:
        return "backslash in path"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" for c in path):
        return "control character in path"
    for segment in path.split("/"):
        if segment == "":
            return "empty path segment"
        if segment in (".", ".."):
            return f"{segment!r} segment in path"
    return None
