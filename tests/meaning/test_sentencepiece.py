"""sentencepiece .model files read by the bounded protobuf reader: pieces, model type, normalizer.

The models are written by the test in the ModelProto wire format (pieces = field 1, trainer_spec = 2,
normalizer_spec = 3), shaped like a T5 spiece.model: <pad>, </s>, <unk>, then ▁-prefixed pieces.
"""

from __future__ import annotations

import struct

import pytest

from tracker.core.findings.protobuf import ProtobufError, fields
from tracker.core.findings.sentencepiece import read_model

from .hub import analyse_scenarios

PIECES = ["<pad>", "</s>", "<unk>", "▁", "▁the", "s", "▁a", "▁of"]


def varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def model(pieces=PIECES, model_type: int = 1, normalizer: str = "nmt_nfkc") -> bytes:
    body = b"".join(field(1, field(1, p.encode()) + varint(2 << 3 | 5) + struct.pack("<f", -float(i)))
                    for i, p in enumerate(pieces))
    body += field(2, varint(3 << 3) + varint(model_type) + varint(4 << 3) + varint(len(pieces)))
    return body + field(3, field(1, normalizer.encode()))


CONFIG = b'{"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}'


def t5(spiece: bytes, **extra: bytes) -> dict[str, bytes]:
    return {"config.json": CONFIG, "spiece.model": spiece, **extra}


SCENARIOS = {
    "pieces_swapped": (t5(model()), t5(model([*PIECES[:4], "▁a", "s", "▁the", "▁of"]))),
    "bpe_and_identity": (t5(model()), t5(model(model_type=2, normalizer="identity"))),
    "huge_length_prefix": (t5(model()), t5(varint(1 << 3 | 2) + varint(1 << 60) + b"\x00" * 16)),
    "fast_tokenizer_present": (t5(model(), **{"tokenizer.json": b"{}"}),
                               t5(model(model_type=2), **{"tokenizer.json": b"{}"})),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("spm"), "acme", SCENARIOS)


def triples(findings):
    return [(f.code, f.severity.value, f.summary) for f in findings if f.category not in ("files", "weights")]


def test_the_reader_gets_pieces_type_size_and_normalizer():
    assert read_model(model()) == {"pieces": PIECES, "model_type": "unigram", "vocab_size": 8, "normalizer": "nmt_nfkc"}


def test_moved_pieces_are_renumbered_tokens(results):
    assert triples(results["pieces_swapped"]) == [
        ("tokenizer.tokens_renumbered", "high",
         'spiece.model: 2 tokens re-numbered (e.g. "▁the" 4 → 6, "▁a" 6 → 4)')]


def test_model_type_and_normalizer(results):
    assert triples(results["bpe_and_identity"]) == [
        ("tokenizer.model_type_changed", "high", "spiece.model: model type unigram → bpe"),
        ("tokenizer.normalizer_changed", "high", "spiece.model: normalizer nmt_nfkc → identity"),
    ]


def test_a_huge_length_prefix_is_a_finding_not_a_read(results):
    assert triples(results["huge_length_prefix"]) == [
        ("tokenizer.malformed", "high", "spiece.model is not a sentencepiece model: field 1: length "
         "1,152,921,504,606,846,976 runs past the end (16 bytes left at byte 10); loading the tokenizer fails")]
    with pytest.raises(ProtobufError, match="more than 10 fields"):
        list(fields(varint(8) + varint(1) * 1 + (varint(8) + varint(1)) * 20, max_fields=10))


def test_beside_a_fast_tokenizer_nothing_above_low(results):
    assert all(f.severity.value in ("low", "info") for f in results["fast_tokenizer_present"])
