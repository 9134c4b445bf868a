"""An in-memory Hub behind the ``HubReader`` port, for unit tests where HTTP adds nothing.

The HTTP stand-in (standin/hubstandin) stays the Hub of integration tests: it speaks the real
protocol to the real huggingface_hub client. This fake answers the port's questions from a dict,
at once, and can be told to fail: ``fail["snapshot"] = HubUnavailable("...")`` makes every
``snapshot_checked`` raise it (``fail_times`` limits how often). It counts what it was asked.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tracker.core.errors import EntryGone, HubRateLimited, RepoGone, RevisionGone, UpstreamFileError
from tracker.core.hub_types import (
    ChangeListing,
    CommitListing,
    Head,
    ListedModel,
    OwnerListing,
    RejectedPath,
    RepoInfo,
)
from tracker.core.model import Commit, CommitSha, FileEntry, RepoId, Snapshot

# The Hub's rate-limit bucket of each operation (tracker/adapters/hub/budget.py): resolve URLs or the API.
BUCKETS = {"head": "resolvers", "read_file": "resolvers", "read_range": "resolvers", "safetensors_header": "resolvers"}


@dataclass
class _Revision:
    commit: Commit
    files: dict[str, bytes]


@dataclass
class _Repo:
    history: list[_Revision] = field(default_factory=list)  # oldest first, on main


class FakeHub:
    endpoint = "fake://hub"

    def __init__(self) -> None:
        self.repos: dict[str, _Repo] = {}
        self.fail: dict[str, BaseException] = {}  # operation -> error raised on each call
        self.fail_times: dict[str, int] = {}  # operation -> how many more calls fail (absent: all)
        self.calls: Counter[str] = Counter()
        self.on_request = None
        self.on_rate_limited = None
        self._clock = datetime(2026, 1, 1, tzinfo=UTC)

    # -- arranging -----------------------------------------------------------------------------

    def commit(self, repo: str, files: dict[str, bytes | str | dict[str, Any]], *, title: str = "update",
               keep: bool = True) -> CommitSha:
        """A new commit on main: ``files`` on top of the previous commit's (``keep=False``: only these)."""
        data = self.repos.setdefault(repo, _Repo())
        previous = dict(data.history[-1].files) if data.history and keep else {}
        for path, content in files.items():
            if isinstance(content, dict):
                content = json.dumps(content)
            previous[path] = content.encode() if isinstance(content, str) else content
        parent = (data.history[-1].commit.sha,) if data.history else ()
        self._clock += timedelta(minutes=1)
        sha = CommitSha(hashlib.sha1(f"{repo}{len(data.history)}{sorted(previous.items())}".encode()).hexdigest())
        data.history.append(_Revision(Commit(sha=sha, date=self._clock, title=title, parents=parent), previous))
        return sha

    # -- the port ------------------------------------------------------------------------------

    def _call(self, operation: str) -> None:
        self.calls[operation] += 1
        error = self.fail.get(operation)
        if error is None:
            return
        left = self.fail_times.get(operation)
        if left is not None:
            if left <= 0:
                return
            self.fail_times[operation] = left - 1
        if isinstance(error, HubRateLimited) and self.on_rate_limited is not None:
            self.on_rate_limited(BUCKETS.get(operation, "api"), error.retry_after or 1.0)  # as the client tells it
        raise error

    def _repo(self, repo: str) -> _Repo:
        data = self.repos.get(repo)
        if data is None or not data.history:
            raise RepoGone(f"{repo}: not found")
        return data

    def _revision(self, repo: str, sha: str) -> _Revision:
        for revision in self._repo(repo).history:
            if revision.commit.sha == sha:
                return revision
        raise RevisionGone(f"{repo}@{sha[:12]}: not found")

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        yield

    def head(self, repo: RepoId, branch: str = "main") -> Head:
        self._call("head")
        return Head(sha=self._repo(repo).history[-1].commit.sha)

    def repo_info(self, repo: RepoId, revision: str | None = None) -> RepoInfo:
        self._call("repo_info")
        head = self._repo(repo).history[-1].commit.sha
        return RepoInfo(repo_id=repo, uid=f"uid-{repo}", sha=head, private=False, gated=False)

    def commits_since(self, repo: RepoId, branch: str, since: str | Collection[str] | None, *,
                      limit: int | None = None) -> CommitListing:
        self._call("commits_since")
        history = [r.commit for r in self._repo(repo).history]
        stops = {since} if isinstance(since, str) else set(since) if since is not None else None
        newer: list[Commit] = []
        reached = since is None
        for commit in reversed(history):
            if stops is not None and commit.sha in stops:
                reached = True
                break
            newer.append(commit)
            if since is None and limit is not None and len(newer) >= limit:
                break
        return CommitListing(commits=tuple(reversed(newer)), reached_since=reached, pages=1)

    def owner_heads(self, owner: str, *, max_pages: int) -> OwnerListing:
        self._call("owner_heads")
        heads = {name.lower(): data.history[-1].commit.sha for name, data in self.repos.items()
                 if name.split("/")[0].lower() == owner.lower() and data.history}
        return OwnerListing(heads=heads, complete=True, pages=1)

    def recent_models(self, *, stop_before: datetime | None, max_pages: int) -> ChangeListing:
        self._call("recent_models")
        listed = sorted(((data.history[-1].commit.date, name, data.history[-1].commit.sha)
                         for name, data in self.repos.items() if data.history), reverse=True)
        models = tuple(ListedModel(repo_id=RepoId(name), sha=sha, last_modified=when) for when, name, sha in listed
                       if stop_before is None or when >= stop_before)
        return ChangeListing(models=models, pages=1, reached=True, page_size=len(models))

    def snapshot(self, repo: RepoId, sha: str) -> Snapshot:
        return self.snapshot_checked(repo, sha)[0]

    def snapshot_checked(self, repo: RepoId, sha: str) -> tuple[Snapshot, tuple[RejectedPath, ...]]:
        self._call("snapshot")
        files = self._revision(repo, sha).files
        return Snapshot(tuple(FileEntry(path=p, size=len(b), blob_id=hashlib.sha1(b).hexdigest())
                              for p, b in sorted(files.items()))), ()

    def read_file(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> bytes:
        self._call("read_file")
        files = self._revision(repo, sha).files
        if path not in files:
            raise EntryGone(f"{repo}@{sha[:12]}/{path}: not found")
        if len(files[path]) > max_bytes:
            raise UpstreamFileError(path, f"{len(files[path]):,} bytes is over the {max_bytes:,}-byte cap")
        return files[path]

    def read_range(self, repo: RepoId, sha: str, path: str, start: int, end: int) -> bytes:
        self._call("read_range")
        files = self._revision(repo, sha).files
        if path not in files:
            raise EntryGone(f"{repo}@{sha[:12]}/{path}: not found")
        return files[path][start : end + 1]

    def safetensors_header(self, repo: RepoId, sha: str, path: str, *, max_bytes: int) -> dict[str, Any]:
        self._call("safetensors_header")
        raw = self.read_range(repo, sha, path, 0, max_bytes + 8)
        length = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8 : 8 + length])
        if not isinstance(header, dict):
            raise UpstreamFileError(path, "safetensors header is not a JSON object")
        return header
