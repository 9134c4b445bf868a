"""A Hub stand-in serving thousands of identical repos, for the scale benchmarks.

Every repo is a copy of one template repository (``hubstandin.bulk``: the same commit,
hard-linked objects, its own ``_id``, refs read as files), so the stand-in is not the
bottleneck of a benchmark about the tracker. The HTTP handlers are the stand-in's own.

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
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hubstandin import HubStandin
from hubstandin.bulk import SharedCommitStore, copy_template, many_repos_standin
from hubstandin.gitrepos import RepoMeta, RepoStore, format_date
from hubstandin.hub import build_app

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
    ids = [(f"{owner}/model-{i}", i < n) for owner, n, extra in owners for i in range(n + extra)]
    uids, head = copy_template(root, [r for r, _w in ids], {"config.json": CONFIG, "README.md": b"# model\n"},
                               date=datetime(2026, 1, 1, tzinfo=UTC))
    return [(r, uids[r]) for r, watched in ids if watched], head


def serve(root: Path, port: int) -> None:
    hub = many_repos_standin(root, port=port)
    hub.start()
    print(f"serving {len(hub.store.repo_ids())} repos at {hub.url}", flush=True)
    threading.Event().wait()


class VirtualStore(SharedCommitStore):
    """Hundreds of thousands of models that share one template commit and exist only in memory.

    A model gets a git directory of its own (hard links to the template's objects) only when
    something commits to it; until then its refs, tree and log are the template's.
    """

    def __init__(self, root: Path, repo_ids: list[str], head: str, created: str) -> None:
        super().__init__(root)
        self._template = self.git_dir("template/model")
        self._meta.pop("template/model", None)
        self._head = head
        self._virtual: set[str] = set(repo_ids)
        # Last modified before the template commit, a minute apart, as a catalogue's dates spread out.
        newest = datetime.fromisoformat(created.replace("Z", "+00:00"))
        self._dates = {r: newest - timedelta(minutes=i + 1) for i, r in enumerate(repo_ids)}
        for i, repo_id in enumerate(repo_ids):
            self._meta[repo_id] = RepoMeta(repo_id=repo_id, internal_id=f"{i:024x}", created_at=created)

    def main_heads(self) -> dict[str, tuple[str | None, datetime | None]]:
        with self.lock:
            if self._main_heads is None:
                self._main_heads = {r: (self._head, self._dates[r]) for r in self._virtual}
                self._touched = set(self._meta) - self._virtual
            return super().main_heads()

    def git_dir(self, repo_id: str) -> Path:
        if repo_id in getattr(self, "_virtual", ()):
            return self._template
        return super().git_dir(repo_id)

    def _read_refs(self, repo_id: str) -> dict[str, str]:
        if repo_id in self._virtual:
            return {"refs/heads/main": self._head}
        return super()._read_refs(repo_id)

    def commit(self, repo_id: str, files: Any, **options: Any) -> str:
        with self.lock:
            if repo_id in self._virtual:
                dest = self.repos_dir / f"{repo_id}.git"
                for path in self._template.rglob("*"):
                    target = dest / path.relative_to(self._template)
                    if path.is_dir():
                        target.mkdir(parents=True, exist_ok=True)
                    elif path.name != "standin.json":
                        target.parent.mkdir(parents=True, exist_ok=True)
                        os.link(path, target)
                self._virtual.discard(repo_id)
            return super().commit(repo_id, files, **options)


def serve_virtual(root: Path, port: int, models: list[str]) -> None:
    """Serve ``models`` (virtual), and take commands on stdin: ``change N SEED``, ``clear``, ``stats``."""
    template_root = root / "template"
    store = RepoStore(template_root)
    store.create_repo("template/model")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    head = store.commit("template/model", {"config.json": CONFIG, "README.md": b"# model\n"}, message="initial",
                        date=start)
    hub = HubStandin(root / ".empty", port=port)
    hub.store = VirtualStore(template_root, models, head, format_date(start))
    hub.app = build_app(hub)
    hub.start()
    print(f"serving {len(models)} models at {hub.url}", flush=True)
    rng = random.Random(7)
    changed: set[str] = set()
    clock = start
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["change"]:
            n = int(words[1])
            clock += timedelta(hours=1)
            picked = rng.sample(models, n)
            for k, repo_id in enumerate(picked):
                config = CONFIG.replace(b'"vocab_size": 30522', f'"vocab_size": {30522 + rng.randint(1, 9999)}'.encode())
                hub.store.commit(repo_id, {"config.json": config}, message="update",
                                 date=clock + timedelta(seconds=k))
            changed = set(picked)
            print(json.dumps(picked), flush=True)
        elif words[:1] == ["clear"]:
            hub.clear_log()
            print("ok", flush=True)
        elif words[:1] == ["stats"]:
            counts = {"listing_pages": 0, "owner_listings": 0, "rule_listings": 0, "about_changed": 0,
                      "about_unchanged": 0}
            for record in hub.requests:
                if record.path == "/api/models":
                    key = ("listing_pages" if "sort=lastModified" in record.query
                           else "owner_listings" if "author=" in record.query else "rule_listings")
                    counts[key] += 1
                    continue
                parts = record.path.strip("/").split("/")
                repo_id = "/".join(parts[2:4] if parts[:2] == ["api", "models"] else parts[:2])
                counts["about_changed" if repo_id in changed else "about_unchanged"] += 1
            print(json.dumps(counts), flush=True)


def seed_watches(database_url: str, watched: list[tuple[str, str]], head: str) -> None:
    """Watch every repo, its baseline already read (what a tracker that has run a while holds)."""
    from sqlalchemy import insert

    from tracker.adapters.store import open_store
    from tracker.adapters.store.tables import repos

    store = open_store(database_url, auto_upgrade=True)
    now = datetime.now(UTC)
    rows = [{"repo_id": repo_id, "branch": "main", "state": "active", "hub_uid": uid, "last_seen_sha": head,
             "created_at": now, "last_polled_at": now, "last_checked": now} for repo_id, uid in watched]
    with store.db.engine.begin() as conn:
        for i in range(0, len(rows), 2000):
            conn.execute(insert(repos), rows[i:i + 2000])
    store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--models-from", type=Path, default=None,
                        help="serve the model ids in this file (one a line) as virtual models, with commands on stdin")
    args = parser.parse_args()
    if args.models_from is not None:
        serve_virtual(args.root, args.port, args.models_from.read_text().split())
    else:
        serve(args.root, args.port)
