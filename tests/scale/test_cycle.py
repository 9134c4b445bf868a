"""The poll cycle: owner listings replace HEAD checks, webhooks, the Hub budget, a hanging repo, claims."""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import Executor, Future
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from tests.core.conftest import config_json
from tests.scale.conftest import make_due, run_cycle
from tests.waiting import wait_for
from tracker.adapters.hub.budget import HubBudget, bucket_of
from tracker.adapters.store.tables import repos
from tracker.core.model import RepoId
from tracker.pipeline.poll_run import PollRun
from tracker.pipeline.polling import PollResult

BIG = [RepoId(f"big/m{i}") for i in range(6)]
PAIR = [RepoId("pair/a"), RepoId("pair/b")]
SOLO = RepoId("solo/only")


def hub_calls(hub) -> list[tuple[str, str]]:
    """(method, path + query) of every request, in order."""
    return [(r.method, r.path + (f"?{r.query}" if r.query else "")) for r in hub.requests]


def watch(hub, tracker, repo_ids) -> dict[str, str]:
    heads = {}
    for repo_id in repo_ids:
        hub.create_repo(repo_id)
        heads[repo_id] = hub.commit(repo_id, {"config.json": config_json()}, message="initial")
        tracker.store.repos.add(repo_id, now=tracker.clock())
    return heads


def schedule_rows(tracker) -> dict[str, tuple]:
    with tracker.store.db.engine.connect() as conn:
        rows = conn.execute(select(repos.c.repo_id, repos.c.next_poll_at, repos.c.lease_owner, repos.c.last_outcome,
                                   repos.c.poll_requests, repos.c.poll_served))
        return {r.repo_id: (_utc(r.next_poll_at), *tuple(r[2:])) for r in rows}


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def test_one_listing_per_owner_checks_its_unchanged_repos_and_a_moved_one_is_polled(hub_standin, scale_settings,
                                                                                     build):
    tracker, cycle = build(scale_settings)
    watch(hub_standin, tracker, [*BIG, *PAIR, SOLO])
    run_cycle(cycle)  # the first cycle reads every repo on its own: nothing is known yet
    assert all(r.last_seen_sha for r in tracker.store.repos.all())
    make_due(tracker)
    hub_standin.clear_log()
    run_cycle(cycle)
    calls = sorted(hub_calls(hub_standin))
    assert calls == [
        ("GET", "/api/models?author=big&expand=sha&expand=lastModified&expand=gated"),
        ("GET", "/api/models?author=pair&expand=sha&expand=lastModified&expand=gated"),
        ("HEAD", "/solo/only/resolve/main/config.json"),
    ]  # 3 requests for 9 unchanged repos
    now = datetime.now(UTC)
    for repo_id, (next_at, lease, outcome, _req, _served) in schedule_rows(tracker).items():
        assert (lease, outcome) == (None, "unchanged"), repo_id
        assert now + timedelta(minutes=59) < next_at <= now + timedelta(hours=1), repo_id

    moved = hub_standin.commit(BIG[3], {"config.json": config_json(vocab_size=1000)}, message="resize")
    make_due(tracker)
    hub_standin.clear_log()
    run_cycle(cycle)
    calls = hub_calls(hub_standin)
    assert sorted(c for c in calls if c[1].startswith("/api/models?")) == [
        ("GET", "/api/models?author=big&expand=sha&expand=lastModified&expand=gated"),
        ("GET", "/api/models?author=pair&expand=sha&expand=lastModified&expand=gated")]
    rest = [c for c in calls if not c[1].startswith("/api/models?")]
    assert ("HEAD", "/solo/only/resolve/main/config.json") in rest
    assert [c for c in rest if c != ("HEAD", "/solo/only/resolve/main/config.json")
            and not c[1].startswith(("/big/m3/", "/api/models/big/m3/", "/api/models/big/m3"))] == []
    assert ("HEAD", "/big/m3/resolve/main/config.json") in rest
    assert tracker.store.revisions.get(tracker.repo(BIG[3]).pk, moved).status == "done"
    assert tracker.repo(BIG[3]).last_seen_sha == moved


@pytest.mark.parametrize(("others", "first_check", "later_checks"), [
    # 7 models, 2 a page: the 3 watched ones are on the first 2 pages; 2 pages check them, every time
    ("zz-other", ["models", "models"], ["models", "models"]),
    # the 3 watched ones are on pages 3 and 4: the listing stops after 2 pages (fewer than 3 HEADs),
    # the repos it did not reach get their HEAD, and the owner is checked by HEADs from then on
    ("aa-other", ["models", "models", "head", "head", "head"], ["head", "head", "head"]),
])
def test_an_owner_listing_stops_before_it_costs_more_than_the_heads_it_replaces(
        hub_standin, scale_settings, build, others, first_check, later_checks):
    hub_standin.models_page_size = 2
    tracker, cycle = build(scale_settings)
    watch(hub_standin, tracker, [RepoId("wide/w0"), RepoId("wide/w1"), RepoId("wide/w2")])
    for i in range(4):
        hub_standin.create_repo(f"wide/{others}{i}")
    run_cycle(cycle)

    def check() -> list[str]:
        make_due(tracker)
        hub_standin.clear_log()
        run_cycle(cycle)
        calls = hub_calls(hub_standin)
        assert all(path.startswith("/api/models?author=wide&") or (m, path) in [
            ("HEAD", f"/wide/w{i}/resolve/main/config.json") for i in range(3)] for m, path in calls), calls
        return sorted("models" if path.startswith("/api/models") else "head" for _m, path in calls)[::-1]

    assert check() == first_check
    assert check() == later_checks
    assert check() == later_checks


def test_a_hub_webhook_makes_its_repo_due_for_a_poll_of_its_own(hub_standin, scale_settings, build):
    tracker, cycle = build(scale_settings)
    watch(hub_standin, tracker, PAIR)
    run_cycle(cycle)
    new = hub_standin.commit(PAIR[0], {"config.json": config_json(vocab_size=7)}, message="change")
    queue = tracker.store.schedule
    assert queue.request_poll(PAIR[0], now=datetime.now(UTC)) is True
    assert queue.request_poll("nobody/watched", now=datetime.now(UTC)) is False
    hub_standin.clear_log()
    run_cycle(cycle)
    calls = hub_calls(hub_standin)
    assert calls[0] == ("HEAD", "/pair/a/resolve/main/config.json")  # no listing: the webhook said it moved
    assert not any(path.startswith("/api/models?") or "/pair/b/" in path for _m, path in calls)
    assert tracker.repo(PAIR[0]).last_seen_sha == new
    (_next, lease, outcome, requests, served) = schedule_rows(tracker)[PAIR[0]]
    assert (lease, outcome, requests, served) == (None, "new", 1, 1)


def test_a_webhook_during_a_poll_leaves_the_repo_due(hub_standin, scale_settings, build):
    tracker, cycle = build(scale_settings)
    watch(hub_standin, tracker, [SOLO])
    queue = tracker.store.schedule
    now = datetime.now(UTC)
    (due,) = queue.claim_due("me", now=now, until=now + timedelta(minutes=5), limit=10)
    queue.request_poll(SOLO, now=now)  # arrives while "me" polls
    queue.finish(due, "me", next_at=now + timedelta(hours=1), now=now)
    next_at, lease, _outcome, requests, served = schedule_rows(tracker)[SOLO]
    assert (next_at, lease, requests, served) == (now, None, 1, 0)
    (again,) = queue.claim_due("me", now=now, until=now + timedelta(minutes=5), limit=10)
    assert again.requested is True


def test_claims_of_two_replicas_never_overlap(hub_standin, scale_settings, build, db_url):
    tracker, _cycle = build(scale_settings)
    for i in range(60):
        tracker.store.repos.add(RepoId(f"o{i % 7}/r{i}"), now=tracker.clock())
    queues = [tracker.store.schedule, tracker.store.schedule]
    now = datetime.now(UTC)
    got: dict[int, list[int]] = {0: [], 1: []}
    barrier = threading.Barrier(2)
    sizes: list[int] = []

    def claim(n: int) -> None:
        barrier.wait()
        while True:
            batch = queues[n].claim_due(f"replica{n}", now=now, until=now + timedelta(minutes=5), limit=7)
            if not batch:
                return
            sizes.append(len(batch))
            got[n].extend(d.pk for d in batch)

    threads = [threading.Thread(target=claim, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(got[0]).isdisjoint(got[1])
    assert max(sizes) == 7  # never more than asked for
    assert sorted(got[0] + got[1]) == sorted(r.pk for r in tracker.store.repos.all())
    if db_url.startswith("postgresql"):
        assert got[0] and got[1], "both replicas got work"


def test_the_budget_spreads_the_cycle_and_says_when_the_schedule_needs_more(hub_standin, scale_settings, build,
                                                                             caplog):
    clock = [0.0]
    budget = HubBudget(20, 20, monotonic=lambda: clock[0])  # bursts of 2, then 18 per 5 minutes
    tracker, cycle = build(scale_settings, budget=budget, poll={"every": 60.0})
    solos = [RepoId(f"solo{i}/only") for i in range(5)]
    watch(hub_standin, tracker, solos)
    first = cycle.tick()
    assert (first.claimed, first.polls, first.released) == (2, 2, 0)  # the burst allowance: one HEAD each
    assert wait_for(lambda: cycle.in_flight() == 0)
    spent = budget.spent("resolvers")
    assert spent >= 2
    second = cycle.tick()
    assert (second.claimed, second.polls) == (0, 0)  # nothing left until the bucket refills
    clock[0] += 300.0 / 18 * (spent - 1)  # time to earn back all but one of what went over
    third = cycle.tick()
    assert third.polls == 1
    assert wait_for(lambda: cycle.in_flight() == 0)
    caplog.set_level(logging.INFO, logger="tracker.cycle")
    assert cycle.check_budget() is False  # 5 repos a minute: 25 HEADs per 5 minutes, 18 allowed
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "5 repos every 1m need 25 resolver requests per 5 min; the budget allows 18: each repo is checked on its "
        "own every 1m23s"]
    # The intervals are stretched evenly to what the budget holds.
    assert cycle.own_interval(solos[0], None) == pytest.approx(60.0 * 25 / 18)


class StartsAtOnce(Executor):
    """A pool whose worker runs each task the moment it is handed over, to its end, before the hand-over
    returns: the scheduling that puts a worker's spending soonest."""

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the future carries it, as a pool's would
            future.set_exception(exc)
        return future


def test_a_worker_spending_at_once_does_not_crowd_out_the_rest_of_its_tick(hub_standin, scale_settings, build):
    """The tick admits what its budget holds before any poll runs: a first poll spending its request while
    its reservation still stands must not leave the second claimed repo without room."""
    clock = [0.0]
    budget = HubBudget(20, 20, monotonic=lambda: clock[0])  # a burst of 2
    tracker, cycle = build(scale_settings, budget=budget, poll={"every": 60.0})
    cycle.pool.shutdown()
    cycle.pool = StartsAtOnce()
    solos = [RepoId(f"solo{i}/only") for i in range(5)]
    watch(hub_standin, tracker, solos)
    first = cycle.tick()
    assert (first.claimed, first.polls, first.released) == (2, 2, 0)
    assert cycle.in_flight() == 0
    assert sorted(r for r, row in schedule_rows(tracker).items() if row[2] == "baseline") == solos[:2]


def test_budget_buckets_follow_the_hubs_rate_limit_buckets():
    assert [bucket_of(p) for p in ("/acme/m/resolve/main/config.json", "/api/models/acme/m/tree/x", "/api/models",
                                   "/acme/m")] == ["resolvers", "api", "api", "other"]
    clock = [0.0]
    budget = HubBudget(500, 3000, monotonic=lambda: clock[0])
    assert (budget.room("api"), budget.room("resolvers")) == (50.0, 300.0)
    assert (budget.pace("api"), budget.pace("resolvers")) == (450.0, 2700.0)  # any 5 minutes: burst + pace
    budget.spend("api", 50)
    budget.exhausted("api", 30.0)  # a 429 with Retry-After: 30
    clock[0] = 29.0
    assert budget.room("api") == 0.0
    clock[0] = 40.0
    assert budget.room("api") == pytest.approx(450 / 300 * 10)
    assert budget.wait_for("api", 30) == pytest.approx(10.0)


def test_a_hanging_repo_holds_one_worker_and_the_others_are_polled(hub_standin, scale_settings, build):
    tracker, cycle = build(scale_settings, hub={"poll_deadline": 2.0})
    watch(hub_standin, tracker, [RepoId("slow/hang"), RepoId("fast/a"), RepoId("quick/b"), RepoId("swift/c")])
    hub_standin.faults.add("/slow/hang/resolve/", delay=30.0, times=None)
    results: list[PollResult] = []
    cycle.on_result = results.append
    cycle.tick()
    assert wait_for(lambda: len(results) == 4, timeout=120)
    by_repo = {r.repo: r for r in results}
    assert [by_repo[r].status for r in ("fast/a", "quick/b", "swift/c")] == ["baseline"] * 3
    assert by_repo["slow/hang"].status == "error"
    assert "deadline" in by_repo["slow/hang"].error
    # Cut by the 2 s poll deadline, not the Hub's 30 s answer: the poll is an error, not a baseline.
    next_at, lease, *_ = schedule_rows(tracker)["slow/hang"]
    assert lease is None and next_at <= datetime.now(UTC) + timedelta(minutes=10)  # retried within 10 minutes


def test_owners_with_hub_webhooks_are_polled_only_as_a_safety_net(hub_standin, scale_settings, build, tmp_path):
    from tracker.adapters.settings import load_settings
    from tracker.core.errors import ConfigError

    config = tmp_path / "tracker.toml"
    config.write_text('[hub]\nwebhook_owners = ["pushy"]\nwebhook_safety_net = "12h"\nbudget_api_per_5min = 1000\n'
                      'budget_resolvers_per_5min = 5000\n\n[poll]\nevery = "30m"\nworkers = 2\n')
    loaded = load_settings(config, env={})
    assert (loaded.hub.webhook_owners, loaded.hub.webhook_safety_net, loaded.hub.budget_api_per_5min,
            loaded.hub.budget_resolvers_per_5min, loaded.poll.workers) == (("pushy",), 43200.0, 1000, 5000, 2)
    config.write_text('[hub]\nwebhook_owners = ["no/slash"]\n')
    with pytest.raises(ConfigError, match=r": \[hub\] webhook_owners: invalid owner name 'no/slash': use Hub user or organisation names$"):
        load_settings(config, env={})
    config.write_text('[hub]\nbudget_api_per_5min = 0\n')
    with pytest.raises(ConfigError, match=r": \[hub\] budget_api_per_5min: must be a whole number, at least 1, not 0$"):
        load_settings(config, env={})

    tracker, cycle = build(scale_settings, hub={"webhook_owners": ("Pushy",), "webhook_safety_net": 86400.0})
    assert cycle.interval("pushy/model", None) == 86400.0  # owner names match whatever their case
    assert cycle.interval("pushy/model", 7 * 86400.0) == 7 * 86400.0
    assert cycle.interval("other/model", None) == 3600.0
    watch(hub_standin, tracker, [RepoId("pushy/a"), RepoId("pushy/b")])
    run_cycle(cycle)
    next_at, *_ = schedule_rows(tracker)["pushy/a"]
    assert next_at > datetime.now(UTC) + timedelta(hours=23)  # the webhook brings the next poll, not the clock


def test_repos_of_an_owner_with_hub_webhooks_cost_no_requests_between_safety_net_checks(
        hub_standin, scale_settings, build):
    tracker, cycle = build(scale_settings, hub={"webhook_owners": ("hooked",)})
    hooked = [RepoId(f"hooked/m{i}") for i in range(3)]
    others = [RepoId(f"plain{i}/m") for i in range(3)]
    watch(hub_standin, tracker, hooked + others)
    run_cycle(cycle)  # every repo read once
    hours = 24
    per_cycle = []
    for _hour in range(hours):  # a day of hourly cycles: the plain repos are due each hour, the hooked ones not
        make_due(tracker, *others)
        hub_standin.clear_log()
        run_cycle(cycle)
        calls = hub_calls(hub_standin)
        assert not any("/hooked/" in path for _m, path in calls), calls
        per_cycle.append(len(calls))
    assert all(n <= len(others) for n in per_cycle)  # HEADs or one page of the change listing
    rows = schedule_rows(tracker)
    now = datetime.now(UTC)
    for repo_id in hooked:  # next checked by the safety net, a day after the first read
        assert now + timedelta(hours=23) < rows[repo_id][0] <= now + timedelta(days=1, minutes=5), repo_id
    # A webhook delivery makes its repo due at once: checked by a poll of its own, the others still cost nothing.
    assert tracker.store.schedule.request_poll(hooked[0], now=datetime.now(UTC)) is True
    hub_standin.clear_log()
    run_cycle(cycle)
    assert {path.split("/")[1] if not path.startswith("/api/models/") else path.split("/")[4]
            for _m, path in hub_calls(hub_standin)} == {"hooked"}
    assert not any(f"/{r}/" in path for r in hooked[1:] for _m, path in hub_calls(hub_standin))


def test_tracker_poll_waits_inline_for_the_budget_up_to_max_wait_and_defers_the_rest(hub_standin, scale_settings,
                                                                                     build):
    clock = [0.0]
    budget = HubBudget(20, 20, monotonic=lambda: clock[0])  # bursts of 2, then one request per 16.7 s
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # the budget's clock moves on instead of the test waiting
        slept.append(seconds)
        clock[0] += seconds

    tracker, cycle = build(scale_settings, budget=budget, hub={"max_wait": 600.0})
    cycle.sleep = sleep
    repos_ = [RepoId(f"patient{i}/only") for i in range(3)]
    watch(hub_standin, tracker, repos_)
    results = PollRun(cycle).run()
    assert [r.status for r in results] == ["baseline"] * 3
    # Two polls ran on the burst; the third waited for the api bucket, in steps of at most 5 s.
    assert budget.spent("api") == 10 and slept and all(0 < s <= 5.0 for s in slept)

    slept_before = len(slept)
    cycle.settings = cycle.settings.changed(hub={"max_wait": 10.0})
    make_due(tracker)
    results = PollRun(cycle).run()
    assert [r.status for r in results] == ["deferred"] * 3
    waits = [re.fullmatch(r"not polled: the Hub request budget is spent for (\d+)s; the next cycle polls it",
                          r.error or "") for r in results]
    assert all(w and int(w[1]) > 10 for w in waits), [r.error for r in results]
    assert len(slept) == slept_before  # longer than hub.max_wait: not waited for
