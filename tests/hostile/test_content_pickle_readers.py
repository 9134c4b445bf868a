"""Parsers that agree with the loaders, and every loader name scanned.

Before: a zip whose end record's comment held a second central directory showed the tracker a
harmless ``data.pkl`` (it took the last end record whose comment fits) while zipfile and miniz,
behind ``torch.load``, take the last signature and read a ``data.pkl`` importing ``posix.system``:
``weights.pickle_added`` (moderate). ``I0x1`` (an INT that the unpickler reads in base 0 and
pickletools refuses) stopped the walk before ``cposix\\nsystem``: a legacy torch file was
moderate, a ``.pkl`` unscanned without the import, an LFS ``model_best.pth.tar`` no finding at
all. A non-LFS ``model_best.pth.tar``, ``a.joblib.gz`` and a gensim ``.model`` were never scanned,
and the 33rd file judged by content was skipped without a word.

Every hostile file is built as bytes and read through the real ``HubSources`` and ``HubClient``
against the stand-in; nothing here unpickles anything (zipfile only lists and reads members).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import pickle
import struct
import tarfile
import zipfile
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.hostile.content_support import dangerous_pickle, harmless_pickle, torch_like_zip
from tracker.adapters.hub import HubClient
from tracker.adapters.store import open_store
from tracker.core.findings import weights
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import CommitSha, Finding, RepoId, RevisionChange, Severity
from tracker.pipeline.sources import HubSources

RULES = SeverityRules.default()
REPO = RepoId("acme/readers")
CRITICAL_IMPORT = ("weights.pickle_dangerous_import", Severity.CRITICAL)

# A pickle the unpickler runs as os.system('id'): INT 0x1 (base 0), POP, then the import.
HEX_INT_SYSTEM = b"I0x1\n0cposix\nsystem\n(S'id'\ntR."
HEX_INT_NOTE = "the INT opcode at byte {at} ('I0x1') is read differently by pickletools and the unpickler"


def analysed(hub_standin, tmp_path: Path, files: dict[str, bytes], *, lfs: set[str] | None = None,
             **options: int) -> tuple[dict[str, Finding], list[Finding], HubSources]:
    """The weights findings (by path, and all) of a first revision holding ``files``, read through the Hub."""
    hub_standin.create_repo(str(REPO))
    sha = hub_standin.commit(str(REPO), files, lfs=lfs if lfs is not None else set())
    client = HubClient(hub_standin.url, token=False, timeout=10)
    snapshot = client.snapshot(REPO, sha)
    store = open_store(f"sqlite:///{tmp_path}/tracker.sqlite3")
    sources = HubSources(client, store.blobs, REPO, {"old": None, "new": (sha, snapshot)},
                         max_file_bytes=64 * 1024 * 1024, max_header_bytes=32 * 1024 * 1024,
                         now=lambda: datetime.now(UTC))
    change = RevisionChange(repo=REPO, old=None, new=snapshot, old_sha=None, new_sha=CommitSha(sha))
    found = weights.analyse(change, sources, RULES, **options)
    return {f.path: f for f in found if f.path is not None}, found, sources


def code(finding: Finding) -> tuple[str, Severity]:
    return finding.code, finding.severity


# ---------------------------------------------------------------------------- zip builders


def _split(archive: bytes) -> tuple[bytes, bytes]:
    """``(local members, central directory)`` of a zip written by zipfile (no comment)."""
    eocd = archive.rindex(b"PK\x05\x06")
    cd_size, cd_offset = struct.unpack_from("<II", archive, eocd + 12)
    return archive[:cd_offset], archive[cd_offset:cd_offset + cd_size]


def _shifted(cd: bytes, shift: int) -> bytes:
    """A central directory whose local-header offsets all moved by ``shift`` bytes."""
    out = bytearray(cd)
    i = 0
    while i < len(out):
        assert out[i:i + 4] == b"PK\x01\x02"
        (offset,) = struct.unpack_from("<I", out, i + 42)
        struct.pack_into("<I", out, i + 42, offset + shift)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", out, i + 28)
        i += 46 + name_len + extra_len + comment_len
    return bytes(out)


def _count(cd: bytes) -> int:
    return cd.count(b"PK\x01\x02")


def _end(count: int, cd_size: int, cd_offset: int, comment_len: int) -> bytes:
    return struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_offset, comment_len)


def comment_holds_a_directory(shown: dict[str, bytes], loaded: dict[str, bytes]) -> bytes:
    """One file, two archives: the first end record (whose comment fits) lists ``shown``; its comment
    holds a second directory and end record (whose comment length does not fit), listing ``loaded``."""
    shown_locals, shown_cd = _split(torch_like_zip(shown))
    loaded_locals, loaded_cd = _split(torch_like_zip(loaded))
    loaded_cd = _shifted(loaded_cd, len(shown_locals))
    body = shown_locals + loaded_locals
    first_cd_at = len(body)
    second_cd_at = first_cd_at + len(shown_cd) + 22
    second_end = _end(_count(loaded_cd), len(loaded_cd), second_cd_at, 0x100)  # 256 bytes that are not there
    comment = loaded_cd + second_end
    return body + shown_cd + _end(_count(shown_cd), len(shown_cd), first_cd_at, len(comment)) + comment


# ---------------------------------------------------------------------------- zip: the loaders' reading


def test_a_comment_holding_a_second_directory_is_read_as_torch_load_reads_it(hub_standin, tmp_path):
    data = comment_holds_a_directory({"archive/data.pkl": harmless_pickle(1)},
                                     {"archive/data.pkl": dangerous_pickle()})
    with zipfile.ZipFile(io.BytesIO(data)) as zf:  # what zipfile (and miniz) list: the second directory
        assert zf.read("archive/data.pkl") == dangerous_pickle()
    found, _all, sources = analysed(hub_standin, tmp_path, {"pytorch_model.bin": data}, lfs={"pytorch_model.bin"})
    finding = found["pytorch_model.bin"]
    assert code(finding) == CRITICAL_IMPORT
    window = len(data)  # under 64 KiB: the whole file is the end-record window
    ambiguity = (f"2 end-of-central-directory signatures in the archive's last {window:,} bytes (readers may "
                 "take different ones); the end record's comment length says 256 bytes where 0 follow")
    assert finding.summary == ("pickle-based file added: pytorch_model.bin would import posix.system when loaded "
                               f"(readers could read it otherwise: {ambiguity})")
    assert finding.evidence["ambiguous"] == ambiguity
    assert sources.problems == []


def test_two_harmless_directories_are_unscanned_at_critical_naming_the_ambiguity(hub_standin, tmp_path):
    data = comment_holds_a_directory({"archive/data.pkl": harmless_pickle(1)},
                                     {"archive/data.pkl": harmless_pickle(2)})
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model.pt": data})
    finding = found["model.pt"]
    assert code(finding) == ("weights.pickle_unscanned", Severity.CRITICAL)
    assert finding.summary == (
        f"pickle-based file added: model.pt ({len(data):,} bytes); readers could read it otherwise "
        f"(2 end-of-central-directory signatures in the archive's last {len(data):,} bytes (readers may take "
        "different ones); the end record's comment length says 256 bytes where 0 follow), so what loading it "
        "imports is not known")


def test_a_member_listed_twice_is_ambiguous(hub_standin, tmp_path):
    buf = io.BytesIO()
    with pytest.warns(UserWarning, match="Duplicate name"), zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", harmless_pickle(1))
        zf.writestr("archive/data.pkl", harmless_pickle(2))
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model.pt": buf.getvalue()})
    assert code(found["model.pt"]) == ("weights.pickle_unscanned", Severity.CRITICAL)
    assert found["model.pt"].evidence["ambiguous"] == (
        "1 member names listed more than once, e.g. 'archive/data.pkl'")


def test_overlapping_members_are_ambiguous(hub_standin, tmp_path):
    data = bytearray(torch_like_zip({"archive/data.pkl": harmless_pickle(1), "archive/b.pkl": harmless_pickle(2)}))
    _locals, cd = _split(bytes(data))
    cd_at = bytes(data).index(cd)
    second = cd_at + bytes(cd).index(b"PK\x01\x02", 4)
    struct.pack_into("<I", data, second + 42, 0)  # b.pkl's central record points at data.pkl's local header
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model.pt": bytes(data)})
    assert code(found["model.pt"]) == ("weights.pickle_unscanned", Severity.CRITICAL)
    assert found["model.pt"].evidence["ambiguous"] == "members 'archive/data.pkl' and 'archive/b.pkl' overlap"


def test_an_ordinary_checkpoint_is_not_ambiguous_and_costs_one_small_tail_read(hub_standin, tmp_path):
    data = torch_like_zip({"archive/data.pkl": harmless_pickle(1)}, data_size=1024 * 1024)
    found, _all, _sources = analysed(hub_standin, tmp_path, {"pytorch_model.bin": data},
                                     lfs={"pytorch_model.bin"})
    assert code(found["pytorch_model.bin"]) == ("weights.pickle_added", Severity.MODERATE)
    assert "ambiguous" not in found["pytorch_model.bin"].evidence
    assert hub_standin.bytes_served() < 4096


# ---------------------------------------------------------------------------- pickle: INT and LONG in base 0


def legacy_torch_file(payload: bytes) -> bytes:
    """A legacy ``torch.save`` stream: magic number, protocol, sys info, the object, storage keys, raw bytes."""
    return (pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) + pickle.dumps(1001, protocol=2)
            + pickle.dumps({"little_endian": True}, protocol=2) + payload + pickle.dumps(["0"], protocol=2)
            + b"\xff\xfe raw storage bytes \x00" * 16)


def test_hex_int_before_the_import_in_a_legacy_torch_file_names_the_import(hub_standin, tmp_path):
    data = legacy_torch_file(HEX_INT_SYSTEM)
    at = data.index(b"I0x1")
    found, _all, sources = analysed(hub_standin, tmp_path, {"pytorch_model.bin": data}, lfs={"pytorch_model.bin"})
    finding = found["pytorch_model.bin"]
    assert code(finding) == CRITICAL_IMPORT
    assert finding.summary == ("pickle-based file added: pytorch_model.bin would import posix.system when loaded "
                               f"(readers could read it otherwise: {HEX_INT_NOTE.format(at=at)})")
    assert sources.problems == []


def test_hex_int_in_a_plain_pickle_names_the_import(hub_standin, tmp_path):
    found, _all, _sources = analysed(hub_standin, tmp_path, {"state.pkl": HEX_INT_SYSTEM})
    assert code(found["state.pkl"]) == CRITICAL_IMPORT
    assert found["state.pkl"].after == ["posix.system"]
    assert found["state.pkl"].evidence["ambiguous"] == HEX_INT_NOTE.format(at=0)


@pytest.mark.parametrize("literal", [b"L0x1L", b"L0o7", b"I010", b"I0b1"])
def test_every_int_and_long_the_unpickler_reads_keeps_the_walk_going(hub_standin, tmp_path, literal):
    data = literal + b"\n0cposix\nsystem\n(S'id'\ntR."
    found, _all, _sources = analysed(hub_standin, tmp_path, {"state.pkl": data})
    assert code(found["state.pkl"]) == CRITICAL_IMPORT
    name = "LONG" if literal.startswith(b"L") else "INT"
    assert found["state.pkl"].evidence["ambiguous"] == (
        f"the {name} opcode at byte 0 ({literal.decode()!r}) is read differently by pickletools and the unpickler")


def test_an_lfs_model_best_pth_tar_with_a_hex_int_gets_a_critical_finding(hub_standin, tmp_path):
    data = legacy_torch_file(HEX_INT_SYSTEM)
    found, _all, _sources = analysed(hub_standin, tmp_path, {"checkpoints/model_best.pth.tar": data},
                                     lfs={"checkpoints/model_best.pth.tar"})
    assert code(found["checkpoints/model_best.pth.tar"]) == CRITICAL_IMPORT
    assert found["checkpoints/model_best.pth.tar"].after == ["posix.system"]


def test_a_hex_int_in_a_harmless_pickle_is_unscanned_critical_by_name_and_high_by_content(hub_standin, tmp_path):
    harmless = b"\x80\x02I0x1\n0ccollections\nOrderedDict\n)R."
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model.pt": harmless, "blobs/state.dat": harmless},
                                     lfs={"model.pt", "blobs/state.dat"})
    note = HEX_INT_NOTE.format(at=2)
    assert code(found["model.pt"]) == ("weights.pickle_unscanned", Severity.CRITICAL)
    assert found["model.pt"].summary == (
        f"pickle-based file added: model.pt ({len(harmless)} bytes); readers could read it otherwise ({note}), "
        "so what loading it imports is not known")
    # no default loader unpickles a .dat: what it holds is reported, at the code's own severity
    assert code(found["blobs/state.dat"]) == ("weights.pickle_unscanned", Severity.HIGH)


def test_a_deployment_severity_for_unscanned_stands(hub_standin, tmp_path):
    harmless = b"\x80\x02I0x1\n0ccollections\nOrderedDict\n)R."
    hub_standin.create_repo(str(REPO))
    sha = hub_standin.commit(str(REPO), {"model.pt": harmless}, lfs=set())
    client = HubClient(hub_standin.url, token=False, timeout=10)
    snapshot = client.snapshot(REPO, sha)
    sources = HubSources(client, open_store(f"sqlite:///{tmp_path}/t.sqlite3").blobs, REPO,
                         {"old": None, "new": (sha, snapshot)}, max_file_bytes=1 << 20, max_header_bytes=1 << 20,
                         now=lambda: datetime.now(UTC))
    change = RevisionChange(repo=REPO, old=None, new=snapshot, old_sha=None, new_sha=CommitSha(sha))
    (finding,) = weights.analyse(change, sources, RULES.with_overrides({"weights.pickle_unscanned": "moderate"}))
    assert code(finding) == ("weights.pickle_unscanned", Severity.MODERATE)


# ---------------------------------------------------------------------------- every loader name


def _compressed(suffix: str, data: bytes) -> bytes:
    return {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress,
            ".lzma": lambda d: lzma.compress(d, format=lzma.FORMAT_ALONE), ".z": zlib.compress}[suffix](data)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".lzma", ".z"])
def test_a_compressed_joblib_file_is_decompressed_and_scanned(hub_standin, tmp_path, suffix):
    name = f"a.joblib{suffix}"
    found, _all, sources = analysed(hub_standin, tmp_path, {name: _compressed(suffix, dangerous_pickle(4))})
    assert code(found[name]) == CRITICAL_IMPORT
    assert found[name].after == ["posix.system"]
    assert sources.problems == []


def test_an_lz4_joblib_file_is_unscanned_naming_why(hub_standin, tmp_path):
    found, _all, sources = analysed(hub_standin, tmp_path, {"model.joblib": b"\x04\x22\x4d\x18" + b"\x00" * 64})
    assert code(found["model.joblib"]) == ("weights.pickle_unscanned", Severity.HIGH)
    assert sources.problems == [{"side": "new", "path": "model.joblib", "reason": "pickle scan failed: lz4-compressed "
                                 "content is not scanned (no decompressor in the standard library)"}]


def test_a_joblib_file_compressed_whatever_its_name_is_decompressed(hub_standin, tmp_path):
    """joblib tells compression by magic number: a gzip ``model.joblib`` is unpickled after inflating."""
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model.joblib": gzip.compress(dangerous_pickle(4))})
    assert code(found["model.joblib"]) == CRITICAL_IMPORT


def test_non_lfs_loader_names_are_scanned(hub_standin, tmp_path):
    checkpoint = torch_like_zip({"archive/data.pkl": dangerous_pickle()}, data_size=64)
    files = {"model_best.pth.tar": checkpoint, "last.ckpt": checkpoint, "word2vec.model": dangerous_pickle(4),
             "legacy.tar": legacy_torch_file(dangerous_pickle(2)), "labels.npy": b"\x93NUMPY\x01\x00v\x00"
             + b"{'descr': '|O', 'fortran_order': False, 'shape': (1,), }".ljust(117) + b"\n" + dangerous_pickle(4)}
    found, _all, sources = analysed(hub_standin, tmp_path, files)
    assert {path: code(f) for path, f in found.items()} == dict.fromkeys(files, CRITICAL_IMPORT)
    assert sources.problems == []


def test_a_sentencepiece_model_is_no_pickle_and_no_finding(hub_standin, tmp_path):
    spiece = b"\n\x0e\n\x05<unk>\x15\x00\x00\x00\x00\x18\x02" * 64  # protobuf: field 1, length-delimited
    found, everything, sources = analysed(hub_standin, tmp_path, {"spiece.model": spiece, "tokenizer.model": spiece})
    assert (found, everything, sources.problems) == ({}, [], [])


def test_a_gensim_model_with_only_its_own_classes_is_an_unknown_import(hub_standin, tmp_path):
    module, name = b"gensim.models.word2vec", b"Word2Vec"
    data = b"\x80\x04\x8c" + bytes([len(module)]) + module + b"\x8c" + bytes([len(name)]) + name + b"\x93)\x81."
    found, _all, _sources = analysed(hub_standin, tmp_path, {"w2v.model": data})
    assert code(found["w2v.model"]) == ("weights.pickle_unknown_import", Severity.HIGH)
    assert found["w2v.model"].after == ["gensim.models.word2vec.Word2Vec"]


# ---------------------------------------------------------------------------- files judged by content: never silent


def test_files_past_the_content_budget_are_reported_not_scanned(hub_standin, tmp_path):
    cap = weights.MAX_CONTENT_SNIFFS
    assert cap == weights.content_sniffs_for(200) == 100  # two range requests each within 200
    files = {f"blobs/{i:03d}.dat": b"\x00" + bytes([i % 256]) * 600 for i in range(cap)}
    files["blobs/zz_last.dat"] = dangerous_pickle(4)  # the 101st file judged by content
    files["zz/model_best.pth.tar"] = torch_like_zip({"archive/data.pkl": dangerous_pickle()})  # a loader name
    found, everything, sources = analysed(hub_standin, tmp_path, files, lfs=set(files))
    assert {f.path: code(f) for f in everything} == {
        "blobs/zz_last.dat": ("weights.not_scanned", Severity.HIGH), "zz/model_best.pth.tar": CRITICAL_IMPORT}
    size = len(files["blobs/zz_last.dat"])
    assert found["blobs/zz_last.dat"].summary == (
        f"blobs/zz_last.dat ({size} bytes) was not checked for a pickle: past the first 100 files judged by "
        "content in this revision, as many as its request budget allows")
    assert sources.problems == []


def test_a_flood_of_unjudged_files_is_bounded_and_counted(hub_standin, tmp_path):
    files = {f"blobs/{i:03d}.dat": b"\x00" + bytes([i]) * 40 for i in range(weights.MAX_LISTED + 3)}
    _found, everything, _sources = analysed(hub_standin, tmp_path, files, lfs=set(files), max_content_sniffs=1)
    assert [f.code for f in everything] == ["weights.not_scanned"] * (weights.MAX_LISTED + 1)
    assert [f.path for f in everything[:weights.MAX_LISTED]] == sorted(files)[1:weights.MAX_LISTED + 1]
    rest = everything[-1]
    assert (rest.path, rest.severity, rest.evidence["count"]) == (None, Severity.HIGH, 2)
    assert rest.summary == (
        "2 more files were not checked for a pickle, e.g. blobs/051.dat, blobs/052.dat: past the first 1 files "
        "judged by content in this revision, as many as its request budget allows")


# ---------------------------------------------------------------------------- torch's legacy tar format


def legacy_tar(members: list[tuple[str, bytes]]) -> bytes:
    """A tar as torch's pre-1.6 legacy writer laid it out (members in order, PAX format)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_legacy_torch_tar_is_read_as_torch_load_reads_it(hub_standin, tmp_path):
    count = pickle.dumps(0, protocol=2)
    data = legacy_tar([("storages", count), ("tensors", count), ("pickle", dangerous_pickle(2))])
    files = {"model_best.pth.tar": data, "old/legacy.tar": data}
    found, _all, sources = analysed(hub_standin, tmp_path, files)
    assert {path: code(f) for path, f in found.items()} == dict.fromkeys(files, CRITICAL_IMPORT)
    assert found["model_best.pth.tar"].summary == (
        "pickle-based file added: model_best.pth.tar would import posix.system when loaded")
    assert sources.problems == []


def test_a_second_member_of_the_same_name_is_what_torch_reads_and_is_ambiguous(hub_standin, tmp_path):
    count = pickle.dumps(0, protocol=2)
    data = legacy_tar([("storages", count), ("tensors", count), ("pickle", harmless_pickle(1)),
                       ("pickle", dangerous_pickle(2))])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:  # what getmember("pickle") returns: the last one
        member = tar.extractfile(tar.getmember("pickle"))
        assert member is not None and member.read() == dangerous_pickle(2)
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model_best.pth.tar": data})
    assert code(found["model_best.pth.tar"]) == CRITICAL_IMPORT
    assert found["model_best.pth.tar"].evidence["ambiguous"] == "2 tar members named 'pickle' (torch reads the last)"


def test_storage_records_past_the_first_raw_bytes_are_said_unscanned(hub_standin, tmp_path):
    storages = pickle.dumps(1, protocol=2) + pickle.dumps(("0", "cpu", "FloatStorage"), protocol=2) + b"\x02" * 64
    data = legacy_tar([("storages", storages), ("tensors", pickle.dumps(0, protocol=2)),
                       ("pickle", harmless_pickle(1))])
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model_best.pth.tar": data})
    assert code(found["model_best.pth.tar"]) == ("weights.pickle_unscanned", Severity.HIGH)
    assert found["model_best.pth.tar"].evidence["unscanned"] == "storages: the records after its first raw bytes"


def test_a_tar_of_other_files_is_no_pickle(hub_standin, tmp_path):
    data = legacy_tar([("images/a.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64), ("README.txt", b"hello\n")])
    found, everything, sources = analysed(hub_standin, tmp_path, {"dataset.tar": data, "model.pth.tar": data})
    assert [path for path in found] == ["model.pth.tar"]  # a loader name that holds no pickle: unscanned
    assert code(found["model.pth.tar"]) == ("weights.pickle_unscanned", Severity.HIGH)
    assert sources.problems == [{
        "side": "new", "path": "model.pth.tar",
        "reason": "pickle scan failed: a tar archive without the members torch.load unpickles (storages, tensors, "
                  "pickle)"}]


def test_a_tar_header_that_is_also_a_pickle_is_scanned_both_ways(hub_standin, tmp_path):
    """A tar member named like a pickle: torch.load reads the tar, pickle.load and joblib the bytes."""
    count = pickle.dumps(0, protocol=2)
    data = legacy_tar([("cposix\nsystem\n(S'id'\ntR.", b"x"), ("storages", count), ("tensors", count),
                       ("pickle", harmless_pickle(1))])
    assert tarfile.open(fileobj=io.BytesIO(data)).getnames()[0] == "cposix\nsystem\n(S'id'\ntR."
    found, _all, _sources = analysed(hub_standin, tmp_path, {"model.joblib": data, "model_best.pth.tar": data})
    for path in ("model.joblib", "model_best.pth.tar"):
        assert code(found[path]) == CRITICAL_IMPORT
        assert found[path].after == ["posix.system"]
        assert found[path].evidence["ambiguous"] == (
            "a tar archive whose first bytes are also a pickle (torch.load reads the tar, pickle.load the pickle)")


def test_a_utf8_string_torch_load_decodes_keeps_the_walk_going(hub_standin, tmp_path):
    """pickletools decodes STRING as ASCII; torch.load's unpickler as UTF-8 and goes on to the import."""
    data = legacy_torch_file("S'é'\n0cposix\nsystem\n(S'id'\ntR.".encode())
    at = data.index(b"S'\xc3")
    found, _all, _sources = analysed(hub_standin, tmp_path, {"pytorch_model.bin": data})
    assert code(found["pytorch_model.bin"]) == CRITICAL_IMPORT
    assert found["pytorch_model.bin"].evidence["ambiguous"] == (
        f"the STRING opcode at byte {at:,} (\"S'\\\\xc3\\\\xa9'\") is read differently by pickletools and the "
        "unpickler")


def test_a_pax_header_claiming_gigabytes_is_not_read(hub_standin, tmp_path):
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 4 * 1024 ** 3  # 4 GiB of PAX records: 4 MiB are there
    data = header.tobuf(format=tarfile.USTAR_FORMAT) + b"1 x\n" * 1024 * 1024
    found, _all, sources = analysed(hub_standin, tmp_path, {"model_best.pth.tar": bytes(data)})
    assert code(found["model_best.pth.tar"]) == ("weights.pickle_unscanned", Severity.HIGH)
    assert sources.problems[0]["reason"].startswith("pickle scan failed: unreadable tar archive: ")
    assert hub_standin.bytes_served() < 2 * 1024 * 1024
