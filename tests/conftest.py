"""Test-wide setup: nothing may reach huggingface.co, and every store test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import tempfile

# Before anything imports huggingface_hub: no telemetry, no Xet, a private cache, and an
# endpoint that refuses connections so that a test forgetting the stand-in fails loudly.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_XET"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="tracker-hf-home-")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ.pop("HF_TOKEN", None)
os.environ.pop("TRACKER_DATABASE_URL", None)
os.environ.pop("TRACKER_CONFIG", None)

import pytest

from tests.postgres import fresh_database, postgres_server

pytest_plugins = ["hubstandin.pytest_plugin", "hubstandin.osv_pytest_plugin"]


@pytest.fixture(scope="session")
def postgres_server_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request, tmp_path):
    """A fresh, empty database URL: an SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tracker.sqlite3"
    return fresh_database(request.getfixturevalue("postgres_server_url"))
