"""ONNX models as optimum exports them, built with the onnx package (real serialisation), and hostile variants."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BATCH, SEQ = "batch_size", "sequence_length"


def bert_onnx(*, opset: int = 14, ir_version: int = 8, inputs: tuple[str, ...] = ("input_ids", "attention_mask",
              "token_type_ids"), hidden: int = 8, output: str = "last_hidden_state", weight_bytes: int = 0,
              extra_nodes: int = 0) -> bytes:
    """A BERT-encoder-shaped graph: int64 [batch, seq] inputs, one float output, a word-embedding initializer.

    ``weight_bytes`` makes the embedding that large (the weights sit inside the file, before the
    graph's inputs, as in an export without external data); ``extra_nodes`` pads the node list.
    """
    rows = max(1, weight_bytes // (4 * hidden))
    embedding = numpy_helper.from_array(np.zeros((rows, hidden), dtype=np.float32), "embeddings.word_embeddings.weight")
    nodes = [helper.make_node("Gather", ["embeddings.word_embeddings.weight", "input_ids"], ["embedded"], name="gather"),
             helper.make_node("Identity", ["embedded"], [output], name="out")]
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info(name, TensorProto.INT64, [BATCH, SEQ]) for name in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, [BATCH, SEQ, hidden])],
        initializer=[embedding],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="pytorch",
                              producer_version="2.1.0")
    model.ir_version = ir_version
    if extra_nodes:
        pad = helper.make_node("Identity", ["embedded"], ["embedded_copy"], name="pad").SerializeToString()
        padding = (b"\x0a" + _varint(len(pad)) + pad) * extra_nodes  # GraphProto.node, field 1
        head = onnx.ModelProto()
        head.CopyFrom(model)
        head.ClearField("graph")
        head.ClearField("opset_import")
        graph_bytes = padding + model.graph.SerializeToString()
        opsets = b"".join(b"\x42" + _varint(len(o)) + o for o in (op.SerializeToString() for op in model.opset_import))
        return head.SerializeToString() + b"\x3a" + _varint(len(graph_bytes)) + graph_bytes + opsets  # fields 1-6, 7, 8
    return model.SerializeToString()


def huge_length_prefix() -> bytes:
    """ir_version 8, then a graph field whose length prefix says 2^60 bytes follow."""
    return b"\x08\x08" + b"\x3a" + _varint(1 << 60) + b"\x0a\x00" * 8


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


