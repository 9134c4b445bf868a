"""A dict-backed reader (what the pipeline plans a revision's ``RevisionInputs`` through) and helpers to build a ``RevisionChange`` for analyser tests.

Analysers read files only through ``sources``; tests give them the bytes of each
side directly, so they exercise the same code path as the Hub-backed
implementation without any network or disk I/O inside the analyser.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from tracker.core.model import CommitSha, FileEntry, RepoId, RevisionChange, Snapshot


class AnsweredAtOnce:
    """What a RevisionInputs offers analysers besides reads, for tests that call an analyser on a reader
    directly: every read is answered at once, so there is nothing to want ahead or to remember."""

    def want(self, keys: Any) -> None:
        list(keys)

    def want_ranges(self, reads: Any) -> None:
        return None

    def file_key(self, kind: str, side: str, path: str) -> tuple[str, str, str] | None:
        return (kind, side, path)

    def remembered(self, key: Any, compute: Any) -> Any:
        return compute()


class DictSources(AnsweredAtOnce):
    """A reader (``tracker.pipeline.analysis.InputReader``) over two ``{path: bytes}`` dicts (``old`` and ``new``).

    ``text`` returns the bytes or None when the path is absent on that side.
    ``headers`` / ``globals_`` / ``ggufs`` optionally supply safetensors headers, pickle
    globals and parsed GGUF headers per side (``{"old": {path: ...}, "new": {...}}``); otherwise None.
    ``reads`` records every (side, path) asked for, so tests can assert that an
    analyser did not read files it had no reason to.
    """

    def __init__(
        self,
        old: Mapping[str, bytes] | None = None,
        new: Mapping[str, bytes] | None = None,
        *,
        headers: Mapping[str, Mapping[str, Any]] | None = None,
        globals_: Mapping[str, Mapping[str, list[tuple[str, str]]]] | None = None,
        ggufs: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        onnx: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
    ) -> None:
        self.files = {"old": dict(old or {}), "new": dict(new or {})}
        self.headers = {side: dict((headers or {}).get(side, {})) for side in ("old", "new")}
        self.globals = {side: dict((globals_ or {}).get(side, {})) for side in ("old", "new")}
        self.ggufs = {side: dict((ggufs or {}).get(side, {})) for side in ("old", "new")}
        self.onnx = {side: dict((onnx or {}).get(side, {})) for side in ("old", "new")}
        self.reads: list[tuple[str, str]] = []

    def _check(self, side: str) -> None:
        if side not in ("old", "new"):
            raise ValueError(f"side must be 'old' or 'new', not {side!r}")

    def text(self, side: str, path: str) -> bytes | None:
        self._check(side)
        self.reads.append((side, path))
        return self.files[side].get(path)

    def safetensors_header(self, side: str, path: str) -> Mapping[str, Any] | None:
        self._check(side)
        return self.headers[side].get(path)

    def pickle_globals(self, side: str, path: str) -> list[tuple[str, str]] | None:
        self._check(side)
        return self.globals[side].get(path)

    def gguf_header(self, side: str, path: str) -> Mapping[str, Any] | None:
        self._check(side)
        return self.ggufs[side].get(path)

    def onnx_model(self, side: str, path: str) -> Mapping[str, Any] | None:
        self._check(side)
        return self.onnx[side].get(path)

    def allows(self, what: str) -> bool:
        return True  # no CPU budget in memory
    def read_ranges(self, side: str, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes] | None:
        """Slices of the side's bytes for ``path`` (None when it has none, or a range runs past its end)."""
        self._check(side)
        data = self.files[side].get(path)
        if data is None or any(start + length > len(data) for start, length in ranges):
            return None
        return [data[start:start + length] for start, length in ranges]

    def weight_budget(self) -> tuple[int, int]:
        return 64, 16 * 1024 * 1024


def snapshot(files: Mapping[str, bytes]) -> Snapshot:
    """A Snapshot listing ``files`` with their sizes and git-style blob ids (content-derived)."""
    entries = []
    for path, data in sorted(files.items()):
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        entries.append(FileEntry(path=path, size=len(data), blob_id=blob))
    return Snapshot(files=tuple(entries))


def make_change(
    old: Mapping[str, bytes] | None,
    new: Mapping[str, bytes],
    repo: str = "org/model",
) -> tuple[RevisionChange, DictSources]:
    """A RevisionChange between two file dicts plus matching DictSources.

    ``old=None`` models the first revision read (the baseline): ``change.old`` is None.
    """
    change = RevisionChange(
        repo=RepoId(repo),
        old=snapshot(old) if old is not None else None,
        new=snapshot(new),
        old_sha=CommitSha("a" * 40) if old is not None else None,
        new_sha=CommitSha("b" * 40),
    )
    return change, DictSources(old or {}, new)


def analyse_revision(change: RevisionChange, sources: Any, rules: Any = None) -> list:
    """The revision's findings as a poll computes them: ``sources`` is the reader the pipeline plans its
    rounds of reads through, then the pure analysers run on what was read (strict in the test suite)."""
    from tracker.adapters.template_sandbox import LeasedSandbox
    from tracker.pipeline.analysis import analyse_change

    return analyse_change(change, sources, rules, renderers=LeasedSandbox).findings


def rendered(analyse: Any, change: RevisionChange, sources: Any, rules: Any, *, limits: Any = None) -> list:
    """``analyse`` (an analyser that renders chat templates) with a sandbox of its own ``limits``."""
    from tracker.adapters.template_sandbox import LeasedSandbox

    with LeasedSandbox(limits) as renderer:
        return analyse(change, sources, rules, renderer=renderer)
