"""Weight deltas, measured: what a re-uploaded safetensors checkpoint's numbers did, from sampled byte ranges.

A new content hash says only that some byte changed. When the two revisions' checkpoints list
the same tensors (names and shapes; dtypes equal, or both floating point), this module reads
corresponding element ranges of each tensor's data from both revisions, by range requests, and
measures the difference:

* every sample identical: the file was re-saved (header metadata, tensor order or sharding
  changed, the numbers did not);
* a float dtype conversion whose error is within the narrower dtype's rounding: a conversion;
* otherwise the values changed, with the relative L2 change per sampled tensor and overall.

**Where the bytes are.** A safetensors file is ``u64 header length, JSON header, data``, and the
data section is exactly covered by the tensors' ``data_offsets`` (the format refuses a file with
bytes left over), so the data starts at ``file size - largest end offset``: the tree listing's
size and the parsed header are enough to place every tensor, with no extra read.

**What is read.** A per-revision budget (``[limits] weight_compare_requests`` and
``weight_compare_bytes``, :class:`Budget`) bounds each side's requests and bytes. The plan first
covers every tensor with two small windows, its first and last :data:`EDGE_BYTES` (a tensor
smaller than both is read whole); as tensors lie back to back, the tail of one and the head of
the next are one range, so a request usually covers two to four tensors. Requests left over read
windows inside the largest tensors at spread offsets (the middle, then the quarters, ...). When
even the edges of every tensor do not fit, an evenly spread subset of the tensors is covered.
Both revisions read the same elements, so a re-save, a conversion or a new order of tensors
compares element for element. The plan depends only on the two headers and the budget, so two
analysers that measure the same checkpoint ask for the same ranges (the reader's cache serves the second).

**GGUF.** :func:`gguf_placements` places a GGUF file's tensors from its parsed header, counted in blocks
of their quantization type; F32, F16, BF16 and Q8_0 are decoded, the other block formats compared block
by block.

Pure: reads only through ``inputs``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tracker.core.estimate.checkpoint import MAX_TENSOR_DIM, MAX_TENSOR_DIMS
from tracker.core.findings.gguf_types import BLOCK_SIZES

EDGE_BYTES = 16 * 1024
"""Bytes read at each end of every tensor (a tensor of up to twice this is read whole)."""
MERGE_GAP = 4 * 1024
"""Windows this close in a file are read by one request (the bytes between them are cheaper than a request)."""
MAX_INTERIOR_PER_TENSOR = 8
"""Spread windows inside one tensor at most, so that the leftover budget reaches many tensors."""
MAX_LISTED = 20
"""Tensors listed per measurement in evidence (most moved first); counts are always exact."""

NUMPY_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",  # BF16 is widened by hand (numpy has no bfloat16)
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1",
    "BOOL": "u1",
}
ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
            "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
FLOATS = ("F64", "F32", "F16", "BF16")
INTEGERS = ("I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL")
UNIT_ROUNDOFF = {"F64": 2.0 ** -53, "F32": 2.0 ** -24, "F16": 2.0 ** -11, "BF16": 2.0 ** -8}
"""Largest relative error of rounding to nearest into each float dtype (half a unit in the last place)."""
SMALLEST_NORMAL = {"F64": 2.2250738585072014e-308, "F32": 1.1754943508222875e-38, "F16": 6.103515625e-05,
                   "BF16": 1.1754943508222875e-38}
"""Values below these lose relative precision (subnormals, zero): left out of the largest relative error."""
CONVERSION_SLACK = 2.0
"""A conversion may truncate instead of rounding: its elementwise error is then up to two units of roundoff."""
EMBEDDING_NOISE_L2 = 2e-3
"""Largest per-tensor relative L2 change of an embedding model's weights that is numeric noise.

Measured on the real all-MiniLM-L6-v2 with the real sentence-transformers (``bench/embedding_noise.py``):
converting every tensor to bfloat16 changes them by 1.7e-3 and moves 40 sample embeddings by at most
2.9e-5 in cosine; float16, 2.1e-4 and 4.8e-7; random noise of 1e-3, 1.1e-5. From 3e-3 the moves grow with
the square of the change (1e-4 at 3e-3, 1e-3 at 1e-2, 1e-2 at 3e-2): a change larger than the rounding of
the coarsest float dtype in use is a change of the model, not of its storage.
"""


@dataclass(frozen=True)
class Budget:
    """What one revision's reads may spend comparing weights: requests and bytes, per side."""

    requests: int
    bytes: int

    def share(self, parts: int) -> Budget:
        """An equal share when ``parts`` checkpoints are measured in the same revision."""
        parts = max(parts, 1)
        return Budget(self.requests // parts, self.bytes // parts)


@dataclass(frozen=True)
class Placed:
    """Where one tensor's data lies in one file: absolute offset, element count and dtype."""

    path: str
    dtype: str
    start: int
    count: int

    @property
    def itemsize(self) -> int:
        """Bytes of one element (of one block, for a quantized GGUF tensor)."""
        if self.dtype.startswith("gguf:"):
            return BLOCK_SIZES[self.dtype[5:]][1]
        return ITEMSIZE[self.dtype]


@dataclass(frozen=True)
class Window:
    """Elements ``first .. first + count`` of one tensor, read on both sides."""

    tensor: str
    first: int
    count: int


@dataclass(frozen=True)
class Request:
    """One range request: ``length`` bytes at ``start`` of ``path``."""

    path: str
    start: int
    length: int


@dataclass(frozen=True)
class TensorDelta:
    """The measured change of one sampled tensor."""

    name: str
    dtype_old: str
    dtype_new: str
    compared: int  # elements
    total: int
    changed: int  # elements that differ
    sum_sq_old: float
    sum_sq_diff: float
    max_relative_error: float | None  # over elements in the normal range of both dtypes
    decoded: bool = True  # False: compared as bytes only (a quantized GGUF type other than Q8_0, FP8)

    @property
    def identical(self) -> bool:
        return self.changed == 0

    @property
    def relative_l2(self) -> float:
        """``‖new - old‖ / ‖old‖`` over the compared elements (inf when old is all zeros and new is not)."""
        if self.sum_sq_diff == 0:
            return 0.0
        return math.sqrt(self.sum_sq_diff / self.sum_sq_old) if self.sum_sq_old > 0 else math.inf


@dataclass(frozen=True)
class Measurement:
    """Sampled tensors of one checkpoint compared between two revisions, and what reading them cost."""

    tensors: tuple[TensorDelta, ...]
    total_tensors: int
    total_elements: int
    requests: Mapping[str, int]  # side -> range requests planned
    bytes: Mapping[str, int]  # side -> bytes planned
    dtype_changes: tuple[str, ...] = ()  # "F32 → F16", when the checkpoint was converted
    order_changed: bool = False  # the tensors' data lies in another order

    @property
    def largest_relative_l2(self) -> float:
        return max((t.relative_l2 for t in self.tensors if t.decoded), default=0.0)

    @property
    def undecoded_changed(self) -> list[TensorDelta]:
        """Tensors compared as bytes only whose bytes changed: how much, no figure says."""
        return [t for t in self.tensors if not t.decoded and not t.identical]

    @property
    def identical(self) -> bool:
        return all(t.identical for t in self.tensors)

    @property
    def relative_l2(self) -> float:
        """Relative L2 change over every compared element of the decoded non-integer tensors (of all, when none is).

        Integer buffers (``position_ids`` up to 511) would otherwise weigh more than the weights.
        """
        floats = [t for t in self.tensors if t.decoded and t.dtype_old not in INTEGERS and t.dtype_new not in INTEGERS] \
            or [t for t in self.tensors if t.decoded]
        diff = sum(t.sum_sq_diff for t in floats)
        if diff == 0:
            return 0.0
        old = sum(t.sum_sq_old for t in floats)
        return math.sqrt(diff / old) if old > 0 else math.inf

    @property
    def max_relative_error(self) -> float | None:
        errors = [t.max_relative_error for t in self.tensors if t.max_relative_error is not None]
        return max(errors) if errors else None

    @property
    def compared_elements(self) -> int:
        return sum(t.compared for t in self.tensors)

    def within_rounding(self) -> bool:
        """Whether every difference is what converting into the narrower dtype rounds away."""
        if not self.dtype_changes:
            return self.identical
        narrow = {t.dtype_new if UNIT_ROUNDOFF[t.dtype_new] > UNIT_ROUNDOFF[t.dtype_old] else t.dtype_old
                  for t in self.tensors if t.dtype_old in FLOATS and t.dtype_new in FLOATS}
        limit = CONVERSION_SLACK * max((UNIT_ROUNDOFF[d] for d in narrow), default=0.0)
        error = self.max_relative_error
        return error is not None and error <= limit and self.relative_l2 <= limit

    def coverage(self) -> str:
        """``101 of 101 tensors, 1.2% of their elements, 40 requests and 1,310,720 bytes per side``."""
        share = self.compared_elements / self.total_elements if self.total_elements else 0.0
        return (f"{len(self.tensors):,} of {self.total_tensors:,} tensors, {share:.2%} of their elements, "
                f"{max(self.requests.values(), default=0):,} requests and "
                f"{max(self.bytes.values(), default=0):,} bytes per side")

    def most_moved(self) -> list[TensorDelta]:
        return sorted(self.tensors, key=lambda t: (-t.relative_l2, t.name))

    def evidence(self) -> dict[str, Any]:
        """The measurement as a finding's evidence: figures rounded to 3 significant digits."""
        moved = [t for t in self.most_moved() if not t.identical]
        return {
            "tensors_compared": len(self.tensors),
            "tensors_total": self.total_tensors,
            "elements_compared": self.compared_elements,
            "elements_total": self.total_elements,
            "requests": dict(self.requests),
            "bytes": dict(self.bytes),
            "tensors_changed": len(moved),
            "relative_l2": _round(self.relative_l2),
            "max_relative_error": _round(self.max_relative_error),
            "relative_l2_by_tensor": {t.name: _round(t.relative_l2) for t in moved[:MAX_LISTED] if t.decoded},
            **({"blocks_changed_by_tensor": {t.name: _round(t.changed / t.compared) for t in self.undecoded_changed[
                :MAX_LISTED]}} if self.undecoded_changed else {}),
        }


def _round(value: float | None) -> float | str | None:
    if value is None:
        return None
    if math.isinf(value):
        return "inf"  # JSON has no infinity
    return float(f"{value:.3g}")


# ---------------------------------------------------------------------------- placing tensors


def placements(header: Mapping[str, Any], path: str, size: int) -> dict[str, Placed] | None:
    """Each tensor's place in the file, or None when the header does not describe its data exactly."""
    spans: dict[str, tuple[str, int, int, int]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, Mapping):
            return None
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in ITEMSIZE or not isinstance(shape, list) or not isinstance(offsets, list) \
                or not _offsets(offsets) or len(shape) > MAX_TENSOR_DIMS:
            return None
        sane = all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_TENSOR_DIM for d in shape)
        count = math.prod(shape) if sane else -1
        if count < 0 or offsets[1] - offsets[0] != count * ITEMSIZE[dtype]:
            return None
        spans[str(name)] = (dtype, offsets[0], offsets[1], count)
    data_start = size - max((end for _, _, end, _ in spans.values()), default=0)
    if data_start < 8:
        return None
    return {name: Placed(path, dtype, data_start + begin, count) for name, (dtype, begin, _, count) in spans.items()}


def _offsets(value: list[Any]) -> bool:
    return len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in value) \
        and 0 <= value[0] <= value[1]


def comparable(old: Placed, new: Placed) -> bool:
    """Same element count, and the same dtype or two float dtypes (a conversion)."""
    if old.count != new.count:
        return False
    return old.dtype == new.dtype or (old.dtype in FLOATS and new.dtype in FLOATS)


def gguf_placements(header: Mapping[str, Any], path: str, size: int) -> dict[str, Placed] | None:
    """Each tensor's place in a GGUF file (counted in blocks of its quantization type), or None when they do
    not fit the file. The data starts at the header's end, aligned to ``general.alignment`` (32 by default)."""
    tensors, metadata = header.get("tensors"), header.get("metadata") or {}
    alignment = metadata.get("general.alignment", 32) if isinstance(metadata, Mapping) else 32
    end = header.get("header_bytes")
    if not isinstance(tensors, Mapping) or not isinstance(end, int) or not isinstance(alignment, int) \
            or not 0 < alignment <= 1 << 20:
        return None
    data_start = -(-end // alignment) * alignment
    out = {}
    for name, info in tensors.items():
        kind, shape, offset = info.get("type"), info.get("shape"), info.get("offset")
        if kind not in BLOCK_SIZES or not isinstance(offset, int) or not isinstance(shape, list):
            return None
        per_block, block_bytes = BLOCK_SIZES[kind]
        elements = math.prod(shape)
        if elements % per_block or data_start + offset + elements // per_block * block_bytes > size:
            return None
        dtype = kind if per_block == 1 and kind in ITEMSIZE else f"gguf:{kind}"  # F32 is F32; Q4_K counts blocks
        out[str(name)] = Placed(path, dtype, data_start + offset, elements // per_block)
    return out


# ---------------------------------------------------------------------------- planning


Pairs = Mapping[str, tuple[Placed, Placed]]  # tensor -> (old place, new place)


def plan(pairs: Pairs, budget: Budget) -> list[Window]:
    """The windows to read on both sides: every tensor's edges if they fit, then spread interior windows;
    else the most tensor boundaries, evenly spread, with their edges widened into the bytes left."""
    if budget.requests < 1 or budget.bytes < 1 or not pairs:
        return []
    units = _boundaries(pairs)
    every = _windows(pairs, units, EDGE_BYTES)
    if _fits(pairs, every, budget):
        return _add_interior(pairs, every, budget) if every else []
    low, high = 0, len(units)  # fits(spread(low)) holds, fits(spread(high)) does not
    while high - low > 1:
        mid = (low + high) // 2
        if _fits(pairs, _windows(pairs, _spread(units, mid), EDGE_BYTES), budget):
            low = mid
        else:
            high = mid
    chosen, edge = _spread(units, low), EDGE_BYTES
    while edge * 2 <= budget.bytes // budget.requests // 2 and _fits(pairs, _windows(pairs, chosen, edge * 2), budget):
        edge *= 2
    return _windows(pairs, chosen, edge)


Boundary = tuple[str | None, str | None]
"""Two tensors that lie back to back in the new file (the tail of one, the head of the next); None at a file's end."""


def _boundaries(pairs: Pairs) -> list[Boundary]:
    """Every boundary between tensors in the new files, in file order, each file's first head and last tail included."""
    order = sorted(pairs, key=lambda n: (pairs[n][1].path, pairs[n][1].start))
    out: list[Boundary] = []
    previous: str | None = None
    for name in order:
        if previous is not None and pairs[previous][1].path != pairs[name][1].path:
            out.append((previous, None))
            previous = None
        out.append((previous, name))
        previous = name
    return [*out, (previous, None)] if previous is not None else out


def _windows(pairs: Pairs, units: Sequence[Boundary], edge_bytes: int) -> list[Window]:
    """The windows that read ``units`` with edges of ``edge_bytes``, each window once."""
    out: dict[Window, None] = {}
    for tail, head in units:
        if tail is not None:
            out.update(dict.fromkeys(_edges(tail, pairs[tail], edge_bytes)[-1:]))
        if head is not None:
            out.update(dict.fromkeys(_edges(head, pairs[head], edge_bytes)[:1]))
    return list(out)


def _edge_count(pair: tuple[Placed, Placed], edge_bytes: int = EDGE_BYTES) -> int:
    return max(1, edge_bytes // max(pair[0].itemsize, pair[1].itemsize))


def _edges(name: str, pair: tuple[Placed, Placed], edge_bytes: int = EDGE_BYTES) -> list[Window]:
    """The head and tail windows of a tensor, or the whole tensor (one window) when they would meet."""
    count, edge = pair[0].count, _edge_count(pair, edge_bytes)
    if count == 0:
        return []
    if count <= 2 * edge:
        return [Window(name, 0, count)]
    return [Window(name, 0, edge), Window(name, count - edge, edge)]


def _spread(items: Sequence[Boundary], k: int) -> list[Boundary]:
    """``k`` of ``items`` at even intervals, the first and last included."""
    if k <= 0:
        return []
    if k == 1:
        return [items[len(items) // 2]]
    step = (len(items) - 1) / (k - 1)
    return list(dict.fromkeys(items[round(i * step)] for i in range(k)))


def _add_interior(pairs: Pairs, windows: list[Window], budget: Budget) -> list[Window]:
    """Spend what the edges left on windows inside the largest tensors: middle, quarters, eighths..."""
    big = sorted((n for n in {w.tensor for w in windows} if pairs[n][0].count > 2 * _edge_count(pairs[n])),
                 key=lambda n: (-pairs[n][0].count, n))
    cap = budget.bytes // budget.requests
    for fraction in _fractions(MAX_INTERIOR_PER_TENSOR):
        for name in big:
            pair = pairs[name]
            edge = _edge_count(pair)
            count = max(1, min(cap // max(pair[0].itemsize, pair[1].itemsize), pair[0].count - 2 * edge))
            span = pair[0].count - 2 * edge - count
            window = Window(name, edge + int(span * fraction), count)
            if any(w.tensor == name and w.first < window.first + count and window.first < w.first + w.count
                   for w in windows):
                continue  # a small interior: already read
            if _fits(pairs, [*windows, window], budget):
                windows.append(window)
            elif not _fits(pairs, [*windows, Window(name, window.first, 1)], budget):
                return windows  # not even one more request: done
    return windows


def _fractions(n: int) -> list[float]:
    """``0.5, 0.25, 0.75, 0.125, 0.375, ...``: the first ``n`` points of an ever finer spread."""
    out: list[float] = []
    denominator = 2
    while len(out) < n:
        out += [k / denominator for k in range(1, denominator, 2)]
        denominator *= 2
    return out[:n]


def _fits(pairs: Pairs, windows: list[Window], budget: Budget) -> bool:
    for side in (0, 1):
        requests = coalesce(pairs, windows, side, max_length=budget.bytes // budget.requests)
        if len(requests) > budget.requests or sum(r.length for r in requests) > budget.bytes:
            return False
    return True


def coalesce(pairs: Pairs, windows: Iterable[Window], side: int, *, max_length: int) -> list[Request]:
    """The range requests that read ``windows`` on one side (0 old, 1 new), neighbours merged."""
    spans = sorted((pairs[w.tensor][side].path, *_byte_span(pairs[w.tensor][side], w)) for w in windows)
    out: list[Request] = []
    for path, start, end in spans:
        last = out[-1] if out else None
        if last is not None and last.path == path and start - (last.start + last.length) <= MERGE_GAP \
                and max(end, last.start + last.length) - last.start <= max_length:
            out[-1] = Request(path, last.start, max(end, last.start + last.length) - last.start)
        else:
            out.append(Request(path, start, end - start))
    return out


def _byte_span(place: Placed, window: Window) -> tuple[int, int]:
    start = place.start + window.first * place.itemsize
    return start, start + window.count * place.itemsize


# ---------------------------------------------------------------------------- reading and comparing


Reader = Callable[[str, str, Sequence[tuple[int, int]]], Sequence[bytes] | None]
Wanted = Callable[[Sequence[tuple[str, str, Sequence[tuple[int, int]]]]], None]  # (side, path, ranges) read next
"""``(side, path, [(start, length), ...]) -> the bytes of each range``, None when they cannot be read."""


@dataclass
class _Side:
    requests: list[Request]
    data: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (path, start) -> bytes

    def slice(self, place: Placed, window: Window) -> bytes | None:
        start, end = _byte_span(place, window)
        for request in self.requests:
            if request.path == place.path and request.start <= start and end <= request.start + request.length:
                raw = self.data.get((request.path, request.start))
                offset = start - request.start
                return raw[offset:offset + end - start] if raw is not None else None
        return None


def measure(pairs: Pairs, budget: Budget, read: Reader, want: Wanted | None = None) -> Measurement | None:
    """Read the planned windows on both sides and compare them; None when nothing could be compared.

    ``want``, when given, is told every read first, in the order they are then made (old side first).
    """
    windows = plan(pairs, budget)
    if not windows:
        return None
    cap = budget.bytes // budget.requests
    sides = {label: _Side(coalesce(pairs, windows, index, max_length=cap))
             for index, label in enumerate(("old", "new"))}
    if want is not None:
        want([(label, path, [(r.start, r.length) for r in requests])
              for label, side in sides.items() for path, requests in _by_path(side).items()])
    for label, side in sides.items():
        if not _read_side(label, side, read):
            return None
    deltas = _compare(pairs, windows, sides["old"], sides["new"])
    if deltas is None:
        return None
    changes = sorted({f"{o.dtype} → {n.dtype}" for o, n in pairs.values() if o.dtype != n.dtype})
    return Measurement(
        tensors=tuple(deltas), total_tensors=len(pairs), total_elements=sum(o.count for o, _ in pairs.values()),
        requests={label: len(side.requests) for label, side in sides.items()},
        bytes={label: sum(r.length for r in side.requests) for label, side in sides.items()},
        dtype_changes=tuple(changes), order_changed=_order(pairs, 0) != _order(pairs, 1),
    )


def _order(pairs: Pairs, side: int) -> list[str]:
    return sorted(pairs, key=lambda name: (pairs[name][side].path, pairs[name][side].start))


def moves_embeddings(m: Measurement) -> bool:
    """Whether a measured change moves an embedding model's vectors beyond numeric noise."""
    if m.identical or (m.dtype_changes and m.within_rounding()):
        return False
    return bool(m.undecoded_changed) or m.largest_relative_l2 > EMBEDDING_NOISE_L2


def _by_path(side: _Side) -> dict[str, list[Request]]:
    by_path: dict[str, list[Request]] = {}
    for request in side.requests:
        by_path.setdefault(request.path, []).append(request)
    return by_path


def _read_side(label: str, side: _Side, read: Reader) -> bool:
    for path, requests in _by_path(side).items():
        got = read(label, path, [(r.start, r.length) for r in requests])
        if got is None or len(got) != len(requests) or any(len(b) != r.length for b, r in zip(got, requests, strict=True)):
            return False
        side.data.update({(r.path, r.start): b for r, b in zip(requests, got, strict=True)})
    return True


def _compare(pairs: Pairs, windows: list[Window], old: _Side, new: _Side) -> list[TensorDelta] | None:
    by_tensor: dict[str, list[Window]] = {}
    for window in windows:
        by_tensor.setdefault(window.tensor, []).append(window)
    out = []
    for name in sorted(by_tensor):
        place_old, place_new = pairs[name]
        a_parts, b_parts = [], []
        for window in by_tensor[name]:
            a, b = old.slice(place_old, window), new.slice(place_new, window)
            if a is None or b is None:
                return None
            a_parts.append(a)
            b_parts.append(b)
        out.append(_delta(name, place_old, place_new, b"".join(a_parts), b"".join(b_parts)))
    return out


def decode(raw: bytes, dtype: str) -> np.ndarray[Any, np.dtype[np.float64]] | None:
    """The elements as float64, or None for a dtype without a numeric decoding here (FP8, most GGUF quants).

    GGUF ``Q8_0`` is decoded (each block a float16 scale and 32 int8 values): the other block formats pack
    scales and bits in ways that are not worth a second implementation here, and are compared as bytes.
    """
    if dtype == "gguf:Q8_0":
        blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("q", "i1", (32,))]))
        return (blocks["d"].astype(np.float64)[:, None] * blocks["q"].astype(np.float64)).ravel()
    code = NUMPY_DTYPES.get(dtype)
    if code is None:
        return None
    values = np.frombuffer(raw, dtype=code)
    if dtype == "BF16":
        return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return values.astype(np.float64)


def _delta(name: str, old: Placed, new: Placed, a_raw: bytes, b_raw: bytes) -> TensorDelta:
    compared = len(a_raw) // old.itemsize
    a, b = decode(a_raw, old.dtype), decode(b_raw, new.dtype)
    if a is None or b is None:  # no decoding: bytes only, element by element (block by block)
        size = old.itemsize
        changed = sum(a_raw[i:i + size] != b_raw[i:i + size] for i in range(0, len(a_raw), size)) \
            if old.dtype == new.dtype else compared
        return TensorDelta(name, old.dtype, new.dtype, compared, old.count, changed, 0.0, 0.0, None, decoded=False)
    finite = np.isfinite(a) & np.isfinite(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    diff = np.where(finite, b - a, 0.0)
    odd = int(np.count_nonzero(~finite & ~same))  # a NaN or infinity appeared, vanished or moved
    sum_sq_old = float(np.sum(np.where(finite, a, 0.0) ** 2))
    sum_sq_diff = math.inf if odd else float(np.sum(diff ** 2))
    return TensorDelta(name, old.dtype, new.dtype, compared, old.count, int(np.count_nonzero(~same)),
                       sum_sq_old, sum_sq_diff, _max_relative_error(a, diff, finite, old.dtype, new.dtype))


def _max_relative_error(a: np.ndarray[Any, np.dtype[np.float64]], diff: np.ndarray[Any, np.dtype[np.float64]],
                        finite: np.ndarray[Any, np.dtype[np.bool_]], dtype_old: str, dtype_new: str) -> float | None:
    floor = max(SMALLEST_NORMAL.get(dtype_old, 0.0), SMALLEST_NORMAL.get(dtype_new, 0.0))
    normal = finite & (np.abs(a) >= floor) & (np.abs(a) > 0)
    if not np.any(normal):
        return None
    return float(np.max(np.abs(diff[normal]) / np.abs(a[normal])))
