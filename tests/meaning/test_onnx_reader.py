"""The windowed ONNX reader on real serialised models: what it fetches, and where it stops."""

from __future__ import annotations

import pytest

from tracker.core.findings.onnx_model import OnnxNotRead, read_onnx_model
from tracker.core.findings.protobuf import ProtobufError

from .onnx_files import _varint, bert_onnx, huge_length_prefix


class CountingFile:
    def __init__(self, data: bytes) -> None:
        self.data, self.fetched, self.requests = data, 0, 0

    def read(self, offset: int, length: int) -> bytes:
        self.requests += 1
        self.fetched += length
        return self.data[offset:offset + length]


def test_reads_ir_version_opsets_inputs_and_outputs():
    f = CountingFile(bert_onnx(opset=17, ir_version=9))
    model = read_onnx_model(f.read, len(f.data))
    assert {k: model[k] for k in ("ir_version", "opsets", "inputs", "outputs")} == {
        "ir_version": 9, "opsets": {"ai.onnx": 17},
        "inputs": [{"name": n, "type": "int64", "shape": ["batch_size", "sequence_length"]}
                   for n in ("input_ids", "attention_mask", "token_type_ids")],
        "outputs": [{"name": "last_hidden_state", "type": "float32", "shape": ["batch_size", "sequence_length", 8]}],
    }


def test_weights_before_the_inputs_are_jumped_over_not_fetched():
    f = CountingFile(bert_onnx(weight_bytes=64 << 20))  # 64 MiB initializer inside the graph
    model = read_onnx_model(f.read, len(f.data))
    assert [io["name"] for io in model["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
    assert model["opsets"] == {"ai.onnx": 14}
    assert f.fetched == model["bytes_read"]
    assert f.fetched <= 4 * 4096  # the start, past the initializer, and the opsets after the graph
    assert f.requests == model["requests"] <= 4


def test_a_long_node_list_stops_at_the_byte_cap():
    f = CountingFile(bert_onnx(extra_nodes=20_000))
    with pytest.raises(OnnxNotRead, match=r"lie beyond the read cap \(65,536 bytes in 512 requests; "):
        read_onnx_model(f.read, len(f.data), max_bytes=65_536)
    assert f.fetched <= 65_536


def test_a_field_flood_stops_at_the_field_cap():
    f = CountingFile(bert_onnx(extra_nodes=2_000))
    with pytest.raises(OnnxNotRead, match=r"more than 1,000 fields before the graph's inputs and outputs"):
        read_onnx_model(f.read, len(f.data), max_fields=1_000)


def test_a_huge_length_prefix_fails_before_any_large_read():
    f = CountingFile(huge_length_prefix())
    with pytest.raises(ProtobufError, match=r"field 7: length 1,152,921,504,606,846,976 runs past the end"):
        read_onnx_model(f.read, len(f.data))
    assert f.fetched == len(f.data)


def test_not_an_onnx_model():
    f = CountingFile(b"\x12\x03abc")  # a lone producer_name
    with pytest.raises(ProtobufError, match="no ir_version and no graph: not an ONNX model"):
        read_onnx_model(f.read, len(f.data))


def test_a_long_node_list_within_the_cap_is_read_in_growing_windows():
    f = CountingFile(bert_onnx(extra_nodes=150_000))  # 6.3 MB of nodes before the inputs
    model = read_onnx_model(f.read, len(f.data))
    assert [io["name"] for io in model["outputs"]] == ["last_hidden_state"]
    assert f.requests < 64  # windows double to 256 KiB while the walk goes on; 4 KiB ones would take ~1,500


def test_a_flood_of_17_kib_model_fields_grows_the_window_instead_of_a_request_per_field():
    entry = b"\x0a" + _varint(17400) + b"k" * 17400  # StringStringEntryProto.key
    flood = (b"\x72" + _varint(len(entry)) + entry) * 500  # ModelProto.metadata_props
    f = CountingFile(flood + bert_onnx(opset=17))  # 8.7 MB of fields first: past 512 requests, one each, before
    model = read_onnx_model(f.read, len(f.data))
    assert model["opsets"] == {"ai.onnx": 17}
    assert f.requests == model["requests"] < 48  # short jumps count as reading on, in 256 KiB windows
