"""A plain (non-editable) install works: migrations ship in the wheel, the stand-ins do not."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.core.conftest import config_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (path,) = out.glob("upstream_tracker-*.whl")
    return path


def test_the_wheel_has_the_migrations_and_no_stand_in(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "tracker/migrations/env.py" in names
    assert {"tracker/migrations/versions/0001_initial_schema.py",
            "tracker/migrations/versions/0004_leases_attempts.py"} <= set(names)
    assert "tracker/core/findings/severity/analysis.toml" in names
    assert not [n for n in names if "standin" in n or n.startswith(("tests/", "hubstandin/"))]


def test_an_installed_tracker_polls_the_stand_in(wheel, hub_standin, tmp_path):
    target = tmp_path / "site"
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                              str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    hub_standin.create_repo("acme/packaged")
    hub_standin.commit("acme/packaged", {"config.json": config_json()})
    work = tmp_path / "elsewhere"  # not the source tree: nothing can be imported from it by accident
    work.mkdir()
    (work / "tracker.toml").write_text("")
    env = {**os.environ, "PYTHONPATH": str(target), "HF_ENDPOINT": hub_standin.url,
           "TRACKER_DATABASE_URL": f"sqlite:///{work}/t.sqlite3", "TRACKER_CONFIG": str(work / "tracker.toml")}

    def tracker(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tracker", *args], env=env, cwd=work, capture_output=True,
                              text=True, timeout=120)

    where = subprocess.run([sys.executable, "-c", "import tracker.adapters.store.db as d; print(d.migrations_dir())"],
                           env=env, cwd=work, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(target / "tracker" / "migrations"), where.stderr
    assert tracker("watch", "add", "acme/packaged").returncode == 0
    poll = tracker("poll")
    assert poll.returncode == 0, poll.stderr
    assert poll.stdout == "acme/packaged: baseline, 1 new revision(s), 1 analysed\n"
