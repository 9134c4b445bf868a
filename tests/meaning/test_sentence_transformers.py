"""sentence-transformers repos: the module pipeline, and whether stored embeddings still compare.

Every repo starts from the real sentence-transformers/all-MiniLM-L6-v2 files (Transformer → Pooling
(mean, 384) → Normalize, max_seq_length 256) and pushes one change, on the Hub stand-in, read through
the real HubClient and HubSources. Tokenization, prompts, max_seq_length and the schemas:
test_index_verdict.py.
"""

from __future__ import annotations

import json

import pytest
from hubstandin import HubStandin

from .hub import analyse_on_hub
from .st_repos import edit_json, minilm_files, safetensors_bytes

MODULES = json.loads(minilm_files()["modules.json"])
E5_PROMPTS = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None,
              "similarity_fn_name": "cosine"}
DENSE = {"in_features": 384, "out_features": 256, "bias": True,
         "activation_function": "torch.nn.modules.linear.Identity"}


def _with_dense(files: dict[str, bytes], fill: int = 0, out_features: int = 256) -> dict[str, bytes]:
    modules = [*MODULES[:2], {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
               {**MODULES[2], "idx": 3, "name": "3", "path": "3_Normalize"}]
    return {**files, "modules.json": json.dumps(modules, indent=2).encode(),
            "2_Dense/config.json": json.dumps({**DENSE, "out_features": out_features}).encode(),
            "2_Dense/model.safetensors": safetensors_bytes({"linear.weight": [out_features, 384]}, fill)}


BASE = minilm_files()
E5_BASE = {**BASE, "config_sentence_transformers.json": json.dumps(E5_PROMPTS).encode()}
SCENARIOS: dict[str, tuple[dict[str, bytes], dict[str, bytes]]] = {
    "pooling_cls": (BASE, edit_json(BASE, "1_Pooling/config.json", pooling_mode_mean_tokens=False,
                                    pooling_mode_cls_token=True)),
    "normalize_dropped": (BASE, {**BASE, "modules.json": json.dumps(MODULES[:2], indent=2).encode()}),
    "similarity_dot": (E5_BASE, {**E5_BASE, "config_sentence_transformers.json": json.dumps(
        {**E5_PROMPTS, "similarity_fn_name": "dot"}).encode()}),
    "dense_added": (BASE, _with_dense(BASE)),
    "dense_reuploaded": (_with_dense(BASE), _with_dense(BASE, fill=1)),
    "dense_narrower": (_with_dense(BASE), _with_dense(BASE, out_features=128)),
    "weights_reuploaded": (BASE, {**BASE, "model.safetensors": safetensors_bytes(
        {"embeddings.word_embeddings.weight": [8, 4]}, fill=7)}),
    "prose_only": (BASE, {**BASE, "README.md": BASE["README.md"].replace(b"## Usage", b"## How to use it")}),
    "million_modules": (BASE, {**BASE, "modules.json": b"[" + b",".join([b'{"type":"x"}'] * 1_000_000) + b"]"}),
    "too_many_modules": (BASE, {**BASE, "modules.json": json.dumps([{"type": "x"}] * 65).encode()}),
    "module_path_escapes": (BASE, {**BASE, "modules.json": json.dumps(
        [*MODULES[:1], {**MODULES[1], "path": "../../etc"}]).encode()}),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each scenario's findings, from one stand-in for the module."""
    root = tmp_path_factory.mktemp("st")
    hub = HubStandin(root / "hub").start()
    try:
        out = {}
        for name, (before, after) in SCENARIOS.items():
            repo = f"sentence-transformers/{name.replace('_', '-')}"
            hub.create_repo(repo)
            old = hub.commit(repo, before, message="upload")
            new = hub.commit(repo, after, message=name)
            (root / name).mkdir()
            out[name] = analyse_on_hub(hub, root / name, repo, old, new)
        yield out
    finally:
        hub.stop(wait=False)


def triples(findings):
    return [(f.code, f.severity.value, f.summary) for f in findings]


VERDICT = "stored embeddings are no longer comparable with new ones: "


@pytest.mark.parametrize(("name", "expected"), [
    ("pooling_cls", [
        ("embeddings.incompatible", "critical", VERDICT + "pooling mean → cls; re-embed the index"),
        ("sentence_transformers.pooling_changed", "high", "1_Pooling/config.json: pooling mean → cls"),
        ("files.changed", "info", "changed 1_Pooling/config.json (190 bytes → 190 bytes)"),
    ]),
    ("normalize_dropped", [
        ("embeddings.incompatible", "critical", VERDICT + "Normalize module removed; re-embed the index"),
        ("sentence_transformers.normalize_changed", "high",
         "modules.json: Normalize module removed: embeddings are no longer unit length "
         "(Transformer → Pooling → Normalize ⇒ Transformer → Pooling)"),
        ("files.changed", "info", "changed modules.json (349 bytes → 229 bytes)"),
    ]),
    ("dense_added", [
        ("embeddings.incompatible", "critical", VERDICT + "module pipeline Transformer → Pooling → Normalize ⇒ "
         "Transformer → Pooling → Dense → Normalize; re-embed the index"),
        ("sentence_transformers.modules_changed", "high", "modules.json: Dense added "
         "(Transformer → Pooling → Normalize ⇒ Transformer → Pooling → Dense → Normalize)"),
        ("weights.file_added", "low", "weight file added: 2_Dense/model.safetensors (393,312 bytes)"),
        ("files.added", "info", "added 2_Dense/config.json (114 bytes)"),
        ("files.added", "info", "added 2_Dense/model.safetensors (393,312 bytes)"),
        ("files.changed", "info", "changed modules.json (349 bytes → 461 bytes)"),
    ]),
    ("dense_narrower", [
        ("embeddings.incompatible", "critical",
         VERDICT + "Dense out_features: 256 → 128; 2_Dense/model.safetensors re-uploaded; re-embed the index"),
        ("weights.file_replaced", "critical", "2_Dense/model.safetensors re-uploaded with new content: "
         "393,312 bytes → 196,704 bytes, sha256 7a155620b0ab → e3f01d0bb6cd"),
        ("sentence_transformers.dense_changed", "high", "2_Dense/config.json: out_features: 256 → 128"),
        ("sentence_transformers.dense_changed", "high",
         "2_Dense/model.safetensors re-uploaded: the Dense layer's weights changed"),
        ("weights.parameter_count_changed", "high", "2_Dense/model.safetensors: parameters 98,304 → 49,152 (-49,152)"),
        ("weights.tensors_reshaped", "high",
         "2_Dense/model.safetensors: 1 tensors reshaped, e.g. linear.weight [256, 384] → [128, 384]"),
        ("files.changed", "info", "changed 2_Dense/config.json (114 bytes → 114 bytes)"),
        ("files.changed", "info", "changed 2_Dense/model.safetensors (393,312 bytes → 196,704 bytes)"),
    ]),
])
def test_a_change_that_moves_the_vectors_is_an_incompatibility_verdict_first(results, name, expected):
    assert triples(results[name]) == expected
    verdict = results[name][0]
    assert verdict.library == "sentence-transformers" and verdict.category == "embeddings"
    assert verdict.evidence["reasons"] and verdict.summary.startswith(VERDICT)


def test_re_uploaded_weights_of_any_module_make_the_embeddings_incompatible(results):
    # The old weights are all zeros, so any change is infinitely large relative to them: measured, beyond noise.
    assert [(f.code, f.severity.value, f.summary) for f in results["weights_reuploaded"]][:1] == [
        ("embeddings.incompatible", "critical", VERDICT + "model.safetensors values changed: relative L2 change "
         "up to inf per tensor, beyond numeric noise (0.002); re-embed the index")]
    assert results["weights_reuploaded"][0].evidence["weights"]["model.safetensors"]["relative_l2"] == "inf"
    assert [f.code for f in results["dense_reuploaded"]] == [
        "embeddings.incompatible", "weights.file_replaced", "weights.values_changed",
        "sentence_transformers.dense_changed", "files.changed"]
    assert results["dense_reuploaded"][0].evidence["reasons"] == [
        "2_Dense/model.safetensors values changed: relative L2 change up to inf per tensor, beyond numeric noise (0.002)"]


def test_a_new_similarity_function_changes_scores_not_the_vectors(results):
    assert triples(results["similarity_dot"]) == [
        ("sentence_transformers.similarity_changed", "moderate",
         "config_sentence_transformers.json: similarity_fn_name: cosine → dot"),
        ("files.changed", "info", "changed config_sentence_transformers.json (118 bytes → 115 bytes)"),
    ]


def test_prose_only_raises_nothing_above_low(results):
    assert triples(results["prose_only"]) == [("files.changed", "info", "changed README.md (10,454 bytes → 10,470 bytes)")]


@pytest.mark.parametrize(("name", "summary"), [
    ("million_modules", "modules.json: 13,000,001 bytes, over the 1,048,576-byte limit; not read; "
                        "sentence-transformers cannot load the model"),
    ("too_many_modules", "modules.json lists 65 modules, over the limit of 64; not read; "
                         "sentence-transformers cannot load the model"),
    ("module_path_escapes", "modules.json: module path '../../etc' leaves the repo; "
                            "sentence-transformers cannot load the model"),
])
def test_a_hostile_modules_json_is_a_critical_finding_and_nothing_else_is_read(results, name, summary):
    findings = results[name]
    assert [(f.code, f.severity.value, f.summary) for f in findings if f.category != "files"] == [
        ("sentence_transformers.malformed", "critical", summary)]
