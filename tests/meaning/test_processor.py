"""Multimodal processor configs: a change of what the model sees is a finding of matching severity.

The "before" files are google/gemma-3-4b-it's processor_config.json and preprocessor_config.json
as published (Gemma3Processor: 256 image tokens, 896x896 SigLIP input, mean/std 0.5), and a
LLaVA-1.5 style processor_config.json (llava-hf/llava-1.5-7b-hf: image_token "<image>", patch 14,
strategy "default", one extra CLS token).
"""

from __future__ import annotations

import json

import pytest

from tests.findings.sources import analyse_revision, make_change
from tracker.core.findings import processor
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()

GEMMA3_PROCESSOR = {"image_seq_length": 256, "processor_class": "Gemma3Processor"}
GEMMA3_PREPROCESSOR = {
    "do_convert_rgb": None, "do_normalize": True, "do_pan_and_scan": None, "do_rescale": True,
    "do_resize": True, "image_mean": [0.5, 0.5, 0.5], "image_processor_type": "Gemma3ImageProcessor",
    "image_seq_length": 256, "image_std": [0.5, 0.5, 0.5], "pan_and_scan_max_num_crops": None,
    "pan_and_scan_min_crop_size": None, "pan_and_scan_min_ratio_to_activate": None,
    "processor_class": "Gemma3Processor", "resample": 2, "rescale_factor": 0.00392156862745098,
    "size": {"height": 896, "width": 896},
}
LLAVA_PROCESSOR = {"image_token": "<image>", "num_additional_image_tokens": 1, "patch_size": 14,
                   "processor_class": "LlavaProcessor", "vision_feature_select_strategy": "default"}


def run(path: str, before: dict, after: dict):
    change, sources = make_change({path: json.dumps(before).encode()}, {path: json.dumps(after).encode()})
    return processor.analyse(change, sources, RULES)


def test_fewer_image_tokens_is_high():
    findings = run("processor_config.json", GEMMA3_PROCESSOR, dict(GEMMA3_PROCESSOR, image_seq_length=64))
    assert [(f.code, f.severity, f.summary) for f in findings] == [
        ("processor.image_tokens_changed", Severity.HIGH, "processor_config.json: image_seq_length: 256 → 64"),
    ]
    assert findings[0].severity.at_least(Severity.LOW) and findings[0].severity != Severity.INFO


@pytest.mark.parametrize("path,before,changes,expected", [
    ("preprocessor_config.json", GEMMA3_PREPROCESSOR, {"size": {"height": 448, "width": 448}},
     [("processor.image_size_changed", "moderate", "size.height: 896 → 448"),
      ("processor.image_size_changed", "moderate", "size.width: 896 → 448")]),
    ("preprocessor_config.json", GEMMA3_PREPROCESSOR, {"image_mean": [0.48145466, 0.4578275, 0.40821073]},
     [("processor.normalisation_changed", "high", "image_mean: [0.5, 0.5, 0.5] → [0.48145466, 0.4578275, 0.40821073]")]),
    ("processor_config.json", LLAVA_PROCESSOR, {"vision_feature_select_strategy": "full"},
     [("processor.feature_selection_changed", "high", 'vision_feature_select_strategy: default → full')]),
    ("processor_config.json", LLAVA_PROCESSOR, {"patch_size": 16, "image_token": "<|image|>"},
     [("processor.image_token_changed", "high", 'image_token: <image> → <|image|>'),
      ("processor.patch_size_changed", "high", "patch_size: 14 → 16")]),
    ("processor_config.json", LLAVA_PROCESSOR, {"num_additional_image_tokens": 0},
     [("processor.image_tokens_changed", "high", "num_additional_image_tokens: 1 → 0")]),
    ("video_preprocessor_config.json", {"fps": 2.0, "do_sample_frames": False}, {"fps": 1.0},
     [("processor.video_sampling_changed", "moderate", "fps: 2.0 → 1.0")]),
])
def test_each_key_gets_the_code_of_what_it_changes(path, before, changes, expected):
    findings = run(path, before, dict(before, **changes))
    assert sorted((f.code, f.severity.value, f.summary.removeprefix(f"{path}: ")) for f in findings) == sorted(expected)


def test_a_broken_processor_config_is_high_and_the_first_revision_only_validates():
    change, sources = make_change({"preprocessor_config.json": b"{}"}, {"preprocessor_config.json": b"{not json"})
    [finding] = processor.analyse(change, sources, RULES)
    assert (finding.code, finding.severity) == ("processor.malformed", Severity.HIGH)
    change, sources = make_change(None, {"preprocessor_config.json": json.dumps(GEMMA3_PREPROCESSOR).encode()})
    assert processor.analyse(change, sources, RULES) == []


def test_the_processor_analyser_runs_in_the_pipeline():
    change, sources = make_change({"processor_config.json": json.dumps(GEMMA3_PROCESSOR).encode()},
                                  {"processor_config.json": json.dumps(dict(GEMMA3_PROCESSOR, image_seq_length=64)).encode()})
    assert [(f.code, f.severity.value) for f in analyse_revision(change, sources) if f.category == "processor"] == [
        ("processor.image_tokens_changed", "high")]
