"""Weight deltas: where tensors lie, what the plan reads within a budget, and what the comparison measures.

Pure: the tensors are numpy arrays written as safetensors bytes here, read through a counting reader.
The Hub-backed reads, the budget at the stand-in and the real all-MiniLM-L6-v2 are in
tests/meaning/test_weight_deltas.py.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from tests.findings.sources import DictSources
from tests.findings.weights_sources import change, lfs
from tracker.core.findings import weight_delta as wd
from tracker.core.findings import weights
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Severity

RULES = SeverityRules.default()
NAMES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64",
         np.dtype("uint16"): "BF16"}  # here a uint16 array holds bfloat16 bits


def st_bytes(tensors: dict[str, np.ndarray], metadata: dict[str, str] | None = None) -> bytes:
    header: dict[str, object] = {"__metadata__": metadata or {"format": "pt"}}
    offset, data = 0, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": NAMES[array.dtype], "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        offset, data = offset + len(raw), data + raw
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


def header_of(raw: bytes) -> dict:
    return json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])


def pairs_of(old: bytes, new: bytes) -> dict[str, tuple[wd.Placed, wd.Placed]]:
    a, b = wd.placements(header_of(old), "a", len(old)), wd.placements(header_of(new), "b", len(new))
    assert a is not None and b is not None
    return {name: (a[name], b[name]) for name in a}


def measure(old: bytes, new: bytes, budget: wd.Budget = wd.Budget(64, 16 * 1024 * 1024)):
    calls: list[tuple[str, int, int]] = []

    def read(side, path, ranges):
        calls.extend((side, start, length) for start, length in ranges)
        data = old if side == "old" else new
        return [data[start:start + length] for start, length in ranges]

    return wd.measure(pairs_of(old, new), budget, read), calls


RNG = np.random.default_rng(7)
MODEL = {f"layer.{i}.{kind}": RNG.standard_normal(shape).astype(np.float32)
         for i in range(3) for kind, shape in (("bias", (64,)), ("weight", (256, 256)))}


def test_placements_start_where_the_data_section_does_and_refuse_what_does_not_add_up():
    raw = st_bytes({"a": np.zeros(3, np.float32), "b": np.zeros((2, 2), np.float16)})
    placed = wd.placements(header_of(raw), "m.safetensors", len(raw))
    data_start = 8 + struct.unpack("<Q", raw[:8])[0]
    assert placed == {"a": wd.Placed("m.safetensors", "F32", data_start, 3),
                      "b": wd.Placed("m.safetensors", "F16", data_start + 12, 4)}
    bad = header_of(raw)
    bad["a"]["data_offsets"] = [0, 16]  # 3 floats are 12 bytes
    assert wd.placements(bad, "m", len(raw)) is None
    assert wd.placements({"a": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 4]}}, "m", 99) is None
    assert wd.placements(header_of(raw), "m", 20) is None  # the data would start inside the length prefix


def test_a_plan_covers_every_tensor_when_the_budget_allows_and_stays_within_it():
    raw = st_bytes(MODEL)
    pairs = pairs_of(raw, raw)
    windows = wd.plan(pairs, wd.Budget(64, 16 * 1024 * 1024))
    assert {w.tensor for w in windows} == set(MODEL)
    for side in (0, 1):
        requests = wd.coalesce(pairs, windows, side, max_length=16 * 1024 * 1024 // 64)
        assert len(requests) <= 64 and sum(r.length for r in requests) <= 16 * 1024 * 1024


@pytest.mark.parametrize("requests", [1, 2, 3, 5])
def test_past_the_budget_a_spread_of_boundaries_is_read_and_never_more(requests):
    raw = st_bytes(MODEL)
    (m, calls) = measure(raw, raw, wd.Budget(requests, 64 * 1024))
    assert m is not None and m.identical
    for side in ("old", "new"):
        spent = [(start, length) for s, start, length in calls if s == side]
        assert len(spent) <= requests and sum(length for _, length in spent) <= 64 * 1024
    names = {t.name for t in m.tensors}
    assert 0 < len(names) < len(MODEL)
    if requests >= 2:  # the first and the last boundary are always among those read
        assert {"layer.0.bias", "layer.2.weight"} <= names


def test_no_budget_reads_nothing():
    raw = st_bytes(MODEL)
    assert measure(raw, raw, wd.Budget(0, 0)) == (None, [])


def test_identical_values_in_another_order_and_metadata_measure_identical():
    old = st_bytes(MODEL)
    new = st_bytes(dict(reversed(list(MODEL.items()))), {"format": "pt", "note": "re-saved"})
    m, _ = measure(old, new)
    assert m is not None and m.identical and m.order_changed
    assert (m.relative_l2, m.max_relative_error, len(m.tensors)) == (0.0, 0.0, 6)


def test_a_float16_conversion_is_within_rounding_and_a_scaled_tensor_is_not():
    old = st_bytes(MODEL)
    m, _ = measure(old, st_bytes({k: v.astype(np.float16) for k, v in MODEL.items()}))
    assert m is not None and m.dtype_changes == ("F32 → F16",)
    assert m.within_rounding() and 0 < m.max_relative_error <= 2.0 ** -11
    assert not wd.moves_embeddings(m)
    scaled = {**MODEL, "layer.1.weight": MODEL["layer.1.weight"] * np.float32(1.01)}
    m, _ = measure(old, st_bytes(scaled))
    assert m is not None and not m.within_rounding()
    assert [(t.name, round(t.relative_l2, 6)) for t in m.most_moved() if not t.identical] == [("layer.1.weight", 0.01)]
    assert m.largest_relative_l2 == pytest.approx(0.01, rel=1e-4)
    assert wd.moves_embeddings(m)  # 1e-2 is five times the 2e-3 of numeric noise


def test_bfloat16_is_decoded_and_its_rounding_is_a_conversion():
    old = {"w": np.linspace(-3, 3, 1000, dtype=np.float32)}
    bits = old["w"].view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    m, _ = measure(st_bytes(old), st_bytes({"w": rounded}))
    assert m is not None and m.dtype_changes == ("F32 → BF16",)
    assert m.within_rounding() and m.max_relative_error <= 2.0 ** -8


class BudgetSources(DictSources):
    def __init__(self, old, new, budget):
        super().__init__(old, new)
        self.budget = budget

    def weight_budget(self):
        return self.budget


def _analyse(old_bytes: bytes, new_bytes: bytes, budget=(64, 16 * 1024 * 1024)):
    sources = BudgetSources({"model.safetensors": old_bytes}, {"model.safetensors": new_bytes}, budget)
    sources.headers = {"old": {"model.safetensors": header_of(old_bytes)},
                       "new": {"model.safetensors": header_of(new_bytes)}}
    ch = change([lfs("model.safetensors", len(old_bytes), "v1")], [lfs("model.safetensors", len(new_bytes), "v2")])
    return weights.analyse(ch, sources, RULES)


def test_the_analyser_says_resaved_converted_or_changed_and_falls_back_without_a_budget():
    old = st_bytes(MODEL)
    resaved = _analyse(old, st_bytes(dict(reversed(list(MODEL.items()))), {"format": "pt", "by": "x"}))
    assert [(f.code, f.severity) for f in resaved] == [("weights.resaved", Severity.LOW)]
    assert resaved[0].evidence["differs"] == ["header metadata", "tensor order"]
    converted = _analyse(old, st_bytes({k: v.astype(np.float16) for k, v in MODEL.items()}))
    assert [(f.code, f.severity) for f in converted] == [("weights.dtype_changed", Severity.MODERATE)]
    assert converted[0].evidence["dtype_changes"] == ["F32 → F16"]
    changed = _analyse(old, st_bytes({**MODEL, "layer.0.bias": MODEL["layer.0.bias"] + 1}))
    assert [f.code for f in changed] == ["weights.file_replaced", "weights.values_changed"]
    assert changed[1].evidence["relative_l2_by_tensor"] == {"layer.0.bias": pytest.approx(
        float(np.sqrt(64) / np.linalg.norm(MODEL["layer.0.bias"])), rel=1e-2)}
    unmeasured = _analyse(old, st_bytes(dict(reversed(list(MODEL.items())))), budget=(0, 0))
    assert [f.code for f in unmeasured] == ["weights.file_replaced", "weights.values_changed"]
    assert "measured" not in unmeasured[1].evidence


def test_a_renamed_weight_file_is_no_weights_finding():
    entry = lfs("flux1-dev.sft", 100, "same")
    renamed = lfs("flux1-dev.safetensors", 100, "same")
    assert weights.analyse(change([entry], [renamed]), DictSources(), RULES) == []
    moved = weights.analyse(change([lfs("model.safetensors", 9, "a")], [lfs("weights/model.safetensors", 9, "a")]),
                            DictSources(), RULES)
    assert moved == []


def test_a_checkpoint_resharded_with_the_same_values_is_resaved_naming_the_sharding():
    names = list(MODEL)
    single = st_bytes(MODEL)
    shards = {f"model-0000{i}-of-00002.safetensors": st_bytes({n: MODEL[n] for n in part})
              for i, part in ((1, names[:3]), (2, names[3:]))}
    sources = DictSources({"model.safetensors": single}, shards)
    sources.headers = {"old": {"model.safetensors": header_of(single)},
                       "new": {path: header_of(raw) for path, raw in shards.items()}}
    ch = change([lfs("model.safetensors", len(single), "v1")],
                [lfs(path, len(raw), path) for path, raw in shards.items()])
    found = weights.analyse(ch, sources, RULES)
    assert [f.code for f in found] == ["weights.shard_added", "weights.shard_added", "weights.file_removed",
                                       "weights.resaved"]
    assert found[-1].evidence["differs"] == ["sharding (1 → 2 files)"]
    assert found[-1].summary.startswith("model (2 shards): re-saved with identical tensor values (sharding (1 → 2 files) "
                                        "changed); compared 6 of 6 tensors")
