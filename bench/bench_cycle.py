"""A poll cycle over 10,000 watched repos, and the daemon's resident memory while it runs one.

Run: python bench/bench_cycle.py [--repos 10000] [--workers 4] [--postgres] [--no-daemon]

Goals (issue 12): under 0.5 Hub requests per unchanged watched repo per cycle with owners as on
the real Hub; the cycle's own CPU under 60 s; the daemon's resident memory under 300 MB.

1. A Hub stand-in (bench/scale_standin.py, in a subprocess, so its CPU is not the tracker's)
   serves the repos of :func:`realistic_owners`: a few organisations with hundreds of watched
   repos (and as many unwatched), a tail of teams with a handful, thousands of owners with one.
2. A tracker database (SQLite, or PostgreSQL with ``--postgres``) watches them all, their
   baseline already read, all due now.
3. The cycle (tracker/cycle.py, in this process, ``--workers`` threads) checks every repo once;
   none changed. Printed: requests per bucket and per repo, wall time, this process's CPU time.
4. Unless ``--no-daemon``: every repo is made due again and a real ``tracker run --no-api``
   checks them all; its VmRSS and VmHWM (peak) are read from /proc when the cycle is done.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale_standin import build_root, realistic_owners, seed_watches
from sqlalchemy import create_engine, text

GOAL_REQUESTS_PER_REPO = 0.5
GOAL_CPU_SECONDS = 60.0
GOAL_RSS_MB = 300.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standin(root: Path) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "scale_standin.py"), "--root", str(root),
                             "--port", str(port)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_DISABLE_TELEMETRY": "1"})
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving"), line
    return proc, f"http://127.0.0.1:{port}"


def remaining_due(url: str) -> tuple[int, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            due = conn.execute(text("select count(*) from repos where next_poll_at is null "
                                    "or next_poll_at <= current_timestamp or lease_owner is not null")).scalar()
            total = conn.execute(text("select count(*) from repos")).scalar()
            return int(due or 0), int(total or 0)
    finally:
        engine.dispose()


def cycle_in_process(url: str, endpoint: str, workers: int) -> dict[str, float]:
    from tracker.app import make_tracker
    from tracker.cycle import Cycle
    from tracker.hub import HubClient
    from tracker.settings import Settings

    settings = Settings(database_url=url, hub_endpoint=endpoint, hub_budget_api=100_000,
                        hub_budget_resolvers=500_000, poll_workers=workers)
    tracker = make_tracker(settings, auto_upgrade=True)
    hub = tracker.hub
    assert isinstance(hub, HubClient)
    cycle = Cycle(settings, tracker.store, hub, tracker.poller, clock=tracker.clock, workers=workers)
    wall, cpu = time.perf_counter(), time.process_time()
    ticks = 0
    while True:
        report = cycle.tick()
        ticks += 1
        while cycle.in_flight():
            time.sleep(0.01)
        if report.claimed == 0:
            break
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    api_needed, res_needed = cycle.needs()
    cycle.stop()
    tracker.store.close()
    return {"wall": wall, "cpu": cpu, "ticks": ticks, "api": hub.requests_by_bucket.get("api", 0),
            "resolvers": hub.requests_by_bucket.get("resolvers", 0), "other": hub.requests_by_bucket.get("other", 0),
            "api_per_5min": api_needed, "res_per_5min": res_needed}


def daemon_rss(url: str, endpoint: str, workdir: Path, workers: int, timeout: float = 900.0) -> dict[str, float]:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("update repos set next_poll_at = null"))
    engine.dispose()
    config = workdir / "tracker.toml"
    config.write_text(f'[hub]\nbudget_api_per_5min = 100000\nbudget_resolvers_per_5min = 500000\n\n'
                      f'[poll]\nworkers = {workers}\njitter = "5m"\n')
    env = {**os.environ, "HF_ENDPOINT": endpoint, "TRACKER_DATABASE_URL": url, "TRACKER_CONFIG": str(config),
           "PYTHONPATH": str(ROOT)}
    log = open(workdir / "daemon.log", "wb")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tracker", "run", "--no-api"], env=env, cwd=workdir,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        while time.perf_counter() - started < timeout:
            time.sleep(1.0)
            due, _total = remaining_due(url)
            if due == 0:
                break
        else:
            raise SystemExit("the daemon did not finish its cycle")
        took = time.perf_counter() - started
        status = Path(f"/proc/{proc.pid}/status").read_text()
        fields = {line.split(":")[0]: line.split(":")[1].strip() for line in status.splitlines() if ":" in line}
        rss = int(fields["VmRSS"].split()[0]) / 1024
        hwm = int(fields["VmHWM"].split()[0]) / 1024
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return {"rss_mb": rss, "hwm_mb": hwm, "cycle_s": took}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL instead of SQLite")
    parser.add_argument("--no-daemon", action="store_true", help="skip the daemon's memory measurement")
    args = parser.parse_args()

    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-cycle-")))
        owners = realistic_owners(args.repos)
        t = time.perf_counter()
        watched, head = build_root(tmp / "hub", owners)
        listed = sum(n + e for _o, n, e in owners)
        print(f"setup: {len(watched)} watched repos of {len(owners)} owners ({listed} models on the stand-in) "
              f"in {time.perf_counter() - t:.1f}s")
        standin, endpoint = start_standin(tmp / "hub")
        stack.callback(standin.terminate)
        if args.postgres:
            from tests.postgres import fresh_database, throwaway_cluster

            url = fresh_database(stack.enter_context(throwaway_cluster()))
        else:
            url = f"sqlite:///{tmp}/tracker.sqlite3"
        seed_watches(url, watched, head)

        figures = cycle_in_process(url, endpoint, args.workers)
        n = len(watched)
        per_repo = (figures["api"] + figures["resolvers"] + figures["other"]) / n
        sizes = sorted((c for _o, c, _e in owners), reverse=True)
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"{'PostgreSQL' if args.postgres else 'SQLite'}, {args.workers} poll workers")
        print(f"owners: {len(owners)} (largest {sizes[:3]}, {sum(1 for s in sizes if s == 1)} with one repo)")
        print(f"cycle over {n} unchanged repos: {figures['api']:.0f} api + {figures['resolvers']:.0f} resolvers "
              f"requests = {per_repo:.3f} per repo (goal < {GOAL_REQUESTS_PER_REPO}): "
              f"{'OK' if per_repo < GOAL_REQUESTS_PER_REPO else 'MISSED'}")
        print(f"  api {figures['api'] / n:.3f}/repo, resolvers {figures['resolvers'] / n:.3f}/repo, "
              f"{figures['ticks']:.0f} ticks")
        print(f"  wall {figures['wall']:.1f}s, tracker CPU {figures['cpu']:.1f}s (goal < {GOAL_CPU_SECONDS:.0f}s): "
              f"{'OK' if figures['cpu'] < GOAL_CPU_SECONDS else 'MISSED'}")
        anon_api, anon_res = 450.0, 2700.0  # what the default (anonymous) budget spreads over 5 minutes
        spread = max(figures["api"] / anon_api, figures["resolvers"] / anon_res) * 5
        print(f"  hourly, this watch list needs {figures['api_per_5min']:.0f} api and {figures['res_per_5min']:.0f} "
              f"resolvers requests per 5 min; under the default anonymous budget (500/3,000) one cycle is "
              f"spread over about {spread:.1f} min")
        if not args.no_daemon:
            rss = daemon_rss(url, endpoint, tmp, args.workers)
            print(f"daemon (`tracker run --no-api`) after a cycle over {n} repos ({rss['cycle_s']:.0f}s from start): "
                  f"VmRSS {rss['rss_mb']:.0f} MB, peak {rss['hwm_mb']:.0f} MB (goal < {GOAL_RSS_MB:.0f} MB): "
                  f"{'OK' if rss['hwm_mb'] < GOAL_RSS_MB else 'MISSED'}")


if __name__ == "__main__":
    main()
