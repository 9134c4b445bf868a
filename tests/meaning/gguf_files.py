"""GGUF files for the tests, written with the ``gguf`` package's own GGUFWriter.

Tensor data is never written: the header is written by GGUFWriter, and the file is
then extended with ``os.truncate`` to the size the tensor infos declare, so a
"multi-GB" GGUF is a sparse file of a few kB on disk whose header is real.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter, LlamaFileType

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
"""meta-llama/Meta-Llama-3-8B-Instruct's template after its generation-prompt fix (incident 02)."""
LLAMA3_TEMPLATE_BEFORE_FIX = LLAMA3_TEMPLATE.replace(
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}", ""
)
"""The same template before the fix: no assistant header with add_generation_prompt."""

TOKENS = ["<unk>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
          "<|end_header_id|>", "a", "b", "ab"]


def nbytes(shape: Sequence[int], qtype: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    return int(np.prod(shape)) // block * size


def llama_tensors(hidden: int, layers: int, vocab: int, ffn: int) -> dict[str, tuple[int, ...]]:
    """Llama's tensor names and numpy-order shapes in llama.cpp's naming."""
    out: dict[str, tuple[int, ...]] = {"token_embd.weight": (vocab, hidden), "output_norm.weight": (hidden,),
                                       "output.weight": (vocab, hidden)}
    for i in range(layers):
        out |= {f"blk.{i}.attn_norm.weight": (hidden,), f"blk.{i}.attn_q.weight": (hidden, hidden),
                f"blk.{i}.attn_k.weight": (hidden, hidden), f"blk.{i}.attn_v.weight": (hidden, hidden),
                f"blk.{i}.attn_output.weight": (hidden, hidden), f"blk.{i}.ffn_norm.weight": (hidden,),
                f"blk.{i}.ffn_gate.weight": (ffn, hidden), f"blk.{i}.ffn_up.weight": (ffn, hidden),
                f"blk.{i}.ffn_down.weight": (hidden, ffn)}
    return out


def write_gguf(
    path: Path,
    *,
    template: str | None = LLAMA3_TEMPLATE,
    tokens: Sequence[str] = TOKENS,
    bos: int = 1,
    eos: int = 3,
    file_type: LlamaFileType = LlamaFileType.MOSTLY_Q4_K_M,
    quant: Mapping[str, GGMLQuantizationType] | None = None,
    tensors: Mapping[str, tuple[int, ...]] | None = None,
    hidden: int = 256,
    layers: int = 2,
    ffn: int = 512,
    context: int = 8192,
) -> Path:
    """A Llama GGUF header with ``tensors`` (default: a small Llama) and a sparse data section.

    Weight matrices are stored as ``quant`` says per tensor name (default Q4_K, Q6_K for
    ``output.weight``, as llama.cpp's Q4_K_M does), 1-D norms as F32.
    """
    tensors = dict(tensors or llama_tensors(hidden, layers, len(tokens), ffn))
    writer = GGUFWriter(path, arch="llama")
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(hidden // 64)
    writer.add_head_count_kv(hidden // 64)
    writer.add_vocab_size(len(tokens))
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(file_type)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(list(tokens))
    writer.add_token_merges(["a b"])
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    if template is not None:
        writer.add_chat_template(template)
    total = 0
    for name, shape in tensors.items():
        if len(shape) == 1:
            qtype = GGMLQuantizationType.F32
        else:
            default = GGMLQuantizationType.Q6_K if name == "output.weight" else GGMLQuantizationType.Q4_K
            qtype = (quant or {}).get(name, default)
        size = nbytes(shape, qtype)
        writer.add_tensor_info(name, shape, np.dtype(np.float32), size, raw_dtype=qtype)
        total += GGUFWriter.ggml_pad(size, writer.data_alignment)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    header = path.stat().st_size
    os.truncate(path, GGUFWriter.ggml_pad(header, writer.data_alignment) + total)
    return path
