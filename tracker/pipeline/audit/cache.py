"""What a Hugging Face cache holds, read through huggingface_hub's own ``scan_cache_dir()``.

The adapter between the cache's layout and the audit: model revisions with their refs,
size and last access; everything else (datasets, Spaces, canonical ids without an owner,
folders that are not cache repos) listed as skipped, with the reason. A cache that cannot be
read at all raises :class:`CacheUnreadable`, whose message is one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from huggingface_hub import scan_cache_dir
from huggingface_hub.errors import CacheNotFound, CorruptedCacheException

from tracker.core.errors import TrackerError, first_line
from tracker.core.model import SHA_RE, RepoId, validate_repo_id

MAX_REPOS = 20_000  # cache repos read at most; a cache past this is not one a machine serves from
MAX_REVISIONS_PER_REPO = 1_000


class CacheUnreadable(TrackerError):
    """The cache folder does not exist, is not a folder, cannot be read, or holds no cache repo."""


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
        entries = sum(1 for _ in folder.iterdir())
    except OSError as exc:
        raise CacheUnreadable(f"cannot read the cache at {folder}: {exc.strerror or first_line(exc)}") from exc
    if entries > MAX_REPOS:
        raise CacheUnreadable(f"{folder} holds {entries:,} entries, more than the {MAX_REPOS:,} an audit reads: "
                              "is it the cache folder?")
    try:
        info = scan_cache_dir(folder)
    except CacheNotFound as exc:  # removed between the checks and the scan
        raise CacheUnreadable(f"no Hugging Face cache at {folder}: {first_line(exc)}") from exc
    except (OSError, ValueError) as exc:  # unreadable subfolders, a ref that is not text
        raise CacheUnreadable(f"cannot read the cache at {folder}: {first_line(exc)}") from exc
    root = Path(info.cache_dir or folder)
    skipped = [_corrupt(root, warning) for warning in info.warnings]
    if not info.repos and skipped:
        raise CacheUnreadable(f"{folder} is not a Hugging Face cache: {skipped[0].reason}"
                              + (f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""))
    revisions: list[CachedRevision] = []
    for repo in sorted(info.repos, key=lambda r: (r.repo_type, r.repo_id)):
        if repo.repo_type != "model":
            skipped.append(SkippedRepo(f"{repo.repo_type}/{repo.repo_id}", repo.repo_type,
                                       f"a {'Space' if repo.repo_type == 'space' else repo.repo_type}: "
                                       "the tracker follows models"))
            continue
        try:
            repo_id = validate_repo_id(repo.repo_id)
        except ValueError:
            reason = ("a canonical id without an owner: the tracker follows owner/name repos"
                      if "/" not in repo.repo_id else "not a valid owner/name repo id")
            skipped.append(SkippedRepo(repo.repo_id, "model", reason))
            continue
        kept = sorted(repo.revisions, key=lambda r: r.commit_hash)
        for revision in kept[:MAX_REVISIONS_PER_REPO]:
            if not SHA_RE.fullmatch(revision.commit_hash):
                skipped.append(SkippedRepo(f"{repo_id}@{revision.commit_hash[:60]}", "model",
                                           "a snapshot folder whose name is not a commit sha"))
                continue
            accessed = max((f.blob_last_accessed for f in revision.files), default=revision.last_modified)
            revisions.append(CachedRevision(
                repo=repo_id, sha=revision.commit_hash, refs=tuple(sorted(revision.refs)),
                size=revision.size_on_disk, files=len(revision.files), last_accessed=_time(accessed),
                last_modified=_time(revision.last_modified),
                path=Path(revision.snapshot_path).relative_to(root).as_posix(),
            ))
        if len(kept) > MAX_REVISIONS_PER_REPO:
            skipped.append(SkippedRepo(repo_id, "model", f"{len(kept) - MAX_REVISIONS_PER_REPO} more cached "
                                                         f"revisions than the {MAX_REVISIONS_PER_REPO} read"))
    return CacheContents(path=str(root), revisions=tuple(revisions), skipped=tuple(skipped))


def _corrupt(root: Path, warning: CorruptedCacheException) -> SkippedRepo:
    """A cache entry huggingface_hub could not read, named by its folder when the message names one."""
    text = first_line(warning)
    name = "?"
    for part in text.replace("(", " ").replace(")", " ").replace(":", " ").split():
        path = Path(part)
        if path.is_absolute() and root in path.parents:
            name = path.relative_to(root).parts[0]
            break
    kind = {"models": "model", "datasets": "dataset", "spaces": "space"}.get(name.split("--", 1)[0], "unknown")
    return SkippedRepo(name, kind, f"corrupt: {text}")
