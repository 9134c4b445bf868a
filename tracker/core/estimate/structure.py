"""The layer table: one row per node, output shape at the training length.

For a post-norm BERT-style encoder the rows are exactly the reference page's
(Input, Embedding, Positional_Embedding, then per block Attention_i, Add_i,
LayerNorm_i_1, FFN_i, and Output: 4·L + 4 rows, 100 for 24 layers).  Shapes
are written as the page writes them, ``1 × 514 × 1024``.  Other families get
the analogous table in their own vocabulary (pre-norm, RMSNorm, grouped-query
or sliding-window attention, mixture of experts, LM head).

A stack deeper than :data:`MAX_LISTED_LAYERS` blocks is summarised: its first
and last :data:`EDGE_LAYERS` blocks in full and one row, ``× N blocks``, for
those between, so the table (stored with every estimate) stays small whatever
the config claims.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracker.core.estimate.architectures import Arch

MAX_LISTED_LAYERS = 128
"""Blocks listed one by one (every published model so far: Llama 3.1 405B has 126)."""
EDGE_LAYERS = 2
"""Blocks shown at each end of a summarised stack."""


@dataclass(frozen=True)
class Row:
    index: int
    name: str
    type: str
    shape: str

    def to_json(self) -> dict[str, int | str]:
        return {"index": self.index, "name": self.name, "type": self.type, "shape": self.shape}


def _shape(*dims: int) -> str:
    return " × ".join(str(d) for d in (1, *dims))


def _attention_type(arch: Arch, layer: int, sliding: frozenset[int]) -> str:
    if arch.kv_heads == 1 and arch.heads > 1:
        kind = "Multi-Query Attention"
    elif arch.kv_heads < arch.heads:
        kind = "Grouped-Query Attention"
    else:
        kind = "Multi-Head Attention"
    if layer in sliding:
        window = arch.kv_layers[layer][1]
        return f"Sliding-Window {kind} ({window})"
    return kind


_POSITIONAL = {"learned": "Learned Pos Embed", "rotary": "Rotary Pos Embed", "alibi": "ALiBi Bias", "relative": "Relative Pos Bias"}


def _listed(count: int) -> list[int | tuple[int, int]]:
    """Block numbers (from 1) to list, with ``(first, last)`` for a summarised run between."""
    if count <= MAX_LISTED_LAYERS:
        return list(range(1, count + 1))
    head = list(range(1, EDGE_LAYERS + 1))
    tail = list(range(count - EDGE_LAYERS + 1, count + 1))
    return [*head, (EDGE_LAYERS + 1, count - EDGE_LAYERS), *tail]


def _skipped(prefix: str, run: tuple[int, int], hs: str) -> tuple[str, str, str]:
    first, last = run
    return (f"{prefix}{first}-{last}", f"× {last - first + 1} blocks like those around them", hs)


def structure(arch: Arch, seq_len: int) -> tuple[Row, ...]:
    """Rows for ``arch`` at ``seq_len`` tokens, indices from 1."""
    h, s = arch.hidden, seq_len
    rows: list[tuple[str, str, str]] = [("Input", "Input", _shape(s)), ("Embedding", "Embedding", _shape(s, h))]
    rows.append(("Positional_Embedding", _POSITIONAL[arch.positional], _shape(s, h)))
    hs = _shape(s, h)
    sliding = frozenset(arch.sliding_layers)
    if arch.post_norm:
        for i in _listed(arch.layers):
            if isinstance(i, tuple):
                rows.append(_skipped("Blocks_", i, hs))
                continue
            rows += [
                (f"Attention_{i}", _attention_type(arch, i - 1, sliding), hs),
                (f"Add_{i}", "Add", hs),
                (f"{arch.norm}_{i}_1", arch.norm, hs),
                (f"FFN_{i}", arch.ffn_kind, hs),
            ]
    else:
        for i in _listed(arch.layers):
            if isinstance(i, tuple):
                rows.append(_skipped("Blocks_", i, hs))
                continue
            rows += [
                (f"{arch.norm}_{i}_1", arch.norm, hs),
                (f"Attention_{i}", _attention_type(arch, i - 1, sliding), hs),
                (f"Add_{i}_1", "Add", hs),
                (f"{arch.norm}_{i}_2", arch.norm, hs),
                (f"FFN_{i}", arch.ffn_kind, hs),
                (f"Add_{i}_2", "Add", hs),
            ]
        if arch.encoder_decoder:
            rows.append(("Encoder_Norm", arch.norm, hs))
            for i in _listed(arch.decoder_layers):
                if isinstance(i, tuple):
                    rows.append(_skipped("Decoder_Blocks_", i, hs))
                    continue
                rows += [
                    (f"Decoder_Attention_{i}", "Causal Multi-Head Attention", hs),
                    (f"Decoder_Cross_Attention_{i}", "Cross Attention", hs),
                    (f"Decoder_FFN_{i}", arch.ffn_kind, hs),
                ]
        rows.append(("Final_Norm", arch.norm, hs))
    if arch.lm_head:
        rows.append(("LM_Head", "Linear", _shape(s, arch.vocab)))
        rows.append(("Output", "Output", _shape(s, arch.vocab)))
    else:
        rows.append(("Output", "Output", hs))
    return tuple(Row(i, name, typ, shape) for i, (name, typ, shape) in enumerate(rows, start=1))
