"""The pure side of tracker verify (tracker/core/verify.py): measures, verdicts, disagreement, the histogram."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from tracker.core import verify
from tracker.core.advisory.record import parse_advisory
from tracker.surfaces.web.measured import histogram_svg, measured_view

LIBS = {"torch": "2.13.0"}


def test_identical_vectors_do_not_move():
    side = verify.compare_vectors([[1.0, 2.0], [0.0, 3.0]], [[1.0, 2.0], [0.0, 3.0]])
    assert (side.samples, side.mean_cosine, side.min_cosine, side.max_relative_l2, side.moved) == (
        2, pytest.approx(1.0), pytest.approx(1.0), 0.0, 0)


def test_a_sample_moves_past_the_cosine_or_the_relative_l2_threshold():
    old = [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
    new = [[0.0, 1.0], [2.0, 0.0], [1.0, 0.001]]  # orthogonal; same direction twice the length; a hair away
    side = verify.compare_vectors(old, new)
    assert side.cosines[0] == 0.0 and side.cosines[1] == 1.0
    assert side.moved == 2
    assert side.max_relative_l2 == pytest.approx(math.sqrt(2))
    assert side.min_cosine == 0.0


def test_different_dimensions_compare_nothing():
    assert verify.compare_vectors([[1.0, 0.0]], [[1.0, 0.0, 0.0]]) is None


@pytest.mark.parametrize(("old", "new", "verdict", "reason"), [
    ({"index": [[1.0, 0.0]], "query": [[1.0, 0.0]], "dim": 2}, {"index": [[1.0, 0.0]], "query": [[0.0, 1.0]], "dim": 2},
     "stored vectors stay valid",
     "the query side moved (1 of 1 samples, mean cosine 0.0000): search results change, stored vectors do not"),
    ({"index": [[1.0, 0.0]], "dim": 2}, {"index": [[0.6, 0.8]], "dim": 2}, "re-embed needed",
     "index-side vectors moved: mean cosine 0.6000, minimum 0.6000, 1 of 1 samples moved"),
    ({"index": [[1.0, 0.0]], "dim": 2}, {"index": [[1.0, 0.0, 0.0]], "dim": 3}, "re-embed needed",
     "the output dimension changed from 2 to 3"),
])
def test_the_embedding_verdict(old, new, verdict, reason):
    result = verify.embedding_measurement(old, new, libraries=LIBS)
    assert (result.verdict, result.reason) == (verdict, reason)


def test_labels_are_matched_by_name():
    old = {"hidden": [[1.0], [1.0]], "labels": ["positive", "negative"], "dim": 1}
    new = {"hidden": [[1.0], [1.0]], "labels": ["negative", "negative"], "dim": 1}
    result = verify.encoder_measurement(old, new, libraries=LIBS)
    assert (result.kind, result.verdict) == ("transformers-classifier", "labels disagree")
    assert result.figures["label_agreement"] == 0.5
    assert result.figures["label_examples"] == [["positive", "negative"]]


def test_a_causal_lm_verdict_reads_top1_and_kl():
    same = verify.causal_lm_measurement({"top1": ["a", "b"]}, {"top1": ["a", "b"], "kl": [0.0, 0.002]},
                                        libraries=LIBS)
    moved = verify.causal_lm_measurement({"top1": ["a", "b"]}, {"top1": ["a", "c"], "kl": [0.0, 0.5]},
                                         libraries=LIBS)
    assert (same.verdict, same.figures["top1_agreement"], same.figures["mean_kl"]) == ("outputs unchanged", 1.0, 0.001)
    assert (moved.verdict, moved.figures["top1_agreement"], moved.figures["mean_kl"]) == (
        "predictions changed", 0.5, 0.25)
    assert moved.reason == "next-token top-1 agrees on 1 of 2 prompts; mean KL divergence 0.2500 nats"


def test_tokenizer_ids():
    result = verify.tokenizer_measurement({"ids": [[1, 2], [3]]}, {"ids": [[1, 2], [3, 4]]}, libraries=LIBS)
    assert (result.verdict, result.figures["texts_changed"], result.figures["changed_samples"]) == (
        "tokenization changed", 1, [1])


def _embedding(verdict_index_new):
    return verify.embedding_measurement({"index": [[1.0, 0.0]], "dim": 2},
                                        {"index": [verdict_index_new], "dim": 2}, libraries=LIBS)


@pytest.mark.parametrize(("new", "codes", "expected"), [
    ([1.0, 0.0], ["embeddings.incompatible"], "inferred that stored embeddings are incompatible, but the measurement "
                                              "says they stay valid (index side: mean cosine 1.0000, minimum 1.0000)"),
    ([0.0, 1.0], ["weights.values_changed"], "inferred no embedding incompatibility, but the measurement says "
                                             "re-embedding is needed (index side: mean cosine 0.0000, minimum 0.0000)"),
    ([1.0, 0.0], ["weights.values_changed"], None),
    ([0.0, 1.0], ["embeddings.incompatible"], None),
])
def test_disagreement_with_the_inferred_verdict(new, codes, expected):
    assert verify.disagreement(_embedding(new), codes) == expected


def test_not_verifiable_says_why_and_nothing_else():
    result = verify.not_verifiable("unknown", "only pickles")
    assert result.to_json() == {"kind": "unknown", "verdict": "not verifiable", "verifiable": False,
                                "reason": "only pickles"}
    assert verify.disagreement(result, ["embeddings.incompatible"]) is None


def test_the_histogram_puts_every_value_in_a_bin_and_starts_at_most_at_0_9():
    bars = verify.histogram([1.0, 0.9995, 0.85, 0.5], bins=5)
    assert [b.count for b in bars] == [1, 0, 0, 1, 2]
    assert bars[0].low == 0.5 and bars[-1].high == pytest.approx(1.0)
    assert verify.histogram([1.0, 1.0], bins=2)[0].low == 0.9


def test_annotate_keeps_the_record_valid_and_says_when_it_disagrees():
    record = parse_advisory({"schema_version": "1.7.0", "id": "x_HFUT-aaaa-bbbb-cccc", "modified": "2026-01-01T00:00:00Z",
                             "summary": "pooling changed", "database_specific": {"findings": [{"code": "a"}]}})
    measured = {"verdict": "stored vectors stay valid", "samples": 8}
    out = verify.annotate(record, measured, now=datetime(2026, 2, 1, tzinfo=UTC), disagrees="why",
                          finding={"code": "verify.disagrees"})
    assert out.summary == 'Measured "stored vectors stay valid", against the inferred verdict: pooling changed'
    assert out.modified == "2026-02-01T00:00:00Z"
    data = out.model_dump(mode="json", exclude_unset=True)
    assert data["database_specific"]["measured"] == measured
    assert [f["code"] for f in data["database_specific"]["findings"]] == ["a", "verify.disagrees"]


def test_the_page_view_reads_a_stored_measurement_as_data():
    view = measured_view({"verdict": "re-embed needed", "kind": "sentence-transformers", "samples": 3,
                          "reason": "<b>moved</b>", "index": {"mean_cosine": 0.5, "min_cosine": "x", "moved": 3,
                                                             "samples": 3, "cosines": [0.5, 1.0, float("nan"), 7]}})
    assert view is not None
    assert (view.verdict, view.samples, view.reason) == ("re-embed needed", 3, "<b>moved</b>")
    assert view.sides[0].minimum == 0.0  # a non-number is left out, not trusted
    assert view.svg is not None and view.svg.count("<rect ") == 10
    assert measured_view({"no": "verdict"}) is None
    assert histogram_svg([], title="t") is None
