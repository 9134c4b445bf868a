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
import random
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from hubstandin.bulk import copy_template, many_repos_standin

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
