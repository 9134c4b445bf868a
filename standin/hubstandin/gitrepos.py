"""Git-backed repository storage for the local Hub stand-in.

Why real git: the tracker diffs revisions by git blob sha1 (``oid``), LFS sha256
(``lfs.oid``) and commit ids. Computing those with real git objects means the
stand-in cannot drift from what the Hub reports: a blob ``oid`` *is*
``git hash-object`` of what git stores, a directory ``oid`` *is* the git tree
sha, and a super-squash really produces a new root commit.

Layout under ``root``::

    repos/<ns>/<name>.git/      bare git repository (one segment ids: repos/<name>.git)
    repos/<ns>/<name>.git/standin.json   Hub-side settings: _id, gated, private, disabled, tokens
    .standin/lfs/<aa>/<sha256>  LFS content store (content addressed; may be a hard/sym link)
    .standin/redirects.json     renamed ids: {"old/id": "new/id"}

Large files are stored the way the Hub stores them: git holds the LFS pointer
text and the real bytes live in the content store keyed by sha256. Content
given as a path is hashed in chunks and linked (not copied) into the store, so
a test can commit a sparse 1 GB file made with ``os.truncate`` cheaply.

All writes go through :class:`RepoStore` (the builder API). Reads are cached
per commit sha, which is safe because commits are immutable; ref lookups are
cached per store *version*, bumped on every mutation.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import secrets
import shutil
import struct
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_LFS_SUFFIXES",
    "DEFAULT_LFS_THRESHOLD",
    "CommitRecord",
    "Entry",
    "LfsPointer",
    "RepoMeta",
    "RepoNotFound",
    "RepoStore",
    "RevisionNotFound",
    "lfs_pointer",
]

#: Suffixes that go to LFS regardless of size (what the Hub's default .gitattributes tracks).
DEFAULT_LFS_SUFFIXES: frozenset[str] = frozenset(
    {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pkl", ".h5", ".onnx", ".gguf", ".msgpack"}
)
#: Files larger than this go to LFS (the Hub rejects >10 MB regular git files).
DEFAULT_LFS_THRESHOLD: int = 10 * 1024 * 1024

_LOG_FORMAT = "--format=%H%x1f%P%x1f%an%x1f%at%x1f%B"
_SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
_POINTER_RE = re.compile(
    rb"^version https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n$"
)
_REPO_ID_RE = re.compile(r"^(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*$")
_CHUNK = 1024 * 1024
_EPOCH0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class RepoNotFound(KeyError):
    """The repo id is unknown (never created, deleted, or a typo)."""


class RevisionNotFound(KeyError):
    """The revision names no branch/tag/PR ref and no commit reachable from one."""


@dataclass(frozen=True)
class LfsPointer:
    """What git stores for an LFS file, parsed: content sha256, real size, pointer size."""

    sha256: str
    size: int
    pointer_size: int


@dataclass(frozen=True)
class Entry:
    """One path of a commit's tree: a file (``type='file'``) or a directory.

    ``oid`` is the git object id (blob sha1, or tree sha1 for directories), ``size``
    the real content size (the LFS size for LFS files, 0 for directories).
    """

    path: str
    type: str
    oid: str
    size: int
    lfs: LfsPointer | None = None


@dataclass(frozen=True)
class CommitRecord:
    """One commit as the Hub's /commits endpoint describes it."""

    id: str
    parent: str | None
    author: str
    date: dt.datetime
    title: str
    message: str


@dataclass
class RepoMeta:
    """Hub-side settings that git does not hold; persisted as ``standin.json`` in the bare repo."""

    repo_id: str
    internal_id: str
    created_at: str
    gated: bool | str = False
    private: bool = False
    disabled: bool = False
    tokens: list[str] = field(default_factory=list)
    # What the Hub's model listing filters and sorts on (``GET /api/models?filter=…&sort=downloads``).
    downloads: int = 0
    likes: int = 0
    library_name: str | None = None
    pipeline_tag: str | None = None
    tags: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "_id": self.internal_id,
            "createdAt": self.created_at,
            "gated": self.gated,
            "private": self.private,
            "disabled": self.disabled,
            "tokens": self.tokens,
            "downloads": self.downloads,
            "likes": self.likes,
            "library_name": self.library_name,
            "pipeline_tag": self.pipeline_tag,
            "tags": self.tags,
        }


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The exact LFS pointer text git-lfs (and the Hub) stores for content ``sha256``/``size``."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def format_date(when: dt.datetime) -> str:
    """Hub date format: UTC, millisecond precision, ``Z`` suffix (``2026-09-02T10:00:00.000Z``)."""
    when = when.astimezone(dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


_FILE_HASHES: dict[tuple[int, int, int, int], tuple[str, int]] = {}


def _sha256_file(path: Path) -> tuple[str, int]:
    """Hash a file in 1 MB chunks so multi-GB (sparse) files never sit in memory.

    Memoised per (device, inode, size, mtime) for the process: a big test file shared by
    several tests (or several stand-ins) is hashed once.
    """
    st = path.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key in _FILE_HASHES:
        return _FILE_HASHES[key]
    digest = hashlib.sha256()
    zeros = memoryview(bytes(_CHUNK))
    size = st.st_size
    with open(path, "rb") as fh:
        fd = fh.fileno()
        pos = 0
        while pos < size:
            # Holes of a sparse file read as zeros: feed zeros without asking the kernel for them.
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                data = size
            while pos < data:
                n = min(_CHUNK, data - pos)
                digest.update(zeros[:n])
                pos += n
            if pos >= size:
                break
            hole = os.lseek(fd, pos, os.SEEK_HOLE)
            fh.seek(pos)
            while pos < hole:
                chunk = fh.read(min(_CHUNK, hole - pos))
                if not chunk:
                    raise OSError(f"{path} shrank while hashing")
                digest.update(chunk)
                pos += len(chunk)
    _FILE_HASHES[key] = (digest.hexdigest(), size)
    return _FILE_HASHES[key]


class RepoStore:
    """Git repositories on disk plus the Hub-side metadata the stand-in serves.

    Thread-safe: the builder API (test thread) and the server (uvicorn thread) share
    one instance; mutations hold ``self.lock``.

    Args:
        root: directory holding ``repos/`` and ``.standin/`` (created if missing).
        lfs_suffixes: path suffixes that always go to LFS.
        lfs_threshold: size in bytes above which any file goes to LFS.
        clock_start: date of the first commit made without an explicit ``date``.
        clock_step: how far the fake clock advances per commit.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lfs_suffixes: Iterable[str] = DEFAULT_LFS_SUFFIXES,
        lfs_threshold: int = DEFAULT_LFS_THRESHOLD,
        clock_start: dt.datetime = _EPOCH0,
        clock_step: dt.timedelta = dt.timedelta(minutes=1),
    ) -> None:
        self.root = Path(root)
        self.repos_dir = self.root / "repos"
        self.lfs_dir = self.root / ".standin" / "lfs"
        self.repos_dir.mkdir(parents=True, exist_ok=True)
        self.lfs_dir.mkdir(parents=True, exist_ok=True)
        self.lfs_suffixes = frozenset(lfs_suffixes)
        self.lfs_threshold = lfs_threshold
        self.lock = threading.RLock()
        self.version = 0
        self._clock = clock_start - clock_step
        self._clock_step = clock_step
        self._meta: dict[str, RepoMeta] = {}
        self._redirects: dict[str, str] = {}
        self._tree_cache: dict[tuple[str, str], dict[str, Entry]] = {}
        self._log_cache: dict[tuple[str, str], list[CommitRecord]] = {}
        self._log_tip: dict[str, str] = {}  # per repo, the newest head whose log is cached
        self._refs_cache: dict[tuple[str, int], dict[str, str]] = {}
        self._reach_cache: dict[tuple[str, int], frozenset[str]] = {}
        self._pointer_cache: dict[tuple[str, str], LfsPointer | None] = {}
        # The head of ``main`` and its date per repo, for the model listing: built on first use,
        # then refreshed only for the repos a write touched (see :meth:`main_heads`).
        self._main_heads: dict[str, tuple[str | None, dt.datetime | None]] | None = None
        self._touched: set[str] = set()
        self._load()

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        """Find existing repos under ``root`` (what ``python -m hubstandin --root`` serves)."""
        for git_dir in sorted(self.repos_dir.glob("**/*.git")):
            if not (git_dir / "HEAD").exists():
                continue
            repo_id = git_dir.relative_to(self.repos_dir).as_posix()[: -len(".git")]
            meta_file = git_dir / "standin.json"
            data: dict[str, object] = json.loads(meta_file.read_text()) if meta_file.exists() else {}
            meta = RepoMeta(
                repo_id=repo_id,
                internal_id=str(data.get("_id") or secrets.token_hex(12)),
                created_at=str(data.get("createdAt") or format_date(self._clock)),
                gated=data.get("gated", False),  # type: ignore[arg-type]
                private=bool(data.get("private", False)),
                disabled=bool(data.get("disabled", False)),
                tokens=list(data.get("tokens", [])),  # type: ignore[call-overload]
                downloads=int(data.get("downloads", 0)),  # type: ignore[call-overload]
                likes=int(data.get("likes", 0)),  # type: ignore[call-overload]
                library_name=data.get("library_name"),  # type: ignore[arg-type]
                pipeline_tag=data.get("pipeline_tag"),  # type: ignore[arg-type]
                tags=list(data.get("tags", [])),  # type: ignore[call-overload]
            )
            self._meta[repo_id] = meta
            self._save_meta(meta)
            # Continue the fake clock after the newest commit already on disk.
            for ref in self._read_refs(repo_id):
                if ref.startswith("refs/"):
                    for rec in self.log(repo_id, ref)[:1]:
                        self._clock = max(self._clock, rec.date)
        redirects = self.root / ".standin" / "redirects.json"
        if redirects.exists():
            self._redirects = json.loads(redirects.read_text())

    # ------------------------------------------------------------------ helpers
    def git_dir(self, repo_id: str) -> Path:
        return self.repos_dir / f"{repo_id}.git"

    def _git(
        self, repo_id: str, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None
    ) -> bytes:
        full_env = {
            **os.environ,
            "GIT_DIR": str(self.git_dir(repo_id)),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            **(env or {}),
        }
        proc = subprocess.run(["git", *args], input=input, capture_output=True, env=full_env, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout

    def _save_meta(self, meta: RepoMeta) -> None:
        (self.git_dir(meta.repo_id) / "standin.json").write_text(json.dumps(meta.to_json(), indent=1))

    def _save_redirects(self) -> None:
        (self.root / ".standin" / "redirects.json").write_text(json.dumps(self._redirects, indent=1))

    def _bump(self, *repo_ids: str) -> None:
        self.version += 1
        self._touched.update(repo_ids)

    def main_heads(self) -> dict[str, tuple[str | None, dt.datetime | None]]:
        """Live repo id -> (head of ``main``, its commit date); (None, None) for an empty repo.

        Kept up to date by the writes (each names the repos it touched), so a listing of
        thousands of repos costs one git read per changed repo, not one per repo.
        """
        with self.lock:
            if self._main_heads is None:
                self._main_heads = {}
                self._touched = set(self._meta)
            for repo_id in self._touched:
                if repo_id not in self._meta:
                    self._main_heads.pop(repo_id, None)
                    continue
                try:
                    sha = self.resolve(repo_id, "main")
                    self._main_heads[repo_id] = (sha, self.log(repo_id, sha)[0].date)
                except RevisionNotFound:
                    self._main_heads[repo_id] = (None, None)
            self._touched = set()
            return self._main_heads

    def _write_blob(self, repo_id: str, data: bytes) -> str:
        """Write a loose git blob object; returns its sha1 (what ``git hash-object -w`` does)."""
        store = b"blob %d\x00" % len(data) + data
        sha = hashlib.sha1(store).hexdigest()
        obj = self.git_dir(repo_id) / "objects" / sha[:2] / sha[2:]
        if not obj.exists():
            obj.parent.mkdir(exist_ok=True)
            tmp = obj.with_name(obj.name + f".tmp{secrets.token_hex(4)}")
            tmp.write_bytes(zlib.compress(store, 1))
            os.replace(tmp, obj)
        return sha

    def lfs_path(self, sha256: str) -> Path:
        """Where the content store keeps (or links) the bytes of LFS object ``sha256``."""
        return self.lfs_dir / sha256[:2] / sha256

    def _store_lfs(self, content: bytes | Path) -> tuple[str, int]:
        """Put content into the LFS store; paths are hard-linked (or symlinked), never copied."""
        if isinstance(content, Path):
            sha, size = _sha256_file(content)
            dest = self.lfs_path(sha)
            if not dest.exists():
                dest.parent.mkdir(exist_ok=True)
                try:
                    os.link(content, dest)
                except OSError:
                    os.symlink(content.resolve(), dest)
            return sha, size
        sha = hashlib.sha256(content).hexdigest()
        dest = self.lfs_path(sha)
        if not dest.exists():
            dest.parent.mkdir(exist_ok=True)
            tmp = dest.with_name(dest.name + f".tmp{secrets.token_hex(4)}")
            tmp.write_bytes(content)
            os.replace(tmp, dest)
        return sha, len(content)

    def _next_date(self, date: dt.datetime | None) -> dt.datetime:
        """Fake clock: each commit without an explicit date is one ``clock_step`` after the last one."""
        if date is None:
            self._clock = self._clock + self._clock_step
            return self._clock
        if date.tzinfo is None:
            date = date.replace(tzinfo=dt.UTC)
        self._clock = max(self._clock, date)
        return date

    @staticmethod
    def _ref_name(branch: str) -> str:
        """``main`` -> ``refs/heads/main``; full refs (``refs/pr/1``) pass through."""
        return branch if branch.startswith("refs/") else f"refs/heads/{branch}"

    # ------------------------------------------------------------------ registry
    def meta(self, repo_id: str) -> RepoMeta:
        """Settings of an existing repo; raises :class:`RepoNotFound`."""
        try:
            return self._meta[repo_id]
        except KeyError:
            raise RepoNotFound(repo_id) from None

    def lookup(self, repo_id: str) -> tuple[RepoMeta | None, str | None]:
        """``(meta, None)`` for a live repo, ``(None, new_id)`` for a renamed one, ``(None, None)`` otherwise."""
        meta = self._meta.get(repo_id)
        if meta is not None:
            return meta, None
        return None, self._redirects.get(repo_id)

    def repo_ids(self) -> list[str]:
        return sorted(self._meta)

    def create_repo(
        self, repo_id: str, *, gated: bool | str = False, private: bool = False, exist_ok: bool = False
    ) -> None:
        """Create an empty repo (no commit, no ``main`` yet). Re-creating a deleted id makes a new ``_id``."""
        if not _REPO_ID_RE.match(repo_id):
            raise ValueError(f"invalid repo id {repo_id!r}: use 'name' or 'namespace/name'")
        with self.lock:
            if repo_id in self._meta:
                if exist_ok:
                    return
                raise ValueError(f"repo {repo_id!r} already exists")
            git_dir = self.git_dir(repo_id)
            git_dir.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(git_dir)],
                check=True,
                capture_output=True,
                env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
            )
            meta = RepoMeta(
                repo_id=repo_id,
                internal_id=secrets.token_hex(12),
                created_at=format_date(self._clock + self._clock_step),
                gated="auto" if gated is True else gated,
                private=private,
            )
            self._meta[repo_id] = meta
            self._save_meta(meta)
            if self._redirects.pop(repo_id, None) is not None:
                self._save_redirects()
            self._bump(repo_id)

    def delete_repo(self, repo_id: str) -> None:
        """Remove the repo and its git data; the id becomes free (404) again."""
        with self.lock:
            self.meta(repo_id)
            shutil.rmtree(self.git_dir(repo_id))
            del self._meta[repo_id]
            self._drop_caches(repo_id)
            self._redirects = {k: v for k, v in self._redirects.items() if v != repo_id}
            self._save_redirects()
            self._bump(repo_id)

    def rename(self, old_id: str, new_id: str) -> None:
        """Move a repo; the old id keeps redirecting to the new one (as the Hub does after a rename)."""
        with self.lock:
            meta = self.meta(old_id)
            if new_id in self._meta:
                raise ValueError(f"repo {new_id!r} already exists")
            if not _REPO_ID_RE.match(new_id):
                raise ValueError(f"invalid repo id {new_id!r}")
            dest = self.git_dir(new_id)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.git_dir(old_id), dest)
            del self._meta[old_id]
            meta.repo_id = new_id
            self._meta[new_id] = meta
            self._redirects = {k: (new_id if v == old_id else v) for k, v in self._redirects.items()}
            self._redirects[old_id] = new_id
            self._redirects.pop(new_id, None)
            self._save_redirects()
            self._drop_caches(old_id)
            self._bump(old_id, new_id)

    def _drop_caches(self, repo_id: str) -> None:
        for cache in (self._tree_cache, self._log_cache, self._pointer_cache):
            for key in [k for k in cache if k[0] == repo_id]:
                del cache[key]
        self._log_tip.pop(repo_id, None)

    def update_meta(self, repo_id: str, **changes: object) -> None:
        """Change Hub-side settings (gated/private/disabled/tokens) and persist them."""
        with self.lock:
            meta = self.meta(repo_id)
            for key, value in changes.items():
                setattr(meta, key, value)
            self._save_meta(meta)
            self._bump(repo_id)

    # ------------------------------------------------------------------ writes
    def is_lfs_path(self, path: str, size: int) -> bool:
        """The default rule: weight-like suffix, or larger than ``lfs_threshold``."""
        return any(path.endswith(suffix) for suffix in self.lfs_suffixes) or size > self.lfs_threshold

    def commit(
        self,
        repo_id: str,
        files: Mapping[str, bytes | str | os.PathLike[str]],
        *,
        delete: Iterable[str] = (),
        message: str = "update",
        branch: str = "main",
        date: dt.datetime | None = None,
        lfs: set[str] | None = None,
        author: str = "standin",
    ) -> str:
        """Commit ``files`` (and ``delete`` paths or whole directories) on ``branch``; returns the sha.

        Content is ``bytes``, ``str`` (UTF-8 text) or an ``os.PathLike`` to a file on disk.
        ``lfs=None`` applies :meth:`is_lfs_path`; a set makes exactly those paths LFS.
        The first line of ``message`` is the Hub commit ``title``, the rest its ``message``.
        """
        with self.lock:
            self.meta(repo_id)
            ref = self._ref_name(branch)
            parent = self._read_refs(repo_id).get(ref)
            expected_old = parent or ""  # "" = the ref must not exist yet (guards concurrent writers)
            if parent is None and ref.startswith("refs/pr/"):
                parent = self._read_refs(repo_id).get("refs/heads/main")
            index_lines: list[str] = []
            current = self.tree(repo_id, parent) if parent else {}
            for path in delete:
                path = path.strip("/")
                doomed = [
                    p
                    for p, e in current.items()
                    if e.type == "file" and (p == path or p.startswith(path + "/"))
                ]
                if not doomed:
                    raise FileNotFoundError(f"{repo_id}@{branch}: nothing to delete at {path!r}")
                index_lines += [f"0 {'0' * 40}\t{p}" for p in doomed]
            for path, content in files.items():
                path = path.strip("/")
                if isinstance(content, str):
                    content = content.encode()
                if isinstance(content, os.PathLike):
                    src = Path(content)
                    size = src.stat().st_size
                    to_lfs = (path in lfs) if lfs is not None else self.is_lfs_path(path, size)
                    if to_lfs:
                        sha256, size = self._store_lfs(src)
                        blob = lfs_pointer(sha256, size)
                    else:
                        blob = src.read_bytes()
                else:
                    to_lfs = (path in lfs) if lfs is not None else self.is_lfs_path(path, len(content))
                    if to_lfs:
                        sha256, size = self._store_lfs(content)
                        blob = lfs_pointer(sha256, size)
                    else:
                        blob = content
                index_lines.append(f"100644 {self._write_blob(repo_id, blob)}\t{path}")
            when = self._next_date(date)
            stamp = f"@{int(when.timestamp())} +0000"
            with tempfile.TemporaryDirectory(prefix="standin-idx-") as tmp:
                env = {
                    "GIT_INDEX_FILE": str(Path(tmp) / "index"),
                    "GIT_AUTHOR_NAME": author,
                    "GIT_AUTHOR_EMAIL": f"{author}@users.noreply.huggingface.co",
                    "GIT_COMMITTER_NAME": author,
                    "GIT_COMMITTER_EMAIL": f"{author}@users.noreply.huggingface.co",
                    "GIT_AUTHOR_DATE": stamp,
                    "GIT_COMMITTER_DATE": stamp,
                }
                if parent:
                    self._git(repo_id, "read-tree", parent, env=env)
                if index_lines:
                    self._git(
                        repo_id,
                        "update-index",
                        "--index-info",
                        input="\n".join(index_lines).encode() + b"\n",
                        env=env,
                    )
                tree = self._git(repo_id, "write-tree", env=env).decode().strip()
                parent_args = ["-p", parent] if parent else []
                sha = self._git(
                    repo_id, "commit-tree", tree, *parent_args, "-F", "-", input=message.encode(), env=env
                )
            new = sha.decode().strip()
            self._git(repo_id, "update-ref", ref, new, expected_old)
            self._bump(repo_id)
            return new

    def squash(
        self,
        repo_id: str,
        branch: str = "main",
        message: str = "Super-squash",
        date: dt.datetime | None = None,
    ) -> str:
        """Super-squash: replace ``branch`` by one new root commit with the same tree; returns its sha."""
        with self.lock:
            ref = self._ref_name(branch)
            head = self._read_refs(repo_id).get(ref)
            if head is None:
                raise RevisionNotFound(branch)
            when = self._next_date(date)
            stamp = f"@{int(when.timestamp())} +0000"
            env = {
                "GIT_AUTHOR_NAME": "standin",
                "GIT_AUTHOR_EMAIL": "standin@users.noreply.huggingface.co",
                "GIT_COMMITTER_NAME": "standin",
                "GIT_COMMITTER_EMAIL": "standin@users.noreply.huggingface.co",
                "GIT_AUTHOR_DATE": stamp,
                "GIT_COMMITTER_DATE": stamp,
            }
            new = self._git(
                repo_id, "commit-tree", f"{head}^{{tree}}", "-F", "-", input=message.encode(), env=env
            )
            sha = new.decode().strip()
            self._git(repo_id, "update-ref", ref, sha, head)
            self._bump(repo_id)
            return sha

    def set_ref(self, repo_id: str, ref: str, sha: str | None) -> None:
        """Point a full ref (``refs/tags/v1``, ``refs/heads/dev``, ``refs/pr/1``) at ``sha``; None deletes it."""
        with self.lock:
            self.meta(repo_id)
            if sha is None:
                self._git(repo_id, "update-ref", "-d", ref)
            else:
                self._git(
                    repo_id,
                    "update-ref",
                    ref,
                    self._git(repo_id, "rev-parse", "--verify", f"{sha}^{{commit}}").decode().strip(),
                )
            self._bump(repo_id)

    # ------------------------------------------------------------------ reads
    def _read_refs(self, repo_id: str) -> dict[str, str]:
        out = self._git(repo_id, "for-each-ref", "--format=%(refname) %(objectname)")
        return dict(line.split(" ", 1) for line in out.decode().splitlines() if line)  # type: ignore[misc]

    def refs(self, repo_id: str) -> dict[str, str]:
        """All refs ``{"refs/heads/main": sha, "refs/tags/v1": sha, "refs/pr/1": sha}``."""
        key = (repo_id, self.version)
        cached = self._refs_cache.get(key)
        if cached is None:
            cached = self._read_refs(repo_id)
            self._refs_cache[key] = cached
        return cached

    def reachable(self, repo_id: str) -> frozenset[str]:
        """Commits reachable from any ref: an unreachable (squashed-away) sha is not a revision."""
        key = (repo_id, self.version)
        cached = self._reach_cache.get(key)
        if cached is None:
            refs = self.refs(repo_id)
            out = self._git(repo_id, "rev-list", *sorted(set(refs.values()))) if refs else b""
            cached = frozenset(out.decode().split())
            self._reach_cache[key] = cached
        return cached

    def resolve(self, repo_id: str, revision: str) -> str:
        """Revision (branch, tag, full ref, 40-hex sha) -> commit sha; raises :class:`RevisionNotFound`."""
        refs = self.refs(repo_id)
        for candidate in (revision, f"refs/heads/{revision}", f"refs/tags/{revision}"):
            if candidate.startswith("refs/") and candidate in refs:
                return refs[candidate]
        if _SHA1_RE.match(revision) and revision in self.reachable(repo_id):
            return revision
        raise RevisionNotFound(revision)

    def tree(self, repo_id: str, commit: str) -> dict[str, Entry]:
        """Every path (files and directories, recursively) of ``commit``, in git order."""
        key = (repo_id, commit)
        cached = self._tree_cache.get(key)
        if cached is not None:
            return cached
        out = self._git(repo_id, "ls-tree", "-r", "-t", "-l", "-z", "--full-tree", commit)
        entries: dict[str, Entry] = {}
        for record in out.split(b"\x00"):
            if not record:
                continue
            head, path_b = record.split(b"\t", 1)
            _mode, kind, oid, size_s = head.decode().split()
            path = path_b.decode()
            if kind == "tree":
                entries[path] = Entry(path=path, type="directory", oid=oid, size=0)
            elif kind == "blob":
                size = int(size_s)
                pointer = self._pointer(repo_id, oid, size)
                entries[path] = Entry(
                    path=path, type="file", oid=oid, size=pointer.size if pointer else size, lfs=pointer
                )
        self._tree_cache[key] = entries
        return entries

    def _pointer(self, repo_id: str, oid: str, size: int) -> LfsPointer | None:
        """Parse the blob as an LFS pointer if it looks like one (pointers are < 200 bytes)."""
        if size > 200:
            return None
        key = (repo_id, oid)
        if key not in self._pointer_cache:
            match = _POINTER_RE.match(self.blob(repo_id, oid))
            self._pointer_cache[key] = (
                LfsPointer(sha256=match.group(1).decode(), size=int(match.group(2)), pointer_size=size)
                if match
                else None
            )
        return self._pointer_cache[key]

    def blob(self, repo_id: str, oid: str) -> bytes:
        """Raw bytes git stores for blob ``oid`` (the pointer text for LFS files)."""
        return self._git(repo_id, "cat-file", "blob", oid)

    def log(self, repo_id: str, revision: str) -> list[CommitRecord]:
        """First-parent history of ``revision``, newest first (the Hub's /commits order).

        A head that descends from the last one logged reads only the commits in between, so a
        growing history costs the stand-in its new commits, not its whole length, per listing."""
        sha = self.resolve(repo_id, revision) if not _SHA1_RE.match(revision) else revision
        key = (repo_id, sha)
        cached = self._log_cache.get(key)
        if cached is not None:
            return cached
        tip = self._log_tip.get(repo_id)
        older = self._log_cache.get((repo_id, tip)) if tip is not None else None
        records: list[CommitRecord] | None = None
        if tip is not None and older is not None:
            newer = self._parse_log(self._git(repo_id, "log", "--first-parent", "-z", _LOG_FORMAT, sha, f"^{tip}"))
            if newer and newer[-1].parent == tip:
                records = newer + older
        if records is None:
            records = self._parse_log(self._git(repo_id, "log", "--first-parent", "-z", _LOG_FORMAT, sha))
        self._log_cache[key] = records
        self._log_tip[repo_id] = sha
        return records

    @staticmethod
    def _parse_log(out: bytes) -> list[CommitRecord]:
        records: list[CommitRecord] = []
        for raw in out.decode().split("\x00"):
            if not raw.strip():
                continue
            cid, parents, author, stamp, body = raw.lstrip("\n").split("\x1f", 4)
            title, _, rest = body.strip("\n").partition("\n")
            records.append(
                CommitRecord(
                    id=cid,
                    parent=parents.split()[0] if parents else None,
                    author=author,
                    date=dt.datetime.fromtimestamp(int(stamp), tz=dt.UTC),
                    title=title,
                    message=rest.strip("\n"),
                )
            )
        return records

    def last_commit(self, repo_id: str, commit: str, path: str) -> CommitRecord:
        """Newest commit at or before ``commit`` that changed ``path`` (file or directory)."""
        history = self.log(repo_id, commit)
        oid = self.tree(repo_id, commit)[path].oid
        last = history[0]
        for rec in history:
            if rec.parent is None:
                return rec
            parent_entry = self.tree(repo_id, rec.parent).get(path)
            if parent_entry is None or parent_entry.oid != oid:
                return rec
            last = rec
        return last

    def safetensors_header(self, sha256: str) -> dict[str, object] | None:
        """Parse the JSON header of a stored safetensors file (for model_info's ``safetensors`` key)."""
        path = self.lfs_path(sha256)
        try:
            with open(path, "rb") as fh:
                (length,) = struct.unpack("<Q", fh.read(8))
                if length > 100 * 1024 * 1024:
                    return None
                return json.loads(fh.read(length))
        except (OSError, ValueError, struct.error):
            return None
