"""Bounded parsing of untrusted bytes: every upstream file is written by a stranger.

``json.loads`` recurses once per nesting level, so a 200 kB file of ``[[[[...`` raises
``RecursionError`` deep inside whatever called it; a file of millions of keys costs
gigabytes. ``loads_json`` checks nesting depth and element count with one linear,
non-recursive scan before parsing, and refuses with ``UntrustedInput`` (a ``ValueError``,
so callers that already treat malformed JSON as "unreadable" need no change).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_JSON_DEPTH = 64
MAX_JSON_ITEMS = 2_000_000  # containers + commas: a 256k-token tokenizer.json has ~1.2 M


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class UntrustedInput(ValueError):
    """Input refused by a bound (depth, count, size), not because it is malformed."""


def check_json_shape(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH,
                     max_items: int = MAX_JSON_ITEMS) -> None:
    """Raise ``UntrustedInput`` if the JSON text nests deeper than ``max_depth`` or has too many items.

    Linear, and done in C but for one pass over the brackets: string contents (escapes
    included) are blanked first. Malformed text is left for the parser to reject.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    bare = _STRING.sub(b'""', raw)  # string contents can hold anything, brackets included
    items = bare.count(b",") + bare.count(b"[") + bare.count(b"{")
    if items > max_items:
        raise UntrustedInput(f"JSON with more than {max_items:,} elements")
    depth = 0
    for byte in bare.translate(None, _NOT_BRACKETS):
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > max_depth:
                raise UntrustedInput(f"JSON nested deeper than {max_depth} levels")
        else:
            depth -= 1


def loads_json(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH, max_items: int = MAX_JSON_ITEMS) -> Any:
    """``json.loads`` after ``check_json_shape``; raises ValueError (incl. ``UntrustedInput``) on bad input."""
    check_json_shape(data, max_depth=max_depth, max_items=max_items)
    return json.loads(data)


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats (NaN, ±Infinity) replaced by their string names.

    Upstream configs may hold ``NaN`` (Python's json reads it); OSV records, the API and
    exports must be strict JSON, so such numbers are kept as text, never dropped silently.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
