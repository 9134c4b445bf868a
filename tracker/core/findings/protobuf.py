"""A bounded reader of the protobuf wire format, for files the tracker must look into but never load.

sentencepiece ``.model`` files are protobuf messages. Parsing them with a generated class would
trust every length prefix; here each field is checked against what is left of its buffer, and
the number of fields and the nesting read are capped, so a hostile file (a length prefix of 2^60,
a million empty fields) is a clear :class:`ProtobufError`, in time proportional to its size. Pure.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

MAX_FIELDS = 4_000_000  # per message read (a 256k-piece vocabulary is ~770k fields)


class ProtobufError(ValueError):
    """The bytes are not a well-formed message within the bounds; the message says where."""


class Field(NamedTuple):
    number: int
    wire_type: int
    value: int | bytes  # varints and fixed numbers as int, length-delimited fields as bytes


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError(f"varint cut off at byte {pos}")
        if shift > 63:
            raise ProtobufError(f"varint longer than 10 bytes at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes, *, max_fields: int = MAX_FIELDS) -> Iterator[Field]:
    """The top-level fields of one message, in order; raises ProtobufError on anything malformed."""
    pos, count = 0, 0
    while pos < len(data):
        count += 1
        if count > max_fields:
            raise ProtobufError(f"more than {max_fields:,} fields")
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"field number 0 at byte {pos}")
        if wire == 0:
            value, pos = _varint(data, pos)
            yield Field(number, wire, value)
        elif wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if pos + size > len(data):
                raise ProtobufError(f"field {number}: fixed value cut off at byte {pos}")
            yield Field(number, wire, int.from_bytes(data[pos:pos + size], "little"))
            pos += size
        elif wire == 2:
            length, pos = _varint(data, pos)
            if length > len(data) - pos:
                raise ProtobufError(f"field {number}: length {length:,} runs past the end "
                                    f"({len(data) - pos:,} bytes left at byte {pos:,})")
            yield Field(number, wire, data[pos:pos + length])
            pos += length
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire} at byte {pos}")


def as_float(value: int | bytes) -> float:
    return struct.unpack("<f", int(value).to_bytes(4, "little"))[0] if isinstance(value, int) else float("nan")


def as_text(value: int | bytes) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
