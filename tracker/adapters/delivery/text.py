"""Readable lines shared by every channel (Slack, feeds): estimator deltas, findings. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracker.core.advisory.record import Advisory
from tracker.core.model import clip_words

# The estimator's per-card keys (tracker.service.estimate_delta: "<card>.<mode>_batch") and how to say them.
_MODES = {"full_batch": "full fine-tune", "lora_batch": "LoRA", "serve_batch": "serving"}
_NAMES = {"params": "parameters", "active_params": "active parameters", "checkpoint_params": "checkpoint parameters",
          "seq_len": "sequence length", "full_finetune_gb": "full fine-tune memory (GB)",
          "lora_gb": "LoRA memory (GB)"}


def _batch(value: Any) -> str:
    if value is None:
        return "not estimated"
    return f"batch {value}" if value else "does not fit"


def _number(value: Any) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return str(value)


def estimate_lines(delta: Mapping[str, Any] | None) -> list[str]:
    """One line per moved figure: "full fine-tune on T4: batch 7 → does not fit"."""
    lines = []
    for key in sorted(delta or {}):
        value = (delta or {})[key]
        before, after = (value.get("before"), value.get("after")) if isinstance(value, Mapping) else (None, value)
        card, _, mode = key.rpartition(".")
        if card and mode in _MODES:
            lines.append(f"{_MODES[mode]} on {card}: {_batch(before)} → {_batch(after)}")
        else:
            lines.append(f"{_NAMES.get(key, key)}: {_number(before)} → {_number(after)}")
    return lines


def findings_of(record: Advisory) -> list[Mapping[str, Any]]:
    """The findings a revision advisory carries (most severe first, as stored); none for repo events."""
    return list(record.specific.findings)


def revision_url(record: Advisory) -> str | None:
    """The commit page of the revision an advisory is about, from its references."""
    revision = record.specific.revision
    for ref in record.references:
        if revision and ref.url.endswith(f"/commit/{revision}"):
            return ref.url
    return None


def advisory_url(record: Advisory, tracker_url: str | None) -> str | None:
    """The advisory's page on this tracker (``[advisories] tracker_url``), or its ADVISORY reference."""
    if tracker_url:
        return f"{tracker_url.rstrip('/')}/advisories/{record.id}"
    for ref in record.references:
        if ref.type == "ADVISORY":
            return ref.url
    return None


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters (at a word boundary), with an ellipsis when cut."""
    return clip_words(text, limit)
