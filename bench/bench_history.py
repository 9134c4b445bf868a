"""A repo's cost as its history grows: 5,000 revisions that each fix something (one update advisory each).

Run: python bench/bench_history.py [--revisions 5000] [--batch 50] [--queries 1000] [--postgres]

Goals: the poll cost per revision of the last 500 revisions within 1.2x of the first 500's; the
database bytes per revision as flat (within 1.2x); ``POST /v1/query`` on a commit of that repo at
p99 under 20 ms.

A Hub stand-in (in this process) holds one repo; ``--batch`` commits at a time are pushed, each
changing ``eos_token_id`` or ``temperature`` in ``generation_config.json`` (each an update
advisory that affects every earlier revision), then the tracker polls them. Printed per window of
500 revisions: the poll's wall time and this process's CPU time per revision (the stand-in's share
included; it is the same for every window), and the database's growth per revision. Then
``--queries`` queries on random commits of the repo, through the in-process API, each followed by a
request to a route that does nothing (the baseline: what the machine's load alone costs), and the
load average.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient
from hubstandin import HubStandin
from sqlalchemy import text

from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.surfaces.api import create_app

REPO = "acme/long-history"
WINDOW = 500
GOAL_RATIO = 1.2
GOAL_P99_MS = 20.0
CONFIG = json.dumps({"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 384,
                     "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536,
                     "vocab_size": 30522, "max_position_embeddings": 512}).encode()


def database_bytes(tracker) -> int:
    engine = tracker.store.db.engine
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return int(conn.execute(text("select pg_database_size(current_database())")).scalar())
        conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        pages = conn.execute(text("PRAGMA page_count")).scalar()
        free = conn.execute(text("PRAGMA freelist_count")).scalar()
        size = conn.execute(text("PRAGMA page_size")).scalar()
        return int((pages - free) * size)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--revisions", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=50, help="commits pushed between two polls")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    window = min(WINDOW, args.revisions // 2)

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-history-")))
        if args.postgres:
            from tests.postgres import fresh_database, postgres_server

            url = fresh_database(stack.enter_context(postgres_server()))
        else:
            url = f"sqlite:///{tmp}/tracker.sqlite3"
        hub = HubStandin(tmp / "hub").start()
        stack.callback(hub.stop, wait=False)
        tracker = make_tracker(Settings(database={"url": url}, hub={"endpoint": hub.url}), auto_upgrade=True)
        stack.callback(tracker.store.close)
        hub.create_repo(REPO)
        hub.commit(REPO, {"config.json": CONFIG, "generation_config.json": b'{"eos_token_id": 1, "temperature": 0.7}'})
        tracker.store.repos.add(REPO, now=tracker.clock())
        tracker.poll()

        per_revision: list[tuple[float, float]] = []  # (wall s, cpu s) per revision, each poll's share
        sizes = [database_bytes(tracker)]  # after 0, batch, 2*batch, ... revisions
        eos, temperature = 1, 0.7
        t_start = time.perf_counter()
        for done in range(0, args.revisions, args.batch):
            for k in range(done, min(done + args.batch, args.revisions)):
                if k % 2:
                    temperature = round(temperature + 0.01, 2)
                else:
                    eos += 1
                hub.commit(REPO, {"generation_config.json": json.dumps(
                    {"eos_token_id": eos, "temperature": temperature}).encode()}, message=f"fix {k}")
            n = min(args.batch, args.revisions - done)
            wall0, cpu0 = time.perf_counter(), time.process_time()
            (result,) = tracker.poll()
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            assert result.processed == n, result.line()
            per_revision += [(wall / n, cpu / n)] * n
            sizes.append(database_bytes(tracker))
            if (done // args.batch) % 10 == 9:
                print(f"  {done + n:>5} revisions, last poll {wall / n * 1000:.0f} ms/revision, "
                      f"{sizes[-1] / 1e6:.1f} MB, {time.perf_counter() - t_start:.0f} s, "
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)

        pk = tracker.store.repos.get(REPO).pk
        with tracker.store.db.engine.connect() as conn:
            advisories = conn.execute(text("select count(*) from advisories")).scalar()
            spans = conn.execute(text("select count(*) from advisory_spans")).scalar()
            labels = conn.execute(text("select count(*) from commit_labels")).scalar()
        assert advisories == args.revisions, advisories

        def window_cost(rows: list[tuple[float, float]]) -> tuple[float, float]:
            return statistics.mean(r[0] for r in rows) * 1000, statistics.mean(r[1] for r in rows) * 1000

        first, last = window_cost(per_revision[:window]), window_cost(per_revision[-window:])
        per_batch = window // args.batch
        grow_first = (sizes[per_batch] - sizes[0]) / window
        grow_last = (sizes[-1] - sizes[-1 - per_batch]) / window
        print(f"store ({'PostgreSQL' if args.postgres else 'SQLite'}): {args.revisions:,} revisions, "
              f"{advisories:,} update advisories, {spans:,} advisory_spans rows, {labels:,} commit labels, "
              f"{sizes[-1] / 1e6:.1f} MB")
        print(f"poll cost per revision, first {window}: {first[0]:.0f} ms wall, {first[1]:.0f} ms CPU; "
              f"last {window}: {last[0]:.0f} ms wall, {last[1]:.0f} ms CPU "
              f"(ratio wall {last[0] / first[0]:.2f}, CPU {last[1] / first[1]:.2f}; goal <= {GOAL_RATIO})")
        print(f"database growth per revision, first {window}: {grow_first / 1024:.1f} KiB; last {window}: "
              f"{grow_last / 1024:.1f} KiB (ratio {grow_last / grow_first:.2f}; goal <= {GOAL_RATIO})")

        shas = sorted(tracker.store.revisions.commit_graph(pk))
        rng = random.Random(3)
        app = create_app(tracker)

        @app.get("/bench/noop")
        def _noop() -> dict[str, str]:  # the TestClient + ASGI round trip alone: the baseline
            return {"status": "ok"}

        client = TestClient(app)
        times, counts, sizes, noop = [], [], [], []
        load_before = os.getloadavg()[0]
        for _ in range(args.queries):
            sha = rng.choice(shas)
            t0 = time.perf_counter()
            answer = client.post("/v1/query", json={"commit": sha})
            times.append((time.perf_counter() - t0) * 1000)
            assert answer.status_code == 200, answer.text[:200]
            counts.append(len(answer.json().get("vulns", [])))
            sizes.append(len(answer.content))
            t0 = time.perf_counter()
            client.get("/bench/noop")
            noop.append((time.perf_counter() - t0) * 1000)
        p50, p99 = pct(times, 50), pct(times, 99)
        print(f"/v1/query on {args.queries} random commits of the repo: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
              f"(goal < {GOAL_P99_MS} ms); vulns per first page: median {statistics.median(counts):.0f}, "
              f"max {max(counts)}; body median {statistics.median(sizes) / 1024:.0f} KiB")
        print(f"in-process no-op route, interleaved: p50 {pct(noop, 50):.1f} ms, p99 {pct(noop, 99):.1f} ms; "
              f"load average {load_before:.1f} before the queries, {os.getloadavg()[0]:.1f} after")
        ok = (last[1] / first[1] <= GOAL_RATIO and grow_last / grow_first <= GOAL_RATIO and p99 < GOAL_P99_MS)
        print("OK" if ok else "GOAL MISSED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
