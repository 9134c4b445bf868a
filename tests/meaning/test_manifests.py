"""Weight manifests against the revision's files and the shards' own headers.

The shapes are meta-llama/Llama-2-7b-hf's (32 layers, hidden 4096, intermediate 11008,
vocab 32000, F16, two shards): 291 tensors, its published 6,738,415,616 parameters, so a
correct ``total_size`` is 13,476,831,232 bytes of tensor data.
"""

from __future__ import annotations

import json

import pytest

from tests.findings.sources import analyse_revision, make_change
from tracker.core.findings import manifests
from tracker.core.findings.rules import SeverityRules

RULES = SeverityRules.default()
INDEX = "model.safetensors.index.json"
S1, S2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
LLAMA2_7B_TOTAL_SIZE = 13_476_831_232


def llama2_tensors() -> dict[str, list[int]]:
    h, inter, vocab = 4096, 11008, 32000
    out = {"model.embed_tokens.weight": [vocab, h]}
    for i in range(32):
        p = f"model.layers.{i}."
        out |= {p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [h, h],
                p + "self_attn.v_proj.weight": [h, h], p + "self_attn.o_proj.weight": [h, h],
                p + "mlp.gate_proj.weight": [inter, h], p + "mlp.up_proj.weight": [inter, h],
                p + "mlp.down_proj.weight": [h, inter], p + "input_layernorm.weight": [h],
                p + "post_attention_layernorm.weight": [h]}
    return out | {"model.norm.weight": [h], "lm_head.weight": [vocab, h]}


def shard_of(name: str) -> str:
    """Layers 0-23 and the embedding in the first shard, the rest in the second."""
    if name.startswith("model.layers."):
        return S1 if int(name.split(".")[2]) < 24 else S2
    return S1 if name == "model.embed_tokens.weight" else S2


def header(names: list[str], shapes: dict[str, list[int]]) -> dict:
    out, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        size = 2 * __import__("math").prod(shapes[name])
        out[name] = {"dtype": "F16", "shape": shapes[name], "data_offsets": [offset, offset + size]}
        offset += size
    return out


def checkpoint(weight_map: dict[str, str] | None = None, held: dict[str, str] | None = None,
               total_size: int = LLAMA2_7B_TOTAL_SIZE, index_path: str = INDEX) -> tuple[dict, dict]:
    """(files, headers): ``weight_map`` is what the index says, ``held`` where the tensors really are."""
    shapes = llama2_tensors()
    held = held or {n: shard_of(n) for n in shapes}
    weight_map = weight_map or dict(held)
    folder = index_path.rpartition("/")[0]
    files = {index_path: json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map}).encode()}
    headers = {}
    for shard in sorted(set(held.values())):
        path = f"{folder}/{shard}" if folder else shard
        headers[path] = header([n for n, s in held.items() if s == shard], shapes)
        files[path] = json.dumps(headers[path]).encode()  # content stands in for the shard bytes
    return files, headers


def analyse(old: tuple[dict, dict] | None, new: tuple[dict, dict]):
    change, sources = make_change(old[0] if old else None, new[0])
    sources.headers = {"old": old[1] if old else {}, "new": new[1]}
    return manifests.analyse(change, sources, RULES), (change, sources)


def summary(findings) -> list[tuple[str, str, str]]:
    return [(f.code, f.severity.value, f.summary) for f in findings]


def test_the_published_total_size_is_what_the_headers_hold():
    files, headers = checkpoint()
    assert sum(i["data_offsets"][1] - i["data_offsets"][0] for h in headers.values() for k, i in h.items()
               if k != "__metadata__") == LLAMA2_7B_TOTAL_SIZE
    findings, _ = analyse(None, (files, headers))
    assert findings == []  # a consistent checkpoint at the first revision read: nothing to say


def test_a_missing_shard_breaks_every_loader_that_honours_the_index():
    files, headers = checkpoint()
    new_files = {k: v for k, v in files.items() if k != S2}
    findings, (change, sources) = analyse((files, headers), (new_files, {S1: headers[S1]}))
    assert summary(findings) == [
        ("manifest.shard_missing", "critical",
         "model.safetensors.index.json names 1 file the revision does not have: "
         "model-00002-of-00002.safetensors (74 tensors)"),
    ]
    # the whole pipeline: the weights analyser adds what the shard's absence does to the checkpoint
    assert [(f.code, f.severity.value) for f in analyse_revision(change, sources)
            if f.category in ("manifest", "weights")] == [
        ("manifest.shard_missing", "critical"), ("weights.parameter_count_changed", "high"),
        ("weights.tensors_removed", "high"), ("weights.shard_removed", "moderate")]


def test_a_shard_in_a_subfolder_is_named():
    shapes = llama2_tensors()
    held = {n: ("weights/" + shard_of(n) if shard_of(n) == S2 else S1) for n in shapes}
    files, headers = checkpoint(held=held)
    findings, _ = analyse(checkpoint(), (files, headers))
    assert summary(findings) == [
        ("manifest.shard_in_subfolder", "moderate",
         "model.safetensors.index.json names 1 file in a subfolder: weights/model-00002-of-00002.safetensors "
         "(74 tensors in weights/model-00002-of-00002.safetensors)"),
    ]


def test_an_index_naming_the_root_while_the_shard_sits_in_a_subfolder_is_missing():
    files, headers = checkpoint()
    moved = {("weights/" + k if k == S2 else k): v for k, v in files.items()}
    findings, _ = analyse((files, headers), (moved, {S1: headers[S1], "weights/" + S2: headers[S2]}))
    assert summary(findings) == [
        ("manifest.shard_missing", "critical",
         "model.safetensors.index.json names 1 file the revision does not have: model-00002-of-00002.safetensors "
         "(74 tensors; a file of that name is at weights/model-00002-of-00002.safetensors)"),
    ]


def test_an_orphan_shard_is_reported_once():
    files, headers = checkpoint()
    stale = "model-00003-of-00003.safetensors"
    with_orphan = {**files, stale: b"stale shard"}
    findings, _ = analyse((files, headers), (with_orphan, headers))
    assert summary(findings) == [
        ("manifest.shard_orphaned", "low",
         "model.safetensors.index.json: 1 shard no longer referenced: model-00003-of-00003.safetensors (11 bytes)"),
    ]
    # the next revision re-uploads shard 1: the orphan is still there, and is not reported again
    reuploaded = {**with_orphan, S1: with_orphan[S1] + b" "}
    findings, _ = analyse((with_orphan, headers), (reuploaded, headers))
    assert findings == []


def test_a_tensor_moved_between_shards_with_the_index_is_no_manifest_problem():
    moved = {n: shard_of(n) for n in llama2_tensors()} | {"lm_head.weight": S1}
    files, headers = checkpoint(held=moved)
    old = checkpoint()
    findings, (change, sources) = analyse(old, (files, headers))
    assert findings == []
    assert [(f.code, f.severity.value, f.summary) for f in analyse_revision(change, sources)
            if f.category == "manifest" or f.code.startswith("weights.index")] == [
        ("weights.index_resharded", "low", "model.safetensors.index.json: 1 moved between shards"),
    ]


def test_an_index_that_moves_a_tensor_the_shards_did_not_move_is_high():
    weight_map = {n: shard_of(n) for n in llama2_tensors()} | {"lm_head.weight": S1}
    files, headers = checkpoint(weight_map=weight_map)
    findings, _ = analyse(checkpoint(), (files, headers))
    assert summary(findings) == [
        ("manifest.tensor_not_in_shard", "high",
         "model.safetensors.index.json names 1 tensor the named shard does not hold: lm_head.weight "
         "(mapped to model-00001-of-00002.safetensors)"),
    ]


def test_tensors_missing_from_the_index_are_moderate():
    weight_map = {n: s for n, s in ((n, shard_of(n)) for n in llama2_tensors()) if not n.startswith("model.norm")}
    files, headers = checkpoint(weight_map=weight_map)
    findings, _ = analyse(checkpoint(), (files, headers))
    assert summary(findings) == [
        ("manifest.tensor_unindexed", "moderate",
         "model.safetensors.index.json: 1 tensor in the shards that the index does not list: model.norm.weight "
         "(held by model-00002-of-00002.safetensors)"),
    ]


@pytest.mark.parametrize("total_size,expected", [
    (LLAMA2_7B_TOTAL_SIZE + 2, "index says 13,476,831,234, the shards' headers hold 13,476,831,232"),
    (6_738_415_616, "index says 6,738,415,616, the shards' headers hold 13,476,831,232"),
])
def test_a_wrong_total_size_is_low(total_size, expected):
    findings, _ = analyse(checkpoint(), checkpoint(total_size=total_size))
    assert summary(findings) == [
        ("manifest.total_size_mismatch", "low",
         f"model.safetensors.index.json: total_size disagrees with the shards: {expected}"),
    ]
    assert (findings[0].before, findings[0].after) == (total_size, LLAMA2_7B_TOTAL_SIZE)


def test_a_broken_checkpoint_at_the_first_revision_is_reported():
    files, headers = checkpoint()
    del files[S2]
    findings, _ = analyse(None, (files, {S1: headers[S1]}))
    assert [(f.code, f.severity.value) for f in findings] == [("manifest.shard_missing", "critical")]


def test_a_bin_index_is_checked_against_the_file_list():
    weight_map = {"model.embed_tokens.weight": "pytorch_model-00001-of-00002.bin",
                  "lm_head.weight": "pytorch_model-00002-of-00002.bin"}
    index = json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}).encode()
    old = {"pytorch_model.bin.index.json": index, "pytorch_model-00001-of-00002.bin": b"1",
           "pytorch_model-00002-of-00002.bin": b"2"}
    new = {k: v for k, v in old.items() if k != "pytorch_model-00002-of-00002.bin"}
    change, sources = make_change(old, new)
    assert summary(manifests.analyse(change, sources, RULES)) == [
        ("manifest.shard_missing", "critical",
         "pytorch_model.bin.index.json names 1 file the revision does not have: "
         "pytorch_model-00002-of-00002.bin (1 tensors)"),
    ]


def test_an_adapter_pointing_at_another_base_and_modules():
    before = {"base_model_name_or_path": "meta-llama/Llama-2-7b-hf", "peft_type": "LORA", "r": 16,
              "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM"}
    after = dict(before, base_model_name_or_path="meta-llama/Meta-Llama-3-8B", r=8,
                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    change, sources = make_change({"adapter_config.json": json.dumps(before).encode()},
                                  {"adapter_config.json": json.dumps(after).encode()})
    assert summary(manifests.analyse(change, sources, RULES)) == [
        ("adapter.base_model_changed", "high",
         "adapter_config.json: the adapter now applies to another base: base_model_name_or_path "
         "'meta-llama/Llama-2-7b-hf' → 'meta-llama/Meta-Llama-3-8B'"),
        ("adapter.target_modules_changed", "moderate", "adapter_config.json: target_modules +2 (k_proj, o_proj)"),
        ("adapter.config_changed", "moderate", "adapter_config.json: r 16 → 8"),
    ]
