"""Fixtures for the operations tests: a Tracker over the stand-in (tests/core's fixtures) and a CLI."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tests.core.conftest import make, settings, sleeps  # noqa: F401 (fixtures)
from tracker.adapters.store.db import make_engine, upgrade_schema
from tracker.surfaces.cli import main


def migrated(url: str) -> str:
    """``url`` with the schema migrated (SQLite does it itself; PostgreSQL needs `tracker init`)."""
    engine = make_engine(url)
    try:
        upgrade_schema(engine)
    finally:
        engine.dispose()
    return url


@pytest.fixture
def cli_env(hub_standin, tmp_path, monkeypatch):
    """The environment of a `tracker` command over the stand-in and a fresh SQLite database."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracker.toml").write_text('[poll]\nevery = "1h"\n\n[hub]\nmax_retries = 0\n')
    return {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
            "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}


@pytest.fixture
def cli(cli_env):
    runner = CliRunner()

    def invoke(*args, env=None):
        return runner.invoke(main, list(args), env={**cli_env, **(env or {})}, catch_exceptions=False)

    return invoke
