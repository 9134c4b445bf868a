"""What running both revisions measured, and what it means. Pure: numbers in, a measurement out.

``tracker verify`` (and the daemon, with ``[verify] enabled``) runs the library a repo is loaded with
on two revisions, over the tracker's own sample texts, in a limited subprocess
(``tracker.adapters.verify``). What comes back is raw: a vector per sample and side, a label per
sample, a next-token top-1 and a KL divergence per prompt, token ids per text. This module turns it
into a :class:`Measurement` with a verdict, compares that verdict with the one the analysers inferred
from the files, and draws the per-sample cosines as a histogram. docs/verify.md explains each measure
and threshold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.core.advisory.common import later, one_line
from tracker.core.advisory.record import Advisory

# -- kinds and verdicts -------------------------------------------------------------------------

SENTENCE_TRANSFORMERS = "sentence-transformers"
ENCODER = "transformers-encoder"
CLASSIFIER = "transformers-classifier"
CAUSAL_LM = "transformers-causal-lm"
TOKENIZER = "tokenizer"
KINDS = (SENTENCE_TRANSFORMERS, ENCODER, CLASSIFIER, CAUSAL_LM, TOKENIZER)

REEMBED = "re-embed needed"
STAYS_VALID = "stored vectors stay valid"
NOT_VERIFIABLE = "not verifiable"
OUTPUTS_CHANGED = "outputs changed"
OUTPUTS_UNCHANGED = "outputs unchanged"
LABELS_DISAGREE = "labels disagree"
PREDICTIONS_CHANGED = "predictions changed"
TOKENIZATION_CHANGED = "tokenization changed"

# -- thresholds (docs/verify.md) ----------------------------------------------------------------

# A sample has moved when the cosine between its old and new vector is below this, or when the new
# vector lies further than MOVED_RELATIVE_L2 from the old one (relative to the old one's length).
# A float16 re-save stays near 0.99999 and 1e-3; a real change of pipeline is far below.
MOVED_COSINE = 0.999
MOVED_RELATIVE_L2 = 0.01
# Stored vectors stay valid only if every index-side sample keeps at least this cosine (and the
# dimension is the same): below it, nearest neighbours among old and new vectors start to swap.
VALID_MIN_COSINE = 0.99
# A causal LM whose next-token top-1 agrees on fewer prompts than this, or whose mean KL divergence
# exceeds MAX_MEAN_KL nats, predicts differently.
MIN_TOP1_AGREEMENT = 1.0
MAX_MEAN_KL = 0.01

THRESHOLDS: Mapping[str, float] = {
    "moved_cosine": MOVED_COSINE,
    "moved_relative_l2": MOVED_RELATIVE_L2,
    "valid_min_cosine": VALID_MIN_COSINE,
    "min_top1_agreement": MIN_TOP1_AGREEMENT,
    "max_mean_kl": MAX_MEAN_KL,
}

# Finding codes whose verdict a measurement can confirm or contradict.
INCOMPATIBLE_CODES = frozenset({"embeddings.incompatible"})


# -- measures -----------------------------------------------------------------------------------


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors; 1.0 for two zero vectors, 0.0 when only one is zero."""
    if len(a) != len(b):
        raise ValueError(f"vectors of different lengths ({len(a)} and {len(b)})")
    dot = math.fsum(x * y for x, y in zip(a, b))
    na = math.sqrt(math.fsum(x * x for x in a))
    nb = math.sqrt(math.fsum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return max(-1.0, min(1.0, dot / (na * nb)))


def relative_l2(a: Sequence[float], b: Sequence[float]) -> float:
    """``|b - a| / |a|``: how far the new vector lies from the old one, in units of the old one's length."""
    na = math.sqrt(math.fsum(x * x for x in a))
    diff = math.sqrt(math.fsum((y - x) ** 2 for x, y in zip(a, b)))
    return diff / na if na else (0.0 if diff == 0.0 else math.inf)


@dataclass(frozen=True)
class SideMeasure:
    """One side (index or query) of an embedding model, or the hidden states of an encoder."""

    samples: int
    mean_cosine: float
    min_cosine: float
    max_relative_l2: float
    moved: int
    cosines: tuple[float, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "mean_cosine": _round(self.mean_cosine),
            "min_cosine": _round(self.min_cosine),
            "max_relative_l2": _round(self.max_relative_l2),
            "moved": self.moved,
            "cosines": [_round(c) for c in self.cosines],
        }


def compare_vectors(old: Sequence[Sequence[float]], new: Sequence[Sequence[float]]) -> SideMeasure | None:
    """The side's measures over paired vectors; None when the dimensions differ (nothing to compare)."""
    if len(old) != len(new):
        raise ValueError(f"{len(old)} old vectors and {len(new)} new ones")
    if not old or any(len(a) != len(b) for a, b in zip(old, new)):
        return None
    cosines = tuple(cosine(a, b) for a, b in zip(old, new))
    distances = [relative_l2(a, b) for a, b in zip(old, new)]
    moved = sum(1 for c, d in zip(cosines, distances) if c < MOVED_COSINE or d > MOVED_RELATIVE_L2)
    return SideMeasure(
        samples=len(cosines),
        mean_cosine=math.fsum(cosines) / len(cosines),
        min_cosine=min(cosines),
        max_relative_l2=max(distances),
        moved=moved,
        cosines=cosines,
    )


@dataclass(frozen=True)
class Measurement:
    """What running both revisions showed. ``verdict`` is one of the verdict strings above."""

    kind: str
    verdict: str
    samples: int = 0
    reason: str | None = None  # why it is not verifiable, or what moved, in one line
    sides: Mapping[str, SideMeasure] = field(default_factory=dict)  # "index", "query", "hidden"
    dimension: tuple[int | None, int | None] | None = None  # output dimension, old and new
    figures: Mapping[str, Any] = field(default_factory=dict)  # label agreement, top-1, KL, token ids
    libraries: Mapping[str, str] = field(default_factory=dict)
    device: str = "cpu"

    @property
    def verifiable(self) -> bool:
        return self.verdict != NOT_VERIFIABLE

    @property
    def cosines(self) -> tuple[float, ...]:
        """The per-sample cosines the pages draw: the index side, else the hidden states."""
        for name in ("index", "hidden"):
            if name in self.sides:
                return self.sides[name].cosines
        return ()

    def to_json(self) -> dict[str, Any]:
        """The measurement as ``tracker verify --json`` prints it and ``database_specific.measured`` holds it."""
        data: dict[str, Any] = {"kind": self.kind, "verdict": self.verdict, "verifiable": self.verifiable}
        if self.reason:
            data["reason"] = self.reason
        if not self.verifiable:
            return data
        data["samples"] = self.samples
        data["device"] = self.device
        data.update({name: side.to_json() for name, side in self.sides.items()})
        if self.dimension is not None:
            data["dimension"] = {"before": self.dimension[0], "after": self.dimension[1]}
        data.update({k: _round(v) if isinstance(v, float) else v for k, v in self.figures.items()})
        data["thresholds"] = dict(THRESHOLDS)
        data["libraries"] = dict(self.libraries)
        return data


def not_verifiable(kind: str, reason: str) -> Measurement:
    return Measurement(kind=kind, verdict=NOT_VERIFIABLE, reason=reason)


def _round(value: float) -> float:
    return value if math.isinf(value) or math.isnan(value) else round(value, 6)


# -- per kind -----------------------------------------------------------------------------------


def _vectors(raw: Mapping[str, Any], side: str) -> list[list[float]]:
    return [[float(x) for x in row] for row in raw.get(side) or []]


def embedding_measurement(
    old: Mapping[str, Any], new: Mapping[str, Any], *, libraries: Mapping[str, str], device: str = "cpu"
) -> Measurement:
    """Index side and query side of a sentence-transformers model (``{"index": [...], "query": [...], "dim": d}``).

    Stored vectors stay valid when the dimension is the same and every index-side sample keeps a cosine of
    at least ``VALID_MIN_COSINE``; the query side is reported apart, because queries are encoded again at
    search time: a query side that moved changes results, not what is stored.
    """
    dims = (old.get("dim"), new.get("dim"))
    sides: dict[str, SideMeasure] = {}
    for name in ("index", "query"):
        measure = compare_vectors(_vectors(old, name), _vectors(new, name))
        if measure is not None:
            sides[name] = measure
    samples = len(old.get("index") or [])
    index = sides.get("index")
    reason: str | None
    if dims[0] != dims[1] or index is None:
        verdict, reason = REEMBED, f"the output dimension changed from {dims[0]} to {dims[1]}"
    elif index.min_cosine < VALID_MIN_COSINE:
        verdict = REEMBED
        reason = (f"index-side vectors moved: mean cosine {index.mean_cosine:.4f}, minimum {index.min_cosine:.4f}, "
                  f"{index.moved} of {index.samples} samples moved")
    else:
        verdict, reason = STAYS_VALID, _query_note(sides.get("query"))
    return Measurement(SENTENCE_TRANSFORMERS, verdict, samples, reason, sides, dims, {}, libraries, device)


def _query_note(query: SideMeasure | None) -> str | None:
    if query is None or query.moved == 0:
        return None
    return (f"the query side moved ({query.moved} of {query.samples} samples, mean cosine {query.mean_cosine:.4f}): "
            "search results change, stored vectors do not")


def encoder_measurement(
    old: Mapping[str, Any], new: Mapping[str, Any], *, libraries: Mapping[str, str], device: str = "cpu"
) -> Measurement:
    """Hidden states of a transformers encoder (mean over tokens, ``{"hidden": [...]}``) and, for a
    classifier, its labels by name (``{"labels": [...]}``): a swapped ``id2label`` shows as disagreement."""
    hidden = compare_vectors(_vectors(old, "hidden"), _vectors(new, "hidden"))
    sides = {"hidden": hidden} if hidden is not None else {}
    samples = len(old.get("hidden") or [])
    dims = (old.get("dim"), new.get("dim"))
    figures: dict[str, Any] = {}
    old_labels, new_labels = old.get("labels"), new.get("labels")
    kind = ENCODER
    verdict = OUTPUTS_UNCHANGED
    reason = None
    if hidden is None:
        verdict, reason = OUTPUTS_CHANGED, f"the hidden size changed from {dims[0]} to {dims[1]}"
    elif hidden.moved:
        verdict = OUTPUTS_CHANGED
        reason = f"hidden states moved for {hidden.moved} of {hidden.samples} samples (minimum cosine {hidden.min_cosine:.4f})"
    if old_labels is not None and new_labels is not None:
        kind = CLASSIFIER
        agree = sum(1 for a, b in zip(old_labels, new_labels) if a == b)
        figures["label_agreement"] = agree / len(old_labels) if old_labels else 1.0
        figures["labels_changed"] = len(old_labels) - agree
        figures["label_examples"] = [[a, b] for a, b in zip(old_labels, new_labels) if a != b][:5]
        if agree < len(old_labels):
            verdict = LABELS_DISAGREE
            reason = f"the predicted label differs on {len(old_labels) - agree} of {len(old_labels)} samples"
    return Measurement(kind, verdict, samples, reason, sides, dims, figures, libraries, device)


def causal_lm_measurement(
    old: Mapping[str, Any], new: Mapping[str, Any], *, libraries: Mapping[str, str], device: str = "cpu"
) -> Measurement:
    """Next-token top-1 per prompt (``{"top1": [...]}``, the new side adds ``"kl"``: KL(old ‖ new) per prompt)."""
    old_top, new_top = list(old.get("top1") or []), list(new.get("top1") or [])
    kls = [float(x) for x in new.get("kl") or []]
    samples = len(old_top)
    agree = sum(1 for a, b in zip(old_top, new_top) if a == b)
    agreement = agree / samples if samples else 1.0
    mean_kl = math.fsum(kls) / len(kls) if kls else 0.0
    figures = {"top1_agreement": agreement, "mean_kl": mean_kl, "max_kl": max(kls, default=0.0),
               "prompts_rendered": {"before": old.get("rendered"), "after": new.get("rendered")}}
    if agreement < MIN_TOP1_AGREEMENT or mean_kl > MAX_MEAN_KL:
        verdict = PREDICTIONS_CHANGED
        reason = f"next-token top-1 agrees on {agree} of {samples} prompts; mean KL divergence {mean_kl:.4f} nats"
    else:
        verdict, reason = OUTPUTS_UNCHANGED, None
    dims = (old.get("dim"), new.get("dim"))
    return Measurement(CAUSAL_LM, verdict, samples, reason, {}, dims, figures, libraries, device)


def tokenizer_measurement(
    old: Mapping[str, Any], new: Mapping[str, Any], *, libraries: Mapping[str, str], device: str = "cpu"
) -> Measurement:
    """Token ids of each sample text through each revision's tokenizer as the library loads it (``{"ids": [...]}``)."""
    old_ids, new_ids = list(old.get("ids") or []), list(new.get("ids") or [])
    changed = [i for i, (a, b) in enumerate(zip(old_ids, new_ids)) if a != b]
    figures = {"texts_changed": len(changed), "changed_samples": changed[:10]}
    if changed:
        verdict = TOKENIZATION_CHANGED
        reason = f"token ids changed for {len(changed)} of {len(old_ids)} sample texts"
    else:
        verdict, reason = OUTPUTS_UNCHANGED, None
    return Measurement(TOKENIZER, verdict, len(old_ids), reason, {}, None, figures, libraries, device)


MEASURES = {
    SENTENCE_TRANSFORMERS: embedding_measurement,
    ENCODER: encoder_measurement,
    CLASSIFIER: encoder_measurement,
    CAUSAL_LM: causal_lm_measurement,
    TOKENIZER: tokenizer_measurement,
}


def measure(
    kind: str, old: Mapping[str, Any], new: Mapping[str, Any], *, libraries: Mapping[str, str], device: str = "cpu"
) -> Measurement:
    """The measurement of ``kind`` from the raw outputs of both revisions."""
    return MEASURES[kind](old, new, libraries=libraries, device=device)


# -- against the inferred verdict ----------------------------------------------------------------


def disagreement(measurement: Measurement, codes: Iterable[str]) -> str | None:
    """One line when the measurement contradicts what the analysers inferred from the files, else None.

    Only embedding models have an inferred verdict today (``embeddings.incompatible``): inferred
    incompatible but measured "stored vectors stay valid", or the reverse.
    """
    if measurement.kind != SENTENCE_TRANSFORMERS or not measurement.verifiable:
        return None
    inferred = bool(INCOMPATIBLE_CODES & set(codes))
    index = measurement.sides.get("index")
    figure = f" (index side: mean cosine {index.mean_cosine:.4f}, minimum {index.min_cosine:.4f})" if index else ""
    if inferred and measurement.verdict == STAYS_VALID:
        return f"inferred that stored embeddings are incompatible, but the measurement says they stay valid{figure}"
    if not inferred and measurement.verdict == REEMBED:
        return f"inferred no embedding incompatibility, but the measurement says re-embedding is needed{figure}"
    return None


# -- the histogram the pages draw -----------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    low: float
    high: float
    count: int


def histogram(values: Sequence[float], *, bins: int = 10) -> list[Bar]:
    """Per-sample cosines in ``bins`` equal bins over [lowest, 1]; the lowest bin starts at most at 0.9,
    so that a float16 re-save (every value near 1) reads as one tall bar at the right."""
    if not values:
        return []
    low = min(min(values), 0.9)
    width = (1.0 - low) / bins
    counts = [0] * bins
    for value in values:
        index = bins - 1 if width == 0 else min(bins - 1, max(0, int((value - low) / width)))
        counts[index] += 1
    return [Bar(low + i * width, low + (i + 1) * width, c) for i, c in enumerate(counts)]


# -- on the advisory ------------------------------------------------------------------------------


def annotate(advisory: Advisory, measured: Mapping[str, Any], *, now: datetime, disagrees: str | None = None,
             finding: Mapping[str, Any] | None = None) -> Advisory:
    """The advisory with the measurement as ``database_specific.measured``; when it ``disagrees`` with the
    inferred verdict, the summary says so and ``finding`` (``verify.disagrees``) joins the record's findings."""
    specific = advisory.specific
    changes: dict[str, Any] = {"measured": dict(measured)}
    if finding is not None:
        changes["findings"] = (*specific.findings, dict(finding))
    record = advisory.replace(database_specific=specific.model_copy(update=changes),
                              modified=later(now, advisory.modified))
    if disagrees:
        # First, as a withdrawal's reason is: a long summary is cut at its end.
        verdict = measured.get("verdict")
        record = record.replace(summary=one_line(f"Measured \"{verdict}\", against the inferred verdict: "
                                                 f"{advisory.summary or ''}"))
    return record


@dataclass(frozen=True)
class Verification:
    """One verification: the revisions compared, the measurement, and what the run cost."""

    repo_id: str
    old_sha: str
    new_sha: str
    measurement: Measurement
    seconds: float | None = None
    peak_rss_bytes: int | None = None
    downloaded_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"repo": self.repo_id, "old": self.old_sha, "new": self.new_sha, **self.measurement.to_json()}
