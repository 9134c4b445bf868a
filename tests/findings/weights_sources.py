"""A reader test double for weight analysis: LFS entries, headers, pickle globals.

``tests/findings/sources.py`` builds snapshots from file bytes (blob ids only).
Weight files are never downloaded, so their tests need to state each file's
size and LFS sha256 directly, and to supply what the Hub adapter would have
read by range requests: safetensors headers and the globals a pickle imports.
Every read is recorded so tests can assert an analyser read nothing it did not need.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.findings.sources import AnsweredAtOnce
from tracker.core.model import CommitSha, FileEntry, RepoId, RevisionChange, Snapshot


def lfs(path: str, size: int, content: str) -> FileEntry:
    """An LFS file whose sha256 is derived from ``content`` (a label such as ``"v1"``)."""
    sha = hashlib.sha256(content.encode()).hexdigest()
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {size}\n".encode()
    blob = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
    return FileEntry(path=path, size=size, blob_id=blob, lfs_sha256=sha)


def small(path: str, data: bytes) -> FileEntry:
    """A regular git file (no LFS)."""
    return FileEntry(path=path, size=len(data), blob_id=hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest())


def change(old: list[FileEntry] | None, new: list[FileEntry], repo: str = "org/model") -> RevisionChange:
    return RevisionChange(
        repo=RepoId(repo),
        old=Snapshot(files=tuple(old)) if old is not None else None,
        new=Snapshot(files=tuple(new)),
        old_sha=CommitSha("a" * 40) if old is not None else None,
        new_sha=CommitSha("b" * 40),
    )


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """Parse a real file's header as the Hub adapter does: u64 LE length, then JSON."""
    with path.open("rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(length))


class WeightsSources(AnsweredAtOnce):
    """Per-side dicts of text, safetensors headers and pickle globals; None when absent."""

    def __init__(
        self,
        *,
        text: Mapping[str, Mapping[str, bytes]] | None = None,
        headers: Mapping[str, Mapping[str, Mapping[str, Any]]] | None = None,
        globals_: Mapping[str, Mapping[str, list[tuple[str, str]]]] | None = None,
    ) -> None:
        self._text = {s: dict((text or {}).get(s, {})) for s in ("old", "new")}
        self._headers = {s: dict((headers or {}).get(s, {})) for s in ("old", "new")}
        self._globals = {s: dict((globals_ or {}).get(s, {})) for s in ("old", "new")}
        self.reads: list[tuple[str, str, str]] = []

    def _log(self, kind: str, side: str, path: str) -> None:
        if side not in ("old", "new"):
            raise ValueError(f"side must be 'old' or 'new', not {side!r}")
        self.reads.append((kind, side, path))

    def text(self, side: str, path: str) -> bytes | None:
        self._log("text", side, path)
        return self._text[side].get(path)

    def safetensors_header(self, side: str, path: str) -> Mapping[str, Any] | None:
        self._log("header", side, path)
        return self._headers[side].get(path)

    def pickle_globals(self, side: str, path: str) -> list[tuple[str, str]] | None:
        self._log("globals", side, path)
        return self._globals[side].get(path)

    def read_ranges(self, side: str, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes] | None:
        self._log("ranges", side, path)
        return None  # no tensor data here: measured deltas are tested on the Hub stand-in

    def weight_budget(self) -> tuple[int, int]:
        return 64, 16 * 1024 * 1024
