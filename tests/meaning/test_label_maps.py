"""Label maps: a classifier whose id2label/label2id moved means other classes for the same outputs.

The configs are cardiffnlp/twitter-roberta-base-sentiment-latest's (three classes) and
distilbert/distilbert-base-uncased-finetuned-sst-2-english's (two), as published, trimmed to the keys
that matter here.
"""

from __future__ import annotations

import json

import pytest

from .hub import analyse_scenarios

SENTIMENT = {"architectures": ["RobertaForSequenceClassification"], "model_type": "roberta", "hidden_size": 768,
             "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50265,
             "max_position_embeddings": 514,
             "id2label": {"0": "negative", "1": "neutral", "2": "positive"},
             "label2id": {"negative": 0, "neutral": 1, "positive": 2}}
SST2 = {"architectures": ["DistilBertForSequenceClassification"], "model_type": "distilbert", "dim": 768,
        "n_layers": 6, "n_heads": 12, "hidden_dim": 3072, "vocab_size": 30522, "max_position_embeddings": 512,
        "id2label": {"0": "NEGATIVE", "1": "POSITIVE"}, "label2id": {"NEGATIVE": 0, "POSITIVE": 1}}
CARD = b"---\nlicense: mit\nlibrary_name: transformers\n---\n# sentiment\n"


def repo(config: dict, card: bytes = CARD) -> dict[str, bytes]:
    return {"config.json": json.dumps(config, indent=2).encode(), "README.md": card}


SCENARIOS = {
    "swapped": (repo(SENTIMENT), repo({**SENTIMENT, "id2label": {"0": "positive", "1": "neutral", "2": "negative"},
                                       "label2id": {"positive": 0, "neutral": 1, "negative": 2}})),
    "renamed_and_added": (repo(SST2), repo({**SST2, "id2label": {"0": "NEG", "1": "POSITIVE", "2": "MIXED"},
                                            "label2id": {"NEG": 0, "POSITIVE": 1, "MIXED": 2}})),
    "only_label2id": (repo(SST2), repo({**SST2, "label2id": {"NEGATIVE": 1, "POSITIVE": 0}})),
    "prose_only": (repo(SENTIMENT), repo(SENTIMENT, CARD + b"\nTrained on tweets.\n")),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("labels"), "acme", SCENARIOS)


def triples(findings):
    return [(f.code, f.severity.value, f.summary) for f in findings]


def test_swapped_labels_name_the_ids_that_moved(results):
    assert triples(results["swapped"]) == [
        ("config.labels_changed", "high", "id2label: 0: negative → positive, 2: positive → negative"),
        ("config.labels_changed", "high", "label2id: 0: negative → positive, 2: positive → negative"),
        ("files.changed", "info", "changed config.json (416 bytes → 416 bytes)"),
    ]
    assert results["swapped"][0].before == {"0": "negative", "1": "neutral", "2": "positive"}
    assert results["swapped"][0].library == "transformers"


def test_renamed_added_and_label2id_alone_are_high(results):
    assert triples(results["renamed_and_added"])[:2] == [
        ("config.labels_changed", "high", "id2label: 0: NEGATIVE → NEG, 2: (none) → MIXED"),
        ("config.labels_changed", "high", "label2id: 0: NEGATIVE → NEG, 2: (none) → MIXED"),
    ]
    assert triples(results["only_label2id"])[:1] == [
        ("config.labels_changed", "high", "label2id: 0: NEGATIVE → POSITIVE, 1: POSITIVE → NEGATIVE")]
    assert [f.code for f in results["only_label2id"]] == ["config.labels_changed", "files.changed"]


def test_prose_only_raises_nothing_above_low(results):
    assert [(f.code, f.severity.value) for f in results["prose_only"]] == [("files.changed", "info")]
