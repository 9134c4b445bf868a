"""Test-wide setup: nothing may reach huggingface.co, and every store test runs on SQLite and PostgreSQL."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Before anything imports huggingface_hub: no telemetry, no Xet, a private cache, and an
# endpoint that refuses connections so that a test forgetting the stand-in fails loudly.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_XET"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="tracker-hf-home-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ.pop("HF_TOKEN", None)
for _name in [n for n in os.environ if n.startswith("TRACKER_") and not n.startswith("TRACKER_TEST_")]:
    os.environ.pop(_name)  # TRACKER_CONFIG, TRACKER_DATABASE_URL, any TRACKER_<SECTION>_<KEY>

import psutil
import pytest

from tests.postgres import fresh_database, postgres_server

pytest_plugins = ["hubstandin.pytest_plugin", "hubstandin.osv_pytest_plugin"]


# The longest test files, longest first, as `--durations` measured them. `--dist loadfile` hands out
# whole files in collection order (with `--no-loadscope-reorder`, in pyproject.toml), so these start
# first and the run does not end waiting on one long file that began last. A file not named here
# keeps its place after them; tests/test_longest_first.py fails when a name here no longer exists.
LONGEST_FIRST = (
    "core/test_crash_report.py",
    "ops/test_readme_commands.py",
    "verify/test_verify_models.py",  # skipped without the verify extra
    "verify/test_verify_daemon.py",
    "delivery/test_end_to_end.py",
    "ops/test_daemon_log.py",
    "web/test_pages.py",
    "scale/test_replicas.py",
    "scale/test_change_listing.py",
    "hostile/test_orchestration.py",
    "web/test_browser.py",
    "delivery/test_feeds.py",
    "scan/test_scan_cli.py",
    "web/test_demo.py",
    "scale/test_cycle.py",
    "core/test_inherited.py",
    "core/test_packaging.py",
    "hostile/test_delivery_receivers.py",
    "core/test_watch_rules.py",
    "delivery/test_ssrf.py",
    "scale/test_faults.py",
    "scale/test_listing_faults.py",
)
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    rank = {str(TESTS / name): i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))  # stable: a file's tests keep their order


# The chat template analysis keeps one warm sandbox worker for the process's life (closed at exit).
LONG_LIVED = ("template_sandbox.py",)


@pytest.fixture(scope="session", autouse=True)
def no_child_process_left_behind():
    """Fail the run when a test leaves a process of its own running (a `tracker run`, a server...).

    Set up first and torn down last, after every other fixture has stopped what it started; what is
    still alive then is killed, so that nothing outlives the run, and named in the error.
    """
    yield
    me = psutil.Process()
    left = [p for p in me.children(recursive=True) if not _long_lived(p)]
    _, alive = psutil.wait_procs(left, timeout=10)  # a process just told to stop gets a moment
    named = []
    for proc in alive:
        try:
            named.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    if named:
        pytest.fail("tests left child processes running (now killed):\n" + "\n".join(named), pytrace=False)


def _long_lived(proc: psutil.Process) -> bool:
    try:
        return proc.status() == psutil.STATUS_ZOMBIE or any(
            part.endswith(LONG_LIVED) for part in proc.cmdline())
    except psutil.NoSuchProcess:
        return True


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


@pytest.fixture(autouse=True)
def unplanned_reads_fail(monkeypatch):
    """An analyser that still reads something past its rounds of planned reads fails the test (production
    reads it as absent and logs it): every revision analysed in the suite proves its plan complete."""
    from tracker.pipeline import analysis

    monkeypatch.setattr(analysis, "UNPLANNED_RAISES", True)
