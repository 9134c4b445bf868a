from __future__ import annotations

import pytest

from tracker.core.estimate import compare_estimates, estimate
from tracker.core.findings.rules import SeverityRules

from .conftest import load_real


@pytest.fixture(scope="module")
def rules():
    return SeverityRules.default()


def codes(findings):
    return [(f.code, f.severity.value) for f in findings]


def test_first_revision_reports_only_facts_about_itself(e5_config, rules):
    assert compare_estimates(None, estimate(e5_config), rules) == []
    mism = estimate(e5_config, checkpoint_params=559_890_432 + 2 * 12_596_224)
    [f] = compare_estimates(None, mism, rules)
    assert (f.code, f.severity.value, f.category) == ("estimate.checkpoint_mismatch", "critical", "estimate")
    assert f.summary.endswith("config says 24 layers, weights hold 26")


def test_unchanged_config_no_findings(e5_config, rules):
    assert compare_estimates(estimate(e5_config), estimate(e5_config), rules) == []


def test_fit_lost_on_t4(e5_config, rules):
    old = estimate(e5_config)
    new = estimate(dict(e5_config, num_hidden_layers=36))
    found = compare_estimates(old, new, rules)
    lost = [f for f in found if f.code == "estimate.fit_lost"]
    assert "full fine-tune on T4: batch 7 -> does not fit" in [f.summary for f in lost]
    assert all(f.severity.value == "high" for f in lost)
    assert ("estimate.params_changed", "high") in codes(found)
    changed = [f for f in found if f.code == "estimate.serve_batch_changed"]
    assert changed and all(f.severity.value == "moderate" for f in changed)


def test_fit_gained(e5_config, rules):
    found = compare_estimates(estimate(dict(e5_config, num_hidden_layers=36)), estimate(e5_config), rules)
    assert "full fine-tune on T4: does not fit -> batch 7" in [f.summary for f in found if f.code == "estimate.fit_gained"]


def test_small_serving_move_is_not_reported(e5_config, rules):
    # a 1 % larger vocabulary moves serving batches by far less than 10 %
    found = compare_estimates(estimate(e5_config), estimate(dict(e5_config, vocab_size=252_000)), rules)
    assert "estimate.serve_batch_changed" not in {f.code for f in found}
    assert "estimate.params_changed" in {f.code for f in found}


def test_context_change(rules):
    cfg = load_real("meta-llama__Llama-2-7b-hf.json")
    found = compare_estimates(estimate(dict(cfg, max_position_embeddings=1024)), estimate(cfg), rules)
    [ctx] = [f for f in found if f.code == "estimate.context_changed"]
    assert ctx.before == {"context": 1024, "seq_len": 1024} and ctx.after == {"context": 4096, "seq_len": 2048}


def test_becoming_unsupported(e5_config, rules):
    found = compare_estimates(estimate(e5_config), estimate(dict(e5_config, model_type="xlm-roberta-next")), rules)
    assert codes(found) == [("estimate.unsupported", "low")]


def test_tied_copy_is_info(rules):
    cfg = load_real("tiiuae__falcon-40b.json")
    est = estimate(cfg, checkpoint_params=41_303_293_952 + 65024 * 8192)
    assert codes(compare_estimates(None, est, rules)) == [("estimate.checkpoint_tied_copy", "info")]


def test_severity_override_comes_from_table(e5_config, rules):
    strict = rules.with_overrides({"estimate.fit_gained": "high"})
    found = compare_estimates(estimate(dict(e5_config, num_hidden_layers=36)), estimate(e5_config), strict)
    assert {f.severity.value for f in found if f.code == "estimate.fit_gained"} == {"high"}
