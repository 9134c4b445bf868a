"""Errors at the edges: one line a user can act on, and reads that say when they cannot answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

REPO = RepoId("acme/edge-model")
ROOT = Path(__file__).resolve().parents[2]


def _cli(args: list[str], env_extra: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRACKER_CONFIG": str(cwd / "empty.toml"), **env_extra}
    (cwd / "empty.toml").write_text("")
    return subprocess.run([sys.executable, "-m", "tracker", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def _cli_here(args: list[str], env_extra: dict[str, str], cwd: Path) -> Result:
    """The same command in-process (click's runner keeps stdout and stderr apart); the process-level
    check that nothing else reaches stderr is the unreachable-PostgreSQL test's, through a real process."""
    (cwd / "empty.toml").write_text("")
    return CliRunner().invoke(main, args, env={"TRACKER_CONFIG": str(cwd / "empty.toml"), **env_extra})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_watch_list_with_an_unreachable_postgres_is_one_line(tmp_path):
    url = f"postgresql+psycopg://tracker@127.0.0.1:{_free_port()}/tracker"
    result = _cli(["watch", "list"], {"TRACKER_DATABASE_URL": url}, tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: cannot connect to the database at postgresql+psycopg://tracker@127.0.0.1:")
    assert result.stderr.endswith(": is the server running and reachable?\n")


def test_watch_list_with_an_sqlite_path_in_a_missing_folder_is_one_line(tmp_path):
    path = tmp_path / "no" / "such" / "tracker.sqlite3"
    result = _cli_here(["watch", "list"], {"TRACKER_DATABASE_URL": f"sqlite:///{path}"}, tmp_path)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (f"error: cannot open the database at {path}: the folder {path.parent} does not exist\n")
    assert not path.parent.exists()


def test_a_file_that_is_not_a_database_is_one_line(tmp_path):
    path = tmp_path / "tracker.sqlite3"
    path.write_bytes(b"this is not a database, just some bytes" * 100)
    result = _cli_here(["watch", "list"], {"TRACKER_DATABASE_URL": f"sqlite:///{path}"}, tmp_path)
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == (f"error: the file at {path} is not a tracker database or is damaged: "
                             "restore it from a backup or move it away\n")


def test_not_watched_is_its_own_error(tmp_path):
    result = _cli_here(["query", "--repo", "acme/nothing", "--revision", "main"],
                       {"TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3"}, tmp_path)
    assert (result.exit_code, result.stderr) == (
        1, "error: not watched: acme/nothing (add with `tracker watch add acme/nothing`)\n")


@pytest.fixture
def watched(hub_standin, settings, make):
    hub_standin.create_repo(REPO)
    first = hub_standin.commit(REPO, {"config.json": config_json()})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    return tracker, first


def test_a_revision_the_hub_does_not_have_is_an_error_not_an_empty_answer(hub_standin, watched):
    tracker, _ = watched
    client = TestClient(create_app(tracker))
    answer = client.post("/v1/query", json={"package": {"name": REPO}, "version": "f" * 40})
    assert answer.status_code == 404
    assert answer.json() == {"code": 5, "message": f"{REPO}: no revision {'f' * 40!r} on the Hub"}
    answer = client.post("/v1/query", json={"package": {"name": REPO}, "version": "no-such-tag"})
    assert (answer.status_code, answer.json()["code"]) == (404, 5)


def test_a_hub_outage_is_an_unavailable_error_not_safe(hub_standin, watched, sleeps):
    tracker, _ = watched
    hub_standin.faults.add("/api/models/", status=503, times=None)
    client = TestClient(create_app(tracker))
    answer = client.post("/v1/query", json={"package": {"name": REPO}, "version": "e" * 40})
    assert answer.status_code == 503
    body = answer.json()
    assert body["code"] == 14 and body["message"].startswith(f"{REPO}@{'e' * 40}: cannot ask the Hub now (")
    assert body["message"].endswith("; retry later")


def test_a_package_that_is_not_watched_is_an_error(watched):
    tracker, _ = watched
    answer = TestClient(create_app(tracker)).post("/v1/query", json={"package": {"name": "acme/other"},
                                                                     "version": "a" * 40})
    assert (answer.status_code, answer.json()) == (
        404, {"code": 5, "message": "not watched: acme/other (add with `tracker watch add acme/other`)"})


def test_a_querybatch_of_1000_unseen_revisions_costs_a_bounded_number_of_hub_requests(hub_standin, watched):
    tracker, first = watched
    hub_standin.clear_log()
    queries = [{"package": {"name": REPO}, "version": f"{i:040x}"} for i in range(999)]
    queries.append({"package": {"name": REPO}, "version": first})  # a known commit still answers
    answer = TestClient(create_app(tracker)).post("/v1/querybatch", json={"queries": queries})
    assert answer.status_code == 200
    results = answer.json()["results"]
    assert len(results) == 1000
    budget = tracker.settings.api.max_hub_requests
    # Each unseen revision costs one commit listing (the stand-in answers 404: no such revision).
    assert len(hub_standin.requests) <= budget + tracker.settings.hub.max_pages
    assert len(hub_standin.requests) == budget
    not_found = {"code": 5, "message": f"{REPO}: no revision {'0' * 40!r} on the Hub"}
    assert results[0] == {"error": not_found}
    spent = results[budget]["error"]
    assert spent["code"] == 14 and "budget of Hub look-ups is spent" in spent["message"]
    assert all("error" in r for r in results[:999])
    assert results[999] == {}
