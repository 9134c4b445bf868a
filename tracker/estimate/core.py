"""The :class:`Estimate` result and the :func:`estimate` entry point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracker.estimate import memory
from tracker.estimate.architectures import Arch, Unsupported, build
from tracker.estimate.checkpoint import checkpoint_params as _count_headers
from tracker.estimate.checkpoint import explain_mismatch, is_tied_copy
from tracker.estimate.memory import CardFit
from tracker.estimate.structure import Row, structure
from tracker.estimate.verifier import VerifierFinding, verify


@dataclass(frozen=True)
class Estimate:
    """One estimate.  ``supported=False`` carries only ``model_type`` and ``reason``:
    an unknown family is said so, never guessed at."""

    model_type: str
    supported: bool
    reason: str | None = None
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

    @property
    def full_finetune_gb(self) -> float | None:
        return None if self.full_finetune_bytes is None else self.full_finetune_bytes / 1e9

    @property
    def lora_gb(self) -> float | None:
        return None if self.lora_bytes is None else self.lora_bytes / 1e9

    def card(self, name: str) -> CardFit:
        return next(c for c in self.cards if c.card == name)

    def to_json(self) -> dict[str, Any]:
        """The issue's JSON shape (plus a few extra keys); a batch that does not fit is 0."""
        r = lambda x: None if x is None else round(x, 4)  # noqa: E731
        return {
            "model_type": self.model_type,
            "supported": self.supported,
            "reason": self.reason,
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
        }


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
    embedding rows."""
    arch = build(config)
    if isinstance(arch, Unsupported):
        return Estimate(model_type=arch.model_type, supported=False, reason=f"unsupported: {arch.model_type} ({arch.reason})")
    if checkpoint_params is None and checkpoint_headers:
        checkpoint_params = _count_headers(checkpoint_headers)
    s = int(seq_len) if seq_len else memory.default_seq_len(arch.context)
    if s <= 0 or lora_rank <= 0:
        raise ValueError("seq_len and lora_rank must be positive")
    return _estimate(arch, config, s, lora_rank, checkpoint_params, checkpoint_headers)


def _estimate(
    arch: Arch, config: Mapping[str, Any], s: int, rank: int, ckpt: int | None, headers: Mapping[str, Mapping[str, Any]] | None
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
    )
