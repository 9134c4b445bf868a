"""Bounded parsing of untrusted bytes: every upstream file is written by a stranger.

``json.loads`` recurses once per nesting level, so a 200 kB file of ``[[[[...`` raises
``RecursionError`` deep inside whatever called it; a file of millions of keys costs
gigabytes. ``loads_json`` checks nesting depth and element count with one linear,
non-recursive scan before parsing, and refuses with ``UntrustedInput`` (a ``ValueError``,
so callers that already treat malformed JSON as "unreadable" need no change).

``load_yaml`` does the same for YAML (a model card's front matter): a safe loader whose
composer counts nesting depth and the *expanded* size of every node, so an alias bomb
("billion laughs", a few hundred bytes) is refused as soon as its expansion passes the
bound, before anything walks it. ``json_safe`` makes any value strict JSON.

Every bound is a named constant here, documented in docs/findings.md ("Bounds").
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import yaml

from tracker.core.errors import HeaderTooLarge, UpstreamFileError

MAX_JSON_DEPTH = 64
MAX_JSON_ITEMS = 2_000_000  # containers + commas: a 256k-token tokenizer.json has ~1.2 M
MAX_YAML_BYTES = 256 * 1024  # model cards' front matter is a few kB; long dataset lists stay far below
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 100_000  # nodes after alias expansion: what any later walk of the value costs
MAX_YAML_NUMBER_CHARS = 100  # longer int/float scalars stay text (sexagesimal ints are quadratic to build)
MAX_INT_BITS = 12_000  # ~3,600 digits: below CPython's 4,300-digit int<->str limit
MAX_EVIDENCE_CHARS = 4096  # one string in a finding's evidence (a token, a line, a value)
# Evidence keys whose text an analyser already cut to its own bound: a code diff (remote_code.MAX_DIFF_CHARS,
# 20,000 characters), a template's text or rendered diff (chat_template: 40 lines of 240 characters).
EVIDENCE_DIFF_KEYS = frozenset({"diff", "text_diff", "rendered_diff"})
MAX_EVIDENCE_DIFF_CHARS = 24_000


_NOT_SKELETON = bytes(b for b in range(256) if b not in b'"[]{}')


class UntrustedInput(ValueError):
    """Input refused by a bound (depth, count, size), not because it is malformed."""


class NestedTooDeep(UntrustedInput):
    """Refused for its nesting depth (what a recursive parser or walker would die of)."""


class TooManyItems(UntrustedInput):
    """Refused for its size in elements: possibly valid, but too large to analyse."""


def check_json_shape(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH,
                     max_items: int = MAX_JSON_ITEMS) -> None:
    """Raise ``UntrustedInput`` if the JSON text nests deeper than ``max_depth`` or has too many items.

    Linear, in C but for one pass over the brackets, and a few copies of the input at most
    (a regex substitution per string cost ~200 bytes per string: 650 MB for 3 M keys):

    * items are commas, ``[`` and ``{`` counted over the whole text, those inside strings
      too: an upper bound, exact for real files, checked before anything else;
    * for depth, escapes are removed (``\\\\`` pairs, then ``\\"``), so quotes delimit strings
      exactly; the text is cut to its quotes and brackets, runs of quotes to their parity
      (a bracket-free string vanishes, which moves no bracket in or out of a string), and
      the brackets left are walked with a flag for "inside a string".

    Malformed text is left for the parser to reject.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    items = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if items > max_items:
        raise TooManyItems(f"JSON with more than {max_items:,} elements")
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = raw.translate(None, _NOT_SKELETON).replace(b'""', b"")
    depth = 0
    inside = False
    for byte in skeleton:
        if byte == 0x22:  # "
            inside = not inside
        elif inside:
            continue
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > max_depth:
                raise NestedTooDeep(f"JSON nested deeper than {max_depth} levels")
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
    Integers too long for ``str()`` become a short description, mapping keys that JSON
    cannot hold become strings, tuples and sets become lists: the result always passes
    ``json.dumps(..., allow_nan=False)`` when its leaves are JSON types.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        return f"<integer of {value.bit_length()} bits>"
    if isinstance(value, dict):
        return {_json_key(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    return value


def cap_strings(value: Any, limit: int = MAX_EVIDENCE_CHARS) -> Any:
    """``value`` with every string (mapping keys too) longer than ``limit`` characters cut to ``limit``
    characters that end in ``… (N characters in all)``; the rest as it is (so capping twice is capping
    once). A finding's evidence goes through it: a 6 MB token is 4 KiB in the finding, its size stated."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        suffix = f"… ({len(value):,} characters in all)"
        return value[:max(limit - len(suffix), 0)] + suffix
    if isinstance(value, dict):
        return {cap_strings(k, limit): cap_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [cap_strings(v, limit) for v in value]
    if isinstance(value, tuple):
        return tuple(cap_strings(v, limit) for v in value)
    return value


def cap_evidence(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """A finding's evidence with its strings capped (:func:`cap_strings`): ``MAX_EVIDENCE_CHARS`` each, or
    ``MAX_EVIDENCE_DIFF_CHARS`` under the keys of ``EVIDENCE_DIFF_KEYS``, whose diffs are already bounded."""
    return {cap_strings(key): cap_strings(value, MAX_EVIDENCE_DIFF_CHARS if key in EVIDENCE_DIFF_KEYS
                                          else MAX_EVIDENCE_CHARS) for key, value in evidence.items()}


def _json_key(key: Any) -> Any:
    if isinstance(key, str) or key is None or isinstance(key, bool):
        return key
    if isinstance(key, (int, float)):
        safe = json_safe(key)
        return safe if isinstance(safe, str) else key
    return str(key)


def count_items(value: Any, limit: int) -> int:
    """Containers and leaves in ``value``, counted without recursion; stops just past ``limit``.

    A value whose count exceeds ``limit`` is too large to walk element by element
    (a structured diff, a rendering): callers summarise it instead.
    """
    count = 0
    stack: list[Any] = [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
            count += len(item)  # the keys
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return count


# --------------------------------------------------------------------------- YAML


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader whose composer bounds nesting depth and expanded size (aliases counted in full).

    PyYAML's scanner and parser are iterative; only the composer and constructor recurse,
    once per nesting level, so refusing depth in ``compose_node`` keeps both shallow.
    Sizes are computed bottom-up as nodes complete: a node is 1 plus its children, an
    alias counts the whole node it names, so nine aliases of nine aliases of ... are
    refused at the level where the product first passes ``max_nodes``.
    """

    max_depth = MAX_YAML_DEPTH
    max_nodes = MAX_YAML_NODES

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:
                raise UntrustedInput("YAML alias refers to a node that contains it (recursive alias)")
            return node
        self._depth += 1
        if self._depth > self.max_depth:
            raise NestedTooDeep(f"YAML nested deeper than {self.max_depth} levels")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = 1 + sum(self._sizes[id(child)] for child in _children(node))
        if size > self.max_nodes:
            raise UntrustedInput(f"YAML expands to more than {self.max_nodes:,} nodes (aliases counted in full)")
        self._sizes[id(node)] = size
        return node

    def construct_yaml_int(self, node: Any) -> Any:
        if len(str(node.value)) > MAX_YAML_NUMBER_CHARS:
            return str(node.value)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: Any) -> Any:
        if len(str(node.value)) > MAX_YAML_NUMBER_CHARS:
            return str(node.value)
        return super().construct_yaml_float(node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)
_BoundedLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLoader.construct_yaml_float)


def _children(node: Any) -> Iterator[Any]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


def load_yaml(text: str, *, max_bytes: int = MAX_YAML_BYTES, max_depth: int = MAX_YAML_DEPTH,
              max_nodes: int = MAX_YAML_NODES) -> Any:
    """One YAML document, safely: no Python tags, depth and alias expansion bounded.

    Raises ``UntrustedInput`` for a bound passed and ``yaml.YAMLError`` for malformed text.
    Numbers longer than ``MAX_YAML_NUMBER_CHARS`` characters are kept as their text.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise UntrustedInput(f"YAML of {size:,} bytes is over the {max_bytes:,}-byte limit")
    loader = _BoundedLoader(text)
    loader.max_depth, loader.max_nodes = max_depth, max_nodes
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def json_object(data: bytes | None) -> dict[str, Any] | None:
    """A JSON object from untrusted bytes, or None when absent, malformed, refused by a bound or not an object."""
    if data is None:
        return None
    try:
        value = loads_json(data)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


SAFETENSORS_FIRST_READ = 100_000  # one range read holds the length prefix and most headers


def read_safetensors_header(read: Callable[[int, int], bytes], path: str, *, max_bytes: int) -> dict[str, Any]:
    """The JSON header of a safetensors file through ``read(offset, length)``: one range read, two past 100 kB.

    Raises :class:`~tracker.core.errors.UpstreamFileError` when the file is too short, the header is
    over ``max_bytes``, cut off, not JSON, or not an object.
    """
    first = read(0, SAFETENSORS_FIRST_READ)
    if len(first) < 8:
        raise UpstreamFileError(path, "not a safetensors file (shorter than 8 bytes)")
    length = int.from_bytes(first[:8], "little")
    if length > max_bytes:
        raise HeaderTooLarge(path, f"safetensors header of {length:,} bytes is over the {max_bytes:,}-byte cap")
    raw = first[8 : 8 + length] if 8 + length <= len(first) else read(8, length)
    if len(raw) != length:
        raise UpstreamFileError(path, f"safetensors header truncated ({len(raw)} of {length} bytes)")
    try:
        header = loads_json(raw)
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError and UntrustedInput alike
        raise UpstreamFileError(path, f"safetensors header is unreadable: {exc}") from exc
    if not isinstance(header, dict):
        raise UpstreamFileError(path, "safetensors header is not a JSON object")
    return header
