"""Thousands of repos on one stand-in, cheaply: copies of one template repository.

The stand-in keeps real git repositories and asks ``git`` for refs, trees and logs, one
subprocess per repo. For thousands of repos that makes the stand-in the bottleneck of a test
or benchmark about the tracker. Here every repo starts as a copy of one template commit
(hard-linked objects, its own ``_id``), and :class:`SharedCommitStore` reads refs and metadata
with plain file reads and caches trees and logs by commit sha (a commit's tree and history are
the same in every repo that holds it). Commits on top of a copy are ordinary commits.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path

from .gitrepos import CommitRecord, Entry, RepoMeta, RepoStore, format_date
from .hub import HubStandin, build_app

__all__ = ["SharedCommitStore", "copy_template", "many_repos_standin"]


def copy_template(root: Path, repo_ids: Iterable[str], files: Mapping[str, bytes], *,
                  date: dt.datetime) -> tuple[dict[str, str], str]:
    """Write ``repo_ids`` under ``root``, each one commit of ``files`` made at ``date``; returns ({repo id: _id}, sha)."""
    template_root = root / ".template"
    store = RepoStore(template_root)
    store.create_repo("template/model")
    head = store.commit("template/model", dict(files), message="initial", date=date)
    template = store.git_dir("template/model")
    objects = [p for p in (template / "objects").rglob("*") if p.is_file()]
    (root / "repos").mkdir(parents=True, exist_ok=True)
    (root / ".standin" / "lfs").mkdir(parents=True, exist_ok=True)
    created = format_date(date)
    uids: dict[str, str] = {}
    for repo_id in repo_ids:
        git_dir = root / "repos" / f"{repo_id}.git"
        (git_dir / "refs" / "heads").mkdir(parents=True)
        (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
        shutil.copyfile(template / "config", git_dir / "config")
        for obj in objects:
            dest = git_dir / obj.relative_to(template)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.link(obj, dest)
        (git_dir / "refs" / "heads" / "main").write_text(head + "\n")
        uid = secrets.token_hex(12)
        (git_dir / "standin.json").write_text(json.dumps({"_id": uid, "createdAt": created}))
        uids[repo_id] = uid
    shutil.rmtree(template_root)
    return uids, head


class SharedCommitStore(RepoStore):
    """RepoStore for many repos holding the same commits: file reads for refs, caches keyed by commit."""

    def _load(self) -> None:
        for meta_file in self.repos_dir.glob("*/*.git/standin.json"):
            repo_id = meta_file.parent.relative_to(self.repos_dir).as_posix()[: -len(".git")]
            data = json.loads(meta_file.read_text())
            self._meta[repo_id] = RepoMeta(repo_id=repo_id, internal_id=str(data["_id"]),
                                           created_at=str(data.get("createdAt") or format_date(self._clock)))
        self._shared_trees: dict[str, dict[str, Entry]] = {}
        self._shared_logs: dict[str, list[CommitRecord]] = {}
        self._shared_lock = threading.Lock()

    def _read_refs(self, repo_id: str) -> dict[str, str]:
        heads = self.git_dir(repo_id) / "refs" / "heads"
        refs = {f"refs/heads/{p.name}": p.read_text().strip() for p in heads.iterdir() if p.is_file()}
        return refs or super()._read_refs(repo_id)

    def tree(self, repo_id: str, commit: str) -> dict[str, Entry]:
        with self._shared_lock:
            cached = self._shared_trees.get(commit)
        if cached is None:
            cached = super().tree(repo_id, commit)
            with self._shared_lock:
                self._shared_trees[commit] = cached
        return cached

    def log(self, repo_id: str, revision: str) -> list[CommitRecord]:
        sha = self.resolve(repo_id, revision)
        with self._shared_lock:
            cached = self._shared_logs.get(sha)
        if cached is None:
            cached = super().log(repo_id, sha)
            with self._shared_lock:
                self._shared_logs[sha] = cached
        return cached


def many_repos_standin(root: Path, **options: object) -> HubStandin:
    """A (not yet started) stand-in serving the repos :func:`copy_template` wrote under ``root``."""
    hub = HubStandin(root / ".empty", **options)  # type: ignore[arg-type]
    hub.store = SharedCommitStore(root)
    hub.app = build_app(hub)
    return hub
