"""Every category anything can emit is one a user can subscribe to, through the CLI and the API alike.

The list comes from the one registry (``Category`` in tracker/core/model.py), never from a hand list
here: the test first checks that every analyser, the estimator and the repo events emit only
registered categories, then subscribes to each one through both surfaces and filters a feed by it.
A module-scoped history holds one advisory per category (one watched repo each, its report built by the
core and written through the store's own save path), so a feed filtered by a category is seen to serve
that category's advisory and no other.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from tests.delivery.conftest import build_tracker
from tracker.adapters.feeds import entry_id
from tracker.adapters.settings import Settings
from tracker.app import Tracker, make_tracker
from tracker.core.advisory.build import classify
from tracker.core.findings import ANALYSER_MODULES
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import (
    CATEGORIES,
    Category,
    Commit,
    CommitSha,
    FileEntry,
    Finding,
    RawDiff,
    RepoId,
    Severity,
    Snapshot,
)
from tracker.core.report import AdvisoryContext, Analysed, RevisionReport, revision_report
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


# -- one advisory per category, and the feeds filtered by each -----------------------------------------

START = datetime(2026, 3, 1, tzinfo=UTC)


def _code(category: Category) -> str:
    return f"{category.value}.changed"


def _advise(tracker: Tracker, category: Category) -> str | None:
    """Watch cats/<category>, store a baseline and one revision whose only finding is of ``category``: the
    report (and its advisory) built by the core, written by the store's save path; the advisory's id, None
    for a finding no advisory carries (the tracker's own analysis failures say nothing about upstream)."""
    store = tracker.store
    repo_id = RepoId(f"cats/{category.value.replace('_', '-')}")
    repo, _ = store.repos.add(repo_id, now=START)
    shas = [CommitSha(f"{i:x}{category.value}".encode().hex()[:40].ljust(40, "0")) for i in (1, 2)]
    store.revisions.record_listing(repo, [
        Commit(sha=shas[0], date=START, title="initial", parents=()),
        Commit(sha=shas[1], date=START + timedelta(hours=1), title=f"change {category.value}", parents=(shas[0],)),
    ], parent=None, baseline=True, now=START)
    baseline, revision = store.revisions.pending(repo.pk)
    snapshot = Snapshot(files=(FileEntry("config.json", 10, "a" * 40),))
    store.revisions.save_report(RevisionReport(
        repo_pk=repo.pk, revision_pk=baseline.pk, sha=baseline.sha, snapshot=snapshot, diff=None, findings=(),
        summary="baseline", estimate=None, dependencies_pending=False, analysed_at=START))
    finding = Finding(_code(category), category.value, Severity.HIGH,
                      f"something of {category.value} changed", path="config.json")
    context = AdvisoryContext(repo_id=repo_id, endpoint="https://huggingface.co", tracker_url=None,
                              min_severity=Severity.INFO, advisories=[], now=START + timedelta(hours=2))
    report = revision_report(context, revision, Analysed(
        snapshot=snapshot, findings=[finding],
        diff=RawDiff(files={"added": [], "removed": [], "changed": [{"path": "config.json"}]}, texts={})))
    assert store.revisions.save_report(report) is True
    if classify(finding.code) == "ignore":
        assert report.advisories == ()
        return None
    (write,) = report.advisories
    return str(write.record["id"])


@pytest.fixture(scope="module")
def advised(tmp_path_factory) -> Iterator[tuple[TestClient, dict[Category, str | None]]]:
    """A feed server over one advisory per registered category, built once for the module."""
    root = tmp_path_factory.mktemp("categories")
    settings = Settings(database={"url": f"sqlite:///{root}/tracker.sqlite3"}, hub={"endpoint": "http://127.0.0.1:9"})
    with make_tracker(settings, auto_upgrade=True) as tracker:
        ids = {category: _advise(tracker, category) for category in Category}
        with TestClient(create_app(tracker)) as client:
            yield client, ids


def test_every_category_has_its_own_advisory(advised):
    client, ids = advised
    advised_ids = {category: advisory for category, advisory in ids.items() if advisory is not None}
    # the classification, not a list here, says which findings make no advisory: the tracker's own failures
    assert {c for c in Category if c not in advised_ids} == {c for c in Category if classify(_code(c)) == "ignore"} \
        == {Category.ANALYSIS}
    assert len(set(advised_ids.values())) == len(advised_ids)
    for category, advisory in advised_ids.items():
        record = client.get(f"/v1/vulns/{advisory}").json()
        assert record["database_specific"]["categories"] == [category.value]


@pytest.mark.parametrize("category", list(Category), ids=[c.value for c in Category])
def test_a_feed_filtered_by_a_category_serves_its_advisories_and_no_other(advised, category):
    client, ids = advised
    for path in ("/feeds/all.json", "/feeds/cats.json", f"/feeds/cats/{category.value.replace('_', '-')}.json"):
        feed = client.get(path, params={"category": category.value})
        assert feed.status_code == 200, feed.text
        advisory = ids[category]
        assert [item["id"] for item in feed.json()["items"]] == ([entry_id(advisory)] if advisory else []), path
    unfiltered = client.get("/feeds/all.json").json()["items"]
    assert {item["id"] for item in unfiltered} == {entry_id(i) for i in ids.values() if i is not None}
