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
