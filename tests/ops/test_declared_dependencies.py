"""Every package the tracker imports is declared, and importing all of tracker/ needs nothing undeclared.

A fresh virtual environment per run would take minutes; instead the test simulates one. The
distributions pyproject.toml requires (no extras), closed over their own requirements in the
installed metadata, are what ``pip install upstream-tracker`` brings. A fresh interpreter, in which
every other installed distribution fails to import as if absent (libraries' optional imports then
take their fallbacks), imports every module of tracker/.
"""

from __future__ import annotations

import ast
import importlib.metadata as md
import json
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
# Imported only where the code says how to install it when missing.
OPTIONAL = {"hubstandin": "tracker demo (tracker/surfaces/web/demo.py): `pip install -e ./standin`",
            # Imported by the verification process only; `tracker verify` says how to install them.
            **{module: "tracker verify (tracker/adapters/verify/worker.py): pip install 'upstream-tracker[verify]'"
               for module in ("torch", "transformers", "sentence_transformers")}}


def direct_requirements() -> set[str]:
    env = default_environment()
    found = set()
    for text in tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
            found.add(canonicalize_name(req.name))
    return found


def closure(names: set[str]) -> set[str]:
    env = default_environment()
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in md.requires(name) or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def imported_top_level_modules() -> set[str]:
    found = set()
    for path in (ROOT / "tracker").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "tracker"}


def test_every_imported_package_is_a_declared_dependency() -> None:
    declared = direct_requirements()
    owners = md.packages_distributions()
    undeclared = {}
    for module in sorted(imported_top_level_modules() - set(OPTIONAL)):
        dists = {canonicalize_name(d) for d in owners.get(module, [])}
        if not dists & declared:
            undeclared[module] = sorted(dists) or "not installed"
    assert undeclared == {}


ABSENT = """
import importlib, importlib.abc, json, pkgutil, sys
blocked = set(json.loads(sys.argv[1]))

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not a declared dependency)", name=name)
        return None

sys.meta_path.insert(0, Absent())
"""
IMPORT_ALL = ABSENT + """
import tracker
names = [i.name for i in pkgutil.walk_packages(tracker.__path__, "tracker.") if i.name != "tracker.__main__"]
for name in names:
    importlib.import_module(name)
print(json.dumps(names))
"""


def undeclared_modules() -> list[str]:
    """Top-level modules of the installed distributions that ``pip install upstream-tracker`` would not bring."""
    allowed = closure(direct_requirements())
    return sorted(
        module
        for module, dists in md.packages_distributions().items()
        if module not in sys.stdlib_module_names and module != "tracker" and module not in OPTIONAL
        and not {canonicalize_name(d) for d in dists} & allowed
    )


def test_importing_every_module_of_the_tracker_needs_only_declared_distributions() -> None:
    blocked = undeclared_modules()
    assert {"gguf", "httpx", "pytest"} <= set(blocked)  # test dependencies, not the tracker's (numpy is one: weight deltas)
    run = subprocess.run([sys.executable, "-c", IMPORT_ALL, json.dumps(blocked)], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    imported = json.loads(run.stdout.splitlines()[-1])
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
             for p in (ROOT / "tracker").rglob("*.py")} - {"tracker", "tracker.__main__"}
    assert set(imported) == files


CHECK_FORMATS = ABSENT + """
from tracker.core.advisory.validate import AdvisoryValidationError, validate
errors = []
for field, value in (("modified", "2026-02-30T10:15:00Z"), ("references", [{"type": "WEB", "url": "not a uri"}])):
    try:
        validate({"id": "x_HFUT-2026-0001", "modified": "2026-08-21T10:15:00Z", field: value})
    except AdvisoryValidationError as e:
        errors += e.errors
print(json.dumps(errors))
"""


def test_the_osv_formats_are_checked_with_only_declared_distributions() -> None:
    """jsonschema skips a format whose checker is not installed: without its own dependencies for them, the
    tracker would write an impossible date or a URL that is no URI while the tests (whose extras bring the
    checkers) reject it."""
    run = subprocess.run([sys.executable, "-c", CHECK_FORMATS, json.dumps(undeclared_modules())],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == [
        "modified: '2026-02-30T10:15:00Z' is not a 'date-time'", "references.0.url: 'not a uri' is not a 'uri'"]
