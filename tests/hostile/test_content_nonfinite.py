"""Non-finite numbers: a NaN or Infinity in an upstream file never makes stored JSON non-strict.

Python's json reads ``NaN`` and ``Infinity``; PostgreSQL's JSON, OSV records and the API
must not carry them. Findings (``Finding.to_json``), estimates (``Estimate.to_json``) and
raw diffs keep them as text through ``tracker.core.bounded.json_safe``.
"""

from __future__ import annotations

import json

from tests.findings.sources import make_change
from tracker.core.bounded import json_safe
from tracker.core.diff import diff_revisions
from tracker.core.estimate import compare_estimates, estimate
from tracker.core.findings import config, generation
from tracker.core.findings.rules import SeverityRules

RULES = SeverityRules.default()
OLD = b'{"model_type": "llama", "rope_theta": 10000.0, "rms_norm_eps": 1e-05, "temperature": 0.7}'
NEW = b'{"model_type": "llama", "rope_theta": NaN, "rms_norm_eps": Infinity, "temperature": -Infinity}'


def strict(value: object) -> str:
    return json.dumps(value, allow_nan=False)


def test_findings_from_a_config_with_nan_are_strict_json():
    change, sources = make_change({"config.json": OLD}, {"config.json": NEW})
    findings = config.analyse(change, sources, RULES) + generation.analyse(change, sources, RULES)
    stored = [f.to_json() for f in findings]
    assert strict(stored)
    assert {(f["code"], f["before"], f["after"]) for f in stored} == {
        ("config.rope_changed", 10000.0, "nan"),
        ("config.computation_changed", 1e-05, "inf"),
        ("config.value_changed", 0.7, "-inf"),
        ("generation.sampling_changed", 0.7, "-inf"),
    }


def test_raw_diff_of_a_config_with_nan_is_strict_json():
    change, sources = make_change({"config.json": OLD}, {"config.json": NEW})
    raw = diff_revisions(change.old, change.new, sources.text)
    assert strict(raw)
    assert raw["texts"]["config.json"]["deepdiff"]["values_changed"]["root['rope_theta']"] == {
        "new_value": "nan", "old_value": 10000.0}


def test_estimates_of_configs_with_nan_are_strict_json():
    base = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 100, "initializer_range": float("nan"), "rope_theta": float("inf")}
    ok = estimate(base)
    assert ok.supported and strict(ok.to_json())
    bad = estimate(dict(base, num_attention_heads=float("nan")))
    assert strict(bad.to_json()) and bad.reason == (
        "implausible config: num_attention_heads is NaN; expected an integer from 1 to 16384")
    assert strict([f.to_json() for f in compare_estimates(ok, bad, RULES)])


def test_json_safe_covers_every_shape_json_refuses():
    value = {1.5: float("nan"), float("inf"): [float("-inf"), (1, 2)], ("a", 1): {3}, "big": 10**4000, None: True}
    assert json_safe(value) == {1.5: "nan", "inf": ["-inf", [1, 2]], "('a', 1)": [3], "big": "<integer of 13288 bits>",
                                None: True}
    assert strict(json_safe(value))
