"""diffusers pipelines: model_index.json components, the safety checker, each component's config and weights.

The files are stable-diffusion-v1-5's as published (StableDiffusionPipeline: PNDMScheduler with
epsilon prediction and scaled_linear betas, a 64x64-latent UNet with 768-wide cross-attention, an
AutoencoderKL with scaling_factor 0.18215, a CLIP text encoder), trimmed to the keys that matter here;
the weights are small safetensors files written by the test.
"""

from __future__ import annotations

import json
import struct

import pytest

from .hub import analyse_scenarios
from .st_repos import safetensors_bytes

INDEX = {"_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.6.0",
         "feature_extractor": ["transformers", "CLIPImageProcessor"],
         "safety_checker": ["stable_diffusion", "StableDiffusionSafetyChecker"],
         "scheduler": ["diffusers", "PNDMScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
         "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
         "vae": ["diffusers", "AutoencoderKL"], "requires_safety_checker": True}
SCHEDULER = {"_class_name": "PNDMScheduler", "_diffusers_version": "0.6.0", "beta_end": 0.012,
             "beta_schedule": "scaled_linear", "beta_start": 0.00085, "num_train_timesteps": 1000,
             "set_alpha_to_one": False, "skip_prk_steps": True, "steps_offset": 1, "trained_betas": None,
             "clip_sample": False, "prediction_type": "epsilon"}
UNET = {"_class_name": "UNet2DConditionModel", "_diffusers_version": "0.6.0", "act_fn": "silu",
        "attention_head_dim": 8, "block_out_channels": [320, 640, 1280, 1280], "cross_attention_dim": 768,
        "in_channels": 4, "out_channels": 4, "layers_per_block": 2, "sample_size": 64}
VAE = {"_class_name": "AutoencoderKL", "_diffusers_version": "0.6.0", "act_fn": "silu",
       "block_out_channels": [128, 256, 512, 512], "in_channels": 3, "latent_channels": 4, "out_channels": 3,
       "sample_size": 512, "scaling_factor": 0.18215}
TEXT_ENCODER = {"architectures": ["CLIPTextModel"], "model_type": "clip_text_model", "hidden_act": "quick_gelu",
                "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                "max_position_embeddings": 77, "vocab_size": 49408}
# stable-diffusion-v1-5's tokenizer/ folder (a CLIPTokenizer), its vocabulary and merges trimmed to a few entries
TOKENIZER_CONFIG = {"add_prefix_space": False, "bos_token": "<|startoftext|>", "do_lower_case": True,
                    "eos_token": "<|endoftext|>", "errors": "replace", "model_max_length": 77,
                    "pad_token": "<|endoftext|>", "tokenizer_class": "CLIPTokenizer", "unk_token": "<|endoftext|>"}
SPECIAL_TOKENS = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                  "unk_token": "<|endoftext|>"}
MERGES = b"#version: 0.2\ni n\nt h\na n\nr e\n"
VOCAB = {"i": 0, "n": 1, "t": 2, "h": 3, "a": 4, "r": 5, "e": 6, "in": 7, "th": 8, "an": 9, "re": 10,
         "<|startoftext|>": 11, "<|endoftext|>": 12}
CARD = b"---\nlicense: creativeml-openrail-m\nlibrary_name: diffusers\ntags:\n- text-to-image\n---\n# SD 1.5\n"


def j(value) -> bytes:
    return json.dumps(value, indent=2).encode()


def pipeline(index=None, scheduler=None, unet=None, vae=None, text_encoder=None, unet_fill=0, card=CARD,
             unet_tensors=None, extra=None, tokenizer_config=None, special_tokens=None, folder="tokenizer",
             merges=MERGES):
    files = {"model_index.json": j(index or INDEX), "scheduler/scheduler_config.json": j(scheduler or SCHEDULER),
             "unet/config.json": j(unet or UNET), "vae/config.json": j(vae or VAE),
             "text_encoder/config.json": j(text_encoder or TEXT_ENCODER), "README.md": card,
             "unet/diffusion_pytorch_model.safetensors": safetensors_bytes(unet_tensors or {"conv_in.weight": [8, 4]},
                                                                         unet_fill),
             "vae/diffusion_pytorch_model.safetensors": safetensors_bytes({"decoder.conv_in.weight": [4, 4]}),
             "safety_checker/config.json": j({"model_type": "clip"}),
             f"{folder}/tokenizer_config.json": j(tokenizer_config or TOKENIZER_CONFIG),
             f"{folder}/special_tokens_map.json": j(special_tokens or SPECIAL_TOKENS),
             f"{folder}/vocab.json": j(VOCAB), f"{folder}/merges.txt": merges, **(extra or {})}
    return files


BASE = pipeline()


def resaved(raw: bytes) -> bytes:
    """The same safetensors file re-saved: the same tensor bytes under a header with ``__metadata__``."""
    n = struct.unpack("<Q", raw[:8])[0]
    text = json.dumps({"__metadata__": {"format": "pt"}, **json.loads(raw[8:8 + n])}).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + raw[8 + n:]


no_checker = {k: v for k, v in pipeline(index={**INDEX, "safety_checker": [None, None],
                                              "requires_safety_checker": False}).items()
              if not k.startswith("safety_checker/")}
SCENARIOS = {
    "safety_checker_removed": (BASE, no_checker),
    "v_prediction": (BASE, pipeline(scheduler={**SCHEDULER, "prediction_type": "v_prediction"})),
    "scheduler_swapped": (BASE, pipeline(index={**INDEX, "scheduler": ["diffusers", "EulerDiscreteScheduler"]},
                                         scheduler={**SCHEDULER, "_class_name": "EulerDiscreteScheduler",
                                                    "timestep_spacing": "trailing"})),
    "unet_resized": (BASE, pipeline(unet={**UNET, "sample_size": 96, "cross_attention_dim": 1024})),
    "vae_rescaled": (BASE, pipeline(vae={**VAE, "scaling_factor": 0.13025})),
    "unet_weights": (BASE, pipeline(unet_fill=3)),
    "unet_resaved": (BASE, {**BASE, "unet/diffusion_pytorch_model.safetensors": resaved(
        BASE["unet/diffusion_pytorch_model.safetensors"])}),
    "text_encoder_act": (BASE, pipeline(text_encoder={**TEXT_ENCODER, "hidden_act": "gelu"})),
    # 128 + 16,384 bytes of F32 unet weights; the fp16 variant beside it is not what a default load serves
    "unet_grown": (BASE, pipeline(unet_tensors={"conv_in.weight": [8, 4], "conv_out.weight": [64, 64]}, extra={
        "unet/diffusion_pytorch_model.fp16.safetensors": safetensors_bytes({"conv_in.weight": [128, 128]})})),
    "tokenizer_eos": (BASE, pipeline(special_tokens={**SPECIAL_TOKENS, "eos_token": "</s>"},
                                     tokenizer_config={**TOKENIZER_CONFIG, "model_max_length": 64})),
    # an SDXL-style second tokenizer whose merges were re-ranked
    "tokenizer_2_merges": (sdxl := pipeline(index={**INDEX, "tokenizer_2": ["transformers", "CLIPTokenizer"]},
                                            folder="tokenizer_2"),
                           {**sdxl, "tokenizer_2/merges.txt": b"#version: 0.2\nt h\ni n\na n\nr e\n"}),
    "prose_only": (BASE, pipeline(card=CARD + b"\nSee the model card of v1-4 for the training data.\n")),
    "too_many_components": (BASE, {**BASE, "model_index.json": j(
        {**INDEX, **{f"extra_{i}": ["diffusers", "X"] for i in range(100)}})}),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("diffusers"), "acme", SCENARIOS)


def triples(findings, skip=("files", "weights")):
    return [(f.code, f.severity.value, f.summary) for f in findings if f.category not in skip]


@pytest.mark.parametrize(("name", "expected"), [
    ("safety_checker_removed", [
        ("diffusers.safety_checker_removed", "high", "model_index.json: safety_checker removed "
         "(was stable_diffusion.StableDiffusionSafetyChecker): images are no longer screened"),
        ("diffusers.safety_checker_removed", "high", "model_index.json: requires_safety_checker: true → false"),
    ]),
    ("v_prediction", [
        ("diffusers.prediction_type_changed", "high",
         "scheduler/scheduler_config.json: prediction_type: epsilon → v_prediction"),
    ]),
    ("scheduler_swapped", [
        ("diffusers.components_changed", "high",
         "model_index.json: scheduler: diffusers.PNDMScheduler → diffusers.EulerDiscreteScheduler"),
        ("diffusers.scheduler_changed", "high",
         "scheduler/scheduler_config.json: _class_name: PNDMScheduler → EulerDiscreteScheduler"),
        ("diffusers.scheduler_changed", "high", "scheduler/scheduler_config.json: timestep_spacing: (unset) → trailing"),
    ]),
    ("unet_resized", [
        ("diffusers.denoiser_changed", "high", "unet/config.json: cross_attention_dim: 768 → 1024"),
        ("diffusers.denoiser_changed", "high", "unet/config.json: sample_size: 64 → 96"),
    ]),
    ("vae_rescaled", [("diffusers.vae_changed", "high", "vae/config.json: scaling_factor: 0.18215 → 0.13025")]),
    ("unet_weights", [("diffusers.component_weights_changed", "critical",
                       "unet weights replaced in place: unet/diffusion_pytorch_model.safetensors")]),
    ("unet_grown", [
        ("diffusers.component_weights_changed", "critical",
         "unet weights replaced in place: unet/diffusion_pytorch_model.safetensors"),
        ("diffusers.pipeline_memory_changed", "moderate", "serving memory 192 B → 16.58 kB (unet 128 B → 16.51 kB)"),
    ]),
    ("tokenizer_eos", [
        ("tokenizer.eos_token_changed", "high", "tokenizer/special_tokens_map.json: eos_token: <|endoftext|> → </s>"),
        ("tokenizer.model_max_length_changed", "moderate", "tokenizer/tokenizer_config.json: model_max_length: 77 → 64"),
    ]),
    ("tokenizer_2_merges", [("tokenizer.merges_reordered", "high",
                             'tokenizer_2/merges.txt: 2 merges changed priority (e.g. "i n", "t h")')]),
    ("text_encoder_act", [("config.computation_changed", "high", "text_encoder/config.json: hidden_act: quick_gelu → gelu")]),
    ("too_many_components", [("diffusers.malformed", "critical", "model_index.json lists 107 components, over the "
                              "limit of 64; not read; DiffusionPipeline.from_pretrained fails")]),
])
def test_each_pipeline_change_is_a_finding_of_its_component(results, name, expected):
    assert sorted(triples(results[name])) == sorted(expected)
    assert {f.library for f in results[name] if f.category == "diffusers"} <= {"diffusers"}


def test_the_weights_finding_says_which_file_and_the_component_finding_which_component(results):
    assert [(f.code, f.path) for f in results["unet_weights"] if f.code.startswith("weights.")] == [
        ("weights.file_replaced", "unet/diffusion_pytorch_model.safetensors"),
        ("weights.values_changed", "unet/diffusion_pytorch_model.safetensors")]


def test_weights_re_saved_with_the_same_values_are_no_component_change(results):
    assert [(f.code, f.severity.value, f.path) for f in results["unet_resaved"]] == [
        ("weights.resaved", "low", "unet/diffusion_pytorch_model.safetensors"),
        ("files.changed", "info", "unet/diffusion_pytorch_model.safetensors")]


def test_prose_only_raises_nothing_above_low(results):
    assert [(f.code, f.severity.value) for f in results["prose_only"]] == [("files.changed", "info")]


def test_weights_replaced_with_the_same_shapes_leave_the_serving_memory_alone(results):
    assert [f for f in results["unet_weights"] if f.code == "diffusers.pipeline_memory_changed"] == []


def test_the_memory_finding_gives_each_side_in_bytes(results):
    [finding] = [f for f in results["unet_grown"] if f.code == "diffusers.pipeline_memory_changed"]
    assert (finding.before, finding.after, finding.evidence) == (192, 16576, {"components": {"unet": [128, 16512]}})


def test_tokenizer_findings_point_at_the_file_in_its_component_folder(results):
    assert [(f.code, f.path, f.library) for f in results["tokenizer_eos"] if f.category == "tokenizer"] == [
        ("tokenizer.eos_token_changed", "tokenizer/special_tokens_map.json", "diffusers"),
        ("tokenizer.model_max_length_changed", "tokenizer/tokenizer_config.json", "diffusers")]
