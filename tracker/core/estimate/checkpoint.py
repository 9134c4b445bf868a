"""Checkpoint-side counts: scalars in safetensors headers, and why they may differ.

Everything here works on headers already parsed (the Hub adapter range-reads
them); nothing is downloaded or opened.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tracker.core.estimate.architectures import Arch

_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|layer|h|blocks|block)\.(\d+)\.")


# Integer tensors in a checkpoint are buffers (``embeddings.position_ids``, int64
# [1, 512] in all-MiniLM-L6-v2's file), not parameters; counting them would make
# every such checkpoint "disagree" with its graph by a meaningless 512.
# (Packed-integer quantised weights are therefore not counted either.)
PARAM_DTYPES = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4"})

MAX_TENSOR_DIMS = 16  # real tensors have at most 5 or 6
MAX_TENSOR_DIM = 1 << 48  # elements along one axis; the largest real embedding has ~2^28


class ImplausibleHeader(ValueError):
    """A safetensors header whose shapes cannot be a real tensor's (a crafted file)."""


def tensor_shape(name: str, info: Mapping[str, Any]) -> tuple[int, ...]:
    """The shape of one header entry, checked: at most 16 dims, each an integer from 0 to 2^48.

    A header is written by the repo's owner; without the check, a shape of a million
    4,000-digit numbers makes ``math.prod`` run for hours.
    """
    shape = info.get("shape", ())
    if not isinstance(shape, (list, tuple)) or len(shape) > MAX_TENSOR_DIMS or not all(
        isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_TENSOR_DIM for d in shape
    ):
        raise ImplausibleHeader(f"tensor {name[:100]!r} has an implausible shape")
    return tuple(shape)


# Persistent buffers checkpoints store in floating point beside the parameters: transformers
# registers them with register_buffer, so model.parameters() (and our graph count) leaves them out.
BUFFER_NAMES = frozenset({"position_ids", "token_type_ids", "inv_freq", "final_logits_bias",
                          "e_score_correction_bias", "masked_bias"})


def is_buffer(name: str, dtype: str) -> bool:
    """Whether a checkpoint tensor is a buffer, not a parameter: an integer tensor, or a known buffer name."""
    return str(dtype).upper() not in PARAM_DTYPES or name.rsplit(".", 1)[-1] in BUFFER_NAMES


def count_tensors(tensors: Iterable[tuple[str, str, Sequence[int]]]) -> tuple[int, dict[str, int]]:
    """``(parameters, {buffer name: elements})`` over ``(name, dtype, shape)`` triples.

    The one count of a checkpoint's parameters: the estimator and the weights findings
    both use it, so they agree; buffers are named by their last name component."""
    params = 0
    buffers: dict[str, int] = {}
    for name, dtype, shape in tensors:
        n = math.prod(int(d) for d in shape)
        if is_buffer(name, dtype):
            leaf = name.rsplit(".", 1)[-1]
            buffers[leaf] = buffers.get(leaf, 0) + n
        else:
            params += n
    return params, buffers


def _triples(headers: Mapping[str, Mapping[str, Any]]) -> Iterator[tuple[str, str, Sequence[int]]]:
    for header in headers.values():
        for name, info in header.items():
            if name != "__metadata__" and isinstance(info, Mapping):
                yield name, str(info.get("dtype", "F32")), tensor_shape(name, info)


def checkpoint_params(headers: Mapping[str, Mapping[str, Any]]) -> int:
    """Sum of element counts over the parameter tensors of every header.

    ``headers`` maps a file name (one per shard) to its parsed JSON header;
    ``__metadata__`` is skipped, and so are buffers (see :func:`is_buffer`).
    Raises :class:`ImplausibleHeader` for a shape no real tensor has."""
    return count_tensors(_triples(headers))[0]


def checkpoint_buffers(headers: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The buffers the checkpoint stores, by name: what :func:`checkpoint_params` leaves out."""
    return count_tensors(_triples(headers))[1]


def _tensors(headers: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[int, ...]]:
    out = {}
    for header in headers.values():
        for name, info in header.items():
            if name != "__metadata__" and isinstance(info, Mapping):
                out[name] = tensor_shape(name, info)
    return out


def checkpoint_layers(headers: Mapping[str, Mapping[str, Any]]) -> int | None:
    """Number of blocks the weights hold (highest ``layers.N.`` index + 1), if any.

    Encoder-decoders number each stack from 0, so the highest index is the
    deeper stack's."""
    seen = [int(m.group(1)) for name in _tensors(headers) if (m := _LAYER_RE.search(name))]
    return max(seen) + 1 if seen else None


def embedding_rows(headers: Mapping[str, Mapping[str, Any]]) -> int | None:
    """Rows of the input token embedding, found by its usual names."""
    for name, shape in _tensors(headers).items():
        if re.search(r"(word_embeddings|embed_tokens|wte|embed_in|shared)\.weight$", name) and len(shape) == 2:
            return shape[0]
    return None


def has_lm_head(headers: Mapping[str, Mapping[str, Any]]) -> bool:
    return any(re.search(r"(^|\.)(lm_head|embed_out)\.weight$", n) for n in _tensors(headers))


def explain_mismatch(arch: Arch, ckpt: int, headers: Mapping[str, Mapping[str, Any]] | None = None) -> str | None:
    """Why the checkpoint's count differs from the graph's, in one sentence; None if equal.

    Tries the causes seen in practice, most specific first: a layer count
    differing from the config's, a tied output embedding stored a second time
    (or an untied one missing), a pooler present or absent, an embedding with a
    different number of rows than ``vocab_size``."""
    diff = ckpt - arch.params
    if diff == 0:
        return None
    h, V = arch.hidden, arch.vocab
    if headers:
        n = checkpoint_layers(headers)
        if n is not None and n != arch.layers and not arch.encoder_decoder:
            return f"config says {arch.layers} layers, weights hold {n}"
        rows = embedding_rows(headers)
        if rows is not None and rows != V:
            return f"config says vocab_size {V}, the weights' embedding has {rows} rows"
    if arch.lm_head and arch.tied and diff == V * h:
        return f"the weights store the output embedding although config ties it to the input one (+{V * h:,} = {V} × {h})"
    if arch.lm_head and not arch.tied and diff == -V * h:
        return f"config unties the output embedding but the weights hold none (-{V * h:,})"
    if diff == -(h * h + h):
        return f"the weights hold no pooler, which the graph has (-{h * h + h:,})"
    if diff == h * h + h:
        return f"the weights hold a pooler the graph does not have (+{h * h + h:,})"
    if arch.per_layer_params and diff % arch.per_layer_params == 0 and not arch.encoder_decoder:
        k = diff // arch.per_layer_params
        return f"config says {arch.layers} layers, weights hold {arch.layers + k}"
    if diff % h == 0 and abs(diff // h) < V:
        return f"the weights' embedding looks {diff // h:+d} rows off vocab_size {V} ({diff:+,} = rows × {h})"
    return f"the weights hold {diff:+,} parameters ({diff / arch.params:+.2%}) against the graph; cause not identified"


def is_tied_copy(arch: Arch, ckpt: int) -> bool:
    """The only benign mismatch: a tied output embedding saved a second time."""
    return arch.lm_head and arch.tied and ckpt - arch.params == arch.vocab * arch.hidden
