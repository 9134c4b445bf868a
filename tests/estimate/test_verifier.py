from __future__ import annotations

from tracker.core.estimate import estimate

from .conftest import load_real


def rules(est):
    return {v.rule: v.severity.value for v in est.verifier}


def test_deep_default_init_fires_from_24_layers(e5_config):
    assert rules(estimate(e5_config)) == {"deep-attention-default-init": "low"}
    assert rules(estimate(dict(e5_config, num_hidden_layers=23))) == {}
    assert rules(estimate(dict(e5_config, initializer_range=0.01))) == {}


def test_gpt2_scales_its_init_so_no_finding():
    assert "deep-attention-default-init" not in rules(estimate(load_real("openai-community__gpt2-xl.json")))


def test_head_dim_divisibility():
    cfg = load_real("meta-llama__Llama-2-7b-hf.json")
    assert rules(estimate(dict(cfg, num_attention_heads=30)))["head-dim-divisibility"] == "high"
    # an explicit head_dim is allowed not to divide hidden (Gemma)
    assert "head-dim-divisibility" not in rules(estimate(load_real("google__gemma-2b-it.json")))


def test_gqa_divisibility():
    cfg = load_real("meta-llama__Meta-Llama-3-8B-Instruct.json")
    assert rules(estimate(dict(cfg, num_key_value_heads=6)))["gqa-head-divisibility"] == "high"
    assert "gqa-head-divisibility" not in rules(estimate(cfg))


def test_token_id_outside_vocab():
    cfg = load_real("meta-llama__Llama-2-7b-hf.json")
    est = estimate(dict(cfg, eos_token_id=[2, 32005]))
    assert [v.message for v in est.verifier if v.rule == "vocab-size-embedding"] == [
        "eos_token_id 32005 is outside the embedding's 32000 rows"
    ]


def test_untied_head_missing_from_weights():
    cfg = load_real("meta-llama__Llama-2-7b-hf.json")
    est = estimate(cfg, checkpoint_params=6_738_415_616 - 32000 * 4096)
    assert rules(est)["tied-weights-mismatch"] == "moderate"
    assert "holds none" in est.checkpoint_note or "hold none" in est.checkpoint_note


def test_all_real_configs_raise_no_structural_errors():
    for name in ("meta-llama__Llama-3.2-3B-Instruct.json", "mistralai__Mixtral-8x7B-Instruct-v0.1.json",
                 "google__gemma-2b-it.json", "openai__gpt-oss-20b.json"):
        assert not {"head-dim-divisibility", "gqa-head-divisibility", "vocab-size-embedding"} & set(rules(estimate(load_real(name))))
