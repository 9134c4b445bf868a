"""Time the pages of a repo with 500 revisions: the target is well under a second each.

Run: python bench/bench_pages.py [--revisions 500] [--rounds 5]

Builds the history in a fresh SQLite store (tests/web/synthetic.py: findings with rendered-prompt
diffs on every revision, an estimate every fifth, an advisory every tenth), then renders the index,
the repo page (timeline and chart), a revision page and an advisory page through the real app,
printing the median time and the SQL statements each page ran.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")  # before huggingface_hub is imported

from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.web.synthetic import build
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.surfaces.api import create_app

LIMIT_S = 1.0
REPO = "intfloat/multilingual-e5-large"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--revisions", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database={"url": f"sqlite:///{tmp}/tracker.sqlite3"},
                            hub={"endpoint": "http://127.0.0.1:9"})
        tracker = make_tracker(settings, auto_upgrade=True)
        started = time.perf_counter()
        shas = build(tracker.store, REPO, args.revisions)
        print(f"built {args.revisions} revisions in {time.perf_counter() - started:.1f} s")
        advisory = tracker.store.advisories.find(repo_pk=tracker.store.repos.get(REPO).pk)[-1].id
        statements = []
        event.listen(tracker.store.db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        client = TestClient(create_app(tracker))
        pages = {"index": "/", "repo": f"/repos/{REPO}", "revision": f"/repos/{REPO}/revisions/{shas[-1]}",
                 "advisory": f"/advisories/{advisory}"}
        worst = 0.0
        for name, path in pages.items():
            times = []
            for _ in range(args.rounds):
                statements.clear()
                t = time.perf_counter()
                response = client.get(path)
                times.append(time.perf_counter() - t)
                assert response.status_code == 200, (path, response.status_code)
            median = statistics.median(times)
            worst = max(worst, median)
            print(f"{name:9} {median * 1000:7.1f} ms median of {args.rounds}  {len(statements):2} SQL statements  "
                  f"{len(response.content) / 1024:7.0f} kB  {path}")
        tracker.store.close()
    verdict = "ok" if worst < LIMIT_S else "SLOW"
    print(f"slowest page {worst * 1000:.0f} ms (target < {LIMIT_S * 1000:.0f} ms): {verdict}")
    return 0 if worst < LIMIT_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
