"""Consumers are typed on the ports (tracker/pipeline/ports.py), not on the store's implementation: only the
store package itself and the composition root (tracker/app.py) name ``SqlStore``, lazy imports and
annotations included (a docstring may mention it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tracker"
ALLOWED = ("adapters/store/", "app.py")


def _names_sqlstore(path: Path) -> list[int]:
    """The lines of ``path`` whose code names SqlStore (an import, a name, an attribute, a quoted annotation)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.alias) and node.name.rsplit(".", 1)[-1] == "SqlStore":
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "SqlStore":
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "SqlStore":
            lines.append(node.lineno)
        elif isinstance(node, ast.arg | ast.AnnAssign | ast.FunctionDef) and _quoted(node):
            lines.append(node.lineno)
    return sorted(set(lines))


def _quoted(node: ast.arg | ast.AnnAssign | ast.FunctionDef) -> bool:
    annotation = node.returns if isinstance(node, ast.FunctionDef) else node.annotation
    return (isinstance(annotation, ast.Constant) and isinstance(annotation.value, str)
            and "SqlStore" in annotation.value)


def test_only_the_store_and_the_composition_root_name_sqlstore():
    found = [f"{path.relative_to(ROOT.parent)}:{line}" for path in sorted(ROOT.rglob("*.py"))
             if not str(path.relative_to(ROOT)).startswith(ALLOWED) for line in _names_sqlstore(path)]
    assert found == []


def test_the_check_sees_each_way_of_naming_it(tmp_path):
    module = tmp_path / "consumer.py"
    module.write_text('"""Typed on SqlStore? Not here."""\n'
                      "from tracker.adapters.store import SqlStore\n"
                      "import tracker.adapters.store as s\n"
                      "def f(store: s.SqlStore) -> None:\n"
                      "    pass\n"
                      "def g(store: 'SqlStore') -> None:\n"
                      "    from tracker.adapters.store.store import SqlStore as Impl\n")
    assert _names_sqlstore(module) == [2, 4, 6, 7]

