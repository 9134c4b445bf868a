"""Every category anything can emit is one a user can subscribe to, through the CLI and the API alike.

The list comes from the one registry (``Category`` in tracker/core/model.py), never from a hand list
here: the test first checks that every analyser, the estimator and the repo events emit only
registered categories, then subscribes to each one through both surfaces and filters a feed by it.
"""

from __future__ import annotations

import importlib
import json

import pytest
from fastapi.testclient import TestClient

from tests.delivery.conftest import build_tracker
from tracker.core.findings import ANALYSER_MODULES
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import CATEGORIES, Category
from tracker.surfaces.api import create_app


def emitted_category_constants() -> dict[str, str]:
    """Each ``*CATEGORY`` constant of the analysers and the estimator: what their findings carry."""
    found = {}
    for name in (*(f"tracker.core.findings.{m}" for m in ANALYSER_MODULES), "tracker.core.estimate.compare"):
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if attr.endswith("CATEGORY") and isinstance(value, str):
                found[f"{name}.{attr}"] = value
    return found


def test_every_emitted_category_is_registered():
    constants = emitted_category_constants()
    assert len(constants) >= 15  # the analysers name their categories once, as constants
    assert {where: c for where, c in constants.items() if c not in CATEGORIES} == {}
    # repo events, the embeddings verdict and the analysis failures are categories too
    assert {"repo", "embeddings", "analysis", "gguf", "diffusers", "sentence_transformers", "processor",
            "preprocessing", "exports", "manifest", "adapter"} <= set(CATEGORIES)


def test_a_finding_with_an_unregistered_category_is_refused_when_built():
    with pytest.raises(ValueError, match="unknown finding category 'tokeniser'"):
        SeverityRules.default().finding("tokenizer.changed", "tokeniser", "x")


@pytest.fixture
def surfaces(cli, tracker_settings):
    token = cli("token", "create", "categories").stdout.strip()
    with TestClient(create_app(build_tracker(tracker_settings))) as client:
        yield cli, client, {"Authorization": f"Bearer {token}"}


def test_every_category_can_be_subscribed_to_and_filtered_by(surfaces):
    cli, client, auth = surfaces
    for category in Category:
        made = cli("subscribe", "acme", "--webhook", "http://127.0.0.1:9/cli", "--category", category.value,
                   "--json")
        assert made.exit_code == 0, (category, made.output)
        assert json.loads(made.output)["categories"] == [category.value]
        answer = client.post("/v1/subscriptions", headers=auth, json={
            "target": "acme", "webhook": "http://127.0.0.1:9/api", "categories": [category.value]})
        assert answer.status_code == 201, (category, answer.text)
        assert answer.json()["categories"] == [category.value]
        feed = client.get(f"/feeds/all.json?category={category.value}")
        assert feed.status_code == 200, (category, feed.text)
    listed = json.loads(cli("subscriptions", "--json").output)
    assert len(listed) == 2 * len(Category)
