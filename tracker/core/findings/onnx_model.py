"""An ONNX model's IR version, opsets and graph inputs/outputs, read by range requests within a window.

A ModelProto is ``ir_version`` (1), ..., ``graph`` (7), ``opset_import`` (8); serialisers write
fields in number order, so the opsets come *after* the graph, and inside the GraphProto the
``input`` (11) and ``output`` (12) lists come after the nodes (1) and initializers (5), which
hold the weights of a model without external data (hundreds of MB). Nothing is downloaded in
full: the reader walks the fields' keys and length prefixes and *jumps* over every field it does
not need (nodes, initializers, doc strings), fetching only small windows around the keys. After a
jump it reads 4 KiB; while it keeps reading in sequence (many small nodes) the window doubles,
up to 256 KiB (a short jump, past fields smaller than four windows, counts as reading on). The
walk is capped in bytes fetched, requests and fields: a graph whose inputs sit beyond the cap (say 100,000 nodes) is :class:`OnnxNotRead`, never a stall. Each length
prefix is checked against its enclosing message; malformed bytes are a
:class:`~tracker.core.findings.protobuf.ProtobufError`. Pure given ``read``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tracker.core.findings.protobuf import ProtobufError, as_text, fields

MAX_READ_BYTES = 8 * 1024 * 1024  # fetched in all, per file
MAX_REQUESTS = 512
MAX_FIELDS = 500_000  # keys walked at the model and graph level
MAX_VALUE_INFO_BYTES = 64 * 1024  # one input/output description
MAX_OPSET_BYTES = 4096
MAX_IOS = 1000  # inputs (or outputs) kept
MAX_DIMS = 64
FIRST_WINDOW = 4096
MAX_WINDOW = 256 * 1024
SHORT_JUMP_WINDOWS = 4

ELEM_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
              9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64",
              15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
              20: "float8e5m2fnuz", 21: "uint4", 22: "int4"}


class OnnxNotRead(Exception):
    """The fields wanted lie beyond the read cap: what was asked is not known (not the file's fault)."""


class _Window:
    """Byte access to a remote file through ``read(offset, length)``, one growing window at a time."""

    def __init__(self, read: Callable[[int, int], bytes], size: int, max_bytes: int, max_requests: int) -> None:
        self.read, self.size = read, size
        self.max_bytes, self.max_requests = max_bytes, max_requests
        self.start, self.data = 0, b""
        self.fetched = self.requests = 0
        self.next_window = FIRST_WINDOW

    def _fetch(self, pos: int, need: int) -> None:
        # reading on (small fields straddle the window's end, the next key lies just past it) grows the
        # window, and so does a short jump (within four windows: a flood of 17 KiB fields costs a request
        # per 256 KiB, not one per field); a jump over a large field starts small again
        end = self.start + len(self.data)
        sequential = end <= pos <= end + SHORT_JUMP_WINDOWS * self.next_window
        self.next_window = min(self.next_window * 2, MAX_WINDOW) if sequential else FIRST_WINDOW
        length = min(max(need, self.next_window), self.size - pos)
        if self.requests + 1 > self.max_requests or self.fetched + length > self.max_bytes:
            raise OnnxNotRead(f"the graph's inputs and outputs lie beyond the read cap "
                              f"({self.max_bytes:,} bytes in {self.max_requests:,} requests; "
                              f"{self.fetched:,} bytes read, stopped at byte {pos:,} of {self.size:,})")
        data = self.read(pos, length)
        if len(data) != length:
            raise ProtobufError(f"asked for {length:,} bytes at {pos:,}, got {len(data):,}")
        self.requests += 1
        self.fetched += length
        self.start, self.data = pos, data

    def take(self, pos: int, length: int) -> bytes:
        if pos + length > self.size:
            raise ProtobufError(f"{length:,} bytes at byte {pos:,} run past the end of the file ({self.size:,})")
        if not (self.start <= pos and pos + length <= self.start + len(self.data)):
            self._fetch(pos, length)
        offset = pos - self.start
        return self.data[offset:offset + length]

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        result = shift = 0
        while True:
            if pos >= end:
                raise ProtobufError(f"varint cut off at byte {pos:,}")
            if shift > 63:
                raise ProtobufError(f"varint longer than 10 bytes at byte {pos:,}")
            byte = self.take(pos, 1)[0]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result, pos
            shift += 7


def _walk(win: _Window, start: int, end: int, budget: list[int], cap: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire, value_start, value_end, varint value) for each field in [start, end); values not read."""
    pos = start
    while pos < end:
        budget[0] -= 1
        if budget[0] < 0:
            raise OnnxNotRead(f"more than {cap:,} fields before the graph's inputs and outputs")
        key, pos = win.varint(pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"field number 0 at byte {pos:,}")
        if wire == 0:
            value, pos = win.varint(pos, end)
            yield number, wire, pos, pos, value
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > end:
                raise ProtobufError(f"field {number}: fixed value cut off at byte {pos:,}")
            yield number, wire, pos, pos + size, 0
            pos += size
        elif wire == 2:
            length, pos = win.varint(pos, end)
            if length > end - pos:
                raise ProtobufError(f"field {number}: length {length:,} runs past the end of its message "
                                    f"({end - pos:,} bytes left at byte {pos:,})")
            yield number, wire, pos, pos + length, 0
            pos += length
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire} at byte {pos:,}")


def _dims(shape: bytes) -> list[int | str]:
    dims: list[int | str] = []
    for d in fields(shape, max_fields=MAX_DIMS + 1):
        if d.number != 1 or not isinstance(d.value, bytes):
            continue
        if len(dims) >= MAX_DIMS:
            raise ProtobufError(f"more than {MAX_DIMS} dimensions")
        dim: int | str = "?"
        for part in fields(d.value, max_fields=16):
            if part.number == 1 and isinstance(part.value, int):
                dim = part.value - (1 << 64) if part.value >= 1 << 63 else part.value
            elif part.number == 2:
                dim = as_text(part.value)
        dims.append(dim)
    return dims


def _value_info(data: bytes) -> dict[str, Any]:
    """A ValueInfoProto: ``{"name", "type", "shape"}`` (type and shape None for a non-tensor)."""
    name, elem, shape = "", None, None
    for f in fields(data, max_fields=64):
        if f.number == 1:
            name = as_text(f.value)
        elif f.number == 2 and isinstance(f.value, bytes):
            for t in fields(f.value, max_fields=64):
                if t.number == 1 and isinstance(t.value, bytes):  # tensor_type
                    for part in fields(t.value, max_fields=64):
                        if part.number == 1 and isinstance(part.value, int):
                            elem = ELEM_TYPES.get(part.value, str(part.value))
                        elif part.number == 2 and isinstance(part.value, bytes):
                            shape = _dims(part.value)
    return {"name": name, "type": elem, "shape": shape}


def read_onnx_model(
    read: Callable[[int, int], bytes], size: int, *,
    max_bytes: int = MAX_READ_BYTES, max_requests: int = MAX_REQUESTS, max_fields: int = MAX_FIELDS,
) -> dict[str, Any]:
    """``{"ir_version", "opsets": {domain: version}, "inputs": [...], "outputs": [...]}`` of a ``.onnx`` file.

    ``read(offset, length)`` returns that many bytes of the file of ``size`` bytes. Raises
    :class:`OnnxNotRead` past the caps, ProtobufError on malformed bytes.
    """
    win = _Window(read, size, max_bytes, max_requests)
    budget = [max_fields]
    ir_version: int | None = None
    opsets: dict[str, int] = {}
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    graphs = 0

    def small(start: int, end: int, cap: int, what: str) -> bytes:
        if end - start > cap:
            raise ProtobufError(f"{what} of {end - start:,} bytes at byte {start:,}, over the {cap:,}-byte cap")
        return win.take(start, end - start)

    for number, wire, start, end, value in _walk(win, 0, size, budget, max_fields):
        if number == 1 and wire == 0:
            ir_version = value
        elif number == 8 and wire == 2:
            domain, version = _opset(small(start, end, MAX_OPSET_BYTES, "an opset_import"))
            if version is not None and len(opsets) < 256:
                opsets[domain] = version
        elif number == 7 and wire == 2:
            graphs += 1
            if graphs > 1:
                raise ProtobufError("more than one graph")
            for g_number, g_wire, g_start, g_end, _ in _walk(win, start, end, budget, max_fields):
                if g_number in (11, 12) and g_wire == 2:
                    target = inputs if g_number == 11 else outputs
                    if len(target) >= MAX_IOS:
                        raise ProtobufError(f"more than {MAX_IOS:,} graph {'inputs' if g_number == 11 else 'outputs'}")
                    target.append(_value_info(small(g_start, g_end, MAX_VALUE_INFO_BYTES, "a graph input/output")))
    if ir_version is None and graphs == 0:
        raise ProtobufError("no ir_version and no graph: not an ONNX model")
    return {"ir_version": ir_version, "opsets": opsets, "inputs": inputs, "outputs": outputs,
            "bytes_read": win.fetched, "requests": win.requests}


def _opset(data: bytes) -> tuple[str, int | None]:
    """An ``OperatorSetIdProto``: its domain (default ``ai.onnx``) and version."""
    domain, version = "ai.onnx", None
    for f in fields(data, max_fields=16):
        if f.number == 1:
            domain = as_text(f.value) or "ai.onnx"
        elif f.number == 2 and isinstance(f.value, int):
            version = f.value
    return domain, version


def describe(io: dict[str, Any]) -> str:
    """``input_ids int64[batch_size, sequence_length]``."""
    shape = "" if io["shape"] is None else "[" + ", ".join(str(d) for d in io["shape"]) + "]"
    return f"{io['name']} {io['type'] or '?'}{shape}"
