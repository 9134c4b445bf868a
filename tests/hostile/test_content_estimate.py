"""Hostile estimator inputs: sizes out of any sane range are an implausible config, answered at once.

Before: ``num_hidden_layers: 100000000`` built the structure layer by layer (6.7 GB in a
poll, 14.5 GB in ``tracker estimate``), negative or zero sizes gave negative parameter
counts and ``1e308`` an ``OverflowError`` traceback.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from tests.hostile.content_support import MiB, run_tracker
from tracker.core.estimate import compare_estimates, estimate
from tracker.core.estimate.plausible import MAX_LAYERS
from tracker.core.estimate.structure import MAX_LISTED_LAYERS
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity
from tracker.surfaces.cli import main

RULES = SeverityRules.default()
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
         "vocab_size": 128256, "max_position_embeddings": 131072}


def from_json_text(key: str, literal: str) -> dict:
    """The config as Python's json reads it from the upstream text (NaN, Infinity and 1e308 included)."""
    return json.loads(json.dumps(LLAMA).replace(f'"{key}": {LLAMA[key]}', f'"{key}": {literal}'))


@pytest.mark.parametrize(
    ("key", "literal", "reason"),
    [
        ("num_hidden_layers", "100000000", "num_hidden_layers is 100000000, over the maximum of 4096"),
        ("num_hidden_layers", "0", "num_hidden_layers is 0; expected an integer from 1 to 4096"),
        ("num_hidden_layers", "-32", "num_hidden_layers is -32; expected an integer from 1 to 4096"),
        ("num_hidden_layers", "true", "num_hidden_layers is a boolean; expected an integer from 1 to 4096"),
        ("num_hidden_layers", '"32"', "num_hidden_layers is a string; expected an integer from 1 to 4096"),
        ("num_hidden_layers", "32.0", "num_hidden_layers is 32.0; expected an integer from 1 to 4096"),
        ("hidden_size", "NaN", "hidden_size is NaN; expected an integer from 1 to 262144"),
        ("hidden_size", "Infinity", "hidden_size is Infinity; expected an integer from 1 to 262144"),
        ("hidden_size", "-Infinity", "hidden_size is -Infinity; expected an integer from 1 to 262144"),
        ("hidden_size", "1e308", "hidden_size is 1e+308; expected an integer from 1 to 262144"),
        ("hidden_size", "-4096", "hidden_size is -4096; expected an integer from 1 to 262144"),
        ("num_attention_heads", "[32]", "num_attention_heads is a list; expected an integer from 1 to 16384"),
        ("num_key_value_heads", "0", "num_key_value_heads is 0; expected an integer from 1 to 16384"),
        ("intermediate_size", "1" + "0" * 300, "intermediate_size is 1" + "0" * 300 + ", over the maximum of 4194304"),
        ("vocab_size", "{}", "vocab_size is an object; expected an integer from 1 to 16777216"),
        ("max_position_embeddings", "0", "max_position_embeddings is 0; expected an integer from 1 to 1073741824"),
    ],
)
def test_implausible_sizes_give_an_implausible_estimate_and_finding(key, literal, reason):
    config = from_json_text(key, literal)
    est = estimate(config)
    assert (est.supported, est.implausible, est.reason) == (False, True, f"implausible config: {reason}")
    assert est.params is None and est.structure == ()
    assert json.dumps(est.to_json(), allow_nan=False)
    [finding] = compare_estimates(estimate(LLAMA), est, RULES)
    assert (finding.code, finding.severity, finding.category) == ("estimate.implausible_config", Severity.HIGH,
                                                                  "estimate")
    assert finding.summary == f"implausible config: {reason}; no estimate (model_type llama)"
    assert json.dumps(finding.to_json(), allow_nan=False)
    # the same implausible config again is not news; a fixed config estimates again
    assert compare_estimates(est, estimate(config), RULES) == []
    assert [f.code for f in compare_estimates(est, estimate(LLAMA), RULES)] == []


def test_unknown_family_stays_unsupported_whatever_its_sizes():
    est = estimate({"model_type": "mamba", "hidden_size": -1, "num_hidden_layers": 10**8})
    assert (est.implausible, est.reason) == (False, "unsupported: mamba (model_type not reconstructed)")


def test_the_deepest_plausible_stack_is_summarised_not_listed():
    est = estimate(dict(LLAMA, num_hidden_layers=MAX_LAYERS))
    rows = [(r.index, r.name, r.type) for r in est.structure]
    assert len(rows) == 3 + 2 * 6 + 1 + 2 * 6 + 3
    assert rows[15] == (16, "Blocks_3-4094", "× 4092 blocks like those around them")
    assert rows[16][1] == "RMSNorm_4095_1" and rows[-4][1] == "Add_4096_2"
    assert [r[1] for r in rows[-3:]] == ["Final_Norm", "LM_Head", "Output"]
    # up to the listing limit every block is its own rows, as the reference page lists them
    listed = estimate(dict(LLAMA, num_hidden_layers=MAX_LISTED_LAYERS))
    assert len(listed.structure) == 3 + MAX_LISTED_LAYERS * 6 + 3


def test_tracker_estimate_answers_under_one_gib(tmp_path):
    """The real CLI in a subprocess with RLIMIT_AS = 1 GiB: the 308-byte config of the issue."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(LLAMA, num_hidden_layers=100_000_000)))
    done = run_tracker("estimate", str(path), memory=1024 * MiB, timeout=300)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == ("implausible config: num_hidden_layers is 100000000, over the maximum of 4096\n"
                           "No estimate: these sizes cannot be a real model's, and we do not guess.\n")
    as_json = run_tracker("estimate", str(path), "--json", memory=1024 * MiB, timeout=300)
    data = json.loads(as_json.stdout)
    assert (data["supported"], data["implausible"], data["params"]) == (False, True, None)


def estimate_in_process(*argv: str) -> Result:
    """``tracker estimate ARGV`` through the CLI in this process; an exception it lets through raises here."""
    return CliRunner().invoke(main, ["estimate", *argv], catch_exceptions=False)


def test_tracker_estimate_refuses_a_deep_config_file_in_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    done = estimate_in_process(str(path))
    assert done.exit_code == 2
    assert done.stderr.strip().splitlines()[-1] == (
        f"Error: Invalid value: {path}: invalid JSON: nested too deeply to parse")
    assert "Traceback" not in done.stderr


def test_seq_len_beyond_the_range_is_a_usage_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    done = estimate_in_process(str(path), "--seq-len", "1" + "0" * 40)
    assert done.exit_code == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: Invalid value for '--seq-len': 10000000000000000000000000000000000000000 is not in the range "
        "1<=x<=1073741824.")
    with pytest.raises(ValueError, match="seq_len must be an integer from 1 to 1073741824"):
        estimate(LLAMA, seq_len=10**40)


def test_a_crafted_safetensors_shape_is_ignored_not_multiplied():
    """A million 4,000-digit dims: math.prod would run for hours; the header is set aside instead."""
    huge = [10**3999] * 1_000_000
    headers = {"model.safetensors": {"model.embed_tokens.weight": {"dtype": "BF16", "shape": huge,
                                                                   "data_offsets": [0, 0]}}}
    est = estimate(LLAMA, checkpoint_headers=headers)
    assert est.supported and est.checkpoint_params is None and est.checkpoint_note is None
    from tests.findings.weights_sources import WeightsSources, change, lfs
    from tracker.core.findings import weights

    ch = change([lfs("model.safetensors", 100, "v1")], [lfs("model.safetensors", 100, "v2")])
    sources = WeightsSources(headers={"old": {"model.safetensors": {"w": {"dtype": "F32", "shape": [2]}}},
                                      "new": headers})
    found = weights.analyse(ch, sources, RULES)
    assert [(f.code, f.summary) for f in found if f.code != "weights.file_replaced"] == [
        ("weights.header_invalid", "model.safetensors (new): safetensors header is malformed")]


def test_a_million_out_of_range_token_ids_are_five_messages_and_a_count():
    est = estimate(dict(LLAMA, eos_token_id=list(range(200_000, 1_200_000))))
    messages = [v.message for v in est.verifier if v.rule == "vocab-size-embedding"]
    assert messages == [f"eos_token_id {i} is outside the embedding's 128256 rows" for i in range(200_000, 200_005)] + [
        "eos_token_id: 999995 more ids are outside the embedding's 128256 rows"]


def test_sub_configs_of_multimodal_models_are_checked_too():
    gemma3 = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
              "text_config": {"model_type": "gemma3_text", "hidden_size": 2560, "num_hidden_layers": 100_000_000}}
    est = estimate(gemma3)
    assert (est.implausible, est.reason) == (
        True, "implausible config: text_config.num_hidden_layers is 100000000, over the maximum of 4096")
