"""timm and open_clip preprocessing: normalisation, input size, crop and the head, read from their own configs.

The configs are timm/vit_base_patch16_224.augreg2_in21k_ft_in1k's config.json and
laion/CLIP-ViT-B-32-laion2B-s34B-b79K's open_clip_config.json as published, trimmed to the keys that
matter here.
"""

from __future__ import annotations

import json

import pytest

from .hub import analyse_scenarios
from .st_repos import safetensors_bytes

TIMM = {"architecture": "vit_base_patch16_224", "num_classes": 1000, "num_features": 768, "global_pool": "token",
        "pretrained_cfg": {"tag": "augreg2_in21k_ft_in1k", "custom_load": False, "input_size": [3, 224, 224],
                           "fixed_input_size": True, "interpolation": "bicubic", "crop_pct": 0.9,
                           "crop_mode": "center", "mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5],
                           "num_classes": 1000, "pool_size": None, "first_conv": "patch_embed.proj",
                           "classifier": "head"}}
OPEN_CLIP = {"model_cfg": {"embed_dim": 512, "vision_cfg": {"image_size": 224, "layers": 12, "width": 768,
                                                            "patch_size": 32},
                           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8,
                                        "layers": 12}},
             "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073],
                                "std": [0.26862954, 0.26130258, 0.27577711]}}
TIMM_CARD = b"---\nlicense: apache-2.0\nlibrary_name: timm\ntags:\n- image-classification\n---\n# ViT-B/16\n"
CLIP_CARD = b"---\nlicense: mit\nlibrary_name: open_clip\n---\n# CLIP ViT-B/32\n"


def timm_repo(config=None, card=TIMM_CARD):
    return {"config.json": json.dumps(config or TIMM, indent=2).encode(), "README.md": card,
            "model.safetensors": safetensors_bytes({"head.weight": [4, 4]})}


def clip_repo(config=None, card=CLIP_CARD):
    return {"open_clip_config.json": json.dumps(config or OPEN_CLIP, indent=2).encode(), "README.md": card,
            "open_clip_model.safetensors": safetensors_bytes({"visual.proj": [4, 4]})}


def pcfg(**changes):
    return {**TIMM, "pretrained_cfg": {**TIMM["pretrained_cfg"], **changes}}


SCENARIOS = {
    "timm_imagenet_stats": (timm_repo(), timm_repo(pcfg(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]))),
    "timm_input": (timm_repo(), timm_repo(pcfg(input_size=[3, 384, 384], crop_pct=1.0, interpolation="bilinear"))),
    "timm_head": (timm_repo(), timm_repo({**pcfg(num_classes=21843), "num_classes": 21843})),
    "timm_prose_only": (timm_repo(), timm_repo(card=TIMM_CARD + b"\nFine-tuned on ImageNet-1k.\n")),
    "timm_malformed": (timm_repo(), {**timm_repo(), "config.json": b'{"architecture": "vit", "pretrained_cfg": {'}),
    "clip_stats": (clip_repo(), clip_repo({**OPEN_CLIP, "preprocess_cfg": {"mean": [0.5, 0.5, 0.5],
                                                                           "std": [0.5, 0.5, 0.5]}})),
    "clip_image_size": (clip_repo(), clip_repo({**OPEN_CLIP, "model_cfg": {**OPEN_CLIP["model_cfg"], "vision_cfg": {
        **OPEN_CLIP["model_cfg"]["vision_cfg"], "image_size": 256}}})),
    "clip_prose_only": (clip_repo(), clip_repo(card=CLIP_CARD + b"\nTrained on LAION-2B.\n")),
    "clip_malformed": (clip_repo(), {**clip_repo(), "open_clip_config.json": b"[1, 2]"}),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("preprocessing"), "acme", SCENARIOS)


def triples(findings):
    return [(f.code, f.severity.value, f.summary, f.library) for f in findings if f.category != "files"]


@pytest.mark.parametrize(("name", "expected"), [
    ("timm_imagenet_stats", [
        ("preprocessing.normalisation_changed", "high",
         "config.json: pretrained_cfg.mean: [0.5, 0.5, 0.5] → [0.485, 0.456, 0.406]", "timm"),
        ("preprocessing.normalisation_changed", "high",
         "config.json: pretrained_cfg.std: [0.5, 0.5, 0.5] → [0.229, 0.224, 0.225]", "timm"),
    ]),
    ("timm_input", [
        ("preprocessing.input_changed", "high", "config.json: pretrained_cfg.input_size: [3, 224, 224] → [3, 384, 384]",
         "timm"),
        ("preprocessing.input_changed", "high", "config.json: pretrained_cfg.interpolation: bicubic → bilinear", "timm"),
        ("preprocessing.input_changed", "high", "config.json: pretrained_cfg.crop_pct: 0.9 → 1.0", "timm"),
    ]),
    ("timm_head", [
        ("preprocessing.classes_changed", "high", "config.json: pretrained_cfg.num_classes: 1000 → 21843", "timm"),
        ("preprocessing.classes_changed", "high", "config.json: num_classes: 1000 → 21843", "timm"),
    ]),
    ("timm_malformed", [  # once, as the config it is
        ("config.malformed", "critical", "config.json cannot be parsed: invalid JSON at line 1 column 44: Expecting "
         "property name enclosed in double quotes; transformers will fail to load the model", "transformers"),
    ]),
    ("clip_stats", [
        ("preprocessing.normalisation_changed", "high", "open_clip_config.json: preprocess_cfg.mean: "
         "[0.48145466, 0.4578275, 0.40821073] → [0.5, 0.5, 0.5]", "open_clip"),
        ("preprocessing.normalisation_changed", "high", "open_clip_config.json: preprocess_cfg.std: "
         "[0.26862954, 0.26130258, 0.27577711] → [0.5, 0.5, 0.5]", "open_clip"),
    ]),
    ("clip_malformed", [
        ("preprocessing.malformed", "critical", "open_clip_config.json cannot be parsed: expected a JSON object, "
         "found an array; open_clip cannot load the model", "open_clip"),
    ]),
    ("clip_image_size", [
        ("preprocessing.input_changed", "high",
         "open_clip_config.json: model_cfg.vision_cfg.image_size: 224 → 256", "open_clip"),
    ]),
])
def test_preprocessing_changes_are_high_and_carry_their_library(results, name, expected):
    assert triples(results[name]) == expected


@pytest.mark.parametrize("name", ["timm_prose_only", "clip_prose_only"])
def test_prose_only_raises_nothing_above_low(results, name):
    assert [(f.code, f.severity.value) for f in results[name]] == [("files.changed", "info")]
