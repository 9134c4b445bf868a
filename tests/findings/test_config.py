"""config.json findings, on real configs and real upstream incidents."""

from __future__ import annotations

import copy
import json

import pytest

from tests.findings.sources import make_change
from tests.shared import REALDATA
from tracker.core.findings import config as config_analyser
from tracker.core.findings.config import fmt_value
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

REAL = REALDATA
INCIDENTS = REAL / "incidents"
CONFIGS = sorted((REAL / "configs").glob("*.json"))
RULES = SeverityRules.default()

needs_realdata = pytest.mark.skipif(not REAL.is_dir(), reason="shared real data not present")


def dump(obj) -> bytes:
    return json.dumps(obj, indent=2).encode()


def run(old: dict | bytes | None, new: dict | bytes):
    as_bytes = lambda v: v if isinstance(v, bytes) else dump(v)  # noqa: E731
    change, sources = make_change(
        None if old is None else {"config.json": as_bytes(old)}, {"config.json": as_bytes(new)}
    )
    return config_analyser.analyse(change, sources, RULES)


def codes(findings) -> list[tuple[str, Severity, str]]:
    return [(f.code, f.severity, f.summary) for f in findings]


@needs_realdata
def test_phi3_rope_scaling_su_renamed_to_longrope():
    """microsoft/Phi-3-mini-128k-instruct, July 2024: rope_scaling.type 'su' became 'longrope'."""
    before = json.loads((INCIDENTS / "11-phi3-mini-128k-longrope-rename/before/config.json").read_text())
    after = copy.deepcopy(before)
    after["rope_scaling"]["type"] = "longrope"
    findings = run(before, after)
    assert codes(findings) == [("config.rope_type_renamed", Severity.HIGH, "rope_scaling.type: su → longrope")]
    f = findings[0]
    assert (f.path, f.before, f.after, f.category) == ("config.json", "su", "longrope", "config")


@needs_realdata
def test_gemma2_9b_query_pre_attn_scalar_fix():
    """google/gemma-2-9b: query_pre_attn_scalar 224 → 256 silently changed every attention score."""
    raw = (INCIDENTS / "26-gemma2-9b-query-pre-attn-scalar/before/config.json").read_text()
    after = raw.replace('"query_pre_attn_scalar": 224', '"query_pre_attn_scalar": 256')
    assert after != raw
    findings = run(raw.encode(), after.encode())
    assert codes(findings) == [("config.computation_changed", Severity.HIGH, "query_pre_attn_scalar: 224 → 256")]
    assert (findings[0].before, findings[0].after) == (224, 256)


# microsoft/phi-2 before the January 2024 native port, as published in December 2023
# (remote-code "phi-msft" config). Modelled from the upstream file: the after side is real.
PHI2_MSFT = {
    "_name_or_path": "microsoft/phi-2",
    "activation_function": "gelu_new",
    "architectures": ["PhiForCausalLM"],
    "attn_pdrop": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_phi.PhiConfig",
        "AutoModelForCausalLM": "modeling_phi.PhiForCausalLM",
    },
    "embd_pdrop": 0.0,
    "flash_attn": False,
    "flash_rotary": False,
    "fused_dense": False,
    "img_processor": None,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "phi-msft",
    "n_embd": 2560,
    "n_head": 32,
    "n_head_kv": None,
    "n_inner": None,
    "n_layer": 32,
    "n_positions": 2048,
    "resid_pdrop": 0.1,
    "rotary_dim": 32,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "transformers_version": "4.35.2",
    "use_cache": True,
    "vocab_size": 51200,
}


@needs_realdata
def test_phi2_native_port_reads_as_renames_plus_a_new_model_type():
    after = json.loads((INCIDENTS / "04-phi2-native-port-jan-2024/after/config.json").read_text())
    findings = run(PHI2_MSFT, after)
    assert sorted(codes(findings)) == sorted([
        ("config.model_type_changed", Severity.HIGH, "model_type: phi-msft → phi"),
        ("config.key_renamed", Severity.INFO, "n_layer renamed to num_hidden_layers (value 32 unchanged)"),
        ("config.key_renamed", Severity.INFO, "n_embd renamed to hidden_size (value 2560 unchanged)"),
        ("config.key_renamed", Severity.INFO, "n_head renamed to num_attention_heads (value 32 unchanged)"),
        ("config.key_renamed", Severity.INFO, "n_positions renamed to max_position_embeddings (value 2048 unchanged)"),
        ("config.key_renamed", Severity.INFO, "layer_norm_epsilon renamed to layer_norm_eps (value 1e-05 unchanged)"),
        ("config.key_renamed", Severity.INFO, "activation_function renamed to hidden_act (value gelu_new unchanged)"),
        # null meant "all heads" / "4 x width" in phi-msft; now explicit
        ("config.shape_changed", Severity.HIGH, "n_head_kv: null → num_key_value_heads: 32"),
        ("config.shape_changed", Severity.HIGH, "n_inner: null → intermediate_size: 10240"),
        # rotary_dim 32 of head_dim 80 became partial_rotary_factor 0.4: same rotation, new spelling
        ("config.rope_changed", Severity.HIGH, "rotary_dim: 32 → (unset)"),
        ("config.rope_changed", Severity.HIGH, "partial_rotary_factor: (unset) → 0.4"),
        ("config.rope_changed", Severity.HIGH, "rope_theta: (unset) → 10000.0"),
        ("config.computation_changed", Severity.HIGH, "qk_layernorm: (unset) → false"),
        ("config.token_id_changed", Severity.HIGH, "bos_token_id: (unset) → 50256"),
        ("config.token_id_changed", Severity.HIGH, "eos_token_id: (unset) → 50256"),
        ("config.value_changed", Severity.LOW, "flash_attn: false → (unset)"),
        ("config.value_changed", Severity.LOW, "flash_rotary: false → (unset)"),
        ("config.value_changed", Severity.LOW, "fused_dense: false → (unset)"),
        ("config.metadata_changed", Severity.INFO, "attn_pdrop: 0.0 → (unset)"),
        ("config.metadata_changed", Severity.INFO, "attention_dropout: (unset) → 0.0"),
        ("config.metadata_changed", Severity.INFO, "transformers_version: 4.35.2 → 4.37.0"),
    ])
    # the same remote classes on both sides: no auto_map finding
    assert not any(f.code.startswith("config.auto_map") for f in findings)
    assert all(f.severity == RULES.severity(f.code) for f in findings)


def test_auto_map_added_and_pointed_at_new_code_is_critical():
    base = {"model_type": "llama", "vocab_size": 32000}
    added = dict(base, auto_map={"AutoModelForCausalLM": "modeling_x.XForCausalLM"})
    findings = run(base, added)
    assert codes(findings) == [
        (
            "config.auto_map_added",
            Severity.CRITICAL,
            "auto_map added: loading with trust_remote_code now runs repository code (modeling_x)",
        )
    ]
    moved = dict(base, auto_map={"AutoModelForCausalLM": "modeling_y.YForCausalLM"})
    assert codes(run(added, moved)) == [
        (
            "config.auto_map_changed",
            Severity.CRITICAL,
            "auto_map.AutoModelForCausalLM: modeling_x.XForCausalLM → modeling_y.YForCausalLM",
        )
    ]
    external = dict(base, auto_map={"AutoModelForCausalLM": "evil/repo--modeling_x.XForCausalLM"})
    assert [f.code for f in run(added, external)] == ["config.auto_map_changed", "config.auto_map_external"]
    assert codes(run(added, base)) == [
        (
            "config.auto_map_removed",
            Severity.MODERATE,
            "auto_map removed: transformers' built-in classes now load this model instead of repository code",
        )
    ]


def test_quantization_dtype_tie_sliding_vocab_and_generic_keys():
    old = {
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
        "sliding_window": 4096,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "eos_token_id": 128001,
        "transformers_version": "4.40.0",
        "foo": 1,
    }
    new = dict(
        old,
        torch_dtype="float16",
        tie_word_embeddings=True,
        sliding_window=None,
        vocab_size=32064,
        max_position_embeddings=131072,
        eos_token_id=[128001, 128009],
        transformers_version="4.44.0",
        foo=2,
        quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]},
    )
    assert sorted(codes(run(old, new))) == sorted([
        ("config.dtype_changed", Severity.MODERATE, "torch_dtype: bfloat16 → float16"),
        ("config.tie_word_embeddings_changed", Severity.HIGH, "tie_word_embeddings: false → true"),
        ("config.sliding_window_changed", Severity.HIGH, "sliding_window: 4096 → null"),
        ("config.vocab_size_changed", Severity.HIGH, "vocab_size: 32000 → 32064"),
        ("config.context_length_changed", Severity.MODERATE, "max_position_embeddings: 8192 → 131072"),
        ("config.token_id_changed", Severity.HIGH, "eos_token_id: 128001 → [128001, 128009]"),
        ("config.metadata_changed", Severity.INFO, "transformers_version: 4.40.0 → 4.44.0"),
        ("config.value_changed", Severity.LOW, "foo: 1 → 2"),
        (
            "config.quantization_changed",
            Severity.HIGH,
            'quantization_config added: {"quant_method": "fp8", "weight_block_size": [128, 128]}',
        ),
    ])


def test_dtype_key_rename_is_info_and_nested_text_config_is_classified():
    old = {"torch_dtype": "bfloat16", "text_config": {"num_hidden_layers": 34, "rope_theta": 1000000.0}}
    new = {"dtype": "bfloat16", "text_config": {"num_hidden_layers": 34, "rope_theta": 500000.0}}
    assert codes(run(old, new)) == [
        ("config.key_renamed", Severity.INFO, "torch_dtype renamed to dtype (value bfloat16 unchanged)"),
        ("config.rope_changed", Severity.HIGH, "text_config.rope_theta: 1000000.0 → 500000.0"),
    ]


def test_rope_type_key_moved_and_long_lists_elided():
    old = {"rope_scaling": {"type": "linear", "factor": 2.0}}
    new = {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    assert codes(run(old, new)) == [
        ("config.key_renamed", Severity.INFO, "rope_scaling.type renamed to rope_scaling.rope_type (value linear unchanged)"),
        ("config.rope_changed", Severity.HIGH, "rope_scaling.factor: 2.0 → 4.0"),
    ]
    assert fmt_value([1.0299999713897705] * 48) .endswith("… (48 items)")
    assert len(fmt_value([1.0299999713897705] * 48)) == 60


@pytest.mark.parametrize(
    "payload, message",
    [
        (b"\xff\xfe{\x00}\x00", "config.json cannot be parsed: not valid UTF-8 (byte 0: invalid start byte)"),
        (b'{"model_type": "llama",', "config.json cannot be parsed: invalid JSON at line 1 column 24"),
        (b"[1, 2]", "config.json cannot be parsed: expected a JSON object, found an array"),
        (b"[" * 100_000 + b"]" * 100_000, "config.json cannot be parsed: invalid JSON: nested too deeply to parse"),
    ],
)
def test_hostile_config_is_a_finding_not_an_exception(payload, message):
    findings = run({"model_type": "llama"}, payload)
    assert [(f.code, f.severity) for f in findings] == [("config.malformed", Severity.CRITICAL)]
    assert findings[0].summary.startswith(message)
    # also at the first revision
    assert [f.code for f in run(None, payload)] == ["config.malformed"]


def test_unchanged_file_is_not_read_and_baseline_has_no_diff():
    change, sources = make_change({"config.json": b"{}"}, {"config.json": b"{}"})
    assert config_analyser.analyse(change, sources, RULES) == []
    assert sources.reads == []
    assert run(None, {"model_type": "llama"}) == []


@needs_realdata
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_real_config_parses_and_diffs_cleanly(path):
    data = path.read_bytes()
    assert run(data, data + b"\n") == []  # re-saved, same content
    other = json.loads(data)
    other["num_hidden_layers"] = 999
    findings = run(data, dump(other))
    assert "config.shape_changed" in {f.code for f in findings}
