"""HubSources: what analysers read about two revisions, fetched lazily from the Hub.

Small files are content-addressed by blob id in the store, so each version
of a file is fetched from the Hub once, whichever revision asks for it.
Failures (too large, cut off, malformed) are recorded in ``problems`` and the
read returns None; the processor turns problems into findings. Transient Hub
failures (unavailable, rate limited, the poll's deadline) are not the file's
fault: while ``strict`` they propagate, so the revision stays pending and is read
again on the next poll; the processor turns ``strict`` off after a revision has
failed that way too often, so no file can keep a revision pending forever.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from tracker.core.errors import HubError, HubRateLimited, HubUnavailable, UpstreamFileError
from tracker.core.model import FileEntry, RepoId, Snapshot
from tracker.pipeline.ports import BlobCache, HubReader


class HubSources:
    def __init__(
        self,
        hub: HubReader,
        store: BlobCache,
        repo: RepoId,
        revisions: dict[str, tuple[str, Snapshot] | None],
        *,
        max_file_bytes: int,
        max_header_bytes: int,
        now: Callable[[], datetime],
        strict: bool = True,
    ) -> None:
        self.strict = strict
        self.hub = hub
        self.store = store
        self.repo = repo
        self.revisions = revisions  # side -> (sha, snapshot)
        self.max_file_bytes = max_file_bytes
        self.max_header_bytes = max_header_bytes
        self.now = now
        self.problems: list[dict[str, Any]] = []
        self._headers: dict[tuple[str, str], dict[str, Any] | None] = {}
        # (requests, bytes) per side for weight deltas: [limits] weight_compare_*, set by the Processor
        self.weight_compare = (64, 16 * 1024 * 1024)
        self.weight_spent = {"old": [0, 0], "new": [0, 0]}  # side -> [requests, bytes] sent comparing weights
        self._ranges: dict[tuple[str, str, int, int], bytes] = {}

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
        key = (entry.content_id, path)
        if key not in self._headers:
            try:
                self._headers[key] = self.hub.safetensors_header(
                    self.repo, sha, path, max_bytes=self.max_header_bytes
                )
            except (UpstreamFileError, HubError) as exc:
                self._check_transient(exc)
                self._problem(side, path, str(exc))
                self._headers[key] = None
        return self._headers[key]

    def gguf_header(self, side: str, path: str) -> dict[str, Any] | None:
        """A GGUF file's metadata and tensor infos, read by range requests (never tensor data).

        Cached by content id; the read stops at ``tracker.core.findings.gguf.MAX_HEADER_BYTES``.
        """
        found = self._entry(side, path)
        if found is None or not path.lower().endswith(".gguf"):
            return None
        sha, entry = found
        from tracker.core.findings.gguf import GGUFError, read_gguf_header

        key = (entry.content_id, "gguf:" + path)
        if key not in self._headers:
            try:
                self._headers[key] = read_gguf_header(
                    lambda offset, length: self.hub.read_range(self.repo, sha, path, offset, offset + length - 1),
                    entry.size,
                )
            except (UpstreamFileError, HubError, GGUFError) as exc:
                self._check_transient(exc)
                self._problem(side, path, f"GGUF header unreadable: {exc}")
                self._headers[key] = None
        return self._headers[key]

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

        key = (entry.content_id, "onnx:" + path)
        if key not in self._headers:
            try:
                self._headers[key] = read_onnx_model(
                    lambda offset, length: self.hub.read_range(self.repo, sha, path, offset, offset + length - 1),
                    entry.size,
                )
            except OnnxNotRead as exc:
                self._headers[key] = {"not_read": str(exc)}
            except ProtobufError as exc:
                self._headers[key] = {"malformed": str(exc)}
            except (UpstreamFileError, HubError) as exc:
                self._check_transient(exc)
                self._problem(side, path, f"ONNX model unreadable: {exc}")
                self._headers[key] = None
        return self._headers[key]

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
        from tracker.core.findings.weights import MAX_CONTENT_SNIFF_BYTES, pickle_kind

        found = self._entry(side, path)
        if found is None:
            return None
        sha, entry = found
        rev = self.revisions.get(side)
        kind = pickle_kind(path, entry, has_file=lambda p: rev is not None and rev[1].get(p) is not None)
        if kind is None:
            return None
        try:
            return scan_checkpoint(
                lambda offset, length: self.hub.read_range(self.repo, sha, path, offset, offset + length - 1),
                entry.size, expect_pickle=kind == "pickle",
                **({"max_raw_bytes": MAX_CONTENT_SNIFF_BYTES} if kind == "content" else {}),
            )
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
        must fit what is left of the side's budget, or nothing is read.
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
        for key in missing:
            start, length = key[2], key[3]
            if length <= 0 or start < 0 or start + length > entry.size:
                return None
            try:
                data = self.hub.read_range(self.repo, sha, path, start, start + length - 1)
            except (UpstreamFileError, HubError) as exc:
                self._check_transient(exc)
                self._problem(side, path, f"weight comparison read failed: {exc}")
                return None
            spent[0] += 1
            spent[1] += len(data)
            self._ranges[key] = data
        return [self._ranges[key] for key in keys]
