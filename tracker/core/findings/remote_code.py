"""Python files in the repo: what changed, and whether loading the model runs it.

A ``*.py`` file in a model repo is inert until something imports it. The
something is usually ``transformers`` with ``trust_remote_code=True``, which
imports the module named in ``auto_map`` (``"modeling_phi.PhiForCausalLM"`` →
``modeling_phi.py``) and every module it imports relatively. A change to such a
file changes code that runs on the user's machine at load time, so it is
critical (``code.remote_code_changed``); any other ``.py`` change is
``code.python_changed``.

Each changed file is parsed with :mod:`ast` (never imported or executed) to
find new imports and new calls that reach the network, a shell, or dynamic
code evaluation; those are ``code.dangerous_call_added`` when the module is
loaded through ``auto_map`` and ``code.dangerous_call_added_unloaded`` when it
is not. A file that does not parse is ``code.unparseable`` (loading it would
fail), and a module ``auto_map`` still names but the revision deleted is
``code.remote_code_removed``.

Pure: reads only through ``inputs``.
"""

from __future__ import annotations

import ast
import posixpath
from collections import Counter
from collections.abc import Mapping
from typing import Any

from tracker.core.bounded import loads_json
from tracker.core.diff import text_diff
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import FileEntry, Finding, RevisionChange

CATEGORY = "code"

AUTO_MAP_FILES = ("config.json", "tokenizer_config.json", "preprocessor_config.json", "processor_config.json",
                  "feature_extractor_config.json", "image_processor_config.json")
"""Files whose ``auto_map`` transformers follows with ``trust_remote_code``."""

MAX_SOURCE_BYTES = 2 * 1024 * 1024
"""Larger ``.py`` files are reported but not parsed (no real modeling file comes close)."""
MAX_DIFF_LINES = 200
MAX_DIFF_CHARS = 20_000
MAX_CONFIG_BYTES = 4 * 1024 * 1024

# Dotted call targets, by what they reach. A prefix ending in "." matches a whole module.
DANGEROUS_CALLS: dict[str, tuple[str, ...]] = {
    "network": (
        "socket.", "urllib.", "urllib2.", "urllib3.", "requests.", "httpx.", "http.client.", "aiohttp.",
        "ftplib.", "smtplib.", "telnetlib.", "websocket.", "websockets.", "paramiko.",
        "huggingface_hub.hf_hub_download", "huggingface_hub.snapshot_download", "torch.hub.",
    ),
    "shell": (
        "os.system", "os.popen", "os.exec*", "os.spawn*", "os.posix_spawn*", "os.fork", "os.startfile",
        "subprocess.", "pty.", "commands.", "multiprocessing.Process",
    ),
    "eval": (
        "eval", "exec", "compile", "__import__", "builtins.eval", "builtins.exec", "builtins.compile",
        "builtins.__import__", "importlib.", "runpy.", "pickle.load", "pickle.loads", "marshal.loads",
        "ctypes.", "types.CodeType", "types.FunctionType",
    ),
}


def _decode(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", errors="replace")


def _module_paths(reference: str) -> list[str]:
    """``"modeling_phi.PhiForCausalLM"`` → ``["modeling_phi.py"]``; external ``owner/repo--m.C`` → []."""
    if not isinstance(reference, str) or "--" in reference or "." not in reference:
        return []
    module = reference.rsplit(".", 1)[0]
    return sorted({f"{module}.py", module.replace(".", "/") + ".py"})


def auto_map_modules(change: RevisionChange, inputs: RevisionInputs) -> dict[str, list[str]]:
    """``{module path: ["config.json:AutoModelForCausalLM", ...]}`` for the new revision's auto_maps."""
    present = change.new.by_path()
    refs: dict[str, list[str]] = {}
    for config in AUTO_MAP_FILES:
        if config not in present:
            continue
        raw = inputs.text("new", config)
        if raw is None or len(raw) > MAX_CONFIG_BYTES:
            continue
        try:
            data = loads_json(raw)
        except ValueError:  # malformed, not UTF-8, or over a depth/size bound
            continue  # the config analyser reports a malformed config
        auto_map = data.get("auto_map") if isinstance(data, dict) else None
        if not isinstance(auto_map, dict):
            continue
        for key, value in auto_map.items():
            for reference in value if isinstance(value, list) else [value]:
                for path in _module_paths(reference):
                    refs.setdefault(path, []).append(f"{config}:{key}")
    return {p: sorted(set(v)) for p, v in refs.items()}


def _parse(text: str) -> ast.Module | str:
    """The module's AST, or the reason it does not parse."""
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _relative_imports(tree: ast.Module, path: str) -> set[str]:
    """Sibling modules a file imports relatively (``from .configuration_phi import X``)."""
    base = posixpath.dirname(path)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            folder = base
            for _ in range(node.level - 1):
                folder = posixpath.dirname(folder)
            if node.module:
                out.add(posixpath.join(folder, node.module.replace(".", "/") + ".py"))
            else:
                out.update(posixpath.join(folder, a.name + ".py") for a in node.names)
    return out


def loaded_modules(
    direct: Mapping[str, list[str]], new: Mapping[str, FileEntry], inputs: RevisionInputs
) -> dict[str, list[str]]:
    """auto_map modules plus everything they import relatively, with who pulls each in."""
    loaded = {p: list(v) for p, v in direct.items() if p in new}
    queue = sorted(loaded)
    while queue:
        path = queue.pop(0)
        raw = inputs.text("new", path)
        if raw is None or len(raw) > MAX_SOURCE_BYTES:
            continue
        tree = _parse(_decode(raw) or "")
        if isinstance(tree, str):
            continue
        for dep in sorted(_relative_imports(tree, path)):
            if dep in new and dep not in loaded:
                loaded[dep] = [f"imported by {path}"]
                queue.append(dep)
    return loaded


class _Calls(ast.NodeVisitor):
    """Dotted names of call targets, with import aliases resolved."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.imports: set[str] = set()
        self.calls: list[tuple[str, int]] = []

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.imports.add(a.name)
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = ("." * node.level) + (node.module or "")
        self.imports.add(module)
        for a in node.names:
            if a.name != "*":
                self.aliases[a.asname or a.name] = f"{module}.{a.name}" if node.level == 0 else a.name

    def _name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self._name(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def visit_Call(self, node: ast.Call) -> None:
        name = self._name(node.func)
        if name:
            self.calls.append((name, node.lineno))
        self.generic_visit(node)


def _kind(name: str) -> str | None:
    """Which of network / shell / eval a dotted call target reaches, if any.

    A pattern ending in ``.`` covers a whole module; ``*`` a name prefix
    (``os.exec*`` = execv, execl, ...); anything else must match exactly.
    """
    for kind, patterns in DANGEROUS_CALLS.items():
        for p in patterns:
            if p.endswith(".") and name.startswith(p):
                return kind
            if p.endswith("*") and name.startswith(p[:-1]):
                return kind
            if name == p:
                return kind
    return None


def _analyse_source(tree: ast.Module) -> tuple[set[str], list[tuple[str, str, int]]]:
    """(imports, [(kind, call, line)]) for one parsed module."""
    v = _Calls()
    v.visit(tree)
    dangerous = [(k, name, line) for name, line in v.calls if (k := _kind(name))]
    return v.imports, dangerous


def _diff(old: str, new: str, path: str) -> tuple[str, int | None, int | None, bool]:
    """``(diff, lines added, lines removed, truncated)``; the counts are None when the texts were
    too large to align (the diff is then one line of hashes and line counts)."""
    diff = text_diff(old, new, path, context=2, max_lines=MAX_DIFF_LINES)
    text = diff.text(trailer=False)
    truncated = diff.truncated or not diff.diffed or len(text) > MAX_DIFF_CHARS
    return text[:MAX_DIFF_CHARS], diff.added, diff.removed, truncated


@analyser(library=None, order=120)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    old = change.old.by_path() if change.old is not None else {}
    new = change.new.by_path()
    changed = [p for p in sorted(new) if p.endswith(".py") and (p not in old or old[p].content_id != new[p].content_id)]
    removed = [p for p in sorted(old) if p.endswith(".py") and p not in new]
    if not changed and not removed:
        return []
    direct = auto_map_modules(change, inputs)
    loaded = loaded_modules(direct, new, inputs)
    out: list[Finding] = []
    for path in removed:
        if path in direct:
            out.append(rules.finding(
                "code.remote_code_removed", CATEGORY,
                f"{path} removed but {', '.join(direct[path])} still loads it: trust_remote_code loading fails",
                path=path, before=old[path].content_id, evidence={"referenced_by": direct[path]},
            ))
    for path in changed:
        out.extend(_one_file(path, path not in old, loaded.get(path), inputs, rules))
    return out


def _one_file(
    path: str, added: bool, referenced_by: list[str] | None, inputs: RevisionInputs, rules: SeverityRules
) -> list[Finding]:
    new_text = _decode(inputs.text("new", path))
    old_text = "" if added else _decode(inputs.text("old", path))
    verb = "added" if added else "changed"
    evidence: dict[str, Any] = {"added": added, "referenced_by": referenced_by or []}
    stats = ""
    if new_text is not None and old_text is not None:
        diff, plus, minus, truncated = _diff(old_text, new_text, path)
        evidence.update(diff=diff, lines_added=plus, lines_removed=minus, diff_truncated=truncated)
        stats = f" (+{plus} −{minus} lines)" if plus is not None else " (too large to diff)"
    else:
        evidence["diff"] = None  # a side could not be read; the reader recorded why
    out: list[Finding] = []
    new_tree: ast.Module | str | None = None
    if new_text is not None and len(new_text) <= MAX_SOURCE_BYTES:
        new_tree = _parse(new_text)
    old_tree = _parse(old_text) if old_text and len(old_text) <= MAX_SOURCE_BYTES else None
    dangerous_new: list[tuple[str, str, int]] = []
    if isinstance(new_tree, ast.Module):
        imports_new, dangerous_new = _analyse_source(new_tree)
        imports_old, dangerous_old = (
            _analyse_source(old_tree) if isinstance(old_tree, ast.Module) else (set(), [])
        )
        evidence["new_imports"] = sorted(imports_new - imports_old)
        before_counts = Counter((k, n) for k, n, _ in dangerous_old)
        after_counts = Counter((k, n) for k, n, _ in dangerous_new)
        grown = {key for key, count in after_counts.items() if count > before_counts.get(key, 0)}
        dangerous_new = [(k, n, line) for k, n, line in dangerous_new if (k, n) in grown]
    if referenced_by:
        code = "code.remote_code_changed"
        summary = f"remote code {verb}: {path}{stats}; loaded with trust_remote_code via {', '.join(referenced_by)}"
    else:
        code = "code.python_changed"
        summary = f"Python file {verb}: {path}{stats}; not referenced by auto_map"
    out.append(rules.finding(code, CATEGORY, summary, path=path, evidence=evidence))
    if isinstance(new_tree, str):
        out.append(rules.finding(
            "code.unparseable", CATEGORY, f"{path} does not parse: {new_tree}",
            path=path, after=new_tree, evidence={"referenced_by": referenced_by or []},
        ))
    if dangerous_new:
        kinds = sorted({k for k, _, _ in dangerous_new})
        calls = sorted({n for _, n, _ in dangerous_new})
        out.append(rules.finding(
            "code.dangerous_call_added" if referenced_by else "code.dangerous_call_added_unloaded",
            CATEGORY,
            f"{path} now calls {', '.join(calls[:5])}{' …' if len(calls) > 5 else ''} ({', '.join(kinds)})",
            path=path,
            after=calls,
            evidence={"calls": [{"kind": k, "call": n, "line": line} for k, n, line in dangerous_new[:50]],
                      "referenced_by": referenced_by or []},
        ))
    return out
