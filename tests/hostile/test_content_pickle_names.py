"""Pickles under other names, in any case, behind another format's magic, inside NumPy files and zips.

Before: only ``.bin .pt .pth .ckpt .pkl`` were scanned, and case-sensitively, so a ``.joblib``
or ``.pickle`` importing ``posix.system`` was only ``files.added`` (info) with no advisory, and
``pytorch_model.BIN`` was ``pickle_unscanned`` (high) where ``pytorch_model.bin`` was critical.
A ``.bin`` starting with ``GGUF`` or with safetensors-looking bytes and going on as a pickle
was judged "not a pickle" from its magic, though Python's unpickler still imports the global.

Everything goes through the real ``HubSources`` and ``HubClient`` against the stand-in, whose
log shows that only range requests of a few kilobytes were made.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.hostile.content_support import Reduce, dangerous_pickle, torch_like_zip
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.adapters.store import open_store
from tracker.app import make_tracker
from tracker.core.advisory.record import to_osv
from tracker.core.findings import weights
from tracker.core.findings.picklescan_zip import scan_checkpoint
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import CommitSha, Finding, RepoId, RevisionChange, Severity
from tracker.pipeline.sources import HubSources

RULES = SeverityRules.default()
REPO = RepoId("acme/disguised")
CRITICAL = ("weights.pickle_dangerous_import", Severity.CRITICAL)


class RecordingUnpickler(pickle.Unpickler):
    """Python's own unpickler, stopped at its first import: shows what loading would run, runs nothing."""

    def find_class(self, module: str, name: str) -> Any:
        raise LookupError(f"{module}.{name}")


def first_import(data: bytes) -> str:
    """The global Python's unpickler would import first from ``data`` (it never gets it)."""
    with pytest.raises(LookupError) as caught:
        RecordingUnpickler(io.BytesIO(data)).load()
    return str(caught.value)


def analysed(hub_standin, tmp_path: Path, files: dict[str, bytes | Path], *, lfs: set[str] | None = None,
             ) -> tuple[dict[str, Finding], HubSources]:
    """The weights findings, by path, for a first revision holding ``files``, read through the Hub."""
    hub_standin.create_repo(str(REPO))
    sha = hub_standin.commit(str(REPO), files, lfs=lfs)
    client = HubClient(hub_standin.url, token=False, timeout=10)
    snapshot = client.snapshot(REPO, sha)
    store = open_store(f"sqlite:///{tmp_path}/tracker.sqlite3")
    sources = HubSources(client, store.blobs, REPO, {"old": None, "new": (sha, snapshot)}, max_file_bytes=64 * 1024 * 1024,
                         max_header_bytes=32 * 1024 * 1024, now=lambda: datetime.now(UTC))
    change = RevisionChange(repo=REPO, old=None, new=snapshot, old_sha=None, new_sha=CommitSha(sha))
    hub_standin.clear_log()
    found = weights.analyse(change, sources, RULES)
    by_path = {f.path: f for f in found}
    assert len(by_path) == len(found), [(f.code, f.path) for f in found]
    return by_path, sources


def code(finding: Finding) -> tuple[str, Severity]:
    return finding.code, finding.severity


# ---------------------------------------------------------------------------- names


def test_a_pickle_name_in_upper_case_gets_the_same_critical_finding(hub_standin, tmp_path):
    checkpoint = torch_like_zip({"archive/data.pkl": dangerous_pickle()}, data_size=4096)
    found, sources = analysed(hub_standin, tmp_path, {"pytorch_model.bin": checkpoint,
                                                      "other/pytorch_model.BIN": checkpoint,
                                                      "Model.Pt": checkpoint})
    assert {path: code(f) for path, f in found.items()} == {
        "pytorch_model.bin": CRITICAL, "other/pytorch_model.BIN": CRITICAL, "Model.Pt": CRITICAL}
    assert found["other/pytorch_model.BIN"].summary == (
        "pickle-based file added: other/pytorch_model.BIN would import posix.system when loaded")
    assert found["other/pytorch_model.BIN"].evidence == found["pytorch_model.bin"].evidence
    assert sources.problems == []


@pytest.mark.parametrize("name", ["model.joblib", "model.pickle", "state.pkl", "pipeline.dill", "clf.sav",
                                  "MODEL.JOBLIB", "weights.Pickle"])
@pytest.mark.parametrize("protocol", [2, 4])
def test_every_pickle_name_is_scanned(hub_standin, tmp_path, name, protocol):
    found, _ = analysed(hub_standin, tmp_path, {name: dangerous_pickle(protocol)})
    assert code(found[name]) == CRITICAL
    assert found[name].after == ["posix.system"]


def test_a_joblib_file_importing_posix_system_is_critical_with_an_advisory(hub_standin, tmp_path):
    """The whole path: poll, findings stored, an OSV advisory; the file is a plain git file, not LFS."""
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 60.0})
    tracker = make_tracker(settings, hub=HubClient(settings.hub.endpoint, timeout=60.0,
                                                   sleep=lambda _s: None))
    repo = "acme/sklearn-model"
    hub_standin.create_repo(repo)
    base = hub_standin.commit(repo, {"README.md": b"# a classifier\n"})
    tracker.store.repos.add(repo, now=tracker.clock())
    (first,) = tracker.poll([repo])
    assert (first.status, first.error) == ("baseline", None)
    payload = pickle.dumps({"classifier": Reduce(os.system, "id")}, protocol=4)  # what joblib.dump writes
    assert first_import(payload) == "posix.system"
    rev = hub_standin.commit(repo, {"model.joblib": payload}, message="Upload model.joblib", lfs=set())

    (result,) = tracker.poll([repo])

    assert (result.status, result.processed, result.error) == ("new", 1, None)
    pk = tracker.store.repos.get(repo).pk
    row = tracker.store.revisions.get(pk, rev)
    assert [(f.code, f.severity.value, f.path) for f in row.findings] == [
        ("weights.pickle_dangerous_import", "critical", "model.joblib"), ("files.added", "info", "model.joblib")]
    (advisory,) = tracker.store.advisories.find(repo_pk=pk)
    assert (advisory.kind, advisory.severity, advisory.revision_sha) == ("risk", "critical", rev)
    assert [f["code"] for f in to_osv(advisory.record)["database_specific"]["findings"]] == [
        "weights.pickle_dangerous_import"]
    assert tracker.store.advisories.ids_for_commit(base) == []


# ---------------------------------------------------------------------------- another format's magic


def gguf_polyglot() -> bytes:
    """``GGUF``, version 3, a tensor count's first byte: to the unpickler, one BINFLOAT; then a pickle."""
    return b"GGUF\x03\x00\x00\x00\x00" + dangerous_pickle(2) + b"\x00" * (1024 * 1024)


def safetensors_polyglot() -> bytes:
    """Bytes 0-7 a small little-endian length and byte 8 a ``{``, as a safetensors header starts.

    To the unpickler: BINUNICODE of 4 characters (``\\0\\0\\0{``), POP, then the pickle.
    """
    head = b"X" + (4).to_bytes(4, "little") + b"\x00\x00\x00{" + b"0"
    assert int.from_bytes(head[:8], "little") < 1 << 32 and head[8:9] == b"{"
    return head + dangerous_pickle(2) + b"\x00" * (1024 * 1024)


@pytest.mark.parametrize("make", [gguf_polyglot, safetensors_polyglot])
def test_a_file_that_starts_like_another_format_and_goes_on_as_a_pickle_is_scanned(hub_standin, tmp_path, make):
    data = make()
    assert first_import(data) == "posix.system"  # Python's unpickler is not fooled by the magic
    found, sources = analysed(hub_standin, tmp_path, {"pytorch_model.bin": data})
    assert code(found["pytorch_model.bin"]) == CRITICAL
    assert sources.problems == []
    assert hub_standin.bytes_served() < 8192  # the 512-byte sniff held the whole pickle


def test_a_real_gguf_or_ggjt_bin_is_still_identified_from_its_first_bytes(hub_standin, tmp_path):
    files: dict[str, bytes | Path] = {
        "gguf.bin": b"GGUF\x03\x00\x00\x00" + (2).to_bytes(8, "little") + b"\x00" * (2 * 1024 * 1024),
        "ggjt.bin": b"ggjt\x03\x00\x00\x00" + b"\x01" * (2 * 1024 * 1024),
    }
    found, sources = analysed(hub_standin, tmp_path, files)
    assert {path: f.code for path, f in found.items()} == {"gguf.bin": "weights.pickle_unscanned",
                                                           "ggjt.bin": "weights.pickle_unscanned"}
    assert sources.problems == [
        {"side": "new", "path": "ggjt.bin", "reason": "pickle scan failed: not a pickle: a GGJT file"},
        {"side": "new", "path": "gguf.bin", "reason": "pickle scan failed: not a pickle: a GGUF file"}]
    assert hub_standin.bytes_served() < 4096  # two sniffs of 512 bytes, no growing reads


# ---------------------------------------------------------------------------- NumPy files and zips


def numeric_npy(n: int) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.zeros(n, dtype=np.float32))
    return buf.getvalue()


def object_npy() -> bytes:
    """What ``np.save`` writes for an object array (its header, then the array's pickle), the pickle made hostile."""
    real = io.BytesIO()
    np.save(real, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    data = real.getvalue()
    header_end = 10 + int.from_bytes(data[8:10], "little")  # format version 1.0
    assert b"'descr': '|O'" in data[:header_end]
    return data[:header_end] + dangerous_pickle(3)


def npz(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_numpy_files_are_pickles_only_when_they_hold_object_arrays(hub_standin, tmp_path):
    files: dict[str, bytes | Path] = {
        "embeddings.npy": numeric_npy(4 * 1024 * 1024),  # 16 MiB of float32
        "labels.npy": object_npy(),
        "arrays.npz": npz({"weights.npy": numeric_npy(1024 * 1024), "bias.npy": numeric_npy(16)}),
        "mixed.NPZ": npz({"weights.npy": numeric_npy(1024 * 1024), "meta.npy": object_npy()}),
    }
    found, sources = analysed(hub_standin, tmp_path, files, lfs=set(files))
    assert {path: code(f) for path, f in found.items()} == {"labels.npy": CRITICAL, "mixed.NPZ": CRITICAL}
    assert found["mixed.NPZ"].after == ["posix.system"]
    assert sources.problems == []
    assert hub_standin.bytes_served() < 16_384  # headers and the object members; never the 16 MiB array


def test_a_numeric_npy_costs_its_header_only():
    data = numeric_npy(8 * 1024 * 1024)
    calls: list[tuple[int, int]] = []

    def read(offset: int, length: int) -> bytes:
        calls.append((offset, length))
        return data[offset:offset + length]

    found = scan_checkpoint(read, len(data), expect_pickle=False)
    assert (list(found), found.holds_pickle) == ([], False)
    assert calls == [(0, 4), (4, 508)]


def test_zip_archives_holding_pkl_members_are_scanned_and_others_are_not_pickles(hub_standin, tmp_path):
    files: dict[str, bytes | Path] = {
        "bundle.zip": npz({"README.txt": b"hi", "model/weights.pkl": dangerous_pickle()}),
        "images.zip": npz({"a.png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 64}),
    }
    found, sources = analysed(hub_standin, tmp_path, files)
    assert {path: code(f) for path, f in found.items()} == {"bundle.zip": CRITICAL}
    assert sources.problems == []


def test_an_lfs_file_of_another_name_is_judged_by_its_content(hub_standin, tmp_path):
    files: dict[str, bytes | Path] = {
        "checkpoints/final.weights": torch_like_zip({"archive/data.pkl": dangerous_pickle()}),
        "checkpoints/state": dangerous_pickle(4),
        "data/table.parquet": dangerous_pickle(4),  # a pickle-free format: its loader never unpickles
        "data/blob.dat": b"\x00\x01 plain binary" * 1000,
    }
    found, sources = analysed(hub_standin, tmp_path, files, lfs=set(files))
    assert {path: code(f) for path, f in found.items()} == {"checkpoints/final.weights": CRITICAL,
                                                            "checkpoints/state": CRITICAL}
    assert sources.problems == []


def test_a_file_judged_by_content_costs_at_most_its_sniff_prefix(hub_standin, tmp_path):
    """``V`` (UNICODE, a line of any bytes) never ends without a newline: read up to the content cap, no further."""
    files: dict[str, bytes | Path] = {"data/blob.dat": b"V" + b"\x01" * (8 * 1024 * 1024),
                                      "data/persid.dat": b"P" + b"\xff" * (8 * 1024 * 1024)}
    found, sources = analysed(hub_standin, tmp_path, files, lfs=set(files))
    assert (found, sources.problems) == ({}, [])
    assert hub_standin.bytes_served() < weights.MAX_CONTENT_SNIFF_BYTES + 4096  # the PERSID one: 512 bytes


def test_content_sniffs_are_capped_per_revision(hub_standin, tmp_path):
    files: dict[str, bytes | Path] = {f"blobs/{i:03d}.dat": b"\x00" + bytes([i]) * 600
                                      for i in range(weights.MAX_CONTENT_SNIFFS + 8)}
    _, _ = analysed(hub_standin, tmp_path, files, lfs=set(files))
    sniffed = {r.url_path.rsplit("/", 1)[1] for r in hub_standin.requests if r.range and "/resolve/" in r.url_path}
    assert sniffed == {f"{i:03d}.dat" for i in range(weights.MAX_CONTENT_SNIFFS)}  # in path order, then no more
