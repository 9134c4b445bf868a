"""The :class:`Estimate` result and the :func:`estimate` entry point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.core.bounded import json_safe
from tracker.core.estimate import memory
from tracker.core.estimate.architectures import SUPPORTED_MODEL_TYPES, Arch, Unsupported, build
from tracker.core.estimate.checkpoint import (
    ImplausibleHeader,
    checkpoint_layers,
    explain_mismatch,
    is_tied_copy,
)
from tracker.core.estimate.checkpoint import checkpoint_params as _count_headers
from tracker.core.estimate.memory import CardFit
from tracker.core.estimate.plausible import MAX_CONTEXT, MAX_RANK, implausible
from tracker.core.estimate.structure import Row, structure
from tracker.core.estimate.verifier import VerifierFinding, verify


@dataclass(frozen=True)
class Estimate:
    """One estimate.  ``supported=False`` carries only ``model_type`` and ``reason``:
    an unknown family is said so, never guessed at; ``implausible=True`` says the
    family is known but the config's sizes are not sane (see :mod:`.plausible`)."""

    model_type: str
    supported: bool
    reason: str | None = None
    implausible: bool = False
    architecture: str | None = None
    family: str | None = None
    params: int | None = None
    active_params: int | None = None
    checkpoint_params: int | None = None
    checkpoint_note: str | None = None  # why the checkpoint differs from the graph, None when equal or unread
    checkpoint_tied_copy: bool = False  # the difference is only a tied embedding stored twice
    seq_len: int | None = None
    context: int | None = None
    lora_rank: int | None = None
    lora_params: int | None = None
    full_finetune_bytes: float | None = None  # batch 1
    lora_bytes: float | None = None  # batch 1
    cards: tuple[CardFit, ...] = ()
    structure: tuple[Row, ...] = ()
    verifier: tuple[VerifierFinding, ...] = ()
    components: tuple[tuple[str, int], ...] = ()  # multimodal: text, vision, projector (they add up to params)
    buffers: tuple[tuple[str, int], ...] = ()  # persistent buffers the checkpoint stores, not in params

    @property
    def full_finetune_gb(self) -> float | None:
        return None if self.full_finetune_bytes is None else self.full_finetune_bytes / 1e9

    @property
    def lora_gb(self) -> float | None:
        return None if self.lora_bytes is None else self.lora_bytes / 1e9

    def card(self, name: str) -> CardFit:
        return next(c for c in self.cards if c.card == name)

    def to_json(self) -> dict[str, Any]:
        """The issue's JSON shape (plus a few extra keys); a batch that does not fit is 0. Strict JSON."""
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        safe: dict[str, Any] = json_safe({
            "model_type": self.model_type,
            "supported": self.supported,
            "reason": self.reason,
            "implausible": self.implausible,
            "architecture": self.architecture,
            "params": self.params,
            "active_params": self.active_params,
            "checkpoint_params": self.checkpoint_params,
            "checkpoint_note": self.checkpoint_note,
            "seq_len": self.seq_len,
            "context": self.context,
            "lora_rank": self.lora_rank,
            "lora_params": self.lora_params,
            "full_finetune_gb": r(self.full_finetune_gb),
            "lora_gb": r(self.lora_gb),
            "cards": [c.to_json() for c in self.cards],
            "structure": [row.to_json() for row in self.structure],
            "verifier": [v.to_json() for v in self.verifier],
            "components": dict(self.components),
            "buffers": dict(self.buffers),
        })
        return safe


def estimate(
    config: Mapping[str, Any],
    *,
    seq_len: int | None = None,
    lora_rank: int = 16,
    checkpoint_params: int | None = None,
    checkpoint_headers: Mapping[str, Mapping[str, Any]] | None = None,
) -> Estimate:
    """Estimate ``config`` at ``seq_len`` tokens (default: 2048 or the model's context
    when shorter) with LoRA rank ``lora_rank``.

    ``checkpoint_params`` is the checkpoint's own count when the caller read it;
    ``checkpoint_headers`` (parsed safetensors headers by file name) may be passed
    instead or as well, and then also lets the verifier see layer counts and
    embedding rows.

    Sizes are checked against sane ranges first (:func:`.plausible.implausible`): a config
    claiming 100 M layers, ``1e308`` or ``-4096`` heads is an implausible-config estimate,
    answered at once, never an ``OverflowError`` or gigabytes of per-layer structure.
    ``seq_len`` and ``lora_rank`` out of range are a ``ValueError``."""
    if seq_len is not None and not (isinstance(seq_len, int) and 0 < seq_len <= MAX_CONTEXT):
        raise ValueError(f"seq_len must be an integer from 1 to {MAX_CONTEXT}")
    if not (isinstance(lora_rank, int) and 0 < lora_rank <= MAX_RANK):
        raise ValueError(f"lora_rank must be an integer from 1 to {MAX_RANK}")
    model_type = str(config.get("model_type") or "")
    if model_type in SUPPORTED_MODEL_TYPES:
        why = implausible(config)
        if why is not None:
            return Estimate(model_type=model_type, supported=False, implausible=True,
                            reason=f"implausible config: {why}")
    arch = build(config)
    if isinstance(arch, Unsupported):
        return Estimate(model_type=arch.model_type, supported=False, reason=f"unsupported: {arch.model_type} ({arch.reason})")
    if checkpoint_headers:
        try:
            counted: int | None = _count_headers(checkpoint_headers)
            checkpoint_layers(checkpoint_headers)  # checks every tensor's shape, integer buffers too
        except ImplausibleHeader:
            counted, checkpoint_headers = None, None  # a crafted header says nothing about the checkpoint
        if checkpoint_params is None:
            checkpoint_params = counted
    s = seq_len or memory.default_seq_len(arch.context)
    return _estimate(arch, config, s, lora_rank, ckpt=checkpoint_params, headers=checkpoint_headers)


def _estimate(
    arch: Arch, config: Mapping[str, Any], s: int, rank: int, *, ckpt: int | None,
    headers: Mapping[str, Mapping[str, Any]] | None,
) -> Estimate:
    act = memory.activation_bytes(arch, s)
    return Estimate(
        model_type=arch.model_type,
        supported=True,
        architecture=arch.architecture,
        family=arch.family,
        params=arch.params,
        active_params=arch.active_params,
        checkpoint_params=ckpt,
        checkpoint_note=explain_mismatch(arch, ckpt, headers) if ckpt is not None else None,
        checkpoint_tied_copy=ckpt is not None and is_tied_copy(arch, ckpt),
        seq_len=s,
        context=arch.context,
        lora_rank=rank,
        lora_params=memory.adapter_params(arch, rank),
        full_finetune_bytes=memory.full_static_bytes(arch) + act,
        lora_bytes=memory.lora_static_bytes(arch, rank) + act,
        cards=memory.fits(arch, s, rank),
        structure=structure(arch, s),
        verifier=verify(arch, config, checkpoint_params=ckpt, headers=headers),
        components=arch.components,
        buffers=arch.buffers,
    )
