"""Exports beside the source weights: a revision that moves one and not the other.

The layout is Xenova-style / optimum exports of a BERT encoder: model.safetensors at the root,
onnx/model.onnx and openvino/openvino_model.xml beside it (the IR's weights file, openvino_model.bin, is left
out: raw tensor bytes under a .bin name are pickle-scanned and reported unreadable, a separate matter).
"""

from __future__ import annotations

import pytest

from .hub import analyse_scenarios
from .st_repos import safetensors_bytes

CONFIG = b'{"model_type": "bert", "architectures": ["BertModel"]}'


def repo(weights: int = 0, onnx: bytes = b"onnx-v1", openvino: bytes = b'<net name="v1"/>', card: bytes = b"# bert\n"):
    return {"config.json": CONFIG, "README.md": card,
            "model.safetensors": safetensors_bytes({"embeddings.word_embeddings.weight": [4, 4]}, weights),
            "onnx/model.onnx": onnx, "openvino/openvino_model.xml": openvino}


SCENARIOS = {
    "weights_only": (repo(), repo(weights=1)),
    "onnx_only": (repo(), repo(onnx=b"onnx-v2")),
    "all_together": (repo(), repo(weights=1, onnx=b"onnx-v2", openvino=b'<net name="v2"/>')),
    "prose_only": (repo(), repo(card=b"# bert\n\nExported with optimum.\n")),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("exports"), "acme", SCENARIOS)


def triples(findings):
    return [(f.code, f.severity.value, f.summary) for f in findings if f.category == "exports"]


def test_source_weights_replaced_while_exports_stay_is_stale_per_format(results):
    assert triples(results["weights_only"]) == [
        ("exports.stale", "moderate", "model.safetensors changed but the ONNX export (onnx/model.onnx) did not: "
         "ONNX users still get the old weights"),
        ("exports.stale", "moderate", "model.safetensors changed but the OpenVINO export "
         "(openvino/openvino_model.xml) did not: OpenVINO users still get the old weights"),
    ]


def test_an_export_replaced_alone_diverges_and_everything_together_is_fine(results):
    assert triples(results["onnx_only"]) == [
        ("exports.diverged", "moderate", "the ONNX export changed (onnx/model.onnx) but the source weights did not: "
         "the two no longer give the same model")]
    assert triples(results["all_together"]) == []


def test_prose_only_raises_nothing_above_low(results):
    assert [(f.code, f.severity.value) for f in results["prose_only"]] == [("files.changed", "info")]
