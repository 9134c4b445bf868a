"""A flood of commits on one watched repo: what the poll that meets it costs, next to an ordinary poll.

Run: python bench/bench_commit_flood.py [--commits 100000] [--max-new-commits 1000]

tests/hostile/test_commit_flood.py checks the behaviour on a flood ten times ``[poll] max_new_commits``
(the tracker lists no more of a larger one); this runs the full size. A Hub stand-in (in this process)
holds the flooded repo; ``--commits`` commits are written into its git repository (``git fast-import``),
the last one fixing ``eos_token_id``. Printed: the time to write them, the flood poll's wall time, Hub
requests and revisions listed, then the same for the next poll (one real commit on top), and the ratio of
the two polls' requests. Goal: the flood poll lists ``max_new_commits`` + 1 revisions whatever the flood's
size, and its wall time does not grow with ``--commits``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hubstandin import HubStandin

from tests.core.conftest import config_json
from tests.hostile.hub_support import write_flood
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker

REPO = "acme/flooded"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=100_000)
    parser.add_argument("--max-new-commits", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as work:
        hub = HubStandin(Path(work) / "hub").start()
        try:
            hub.create_repo(REPO)
            hub.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 1}'})
            settings = Settings(database={"url": f"sqlite:///{work}/t.sqlite3"},
                                hub={"endpoint": hub.url, "timeout": 60.0},
                                poll={"backlog_per_poll": 5, "max_new_commits": args.max_new_commits})
            tracker = make_tracker(settings, hub=HubClient.from_settings(settings, token=False))
            tracker.store.repos.add(REPO, now=tracker.clock())
            tracker.poll()
            started = time.monotonic()
            write_flood(hub, REPO, args.commits)
            print(f"wrote {args.commits:,} commits in {time.monotonic() - started:.1f} s "
                  f"(load average {os.getloadavg()[0]:.2f})")
            requests = []
            for label in ("flood poll", "next poll"):
                if label == "next poll":
                    hub.commit(REPO, {"README.md": "# after the flood\n"}, message="docs")
                hub.clear_log()
                started = time.monotonic()
                (result,) = tracker.poll([REPO])
                took = time.monotonic() - started
                requests.append(len(hub.requests))
                print(f"{label}: {took:6.2f} s wall, {requests[-1]} Hub requests, {result.new_revisions:,} new "
                      f"revisions listed, {result.processed} analysed, events {result.events}")
            print(f"requests, flood poll / next poll: {requests[0] / max(requests[1], 1):.2f}")
            tracker.close()
        finally:
            hub.stop(wait=False)


if __name__ == "__main__":
    main()
