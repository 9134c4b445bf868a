"""Which files of a codebase the scan reads: ``.gitignore`` honoured, environments and vendored trees skipped.

The walk never follows symbolic links (a link may point out of the tree, or
back into it), prunes ``.git``, ``node_modules``, virtual environments (any
folder holding ``pyvenv.cfg``, or conda's ``conda-meta``) and caches before
descending, and applies every ``.gitignore`` on the way down (plus
``.git/info/exclude`` at the root) with git's own rules, through ``pathspec``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

from tracker.scan.model import SourceKind

# Folders never worth reading, whatever .gitignore says.
PRUNED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", "site-packages", ".eggs",
})
# A folder holding one of these is an environment (virtualenv, venv, conda), whatever its name.
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")

KINDS = {
    ".py": SourceKind.PYTHON,
    ".ipynb": SourceKind.NOTEBOOK,
    ".yaml": SourceKind.YAML,
    ".yml": SourceKind.YAML,
    ".json": SourceKind.JSON,
    ".toml": SourceKind.TOML,
}

# Read caps: a source or config file past these is skipped (and reported), not read in part.
MAX_BYTES = {kind: 2 * 1024 * 1024 for kind in SourceKind}
MAX_BYTES[SourceKind.NOTEBOOK] = 32 * 1024 * 1024  # outputs (images) make notebooks large


@dataclass(frozen=True)
class Candidate:
    """A file to read: its path, its path relative to the root (POSIX), and what it holds."""

    path: Path
    relative: str
    kind: SourceKind


class _Ignores:
    """The ``.gitignore`` files in force in one folder, outermost first, each with its own base."""

    def __init__(self, specs: tuple[tuple[str, pathspec.GitIgnoreSpec], ...] = ()) -> None:
        self.specs = specs

    def below(self, base: str, folder: Path) -> _Ignores:
        spec = _read_spec(folder / ".gitignore")
        return _Ignores((*self.specs, (base, spec))) if spec is not None else self

    def ignored(self, relative: str, *, is_dir: bool) -> bool:
        """Git's rule: the last pattern that matches decides, deeper files after shallower ones."""
        verdict = False
        for base, spec in self.specs:
            if base and not relative.startswith(base + "/"):
                continue
            path = relative[len(base) + 1:] if base else relative
            result = spec.check_file(path + "/" if is_dir else path)
            if result.include is not None:
                verdict = result.include
        return verdict


def _read_spec(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            lines = handle.read(1024 * 1024).splitlines()
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


def is_environment(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in ENVIRONMENT_MARKERS)


def walk(root: Path) -> Iterator[Candidate]:
    """The files under ``root`` the scan reads, in a stable order (sorted per folder)."""
    if root.is_file():
        kind = KINDS.get(root.suffix.lower())
        if kind is not None:
            yield Candidate(root, root.name, kind)
        return
    ignores = _Ignores()
    exclude = _read_spec(root / ".git" / "info" / "exclude")
    if exclude is not None:
        ignores = _Ignores((("", exclude),))
    yield from _walk(root, "", ignores.below("", root))


def _walk(folder: Path, base: str, ignores: _Ignores) -> Iterator[Candidate]:
    try:
        with os.scandir(folder) as entries:
            items = sorted(entries, key=lambda e: e.name)
    except OSError:
        return
    subfolders = []
    for entry in items:
        relative = f"{base}/{entry.name}" if base else entry.name
        try:
            if entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if entry.name in PRUNED_DIRS or ignores.ignored(relative, is_dir=True):
                continue
            subfolders.append((Path(entry.path), relative))
            continue
        kind = KINDS.get(os.path.splitext(entry.name)[1].lower())
        if kind is not None and not ignores.ignored(relative, is_dir=False):
            yield Candidate(Path(entry.path), relative, kind)
    for path, relative in subfolders:
        if is_environment(path):
            continue
        yield from _walk(path, relative, ignores.below(relative, path))
