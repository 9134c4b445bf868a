"""Exports beside the source weights: a revision that moves one and not the other.

The layout is Xenova-style / optimum exports of a BERT encoder: model.safetensors at the root,
onnx/model.onnx (a real ONNX model, built with the onnx package) and openvino/openvino_model.xml beside it (the
IR's weights file, openvino_model.bin, is left out: raw tensor bytes under a .bin name are pickle-scanned and
reported unreadable, a separate matter). A replaced .onnx file is read by range requests: opset, IR version, graph
inputs and outputs; the hostile variants are a graph whose inputs lie beyond the read cap and a 2^60 length prefix.
"""

from __future__ import annotations

import pytest

from tests.hostile.content_support import dangerous_pickle

from .hub import analyse_scenarios
from .onnx_files import bert_onnx, huge_length_prefix
from .st_repos import safetensors_bytes

CONFIG = b'{"model_type": "bert", "architectures": ["BertModel"]}'
ONNX_V1 = bert_onnx()
ONNX_RETRAINED = bert_onnx(weight_bytes=4096)  # same graph, other weights


def repo(weights: int = 0, onnx: bytes = ONNX_V1, openvino: bytes = b'<net name="v1"/>', card: bytes = b"# bert\n",
         **extra: bytes):
    return {"config.json": CONFIG, "README.md": card,
            "model.safetensors": safetensors_bytes({"embeddings.word_embeddings.weight": [4, 4]}, weights),
            "onnx/model.onnx": onnx, "openvino/openvino_model.xml": openvino, **extra}


def parameter(layer_id: int, name: str, shape: str) -> str:
    dims = "".join("<dim>-1</dim>" if d == "?" else f"<dim>{d}</dim>" for d in shape.split(","))
    return (f'<layer id="{layer_id}" name="{name}" type="Parameter" version="opset1">'
            f'<data shape="{shape}" element_type="i64" />'
            f'<output><port id="0" precision="I64" names="{name}">{dims}</port></output></layer>')


def result(layer_id: int, name: str, hidden: int) -> str:
    return (f'<layer id="{layer_id}" name="{name}" type="Result" version="opset1">'
            f'<input><port id="0" precision="FP32"><dim>-1</dim><dim>-1</dim><dim>{hidden}</dim></port></input>'
            '<rt_info><attribute name="fused_names" version="0" value="x" /></rt_info></layer>')


def openvino_ir(inputs=("input_ids", "attention_mask", "token_type_ids"), hidden: int = 384) -> bytes:
    """An optimum-intel IR of a BERT encoder: Parameters, a Gather, the Result; edges and rt_info as exported."""
    layers = [parameter(i, name, "?,?") for i, name in enumerate(inputs)]
    layers.append(f'<layer id="{len(inputs)}" name="__module.embeddings/aten::embedding/Gather" type="Gather" '
                  f'version="opset8"><data batch_dims="0" /><input><port id="0" precision="FP32"><dim>30522</dim>'
                  f'<dim>{hidden}</dim></port></input><output><port id="1" precision="FP32"><dim>-1</dim>'
                  f'<dim>-1</dim><dim>{hidden}</dim></port></output></layer>')
    layers.append(result(len(inputs) + 1, "last_hidden_state", hidden))
    return ('<?xml version="1.0"?>\n<net name="Model0" version="11"><layers>' + "".join(layers) + "</layers>"
            '<edges><edge from-layer="0" from-port="0" to-layer="3" to-port="1" /></edges>'
            '<rt_info><Runtime_version value="2024.4.0" /></rt_info></net>\n').encode()


BILLION_LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;'
                  b'&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><net name="&c;"><layers/></net>')
DEEP = b"<net><layers>" + b"<x>" * 5000 + b"</x>" * 5000 + b"</layers></net>"
IR_WEIGHTS = bytes(range(256)) * 64  # raw little-endian tensors, no pickle


SCENARIOS = {
    "weights_only": (repo(), repo(weights=1)),
    "onnx_only": (repo(), repo(onnx=ONNX_RETRAINED)),
    "all_together": (repo(), repo(weights=1, onnx=ONNX_RETRAINED, openvino=b'<net name="v2"/>')),
    "onnx_opset": (repo(), repo(weights=1, onnx=bert_onnx(opset=17, ir_version=9), openvino=b'<net name="v2"/>')),
    "onnx_io": (repo(), repo(weights=1, onnx=bert_onnx(inputs=("input_ids", "attention_mask"), hidden=16,
                                                         output="sentence_embedding"),
                             openvino=b'<net name="v2"/>')),
    # 4 MiB of weights inside the file, before the graph's inputs: jumped over, not fetched
    "onnx_weights_inside": (repo(onnx=bert_onnx(weight_bytes=4 << 20)),
                            repo(weights=1, onnx=bert_onnx(weight_bytes=4 << 20, opset=17),
                                 openvino=b'<net name="v2"/>')),
    # 300,000 nodes (12 MB) before the graph's inputs: past the 8 MiB window
    "onnx_beyond_cap": (repo(), repo(weights=1, onnx=bert_onnx(extra_nodes=300_000), openvino=b'<net name="v2"/>')),
    "onnx_huge_prefix": (repo(), repo(weights=1, onnx=huge_length_prefix(), openvino=b'<net name="v2"/>')),
    "openvino_io": (repo(openvino=openvino_ir()),
                    repo(weights=1, onnx=ONNX_RETRAINED, openvino=openvino_ir(("input_ids", "attention_mask"), 768))),
    "openvino_laughs": (repo(openvino=openvino_ir()), repo(weights=1, onnx=ONNX_RETRAINED, openvino=BILLION_LAUGHS)),
    "openvino_deep": (repo(openvino=openvino_ir()), repo(weights=1, onnx=ONNX_RETRAINED, openvino=DEEP)),
    # the IR's weights blob beside it: raw bytes, no read problem; a pickle under that name is still one
    "openvino_blob": (repo(openvino=openvino_ir(), **{"openvino/openvino_model.bin": IR_WEIGHTS}),
                      repo(weights=1, onnx=ONNX_RETRAINED, openvino=openvino_ir(hidden=768),
                           **{"openvino/openvino_model.bin": IR_WEIGHTS[::-1]})),
    "openvino_blob_pickle": (repo(openvino=openvino_ir(), **{"openvino/openvino_model.bin": IR_WEIGHTS}),
                             repo(weights=1, onnx=ONNX_RETRAINED, openvino=openvino_ir(hidden=768),
                                  **{"openvino/openvino_model.bin": dangerous_pickle()})),
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


def test_a_changed_opset_and_ir_version_are_high(results):
    assert triples(results["onnx_opset"]) == [
        ("exports.onnx_ir_version_changed", "high", "onnx/model.onnx: IR version 8 → 9"),
        ("exports.onnx_opset_changed", "high", "onnx/model.onnx: opset ai.onnx 14 → 17"),
    ]


def test_changed_graph_inputs_and_outputs_name_each_tensor(results):
    assert triples(results["onnx_io"]) == [
        ("exports.onnx_inputs_changed", "high",
         "onnx/model.onnx: input token_type_ids int64[batch_size, sequence_length] removed"),
        ("exports.onnx_outputs_changed", "high",
         "onnx/model.onnx: output last_hidden_state float32[batch_size, sequence_length, 8] removed; "
         "output sentence_embedding float32[batch_size, sequence_length, 16] added"),
    ]


def test_weights_inside_the_model_are_jumped_over(results):
    assert triples(results["onnx_weights_inside"]) == [
        ("exports.onnx_opset_changed", "high", "onnx/model.onnx: opset ai.onnx 14 → 17")]


def test_a_graph_beyond_the_read_cap_is_reported_not_read(results):
    [(code, severity, summary)] = triples(results["onnx_beyond_cap"])
    assert (code, severity) == ("exports.onnx_not_read", "low")
    assert summary.startswith("onnx/model.onnx changed and was not compared: the graph's inputs and outputs lie "
                              "beyond the read cap (8,388,608 bytes in 512 requests; ")


def test_a_huge_length_prefix_is_malformed_at_once(results):
    assert triples(results["onnx_huge_prefix"]) == [
        ("exports.onnx_malformed", "critical",
         "onnx/model.onnx is not a readable ONNX model: field 7: length 1,152,921,504,606,846,976 runs past the end "
         "of its message (16 bytes left at byte 12); ONNX Runtime cannot load it")]


def test_openvino_parameters_and_results_that_changed(results):
    assert triples(results["openvino_io"]) == [
        ("exports.openvino_inputs_changed", "high",
         "openvino/openvino_model.xml: input token_type_ids i64[?, ?] removed"),
        ("exports.openvino_outputs_changed", "high",
         "openvino/openvino_model.xml: output last_hidden_state fp32[-1, -1, 384] → last_hidden_state fp32[-1, -1, 768]"),
    ]


def test_an_ir_with_entities_or_deep_nesting_is_malformed_not_expanded(results):
    [(code, severity, summary)] = triples(results["openvino_laughs"])
    assert (code, severity) == ("exports.openvino_malformed", "critical")
    assert summary.startswith("openvino/openvino_model.xml is not a readable OpenVINO IR: not well-formed XML: "
                              "DTDForbidden: DTDForbidden(")
    assert triples(results["openvino_deep"]) == [
        ("exports.openvino_malformed", "critical", "openvino/openvino_model.xml is not a readable OpenVINO IR: "
         "elements nested deeper than 32; OpenVINO cannot load it")]


def test_the_ir_weights_blob_is_no_unreadable_pickle_but_a_pickle_there_is_still_caught(results):
    # no weights.pickle_* and no read problem (analyse_scenarios asserts sources.problems == [])
    assert [(f.code, f.path) for f in results["openvino_blob"] if f.category in ("weights", "upstream")] == [
        ("weights.file_replaced", "model.safetensors"), ("weights.file_replaced", "onnx/model.onnx"),
        ("weights.file_replaced", "openvino/openvino_model.bin"), ("weights.values_changed", "model.safetensors")]
    dangerous = [f for f in results["openvino_blob_pickle"] if f.code == "weights.pickle_dangerous_import"]
    assert [(f.severity.value, f.summary) for f in dangerous] == [
        ("critical", "pickle-based file replaced: openvino/openvino_model.bin would import posix.system when loaded")]


def test_a_bin_without_its_ir_is_still_scanned_as_a_pickle():
    from tracker.core.findings.weights import pickle_kind

    listing = {"openvino/openvino_model.xml", "openvino/openvino_model.bin", "pytorch_model.bin",
               "openvino_model.bin"}
    assert pickle_kind("openvino/openvino_model.bin", has_file=listing.__contains__) == "content"
    assert pickle_kind("openvino_model.bin", has_file=listing.__contains__) == "pickle"  # no openvino_model.xml
    assert pickle_kind("pytorch_model.bin", has_file=listing.__contains__) == "pickle"
    assert pickle_kind("openvino/openvino_model.bin") == "pickle"  # without the listing, as strict as before
