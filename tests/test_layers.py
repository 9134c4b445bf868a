"""tracker/'s folders are layers: a module imports only from its own layer or the ones below
(surfaces -> app -> pipeline -> adapters -> core), lazy imports included; type-only imports aside."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tracker"
RANK = {"core": 0, "adapters": 1, "pipeline": 2, "app": 3, "usecases": 3, "surfaces": 4}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else None


def _upward_imports(path: Path, root: Path = ROOT) -> list[str]:
    source = _layer(".".join(path.relative_to(root.parent).with_suffix("").parts))
    if source is None:
        return []
    tree = ast.parse(path.read_text())
    type_only = {id(node) for block in ast.walk(tree)
                 if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
                 for node in ast.walk(block)}
    found = []
    for node in ast.walk(tree):
        if id(node) in type_only or not isinstance(node, ast.ImportFrom) or not node.module:
            continue
        target = _layer(node.module) if node.module.startswith("tracker.") else None
        if target is not None and RANK[target] > RANK[source]:
            found.append(f"{path.relative_to(root.parent)}:{node.lineno} imports {node.module}")
    return found


def test_every_import_points_down_the_layers():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _upward_imports(path)]
    assert found == []


def test_the_check_sees_an_upward_import(tmp_path):
    core = tmp_path / "tracker" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text("def f():\n    from tracker.app import make_tracker\n")
    assert _upward_imports(core / "bad.py", tmp_path / "tracker") == ["tracker/core/bad.py:2 imports tracker.app"]


def _private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """``from x import _name`` (and ``import x._name``) of tracker's modules: a private name used from
    another module. Ruff's SLF001 sees ``x._name`` only, not an import of it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("tracker")):
            names = [a.name for a in node.names]
            if node.module:
                names += node.module.split(".")
        elif isinstance(node, ast.Import):
            names = [part for a in node.names if a.name.startswith("tracker.") for part in a.name.split(".")]
        else:
            continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        if private:
            found.append(f"{path.relative_to(root.parent)}:{node.lineno} imports {', '.join(private)}")
    return found


def test_no_module_imports_a_private_name_of_another():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _private_imports(path)]
    assert found == []


def test_the_check_sees_a_private_import(tmp_path):
    core = tmp_path / "tracker" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text(
        "from tracker.core.advisory.affected import graph_commits, _hidden\n"
        "from . import _sibling as s\n"
        "import tracker.core._internal\n"
        "from collections import _private_of_the_stdlib\n"
        "from tracker.core import model, __version__\n")
    assert _private_imports(core / "bad.py", tmp_path / "tracker") == [
        "tracker/core/bad.py:1 imports _hidden",
        "tracker/core/bad.py:2 imports _sibling",
        "tracker/core/bad.py:3 imports _internal",
    ]
