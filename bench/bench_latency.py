"""How soon the daemon reads a push, a deletion and a gating, and what it asks the Hub for, in simulated time.

N watched repos (one per owner, so each check of its own is a HEAD) among M models on a stand-in
(virtual models sharing one template commit, ``scale_standin.VirtualStore``); a fraction of all the
models changes every simulated minute, at random moments (a real commit when the model is watched, a
new ``lastModified`` otherwise). Among the watched, one repo is deleted and one gated at minute 2, each
due for its check of its own late in the hour (the worst case: the surprise just after a check).
The daemon's cycle (``tracker/pipeline/cycle.py``: the firehose walk every ``listen_every``, the own
checks at each repo's interval) runs on an injected clock: each tick is two simulated seconds, and the
clock waits for the tick's polls, so a poll costs no simulated time (push-to-read is the time to the
tick that polled it).

Prints, in simulated time: push-to-read p50 and p99; deletion-to-event and gating-to-event; requests
per 5 minutes by bucket: the walks' pages and the own checks (repos checked on their own). Run:

    python bench/bench_latency.py                       # 10,000 watched of 300,000 models, one hour
    python bench/bench_latency.py --watched 1000 --models 30000 --minutes 20   # a quick look
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hubstandin import HubStandin
from hubstandin.gitrepos import RepoStore, format_date
from hubstandin.hub import build_app
from scale_standin import CONFIG, VirtualStore
from sqlalchemy import func, insert, select

from tracker.adapters.hub import HubClient
from tracker.adapters.hub.budget import HubBudget
from tracker.adapters.settings import Settings
from tracker.adapters.store.tables import events, repos
from tracker.app import make_tracker
from tracker.pipeline.cycle import Cycle

START = datetime(2026, 1, 1, tzinfo=UTC)
TICK = 2.0  # seconds of simulated time per tick (the daemon's TICK_SECONDS)


class SimClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return (self.now - START).total_seconds()


def touch(store: VirtualStore, repo_ids: list[str], when: datetime) -> None:
    """Unwatched models changed upstream: only their ``lastModified`` moves (no commit needed to list them)."""
    with store.lock:
        heads = store.main_heads()
        for repo_id in repo_ids:
            sha, _date = heads[repo_id]
            heads[repo_id] = (sha, when)
        store.version += 1


def build(args: argparse.Namespace, root: Path) -> tuple[HubStandin, list[str], list[str], dict[str, str]]:
    watched = [f"w{i:05d}/model" for i in range(args.watched)]
    others = [f"u{i:06d}/model" for i in range(args.models - args.watched)]
    template_root = root / "template"
    RepoStore(template_root).create_repo("template/model")
    head = RepoStore(template_root).commit("template/model", {"config.json": CONFIG, "README.md": b"# model\n"},
                                           message="initial", date=START - timedelta(days=1))
    hub = HubStandin(root / ".empty")
    hub.store = VirtualStore(template_root, watched + others, head, format_date(START - timedelta(days=1)))
    hub.app = build_app(hub)
    hub.start()
    # The two repos that will be deleted and gated get a commit of their own first: a virtual model's
    # git directory is the template's, which a deletion must not touch.
    heads = {repo_id: head for repo_id in watched}
    for repo_id in watched[1:3]:
        heads[repo_id] = hub.store.commit(repo_id, {"config.json": CONFIG + repo_id.encode()}, message="own",
                                          date=START - timedelta(days=400))  # older than the catalogue
    return hub, watched, others, heads


def seed(tracker, heads: dict[str, str], hub: HubStandin, every: float, rng: random.Random) -> None:
    """Every watched repo read once, its own checks spread evenly over its interval (a daemon in its stride)."""
    rows = []
    worst = {repo_id: START + timedelta(seconds=every * (0.96 - 0.01 * n)) for n, repo_id in enumerate(list(heads)[1:3])}
    for repo_id, head in heads.items():
        # The deleted and the gated repo are due late (the worst case: checked on their own just before)
        due = worst.get(repo_id) or START + timedelta(seconds=rng.uniform(0, every))
        rows.append({"repo_id": repo_id, "branch": "main", "state": "active", "every_seconds": every,
                     "hub_uid": hub.store.lookup(repo_id)[0].internal_id, "last_seen_sha": head, "created_at": START,
                     "last_polled_at": due - timedelta(seconds=every), "last_success_at": due - timedelta(seconds=every),
                     "last_checked": due - timedelta(seconds=every), "next_poll_at": due, "listing_epoch": 0})
    with tracker.store.db.engine.begin() as conn:
        for i in range(0, len(rows), 2000):
            conn.execute(insert(repos), rows[i:i + 2000])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=300_000)
    parser.add_argument("--watched", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=0.002, help="fraction of all models changed per minute")
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--every", type=float, default=3600.0, help="each watched repo's interval, seconds")
    args = parser.parse_args()
    rng = random.Random(42)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        hub, watched, others, heads = build(args, root)
        clock = SimClock(START)
        settings = Settings(database={"url": f"sqlite:///{root}/t.sqlite3"},
                            hub={"endpoint": hub.url, "timeout": 30.0}, poll={"jitter": 0.0})
        budget = HubBudget(settings.hub.budget_api_per_5min, settings.hub.budget_resolvers_per_5min,
                           monotonic=clock.monotonic)
        client = HubClient(hub.url, timeout=30.0, token=False, sleep=lambda _s: None, on_request=budget.spend,
                           on_rate_limited=budget.exhausted)
        tracker = make_tracker(settings, hub=client, clock=clock, auto_upgrade=True)
        seed(tracker, heads, hub, args.every, rng)
        cycle = Cycle(settings, tracker.store, client, tracker.poller, clock=clock, budget=budget,
                      queue=tracker.queue, workers=4)
        watched_set = set(watched)
        # The changes of the whole run, at random moments: (time, repo).
        per_minute = max(1, round(args.rate * args.models))
        changes = sorted((START + timedelta(minutes=m, seconds=rng.uniform(0, 60)), rng.choice(watched + others))
                         for m in range(args.minutes) for _ in range(per_minute))
        gone, gated = watched[1], watched[2]
        # Early in the run, long before their own checks: the worst case (a deletion just after a check).
        surprises = {gone: START + timedelta(minutes=2), gated: START + timedelta(minutes=2, seconds=1)}
        pushes: dict[str, list[datetime]] = {}  # watched repo -> push times not read yet
        delays: list[float] = []
        walk_pages: Counter[int] = Counter()
        own_checks: Counter[int] = Counter()
        push_polls: Counter[int] = Counter()
        next_change = 0
        done_surprises: set[str] = set()
        end = START + timedelta(minutes=args.minutes)
        hub.clear_log()
        while clock.now < end:
            # Upstream: the changes due by now.
            batch: list[str] = []
            while next_change < len(changes) and changes[next_change][0] <= clock.now:
                when, repo_id = changes[next_change]
                next_change += 1
                if repo_id in watched_set and repo_id not in surprises:
                    hub.store.commit(repo_id, {"config.json": CONFIG.replace(
                        b'"vocab_size": 30522', f'"vocab_size": {rng.randint(1, 99999)}'.encode())},
                        message="update", date=when)
                    pushes.setdefault(repo_id, []).append(when)
                elif repo_id not in watched_set:
                    batch.append(repo_id)
            if batch:
                touch(hub.store, batch, clock.now)
            for repo_id, when in surprises.items():
                if when <= clock.now and repo_id not in done_surprises:
                    done_surprises.add(repo_id)
                    hub.delete_repo(repo_id) if repo_id == gone else hub.set_gated(repo_id, True)
            # The daemon: one tick, its polls done before the clock moves on.
            report = cycle.tick()
            while cycle.in_flight():
                time.sleep(0.002)
            window = int((clock.now - START).total_seconds() // 300)
            walk_pages[window] += report.walk_pages
            if report.claimed:
                read_now = 0
                for repo_id in list(pushes):
                    row = tracker.store.repos.get(repo_id)
                    if row is not None and row.last_seen_sha == hub.store.resolve(repo_id, "main"):
                        delays += [(clock.now - t).total_seconds() for t in pushes.pop(repo_id)]
                        read_now += 1
                with tracker.store.db.engine.connect() as conn:  # checked on their own in this tick
                    checked = int(conn.execute(select(func.count()).select_from(repos).where(
                        repos.c.last_checked >= clock.now)).scalar_one())
                own_checks[window] += checked - read_now  # the scheduled ones: a push's poll is counted apart
                push_polls[window] += read_now
            clock.now += timedelta(seconds=TICK)
        with tracker.store.db.engine.connect() as conn:
            happened = {(r.repo_id, r.kind): r.created_at for r in conn.execute(
                select(repos.c.repo_id, events.c.kind, events.c.created_at).join(repos, repos.c.id == events.c.repo_pk))}
        cycle.stop()
        tracker.store.close()
        hub.stop()
    windows = list(range(args.minutes // 5))
    full = windows[1:] or windows  # the first window starts from a cold listing
    goal = args.watched * 300 / args.every
    result = {
        "watched": args.watched, "models": args.models, "changes_per_minute": per_minute,
        "minutes": args.minutes, "every_s": args.every,
        "push_to_read_s": {"p50": percentile(delays, 50), "p99": percentile(delays, 99), "reads": len(delays),
                           "unread_at_end": sum(len(v) for v in pushes.values())},
        "deletion_to_event_s": _delay(happened.get((gone, "deleted")), surprises[gone]),
        "gating_to_event_s": _delay(happened.get((gated, "gated")), surprises[gated]),
        "walk_pages_per_5min": {"max": max(walk_pages[w] for w in full), "mean": sum(walk_pages[w] for w in full) / len(full)},
        "own_checks_per_5min": {"mean": sum(own_checks[w] for w in full) / len(full),
                                "min": min(own_checks[w] for w in full), "max": max(own_checks[w] for w in full),
                                "goal": round(goal, 1),
                                "push_polls_mean": sum(push_polls[w] for w in full) / len(full)},
        "wall_s": round(time.monotonic() - started, 1),
    }
    print(json.dumps(result, indent=2))


def _delay(at: datetime | None, since: datetime) -> float | None:
    return None if at is None else (at - since).total_seconds()


if __name__ == "__main__":
    main()
