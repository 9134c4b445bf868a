"""tracker/'s folders are layers: a module imports only from its own layer or the ones below
(surfaces -> app -> pipeline -> adapters -> core), lazy imports included; type-only imports aside."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tracker"
RANK = {"core": 0, "adapters": 1, "pipeline": 2, "app": 3, "services": 3, "surfaces": 4}


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


def _imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, by line: ``import x.y`` and ``from x.y import z`` (as ``x.y`` and
    ``x.y.z``), lazy and type-only imports included; relative imports resolved against ``path``'s package."""
    package = list(path.relative_to(root.parent).parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            found += [(node.lineno, base), *((node.lineno, f"{base}.{alias.name}") for alias in node.names)]
    return found


def _pipeline_adapter_imports(path: Path, root: Path = ROOT) -> list[str]:
    """The pipeline's imports of an adapter: it reaches them only through the ports (tracker/pipeline/ports.py),
    which the composition root (tracker/app.py) fills in; type-only imports count too."""
    relative = path.relative_to(root.parent)
    if relative.parts[:2] != ("tracker", "pipeline"):
        return []
    return [f"{relative}:{line} imports {module}" for line, module in _imported_modules(path, root)
            if module == "tracker.adapters" or module.startswith("tracker.adapters.")]


def _core_outward_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Core's imports of any other layer of the tracker, type-only ones included: core is pure."""
    relative = path.relative_to(root.parent)
    if relative.parts[:2] != ("tracker", "core"):
        return []
    return sorted({f"{relative}:{line} imports {module}" for line, module in _imported_modules(path, root)
                   if module.startswith("tracker.") and not module.startswith("tracker.core")
                   and module.split(".")[1] in RANK})


def _huggingface_hub_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Imports of huggingface_hub outside the Hub adapter (tracker/adapters/hub/), lazy ones included."""
    relative = path.relative_to(root.parent)
    if relative.parts[:3] == ("tracker", "adapters", "hub"):
        return []
    return sorted({f"{relative}:{line} imports huggingface_hub" for line, module in _imported_modules(path, root)
                   if module.split(".")[0] == "huggingface_hub"})


def test_the_pipeline_reaches_adapters_only_through_its_ports():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _pipeline_adapter_imports(path)]
    assert found == []


def test_core_imports_no_other_layer_not_even_for_a_type():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _core_outward_imports(path)]
    assert found == []


def test_the_check_sees_core_naming_an_adapter_for_a_type(tmp_path):
    core = tmp_path / "tracker" / "core"
    core.mkdir(parents=True)
    (core / "bad.py").write_text("from typing import TYPE_CHECKING\nfrom tracker.core.model import RepoId\n"
                                 "if TYPE_CHECKING:\n    from tracker.adapters.store import pages\n"
                                 "    from ..pipeline import ports\n")
    assert _core_outward_imports(core / "bad.py", tmp_path / "tracker") == [
        "tracker/core/bad.py:4 imports tracker.adapters.store",
        "tracker/core/bad.py:4 imports tracker.adapters.store.pages",
        "tracker/core/bad.py:5 imports tracker.pipeline",
        "tracker/core/bad.py:5 imports tracker.pipeline.ports",
    ]


def test_only_the_hub_adapter_imports_huggingface_hub():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _huggingface_hub_imports(path)]
    assert found == []


def test_the_checks_see_an_adapter_in_the_pipeline_and_huggingface_hub_elsewhere(tmp_path):
    pipeline = tmp_path / "tracker" / "pipeline"
    (pipeline / "scan").mkdir(parents=True)
    hub = tmp_path / "tracker" / "adapters" / "hub"
    hub.mkdir(parents=True)
    (pipeline / "bad.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from tracker.adapters import metrics\n"
        "from tracker.core.model import RepoId\n"
        "if TYPE_CHECKING:\n"
        "    from tracker.adapters.settings import Settings\n"
        "def f():\n"
        "    import tracker.adapters.store\n"
        "    from huggingface_hub import HfApi\n")
    (pipeline / "scan" / "rel.py").write_text("from ...adapters.hub import HubClient\nfrom .. import ports\n")
    (hub / "client.py").write_text("import huggingface_hub.errors\n")
    (pipeline / "ok.py").write_text('"""huggingface_hub\'s layout, tracker.adapters.metrics: named, not imported."""\n'
                                    "from tracker.pipeline.ports import Store\n")
    root = tmp_path / "tracker"
    assert _pipeline_adapter_imports(pipeline / "bad.py", root) == [
        "tracker/pipeline/bad.py:2 imports tracker.adapters",
        "tracker/pipeline/bad.py:2 imports tracker.adapters.metrics",
        "tracker/pipeline/bad.py:5 imports tracker.adapters.settings",
        "tracker/pipeline/bad.py:5 imports tracker.adapters.settings.Settings",
        "tracker/pipeline/bad.py:7 imports tracker.adapters.store",
    ]
    assert _pipeline_adapter_imports(pipeline / "scan" / "rel.py", root) == [
        "tracker/pipeline/scan/rel.py:1 imports tracker.adapters.hub",
        "tracker/pipeline/scan/rel.py:1 imports tracker.adapters.hub.HubClient",
    ]
    assert _huggingface_hub_imports(pipeline / "bad.py", root) == ["tracker/pipeline/bad.py:8 imports huggingface_hub"]
    assert _huggingface_hub_imports(hub / "client.py", root) == []
    assert _pipeline_adapter_imports(pipeline / "ok.py", root) == []
    assert _huggingface_hub_imports(pipeline / "ok.py", root) == []


# The surfaces (CLI, API, pages) reach the store and the Hub only through the services (tracker/services/).
# What stays: the demo's ``hub.store`` is the Hub stand-in's own folder of repos (tracker/surfaces/web/demo.py
# builds a stand-in beside its Tracker), not the Tracker's store.
SURFACE_REACH_ALLOWED = {("tracker/surfaces/web/demo.py", "hub.store")}


def _surface_reaches(path: Path, root: Path = ROOT) -> list[str]:
    """A surface's imports of the store adapter, and its uses of the Tracker's ``.store`` or ``.hub``
    (``tracker.store``, ``state.tracker.hub``, ``obj.tracker().store``, ``hub.store``...), lazy ones included;
    a report's own ``hub`` line (``report.hub``) is no Tracker's."""
    relative = path.relative_to(root.parent)
    if relative.parts[:2] != ("tracker", "surfaces"):
        return []
    tree = ast.parse(path.read_text())
    found = [f"{relative}:{line} imports {module}" for line, module in _imported_modules(path, root)
             if module == "tracker.adapters.store" or module.startswith("tracker.adapters.store.")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("store", "hub") \
                and ast.unparse(node.value).removesuffix("()").split(".")[-1] in ("tracker", "hub"):
            used = ast.unparse(node)
            if (relative.as_posix(), used) not in SURFACE_REACH_ALLOWED:
                found.append(f"{relative}:{node.lineno} uses {used}")
    return sorted(set(found))


def test_the_surfaces_reach_the_store_and_the_hub_only_through_the_services():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _surface_reaches(path)]
    assert found == []


def test_the_check_sees_a_surface_reaching_the_store_or_the_hub(tmp_path):
    cli = tmp_path / "tracker" / "surfaces" / "cli"
    cli.mkdir(parents=True)
    (cli / "bad.py").write_text(
        "from tracker.services import Watching\n"
        "def f(tracker, state):\n"
        "    from tracker.adapters.store.db import describe_url\n"
        "    rows = tracker.store.repos.all()\n"
        "    state.tracker.hub.endpoint\n"
        "    obj.tracker().store.outbox\n"
        "    report.hub\n"
        "    return Watching(tracker).repos()\n")
    (cli / "ok.py").write_text('"""tracker.store and tracker.hub: named in a docstring, not used."""\n'
                               "from tracker.services import Polling\n")
    root = tmp_path / "tracker"
    assert _surface_reaches(cli / "bad.py", root) == [
        "tracker/surfaces/cli/bad.py:3 imports tracker.adapters.store.db",
        "tracker/surfaces/cli/bad.py:3 imports tracker.adapters.store.db.describe_url",
        "tracker/surfaces/cli/bad.py:4 uses tracker.store",
        "tracker/surfaces/cli/bad.py:5 uses state.tracker.hub",
        "tracker/surfaces/cli/bad.py:6 uses obj.tracker().store",
    ]
    assert _surface_reaches(cli / "ok.py", root) == []


# What core may not import: processes, sockets, threads, the file system's side of the standard library,
# and any client of the network. Core computes; the adapters do the I/O and the pipeline hands core its inputs.
IO_MODULES = frozenset({
    "subprocess", "socket", "ssl", "select", "selectors", "signal", "threading", "_thread", "multiprocessing",
    "concurrent", "asyncio", "atexit", "shutil", "tempfile", "http", "urllib", "ftplib", "smtplib", "requests",
    "httpx", "urllib3", "aiohttp", "psutil", "sqlalchemy", "psycopg", "huggingface_hub", "hf_xet",
})


def _core_io_imports(path: Path, root: Path = ROOT) -> list[str]:
    """Core's imports of a module that starts processes or threads, or speaks to the network or the disk."""
    relative = path.relative_to(root.parent)
    if relative.parts[:2] != ("tracker", "core"):
        return []
    return sorted({f"{relative}:{line} imports {module}" for line, module in _imported_modules(path, root)
                   if module.split(".")[0] in IO_MODULES})


def test_core_imports_no_process_thread_or_network_module():
    found = [line for path in sorted(ROOT.rglob("*.py")) for line in _core_io_imports(path)]
    assert found == []


def test_the_check_sees_core_starting_a_process(tmp_path):
    core = tmp_path / "tracker" / "core" / "findings"
    core.mkdir(parents=True)
    (core / "bad.py").write_text("import json\ndef f():\n    import subprocess\n    from threading import Lock\n"
                                 "    from urllib.request import urlopen\n")
    assert _core_io_imports(core / "bad.py", tmp_path / "tracker") == [
        "tracker/core/findings/bad.py:3 imports subprocess",
        "tracker/core/findings/bad.py:4 imports threading",
        "tracker/core/findings/bad.py:4 imports threading.Lock",
        "tracker/core/findings/bad.py:5 imports urllib.request",
        "tracker/core/findings/bad.py:5 imports urllib.request.urlopen",
    ]


def test_every_analyser_reads_a_revision_inputs_and_holds_no_hub_handle():
    """Each registered analyser takes (change, inputs: RevisionInputs, rules, *keyword-only extras): no reader,
    no Hub client, no store; the one extra service is the template renderer, a core port."""
    import inspect
    import typing

    from tracker.core.findings.inputs import RevisionInputs
    from tracker.core.findings.registry import registered
    from tracker.core.findings.rules import SeverityRules
    from tracker.core.model import RevisionChange
    from tracker.core.templates import TemplateRenderer

    for entry in registered():
        hints = typing.get_type_hints(entry.analyse)
        params = list(inspect.signature(entry.analyse).parameters.values())
        positional = [p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        assert [hints[name] for name in positional] == [RevisionChange, RevisionInputs, SeverityRules], entry.name
        extras = {p.name: hints[p.name] for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert set(extras) <= {"renderer", "only", "max_content_sniffs"}, entry.name
        assert ("renderer" in extras) == entry.renders, entry.name
        if entry.renders:
            assert extras["renderer"] == TemplateRenderer | None, entry.name
