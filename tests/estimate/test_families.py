"""Parameter counts from config alone, against published / checkpoint counts.

Table-driven over the real configs in ../shared/realdata/configs/.  ``source``
says where the expected number comes from:
- "published": the count the model's publisher or its Hub page gives
  (e.g. Llama-2-7b 6,738,415,616; Mixtral-8x7B 46,702,792,704 total);
- "meta": the count of the transformers model built from the same config on
  the meta device (see test_meta_device.py, which re-derives it when torch and
  transformers are installed); used where no reliable published figure exists.
"""

from __future__ import annotations

import pytest

from tracker.core.estimate import estimate
from tracker.core.estimate.architectures import SUPPORTED_MODEL_TYPES

from .conftest import load_real

# file, params, active params (None: same), source
COUNTS = [
    ("sentence-transformers__all-MiniLM-L6-v2.json", 22_713_216, None, "published (and its safetensors header, test_checkpoint.py)"),
    ("google-bert__bert-base-uncased.json", 109_514_298, None, "meta (BertForMaskedLM; BertModel with pooler is 109,482,240, below)"),
    ("cross-encoder__ms-marco-MiniLM-L-2-v2.json", 15_615_745, None, "meta"),
    ("moka-ai__m3e-small.json", 23_953_920, None, "meta"),
    ("deepset__roberta-base-squad2.json", 124_056_578, None, "meta"),
    ("distilbert__distilroberta-base.json", 82_170_201, None, "meta"),
    ("dogukanveziroglu__bge-m3-ml-tr-specialized.json", 567_754_752, None, "published (BAAI/bge-m3, 567,754,752)"),
    ("openai-community__gpt2-xl.json", 1_557_611_200, None, "published"),
    ("microsoft__DialoGPT-small.json", 124_439_808, None, "published (gpt2 small, 124,439,808)"),
    ("EleutherAI__gpt-j-6b.json", 6_050_882_784, None, "meta"),
    ("togethercomputer__RedPajama-INCITE-7B-Base.json", 6_857_302_016, None, "meta"),
    ("facebook__opt-125m.json", 125_239_296, None, "published"),
    ("facebook__opt-1.3b.json", 1_315_758_080, None, "published"),
    ("bigscience__bloom-560m.json", 559_214_592, None, "published"),
    ("tiiuae__falcon-40b.json", 41_303_293_952, None, "meta (tied; the checkpoint also stores lm_head: +532,676,608)"),
    ("meta-llama__Llama-2-7b-hf.json", 6_738_415_616, None, "published"),
    ("meta-llama__Meta-Llama-3-8B-Instruct.json", 8_030_261_248, None, "published"),
    ("meta-llama__Llama-3.2-3B-Instruct.json", 3_212_749_824, None, "published"),
    ("mistralai__Mistral-7B-Instruct-v0.3.json", 7_248_023_552, None, "published"),
    ("mistralai__Mixtral-8x7B-Instruct-v0.1.json", 46_702_792_704, 12_879_925_248, "published (46.7B total, 12.9B active)"),
    ("microsoft__WizardLM-2-8x22B.json", 140_620_634_112, 39_152_031_744, "published (Mixtral-8x22B: 141B total, 39B active)"),
    ("Qwen__Qwen3-8B-Base.json", 8_190_735_360, None, "published"),
    ("dunzhang__stella_en_1.5B_v5.json", 1_776_197_120, None, "meta (untied Qwen2-1.5B)"),
    ("google__gemma-2b-it.json", 2_506_172_416, None, "published"),
    ("HakunaMatata888__gemma2-2b-poem.json", 2_614_341_888, None, "published (gemma-2-2b)"),
    ("maxma233__gemma-3-4b-it-text-only.json", 3_880_263_168, None, "meta (Gemma3ForCausalLM, text only)"),
    ("microsoft__Phi-3-mini-128k-instruct.json", 3_821_079_552, None, "published"),
    ("ibm-granite__granite-3.1-1b-a400m-instruct.json", 1_334_628_352, 428_658_688, "meta (published: 1.3B total, 400M active)"),
    ("openai__gpt-oss-20b.json", 20_914_757_184, 4_187_440_704, "published 20.9B total (active here includes both embeddings; OpenAI's 3.6B excludes the input one)"),
    ("google-t5__t5-base.json", 222_903_552, None, "published"),
    ("google__t5-v1_1-base.json", 247_577_856, None, "published"),
    ("google__flan-t5-large.json", 783_150_080, None, "published"),
    ("google__mt5-large.json", 1_229_581_312, None, "published"),
    # issue 14: reference counts from transformers 5.24.0 on the meta device (tests/meaning/test_families.py)
    ("deepseek-ai__DeepSeek-R1.json", 671_026_404_352, 37_552_282_624, "meta (DeepSeek-V3 architecture; published 671B total, 37B activated)"),
    ("facebook__bart-large-cnn.json", 406_290_432, None, "meta (BartForConditionalGeneration, tied head)"),
    ("google__medgemma-27b-it.json", 27_432_406_640, None, "meta (Gemma3ForConditionalGeneration with SigLIP tower)"),
]

UNSUPPORTED = [
    ({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280}, "mamba"),
    ({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"]}, "gemma3"),
]


@pytest.mark.parametrize("name,params,active,source", COUNTS, ids=[c[0] for c in COUNTS])
def test_param_count(name, params, active, source):
    est = estimate(load_real(name))
    assert est.supported, est.reason
    assert est.params == params, source
    assert est.active_params == (active if active is not None else params)


@pytest.mark.parametrize("config,model_type", UNSUPPORTED, ids=[u[1] for u in UNSUPPORTED])
def test_unsupported_is_explicit(config, model_type):
    est = estimate(config)
    assert not est.supported
    assert est.reason.startswith(f"unsupported: {model_type}")
    assert est.params is None and est.cards == () and est.structure == ()
    data = est.to_json()
    assert data["supported"] is False and data["params"] is None


def test_unknown_model_type():
    est = estimate({"model_type": "made-up", "hidden_size": 8})
    assert (est.supported, est.reason) == (False, "unsupported: made-up (model_type not reconstructed)")


def test_broken_config_is_unsupported_not_a_crash():
    est = estimate({"model_type": "llama", "hidden_size": 64})
    assert not est.supported and est.reason.startswith("unsupported: llama")


def test_bert_model_with_pooler_matches_published_bert_base():
    cfg = dict(load_real("google-bert__bert-base-uncased.json"), architectures=["BertModel"])
    assert estimate(cfg).params == 109_482_240


def test_untying_adds_the_head():
    cfg = load_real("meta-llama__Llama-3.2-3B-Instruct.json")
    tied, untied = estimate(cfg), estimate(dict(cfg, tie_word_embeddings=False))
    assert untied.params - tied.params == 128_256 * 3072


def test_attention_bias_and_head_dim_override_count():
    cfg = load_real("Qwen__Qwen3-8B-Base.json")
    base = estimate(cfg).params
    assert estimate(dict(cfg, attention_bias=True)).params - base == 36 * (4096 + 2 * 1024 + 4096)
    # head_dim 128 is already not hidden/heads for Gemma: 8 heads x 256 = 2048 = hidden; override changes projections
    g = load_real("google__gemma-2b-it.json")
    assert estimate(dict(g, head_dim=128)).params < estimate(g).params


def test_sliding_windows_cap_the_kv_cache():
    g3 = load_real("maxma233__gemma-3-4b-it-text-only.json")
    est = estimate(g3, seq_len=8192)
    assert sum(1 for r in est.structure if r.type.startswith("Sliding-Window")) == 34 - 34 // 6
    full = estimate(dict(g3, sliding_window=None), seq_len=8192)
    assert est.card("H200").serve_batch > full.card("H200").serve_batch
    # Mistral v0.3 has no window; the same config with one serves more at 32k
    m = load_real("mistralai__Mistral-7B-Instruct-v0.3.json")
    assert estimate(dict(m, sliding_window=4096), seq_len=32768).card("H200").serve_batch > estimate(m, seq_len=32768).card("H200").serve_batch


def test_gqa_shrinks_kv_cache():
    m = load_real("mistralai__Mistral-7B-Instruct-v0.3.json")
    mha = dict(m, num_key_value_heads=32)
    assert estimate(m).card("H100").serve_batch > estimate(mha).card("H100").serve_batch


def test_every_supported_type_is_reachable():
    assert {"bert", "roberta", "xlm-roberta", "distilbert", "gpt2", "gptj", "gpt_neox", "opt", "bloom", "falcon", "llama",
            "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "phi3", "mixtral", "qwen2_moe", "qwen3_moe",
            "t5", "mt5", "gpt_oss", "granitemoe"} <= set(SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("name", [c[0] for c in COUNTS])
def test_every_family_produces_a_full_estimate(name):
    est = estimate(load_real(name))
    assert len(est.cards) == 8
    assert est.structure[0].name == "Input" and est.structure[-1].name == "Output"
    assert [r.index for r in est.structure] == list(range(1, len(est.structure) + 1))
    assert 0 < est.lora_bytes < est.full_finetune_bytes
    for c in est.cards:
        assert c.full_batch <= c.lora_batch
        assert (c.cost_usd is None) == (c.lora_batch == 0)


def test_distilbert_and_falcon_7b_published_counts():
    distilbert = {"model_type": "distilbert", "architectures": ["DistilBertModel"], "dim": 768, "n_layers": 6,
                  "n_heads": 12, "hidden_dim": 3072, "vocab_size": 30522, "max_position_embeddings": 512}
    assert estimate(distilbert).params == 66_362_880  # distilbert-base-uncased
    falcon7b = {"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 4544,
                "num_attention_heads": 71, "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True,
                "parallel_attn": True, "bias": False, "new_decoder_architecture": False}
    assert estimate(falcon7b).params == 6_921_720_704  # tiiuae/falcon-7b
