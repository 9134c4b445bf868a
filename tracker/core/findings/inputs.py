"""RevisionInputs: everything one revision's analysers read, fetched before they run. Pure: no I/O.

The analysers read the two sides of a change only through a :class:`RevisionInputs`: small files'
bytes, safetensors headers, the globals a pickle imports, GGUF headers, ONNX models, weight bytes at
ranges, and the budget facts they consult (which analyses the CPU budget allowed, what comparing
weights may spend). Each is held under an :data:`InputKey`, ``(kind, side, path)`` or
``("ranges", side, path, ranges)`` or ``("allows", what)``, with the value the pipeline's reader
gave (None: absent, unreadable, or over a budget; the reader recorded why).

A read of a key the inputs do not hold raises :class:`NotRead` (``strict``, the default): that is
how an analyser says what it wants. The pipeline (``tracker/pipeline/analysis.py``) runs an
analyser on what it holds, fetches the key it lacked and runs it again, round after round, until
it completes; its last run reads nothing it was not given. Past the pipeline's bound on rounds, the
inputs are built with ``strict=False``: a missing key then reads as None and is recorded in
``unplanned`` (the pipeline logs it) rather than failing the revision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, TypeVar

from tracker.core.model import Snapshot

TEXT = "text"
SAFETENSORS = "safetensors"
PICKLE = "pickle"
GGUF = "gguf"
ONNX = "onnx"
RANGES = "ranges"
ALLOWS = "allows"
FILE_KINDS = (TEXT, SAFETENSORS, PICKLE, GGUF, ONNX)  # (kind, side, path)
SIDES = ("old", "new")

T = TypeVar("T")
InputKey = tuple[Any, ...]  # (kind, side, path) | (RANGES, side, path, ((start, length), ...)) | (ALLOWS, what)
WEIGHT_BUDGET = (64, 16 * 1024 * 1024)  # [limits] weight_compare_requests and _bytes' defaults


class NotRead(Exception):
    """An analyser read ``key``, which its (strict) :class:`RevisionInputs` does not hold.

    ``keys``: ``key`` and what the analyser said it reads next (:meth:`RevisionInputs.want`), in order.
    """

    def __init__(self, key: InputKey, more: Sequence[InputKey] = ()) -> None:
        super().__init__(f"{key!r} was not read before the analysis")
        self.key = key
        self.keys: tuple[InputKey, ...] = (key, *(k for k in more if k != key))


def text_key(side: str, path: str) -> InputKey:
    return (TEXT, side, path)


def ranges_key(side: str, path: str, ranges: Sequence[tuple[int, int]]) -> InputKey:
    return (RANGES, side, path, tuple((int(start), int(length)) for start, length in ranges))


def allows_key(what: str) -> InputKey:
    return (ALLOWS, what)


@dataclass(frozen=True)
class RevisionInputs:
    """What the analysers of one revision read, keyed by :data:`InputKey`; see the module's docstring.

    ``sides`` are the snapshots: a file a side does not list reads as None without a key. Without a
    ``cpu_budget`` every analysis is allowed (inputs built from files, in tests and tools).
    """

    sides: Mapping[str, Snapshot | None]
    values: Mapping[InputKey, Any] = field(default_factory=dict)
    weight_compare: tuple[int, int] = WEIGHT_BUDGET
    cpu_budget: bool = True
    strict: bool = True
    unplanned: list[InputKey] = field(default_factory=list, compare=False)
    prefix: str = ""  # a folder's view (see in_folder): its paths are under this prefix in ``values``
    # Results of pure computations over these inputs (see remembered), shared by one analyser's rounds.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.values, MappingProxyType):
            object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def in_folder(self, folder: str, old: Snapshot | None, new: Snapshot) -> RevisionInputs:
        """The files of ``folder`` as if at the repo root (``old``/``new``: the folder's views of the sides)."""
        return replace(self, sides={"old": old, "new": new}, prefix=f"{self.prefix}{folder}/")

    @classmethod
    def of_files(cls, old: Snapshot | None, new: Snapshot, *, old_files: Mapping[str, bytes] | None = None,
                 new_files: Mapping[str, bytes] | None = None, parsed: Mapping[InputKey, Any] | None = None,
                 weight_compare: tuple[int, int] = WEIGHT_BUDGET) -> RevisionInputs:
        """Inputs from each side's file bytes (``{path: bytes}``) and any parsed header (``parsed``), no CPU budget."""
        values: dict[InputKey, Any] = {}
        for side, files in (("old", old_files or {}), ("new", new_files or {})):
            values.update({text_key(side, path): data for path, data in files.items()})
        values.update(parsed or {})
        return cls({"old": old, "new": new}, values, weight_compare=weight_compare, cpu_budget=False)

    def remembered(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()``, once per analyser: kept under ``key`` for the analyser's later rounds.

        Sound because a key's value never changes once read and the rounds only add keys: a
        computation that completed read only keys it still holds. One stopped by :class:`NotRead`
        is not kept. The cost it saves is a rerun's: without it, an analyser that reads N headers one
        round at a time would measure its first checkpoint N times.
        """
        memo_key = (self.prefix, key)
        if memo_key in self.memo:
            value: T = self.memo[memo_key]
            return value
        computed = compute()
        self.memo[memo_key] = computed
        return computed

    def want(self, keys: Iterable[InputKey | None]) -> None:
        """Say what a loop reads next, in order (None: a file its side does not list, read without a key).

        The pipeline then fetches them in one round rather than one round each, in this order, so the
        budgets are spent as the loop would spend them; a read the loop then skips (it stopped at an
        unreadable file) is the one difference. Nothing is read here; past the rounds' bound
        (not strict) it does nothing.
        """
        if not self.strict:
            return
        missing = [key for key in keys if key is not None and key not in self.values]
        if missing:
            raise NotRead(missing[0], missing[1:])

    def file_key(self, kind: str, side: str, path: str) -> InputKey | None:
        """The key of one file's ``kind`` of input (e.g. :data:`SAFETENSORS`), None when ``side`` does not list it."""
        return (kind, side, self.prefix + path) if self.listed(side, path) else None

    def want_ranges(self, reads: Sequence[tuple[str, str, Sequence[tuple[int, int]]]]) -> None:
        """:meth:`want` for the weight bytes at ``(side, path, ranges)``, in order."""
        self.want(ranges_key(side, self.prefix + path, ranges) if self.listed(side, path) else None
                  for side, path, ranges in reads)

    def has(self, key: InputKey) -> bool:
        return key in self.values

    def listed(self, side: str, path: str) -> bool:
        """Whether ``side`` lists ``path`` (an unlisted file is absent: None, read without a key)."""
        if side not in SIDES:
            raise ValueError(f"side must be 'old' or 'new', not {side!r}")
        snapshot = self.sides.get(side)
        return snapshot is not None and snapshot.get(path) is not None

    def get(self, key: InputKey) -> Any:
        """The value held under ``key``; NotRead (strict) or None, recorded in ``unplanned``, when none is."""
        if key in self.values:
            return self.values[key]
        if self.strict:
            raise NotRead(key)
        if key not in self.unplanned:
            self.unplanned.append(key)
        return None

    def _file(self, kind: str, side: str, path: str) -> Any:
        return self.get((kind, side, self.prefix + path)) if self.listed(side, path) else None

    def text(self, side: str, path: str) -> bytes | None:
        """Raw bytes of a small tracked file (config, tokenizer, template, code, README)."""
        data: bytes | None = self._file(TEXT, side, path)
        return data

    def safetensors_header(self, side: str, path: str) -> Mapping[str, Any] | None:
        """The parsed JSON header of a ``.safetensors`` file."""
        header: Mapping[str, Any] | None = self._file(SAFETENSORS, side, path)
        return header

    def pickle_globals(self, side: str, path: str) -> list[tuple[str, str]] | None:
        """(module, name) pairs a pickle-based checkpoint would import, found statically."""
        found: list[tuple[str, str]] | None = self._file(PICKLE, side, path)
        return found

    def gguf_header(self, side: str, path: str) -> Mapping[str, Any] | None:
        """A ``.gguf`` file's metadata and tensor infos (never tensor data): what ``gguf.read_gguf_header`` returns."""
        header: Mapping[str, Any] | None = self._file(GGUF, side, path)
        return header

    def onnx_model(self, side: str, path: str) -> Mapping[str, Any] | None:
        """A ``.onnx`` file's IR version, opsets and graph inputs/outputs, or ``{"not_read": why}``/``{"malformed": why}``."""
        model: Mapping[str, Any] | None = self._file(ONNX, side, path)
        return model

    def read_ranges(self, side: str, path: str, ranges: Sequence[tuple[int, int]]) -> Sequence[bytes] | None:
        """A weight file's bytes at each ``(start, length)``; None when absent, unreadable or over the weight budget."""
        if not self.listed(side, path):
            return None
        found: Sequence[bytes] | None = self.get(ranges_key(side, self.prefix + path, ranges))
        return found

    def weight_budget(self) -> tuple[int, int]:
        """``(requests, bytes)`` that comparing weight deltas may spend on each side of this revision."""
        return self.weight_compare

    def allows(self, what: str) -> bool:
        """Whether the revision's CPU time allowed ``what`` (an analysis, a parse) when it was planned."""
        return True if not self.cpu_budget else bool(self.get(allows_key(what)))
