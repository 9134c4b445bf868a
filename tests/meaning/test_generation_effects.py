"""Decoding defaults by effect, on the Hub stand-in: openai/whisper's January 2024 long-form change and one
change of each other class, each as a two-revision repo read through the real HubClient."""

from __future__ import annotations

import json

import pytest

from .hub import analyse_scenarios

# openai/whisper-large-v3 generation_config.json (the keys that matter here), before January 2024.
WHISPER = {
    "begin_suppress_tokens": [220, 50257], "bos_token_id": 50257, "decoder_start_token_id": 50258,
    "eos_token_id": 50257, "forced_decoder_ids": None, "is_multilingual": True,
    "lang_to_id": {"<|en|>": 50259, "<|de|>": 50261}, "max_initial_timestamp_index": 1, "max_length": 448,
    "no_timestamps_token_id": 50364, "pad_token_id": 50257, "return_timestamps": False,
    "suppress_tokens": [1, 2, 7, 8, 9, 10, 14, 25], "task_to_id": {"transcribe": 50360, "translate": 50359},
    "transformers_version": "4.36.0.dev0",
}
WHISPER_2024 = {**WHISPER, "max_initial_timestamp_index": 50, "prev_sot_token_id": 50362,
                "transformers_version": "4.37.0.dev0"}
CONFIG = json.dumps({"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"]}).encode()


def repo(generation: dict) -> dict[str, bytes]:
    return {"config.json": CONFIG, "generation_config.json": json.dumps(generation, indent=2).encode()}


SCENARIOS = {
    "whisper_long_form": (repo(WHISPER), repo(WHISPER_2024)),
    "sampling": (repo(WHISPER), repo({**WHISPER, "temperature": 0.2})),
    "length": (repo(WHISPER), repo({**WHISPER, "max_length": 224})),
    "cache": (repo(WHISPER), repo({**WHISPER, "cache_implementation": "static"})),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("generation"), "openai", SCENARIOS)


def test_whisper_long_form_defaults_are_moderate_and_say_what_they_change(results):
    assert [(f.code, f.severity.value, f.summary, f.evidence["effect"]) for f in results["whisper_long_form"]
            if f.category == "generation"] == [
        ("generation.forced_tokens_changed", "moderate", "max_initial_timestamp_index: 1 → 50",
         "timestamps and forced or suppressed tokens"),
        ("generation.forced_tokens_changed", "moderate", "prev_sot_token_id: (unset) → 50362",
         "timestamps and forced or suppressed tokens"),
        ("generation.metadata_changed", "info", "transformers_version: 4.36.0.dev0 → 4.37.0.dev0", "metadata"),
    ]


@pytest.mark.parametrize(("name", "expected"), [
    ("sampling", ("generation.sampling_changed", "moderate", "temperature: (unset) → 0.2")),
    ("length", ("generation.max_length_changed", "moderate", "max_length: 448 → 224")),
    ("cache", ("generation.cache_changed", "low", "cache_implementation: (unset) → static")),
])
def test_each_class_has_its_severity(results, name, expected):
    assert [(f.code, f.severity.value, f.summary) for f in results[name] if f.category == "generation"] == [expected]
