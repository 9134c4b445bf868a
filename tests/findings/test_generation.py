"""generation_config.json findings, modelled on real upstream changes."""

from __future__ import annotations

import json

import pytest

from tests.findings.sources import make_change
from tracker.core.findings import generation
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()

# meta-llama/Meta-Llama-3-8B-Instruct generation_config.json before and after the May 2024 eos fix.
LLAMA3_GEN_BEFORE = {
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "transformers_version": "4.40.0.dev0",
}
LLAMA3_GEN_AFTER = {
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128009],
    "do_sample": True,
    "temperature": 0.6,
    "max_length": 4096,
    "top_p": 0.9,
    "transformers_version": "4.40.0.dev0",
}


def dump(obj) -> bytes:
    return json.dumps(obj, indent=2).encode()


def run(old: dict | None, new: dict):
    change, sources = make_change(
        None if old is None else {k: v if isinstance(v, bytes) else dump(v) for k, v in old.items()},
        {k: v if isinstance(v, bytes) else dump(v) for k, v in new.items()},
    )
    return generation.analyse(change, sources, RULES)


def triples(findings):
    return [(f.code, f.severity, f.summary) for f in findings]


def test_llama3_eos_fix():
    findings = run({"generation_config.json": LLAMA3_GEN_BEFORE}, {"generation_config.json": LLAMA3_GEN_AFTER})
    eos = [f for f in findings if f.evidence["key"] == "eos_token_id"]
    assert len(eos) == 1
    f = eos[0]
    assert (f.code, f.category, f.severity) == ("generation.eos_token_id_changed", "generation", Severity.HIGH)
    assert f.summary == "eos_token_id: 128001 → [128001, 128009]"
    assert (f.path, f.before, f.after) == ("generation_config.json", 128001, [128001, 128009])
    assert sorted(triples(findings)) == sorted([
        ("generation.eos_token_id_changed", Severity.HIGH, "eos_token_id: 128001 → [128001, 128009]"),
        ("generation.sampling_changed", Severity.MODERATE, "do_sample: (unset) → true"),
        ("generation.sampling_changed", Severity.MODERATE, "temperature: (unset) → 0.6"),
        ("generation.sampling_changed", Severity.MODERATE, "top_p: (unset) → 0.9"),
        ("generation.max_length_changed", Severity.MODERATE, "max_length: (unset) → 4096"),
    ])


def test_equivalent_eos_spellings_are_not_changes():
    before = {"eos_token_id": [128009, 128001], "pad_token_id": 0}
    after = {"eos_token_id": [128001, 128009], "pad_token_id": [0]}
    assert run({"generation_config.json": before}, {"generation_config.json": after}) == []
    assert run({"generation_config.json": {"eos_token_id": 2}}, {"generation_config.json": {"eos_token_id": [2]}}) == []


def test_added_generation_config_is_compared_with_config_json_defaults():
    config = {"model_type": "llama", "eos_token_id": 128001, "bos_token_id": 128000}
    findings = run(
        {"config.json": config},
        {"config.json": config, "generation_config.json": {"bos_token_id": 128000, "eos_token_id": [128001, 128009]}},
    )
    assert triples(findings) == [
        (
            "generation.file_added",
            Severity.LOW,
            "generation_config.json added: generation defaults now come from it, not config.json",
        ),
        ("generation.eos_token_id_changed", Severity.HIGH, "eos_token_id: 128001 → [128001, 128009]"),
    ]
    # without generation_config.json, a config.json eos change is a generation change
    findings = run({"config.json": config}, {"config.json": dict(config, eos_token_id=128009)})
    assert triples(findings) == [
        ("generation.eos_token_id_changed", Severity.HIGH, "eos_token_id: 128001 → 128009")
    ]
    assert findings[0].path == "config.json"


def test_config_json_change_is_ignored_when_generation_config_exists():
    gen = {"eos_token_id": 2}
    assert run(
        {"config.json": {"eos_token_id": 2}, "generation_config.json": gen},
        {"config.json": {"eos_token_id": 3}, "generation_config.json": gen},
    ) == []


def test_sampling_length_pad_and_metadata():
    before = {"temperature": 0.6, "top_k": 50, "max_new_tokens": 512, "pad_token_id": 0, "transformers_version": "4.40"}
    after = {"temperature": 0.7, "top_k": 50, "max_new_tokens": 2048, "pad_token_id": 2, "transformers_version": "4.45",
             "cache_implementation": "hybrid"}
    assert sorted(triples(run({"generation_config.json": before}, {"generation_config.json": after}))) == sorted([
        ("generation.sampling_changed", Severity.MODERATE, "temperature: 0.6 → 0.7"),
        ("generation.max_length_changed", Severity.MODERATE, "max_new_tokens: 512 → 2048"),
        ("generation.pad_token_id_changed", Severity.LOW, "pad_token_id: 0 → 2"),
        ("generation.metadata_changed", Severity.INFO, "transformers_version: 4.40 → 4.45"),
        ("generation.cache_changed", Severity.LOW, "cache_implementation: (unset) → hybrid"),
    ])


@pytest.mark.parametrize(
    "payload, error",
    [
        (b"\xc3\x28", "not valid UTF-8 (byte 0: invalid continuation byte)"),
        (b'{"eos_token_id": 1', "invalid JSON at line 1 column 19: Expecting ',' delimiter"),
        (b'"eos"', "expected a JSON object, found a string"),
    ],
)
def test_hostile_generation_config(payload, error):
    findings = run({"generation_config.json": {"eos_token_id": 1}}, {"generation_config.json": payload})
    assert triples(findings) == [(
        "generation.malformed",
        Severity.HIGH,
        f"generation_config.json cannot be parsed: {error}; generate() will fail or fall back",
    )]
    assert [f.code for f in run(None, {"generation_config.json": payload})] == ["generation.malformed"]


def test_baseline_and_unchanged_are_quiet():
    assert run(None, {"generation_config.json": LLAMA3_GEN_AFTER}) == []
    change, sources = make_change({"generation_config.json": b"{}"}, {"generation_config.json": b"{}"})
    assert generation.analyse(change, sources, RULES) == []
    assert sources.reads == []


@pytest.mark.parametrize(("key", "before", "after", "code", "severity", "effect"), [
    ("top_p", 0.9, 0.95, "generation.sampling_changed", Severity.MODERATE, "sampling"),
    ("num_beams", 1, 4, "generation.sampling_changed", Severity.MODERATE, "sampling"),
    ("max_new_tokens", 256, 512, "generation.max_length_changed", Severity.MODERATE, "length and stopping"),
    ("stop_strings", None, ["</s>"], "generation.max_length_changed", Severity.MODERATE, "length and stopping"),
    ("suppress_tokens", [1, 2], [1, 2, 3], "generation.forced_tokens_changed", Severity.MODERATE,
     "timestamps and forced or suppressed tokens"),
    ("bad_words_ids", None, [[5]], "generation.forced_tokens_changed", Severity.MODERATE,
     "timestamps and forced or suppressed tokens"),
    ("use_cache", True, False, "generation.cache_changed", Severity.LOW, "cache"),
    ("cache_implementation", "dynamic", "static", "generation.cache_changed", Severity.LOW, "cache"),
    ("output_scores", False, True, "generation.value_changed", Severity.LOW, "other"),
])
def test_each_key_is_classed_by_its_effect(key, before, after, code, severity, effect):
    old = {"eos_token_id": 2} | ({} if before is None else {key: before})
    (finding,) = run({"generation_config.json": old}, {"generation_config.json": {"eos_token_id": 2, key: after}})
    assert (finding.code, finding.severity, finding.evidence["effect"]) == (code, severity, effect)


@pytest.mark.parametrize("key", ["max_initial_timestamp_index", "prev_sot_token_id", "no_timestamps_token_id",
                                 "begin_suppress_tokens", "suppress_tokens", "forced_decoder_ids", "lang_to_id",
                                 "task_to_id", "is_multilingual"])
def test_whisper_long_form_keys_are_at_least_moderate(key):
    (finding,) = run({"generation_config.json": {"eos_token_id": 2}},
                     {"generation_config.json": {"eos_token_id": 2, key: 1}})
    assert (finding.code, finding.severity) == ("generation.forced_tokens_changed", Severity.MODERATE)
