"""The estimator's missing families, held against transformers' own parameter counts.

Configs: ``deepseek-ai__DeepSeek-R1.json`` and ``facebook__bart-large-cnn.json`` are the real
files in ../shared/realdata/configs (DeepSeek-R1 has DeepSeek-V3's architecture); the others are
the published config.json values of the named Hub repos, written into tests/meaning/fixtures/.

Reference counts: ``model.parameters()`` of ``architectures[0]`` built from the same config by
transformers 5.24.0 with torch 2.13.0 (CPU) on the meta device, with the published figure each
matches. Buffers (``register_buffer``) are counted apart, as transformers does.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.shared import CONFIGS
from tracker.core.estimate import estimate
from tracker.core.estimate.architectures import build
from tracker.core.estimate.checkpoint import checkpoint_buffers, checkpoint_params
from tracker.core.findings.weights import _params

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict:
    path = FIXTURES / name if (FIXTURES / name).exists() else CONFIGS / name
    assert path.exists(), f"config missing: {path}"
    return json.loads(path.read_text("utf-8"))


# file, params, components, persistent buffers, where the count comes from
REFERENCE = [
    ("deepseek-ai__DeepSeek-R1.json", 671_026_404_352, {}, {"e_score_correction_bias": 14_848},
     "meta; DeepSeek-V3 publishes 671B (685B with the multi-token-prediction layer transformers does not build)"),
    ("deepseek-ai__DeepSeek-V2-Lite.json", 15_706_484_224, {}, {}, "meta; published 15.7B"),
    ("facebook__bart-large.json", 406_291_456, {}, {}, "meta (BartModel); published 406M"),
    ("facebook__bart-large-cnn.json", 406_290_432, {}, {"final_logits_bias": 50_264},
     "meta (BartForConditionalGeneration, head tied to the shared embedding)"),
    ("facebook__mbart-large-cc25.json", 610_851_840, {}, {"final_logits_bias": 250_027}, "meta; published 610M"),
    ("Helsinki-NLP__opus-mt-en-de.json", 74_410_496, {}, {"final_logits_bias": 58_101},
     "meta (MarianMTModel; its sinusoidal position tables are parameters); published 74.4M"),
    ("google__gemma-3-4b-it.json", 4_300_079_472,
     {"text": 3_880_263_168, "vision": 416_866_032, "projector": 2_950_272}, {}, "meta; published 4.3B"),
    ("meta-llama__Llama-3.2-11B-Vision-Instruct.json", 10_670_220_835,
     {"text": 9_775_192_080, "vision": 863_567_379, "projector": 31_461_376}, {},
     "meta (language model 9,249,855,504 + lm_head 525,336,576); published 10.6B"),
    ("Qwen__Qwen2-VL-7B-Instruct.json", 8_291_375_616, {"text": 7_615_616_512, "vision": 675_759_104}, {},
     "meta (language model 7,070,619,136 + lm_head 544,997,376); published 8.29B"),
]


@pytest.mark.parametrize("name,params,components,buffers,source", REFERENCE, ids=[r[0] for r in REFERENCE])
def test_parameter_counts_match_transformers(name, params, components, buffers, source):
    est = estimate(load(name))
    assert est.supported, est.reason
    assert est.params == params, source
    assert dict(est.components) == components
    if components:
        assert sum(components.values()) == params  # the text part and the vision tower, separately and together
    assert dict(est.buffers) == buffers
    data = est.to_json()
    assert (data["components"], data["buffers"]) == (components, buffers)
    assert len(est.cards) == 8 and est.lora_bytes < est.full_finetune_bytes


def test_deepseek_v3_active_parameters_and_latent_kv_cache():
    est = estimate(load("deepseek-ai__DeepSeek-R1.json"))
    # embeddings + 3 dense layers + 58 MoE layers at top-8 of 256 experts plus the shared expert
    assert est.active_params == 37_552_282_624  # DeepSeek: "37B activated"
    arch = build(load("deepseek-ai__DeepSeek-R1.json"))
    assert set(arch.kv_layers) == {(288, None)}  # kv_lora_rank 512 + rope 64 = 576 cached per token and layer
    lite = build(load("deepseek-ai__DeepSeek-V2-Lite.json"))
    assert lite.buffers == ()  # V2's greedy router has no score-correction buffer


def test_the_checkpoint_count_and_the_weights_finding_agree_with_the_graph():
    """A BART checkpoint stores final_logits_bias: a buffer, named apart, not a parameter mismatch."""
    cfg = load("facebook__bart-large-cnn.json")
    arch = build(cfg)
    d, V = 1024, 50264
    shapes = {"model.shared.weight": [V, d], "final_logits_bias": [1, V],
              "model.encoder.embed_positions.weight": [1026, d], "model.decoder.embed_positions.weight": [1026, d]}
    rest = arch.params - sum(math.prod(s) for n, s in shapes.items() if n != "final_logits_bias")
    shapes["model.rest.weight"] = [rest]  # everything else, one tensor: only the sum matters here
    header = {n: {"dtype": "F32", "shape": s, "data_offsets": [0, 0]} for n, s in shapes.items()}
    headers = {"model.safetensors": header}
    assert checkpoint_params(headers) == arch.params == 406_290_432
    assert checkpoint_buffers(headers) == {"final_logits_bias": V}
    assert _params({n: (i["dtype"], tuple(i["shape"])) for n, i in header.items()}) == arch.params
    est = estimate(cfg, checkpoint_headers=headers)
    assert (est.checkpoint_params, est.checkpoint_note) == (406_290_432, None)


def test_a_multimodal_config_without_its_parts_is_unsupported_not_guessed():
    for cfg, reason in [
        ({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"]},
         "unsupported: gemma3 (gemma3 without text_config and vision_config)"),
        ({"model_type": "mllama", "text_config": {}}, "unsupported: mllama (mllama without text_config and vision_config)"),
        ({"model_type": "bart", "architectures": ["BartForSequenceClassification"], "d_model": 8, "encoder_layers": 1,
          "encoder_attention_heads": 1, "encoder_ffn_dim": 8, "vocab_size": 10},
         "unsupported: bart (BartForSequenceClassification head)"),
    ]:
        assert estimate(cfg).reason == reason




@pytest.mark.parametrize("name", [r[0] for r in REFERENCE])
def test_reference_counts_rederived_with_transformers_when_installed(name):
    """Re-derives each reference count where torch and transformers are installed (never in the project's venv)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = load(name)
    d = dict(cfg)
    config = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("meta"):
        model = getattr(transformers, cfg["architectures"][0])(config)
    assert sum(p.numel() for p in model.parameters()) == estimate(cfg).params
