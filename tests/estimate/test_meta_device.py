"""Graph counts against transformers' own models, built on the meta device (no weights).

Skipped when torch or transformers is absent.  Each case says which published
count the transformers model itself matches, so a pass here ties our
config-only count to it.  T5 is left out: transformers 5.x ties T5's lm_head
regardless of ``tie_word_embeddings: false``, so its meta count for v1.1/flan/mT5
is the tied one; those are asserted against published counts in test_families.py.
"""

from __future__ import annotations

import pytest

from tracker.core.estimate import estimate

from .conftest import load_real

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

REAL = [
    # file, published count the transformers model matches
    ("sentence-transformers__all-MiniLM-L6-v2.json", "22,713,216 (safetensors header)"),
    ("google-bert__bert-base-uncased.json", "BertForMaskedLM; bert-base-uncased BertModel 109,482,240"),
    ("cross-encoder__ms-marco-MiniLM-L-2-v2.json", "15.6M"),
    ("moka-ai__m3e-small.json", "24M"),
    ("deepset__roberta-base-squad2.json", "124M"),
    ("distilbert__distilroberta-base.json", "82M"),
    ("dogukanveziroglu__bge-m3-ml-tr-specialized.json", "bge-m3 567,754,752"),
    ("openai-community__gpt2-xl.json", "1,557,611,200"),
    ("EleutherAI__gpt-j-6b.json", "6B"),
    ("togethercomputer__RedPajama-INCITE-7B-Base.json", "6.9B"),
    ("facebook__opt-125m.json", "125,239,296"),
    ("bigscience__bloom-560m.json", "559,214,592"),
    ("meta-llama__Llama-2-7b-hf.json", "6,738,415,616"),
    ("mistralai__Mixtral-8x7B-Instruct-v0.1.json", "46,702,792,704"),
    ("Qwen__Qwen3-8B-Base.json", "8,190,735,360"),
    ("dunzhang__stella_en_1.5B_v5.json", "1.78B untied"),
    ("google__gemma-2b-it.json", "2,506,172,416"),
    ("HakunaMatata888__gemma2-2b-poem.json", "2.61B"),
    ("maxma233__gemma-3-4b-it-text-only.json", "3.88B text-only"),
    ("microsoft__Phi-3-mini-128k-instruct.json", "3,821,079,552"),
    ("ibm-granite__granite-3.1-1b-a400m-instruct.json", "1.3B"),
    ("openai__gpt-oss-20b.json", "20.9B"),
]

# Families without a real config at hand: small synthetic configs of the real shape.
SYNTHETIC = [
    ({"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 256, "num_hidden_layers": 3,
      "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512, "moe_intermediate_size": 64,
      "shared_expert_intermediate_size": 128, "num_experts": 6, "num_experts_per_tok": 2, "vocab_size": 1000,
      "max_position_embeddings": 4096, "tie_word_embeddings": False}, "Qwen1.5-MoE-A2.7B shape (14.3B)"),
    ({"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256, "num_hidden_layers": 3,
      "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
      "moe_intermediate_size": 64, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 1000,
      "max_position_embeddings": 4096, "tie_word_embeddings": False}, "Qwen3-30B-A3B shape"),
    ({"model_type": "distilbert", "architectures": ["DistilBertModel"], "dim": 768, "n_layers": 6, "n_heads": 12,
      "hidden_dim": 3072, "vocab_size": 30522, "max_position_embeddings": 512}, "distilbert-base-uncased 66,362,880"),
    ({"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 4544, "num_attention_heads": 71,
      "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True, "parallel_attn": True, "bias": False,
      "new_decoder_architecture": False}, "falcon-7b 6,921,720,704"),
    ({"model_type": "falcon", "architectures": ["FalconForCausalLM"], "hidden_size": 8192, "num_attention_heads": 128,
      "num_kv_heads": 8, "num_hidden_layers": 60, "vocab_size": 65024, "new_decoder_architecture": True,
      "parallel_attn": True, "bias": False}, "falcon-40b graph (tied) 41,303,293,952"),
]


def meta_count(cfg: dict) -> int:
    d = dict(cfg)
    model_type = d.pop("model_type")
    config = transformers.AutoConfig.for_model(model_type, **d)
    cls = getattr(transformers, cfg["architectures"][0])
    with torch.device("meta"):
        model = cls(config)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name,published", REAL, ids=[r[0] for r in REAL])
def test_real_config_matches_transformers(name, published):
    cfg = load_real(name)
    assert estimate(cfg).params == meta_count(cfg), published


@pytest.mark.parametrize("cfg,published", SYNTHETIC, ids=[c[0]["model_type"] + str(i) for i, c in enumerate(SYNTHETIC)])
def test_synthetic_config_matches_transformers(cfg, published):
    assert estimate(cfg).params == meta_count(cfg), published
