"""Poll cycles over 10,000 or 100,000 watched repos on a Hub stand-in of 300,000 models, a few changing.

Run: python bench/bench_cycle.py [--repos 10000] [--models 300000] [--change 0.003] [--cycles 2]
                                 [--workers 4] [--postgres]

Goals: under 0.02 Hub requests per unchanged watched repo per cycle when under 1% of them
change; at 100,000 watched repos, the cycle's CPU under 60 s and its resident memory under 500 MB.

1. A Hub stand-in (bench/scale_standin.py, in a subprocess, so its CPU is not the tracker's)
   serves ``--models`` models sharing one template commit (virtual until one is committed to);
   the watched ones are owned as on the real Hub (:func:`realistic_owners`: a few organisations
   with hundreds, a tail of teams, thousands of owners with one), the rest by 1-model owners.
2. A tracker database (SQLite, or PostgreSQL with ``--postgres``) watches ``--repos`` of them,
   their baseline already read, as a tracker that has run a while holds them (one watermark of
   the change listing).
3. Each cycle: ``--change`` of all models get a new commit on the stand-in, every watched repo is
   made due, and a fresh process runs the daemon's cycle (tracker/pipeline/cycle.py) until nothing is due.
   Printed: the requests the stand-in saw, split into those about the changed repos and the rest,
   per unchanged watched repo; the cycle process's CPU time and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale_standin import realistic_owners

from tracker.pipeline.cycle import WALK_EVERY

GOAL_REQUESTS_PER_UNCHANGED = 0.02
GOAL_CPU_SECONDS = 60.0
GOAL_RSS_MB = 500.0
TEMPLATE_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Standin:
    """The stand-in subprocess and its stdin commands (change, clear, stats)."""

    def __init__(self, root: Path, models: list[str]) -> None:
        port = free_port()
        (root / "models.txt").write_text("\n".join(models) + "\n")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "bench" / "scale_standin.py"), "--root", str(root), "--port", str(port),
             "--models-from", str(root / "models.txt")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1"})
        line = self.ask(None)
        assert line.startswith("serving"), line
        self.url = f"http://127.0.0.1:{port}"

    def ask(self, command: str | None) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def head_of_template() -> str:
    """The template commit's sha: the same on every run (fixed content, author and date)."""
    from hubstandin.gitrepos import RepoStore

    with tempfile.TemporaryDirectory() as tmp:
        from scale_standin import CONFIG

        store = RepoStore(tmp)
        store.create_repo("template/model")
        return store.commit("template/model", {"config.json": CONFIG, "README.md": b"# model\n"}, message="initial",
                            date=TEMPLATE_DATE)


def seed(url: str, watched: list[str], head: str) -> None:
    """Watch every repo, its baseline read, current in a chain of the change listing with one watermark."""
    from sqlalchemy import insert

    from tracker.adapters.store import open_store
    from tracker.adapters.store.tables import hub_listing, repos

    store = open_store(url, auto_upgrade=True)
    now = datetime.now(UTC)
    rows = [{"repo_id": repo_id, "branch": "main", "state": "active", "hub_uid": f"{i:024x}", "last_seen_sha": head,
             "created_at": now, "last_polled_at": now, "last_checked": now,  # no own check due: the listing vouches
             "listing_epoch": 1} for i, repo_id in enumerate(watched)]
    with store.db.engine.begin() as conn:
        for i in range(0, len(rows), 5000):
            conn.execute(insert(repos), rows[i:i + 5000])
        conn.execute(insert(hub_listing).values(
            id=1, epoch=1, rate=0.0, page_size=1000, updated_at=now,
            marks=[{"top": TEMPLATE_DATE.isoformat(), "at": (now - timedelta(hours=1)).isoformat()}]))
    store.close()


def all_due(url: str) -> None:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("update repos set next_poll_at = null"))
    engine.dispose()


def one_cycle(url: str, endpoint: str, workers: int) -> dict[str, float]:
    """In this (fresh) process: the daemon's cycle until nothing is due; its CPU time and peak RSS."""
    from tracker.adapters.settings import Settings
    from tracker.app import make_tracker

    settings = Settings(database={"url": url},
                        hub={"endpoint": endpoint, "budget_api_per_5min": 1_000_000,
                             "budget_resolvers_per_5min": 1_000_000},
                        poll={"workers": workers})
    tracker = make_tracker(settings, auto_upgrade=False)
    cycle = tracker.new_cycle(workers=workers)
    wall, cpu = time.perf_counter(), time.process_time()
    ticks = vouched = walk_pages = 0
    while True:
        report = cycle.tick()
        ticks += 1
        vouched += report.vouched
        walk_pages += report.walk_pages
        while cycle.in_flight():
            time.sleep(0.01)
        if report.claimed == 0:
            break
    figures = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "ticks": ticks,
               "vouched": vouched, "walk_pages": walk_pages}
    cycle.stop()
    tracker.store.close()
    status = Path("/proc/self/status").read_text()
    fields = {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines() if ":" in line}
    figures["hwm_mb"] = int(fields["VmHWM"].split()[0]) / 1024
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=10_000, help="watched repos")
    parser.add_argument("--models", type=int, default=300_000, help="models on the stand-in")
    parser.add_argument("--change", type=float, default=0.003, help="share of all models changed per cycle")
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL instead of SQLite")
    parser.add_argument("--one-cycle", nargs=2, metavar=("URL", "ENDPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_cycle:
        print(json.dumps(one_cycle(args.one_cycle[0], args.one_cycle[1], args.workers)))
        return

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-cycle-")))
        owners = realistic_owners(args.repos)
        watched = [f"{owner}/model-{i}" for owner, n, _e in owners for i in range(n)]
        extras = [f"{owner}/model-{i}" for owner, n, e in owners for i in range(n, n + e)]
        fill = [f"hub{i}/model" for i in range(max(0, args.models - len(watched) - len(extras)))]
        models = watched + extras + fill
        t = time.perf_counter()
        standin = Standin(tmp, models)
        stack.callback(standin.close)
        if args.postgres:
            from tests.postgres import fresh_database, throwaway_cluster

            url = fresh_database(stack.enter_context(throwaway_cluster()))
        else:
            url = f"sqlite:///{tmp}/tracker.sqlite3"
        seed(url, watched, head_of_template())
        print(f"setup: {len(watched):,} watched repos of {len(owners):,} owners among {len(models):,} models "
              f"in {time.perf_counter() - t:.1f}s")
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"{'PostgreSQL' if args.postgres else 'SQLite'}, {args.workers} poll workers")
        watched_set = set(watched)
        started = 0.0
        for n in range(1, args.cycles + 1):
            # The daemon walks the change listing at most once a minute (tracker/pipeline/cycle.py WALK_EVERY):
            # cycles an hour apart, squeezed together here, must be at least that far apart.
            time.sleep(max(0.0, started + WALK_EVERY + 1 - time.perf_counter()))
            started = t = time.perf_counter()
            changed = set(json.loads(standin.ask(f"change {round(args.change * len(models))}")))
            took = time.perf_counter() - t
            all_due(url)
            standin.ask("clear")
            run = subprocess.run([sys.executable, __file__, "--workers", str(args.workers), "--one-cycle", url,
                                  standin.url], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if run.returncode != 0:
                raise SystemExit(run.stderr[-3000:])
            figures = json.loads(run.stdout.strip().splitlines()[-1])
            stats = json.loads(standin.ask("stats"))
            changed_watched = len(changed & watched_set)
            unchanged = len(watched) - changed_watched
            others = stats["listing_pages"] + stats["owner_listings"] + stats["about_unchanged"]
            per = others / unchanged
            print(f"cycle {n}: {len(changed):,} models changed ({took:.0f}s to commit), {changed_watched:,} watched "
                  f"({changed_watched / len(watched):.2%})")
            print(f"  requests: {stats['listing_pages']} change-listing pages, {stats['owner_listings']} owner listings, "
                  f"{stats['about_unchanged']} about unchanged repos, {stats['about_changed']:,} about the changed ones")
            print(f"  {per:.4f} requests per unchanged watched repo (goal < {GOAL_REQUESTS_PER_UNCHANGED}): "
                  f"{'OK' if per < GOAL_REQUESTS_PER_UNCHANGED else 'MISSED'}; "
                  f"{figures['vouched']:,.0f} repos vouched for by the listing")
            print(f"  cycle wall {figures['wall']:.1f}s, CPU {figures['cpu']:.1f}s (goal < {GOAL_CPU_SECONDS:.0f}s): "
                  f"{'OK' if figures['cpu'] < GOAL_CPU_SECONDS else 'MISSED'}; peak RSS {figures['hwm_mb']:.0f} MB "
                  f"(goal < {GOAL_RSS_MB:.0f} MB): {'OK' if figures['hwm_mb'] < GOAL_RSS_MB else 'MISSED'}")


if __name__ == "__main__":
    main()
