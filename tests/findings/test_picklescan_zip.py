"""The static checkpoint scanner: real zip layouts, exact globals, nothing executed, few bytes read."""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import struct
import zipfile
from pathlib import Path

import pytest

from tracker.core.findings.picklescan_zip import (
    MAX_MEMBER_BYTES,
    UNKNOWN,
    NotAPickleError,
    ScanError,
    scan_checkpoint,
    scan_pickle_bytes,
)

# What torch.save(OrderedDict(weight=torch.zeros(2, 3))) writes as archive/data.pkl (protocol 2):
# OrderedDict() ; 'weight' -> _rebuild_tensor_v2(persistent_load(('storage', FloatStorage, '0', 'cpu', 6)),
#                                                   0, (2, 3), (3, 1), False, OrderedDict())
TORCH_LIKE_PICKLE = (
    b"\x80\x02"
    b"ccollections\nOrderedDict\nq\x00)Rq\x01"
    b"X\x06\x00\x00\x00weightq\x02"
    b"ctorch._utils\n_rebuild_tensor_v2\nq\x03"
    b"((X\x07\x00\x00\x00storageq\x04ctorch\nFloatStorage\nq\x05X\x01\x00\x00\x000q\x06X\x03\x00\x00\x00cpuq\x07K\x06tq\x08Q"
    b"K\x00K\x02K\x03\x86q\tK\x03K\x01\x86q\n\x89h\x00)Rq\x0btq\x0cRq\r"
    b"s."
)
TORCH_GLOBALS = [
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch", "FloatStorage"),
]


class Pwn:
    """Unpickling this runs a shell command that would create MARKER."""

    marker: Path

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def malicious_pickle(marker: Path, protocol: int) -> bytes:
    Pwn.marker = marker
    return pickle.dumps({"weight": Pwn()}, protocol=protocol)


class CountingReader:
    """The ``read_range`` callable, recording every range asked for."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.calls: list[tuple[int, int]] = []

    def __call__(self, offset: int, length: int) -> bytes:
        self.calls.append((offset, length))
        return self.data[offset : offset + length]

    @property
    def bytes_read(self) -> int:
        return sum(length for _, length in self.calls)


def torch_zip(
    pkl: bytes,
    *,
    data_size: int = 24,
    compression: int = zipfile.ZIP_STORED,
    comment: bytes = b"",
    zip64: bool = False,
    prefix: str = "archive",
) -> bytes:
    """A zip laid out like torch.save's: data.pkl, byteorder, data/0, version, serialization id."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        with zf.open(f"{prefix}/data.pkl", "w", force_zip64=zip64) as f:
            f.write(pkl)
        zf.writestr(f"{prefix}/byteorder", b"little")
        with zf.open(f"{prefix}/data/0", "w", force_zip64=zip64) as f:
            f.write(b"\x00" * data_size)
        zf.writestr(f"{prefix}/version", b"3\n")
        zf.writestr(f"{prefix}/.data/serialization_id", b"1234567890")
        zf.comment = comment
    return buf.getvalue()


def scan(data: bytes) -> list[tuple[str, str]]:
    return scan_checkpoint(CountingReader(data), len(data))


def test_torch_like_pickle_is_valid_and_lists_rebuild_globals():
    pickletools.dis(TORCH_LIKE_PICKLE, out=io.StringIO())  # well-formed, stack-consistent
    assert scan_pickle_bytes(TORCH_LIKE_PICKLE) == TORCH_GLOBALS


def test_benign_torch_zip_lists_exact_globals():
    assert scan(torch_zip(TORCH_LIKE_PICKLE)) == TORCH_GLOBALS


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_malicious_reduce_found_in_every_protocol_and_never_executed(tmp_path, protocol):
    marker = tmp_path / "pwned"
    data = torch_zip(malicious_pickle(marker, protocol))
    assert scan(data) == [("posix", "system")]
    assert not marker.exists()


def test_large_data_member_is_never_read():
    data = torch_zip(TORCH_LIKE_PICKLE, data_size=8 * 1024 * 1024)
    reader = CountingReader(data)
    assert scan_checkpoint(reader, len(data)) == TORCH_GLOBALS
    assert reader.bytes_read < 1024  # tail + central directory + local header + data.pkl
    assert reader.bytes_read < len(data) / 4000
    data_start = data.index(b"\x00" * 1024)
    for offset, length in reader.calls:
        assert not (offset < data_start + 8 * 1024 * 1024 and offset + length > data_start)


def test_deflated_member(tmp_path):
    marker = tmp_path / "pwned"
    data = torch_zip(malicious_pickle(marker, 2), compression=zipfile.ZIP_DEFLATED)
    assert scan(data) == [("posix", "system")]
    assert not marker.exists()


def test_zip64_records_and_extra_fields(monkeypatch):
    # Lower zipfile's zip64 threshold so a small archive is written the way a >4 GB
    # checkpoint is: 0xFFFFFFFF in the central directory, real values in zip64 extras,
    # and a zip64 end-of-central-directory record plus locator.
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 64)
    data = torch_zip(TORCH_LIKE_PICKLE, data_size=4096, zip64=True)
    assert b"PK\x06\x06" in data and b"PK\x06\x07" in data
    cd = data.index(b"PK\x01\x02")
    assert struct.unpack_from("<I", data, cd + 20)[0] == 0xFFFFFFFF
    assert scan(data) == TORCH_GLOBALS


def test_long_comment_needs_the_wide_eocd_window():
    data = torch_zip(TORCH_LIKE_PICKLE, comment=b"c" * 5000)
    reader = CountingReader(data)
    assert scan_checkpoint(reader, len(data)) == TORCH_GLOBALS
    # magic, the 42-byte tail (no record there), then the whole 64 kB window (here: the file)
    assert reader.calls[:3] == [(0, 4), (len(data) - 42, 42), (0, len(data))]


def test_any_archive_prefix_and_other_pickle_members_are_scanned(tmp_path):
    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("my_model/data.pkl", TORCH_LIKE_PICKLE)
        zf.writestr("my_model/constants.pkl", malicious_pickle(marker, 4))
        zf.writestr("my_model/data/0", b"\x00" * 64)
    assert scan(buf.getvalue()) == TORCH_GLOBALS + [("posix", "system")]
    assert not marker.exists()


def test_legacy_raw_pickle_stream_follows_consecutive_pickles(tmp_path):
    marker = tmp_path / "pwned"
    # Legacy torch.save: magic number, protocol, sys info, the object, storage keys, then raw bytes.
    legacy = (
        pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2)
        + pickle.dumps(1001, protocol=2)
        + pickle.dumps({"little_endian": True}, protocol=2)
        + malicious_pickle(marker, 2)
        + pickle.dumps(["0"], protocol=2)
        + b"\xff\xfe garbage storage bytes \x00" * 10
    )
    assert scan(legacy) == [("posix", "system")]
    assert not marker.exists()


def test_stack_global_names_resolved_through_memo():
    # 'posix' and 'system' are memoised, popped, and fetched back with BINGET before STACK_GLOBAL.
    evasive = (
        b"\x80\x04"
        b"\x8c\x05posix\x94"  # memo 0
        b"\x8c\x06system\x94"  # memo 1
        b"00"  # POP POP
        b"h\x00h\x01\x93"  # BINGET 0, BINGET 1, STACK_GLOBAL
        b"\x8c\x02id\x85R."
    )
    pickletools.dis(evasive, out=io.StringIO())
    assert scan_pickle_bytes(evasive) == [("posix", "system")]


def test_stack_global_from_non_string_is_reported_unknown():
    # module name built by a REDUCE (str.join at unpickle time): not statically resolvable.
    odd = (
        b"\x80\x04"
        b"\x8c\x08builtins\x8c\x03str\x93"
        b"\x8c\x03pos\x8c\x02ix\x86\x85R"  # str(('pos', 'ix')) - any non-literal will do
        b"\x8c\x06system\x93)R."
    )
    assert scan_pickle_bytes(odd) == [("builtins", "str"), (UNKNOWN, "system")]


def test_truncated_pickle_keeps_globals_seen_before_the_cut(tmp_path):
    marker = tmp_path / "pwned"
    data = malicious_pickle(marker, 2)
    cut = data.index(b"system") + 8
    assert scan_pickle_bytes(data[:cut]) == [("posix", "system")]


def test_not_a_pickle():
    with pytest.raises(NotAPickleError):
        scan(b"GGUF\x03\x00\x00\x00" + b"\x00" * 100)
    with pytest.raises(NotAPickleError):
        scan(b"")


def test_zip_without_pickle_member_is_an_error():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("weights/0", b"\x00" * 10)
    with pytest.raises(ScanError, match="no .pkl member"):
        scan(buf.getvalue())


def test_oversized_member_is_refused_before_reading_it():
    data = bytearray(torch_zip(TORCH_LIKE_PICKLE))
    # Rewrite data.pkl's sizes in the central directory to claim 1 GB.
    cd = data.index(b"PK\x01\x02")
    struct.pack_into("<II", data, cd + 20, 1 << 30, 1 << 30)
    reader = CountingReader(bytes(data))
    result = scan_checkpoint(reader, len(data))
    # A member claiming more bytes than lie before the next one also overlaps it: readers could disagree.
    assert (result, result.incomplete) == ([], "archive/data.pkl: pickle member of 1073741824 bytes exceeds the "
                                               "67108864 cap")
    assert result.ambiguous == "members 'archive/data.pkl' and 'archive/byteorder' overlap"
    assert reader.bytes_read < 2048
    assert MAX_MEMBER_BYTES == 64 * 1024 * 1024


def test_deflate_bomb_stops_at_the_cap():
    # 65 MB of zeros deflates to ~64 kB: the declared sizes are lied about to pass the first check.
    import zlib

    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = comp.compress(b"\x00" * (MAX_MEMBER_BYTES + 1024)) + comp.flush()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", b"")
    data = bytearray(buf.getvalue())
    local = data.index(b"PK\x03\x04")
    name_len = struct.unpack_from("<H", data, local + 26)[0]
    body = bytes(data[: local + 30 + name_len])
    cd_part = bytes(data[local + 30 + name_len :])
    new = bytearray(body + raw + cd_part)
    struct.pack_into("<H", new, local + 8, 8)
    cd = new.index(b"PK\x01\x02")
    struct.pack_into("<H", new, cd + 10, 8)
    struct.pack_into("<II", new, cd + 20, len(raw), 100)
    eocd = new.rindex(b"PK\x05\x06")
    struct.pack_into("<I", new, eocd + 16, cd)
    with pytest.raises(ScanError, match="inflates past"):
        scan(bytes(new))


def test_truncated_or_corrupt_zip_is_a_scan_error():
    data = torch_zip(TORCH_LIKE_PICKLE)
    with pytest.raises(ScanError):
        scan(data[:-10])  # EOCD cut: falls back to raw pickle scan of 'PK..' bytes
    broken = bytearray(data)
    cd = broken.index(b"PK\x01\x02")
    broken[cd : cd + 4] = b"XXXX"
    with pytest.raises(ScanError, match="central directory"):
        scan(bytes(broken))


def test_agrees_with_picklescan_on_the_malicious_member(tmp_path):
    picklescan = pytest.importorskip("picklescan.scanner")
    data = malicious_pickle(tmp_path / "pwned", 4)
    result = picklescan.scan_pickle_bytes(io.BytesIO(data), "x")
    assert {(g.module, g.name) for g in result.globals} == set(scan_pickle_bytes(data))


# ---------------------------------------------------------------------------- where zip readers could disagree


def test_an_ordinary_archive_is_not_ambiguous():
    result = scan_checkpoint(CountingReader(torch_zip(TORCH_LIKE_PICKLE)), len(torch_zip(TORCH_LIKE_PICKLE)))
    assert (result, result.incomplete, result.ambiguous) == (TORCH_GLOBALS, None, None)


def test_bytes_before_the_archive_are_read_both_ways():
    """zipfile shifts every offset by the bytes before the directory; miniz takes the stated offsets."""
    archive = torch_zip(TORCH_LIKE_PICKLE)
    data = b"PK\x03\x04" + b"\x00" * 96 + archive  # torch.load opens a file that starts like a zip as one
    cd_offset = struct.unpack_from("<I", archive, archive.rindex(b"PK\x05\x06") + 16)[0]
    result = scan_checkpoint(CountingReader(data), len(data))
    assert list(result) == TORCH_GLOBALS
    assert result.ambiguous == (
        "the central directory ends 100 bytes before its end record: zipfile reads it 100 bytes past the offset "
        f"the record states, miniz at that offset; miniz's reading fails: bad central directory entry at {cd_offset}")


def test_an_entry_count_other_than_the_directory_holds_is_ambiguous():
    data = bytearray(torch_zip(TORCH_LIKE_PICKLE))
    eocd = bytes(data).rindex(b"PK\x05\x06")
    struct.pack_into("<HH", data, eocd + 8, 4, 4)  # five entries written, four listed
    result = scan_checkpoint(CountingReader(bytes(data)), len(data))
    assert list(result) == TORCH_GLOBALS
    assert result.ambiguous == ("the central directory holds 5 entries where its end record lists 4 "
                                "(zipfile reads every entry, miniz the number listed)")


def test_a_zip64_locator_pointing_elsewhere_is_ambiguous(monkeypatch):
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 64)
    data = bytearray(torch_zip(TORCH_LIKE_PICKLE, data_size=4096, zip64=True))
    locator = bytes(data).rindex(b"PK\x06\x07")
    struct.pack_into("<Q", data, locator + 8, 0)  # points at the first local header, not at the zip64 record
    result = scan_checkpoint(CountingReader(bytes(data)), len(data))
    # miniz finds no zip64 record there and reads the 32-bit record, which zipfile wrote whole (it fits)
    assert (list(result), result.incomplete) == (TORCH_GLOBALS, None)
    assert result.ambiguous == (
        "the zip64 locator points at byte 0, not at the zip64 record before it (zipfile reads the one before it, "
        "miniz the one it points at); the zip64 locator points at no zip64 record")
