"""The API never answers 500 for stored data or odd input: strict JSON out, page tokens checked."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from hubstandin import HubStandin

from tests.core.conftest import config_json
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

REPO = RepoId("acme/nan-model")


def _strict(text: str):
    def refuse(name: str):
        raise AssertionError(f"non-finite number {name} in the output")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def nan_history(tmp_path_factory):
    """The history is polled once for the module; every test only reads it."""
    work = tmp_path_factory.mktemp("nan-history")
    hub = HubStandin(work / "hub").start()
    try:
        hub.create_repo(REPO)
        first = hub.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"temperature": 0.6}'})
        settings = Settings(database={"url": f"sqlite:///{work}/t.sqlite3"}, hub={"endpoint": hub.url})
        tracker = make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))
        tracker.store.repos.add(REPO, now=tracker.clock())
        tracker.poll()
        nan = hub.commit(REPO, {
            "config.json": config_json().replace(b'"hidden_size": 384', b'"hidden_size": 384, "rope_theta": NaN'),
            "generation_config.json": b'{"temperature": NaN, "top_p": Infinity}'}, message="NaN upstream")
        (result,) = tracker.poll()
        assert result.processed == 1
        yield tracker, first, nan
    finally:
        hub.stop(wait=False)


def test_advisories_from_non_finite_upstream_values_are_served_as_strict_json(nan_history, tmp_path):
    tracker, first, nan = nan_history
    advisories = tracker.store.advisories.find()
    assert advisories, "the NaN change should make an advisory"
    client = TestClient(create_app(tracker))
    for adv in advisories:
        answer = client.get(f"/v1/vulns/{adv.id}")
        assert answer.status_code == 200
        assert _strict(answer.text)["id"] == adv.id
    answer = client.post("/v1/query", json={"package": {"name": REPO}, "version": first})
    assert answer.status_code == 200
    assert {v["id"] for v in _strict(answer.text)["vulns"]} >= {a.id for a in advisories if a.kind == "update"}
    answer = client.post("/v1/querybatch", json={"queries": [{"commit": first}, {"commit": nan}]})
    assert answer.status_code == 200 and _strict(answer.text)["results"]
    out = tmp_path / "osv"
    (tmp_path / "none.toml").write_text("")
    result = CliRunner().invoke(main, ["export", "osv", str(out)],
                                env={"TRACKER_DATABASE_URL": tracker.settings.database.url,
                                     "TRACKER_CONFIG": str(tmp_path / "none.toml")})
    assert result.exit_code == 0, result.output
    for path in out.glob("*.json"):
        _strict(path.read_text())


@pytest.mark.parametrize("token", ["1e30", "-1", "99999999999999999999", "abc", "1.5", " 1"])
def test_a_bad_page_token_is_an_invalid_argument(nan_history, token):
    tracker, first, _ = nan_history
    client = TestClient(create_app(tracker))
    answer = client.post("/v1/query", json={"commit": first, "page_token": token})
    assert (answer.status_code, answer.json()) == (400, {"code": 3, "message": "invalid page_token"})


@pytest.mark.parametrize("revision", ["a b", "main\x00", "tag\x7f", "x" * 256])
def test_a_revision_no_commit_branch_or_tag_could_have_is_an_invalid_argument(nan_history, revision):
    tracker, _, _ = nan_history
    client = TestClient(create_app(tracker))
    for body in ({"commit": revision}, {"package": {"name": REPO}, "version": revision}):
        answer = client.post("/v1/query", json=body)
        assert (answer.status_code, answer.json()) == (400, {"code": 3, "message": "invalid revision"})
