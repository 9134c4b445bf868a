"""The stand-in's runtime needs no test framework: pytest is its plugins' extra, not a dependency."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

STANDIN = Path(__file__).resolve().parents[2] / "standin"


def test_pytest_is_an_extra_of_the_standin_not_a_runtime_dependency():
    project = tomllib.loads((STANDIN / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("pytest")]
    assert project["optional-dependencies"]["pytest"] == ["pytest>=8"]


def test_the_standin_and_its_server_import_without_pytest():
    done = subprocess.run([sys.executable, "-c", "import sys, hubstandin, hubstandin.hub, hubstandin.__main__; "
                           "print('pytest' in sys.modules)"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "False\n"), done.stderr
