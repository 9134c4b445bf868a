"""Memory, fits and cost: the rules of the reference page, as arithmetic.

All sizes are bytes; a card's GB is 1e9 bytes.  The constants below are the
page's stated rules; the activation accounting (in ``architectures``) is the
one that reproduces all fifteen cells of its card table for e5-large together
with its 11.2 GB and 1.69 GB:

- full fine-tune: ``1.2 × 16`` bytes per parameter (fp32 weights, grads and
  two AdamW moments, +20 % allocator/fragmentation) plus activations;
- LoRA: the frozen base in bf16 (2 bytes per parameter) plus the adapters at
  the same ``1.2 × 16`` bytes per trainable parameter, plus the same activations
  (with the adapters at plain 16 bytes the page's H200/LoRA cell is 282, not 281);
- activations per sample: ``seq_len × act_bytes_per_token`` (+ fp32 logits for
  language-model heads); for a post-norm BERT block with dropout that is
  ``34·h`` bytes per token per layer (Korthikanti et al. 2022 without the
  attention-score term, since SDPA stores none) plus ``3·h`` for the embedding
  LayerNorm output and its dropout mask;
- a card holds what fits in ``GB·1e9 / 1.15`` (1.15x headroom); "borderline"
  when batch 1 fits that but ``1.43 ×`` the batch-1 estimate does not;
- serving: bf16 weights plus the K and V of ``seq_len`` tokens per sequence
  in every caching layer (sliding-window layers cache at most their window).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tracker.core.estimate.architectures import BF16, Arch
from tracker.core.estimate.cards import CARDS, Card

FULL_BYTES_PER_PARAM = 1.2 * 16  # fp32 weight + grad + AdamW m and v, +20 %
LORA_BASE_BYTES_PER_PARAM = 2  # frozen base in bf16
HEADROOM = 1.15
CONSERVATIVE_PEAK = 1.43  # at or above the measured peak on 95 % of held-out runs
DEFAULT_SEQ_LEN = 2048

# Cost: the page's scenario.
COST_EPOCHS = 10
COST_BATCH = 32
COST_SAMPLES = 50_000
FULL_FLOPS_PER_PARAM_TOKEN = 6  # forward 2 + backward 4
LORA_FLOPS_PER_PARAM_TOKEN = 4  # forward 2 + input gradients 2; no weight gradients for the frozen base


def default_seq_len(context: int | None) -> int:
    """2048, or the model's context when shorter (514 for e5-large)."""
    return min(DEFAULT_SEQ_LEN, context) if context else DEFAULT_SEQ_LEN


def adapter_params(arch: Arch, rank: int) -> int:
    """LoRA rank-r A and B matrices on every linear layer but the head."""
    return sum(rank * (fan_in + fan_out) * count for fan_in, fan_out, count in arch.lora_linears)


def activation_bytes(arch: Arch, seq_len: int) -> int:
    """What one sample keeps for the backward pass at ``seq_len`` tokens."""
    return seq_len * (arch.act_bytes_per_token + arch.logit_bytes_per_token)


def full_static_bytes(arch: Arch) -> float:
    return FULL_BYTES_PER_PARAM * arch.params


def lora_static_bytes(arch: Arch, rank: int) -> float:
    return LORA_BASE_BYTES_PER_PARAM * arch.params + FULL_BYTES_PER_PARAM * adapter_params(arch, rank)


def kv_bytes_per_sequence(arch: Arch, seq_len: int) -> int:
    """K and V in bf16 for ``seq_len`` tokens over every caching layer."""
    return sum(2 * BF16 * width * (min(seq_len, window) if window else seq_len) for width, window in arch.kv_layers)


def usable_bytes(card: Card) -> float:
    return card.bytes / HEADROOM


def max_batch(static: float, per_sample: float, card: Card) -> int:
    """Largest batch with ``static + b·per_sample`` within the card; 0 if none."""
    room = usable_bytes(card) - static
    if per_sample <= 0 or room < per_sample:
        return 0
    return int(math.floor(room / per_sample))


def borderline(batch1: float, card: Card) -> bool:
    """Holds batch 1 on the estimate but not on the conservative peak."""
    return batch1 <= usable_bytes(card) < CONSERVATIVE_PEAK * batch1


@dataclass(frozen=True)
class CardFit:
    card: str
    gb: int
    full_batch: int
    full_borderline: bool
    lora_batch: int
    lora_borderline: bool
    serve_batch: int
    cost_usd: float | None
    cost_mode: str | None  # "full" | "lora" | None when neither fits

    def to_json(self) -> dict[str, Any]:
        return {
            "card": self.card, "gb": self.gb, "full_batch": self.full_batch, "full_borderline": self.full_borderline,
            "lora_batch": self.lora_batch, "lora_borderline": self.lora_borderline, "serve_batch": self.serve_batch,
            "cost_usd": self.cost_usd, "cost_mode": self.cost_mode,
        }


def training_cost(arch: Arch, card: Card, seq_len: int, *, mode: str, micro_batch: int, rank: int) -> float:
    """Roofline dollars for the page's scenario (10 epochs, batch 32, 50,000 samples).

    Each optimizer step takes the longer of its compute time at peak bf16 and
    its memory traffic at full bandwidth.  Compute: ``6·N·tokens`` (full) or
    ``4·N·tokens`` (LoRA: no weight gradients), N the active parameters.
    Traffic per micro-batch: the weights read forward and backward in bf16
    (4 bytes/param) and the activations written and read back; per step, for a
    full fine-tune, the fp32 weights, grads and AdamW moments read and written
    once (32 bytes/param), for LoRA the same for the adapters only.  A batch of
    32 that does not fit runs as gradient accumulation over ``micro_batch``.
    It is a floor (no kernel inefficiency), priced at the card's list rate.
    """
    steps = COST_EPOCHS * math.ceil(COST_SAMPLES / COST_BATCH)
    tokens_per_step = COST_BATCH * seq_len
    flops_per_param = FULL_FLOPS_PER_PARAM_TOKEN if mode == "full" else LORA_FLOPS_PER_PARAM_TOKEN
    flops = flops_per_param * arch.active_params * tokens_per_step
    micro = min(COST_BATCH, micro_batch)
    n_micro = math.ceil(COST_BATCH / micro)
    traffic = n_micro * 2 * BF16 * arch.params + 2 * COST_BATCH * activation_bytes(arch, seq_len)
    traffic += 32 * (arch.params if mode == "full" else adapter_params(arch, rank))
    step_s = max(flops / (card.peak_tflops_bf16 * 1e12), traffic / (card.bandwidth_gb_s * 1e9))
    return round(steps * step_s / 3600 * card.usd_per_hour, 2)


def fits(arch: Arch, seq_len: int, rank: int) -> tuple[CardFit, ...]:
    """The card table: batches for full fine-tune, LoRA and serving, and the cost."""
    act = activation_bytes(arch, seq_len)
    full_s, lora_s = full_static_bytes(arch), lora_static_bytes(arch, rank)
    serve_s, kv = BF16 * arch.params, kv_bytes_per_sequence(arch, seq_len)
    out = []
    for card in CARDS:
        fb, lb = max_batch(full_s, act, card), max_batch(lora_s, act, card)
        if fb:
            mode, micro = "full", fb
        elif lb:
            mode, micro = "lora", lb
        else:
            mode, micro = None, 0
        cost = training_cost(arch, card, seq_len, mode=mode, micro_batch=micro, rank=rank) if mode else None
        out.append(CardFit(
            card=card.name, gb=card.gb,
            full_batch=fb, full_borderline=bool(fb) and borderline(full_s + act, card),
            lora_batch=lb, lora_borderline=bool(lb) and borderline(lora_s + act, card),
            serve_batch=max_batch(serve_s, kv, card) if kv else 0,
            cost_usd=cost, cost_mode=mode,
        ))
    return tuple(out)
