"""A Hub stand-in serving thousands of identical repos, for the scale benchmarks.

The stand-in (``hubstandin``) keeps real git repositories and asks ``git`` for refs, trees and
logs, one subprocess per repo. For 10,000+ repos that made the *stand-in* the bottleneck of a
benchmark about the tracker. Here every repo is a copy of one template repository (the same
commit, hard-linked objects, its own ``_id``), and :class:`SharedCommitStore` reads refs and
metadata with plain file reads and caches trees and logs by commit sha (a commit's tree and
history are the same in every repo that holds it). The HTTP handlers are the stand-in's own.

Also: the owner distribution "as on the real Hub" (:func:`realistic_owners`) and seeding a
tracker database with watched repos whose baseline is already read (:func:`seed_watches`).

Run as a server: ``python bench/scale_standin.py --root DIR --port N`` (the benchmarks start it
in a subprocess, so that its CPU is not counted as the tracker's).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from hubstandin import HubStandin
from hubstandin.gitrepos import CommitRecord, Entry, RepoMeta, RepoStore, format_date

CONFIG = json.dumps({"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 384,
                     "num_hidden_layers": 6, "num_attention_heads": 12, "vocab_size": 30522}, indent=2).encode()


def realistic_owners(total: int, *, seed: int = 12) -> list[tuple[str, int, int]]:
    """(owner, watched repos, extra unwatched models) summing to ``total`` watched repos.

    Shaped like a watch list on the real Hub: a few organisations with hundreds of watched
    models (and as many again that nobody watches), a long tail of owners with a handful, and
    many owners with exactly one. At 10,000: 8 owners hold 34%, 150 owners hold 36%, and 3,000
    owners have one repo each (30%).
    """
    rng = random.Random(seed)
    scale = total / 10_000
    big = [max(2, round(n * scale)) for n in (900, 700, 500, 400, 300, 250, 200, 150)]
    out = [(f"bigorg{i}", n, n) for i, n in enumerate(big)]
    mid_total = round(3_600 * scale)
    mid_owners = max(1, round(150 * scale))
    weights = [1 / (i + 1) ** 0.8 for i in range(mid_owners)]
    spread = [max(2, round(mid_total * w / sum(weights))) for w in weights]
    out += [(f"team{i}", n, rng.randint(0, 5)) for i, n in enumerate(spread)]
    used = sum(n for _o, n, _e in out)
    out += [(f"user{i}", 1, 0) for i in range(max(0, total - used))]
    while sum(n for _o, n, _e in out) > total:  # rounding: trim the largest
        i = max(range(len(out)), key=lambda k: out[k][1])
        owner, n, extra = out[i]
        out[i] = (owner, n - 1, extra)
    return out


def build_root(root: Path, owners: list[tuple[str, int, int]]) -> tuple[list[tuple[str, str]], str]:
    """Write the repos under ``root``; returns ([(watched repo id, _id)], head sha)."""
    template_root = root / ".template"
    store = RepoStore(template_root)
    store.create_repo("template/model")
    head = store.commit("template/model", {"config.json": CONFIG, "README.md": b"# model\n"}, message="initial")
    template = store.git_dir("template/model")
    objects = [p for p in (template / "objects").rglob("*") if p.is_file()]
    watched: list[tuple[str, str]] = []
    (root / "repos").mkdir(parents=True, exist_ok=True)
    (root / ".standin" / "lfs").mkdir(parents=True, exist_ok=True)
    created = format_date(datetime(2026, 1, 1, tzinfo=UTC))
    for owner, n, extra in owners:
        for i in range(n + extra):
            repo_id = f"{owner}/model-{i}"
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
            if i < n:
                watched.append((repo_id, uid))
    shutil.rmtree(template_root)
    return watched, head


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


def serve(root: Path, port: int) -> None:
    hub = HubStandin(root / ".empty", port=port)
    hub.store = SharedCommitStore(root)
    from hubstandin.hub import build_app

    hub.app = build_app(hub)
    hub.start()
    print(f"serving {len(hub.store.repo_ids())} repos at {hub.url}", flush=True)
    threading.Event().wait()


def seed_watches(database_url: str, watched: list[tuple[str, str]], head: str) -> None:
    """Watch every repo, its baseline already read (what a tracker that has run a while holds)."""
    from sqlalchemy import insert

    from tracker.store import open_store
    from tracker.store.tables import repos

    store = open_store(database_url, auto_upgrade=True)
    now = datetime.now(UTC)
    rows = [{"repo_id": repo_id, "branch": "main", "state": "active", "hub_uid": uid, "last_seen_sha": head,
             "created_at": now, "last_polled_at": now} for repo_id, uid in watched]
    with store.engine.begin() as conn:
        for i in range(0, len(rows), 2000):
            conn.execute(insert(repos), rows[i:i + 2000])
    store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    sys.exit(serve(args.root, args.port))  # type: ignore[func-returns-value]
