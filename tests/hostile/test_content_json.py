"""Hostile JSON: configs nested 100,000 deep or holding millions of keys are findings, never crashes.

Every upstream JSON file (config.json, generation_config.json, tokenizer_config.json,
sharded indexes, auto_map configs, the raw diff) is parsed through
``tracker.core.bounded.loads_json``: a linear pre-scan refuses depth past 64 and more than
2,000,000 elements before ``json.loads`` recurses or allocates.
"""

from __future__ import annotations

import hashlib
import json

from tests.findings.sources import make_change
from tests.hostile.content_support import MiB, run_python
from tracker.core.bounded import MAX_JSON_DEPTH, NestedTooDeep, UntrustedInput, loads_json
from tracker.core.diff import MAX_STRUCTURED_DIFF_ITEMS, diff_revisions, diff_text
from tracker.core.findings import config, consistency, files, generation, licence, remote_code, weights
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()
GOOD = json.dumps({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "intermediate_size": 128, "vocab_size": 100, "auto_map": {"AutoModel": "modeling.M"}}).encode()
DEEP_OBJECT = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
DEEP_ARRAY = b"[" * 100_000 + b"]" * 100_000


def test_bounded_loader_refuses_depth_and_count_with_exact_reasons():
    deepest_ok = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert loads_json(deepest_ok) == eval("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    try:
        loads_json(b"[" + deepest_ok + b"]")
    except NestedTooDeep as exc:
        assert str(exc) == "JSON nested deeper than 64 levels"
    else:  # pragma: no cover
        raise AssertionError("depth 65 accepted")
    try:
        loads_json(b"[" + b"1," * 2_000_000 + b"1]")
    except UntrustedInput as exc:
        assert str(exc) == "JSON with more than 2,000,000 elements"
    else:  # pragma: no cover
        raise AssertionError("2 M elements accepted")
    # brackets inside strings are text, not nesting
    assert loads_json(json.dumps({"t": "[" * 1000}).encode()) == {"t": "[" * 1000}


def test_every_json_file_nested_100k_deep_is_a_finding_and_no_analyser_fails():
    old = {"config.json": GOOD, "generation_config.json": b'{"eos_token_id": 2}',
           "model.safetensors.index.json": b'{"weight_map": {}}', "modeling.py": b"x = 1\n"}
    new = {"config.json": DEEP_OBJECT, "generation_config.json": DEEP_ARRAY,
           "model.safetensors.index.json": DEEP_OBJECT, "modeling.py": b"x = 2\n",
           "tokenizer_config.json": DEEP_OBJECT}
    change, sources = make_change(old, new)
    # each analyser called directly, so an exception would fail the test rather than become analysis.failed
    findings = [f for module in (files, config, generation, weights, remote_code, licence, consistency)
                for f in module.analyse(change, sources, RULES)]
    by_code = {f.code: f for f in findings}
    assert by_code["config.malformed"].summary == (
        "config.json cannot be parsed: invalid JSON: nested too deeply to parse; "
        "transformers will fail to load the model")
    assert by_code["generation.malformed"].summary == (
        "generation_config.json cannot be parsed: invalid JSON: nested too deeply to parse; "
        "generate() will fail or fall back")
    assert by_code["weights.index_unreadable"].summary == (
        "model.safetensors.index.json (new) unreadable: not valid JSON: JSON nested deeper than 64 levels")
    # auto_map unreadable: the .py change is reported as plain Python, not guessed to be remote code
    assert by_code["code.python_changed"].summary == (
        "Python file changed: modeling.py (+1 −1 lines); not referenced by auto_map")
    assert json.dumps([f.to_json() for f in findings], allow_nan=False)

    raw = diff_revisions(change.old, change.new, sources.text)
    for path in ("config.json", "generation_config.json", "model.safetensors.index.json", "tokenizer_config.json"):
        assert raw["texts"][path] == {"kind": "error", "side": "new",
                                      "error": "NestedTooDeep: JSON nested deeper than 64 levels"}, path


def test_three_million_keys_are_refused_small_and_fast():
    """18 MB of ``"k":1,`` (3 M keys): refused by the pre-scan, never materialised."""
    result = run_python(
        """
        import json
        from tests.hostile.content_support import peak_mb
        from tracker.core.diff import diff_text
        from tracker.core.findings.config import JsonProblem, load_json_object
        big = b'{' + b'"k":1,' * 3_000_000 + b'"k":1}'
        out = {"diff": diff_text("config.json", b'{"k": 1}', big)}
        try:
            load_json_object(big, max_bytes=1 << 30)
        except JsonProblem as exc:
            out["config"] = str(exc)
        out["peak_mb"] = peak_mb()
        print(json.dumps(out))
        """,
        memory=1024 * MiB, timeout=300,
    ).result()
    assert result["diff"] == {"kind": "error", "side": "new",
                              "error": "TooManyItems: JSON with more than 2,000,000 elements"}
    assert result["config"] == "unreadable: JSON with more than 2,000,000 elements"
    assert result["peak_mb"] < 250  # measured ~100 MB with the imports; a regex blanking pass took 765 MB


def test_structured_diff_past_the_element_cap_is_a_hash_summary():
    old = json.dumps({"added_tokens": list(range(MAX_STRUCTURED_DIFF_ITEMS + 1))}).encode()
    new = json.dumps({"added_tokens": list(range(1, MAX_STRUCTURED_DIFF_ITEMS + 2))}).encode()
    short = lambda b: hashlib.sha256(b).hexdigest()[:12]  # noqa: E731
    assert diff_text("tokenizer_config.json", old, new) == {
        "kind": "json",
        "summary": f"changed: sha256 {short(old)} ({len(old):,} bytes) → sha256 {short(new)} ({len(new):,} bytes) "
                   "(over 50,000 elements: not diffed element by element)",
    }


def test_the_deepest_accepted_json_diffs_without_recursion_trouble():
    def nest(leaf: int) -> bytes:
        return b'{"a":' * (MAX_JSON_DEPTH - 1) + str(leaf).encode() + b"}" * (MAX_JSON_DEPTH - 1)

    result = diff_text("config.json", nest(1), nest(2))
    path = "root" + "['a']" * (MAX_JSON_DEPTH - 1)
    assert result == {"kind": "json", "deepdiff": {"values_changed": {path: {"new_value": 2, "old_value": 1}}}}


def test_a_config_of_many_changed_keys_gives_capped_findings_of_the_same_severity():
    """350,000 sub-objects each changing hidden_size: 50 findings itemised, one for the rest, all high."""
    old = {f"t{i}": {"hidden_size": 1} for i in range(350_000)}
    new = {f"t{i}": {"hidden_size": 2} for i in range(350_000)}
    from tracker.core.findings.config import diff_configs

    findings = diff_configs(old, new, RULES)
    assert len(findings) == 51
    assert {(f.code, f.severity) for f in findings} == {("config.shape_changed", Severity.HIGH)}
    assert findings[-1].summary == "349950 more changes of this kind (config.shape_changed)"
    assert findings[-1].evidence["count"] == 349_950 and len(findings[-1].evidence["keys"]) == 200
