"""Hostile pickles: a cap never lowers a severity, and non-pickle binaries cost a few hundred bytes.

Before: a dangerous ``data.pkl`` padded with 17 harmless ``.pkl`` members dropped from
critical (``os.system`` found) to high (``pickle_unscanned``), because the member cap
threw away what the scan had found; and every non-pickle ``.bin`` cost a 64 MiB read
(671 MB for a revision with ten). The Hub-level tests read through the real
``HubSources`` and ``HubClient`` against the stand-in and count its bytes served.
"""

from __future__ import annotations

import io
import os
import pickle
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.hostile.content_support import Reduce, dangerous_pickle, harmless_pickle, torch_like_zip
from tracker.adapters.hub import HubClient
from tracker.adapters.store import open_store
from tracker.core.findings import weights
from tracker.core.findings.picklescan_zip import (
    MAX_PICKLE_MEMBERS,
    SNIFF_BYTES,
    NotAPickleError,
    scan_checkpoint,
)
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import CommitSha, RepoId, RevisionChange, Severity
from tracker.pipeline.sources import HubSources

RULES = SeverityRules.default()
REPO = RepoId("acme/hostile")


class Reads:
    """``read_range`` over bytes, recording each call."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[tuple[int, int]] = []

    def __call__(self, offset: int, length: int) -> bytes:
        self.calls.append((offset, length))
        return self.data[offset:offset + length]


def padded_archive(dangerous: bool, harmless: int = 17) -> bytes:
    members = {"archive/data.pkl": dangerous_pickle() if dangerous else harmless_pickle(0)}
    members.update({f"archive/extra_{i:02d}.pkl": harmless_pickle(i) for i in range(harmless)})
    return torch_like_zip(members, data_size=1024)


def test_member_cap_keeps_what_was_found_and_says_what_was_not_scanned():
    found = scan_checkpoint(Reads(padded_archive(True)), len(padded_archive(True)))
    assert list(found) == [("posix", "system"), ("collections", "OrderedDict")]
    assert found.incomplete == "2 pickle members unscanned (over the cap of 16 per archive)"
    assert MAX_PICKLE_MEMBERS == 16


def test_an_unreadable_member_does_not_void_the_others():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", dangerous_pickle())
        zf.writestr("archive/broken.pkl", b"\xff\xfe not a pickle")
    data = buf.getvalue()
    found = scan_checkpoint(Reads(data), len(data))
    assert list(found) == [("posix", "system")]
    assert found.incomplete == "archive/broken.pkl: not a pickle stream: at position 0, opcode b'\\xff' unknown"


@pytest.mark.parametrize(
    ("head", "reason"),
    [
        (b"GGUF\x03\x00\x00\x00" + b"\x00" * 24, "not a pickle: a GGUF file"),
        (b"ggjt\x03\x00\x00\x00", "not a pickle: a GGJT file"),
        ((20).to_bytes(8, "little") + b'{"w":{"dtype":"F32"}}', "not a pickle: a safetensors file"),
        (b"\x89HDF\r\n\x1a\n", "not a pickle: an HDF5 file"),
        (b"\x00\x01\x02\x03" * 8, "not a pickle stream: at position 0, opcode b'\\x00' unknown"),
    ],
)
def test_a_non_pickle_file_is_identified_from_its_first_512_bytes(head, reason):
    data = head + b"\x00" * (64 * 1024 * 1024)
    reads = Reads(data)
    with pytest.raises(NotAPickleError) as caught:
        scan_checkpoint(reads, len(data))
    assert str(caught.value) == reason
    assert reads.calls == [(0, 4), (4, SNIFF_BYTES - 4)]


def test_a_legacy_pickle_is_read_while_it_goes_on_and_no_further():
    """A raw pickle longer than the first read: ×16 steps until it ends, then stop before the storage bytes."""
    payload = pickle.dumps(["x" * 100_000, Reduce(os.system, "id")], protocol=2)
    data = payload + b"\x00" * (32 * 1024 * 1024)
    reads = Reads(data)
    found = scan_checkpoint(reads, len(data))
    assert (list(found), found.incomplete) == ([("posix", "system")], None)
    assert reads.calls == [(0, 4), (4, 508), (512, 7680), (8192, 122880)]


def test_a_pickle_longer_than_the_scanned_prefix_is_reported_partial():
    payload = pickle.dumps([Reduce(os.system, "id"), "x" * (70 * 1024 * 1024)], protocol=4)
    found = scan_checkpoint(Reads(payload), len(payload))
    assert list(found) == [("posix", "system")]
    assert found.incomplete == "only the first 67,108,864 bytes scanned"


# ---------------------------------------------------------------------- through the Hub adapter


def hub_sources(hub_standin, tmp_path: Path, files: dict[str, bytes | Path]) -> tuple[RevisionChange, HubSources]:
    hub_standin.create_repo(str(REPO))
    sha = hub_standin.commit(str(REPO), files)
    client = HubClient(hub_standin.url, token=False, timeout=10)
    snapshot = client.snapshot(REPO, sha)
    store = open_store(f"sqlite:///{tmp_path}/tracker.sqlite3")
    sources = HubSources(client, store.blobs, REPO, {"old": None, "new": (sha, snapshot)}, max_file_bytes=64 * 1024 * 1024,
                         max_header_bytes=32 * 1024 * 1024, now=lambda: datetime.now(UTC))
    change = RevisionChange(repo=REPO, old=None, new=snapshot, old_sha=None, new_sha=CommitSha(sha))
    return change, sources


def test_padded_dangerous_checkpoint_stays_critical_through_the_hub(hub_standin, tmp_path):
    change, sources = hub_sources(hub_standin, tmp_path, {"pytorch_model.bin": padded_archive(True),
                                                          "harmless.bin": padded_archive(False)})
    found = {f.path: f for f in weights.analyse(change, sources, RULES)}
    dangerous, harmless = found["pytorch_model.bin"], found["harmless.bin"]
    assert (dangerous.code, dangerous.severity) == ("weights.pickle_dangerous_import", Severity.CRITICAL)
    assert dangerous.summary == ("pickle-based file added: pytorch_model.bin would import posix.system when loaded "
                                 "(partly scanned: 2 pickle members unscanned (over the cap of 16 per archive))")
    assert dangerous.evidence["unscanned"] == "2 pickle members unscanned (over the cap of 16 per archive)"
    # harmless as far as scanned, but not all of it was: unscanned (high), never "added" (moderate)
    assert (harmless.code, harmless.severity) == ("weights.pickle_unscanned", Severity.HIGH)
    assert harmless.summary.startswith("pickle-based file added: harmless.bin (")
    assert harmless.summary.endswith("only partly scanned (2 pickle members unscanned (over the cap of 16 per "
                                     "archive)), the scanned part imports only tensor-rebuild globals")


def test_ten_non_pickle_bins_cost_a_few_kilobytes(hub_standin, tmp_path):
    files: dict[str, bytes | Path] = {}
    for i in range(10):
        path = tmp_path / f"gguf-{i}.bin"
        with path.open("wb") as f:
            f.write(b"GGUF\x03\x00\x00\x00" + i.to_bytes(8, "little"))
            f.truncate(8 * 1024 * 1024 + i)  # sparse: 8 MiB each, distinct content
        files[f"model-{i}.bin"] = path
    change, sources = hub_sources(hub_standin, tmp_path, files)
    hub_standin.clear_log()
    found = weights.analyse(change, sources, RULES)
    assert [(f.code, f.path) for f in found] == [("weights.pickle_unscanned", f"model-{i}.bin") for i in range(10)]
    assert sources.problems == [{"side": "new", "path": f"model-{i}.bin",
                                 "reason": "pickle scan failed: not a pickle: a GGUF file"} for i in range(10)]
    assert hub_standin.bytes_served() < 1_000_000  # before: 10 × 8 MiB here, 10 × 64 MiB for larger files
    ranges = sorted({r.range for r in hub_standin.requests if r.range})
    assert ranges == ["bytes=0-3", f"bytes=4-{SNIFF_BYTES - 1}"]  # per file; the rest are redirects
    assert hub_standin.bytes_served() < 10 * 1024
