"""HubSources: the reader a revision's inputs are fetched through, from the Hub and the blob cache.

The analysers never see it: ``tracker/pipeline/analysis.py`` plans what they read, fetches each
input through this reader and hands them a frozen ``RevisionInputs`` (``tracker/core/findings/inputs.py``).

Small files are content-addressed by blob id in the store, so each version
of a file is fetched from the Hub once, whichever revision asks for it.
Failures (too large, cut off, malformed) are recorded in ``problems`` and the
read returns None; the processor turns problems into findings. Transient Hub
failures (unavailable, rate limited, the poll's deadline) are not the file's
fault: while ``strict`` they propagate, so the revision stays pending and is read
again on the next poll; the processor turns ``strict`` off after a revision has
failed that way too often, so no file can keep a revision pending forever.

Each revision's analysis has a :class:`RevisionBudget` (``[limits] revision_requests``,
``revision_header_bytes``, ``revision_cpu``): every range read spends one request of it
(:meth:`HubSources.range_reader` is the one way to read a range), parsed headers are kept
in a :class:`HeaderCache` evicted by size, and a parse is not started once the CPU time is
spent. What does not fit is recorded in ``budget.skipped`` (the processor's
``analysis.budget_exceeded``), never raised to the planner.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Any

from tracker.core.bounded import read_safetensors_header
from tracker.core.errors import (
    BudgetExceeded,
    HeaderTooLarge,
    HubError,
    HubRateLimited,
    HubUnavailable,
    UpstreamFileError,
)
from tracker.core.model import FileEntry, RepoId, Snapshot
from tracker.pipeline.ports import BlobCache, HubReader

MiB = 1024 * 1024
# What a parsed header costs in memory, per byte read: a GGUF header of 1M tensors (40 MB) parses to
# about 230 MB, some 7 times its bytes, and its read buffer is one more; a safetensors header's JSON
# takes a few times its size. An ONNX summary or a pickle's globals are bounded by their readers' caps
# (1,000 inputs and outputs, the imports listed).
GGUF_EXPANSION = 8
JSON_EXPANSION = 8
SMALL_PARSE_BYTES = 256 * 1024
MAX_SKIPPED_LISTED = 50  # what a budget finding names; the count is always whole


@dataclass
class RevisionBudget:
    """What one revision's analysis may spend: range requests, parsed-header memory, CPU time.

    ``spend_request`` raises :class:`BudgetExceeded` once ``requests`` are spent; ``allows``
    says whether CPU time is left (``cpu_clock`` is this thread's CPU time: the revision is
    analysed in one thread). Everything refused is in ``skipped``: {budget: [what, ...]}.
    """

    requests: int = 200
    header_bytes: int = 256 * MiB
    cpu_seconds: float = 60.0
    cpu_clock: Callable[[], float] = time.thread_time
    spent_requests: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)
    skipped_count: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._cpu_start = self.cpu_clock()

    def spend_request(self, what: str) -> None:
        """Count one range request for ``what``; BudgetExceeded (recorded) when none is left."""
        if self.spent_requests >= self.requests:
            raise self.exceeded("requests", what)
        self.spent_requests += 1

    @property
    def requests_left(self) -> int:
        return self.requests - self.spent_requests

    def cpu_used(self) -> float:
        return self.cpu_clock() - self._cpu_start

    def allows(self, what: str) -> bool:
        """True while CPU time is left; False (and ``what`` recorded as skipped) once it is spent."""
        if self.cpu_used() < self.cpu_seconds:
            return True
        self.skip("cpu", what)
        return False

    def skip(self, budget: str, what: str) -> None:
        listed = self.skipped.setdefault(budget, [])
        if what in listed:
            return
        self.skipped_count[budget] = self.skipped_count.get(budget, 0) + 1
        if len(listed) < MAX_SKIPPED_LISTED:
            listed.append(what)

    def exceeded(self, budget: str, what: str) -> BudgetExceeded:
        self.skip(budget, what)
        return BudgetExceeded(budget, what)


class HeaderCache:
    """Parsed headers by (content id, kind), least recently used evicted first to stay within ``limit`` bytes.

    ``cost`` is the caller's estimate of a parse's memory; a parse larger than the whole limit is not kept.
    ``parses`` counts the parses stored by kind (one per content, however many paths share it).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.parses: dict[str, int] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def get(self, key: Hashable) -> Any:
        value, _ = self._items[key]
        self._items.move_to_end(key)
        return value

    def put(self, key: Hashable, value: Any, cost: int, kind: str) -> None:
        self.parses[kind] = self.parses.get(kind, 0) + 1
        if key in self._items:
            self.used -= self._items.pop(key)[1]
        if cost > self.limit:
            return
        while self._items and self.used + cost > self.limit:
            self.used -= self._items.popitem(last=False)[1][1]
        self._items[key] = (value, cost)
        self.used += cost


@dataclass(eq=False)
class HubSources:
    """The two sides of one revision's analysis, read lazily from the Hub through the blob cache."""

    hub: HubReader
    store: BlobCache
    repo: RepoId
    revisions: dict[str, tuple[str, Snapshot] | None]  # side -> (sha, snapshot)
    _: KW_ONLY
    max_file_bytes: int
    max_header_bytes: int
    now: Callable[[], datetime]
    strict: bool = True
    budget: RevisionBudget = field(default_factory=RevisionBudget)
    problems: list[dict[str, Any]] = field(default_factory=list, init=False)
    # (requests, bytes) per side for weight deltas: [limits] weight_compare_*, set by the Processor
    weight_compare: tuple[int, int] = (64, 16 * 1024 * 1024)

    def __post_init__(self) -> None:
        self.headers = HeaderCache(self.budget.header_bytes)
        self.weight_spent = {"old": [0, 0], "new": [0, 0]}  # side -> [requests, bytes] sent comparing weights
        self._ranges: dict[tuple[str, str, int, int], bytes] = {}

    def allows(self, what: str) -> bool:
        """Whether the revision's CPU time allows ``what`` to run (see :class:`RevisionBudget`)."""
        return self.budget.allows(what)

    def range_reader(self, sha: str, path: str, fetched: list[int] | None = None) -> Callable[[int, int], bytes]:
        """``read(offset, length)`` of ``path`` at ``sha``: one range request, spent from the revision's budget.

        Raises :class:`BudgetExceeded` (recorded in ``budget.skipped``) when no request is left;
        ``fetched[0]``, when given, adds up the bytes read.
        """

        def read(offset: int, length: int) -> bytes:
            self.budget.spend_request(f"range reads of {path}")
            data = self.hub.read_range(self.repo, sha, path, offset, offset + length - 1)
            if fetched is not None:
                fetched[0] += len(data)
            return data

        return read

    def _entry(self, side: str, path: str) -> tuple[str, FileEntry] | None:
        """The side's commit and the file's entry there, or None when the side or the file is absent."""
        rev = self.revisions.get(side)
        entry = rev[1].get(path) if rev is not None else None
        return None if rev is None or entry is None else (rev[0], entry)

    def _check_transient(self, exc: BaseException) -> None:
        """Re-raise a transient Hub failure (strict mode): the revision is read again later."""
        if self.strict and isinstance(exc, (HubUnavailable, HubRateLimited)):
            raise exc

    def _problem(self, side: str, path: str, reason: str) -> None:
        item = {"side": side, "path": path, "reason": reason}
        if item not in self.problems:
            self.problems.append(item)

    def text(self, side: str, path: str) -> bytes | None:
        found = self._entry(side, path)
        if found is None:
            return None
        sha, entry = found
        cached = self.store.get_blob(entry.content_id)
        if cached is not None:
            return cached
        if entry.size > self.max_file_bytes:
            self._problem(side, path, f"{entry.size:,} bytes is over the {self.max_file_bytes:,}-byte cap")
            return None
        try:
            data = self.hub.read_file(self.repo, sha, path, max_bytes=self.max_file_bytes)
        except (UpstreamFileError, HubError) as exc:
            self._check_transient(exc)
            self._problem(side, path, str(exc))
            return None
        self.store.put_blob(entry.content_id, data, now=self.now())
        return data

    def safetensors_header(self, side: str, path: str) -> dict[str, Any] | None:
        found = self._entry(side, path)
        if found is None or not path.lower().endswith(".safetensors"):
            return None
        sha, entry = found
        key = (entry.content_id, "safetensors")
        if key in self.headers:
            cached: dict[str, Any] | None = self.headers.get(key)
            return cached
        if not self.allows(f"the safetensors header of {path}"):
            return None
        cap = min(self.max_header_bytes, self.budget.header_bytes // JSON_EXPANSION)
        fetched = [0]
        try:
            header: dict[str, Any] | None = read_safetensors_header(self.range_reader(sha, path, fetched), path,
                                                                    max_bytes=cap)
        except BudgetExceeded:
            return None
        except HeaderTooLarge as exc:
            if cap < self.max_header_bytes:
                self.budget.skip("header_bytes", f"the safetensors header of {path} ({exc.reason})")
                return None
            self._problem(side, path, str(exc))
            header = None
        except (UpstreamFileError, HubError) as exc:
            self._check_transient(exc)
            self._problem(side, path, str(exc))
            header = None
        self.headers.put(key, header, fetched[0] * JSON_EXPANSION, "safetensors")
        return header

    def gguf_header(self, side: str, path: str) -> dict[str, Any] | None:
        """A GGUF file's metadata and tensor infos, read by range requests (never tensor data).

        Cached by content id; the read stops at ``tracker.core.findings.gguf.MAX_HEADER_BYTES``, or
        sooner when its parse would not fit the revision's header memory (``budget.skipped``).
        """
        found = self._entry(side, path)
        if found is None or not path.lower().endswith(".gguf"):
            return None
        sha, entry = found
        from tracker.core.findings.gguf import MAX_HEADER_BYTES, GGUFError, GGUFTooLarge, read_gguf_header

        key = (entry.content_id, "gguf")
        if key in self.headers:
            cached: dict[str, Any] | None = self.headers.get(key)
            return cached
        if not self.allows(f"the GGUF header of {path}"):
            return None
        cap = min(MAX_HEADER_BYTES, self.budget.header_bytes // GGUF_EXPANSION)
        fetched = [0]
        try:
            header: dict[str, Any] | None = read_gguf_header(self.range_reader(sha, path, fetched), entry.size,
                                                             max_bytes=cap)
        except BudgetExceeded:
            return None
        except GGUFTooLarge as exc:
            if cap < MAX_HEADER_BYTES:
                self.budget.skip("header_bytes", f"the GGUF header of {path} ({exc})")
                return None
            self._problem(side, path, f"GGUF header unreadable: {exc}")
            header = None
        except (UpstreamFileError, HubError, GGUFError) as exc:
            self._check_transient(exc)
            self._problem(side, path, f"GGUF header unreadable: {exc}")
            header = None
        size = header.get("header_bytes", fetched[0]) if header is not None else fetched[0]
        self.headers.put(key, header, int(size) * GGUF_EXPANSION, "gguf")
        return header

    def onnx_model(self, side: str, path: str) -> dict[str, Any] | None:
        """A ``.onnx`` file's IR version, opsets and graph inputs/outputs, by windowed range reads.

        Bounded by :mod:`tracker.core.findings.onnx_model`'s caps (bytes fetched, requests, fields): the
        weights are jumped over, never fetched. Past the caps ``{"not_read": why}``; malformed
        bytes ``{"malformed": why}``; both are the analyser's findings, not read problems.
        """
        found = self._entry(side, path)
        if found is None or not path.lower().endswith(".onnx"):
            return None
        sha, entry = found
        from tracker.core.findings.onnx_model import OnnxNotRead, read_onnx_model
        from tracker.core.findings.protobuf import ProtobufError

        key = (entry.content_id, "onnx")
        if key in self.headers:
            cached: dict[str, Any] | None = self.headers.get(key)
            return cached
        if not self.allows(f"the ONNX model of {path}"):
            return {"not_read": f"the revision's budget of {self.budget.cpu_seconds:g} s of CPU time "
                                "([limits] revision_cpu) is spent"}
        model: dict[str, Any] | None
        try:
            model = read_onnx_model(self.range_reader(sha, path), entry.size)
        except BudgetExceeded:
            return {"not_read": f"the revision's budget of {self.budget.requests:,} range requests "
                                "([limits] revision_requests) is spent"}
        except OnnxNotRead as exc:
            model = {"not_read": str(exc)}
        except ProtobufError as exc:
            model = {"malformed": str(exc)}
        except (UpstreamFileError, HubError) as exc:
            self._check_transient(exc)
            self._problem(side, path, f"ONNX model unreadable: {exc}")
            model = None
        self.headers.put(key, model, SMALL_PARSE_BYTES, "onnx")
        return model

    def pickle_globals(self, side: str, path: str) -> list[tuple[str, str]] | None:
        """The globals a pickle-bearing file imports, from range reads (4 bytes, then 512 unless it is a zip).

        Which files, and how strictly, is :func:`tracker.core.findings.weights.pickle_kind`: a name
        a loader unpickles that cannot be scanned is a problem; a container (``.npy``, ``.npz``,
        ``.zip``) may hold no pickle; an LFS file judged by content alone that is no pickle is
        simply not one. The result is a :class:`~tracker.core.findings.picklescan_zip.PickleGlobals`:
        a partial scan returns what it found with ``incomplete`` set, so a cap never hides a
        dangerous import.
        """
        from tracker.core.findings.picklescan_zip import PickleGlobals, scan_checkpoint
        from tracker.core.findings.weights import pickle_kind, scan_options

        found = self._entry(side, path)
        if found is None:
            return None
        sha, entry = found
        rev = self.revisions.get(side)
        kind = pickle_kind(path, entry, has_file=lambda p: rev is not None and rev[1].get(p) is not None)
        if kind is None:
            return None
        if not self.allows(f"the pickle scan of {path}"):
            return None
        try:
            return scan_checkpoint(
                self.range_reader(sha, path),
                entry.size, **scan_options(path, kind),
            )
        except BudgetExceeded:
            return None
        except (UpstreamFileError, HubError, ValueError) as exc:
            self._check_transient(exc)
            if kind == "content" and isinstance(exc, ValueError):
                return PickleGlobals([], None, holds_pickle=False)
            self._problem(side, path, f"pickle scan failed: {exc}")
            return None

    def weight_budget(self) -> tuple[int, int]:
        """``[limits] weight_compare_requests`` and ``weight_compare_bytes``: what each side may spend."""
        return self.weight_compare

    def read_ranges(self, side: str, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes] | None:
        """Weight-file bytes at ``(start, length)`` ranges, one range request each, cached by content id.

        A range read before (another analyser measuring the same checkpoint) costs nothing; the rest
        must fit what is left of the side's comparison budget and of the revision's request budget,
        or nothing more is read.
        """
        found = self._entry(side, path)
        if found is None or side not in self.weight_spent:
            return None
        sha, entry = found
        keys = [(entry.content_id, path, start, length) for start, length in ranges]
        missing = [key for key in dict.fromkeys(keys) if key not in self._ranges]
        spent, (max_requests, max_bytes) = self.weight_spent[side], self.weight_compare
        if spent[0] + len(missing) > max_requests or spent[1] + sum(k[3] for k in missing) > max_bytes:
            return None
        if len(missing) > self.budget.requests_left:
            self.budget.skip("requests", f"the weight comparison of {path}")
            return None
        for key in missing:
            start, length = key[2], key[3]
            if length <= 0 or start < 0 or start + length > entry.size:
                return None
            try:
                self.budget.spend_request(f"the weight comparison of {path}")
                data = self.hub.read_range(self.repo, sha, path, start, start + length - 1)
            except BudgetExceeded:
                return None
            except (UpstreamFileError, HubError) as exc:
                self._check_transient(exc)
                self._problem(side, path, f"weight comparison read failed: {exc}")
                return None
            spent[0] += 1
            spent[1] += len(data)
            self._ranges[key] = data
        return [self._ranges[key] for key in keys]
