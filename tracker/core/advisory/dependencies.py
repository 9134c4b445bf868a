"""What Python packages a revision asks for, and its known vulnerabilities as findings. Pure.

Three sources, each with what it can honestly say:

* ``requirements.txt``: parsed line by line with ``packaging``'s ``Requirement``.
  Only an exact pin (``==1.2.3`` or ``===1.2.3``, no wildcard) names one version
  OSV.dev can check; anything else (a range, no specifier, a URL) is reported as
  unpinned, and lines that are options (``-r``, ``--index-url``) or unparsable are
  reported as skipped - never guessed.
* ``config.json`` ``transformers_version``: the transformers release the config
  was written with (``transformers`` at that version).
* remote code (``*.py`` that ``auto_map`` may load): every ``import`` in it,
  reduced to its top-level module, stdlib and the repo's own modules removed,
  mapped to the PyPI name (``IMPORT_TO_PYPI``: ``flash_attn`` -> ``flash-attn``).
  An import carries no version, so it is looked up only when another source
  pins that package; otherwise it is reported as unpinned. Unknown module names
  are listed in ``unmapped_imports`` rather than looked up under a guessed name.

Then :func:`vulnerability_findings` turns OSV.dev answers (``(name, version) ->
[{"id", "modified"}]``, the shape of :meth:`tracker.adapters.osvdev.OsvClient.querybatch`)
into ``dependencies.known_vulnerability`` findings (severity from
``findings/severity/dependencies.toml``) and the sorted ``related`` ids for the
revision's advisory.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding

__all__ = [
    "IMPORT_TO_PYPI",
    "DependencyScan",
    "PackageQuery",
    "Unpinned",
    "collect_dependencies",
    "normalise_name",
    "remote_code_imports",
    "unpinned_findings",
    "vulnerability_findings",
]

# Import name -> PyPI project, for the packages model remote code commonly imports.
# Names not listed here whose import name is their PyPI name are listed too, so
# that "mapped" always means "we know the project".
IMPORT_TO_PYPI: Mapping[str, str] = {
    "torch": "torch",
    "torchvision": "torchvision",
    "torchaudio": "torchaudio",
    "transformers": "transformers",
    "tokenizers": "tokenizers",
    "safetensors": "safetensors",
    "huggingface_hub": "huggingface-hub",
    "numpy": "numpy",
    "einops": "einops",
    "flash_attn": "flash-attn",
    "sentencepiece": "sentencepiece",
    "accelerate": "accelerate",
    "tiktoken": "tiktoken",
    "timm": "timm",
    "xformers": "xformers",
    "triton": "triton",
    "bitsandbytes": "bitsandbytes",
    "peft": "peft",
    "scipy": "scipy",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "cv2": "opencv-python",
    "yaml": "pyyaml",
    "requests": "requests",
    "regex": "regex",
    "google.protobuf": "protobuf",
    "google": "protobuf",
    "sentence_transformers": "sentence-transformers",
    "datasets": "datasets",
    "jinja2": "jinja2",
    "mamba_ssm": "mamba-ssm",
    "causal_conv1d": "causal-conv1d",
    "deepspeed": "deepspeed",
    "packaging": "packaging",
}


class PackageQuery(NamedTuple):
    """One lookup for OSV.dev: ``(ecosystem, name, version)``, name PEP 503-normalised."""

    ecosystem: str
    name: str
    version: str


@dataclass(frozen=True)
class Unpinned:
    """A dependency that names no single version: ``spec`` is what was written ("" for none)."""

    name: str
    spec: str
    source: str


@dataclass
class DependencyScan:
    """Everything :func:`collect_dependencies` found.

    ``queries``: what to look up (deduplicated, sorted); ``sources``: for each
    ``(name, version)``, where it came from (``requirements.txt:3``,
    ``config.json transformers_version``, ``import in modeling_x.py``);
    ``unpinned``, ``skipped`` (line or source, reason) and ``unmapped_imports``
    (module, file) say what could not be checked.
    """

    queries: list[PackageQuery] = field(default_factory=list)
    sources: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    unpinned: list[Unpinned] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unmapped_imports: list[tuple[str, str]] = field(default_factory=list)


def normalise_name(name: str) -> str:
    """PEP 503 normalisation (what OSV.dev does for PyPI names)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _text(value: str | bytes | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.decode("utf-8", "replace")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, content) with comments stripped and ``\\`` continuations joined."""
    out: list[tuple[int, str]] = []
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not buffer:
            start = number
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        if buffer.strip():
            out.append((start, buffer.strip()))
        buffer = ""
    if buffer.strip():
        out.append((start, buffer.strip()))
    return out


def _pinned_version(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if req.url or len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith(".*"):
        return None
    return specs[0].version


def remote_code_imports(files: Mapping[str, str | bytes]) -> tuple[set[str], list[tuple[str, str]]]:
    """Top-level modules imported by the given ``*.py`` files: (modules, [(file, reason)] unparsable).

    Every ``import``/``from ... import`` anywhere in the file counts (lazy
    imports inside functions run too); relative imports and the files' own
    modules are left out, as is the standard library.
    """
    own = {re.sub(r"\.py$", "", path.rsplit("/", 1)[-1]) for path in files}
    modules: set[str] = set()
    errors: list[tuple[str, str]] = []
    for path, source in sorted(files.items()):
        try:
            tree = ast.parse(_text(source) or "", filename=path)
        except (SyntaxError, ValueError) as exc:
            errors.append((path, f"not parsable as Python: {exc}"))
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".", 1)[0]
                if top in own or top in sys.stdlib_module_names or top == "__future__":
                    continue
                modules.add("google.protobuf" if name.startswith("google.protobuf") else top)
    return modules, errors


def collect_dependencies(
    *,
    requirements_txt: str | bytes | None = None,
    config: Mapping[str, Any] | None = None,
    remote_code: Mapping[str, str | bytes] | None = None,
) -> DependencyScan:
    """The PyPI packages a revision asks for, as lookups plus what could not be checked."""
    scan = DependencyScan()
    pinned: dict[str, set[str]] = {}

    def add(name: str, version: str, source: str) -> None:
        key = (normalise_name(name), version)
        pinned.setdefault(key[0], set()).add(version)
        scan.sources.setdefault(key, []).append(source)

    text = _text(requirements_txt)
    if text is not None:
        for number, line in _logical_lines(text):
            where = f"requirements.txt:{number}"
            if line.startswith("-"):
                scan.skipped.append((where, f"option line not followed: {line}"))
                continue
            try:
                req = Requirement(line)
            except InvalidRequirement as exc:
                scan.skipped.append((where, f"not a requirement: {exc}"))
                continue
            version = _pinned_version(req)
            if version is None:
                scan.unpinned.append(Unpinned(normalise_name(req.name), req.url or str(req.specifier), where))
            else:
                add(req.name, version, where)

    version = (config or {}).get("transformers_version")
    if version is not None:
        where = "config.json transformers_version"
        try:
            Version(str(version))
            add("transformers", str(version), where)
        except InvalidVersion:
            scan.skipped.append((where, f"not a PEP 440 version: {version!r}"))

    if remote_code:
        modules, errors = remote_code_imports(remote_code)
        scan.skipped.extend(errors)
        for module in sorted(modules):
            project = IMPORT_TO_PYPI.get(module)
            files = ", ".join(sorted(remote_code))
            if project is None:
                scan.unmapped_imports.append((module, files))
            elif normalise_name(project) in pinned:
                for v in sorted(pinned[normalise_name(project)]):
                    scan.sources[(normalise_name(project), v)].append(f"import {module} in remote code")
            else:
                scan.unpinned.append(Unpinned(normalise_name(project), "", f"import {module} in {files}"))

    scan.queries = sorted(PackageQuery("PyPI", name, version) for name, version in scan.sources)
    return scan


def vulnerability_findings(
    scan: DependencyScan,
    vulns: Mapping[tuple[str, str], list[Mapping[str, Any]]],
    rules: SeverityRules | None = None,
) -> tuple[list[Finding], list[str]]:
    """Findings for the looked-up packages with known vulnerabilities, and the sorted related ids.

    One ``dependencies.known_vulnerability`` finding per (package, version) with
    any vulnerability: ``after`` is the version, ``evidence`` holds the ids and
    where the pin came from. Lookups missing from ``vulns`` (failed, to retry)
    produce nothing.
    """
    rules = rules or SeverityRules.default()
    findings: list[Finding] = []
    related: set[str] = set()
    for query in scan.queries:
        key = (query.name, query.version)
        ids = sorted({str(v["id"]) for v in vulns.get(key) or []})
        if not ids:
            continue
        related.update(ids)
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        findings.append(
            rules.finding(
                "dependencies.known_vulnerability",
                "dependencies",
                f"{query.name} {query.version} has {len(ids)} known "
                f"vulnerabilit{'y' if len(ids) == 1 else 'ies'}: {shown}",
                path="requirements.txt" if any(s.startswith("requirements.txt") for s in scan.sources[key])
                else "config.json",
                after={"name": query.name, "version": query.version},
                evidence={"ids": ids, "sources": list(scan.sources[key])},
            )
        )
    return findings, sorted(related)


def unpinned_findings(scan: DependencyScan, rules: SeverityRules | None = None) -> list[Finding]:
    """One ``dependencies.unpinned_requirement`` finding per package that names no single version."""
    rules = rules or SeverityRules.default()
    return [
        rules.finding(
            "dependencies.unpinned_requirement",
            "dependencies",
            f"{u.name} is not pinned ({u.spec or 'no version'}): its vulnerabilities cannot be checked",
            path="requirements.txt" if u.source.startswith("requirements.txt") else None,
            after={"name": u.name, "spec": u.spec},
            evidence={"source": u.source},
        )
        for u in scan.unpinned
    ]
