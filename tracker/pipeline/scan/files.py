"""Which files of a codebase the scan reads: ``.gitignore`` honoured, environments and vendored trees skipped.

The walk never follows symbolic links (a link may point out of the tree, or
back into it), prunes ``.git``, ``node_modules``, virtual environments (any
folder holding ``pyvenv.cfg``, or conda's ``conda-meta``) and caches before
descending, and applies every ``.gitignore`` on the way down (plus
``.git/info/exclude`` at the root) with git's own rules, through ``pathspec``.

A hostile tree cannot hang or crash it. Patterns are matched by RE2 (pathspec's
``re2`` backend), whose time is linear in the path: a line of 40 ``*`` cannot
backtrack. The walk is a loop over a stack, not a recursion, and stops at
:data:`MAX_DEPTH` folders deep with a note. A folder that cannot be listed
(mode 000, removed while the walk runs) is a skipped entry, as is every folder
below the depth cap. Files are opened by :func:`open_regular`: ``O_NONBLOCK``
first, then ``S_ISREG``, so a FIFO named ``pipe.py`` is refused instead of
blocking ``open()`` forever.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from tracker.core.errors import first_line
from tracker.pipeline.scan.model import Skipped, SourceKind

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

MAX_DEPTH = 256
"""Folders below the root the walk descends; a deeper folder is a skipped entry (real trees stay under 30)."""
MAX_IGNORE_BYTES = 256 * 1024
"""Bytes of one ``.gitignore`` read; the rest of a larger one is ignored (real ones are a few kB)."""
MAX_IGNORE_PATTERNS = 2_000
"""Patterns of one ``.gitignore`` compiled; a longer one is not applied, with a note (RE2 compiles ~2,000 a second)."""
MAX_SCAN_IGNORE_PATTERNS = 20_000
"""Patterns compiled over one whole scan, so 1,000 folders of large ``.gitignore`` files cost seconds, not hours."""
GITIGNORE_BACKEND = "re2"
"""pathspec's matcher: RE2 runs in time linear in the path, whatever the pattern."""

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

    def below(self, base: str, folder: Path, reader: _IgnoreReader) -> _Ignores:
        """The ignores in force inside ``folder``: these plus its own ``.gitignore``, if any."""
        spec = reader.read(folder / ".gitignore", f"{base}/.gitignore" if base else ".gitignore")
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


class NotRegularFile(OSError):
    """The path is a FIFO, a device, a socket or a folder: never read."""


def open_regular(path: Path) -> int:
    """A read-only descriptor for ``path`` if, and only if, it is a regular file.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer;
    ``O_NOFOLLOW`` refuses a symbolic link put in place after the walk looked. The type
    is then checked on the open descriptor, so nothing can swap the file in between.
    The caller closes the descriptor.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({_file_type(mode)})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _file_type(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"


def read_regular(path: Path, limit: int) -> bytes:
    """Up to ``limit`` bytes of a regular file (see :func:`open_regular`); OSError otherwise."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(limit)


class _IgnoreReader:
    """Reads and compiles ``.gitignore`` files within one scan's budget; ``notes`` says what was not applied."""

    def __init__(self) -> None:
        self.notes: list[Skipped] = []
        self.budget = MAX_SCAN_IGNORE_PATTERNS

    def read(self, path: Path, relative: str) -> pathspec.GitIgnoreSpec | None:
        """A ``.gitignore`` compiled for RE2. Lines git would not match (bad ranges, a trailing ``\\``)
        are dropped, as git drops them; a file over the caps, or one RE2 cannot compile, is noted
        and not applied."""
        try:
            data = read_regular(path, MAX_IGNORE_BYTES)
        except OSError:
            return None
        patterns = []
        for line in data.decode("utf-8", errors="replace").splitlines():
            try:
                pattern = GitIgnoreSpecPattern(line)
            except (ValueError, re.error):
                continue
            if pattern.include is not None:  # not a comment or a blank line
                patterns.append(pattern)
        if not patterns:
            return None
        if len(patterns) > MAX_IGNORE_PATTERNS:
            self._refuse(relative, f"{len(patterns):,} patterns, over the cap of {MAX_IGNORE_PATTERNS:,}")
            return None
        if len(patterns) > self.budget:
            self._refuse(relative, f"over the budget of {MAX_SCAN_IGNORE_PATTERNS:,} patterns per scan")
            return None
        self.budget -= len(patterns)
        try:
            return pathspec.GitIgnoreSpec(patterns, backend=GITIGNORE_BACKEND)
        except Exception as exc:  # re2's own error type, e.g. past its program-size budget
            self._refuse(relative, first_line(exc))
            return None

    def _refuse(self, relative: str, why: str) -> None:
        self.notes.append(Skipped(relative, f"not applied: {why}"))


def is_environment(folder: Path) -> bool:
    """A virtualenv or conda environment; a folder that cannot be looked into is not one (it is skipped later)."""
    for marker in ENVIRONMENT_MARKERS:
        try:
            os.lstat(folder / marker)
        except OSError:
            continue
        return True
    return False


def walk(root: Path) -> Iterator[Candidate | Skipped]:
    """The files under ``root`` the scan reads, in a stable order (sorted per folder, depth first).

    Folders that cannot be read are yielded as :class:`Skipped` entries (``sub/``), in
    the place their files would have come.
    """
    if root.is_file():
        kind = KINDS.get(root.suffix.lower())
        if kind is not None:
            yield Candidate(root, root.name, kind)
        return
    ignores = _Ignores()
    reader = _IgnoreReader()
    exclude = reader.read(root / ".git" / "info" / "exclude", ".git/info/exclude")
    if exclude is not None:
        ignores = _Ignores((("", exclude),))
    # Each stack item: (folder, its relative path, the ignores in force above it, depth).
    stack: list[tuple[Path, str, _Ignores, int]] = [(root, "", ignores, 0)]
    while stack:
        folder, base, above, depth = stack.pop()
        if base and is_environment(folder):
            continue
        if depth > MAX_DEPTH:
            yield Skipped(base + "/", f"deeper than {MAX_DEPTH} folders; not read")
            continue
        try:
            with os.scandir(folder) as listing:
                items = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if not base:
                return  # the root itself: nothing to scan (the command says so)
            yield Skipped(base + "/", f"cannot read folder: {exc.strerror or exc}")
            continue
        here = above.below(base, folder, reader)
        yield from reader.notes
        reader.notes.clear()
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
                if entry.name in PRUNED_DIRS or here.ignored(relative, is_dir=True):
                    continue
                subfolders.append((Path(entry.path), relative, here, depth + 1))
                continue
            kind = KINDS.get(os.path.splitext(entry.name)[1].lower())
            if kind is not None and not here.ignored(relative, is_dir=False):
                yield Candidate(Path(entry.path), relative, kind)
        stack.extend(reversed(subfolders))  # popped in name order: the order a recursive walk gave
