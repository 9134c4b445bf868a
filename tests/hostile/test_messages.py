"""Messages about hostile upstream content: say what the tracker did, show names as they are.

Before: a 550k-token tokenizer was refused as ``tokenizer.malformed``, "loading the tokenizer
fails", though the ``tokenizers`` library loads it: the element cap is right, the message was
wrong. It is now ``tokenizer.too_large``, "too large to analyse".
"""

from __future__ import annotations

import json

import tokenizers

from tests.findings.sources import make_change
from tracker.findings.rules import SeverityRules
from tracker.findings.tokenizer import TokenizerLimits, analyse_tokenizer
from tracker.model import Severity

RULES = SeverityRules.default()


def bpe_tokenizer(bases: int) -> bytes:
    """A valid BPE tokenizer.json: ``bases`` CJK characters and every pair of them merged.

    742 bases give 550,564 merges and 551,306 tokens, 2.2 M JSON elements: past the cap.
    """
    chars = [chr(0x4E00 + i) for i in range(bases)]
    merges = [[a, b] for a in chars for b in chars]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({a + b: len(chars) + i for i, (a, b) in enumerate(merges)})
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": None, "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "ignore_merges": False, "vocab": vocab, "merges": merges}}
    return json.dumps(doc, ensure_ascii=False).encode()


def test_a_tokenizer_over_the_element_cap_is_too_large_to_analyse_not_malformed():
    small, big = bpe_tokenizer(8), bpe_tokenizer(742)
    loaded = tokenizers.Tokenizer.from_str(big.decode())  # the library loads it
    assert loaded.get_vocab_size() == 551_306
    change, sources = make_change({"tokenizer.json": small}, {"tokenizer.json": big})

    findings = analyse_tokenizer(change, sources, RULES)

    assert [(f.code, f.severity, f.summary) for f in findings] == [
        ("tokenizer.too_large", Severity.MODERATE,
         "tokenizer.json is too large to analyse: more than 2,000,000 JSON elements, over the analysis limit")]
    assert findings[0].evidence == {"error": "more than 2,000,000 JSON elements, over the analysis limit",
                                    "limit": 2_000_000}


def test_a_side_file_over_its_byte_cap_is_too_large_too():
    config = json.dumps({"model_max_length": 512, "pad": "x" * 100}).encode()
    change, sources = make_change({"tokenizer_config.json": b"{}"}, {"tokenizer_config.json": config})

    findings = analyse_tokenizer(change, sources, RULES, TokenizerLimits(config_max_bytes=64))

    assert [(f.code, f.severity, f.summary) for f in findings] == [
        ("tokenizer.too_large", Severity.MODERATE,
         f"tokenizer_config.json is too large to analyse: {len(config)} bytes, over the 64-byte limit; not parsed")]
