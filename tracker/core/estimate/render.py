"""A readable text card for the terminal, laid out like the reference page."""

from __future__ import annotations

from tracker.core.escaping import escape_lines
from tracker.core.estimate.cards import CARDS_BY_NAME
from tracker.core.estimate.core import Estimate
from tracker.core.estimate.memory import COST_BATCH, COST_EPOCHS, COST_SAMPLES, HEADROOM


def _gb(x: float | None) -> str:
    """Three significant figures, as the page writes 11.2 GB and 1.69 GB."""
    if x is None:
        return "?"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def _batch(b: int, borderline: bool) -> str:
    if not b:
        return "does not fit"
    return f"batch {b}, borderline" if borderline else f"batch {b}"


def render_card(est: Estimate) -> str:
    if est.implausible:  # the reason names the config's own values (model_type): escaped, as every line
        return escape_lines([est.reason or "",
                             "No estimate: these sizes cannot be a real model's, and we do not guess."])
    if not est.supported:
        return escape_lines([est.reason or "",
                             "No estimate: this family is not reconstructed, and we do not guess."])
    s, r = est.seq_len, est.lora_rank
    t4 = est.card("T4")
    lines = [
        f"Models / {est.model_type}" + (f"  ({est.architecture})" if est.architecture else ""),
        f"Fine-tuning at batch 1 and {s} tokens takes about {_gb(est.full_finetune_gb)} GB for a full fine-tune"
        f" ({_batch(t4.full_batch, t4.full_borderline)} on one T4 16 GB) and {_gb(est.lora_gb)} GB with LoRA r={r}"
        " on a bf16 base. Estimated from the model's structure, not measured.",
        "",
        "Our count against the checkpoint",
        f"  graph {est.params:,}" + (f" (active per token {est.active_params:,})" if est.active_params != est.params else "")
        + ("   checkpoint " + (f"{est.checkpoint_params:,}" if est.checkpoint_params is not None else "not read")),
    ]
    if est.checkpoint_note:
        lines.append(f"  {est.checkpoint_note}")
    lines += ["", f"Memory: largest batch per card (training {s} tokens/sample, serving {s} tokens/sequence, {HEADROOM}x headroom)"]
    header = f"  {'Card':<14}{'Full fine-tune':<24}{'LoRA r=' + str(r):<24}{'Serve bf16':<14}{'Cost (10 ep.)':>14}"
    lines += [header, "  " + "-" * (len(header) - 2)]
    for c in est.cards:
        cost = f"${c.cost_usd:,.2f} {c.cost_mode}" if c.cost_usd is not None else "-"
        lines.append(
            f"  {CARDS_BY_NAME[c.card].label:<14}{_batch(c.full_batch, c.full_borderline):<24}"
            f"{_batch(c.lora_batch, c.lora_borderline):<24}{('batch ' + str(c.serve_batch)) if c.serve_batch else 'does not fit':<14}{cost:>14}"
        )
    lines.append(f"  Cost: {COST_EPOCHS} epochs of {COST_SAMPLES:,} samples at batch {COST_BATCH} on one card, full "
                 "fine-tune where it fits, else LoRA; a floor from peak bf16 and memory bandwidth at the card's list "
                 "price per hour.")
    lines += ["", f"Structure: {len(est.structure)} nodes, output shapes at {s} tokens"]
    rows = est.structure
    shown = rows if len(rows) <= 16 else (*rows[:8], None, *rows[-4:])
    for row in shown:
        lines.append("  ..." if row is None else f"  {row.index:>4}  {row.name:<26}{row.type:<34}{row.shape}")
    lines += ["", "What the verifier says"]
    lines += [f"  [{v.severity.value}] {v.rule}: {v.message}" for v in est.verifier] or ["  nothing"]
    return escape_lines(lines)
