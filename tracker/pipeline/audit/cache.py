"""What a Hugging Face cache holds, walked by the tracker under huggingface_hub's layout rules.

The adapter between the cache's layout and the audit: model revisions with their refs,
size and last access; everything else (datasets, Spaces, canonical ids without an owner,
folders that are not cache repos, links out of the cache, refs that cannot be read) listed as
skipped, with the reason. A cache that cannot be read at all raises :class:`CacheUnreadable`,
whose message is one line.

Why not huggingface_hub's ``scan_cache_dir()``: it follows every link it meets (a snapshot
linked to ``/`` walks the filesystem, and is audited as a revision of the files it finds), reads
each ref whole with a blocking ``open()`` (a FIFO at ``refs/main`` hangs it, a link to
``/dev/zero`` reads until ``MemoryError``), and lets one unreadable ref abort the whole scan. The
walk below keeps its layout (``models--owner--name/{refs,snapshots,blobs}``, the files it
ignores, the shared blob store) and its messages for folders that are not cache repos, but:

- a link that resolves outside the cache folder is never followed: the entry holding it is
  skipped, naming the link;
- a ref is opened with ``O_NONBLOCK``, read only when it is a regular file, and at most 1 KiB;
- an entry that cannot be read (a looping link, ``EACCES``) is skipped with one line, and the
  rest of the cache is audited.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tracker.core.errors import TrackerError, first_line
from tracker.core.model import SHA_RE, RepoId, validate_repo_id

MAX_REPOS = 20_000  # cache repos read at most; a cache past this is not one a machine serves from
MAX_REVISIONS_PER_REPO = 1_000
MAX_FILES_PER_REVISION = 100_000  # files walked in one snapshot; a model's snapshot holds far fewer
MAX_REFS_PER_REPO = 10_000
MAX_REF_BYTES = 1024  # a ref holds a 40-character commit sha
MAX_DEPTH = 64  # folders nested in a snapshot or under refs/ (a repo's files are a few levels deep)

IGNORED = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})  # as huggingface_hub ignores them
KINDS = {"models": "model", "datasets": "dataset", "spaces": "space"}
SHARED_BLOBS = "blobs"  # huggingface_hub's shared blob store at the cache's top, marked by the file below
SHARED_BLOBS_MARKER = ".huggingface-shared-blobs"


class CacheUnreadable(TrackerError):
    """The cache folder does not exist, is not a folder, cannot be read, or holds no cache repo."""


class BadEntry(Exception):
    """One cache entry that is not read: ``reason`` says why, in a phrase."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class CachedRevision:
    """One cached snapshot of a model repo."""

    repo: RepoId
    sha: str
    refs: tuple[str, ...]  # the refs (branches, tags, ``refs/pr/1``) the cache says point at it
    size: int  # bytes on disk, each blob once
    files: int
    last_accessed: datetime  # the newest access of any of its files (the folder's own time when empty)
    last_modified: datetime
    path: str  # the snapshot folder, relative to the cache folder


@dataclass(frozen=True)
class SkippedRepo:
    """A cache entry not audited: ``name`` as the cache names it (``dataset/owner/name``, or the folder)."""

    name: str
    kind: str  # model, dataset, space, or unknown
    reason: str


@dataclass(frozen=True)
class CacheContents:
    path: str
    revisions: tuple[CachedRevision, ...]
    skipped: tuple[SkippedRepo, ...]


def default_cache_dir(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    """The cache huggingface_hub uses: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``~/.cache/huggingface/hub``.

    Read at call time, as huggingface_hub's ``constants`` does at import, so that the
    environment the command runs in is the one that counts.
    """
    env = os.environ if environ is None else environ
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME") or os.path.join("~", ".cache"),
                                              "huggingface")
    cache = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(cache)))


def _time(stamp: float) -> datetime:
    return datetime.fromtimestamp(stamp, UTC).replace(microsecond=0)


def read_cache(folder: Path) -> CacheContents:
    """The model revisions in the cache at ``folder`` and the entries skipped."""
    if not folder.exists():
        raise CacheUnreadable(f"no Hugging Face cache at {folder}: the folder does not exist "
                              "(give --cache-dir, or set HF_HUB_CACHE or HF_HOME)")
    if not folder.is_dir():
        raise CacheUnreadable(f"{folder} is not a folder: --cache-dir takes the cache folder (HF_HUB_CACHE)")
    try:
        root = folder.resolve()
        entries = sorted(root.iterdir())
    except OSError as exc:
        raise CacheUnreadable(f"cannot read the cache at {folder}: {exc.strerror or first_line(exc)}") from exc
    if len(entries) > MAX_REPOS:
        raise CacheUnreadable(f"{folder} holds {len(entries):,} entries, more than the {MAX_REPOS:,} an audit "
                              "reads: is it the cache folder?")
    walk = _Walk(root)
    repos = sum(walk.entry(path) for path in entries)
    if not repos and walk.skipped:
        skipped = walk.skipped
        raise CacheUnreadable(f"{folder} is not a Hugging Face cache: {skipped[0].reason}"
                              + (f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""))
    return CacheContents(path=str(root), revisions=tuple(walk.revisions), skipped=tuple(walk.skipped))


class _Walk:
    """The walk of one cache folder (``root``, resolved): every link met is checked against it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.revisions: list[CachedRevision] = []
        self.skipped: list[SkippedRepo] = []

    def skip(self, name: str, kind: str, reason: str) -> None:
        self.skipped.append(SkippedRepo(name, kind, reason))

    def name(self, path: Path) -> str:
        """``path`` as the cache names it (relative to the cache folder)."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def outside(self, path: Path, *, named: bool = True) -> str | None:
        """Why ``path`` is not followed when it is a link that resolves outside the cache folder (else None).

        ``named``: the reason names the link (else the skipped entry's own name does).
        """
        if not path.is_symlink():
            return None
        target = Path(os.path.realpath(path))
        if target == self.root or self.root in target.parents:
            return None
        reason = f"a link to {os.readlink(path)}, outside the cache: not followed"
        return f"{self.name(path)} is {reason}" if named else reason

    # -- the cache's top: one entry per repo --------------------------------------------------------

    def entry(self, path: Path) -> int:
        """Walk one entry at the cache's top; 1 when it is a cache repo (audited or skipped as such)."""
        name = path.name
        if name in IGNORED or name in (".locks", "CACHEDIR.TAG") or self._shared_blobs(path):
            return 0
        kind = KINDS.get(name.split("--", 1)[0], "unknown")
        link = self.outside(path, named=False)
        if link:
            self.skip(name, kind, link)
            return 0
        if "--" not in name:
            self.skip(name, kind, f"corrupt: Repo path is not a valid HuggingFace cache directory: {path}")
            return 0
        prefix, repo_id = name.split("--", 1)
        repo_id = repo_id.replace("--", "/")
        if prefix not in KINDS:
            self.skip(name, kind, f"corrupt: Repo type must be one of {sorted(KINDS)}, found `{prefix}` ({path}).")
            return 0
        if kind != "model":
            self.skip(f"{kind}/{repo_id}", kind,
                      f"a {'Space' if kind == 'space' else kind}: the tracker follows models")
            return 1
        try:
            valid = validate_repo_id(repo_id)
        except ValueError:
            self.skip(repo_id, "model", "a canonical id without an owner: the tracker follows owner/name repos"
                      if "/" not in repo_id else "not a valid owner/name repo id")
            return 1
        try:
            self.repo(path, valid)
        except BadEntry as bad:
            self.skip(name, "model", f"corrupt: {bad.reason}")
        except OSError as exc:  # EACCES on the repo's folder, say
            self.skip(name, "model", f"cannot be read: {_why(exc)}")
        return 1

    def _shared_blobs(self, path: Path) -> bool:
        """huggingface_hub's shared blob store (its folder holds a marker file), not a repo."""
        try:
            return path.name == SHARED_BLOBS and path.is_dir() and (path / SHARED_BLOBS_MARKER).is_file()
        except OSError:
            return False

    # -- one repo: refs and snapshots ---------------------------------------------------------------

    def repo(self, path: Path, repo_id: RepoId) -> None:
        if not path.is_dir():
            raise BadEntry(f"Repo path is not a directory: {path}")
        snapshots = path / "snapshots"
        link = self.outside(snapshots)
        if link:
            raise BadEntry(link)
        if not snapshots.is_dir():
            raise BadEntry(f"Snapshots dir doesn't exist in cached repo: {snapshots}")
        refs = self.refs(path)
        folders = sorted(p for p in snapshots.iterdir() if p.name not in IGNORED)
        for folder in folders[:MAX_REVISIONS_PER_REPO]:
            self.snapshot(folder, repo_id, refs.get(folder.name, set()))
        if len(folders) > MAX_REVISIONS_PER_REPO:
            self.skip(repo_id, "model", f"{len(folders) - MAX_REVISIONS_PER_REPO} more cached revisions than the "
                                        f"{MAX_REVISIONS_PER_REPO} read")
        names = {p.name for p in folders}
        for sha, named in sorted(refs.items()):
            for ref in sorted(named) if sha not in names else ():
                self.skip(f"{path.name}/refs/{ref}", "model",
                          f"a ref to {sha[:60]!r}, which the cache does not hold")

    def refs(self, repo: Path) -> dict[str, set[str]]:
        """Commit sha -> the refs naming it. A ref that cannot be read is skipped with one line."""
        folder = repo / "refs"
        found: dict[str, set[str]] = {}
        link = self.outside(folder, named=False)
        if link:
            self.skip(self.name(folder), "model", f"refs not read: {link}")
            return found
        if not folder.exists():
            return found
        if folder.is_file():
            raise BadEntry(f"Refs directory cannot be a file: {folder}")
        try:
            paths = list(self.files_under(folder, limit=MAX_REFS_PER_REPO, what="refs"))
        except BadEntry as bad:
            self.skip(self.name(folder), "model", f"refs not read: {bad.reason}")
            return found
        for path in paths:
            try:
                link = self.outside(path, named=False)
                if link:
                    raise BadEntry(link)
                sha = read_ref(path)
            except BadEntry as bad:
                self.skip(self.name(path), "model", f"a ref that cannot be read: {bad.reason}")
                continue
            found.setdefault(sha, set()).add(path.relative_to(folder).as_posix())
        return found

    def files_under(self, folder: Path, *, limit: int, what: str) -> Iterator[Path]:
        """The entries under ``folder`` that are not folders (links to folders included, never descended).

        Raises :class:`BadEntry` past ``limit`` entries or ``MAX_DEPTH`` levels, or when a folder cannot be
        listed. Iterative, in name order: Python 3.11's ``os.walk`` recurses, and a snapshot nested a
        thousand folders deep would end it in ``RecursionError``.
        """
        seen = 0
        stack = [(folder, 0)]
        while stack:
            here, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise BadEntry(f"{self.name(here)}: folders nested deeper than {MAX_DEPTH}")
            try:
                with os.scandir(here) as listing:
                    entries = sorted((e for e in listing if e.name not in IGNORED), key=lambda e: e.name)
            except OSError as exc:
                raise BadEntry(f"{self.name(here)} cannot be read: {_why(exc)}") from exc
            folders = []
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(Path(entry.path))
                    continue
                seen += 1
                if seen > limit:
                    raise BadEntry(f"more than {limit:,} {what}")
                yield Path(entry.path)
            stack.extend((sub, depth + 1) for sub in reversed(folders))

    # -- one snapshot -------------------------------------------------------------------------------

    def snapshot(self, folder: Path, repo_id: RepoId, refs: set[str]) -> None:
        label = f"{repo_id}@{folder.name[:60]}"
        link = self.outside(folder)
        if link:
            self.skip(label, "model", link)
            return
        if not SHA_RE.fullmatch(folder.name):
            self.skip(label, "model", "a snapshot folder whose name is not a commit sha")
            return
        try:
            if not folder.is_dir():
                raise BadEntry(f"Snapshots folder corrupted. Found a file: {folder}")
            revision = self.revision(folder, repo_id, refs)
        except BadEntry as bad:
            self.skip(label, "model", bad.reason)
        except OSError as exc:
            self.skip(label, "model", f"{self.name(folder)} cannot be read: {_why(exc)}")
        else:
            self.revisions.append(revision)

    def revision(self, folder: Path, repo_id: RepoId, refs: set[str]) -> CachedRevision:
        """The revision in a snapshot folder: its files are links to blobs (each counted once)."""
        blobs: dict[Path, os.stat_result] = {}
        files = 0
        for path in self.files_under(folder, limit=MAX_FILES_PER_REVISION, what="files"):
            link = self.outside(path)
            if link:
                raise BadEntry(link)
            # The first hop, as huggingface_hub keeps it: a repo blob may link on into the shared store.
            blob = Path(os.path.abspath(path.parent / os.readlink(path))) if path.is_symlink() else path
            try:
                info = os.stat(blob)
            except FileNotFoundError as exc:
                raise BadEntry(f"Blob missing (broken symlink): {blob}") from exc
            except OSError as exc:
                raise BadEntry(f"{self.name(path)} cannot be read: {_why(exc)}") from exc
            if stat.S_ISDIR(info.st_mode):  # a link to a folder inside the cache: not a file
                continue
            files += 1
            blobs.setdefault(blob, info)
        own = folder.stat()
        return CachedRevision(
            repo=repo_id, sha=folder.name, refs=tuple(sorted(refs)), size=sum(s.st_size for s in blobs.values()),
            files=files, last_accessed=_time(max((s.st_atime for s in blobs.values()), default=own.st_mtime)),
            last_modified=_time(max((s.st_mtime for s in blobs.values()), default=own.st_mtime)),
            path=self.name(folder),
        )


def read_ref(path: Path) -> str:
    """A ref's text: opened without blocking (a FIFO), read only when a regular file, 1 KiB at most."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise BadEntry(_why(exc)) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BadEntry("not a regular file" + (" (a FIFO)" if stat.S_ISFIFO(mode) else ""))
        data = os.read(fd, MAX_REF_BYTES + 1)
    except OSError as exc:
        raise BadEntry(_why(exc)) from exc
    finally:
        os.close(fd)
    if len(data) > MAX_REF_BYTES:
        raise BadEntry(f"longer than {MAX_REF_BYTES} bytes (a ref holds a commit sha)")
    return data.decode("utf-8", "replace").strip()


def _why(exc: OSError) -> str:
    """An OS error in a few words: ``permission denied``, ``a link that loops``."""
    if exc.errno == errno.ELOOP:
        return "a link that loops"
    return exc.strerror.lower() if exc.strerror else first_line(exc)
