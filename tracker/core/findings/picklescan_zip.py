"""Static scan of a PyTorch checkpoint for the globals its pickle would import.

The Hub adapter calls :func:`scan_checkpoint` with a ``read_range(offset,
length)`` callable backed by HTTP range requests, so a multi-gigabyte
``pytorch_model.bin`` costs a few kilobytes: the zip end-of-central-directory
record, the central directory, and the small ``data.pkl`` member. The tensor
data members are never touched.

Nothing here unpickles. The pickle byte stream is walked with
:func:`pickletools.genops` (a disassembler) while a *symbolic* stack and memo
are kept, so that ``STACK_GLOBAL`` (protocol 4+), whose module and name are the
two strings on top of the stack, resolves even when those strings come from the
memo (``BINGET``) or were duplicated. A name that cannot be resolved
statically is reported as ``(UNKNOWN, UNKNOWN)`` rather than dropped, because a
pickle that hides what it imports is itself the warning sign.

Everything is capped: the EOCD search window (the 22-byte record plus the
largest possible comment), the central directory, each pickle member (64 MB,
compressed and uncompressed, so a deflate bomb stops early), the number of
pickle members scanned, and the prefix of a legacy raw-pickle file that is
scanned. A cap never hides what was already found: the scan returns the
globals it saw with :attr:`PickleGlobals.incomplete` saying what it skipped, so
a dangerous ``data.pkl`` padded with harmless members stays dangerous.

A file that is not a zip is first judged from its first :data:`SNIFF_BYTES`
bytes: only a prefix that parses as pickle opcodes leads to larger reads,
growing while the pickle goes on. A magic number never settles it alone:
``GGUF`` is also the pickle opcode ``BINFLOAT`` and a safetensors length prefix
can be a ``BINUNICODE``, so a file that starts like GGUF or safetensors and goes
on as a pickle is scanned as the pickle Python's unpickler would run; the magic
only names the format in the "not a pickle" reason when the opcodes fail.

NumPy files hold a pickle only for object arrays: a ``.npy`` (or an ``.npz``
member) is judged from its header's ``descr``, and only an object array's
pickle, which follows the header, is scanned. Containers that may hold no
pickle at all (``.npy``, ``.npz``, any zip) are scanned with
``expect_pickle=False`` and then say so (:attr:`PickleGlobals.holds_pickle`)
instead of failing.

Every format is read as the loader that runs it reads it (miniz and zipfile for the end record,
the unpickler for ``INT``/``LONG``/``GLOBAL`` arguments, ``tarfile`` for torch's legacy tar,
joblib's magic numbers for compression), and where readers could read a file differently the
result says why (:attr:`PickleGlobals.ambiguous`). docs/findings.md tables which loader each
rule follows.

Pure: no I/O except through ``read_range``.
"""

from __future__ import annotations

import ast
import bz2
import codecs
import io
import lzma
import pickletools
import re
import struct
import tarfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

ReadRange = Callable[[int, int], bytes]

UNKNOWN = "<unknown>"
"""Module/name placeholder for a global whose name is not a plain string in the stream."""

MAX_MEMBER_BYTES = 64 * 1024 * 1024
"""Largest pickle member (compressed or not) read; ``data.pkl`` is usually kilobytes."""
MAX_LEGACY_BYTES = 64 * 1024 * 1024
"""Prefix of a non-zip (legacy ``torch.save`` / raw pickle) file that is scanned."""
MAX_CENTRAL_DIRECTORY_BYTES = 16 * 1024 * 1024
"""One entry per tensor storage, ~100 bytes each: 16 MB is far above any real model."""
MAX_PICKLE_MEMBERS = 16
"""Pickle members scanned per archive (data.pkl, plus constants.pkl in TorchScript); others are reported unscanned."""
SNIFF_BYTES = 512
"""First read of a file that is not a zip: enough to tell a pickle from any other format."""
_GROWTH = 16  # each further read of a raw pickle is this many times the bytes read so far
MAX_NPY_HEADER_BYTES = 65536
"""Largest ``.npy`` header read (NumPy itself refuses headers over 10,000 bytes by default)."""
MAX_NPY_MEMBERS = 64
"""``.npy`` members of one archive whose header is read to find object arrays; others are reported unscanned."""
_NPY_MAGIC = b"\x93NUMPY"
_INFLATE_CHUNK = 64 * 1024

# Formats a ``.bin``/``.pt`` may really hold, by their first bytes: named in the "not a pickle" reason.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"GGUF", "a GGUF file"), (b"lmgg", "a GGML file"), (b"ggjt", "a GGJT file"), (b"ggml", "a GGML file"),
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file"), (b"\x93NUMPY", "a NumPy array file"),
    (b"version https://git-lfs", "a Git LFS pointer"),
)

_EOCD_SIG = b"PK\x05\x06"
_EOCD_SIZE = 22
_EOCD64_LOCATOR_SIG = b"PK\x06\x07"
_EOCD64_LOCATOR_SIZE = 20
_EOCD64_SIG = b"PK\x06\x06"
_EOCD64_SIZE = 56
_CENTRAL_SIG = b"PK\x01\x02"
_CENTRAL_SIZE = 46
_LOCAL_SIG = b"PK\x03\x04"
_LOCAL_SIZE = 30
_EOCD_WINDOW = _EOCD_SIZE + 0xFFFF  # record + the longest comment a zip can carry
_EOCD_FIRST_READ = _EOCD_SIZE + _EOCD64_LOCATOR_SIZE  # no comment: exactly the records needed

_STORED = 0
_DEFLATED = 8

_STRING_OPS = frozenset(
    {"SHORT_BINUNICODE", "UNICODE", "BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING"}
)
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})


class ScanError(ValueError):
    """The file could not be scanned (malformed zip, over a cap, unsupported compression)."""


class NotAPickleError(ScanError):
    """The bytes are neither a zip checkpoint nor a pickle stream (e.g. a GGML ``.bin``)."""


class _Truncated(Exception):
    """The pickle runs past the bytes read so far: read more, then scan again."""


class PickleGlobals(list[tuple[str, str]]):
    """The ``(module, name)`` globals found, in order; a plain list to callers that need no more.

    ``incomplete`` says what was *not* scanned (members over the cap, a member that
    could not be read, a pickle longer than the scanned prefix or one that could not
    be followed to its end), or is None when the scan covered every pickle in the file.
    Whatever was found stands either way. ``holds_pickle`` is False only for a container
    read in full that holds no pickle (a numeric ``.npy``, an ``.npz`` or zip without
    object arrays or ``.pkl`` members): there is nothing a loader could unpickle.
    ``ambiguous`` says why readers could see other bytes or other opcodes than this scan
    did (an archive with two central directories, an ``INT`` that ``pickletools`` and the
    unpickler parse differently), or is None: the globals are then what the loaders'
    reading imports, and other readers' may import more.
    """

    def __init__(self, items: list[tuple[str, str]] = (), incomplete: str | None = None,  # type: ignore[assignment]
                 *, holds_pickle: bool = True, ambiguous: str | None = None) -> None:
        super().__init__(items)
        self.incomplete = incomplete
        self.holds_pickle = holds_pickle
        self.ambiguous = ambiguous
        self.end = 0  # where the last whole pickle read ended (a raw pickle stream's scan sets it)


def _no_pickle() -> PickleGlobals:
    return PickleGlobals([], None, holds_pickle=False)


# --------------------------------------------------------------------------- pickle


class _Mark:
    """Stack sentinel for MARK, distinct from every value a pickle can push."""


_MARK = _Mark()


class _Opaque:
    """A stack value whose content does not matter for import resolution."""


_OPAQUE = _Opaque()


_MEMO_OPS = _PUT_OPS | _GET_OPS | {"MEMOIZE", "DUP"}
_IMPORT_OPS = frozenset({"GLOBAL", "INST", "STACK_GLOBAL", "EXT1", "EXT2", "EXT4"})


class _ImportTracer:
    """The unpickler's stack and memo, followed just far enough to name each global a pickle imports."""

    def __init__(self, found: dict[tuple[str, str], None]) -> None:
        self.found = found
        self.stack: list[object] = []
        self.memo: dict[object, object] = {}

    def step(self, opcode: pickletools.OpcodeInfo, arg: object) -> None:
        name = opcode.name
        if name in _STRING_OPS:
            self.stack.append(arg if isinstance(arg, str) else _OPAQUE)
        elif name == "MARK":
            self.stack.append(_MARK)
        elif name in _MEMO_OPS:
            self._memo_op(name, arg)
        elif name in _IMPORT_OPS:
            self._import(name, arg)
            self.stack.append(_OPAQUE)
        else:
            self._other(opcode)

    def _pop(self) -> object:
        return self.stack.pop() if self.stack else _OPAQUE  # underflow: the loader would fail here

    def _pop_to_mark(self) -> None:
        while self.stack:
            if self.stack.pop() is _MARK:
                return

    def _memo_op(self, name: str, arg: object) -> None:
        top = self.stack[-1] if self.stack else _OPAQUE
        if name in _PUT_OPS:
            self.memo[arg] = top
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = top
        elif name in _GET_OPS:
            self.stack.append(self.memo.get(arg, _OPAQUE))
        else:  # DUP
            self.stack.append(top)

    def _import(self, name: str, arg: object) -> None:
        if name in ("GLOBAL", "INST"):
            module, _, attr = str(arg).partition(" ")
            self.found.setdefault((module, attr), None)
            if name == "INST":
                self._pop_to_mark()
        elif name == "STACK_GLOBAL":
            attr_value, module_value = self._pop(), self._pop()
            self.found.setdefault(
                (
                    module_value if isinstance(module_value, str) else UNKNOWN,
                    attr_value if isinstance(attr_value, str) else UNKNOWN,
                ),
                None,
            )
        else:
            # EXT1, EXT2, EXT4: copyreg extension registry, a global we cannot name statically.
            self.found.setdefault((UNKNOWN, f"extension {arg}"), None)

    def _other(self, opcode: pickletools.OpcodeInfo) -> None:
        """Any other opcode: pops what it takes (through its MARK), pushes values that do not matter."""
        before = opcode.stack_before
        if pickletools.markobject in before:
            self._pop_to_mark()
            for _ in range(before.index(pickletools.markobject)):
                self._pop()
        else:
            for _ in before:
                self._pop()
        self.stack.extend(_OPAQUE for _ in opcode.stack_after)


# ---- opcodes read as the unpickler reads them
#
# ``pickletools.genops`` and the unpickler read a few protocol-0 arguments differently, and a
# walker that stops where the unpickler goes on misses every import after that point:
#
# * ``INT`` (``I``): pickletools ``int(s)``; ``pickle._Unpickler.load_int`` ``int(s, 0)``; the C
#   ``_pickle`` ``strtol(s, 0)`` (so ``I0x1`` is 1, and ``I010`` is 8 to C, an error to Python),
#   falling back to ``int(s, 0)``;
# * ``LONG`` (``L``): pickletools ``int(s)``; both unpicklers ``int(s, 0)`` (``L0x1L``);
# * ``GLOBAL``/``INST`` (``c``/``i``) and ``PERSID`` (``P``): pickletools undoes backslash escapes and
#   decodes ASCII; the unpickler decodes the raw line (UTF-8 for a global, ASCII for a persistent id);
# * ``STRING`` (``S``): pickletools decodes ASCII after undoing escapes; the unpickler decodes with the
#   loader's ``encoding`` (UTF-8 in ``torch.load``, latin-1 where a loader asks for it).
#
# Those arguments are read here as the unpicklers read them, so the walk goes on wherever one of
# them would; where pickletools would have read the argument otherwise, the difference is noted.
# The C unpickler is the one ``pickle.load`` and ``torch.load`` use; the Python one is the fallback.

_CODE_TO_OP = {op.code.encode("latin-1"): op for op in pickletools.opcodes}
_STRTOL = re.compile(rb"[ \t\n\v\f\r]*[+-]?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _int_or_none(text: bytes, base: int) -> int | None:
    try:
        return int(text, base)
    except ValueError:
        return None


def _strtol(text: bytes) -> int | None:
    """What C's ``strtol(text, &end, 0)`` reads when ``end`` reaches the end of ``text``, else None."""
    match = _STRTOL.fullmatch(text)
    if match is None:
        return None
    digits = match.group(1)
    sign = -1 if b"-" in text[: match.start(1)] else 1
    if digits[:2] in (b"0x", b"0X"):
        return sign * int(digits[2:], 16)
    return sign * int(digits, 8 if digits.startswith(b"0") else 10)


def _unpickler_ints(line: bytes, opname: str) -> tuple[int | None, int | None]:
    """``(python, c)``: what ``pickle._Unpickler`` and ``_pickle`` read from an INT/LONG line (None: an error)."""
    text = line[:-1]
    if opname == "LONG":
        text = text[:-1] if text.endswith(b"L") else text
        value = _int_or_none(text, 0)
        return value, value
    if line in (b"00\n", b"01\n"):
        return int(line[1:2]), int(line[1:2])
    python = _int_or_none(line, 0)
    c = _strtol(text)
    return python, c if c is not None else python


def _unpickler_string(line: bytes) -> str:
    """A STRING line as ``load_string`` reads it: quoted alike at both ends, escapes undone, then decoded
    with the loader's ``encoding`` (``torch.load`` passes UTF-8; latin-1 stands for any other here)."""
    data = line[:-1]
    if len(data) < 2 or data[:1] != data[-1:] or data[:1] not in (b"'", b'"'):
        raise ValueError("the STRING opcode argument must be quoted")
    value: bytes = codecs.escape_decode(data[1:-1])[0]
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


def _line(stream: io.BytesIO) -> bytes:
    line = stream.readline()
    if not line.endswith(b"\n"):
        raise ValueError("no newline found when trying to read a line argument")
    return line


def _pickletools_reads(opcode: pickletools.OpcodeInfo, raw: bytes) -> object:
    """The argument pickletools reads from ``raw``, or the exception it raises."""
    assert opcode.arg is not None
    try:
        return opcode.arg.reader(io.BytesIO(raw))
    except Exception as exc:  # any failure is the answer
        return exc


def _read_as_unpickler(opcode: pickletools.OpcodeInfo, stream: io.BytesIO, pos: int,
                       notes: list[str]) -> object:
    """The argument of an INT, LONG, STRING, GLOBAL, INST or PERSID opcode, as the unpicklers read it."""
    name = opcode.name
    raw = _line(stream) + (_line(stream) if name in ("GLOBAL", "INST") else b"")
    if name in ("INT", "LONG"):
        python, c = _unpickler_ints(raw, name)
        if python is None and c is None:
            raise ValueError(f"invalid {name} literal {raw[:40]!r}")
        ours: object = python if python is not None else c
        differs = python != c
    elif name == "STRING":
        ours, differs = _unpickler_string(raw), False
    else:
        decoded = raw.decode("utf-8" if name != "PERSID" else "ascii")  # the unpickler fails where this does
        ours = " ".join(decoded.split("\n")[:2]) if name != "PERSID" else decoded[:-1]
        differs = False
    theirs = _pickletools_reads(opcode, raw)
    if differs or isinstance(theirs, Exception) or theirs != ours:
        shown = (opcode.code + raw[:40].decode("ascii", "backslashreplace")).rstrip("\n").replace("\n", " ")
        notes.append(f"the {name} opcode at byte {pos:,} ({shown!r}) is read differently by pickletools "
                     "and the unpickler")
    return ours


_AS_UNPICKLER = frozenset({"INT", "LONG", "STRING", "GLOBAL", "INST", "PERSID"})


def _genops(stream: io.BytesIO, notes: list[str]) -> Iterator[tuple[pickletools.OpcodeInfo, object]]:
    """:func:`pickletools.genops`, with the arguments it reads otherwise read as the unpickler does."""
    while True:
        pos = stream.tell()
        code = stream.read(1)
        opcode = _CODE_TO_OP.get(code)
        if opcode is None:
            raise ValueError("pickle exhausted before seeing STOP" if not code
                             else f"at position {pos}, opcode {code!r} unknown")
        if opcode.name in _AS_UNPICKLER:
            arg = _read_as_unpickler(opcode, stream, pos, notes)
        else:
            arg = None if opcode.arg is None else opcode.arg.reader(stream)
        yield opcode, arg
        if opcode.name == "STOP":
            return


def _scan_one_pickle(
    stream: io.BytesIO, found: dict[tuple[str, str], None], at: list[int], notes: list[str]
) -> None:
    """Walk one pickle (up to STOP) and add each global it imports to ``found``.

    Raises whatever ``genops`` raises on malformed or truncated input; the
    globals seen before that point are already in ``found``, which matters
    because the unpickler would have executed them before failing too.
    ``at[0]`` is kept at the offset of the opcode being read, so a caller knows
    where a failure started.
    """
    tracer = _ImportTracer(found)
    at[0] = stream.tell()
    for opcode, arg in _genops(stream, notes):
        at[0] = stream.tell()
        if opcode.name == "STOP":
            return
        tracer.step(opcode, arg)


# Protocol-0 opcodes whose argument is a line, and the bytes the unpickler accepts in it:
# a numeric line (GET 'g', PUT 'p', INT 'I', LONG 'L', FLOAT 'F') or a module and a name
# (GLOBAL 'c', INST 'i'). A byte outside the set ends the unpickler there, however long
# the line would be, so a prefix that shows one needs no further reads (``ggjt`` is GET).
_NUMERIC_LINE = frozenset(b"0123456789+-_.eEinfatyINFATYxXbBoOjJ \t\r")
_NAME_LINE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.\n\r")
_LINE_ARGUMENT = {ord("g"): _NUMERIC_LINE, ord("p"): _NUMERIC_LINE, ord("I"): _NUMERIC_LINE,
                  ord("L"): _NUMERIC_LINE, ord("F"): _NUMERIC_LINE, ord("c"): _NAME_LINE, ord("i"): _NAME_LINE}


def _dead_argument(data: bytes, start: int) -> bool:
    """Whether the opcode at ``start``, cut off by the end of ``data``, can already not be valid.

    Only then is "ran out of bytes" a final answer; otherwise more bytes may complete it.
    """
    if start >= len(data):
        return False
    allowed = _LINE_ARGUMENT.get(data[start])
    if allowed is not None:
        return any(byte not in allowed for byte in data[start + 1:start + 1 + SNIFF_BYTES])
    if data[start] == ord("P"):  # PERSID: an ASCII line
        return any(byte >= 0x80 for byte in data[start + 1:start + 1 + SNIFF_BYTES])
    if data[start] == ord("S"):  # STRING: a quoted repr
        return len(data) > start + 1 and data[start + 1] not in b"'\""
    return False


def scan_pickle_bytes(data: bytes, *, more: bool = False) -> PickleGlobals:
    """Globals imported by the pickle(s) in ``data``, in order of first appearance.

    Consecutive pickles are followed (a legacy ``torch.save`` file is five of
    them, then raw storage bytes), stopping at the first byte that does not
    parse once at least one pickle has been read. Raises
    :class:`NotAPickleError` when the very first opcode is invalid. A first
    pickle that imports something and then stops parsing before its end (a
    joblib file's raw array bytes, a corrupt tail) is returned with
    ``incomplete`` set: what follows may import more.

    ``more=True`` says ``data`` is only a prefix of the file: a walk that reaches its
    end raises ``_Truncated`` instead of concluding (the caller reads further).
    """
    stream = io.BytesIO(data)
    found: dict[tuple[str, str], None] = {}
    pickles = 0
    incomplete: str | None = None
    notes: list[str] = []
    at = [0]
    end = 0
    while stream.tell() < len(data):
        noted = len(notes)
        try:
            _scan_one_pickle(stream, found, at, notes)
        except Exception as exc:
            if more and stream.tell() >= len(data) and not _dead_argument(data, at[0]):
                raise _Truncated from None
            if pickles == 0 and not found:
                raise NotAPickleError(f"not a pickle stream: {exc}") from None
            if pickles == 0:
                incomplete = f"the pickle could not be followed past byte {stream.tell():,} ({exc})"
            else:
                del notes[noted:]  # raw bytes after the pickles (a legacy file's storages) are no pickle
            break  # trailing storage bytes, or a truncated/corrupt pickle: keep what was seen
        pickles += 1
        end = stream.tell()
        if more and stream.tell() >= len(data):
            raise _Truncated  # another pickle may follow in the bytes not read yet
    if pickles == 0 and not found:
        raise NotAPickleError("not a pickle stream: no complete pickle")
    result = PickleGlobals(list(found), incomplete, ambiguous="; ".join(notes[:4]) or None)
    result.end = end
    return result


# --------------------------------------------------------------------------- zip


class _Reader:
    """``read_range`` with bounds and short-read checks."""

    def __init__(self, read_range: ReadRange, size: int) -> None:
        self._read = read_range
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ScanError(f"zip structure points outside the file ({offset}+{length} > {self.size})")
        if length == 0:
            return b""
        data = self._read(offset, length)
        if len(data) != length:
            raise ScanError(f"short read at {offset}: wanted {length} bytes, got {len(data)}")
        return data


def _find_eocd(tail: bytes) -> int:
    """Offset in ``tail`` of the end-of-central-directory record the loaders read.

    Both loaders take the *last* signature that has a whole 22-byte record after it, and
    neither checks that its comment length fits:

    * CPython's ``zipfile._EndRecData`` first takes a record that ends the file with an empty
      comment, and otherwise ``rfind``s the last signature in the final 64 KiB, refusing the
      file if fewer than 22 bytes follow it;
    * miniz (``mz_zip_reader_locate_header_sig``; PyTorch vendors miniz 3.0.2 behind ``torch.load``)
      scans backwards from the end, at most 64 KiB + 22 bytes, for the last signature with at
      least 22 bytes after it.

    This follows miniz, which is zipfile's choice whenever zipfile accepts the file; a file
    where they could choose differently is reported by :func:`_eocd_ambiguities`.
    """
    pos = tail.rfind(_EOCD_SIG, 0, len(tail) - _EOCD_SIZE + len(_EOCD_SIG))
    if pos < 0:
        raise ScanError("no zip end-of-central-directory record")
    return pos


def _eocd_ambiguities(tail: bytes, pos: int) -> list[str]:
    """Why readers could disagree about the end record at ``pos`` of ``tail`` (the file's last bytes)."""
    notes: list[str] = []
    signatures = tail.count(_EOCD_SIG)
    if signatures > 1:
        notes.append(f"{signatures} end-of-central-directory signatures in the archive's last "
                     f"{len(tail):,} bytes (readers may take different ones)")
    (comment_len,) = struct.unpack_from("<H", tail, pos + 20)
    after = len(tail) - pos - _EOCD_SIZE
    if comment_len != after:
        notes.append(f"the end record's comment length says {comment_len:,} bytes where {after:,} follow")
    comment = tail[pos + _EOCD_SIZE:]
    if any(sig in comment for sig in (_CENTRAL_SIG, _LOCAL_SIG, _EOCD64_SIG, _EOCD64_LOCATOR_SIG)):
        notes.append("the archive comment holds zip records (a second central directory)")
    return notes


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """Replace 0xFFFFFFFF sizes/offset with the values of the zip64 extra field (id 1)."""
    i = 0
    while i + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, i)
        body = extra[i + 4 : i + 4 + length]
        if tag == 1:
            j = 0
            values = []
            for current in (usize, csize, offset):
                if current == 0xFFFFFFFF:
                    if j + 8 > len(body):
                        raise ScanError("truncated zip64 extra field")
                    values.append(struct.unpack_from("<Q", body, j)[0])
                    j += 8
                else:
                    values.append(current)
            return values[0], values[1], values[2]
        i += 4 + length
    if 0xFFFFFFFF in (usize, csize, offset):
        raise ScanError("zip64 sizes without a zip64 extra field")
    return usize, csize, offset


class _Entry(NamedTuple):
    """A zip member as the central directory lists it."""

    name: str
    method: int
    flags: int
    csize: int  # compressed size
    usize: int  # uncompressed size
    offset: int  # of its local header
    span: int = 0  # the fewest bytes its local header and data take (the local extra field may add more)


def _end_record(reader: _Reader) -> tuple[bytes, int, int]:
    """``(tail, tail_start, pos)``: the file's last bytes and the end record the loaders read in them.

    A file that ends in a record with no comment (almost every archive) costs one small read of
    the record and the zip64 locator before it; any other is read over the whole 64 KiB window,
    so that every signature a reader could pick is seen.
    """
    window = min(reader.size, _EOCD_FIRST_READ)
    tail = reader.read(reader.size - window, window)
    clean = len(tail) >= _EOCD_SIZE and tail[-_EOCD_SIZE:][:4] == _EOCD_SIG and tail[-2:] == b"\0\0"
    if not clean and window < min(reader.size, _EOCD_WINDOW):
        window = min(reader.size, _EOCD_WINDOW)
        tail = reader.read(reader.size - window, window)
    return tail, reader.size - window, _find_eocd(tail)


def _directory_location(reader: _Reader, tail: bytes, tail_start: int, pos: int,
                        notes: list[str]) -> tuple[int, int, int, int]:
    """``(entries, size, offset, end)`` of the central directory the end record at ``pos`` describes.

    ``end`` is where the directory must end: the end record, or the zip64 record before it.
    The zip64 record is read where its locator says (miniz); zipfile reads it just before the
    locator instead, so a locator pointing elsewhere is noted.
    """
    (_sig, _disk, _cd_disk, _n_disk, n_entries, cd_size, cd_offset, _clen) = struct.unpack_from(
        "<4sHHHHIIH", tail, pos
    )
    eocd_abs = tail_start + pos
    loc = pos - _EOCD64_LOCATOR_SIZE
    has_locator = loc >= 0 and tail[loc : loc + 4] == _EOCD64_LOCATOR_SIG
    if not has_locator and (n_entries == 0xFFFF or 0xFFFFFFFF in (cd_size, cd_offset)):
        raise ScanError("zip64 end-of-central-directory locator missing")
    if not has_locator:
        return n_entries, cd_size, cd_offset, eocd_abs
    # writers may add zip64 records even when the 32-bit fields suffice
    (_s, _d, eocd64_offset, _t) = struct.unpack_from("<4sIQI", tail, loc)
    if eocd64_offset != eocd_abs - _EOCD64_LOCATOR_SIZE - _EOCD64_SIZE:
        notes.append(f"the zip64 locator points at byte {eocd64_offset:,}, not at the zip64 record before it "
                     "(zipfile reads the one before it, miniz the one it points at)")
    rec = reader.read(eocd64_offset, _EOCD64_SIZE) if eocd64_offset + _EOCD64_SIZE <= reader.size else b""
    if rec[:4] != _EOCD64_SIG:  # miniz then goes on with the 32-bit record, its offsets as they are
        notes.append("the zip64 locator points at no zip64 record")
        return n_entries, cd_size, cd_offset, cd_offset + cd_size
    (_s, _rs, _vm, _vn, _d, _cd, _nd, n_entries, cd_size, cd_offset) = struct.unpack_from(
        "<4sQHHIIQQQQ", rec
    )
    return n_entries, cd_size, cd_offset, eocd64_offset


def _central_directory(reader: _Reader) -> tuple[list[_Entry], list[str]]:
    """The entries the loaders read, and why other readers could read others (empty when none could).

    zipfile shifts every offset by the bytes found before the directory where the end record
    places it ("concat", for archives with something prepended); miniz takes the offsets as
    they are. When the two differ, both directories are read, and their entries joined.
    """
    tail, tail_start, pos = _end_record(reader)
    notes = _eocd_ambiguities(tail, pos)
    try:
        return _entries_at(reader, _directory_location(reader, tail, tail_start, pos, notes), notes), notes
    except ScanError as exc:
        if notes:  # what made readers disagree is what the finding must name, even if the reading then fails
            raise _AmbiguousUnreadable(str(exc), notes) from None
        raise


class _AmbiguousUnreadable(ScanError):
    """An archive that readers could read differently, and whose loaders' reading then failed."""

    def __init__(self, message: str, notes: list[str]) -> None:
        super().__init__(message)
        self.notes = notes


def _entries_at(reader: _Reader, location: tuple[int, int, int, int], notes: list[str]) -> list[_Entry]:
    """The entries of the directory at ``location`` (``_directory_location``'s answer), as the loaders read them."""
    n_entries, cd_size, cd_offset, cd_end = location
    if cd_size > MAX_CENTRAL_DIRECTORY_BYTES:
        raise ScanError(f"central directory of {cd_size} bytes exceeds the {MAX_CENTRAL_DIRECTORY_BYTES} cap")
    concat = cd_end - cd_size - cd_offset  # zipfile's name for bytes prepended to the archive
    if concat < 0:
        raise ScanError("central directory offset/size inconsistent with the file")
    entries = _directory_entries(reader, cd_offset + concat, cd_size, n_entries=n_entries, concat=concat,
                                 notes=notes)
    if concat:
        notes.append(f"the central directory ends {concat:,} bytes before its end record: zipfile reads it "
                     f"{concat:,} bytes past the offset the record states, miniz at that offset")
        try:
            entries += _directory_entries(reader, cd_offset, cd_size, n_entries=n_entries, concat=0, notes=notes)
        except ScanError as exc:
            notes.append(f"miniz's reading fails: {exc}")
    return entries


def _directory_entries(reader: _Reader, at: int, size: int, *, n_entries: int, concat: int,
                       notes: list[str]) -> list[_Entry]:
    """The records of the directory at ``at``, as zipfile reads them (every record in ``size`` bytes).

    miniz reads only the ``n_entries`` its end record lists: a count that differs, or bytes left
    after the listed records, are noted. Overlapping members and repeated names are noted too.
    """
    cd = reader.read(at, size)
    entries: list[_Entry] = []
    i = 0
    while i < len(cd):
        if i + _CENTRAL_SIZE > len(cd) or cd[i : i + 4] != _CENTRAL_SIG:
            if len(entries) >= n_entries:
                notes.append(f"{len(cd) - i:,} bytes follow the {n_entries} central directory entries its "
                             "end record lists (zipfile refuses them, miniz ignores them)")
                break
            raise ScanError(f"bad central directory entry at {at + i}")
        entry, i = _directory_entry(cd, i, concat)
        entries.append(entry)
    if len(entries) != n_entries:
        notes.append(f"the central directory holds {len(entries)} entries where its end record lists "
                     f"{n_entries} (zipfile reads every entry, miniz the number listed)")
    notes.extend(_entry_ambiguities(entries, at))
    return entries


def _directory_entry(cd: bytes, i: int, concat: int) -> tuple[_Entry, int]:
    """The central directory record at ``cd[i:]``, and where the next one starts."""
    fields = struct.unpack_from("<4sHHHHHHIIIHHHHHII", cd, i)
    flags, method = fields[3], fields[4]
    csize, usize = fields[8], fields[9]
    name_len, extra_len, comment_len = fields[10], fields[11], fields[12]
    offset = fields[16]
    name_raw = cd[i + _CENTRAL_SIZE : i + _CENTRAL_SIZE + name_len]
    extra = cd[i + _CENTRAL_SIZE + name_len : i + _CENTRAL_SIZE + name_len + extra_len]
    usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
    name = name_raw.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
    entry = _Entry(name, method, flags, csize, usize, offset + concat, _LOCAL_SIZE + name_len + csize)
    return entry, i + _CENTRAL_SIZE + name_len + extra_len + comment_len


def _entry_ambiguities(entries: list[_Entry], directory_start: int) -> list[str]:
    """Members that share bytes (with each other or the directory), and names listed twice.

    Readers differ on which of two same-named members they return (zipfile the last, miniz the
    one its sorted index finds), and overlapping members are how one archive shows two contents.
    """
    notes: list[str] = []
    names: dict[str, int] = {}
    for entry in entries:
        names[entry.name] = names.get(entry.name, 0) + 1
    repeated = sorted(name for name, count in names.items() if count > 1)
    if repeated:
        notes.append(f"{len(repeated)} member names listed more than once, e.g. {repeated[0]!r}")
    ordered = sorted(entries, key=lambda e: e.offset)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.offset + a.span > b.offset:
            notes.append(f"members {a.name!r} and {b.name!r} overlap")
            break
    if ordered and ordered[-1].offset + ordered[-1].span > directory_start:
        notes.append(f"member {ordered[-1].name!r} overlaps the central directory")
    return notes


def _read_member(reader: _Reader, member: _Entry) -> bytes:
    method, flags, csize, usize, offset = member.method, member.flags, member.csize, member.usize, member.offset
    if flags & 0x1:
        raise ScanError("encrypted zip member")
    if csize > MAX_MEMBER_BYTES or usize > MAX_MEMBER_BYTES:
        raise ScanError(f"pickle member of {max(csize, usize)} bytes exceeds the {MAX_MEMBER_BYTES} cap")
    header = reader.read(offset, _LOCAL_SIZE)
    if header[:4] != _LOCAL_SIG:
        raise ScanError(f"bad local file header at {offset}")
    name_len, extra_len = struct.unpack_from("<HH", header, 26)
    raw = reader.read(offset + _LOCAL_SIZE + name_len + extra_len, csize)
    if method == _STORED:
        return raw
    if method == _DEFLATED:
        inflater = zlib.decompressobj(-15)
        try:
            data = inflater.decompress(raw, MAX_MEMBER_BYTES + 1)
        except zlib.error as exc:
            raise ScanError(f"corrupt deflate data: {exc}") from None
        if len(data) > MAX_MEMBER_BYTES:
            raise ScanError(f"pickle member inflates past the {MAX_MEMBER_BYTES} cap")
        return data
    raise ScanError(f"unsupported zip compression method {method}")


def _pickle_members(entries: list[_Entry]) -> list[_Entry]:
    """``*/data.pkl`` first (what ``torch.load`` reads), then any other ``.pkl``."""
    pkls = [e for e in entries if e[0].lower().endswith(".pkl")]
    pkls.sort(key=lambda e: (not (e[0] == "data.pkl" or e[0].endswith("/data.pkl")), e[0]))
    return pkls


def _member_prefix(reader: _Reader, member: _Entry, want: int) -> bytes:
    """The first ``want`` bytes (or fewer, if the member is shorter) of a member, inflating only what is needed."""
    method, flags, csize, offset = member.method, member.flags, member.csize, member.offset
    if flags & 0x1:
        raise ScanError("encrypted zip member")
    header = reader.read(offset, _LOCAL_SIZE)
    if header[:4] != _LOCAL_SIG:
        raise ScanError(f"bad local file header at {offset}")
    name_len, extra_len = struct.unpack_from("<HH", header, 26)
    start = offset + _LOCAL_SIZE + name_len + extra_len
    if method == _STORED:
        return reader.read(start, min(want, csize))
    if method != _DEFLATED:
        raise ScanError(f"unsupported zip compression method {method}")
    inflater = zlib.decompressobj(-15)
    out = b""
    done = 0
    while len(out) < want and done < csize:
        chunk = reader.read(start + done, min(_INFLATE_CHUNK, csize - done))
        done += len(chunk)
        try:
            out += inflater.decompress(chunk, want - len(out))
        except zlib.error as exc:
            raise ScanError(f"corrupt deflate data: {exc}") from None
    return out


def npy_header(prefix: bytes) -> tuple[bool, int, str]:
    """``(holds_objects, data_offset, descr)`` from the first bytes of a ``.npy`` file.

    The header is a Python dict literal; it is read with :func:`ast.literal_eval` (what
    NumPy does), never evaluated. Raises :class:`ScanError` when it is malformed or
    longer than :data:`MAX_NPY_HEADER_BYTES`.
    """
    if not prefix.startswith(_NPY_MAGIC) or len(prefix) < 10:
        raise ScanError("not a NumPy array file")
    major = prefix[6]
    if major == 1:
        (length,) = struct.unpack_from("<H", prefix, 8)
        start = 10
    elif major in (2, 3) and len(prefix) >= 12:
        (length,) = struct.unpack_from("<I", prefix, 8)
        start = 12
    else:
        raise ScanError(f"unsupported .npy format version {major}")
    if length > MAX_NPY_HEADER_BYTES:
        raise ScanError(f".npy header of {length:,} bytes exceeds the {MAX_NPY_HEADER_BYTES:,}-byte cap")
    if start + length > len(prefix):
        raise ScanError(".npy header cut off")
    try:
        header = ast.literal_eval(prefix[start:start + length].decode("latin-1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ScanError(f"malformed .npy header: {exc}") from None
    descr = header.get("descr") if isinstance(header, dict) else None
    if descr is None:
        raise ScanError("malformed .npy header: no descr")
    return _has_objects(descr), start + length, str(descr)[:100]


def _npy_header_end(prefix: bytes) -> int:
    """Where a ``.npy`` header ends, from its first 12 bytes (capped, so a bogus length reads no more)."""
    if len(prefix) >= 10 and prefix[6] == 1:
        return 10 + min(int(struct.unpack_from("<H", prefix, 8)[0]), MAX_NPY_HEADER_BYTES)
    if len(prefix) >= 12:
        return 12 + min(int(struct.unpack_from("<I", prefix, 8)[0]), MAX_NPY_HEADER_BYTES)
    return 12


def _has_objects(descr: object, depth: int = 0) -> bool:
    """Whether a NumPy ``descr`` (a type string, or a structured list of fields) contains objects."""
    if depth > 32:
        return True  # absurd nesting: assume the worst, the scan then looks for a pickle
    if isinstance(descr, str):
        return descr.lstrip("<>|=").startswith("O")
    if isinstance(descr, list):
        return any(isinstance(field, tuple) and len(field) >= 2 and _has_objects(field[1], depth + 1)
                   for field in descr)
    return False




def _object_npy_members(reader: _Reader, entries: list[_Entry], skipped: list[str]) -> list[tuple[_Entry, int]]:
    """``.npy`` members holding object arrays, with the offset of their pickle inside the member."""
    npys = [e for e in entries if e[0].lower().endswith(".npy")]
    found: list[tuple[_Entry, int]] = []
    for entry in npys[:MAX_NPY_MEMBERS]:
        name = entry.name
        try:
            prefix = _member_prefix(reader, entry, SNIFF_BYTES)
            if _npy_header_end(prefix) > len(prefix) == SNIFF_BYTES:  # a header longer than the first read
                prefix = _member_prefix(reader, entry, _npy_header_end(prefix))
            holds, data_offset, _descr = npy_header(prefix)
        except ScanError as exc:
            skipped.append(f"{name}: {exc}")
            continue
        if holds:
            found.append((entry, data_offset))
    if len(npys) > MAX_NPY_MEMBERS:
        skipped.append(f"{len(npys) - MAX_NPY_MEMBERS} .npy members not inspected "
                       f"(over the cap of {MAX_NPY_MEMBERS} per archive)")
    return found


def _scan_zip(reader: _Reader, *, expect_pickle: bool) -> PickleGlobals:
    """The pickles of an archive, read as the loaders read it; where readers could disagree, ``ambiguous`` says why.

    An ambiguous archive never ends in a plain error: what the loaders' reading showed is
    returned with the ambiguity, so the finding names it (whatever other readers would see).
    """
    try:
        entries, notes = _central_directory(reader)
    except _AmbiguousUnreadable as exc:
        return PickleGlobals([], f"the loaders' reading fails: {exc}", ambiguous="; ".join(exc.notes))
    skipped: list[str] = []
    members: list[tuple[_Entry, int]] = [(e, 0) for e in _pickle_members(entries)]
    members += _object_npy_members(reader, entries, skipped)
    ambiguous = "; ".join(notes) or None
    if not members and not skipped:
        if ambiguous:
            return PickleGlobals([], "no pickle member in the loaders' reading", ambiguous=ambiguous)
        if expect_pickle:
            raise ScanError("zip archive has no .pkl member; not a PyTorch checkpoint")
        return _no_pickle()
    found: dict[tuple[str, str], None] = {}
    scanned = _scan_members(reader, members[:MAX_PICKLE_MEMBERS], found, skipped, notes)
    ambiguous = "; ".join(notes) or None
    if not scanned and not ambiguous:
        raise ScanError("; ".join(skipped))
    if len(members) > MAX_PICKLE_MEMBERS:
        skipped.append(f"{len(members) - MAX_PICKLE_MEMBERS} pickle members unscanned "
                       f"(over the cap of {MAX_PICKLE_MEMBERS} per archive)")
    return PickleGlobals(list(found), "; ".join(skipped) or None, ambiguous=ambiguous)


def _scan_members(reader: _Reader, members: list[tuple[_Entry, int]], found: dict[tuple[str, str], None],
                  skipped: list[str], notes: list[str]) -> int:
    """Scan each member's pickle into ``found``; what failed goes to ``skipped``; returns how many were scanned."""
    scanned = 0
    for member, start in members:
        name = member.name
        try:
            items = scan_pickle_bytes(_read_member(reader, member)[start:])
        except ScanError as exc:  # one unreadable member does not void what the others showed
            skipped.append(f"{name}: {exc}")
            continue
        scanned += 1
        for item in items:
            found.setdefault(item, None)
        if items.incomplete:
            skipped.append(f"{name}: {items.incomplete}")
        if items.ambiguous:
            notes.append(f"{name}: {items.ambiguous}")
    return scanned


def _magic_label(head: bytes) -> str | None:
    """The format ``head`` (a file's first bytes) announces, or None."""
    for magic, label in _MAGIC:
        if head.startswith(magic):
            return label
    if len(head) >= 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < 1 << 32:
        return "a safetensors file"
    return None


class _Offset(_Reader):
    """A reader over the bytes of another from ``start`` on (the pickle after a ``.npy`` header),
    or over ``size`` of them (a tar member)."""

    def __init__(self, base: _Reader, start: int, size: int | None = None) -> None:
        size = base.size - start if size is None else min(size, base.size - start)
        super().__init__(lambda offset, length: base.read(start + offset, length), size)


def _scan_raw(reader: _Reader, head: bytes, max_bytes: int = MAX_LEGACY_BYTES) -> PickleGlobals:
    """A legacy ``torch.save`` file or a raw pickle: read while the pickles go on, up to the cap.

    The opcodes decide, not the magic: a GGUF- or safetensors-looking prefix that goes on
    as a pickle is what an unpickler would run, so it is scanned like any other.
    """
    limit = min(reader.size, max_bytes)
    data = head
    while True:
        try:
            return scan_pickle_bytes(data, more=len(data) < limit)
        except _Truncated:
            if len(data) >= limit:  # pragma: no cover - more=False at the limit
                raise ScanError("pickle longer than the scanned prefix") from None
        except NotAPickleError:
            label = _magic_label(head)
            if label is not None:
                raise NotAPickleError(f"not a pickle: {label}") from None
            raise
        grown = min(limit, len(data) * _GROWTH)
        data += reader.read(len(data), grown - len(data))
        if len(data) >= limit and limit < reader.size:
            try:  # the pickle goes past the cap: report what the prefix shows, and that it is partial
                found = scan_pickle_bytes(data)
            except NotAPickleError:
                raise ScanError(f"pickle longer than the {max_bytes:,}-byte scanned prefix") from None
            return PickleGlobals(found, f"only the first {max_bytes:,} bytes scanned", ambiguous=found.ambiguous)


# What joblib.load recognises by magic number (``joblib.compressor``), and pandas by suffix, before it
# unpickles: the content is inflated as far as the pickle goes, never past the raw-pickle cap.
_COMPRESSIONS: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"), (b"BZ", "bz2"), (b"\xfd7zXZ", "xz"), (b"]\x00", "lzma"), (b"\x78", "zlib"),
    (b"\x04\x22\x4d\x18", "lz4"),
)


def _compression(head: bytes) -> str | None:
    for magic, name in _COMPRESSIONS:
        if head.startswith(magic):
            return name
    return None


def _decompressor(name: str) -> Any:
    if name == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "zlib":
        return zlib.decompressobj()
    if name == "bz2":
        return bz2.BZ2Decompressor()
    if name in ("xz", "lzma"):
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ if name == "xz" else lzma.FORMAT_ALONE)
    raise ScanError(f"{name}-compressed content is not scanned (no decompressor in the standard library)")


class _Inflated:
    """The decompressed content of a file, inflated from range reads only as far as asked."""

    def __init__(self, reader: _Reader, name: str) -> None:
        self._reader = reader
        self._inflater = _decompressor(name)
        self._zlib = name in ("gzip", "zlib")
        self._offset = 0
        self._chunk = _INFLATE_CHUNK
        self.data = b""
        self.exhausted = False  # every byte of the content is in ``data``

    def _needs_input(self) -> bool:
        return not self._inflater.unconsumed_tail if self._zlib else bool(self._inflater.needs_input)

    def upto(self, want: int) -> bytes:
        """The first ``want`` decompressed bytes (fewer when the content is shorter)."""
        while len(self.data) < want and not self.exhausted:
            raw = b""
            if self._needs_input():
                if self._offset >= self._reader.size:
                    self.exhausted = True
                    break
                raw = self._reader.read(self._offset, min(self._chunk, self._reader.size - self._offset))
                self._offset += len(raw)
                self._chunk = min(self._chunk * 2, 4 * 1024 * 1024)
            pending = self._inflater.unconsumed_tail + raw if self._zlib else raw
            try:
                self.data += self._inflater.decompress(pending, want - len(self.data))
            except (zlib.error, OSError, EOFError, lzma.LZMAError) as exc:
                raise ScanError(f"corrupt compressed data: {exc}") from None
            self.exhausted = self.exhausted or bool(self._inflater.eof)
        return self.data[:want]


def _scan_compressed(reader: _Reader, name: str, max_bytes: int) -> PickleGlobals:
    """A compressed pickle (``model.joblib.gz``): its decompressed prefix, grown while the pickle goes on."""
    content = _Inflated(reader, name)
    want = SNIFF_BYTES
    while True:
        data = content.upto(want)
        at_cap = len(data) >= max_bytes and not content.exhausted
        try:
            found = scan_pickle_bytes(data, more=not content.exhausted and not at_cap)
        except _Truncated:
            want = min(max_bytes, want * _GROWTH)
            continue
        except NotAPickleError as exc:
            if at_cap:
                raise ScanError(f"pickle longer than the {max_bytes:,}-byte scanned prefix") from None
            raise NotAPickleError(f"not a pickle: {name}-compressed data that is no pickle ({exc})") from None
        if at_cap:
            return PickleGlobals(found, found.incomplete or f"only the first {max_bytes:,} decompressed bytes "
                                 "scanned", ambiguous=found.ambiguous)
        return found


# ---- torch's legacy tar format
#
# ``torch.load`` reads a file that is no zip with ``tarfile.open(fileobj=f, mode="r:")`` first, and
# only when that fails as one raw pickle stream. In a tar it unpickles the members named
# ``storages`` and ``tensors`` (a count, then one pickle per record between raw bytes) and ``pickle``
# (the object), each found with ``TarFile.getmember``: the *last* member of that exact name. The
# headers are read here by ``tarfile`` itself, through range reads, so PAX and GNU long names are
# taken as torch takes them.

MAX_TAR_MEMBERS = 64
"""Tar headers read per file; torch writes three members (and a PAX header each, at most)."""
_TORCH_TAR_MEMBERS = ("storages", "tensors", "pickle")
_TAR_READ = 16 * 1024  # one range read covers the headers (and contents) of consecutive small members


MAX_TAR_HEADER_BYTES = 1024 * 1024
"""Bytes ``tarfile`` may read per file (headers, PAX records, GNU long names); member data is skipped by seeking."""


class _RangeFile:
    """The file object ``tarfile`` reads: range reads of at least :data:`_TAR_READ` bytes, and at most
    :data:`MAX_TAR_HEADER_BYTES` in all, refused before any buffer is made (a PAX header that claims
    gigabytes would otherwise be read, or allocated, whole)."""

    def __init__(self, reader: _Reader) -> None:
        self._reader = reader
        self._pos = 0
        self._fetched = 0
        self._cache_at = 0
        self._cache = b""

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._reader.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        left = max(0, self._reader.size - self._pos)
        size = left if size is None or size < 0 else min(size, left)
        cached = self._cache_at <= self._pos and self._pos + size <= self._cache_at + len(self._cache)
        if not cached:
            want = min(max(size, _TAR_READ), left)
            if self._fetched + want > MAX_TAR_HEADER_BYTES:
                raise ScanError(f"tar headers past the {MAX_TAR_HEADER_BYTES:,}-byte cap")
            self._fetched += want
            self._cache, self._cache_at = self._reader.read(self._pos, want), self._pos
        start = self._pos - self._cache_at
        data = self._cache[start:start + size]
        self._pos += len(data)
        return data


def _tar_checksum_fits(head: bytes) -> bool:
    """Whether ``head`` starts with a tar header ``tarfile`` accepts (its checksum, signed or unsigned)."""
    if len(head) < tarfile.BLOCKSIZE or head[:tarfile.BLOCKSIZE].count(0) == tarfile.BLOCKSIZE:
        return False
    try:
        return tarfile.nti(head[148:156]) in tarfile.calc_chksums(head[:tarfile.BLOCKSIZE])  # type: ignore[attr-defined]
    except (tarfile.HeaderError, ValueError):
        return False


def _torch_tar_members(reader: _Reader) -> tuple[dict[str, list[tarfile.TarInfo]], list[str]]:
    """The members torch's legacy loader unpickles, by name (every one so named), and what could not be read."""
    found: dict[str, list[tarfile.TarInfo]] = {}
    skipped: list[str] = []
    with tarfile.open(fileobj=_RangeFile(reader), mode="r:",  # type: ignore[call-overload]
                      format=tarfile.PAX_FORMAT) as tar:
        for count in range(MAX_TAR_MEMBERS + 1):
            member = tar.next()
            if member is None:
                break
            if count == MAX_TAR_MEMBERS:
                skipped.append(f"tar members past the first {MAX_TAR_MEMBERS} not read")
                break
            if member.name in _TORCH_TAR_MEMBERS:
                found.setdefault(member.name, []).append(member)
    return found, skipped


def _scan_tar(reader: _Reader, max_bytes: int) -> PickleGlobals:
    """A legacy torch tar: the pickles of its ``storages``, ``tensors`` and ``pickle`` members."""
    try:
        members, skipped = _torch_tar_members(reader)
    except (tarfile.TarError, ValueError, EOFError) as exc:
        raise ScanError(f"unreadable tar archive: {exc}") from None
    notes = [f"{len(listed)} tar members named {name!r} (torch reads the last)"
             for name, listed in members.items() if len(listed) > 1]
    found: dict[tuple[str, str], None] = {}
    for name, listed in sorted(members.items()):
        for member in listed:
            if not member.isreg():
                notes.append(f"the tar member {name!r} is a link or special file")
                continue
            part = _Offset(reader, member.offset_data, member.size)
            try:
                items = _scan_raw(part, part.read(0, min(SNIFF_BYTES, part.size)), max_bytes)
            except ScanError as exc:
                skipped.append(f"{name}: {exc}")
                continue
            found.update(dict.fromkeys(items))
            skipped += [f"{name}: {items.incomplete}"] if items.incomplete else []
            notes += [f"{name}: {items.ambiguous}"] if items.ambiguous else []
            if name != "pickle" and items.end < member.size:
                skipped.append(f"{name}: the records after its first raw bytes")
    if not members:
        raise ScanError("a tar archive without the members torch.load unpickles (storages, tensors, pickle)")
    return PickleGlobals(list(found), "; ".join(skipped) or None, ambiguous="; ".join(notes) or None)


def _scan_tar_or_pickle(reader: _Reader, head: bytes, max_bytes: int) -> PickleGlobals:
    """A file ``tarfile`` opens: torch.load reads its members, but pickle.load and joblib read its bytes
    as one pickle stream, so a tar header that also parses as a pickle is scanned both ways."""
    as_tar: PickleGlobals | None = None
    tar_error: ScanError | None = None
    try:
        as_tar = _scan_tar(reader, max_bytes)
    except ScanError as exc:
        tar_error = exc
    try:
        as_pickle = _scan_raw(reader, head, max_bytes)
    except ScanError:
        as_pickle = PickleGlobals()
    if as_tar is None:
        if not as_pickle:  # a tar torch cannot read, whose header imports nothing as a pickle
            raise tar_error or ScanError("unreadable tar archive")
        return as_pickle
    if not as_pickle:
        return as_tar
    both = "a tar archive whose first bytes are also a pickle (torch.load reads the tar, pickle.load the pickle)"
    notes = "; ".join(n for n in (both, as_tar.ambiguous, as_pickle.ambiguous) if n)
    incomplete = "; ".join(n for n in (as_tar.incomplete, as_pickle.incomplete) if n) or None
    return PickleGlobals(list(dict.fromkeys([*as_tar, *as_pickle])), incomplete, ambiguous=notes)


def _scan_npy(reader: _Reader, head: bytes, *, expect_pickle: bool, max_bytes: int) -> PickleGlobals:
    """A ``.npy`` file: its object array's pickle, which follows the header; nothing for a numeric array."""
    if len(head) < reader.size and len(head) < _npy_header_end(head):
        head += reader.read(len(head), min(reader.size, _npy_header_end(head)) - len(head))
    holds, data_offset, descr = npy_header(head)
    if not holds:
        if expect_pickle:
            raise NotAPickleError(f"not a pickle: a NumPy array file of {descr}, without objects")
        return _no_pickle()
    rest = _Offset(reader, data_offset)
    if rest.size <= 0:
        raise ScanError("object array without its pickle")
    return _scan_raw(rest, rest.read(0, min(SNIFF_BYTES, rest.size)), max_bytes)


def scan_checkpoint(read_range: ReadRange, size: int, *, expect_pickle: bool = True,
                    max_raw_bytes: int = MAX_LEGACY_BYTES, decompress: bool = False) -> PickleGlobals:
    """The ``(module, name)`` globals a checkpoint's pickle(s) would import.

    ``read_range(offset, length)`` must return exactly those bytes of the file;
    ``size`` is its total length. The first read is the 4-byte magic. A zip
    (PyTorch >= 1.6 format, ``.npz``) is read through its central directory, and only
    its ``.pkl`` members and the headers of its ``.npy`` members are fetched (then the
    pickles of object arrays); a ``.npy`` is judged from its header; anything else is
    judged from its first :data:`SNIFF_BYTES` and, when those may start a pickle,
    scanned as a raw pickle read in growing steps while it goes on, up to
    :data:`MAX_LEGACY_BYTES`.

    Raises :class:`ScanError` for a malformed archive or one with no readable pickle,
    and :class:`NotAPickleError` for bytes that are not pickle at all; callers
    record those as "could not be scanned", never as "clean". A scan that found
    globals but skipped something returns them with ``incomplete`` set. With
    ``expect_pickle=False`` (a container that may legitimately hold no pickle) a zip
    or ``.npy`` holding none returns an empty result with ``holds_pickle=False``.
    ``max_raw_bytes`` caps the prefix of a raw pickle read (smaller for a file judged by content alone).
    ``decompress=True`` (a file joblib or pandas decompresses first) inflates content that starts with a
    compressor's magic number (gzip, zlib, bz2, xz, lzma, as joblib tells them) and scans what it holds.
    """
    if size <= 0:
        raise NotAPickleError("empty file")
    reader = _Reader(read_range, size)
    magic = reader.read(0, min(4, size))  # a zip's data members may start right after: read no more
    if magic in (_LOCAL_SIG, _EOCD_SIG):
        return _scan_zip(reader, expect_pickle=expect_pickle)
    head = magic + reader.read(len(magic), min(SNIFF_BYTES, size) - len(magic))
    compression = _compression(head) if decompress else None
    if compression is not None:
        return _scan_compressed(reader, compression, max_raw_bytes)
    if head.startswith(_NPY_MAGIC):
        return _scan_npy(reader, head, expect_pickle=expect_pickle, max_bytes=max_raw_bytes)
    if _tar_checksum_fits(head):
        return _scan_tar_or_pickle(reader, head, max_raw_bytes)
    return _scan_raw(reader, head, max_raw_bytes)
