"""Turn two estimates of the same repo (old revision, new revision) into findings.

Severities come from the rules table (``findings/severity/estimate.toml``), never
from branches here: each distinct situation has its own code.
"""

from __future__ import annotations

from tracker.core.estimate.core import Estimate
from tracker.core.estimate.memory import CardFit
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding

CATEGORY = "estimate"
SERVE_CHANGE = 0.10  # serving batch moving by more than this fraction is reported

_MODES = (("full", "full fine-tune"), ("lora", "LoRA"), ("serve", "serving"))


def _batch(fit: CardFit, mode: str) -> int:
    batch: int = getattr(fit, f"{mode}_batch")
    return batch


def _say(b: int) -> str:
    return f"batch {b}" if b else "does not fit"


def compare_estimates(old: Estimate | None, new: Estimate, rules: SeverityRules) -> list[Finding]:
    """Findings for what changed from ``old`` to ``new`` (``old`` None: the first revision read).

    On the first revision only facts about ``new`` itself are reported (an
    unsupported family, an implausible config, a graph/checkpoint disagreement); after that, also the
    parameter count, context, fits appearing or vanishing per card and mode,
    and serving batches moving by more than 10 %."""
    out: list[Finding] = []
    f = rules.finding
    if new.implausible:
        if old is None or not old.implausible or old.reason != new.reason:
            out.append(f("estimate.implausible_config", CATEGORY,
                         f"{new.reason}; no estimate (model_type {new.model_type})",
                         before=old.reason if old is not None and old.implausible else None, after=new.reason))
        return out
    if not new.supported:
        if old is None or old.supported or old.implausible:
            out.append(f("estimate.unsupported", CATEGORY, new.reason or f"unsupported: {new.model_type}",
                         before=None if old is None else old.model_type, after=new.model_type))
        return out
    if new.checkpoint_params is not None and new.checkpoint_params != new.params:
        changed = old is None or (old.checkpoint_params, old.params) != (new.checkpoint_params, new.params)
        if changed:
            code = "estimate.checkpoint_tied_copy" if new.checkpoint_tied_copy else "estimate.checkpoint_mismatch"
            out.append(f(code, CATEGORY, f"graph counts {new.params:,} parameters, checkpoint holds {new.checkpoint_params:,}: {new.checkpoint_note}",
                         before=new.params, after=new.checkpoint_params, evidence={"explanation": new.checkpoint_note}))
    if old is None or not old.supported:
        return out
    if old.params != new.params:
        out.append(f("estimate.params_changed", CATEGORY, f"parameters {old.params:,} -> {new.params:,}", before=old.params, after=new.params))
    if old.active_params != new.active_params and old.params == new.params:
        out.append(f("estimate.params_changed", CATEGORY, f"active parameters {old.active_params:,} -> {new.active_params:,}",
                     before=old.active_params, after=new.active_params))
    if old.context != new.context or old.seq_len != new.seq_len:
        out.append(f("estimate.context_changed", CATEGORY, f"context {old.context} -> {new.context} (sized at {old.seq_len} -> {new.seq_len} tokens)",
                     before={"context": old.context, "seq_len": old.seq_len}, after={"context": new.context, "seq_len": new.seq_len}))
    old_cards = {c.card: c for c in old.cards}
    for card in new.cards:
        before = old_cards.get(card.card)
        if before is not None:
            out.extend(_fit_changes(before, card, rules))
    return out


def _fit_changes(before: CardFit, card: CardFit, rules: SeverityRules) -> list[Finding]:
    """Per mode on one card: a fit lost or gained, or a serving batch that moved by more than SERVE_CHANGE."""
    out: list[Finding] = []
    f = rules.finding
    for mode, label in _MODES:
        b0, b1 = _batch(before, mode), _batch(card, mode)
        if b0 and not b1:
            out.append(f("estimate.fit_lost", CATEGORY, f"{label} on {card.card}: {_say(b0)} -> does not fit",
                         path=card.card, before=b0, after=b1, evidence={"mode": mode}))
        elif b1 and not b0:
            out.append(f("estimate.fit_gained", CATEGORY, f"{label} on {card.card}: does not fit -> {_say(b1)}",
                         path=card.card, before=b0, after=b1, evidence={"mode": mode}))
        elif mode == "serve" and b0 and abs(b1 - b0) > SERVE_CHANGE * b0:
            out.append(f("estimate.serve_batch_changed", CATEGORY, f"serving on {card.card}: batch {b0} -> {b1} ({(b1 - b0) / b0:+.0%})",
                         path=card.card, before=b0, after=b1, evidence={"mode": mode}))
    return out
