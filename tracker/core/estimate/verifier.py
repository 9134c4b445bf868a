"""Verifier rules over the reconstructed graph (and the checkpoint's header, when read).

Each rule has a stable id and a default severity from :data:`RULE_SEVERITY`
(a table, not branches), and says in its message what a user should check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.core.estimate.architectures import Arch
from tracker.core.estimate.checkpoint import (
    checkpoint_layers,
    embedding_rows,
    explain_mismatch,
    has_lm_head,
    is_tied_copy,
)
from tracker.core.model import Severity

DEEP_LAYERS = 24  # from this depth the residual stream's variance under unscaled init grows ~sqrt(2L) ≥ 7x
DEFAULT_INIT_STD = 0.02
MAX_LISTED_IDS = 5  # out-of-range token ids named one by one per key; the rest are counted

RULE_SEVERITY: Mapping[str, Severity] = {
    "deep-attention-default-init": Severity.LOW,
    "head-dim-divisibility": Severity.HIGH,
    "gqa-head-divisibility": Severity.HIGH,
    "vocab-size-embedding": Severity.HIGH,
    "tied-weights-mismatch": Severity.MODERATE,
    "tied-weights-copy": Severity.INFO,
    "layer-count-mismatch": Severity.CRITICAL,
    "checkpoint-count-mismatch": Severity.HIGH,
}


@dataclass(frozen=True)
class VerifierFinding:
    rule: str
    severity: Severity
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "severity": self.severity.value, "message": self.message}


def _f(rule: str, message: str) -> VerifierFinding:
    return VerifierFinding(rule, RULE_SEVERITY[rule], message)


def verify(
    arch: Arch,
    config: Mapping[str, Any],
    *,
    checkpoint_params: int | None = None,
    headers: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[VerifierFinding, ...]:
    """Every rule that fires, in a stable order."""
    out: list[VerifierFinding] = []
    init = arch.initializer_range
    if arch.layers >= DEEP_LAYERS and init is not None and init == DEFAULT_INIT_STD and not arch.depth_scaled_init:
        out.append(_f(
            "deep-attention-default-init",
            f"{arch.layers} attention blocks initialised with the default N(0, {DEFAULT_INIT_STD}) and no depth "
            f"scaling of the residual projections: fine for fine-tuning the published weights, but re-initialised "
            f"or newly added layers (or training from scratch) should scale them by 1/sqrt(2·{arch.layers})",
        ))
    nh, kv = arch.heads, arch.kv_heads
    explicit_hd = any(config.get(k) is not None for k in ("head_dim", "d_kv"))
    if nh and not explicit_hd and arch.hidden % nh:
        out.append(_f("head-dim-divisibility", f"hidden size {arch.hidden} is not divisible by {nh} attention heads"))
    if nh and kv and nh % kv:
        out.append(_f("gqa-head-divisibility", f"{nh} query heads cannot be grouped over {kv} key/value heads"))
    for key in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"):
        ids = config.get(key)
        outside = [tid for tid in (ids if isinstance(ids, list) else [ids])
                   if isinstance(tid, int) and not isinstance(tid, bool) and not 0 <= tid < arch.vocab]
        for tid in outside[:MAX_LISTED_IDS]:
            out.append(_f("vocab-size-embedding", f"{key} {tid} is outside the embedding's {arch.vocab} rows"))
        if len(outside) > MAX_LISTED_IDS:  # a crafted list of a million ids is one more message, not a million
            out.append(_f("vocab-size-embedding", f"{key}: {len(outside) - MAX_LISTED_IDS} more ids are outside "
                                                  f"the embedding's {arch.vocab} rows"))
    if headers:
        rows = embedding_rows(headers)
        if rows is not None and rows != arch.vocab:
            out.append(_f("vocab-size-embedding", f"config says vocab_size {arch.vocab}, the weights' embedding has {rows} rows"))
        layers = checkpoint_layers(headers)
        if layers is not None and layers != arch.layers and not arch.encoder_decoder:
            out.append(_f("layer-count-mismatch", f"config says {arch.layers} layers, weights hold {layers}"))
        if arch.lm_head and not arch.tied and not has_lm_head(headers):
            out.append(_f("tied-weights-mismatch", "config unties the output embedding but the weights hold no lm_head: it would load randomly initialised"))
    if checkpoint_params is not None and checkpoint_params != arch.params:
        why = explain_mismatch(arch, checkpoint_params, headers)
        if is_tied_copy(arch, checkpoint_params):
            out.append(_f("tied-weights-copy", why or ""))
        elif not any(f.rule in ("layer-count-mismatch", "vocab-size-embedding", "tied-weights-mismatch") for f in out):
            rule = "tied-weights-mismatch" if why and "unties" in why else "checkpoint-count-mismatch"
            out.append(_f(rule, f"graph {arch.params:,} vs checkpoint {checkpoint_params:,}: {why}"))
    return tuple(out)
