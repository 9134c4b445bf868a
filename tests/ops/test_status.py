"""`tracker status`: the right state for a healthy, a failing, a never-existing and a deleted repo; exit 1 when unhealthy."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.clocks import ManualClock
from tests.core.conftest import config_json
from tests.ops.conftest import migrated
from tracker.core.store_types import DeliveryBacklog, RepoHealthRow
from tracker.surfaces.status import assess, assess_repo, hub_unreachable, render, span

NOT_FOUND = "not found on the Hub (check the id; private and gated repos need HF_TOKEN)"


@pytest.fixture
def four_repos(hub_standin, settings, make, db_url):
    """acme/ok (read), acme/flaky (the Hub answers 500), acme/typo (never existed), acme/gone (read, then deleted)."""
    tracker = make(settings, database={"url": migrated(db_url)})
    for repo in ("acme/ok", "acme/flaky", "acme/gone"):
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()})
    for repo in ("acme/ok", "acme/flaky", "acme/typo", "acme/gone"):
        tracker.store.repos.add(repo, now=tracker.clock())
    hub_standin.faults.add("/acme/flaky/", status=500, times=None)
    first = {r.repo: r.status.value for r in tracker.poll()}
    assert first == {"acme/flaky": "error", "acme/gone": "baseline", "acme/ok": "baseline", "acme/typo": "not_found"}
    hub_standin.delete_repo("acme/gone")
    second = {r.repo: r.status.value for r in tracker.poll()}
    assert second == {"acme/flaky": "error", "acme/gone": "gone", "acme/ok": "unchanged", "acme/typo": "not_found"}
    return tracker


def test_status_json_for_healthy_failing_never_existing_and_deleted_repos(four_repos, cli, db_url, hub_standin):
    result = cli("status", "--json", env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    repos = {r["repo"]: r for r in report["repos"]}
    summary = {name: (r["state"], r["health"], r["last_outcome"]) for name, r in repos.items()}
    assert summary == {
        "acme/flaky": ("active", "unhealthy", "error"),
        "acme/gone": ("gone", "attention", "gone"),
        "acme/ok": ("active", "ok", "unchanged"),
        "acme/typo": ("not_found", "unhealthy", "not_found"),
    }
    flaky_error = (f"HEAD {hub_standin.url}/acme/flaky/resolve/main/config.json: HTTP 500 (after 5 retries)")
    assert repos["acme/flaky"]["last_error"] == flaky_error
    assert repos["acme/ok"]["last_error"] is None
    assert repos["acme/gone"]["last_error"].startswith("repository not found (deleted, private or renamed away): ")
    assert "\n" not in repos["acme/gone"]["last_error"] and "\n" not in repos["acme/typo"]["last_error"]
    assert report["problems"] == [f"acme/flaky: last poll failed: {flaky_error}", f"acme/typo: {NOT_FOUND}"]
    assert report["healthy"] is False
    # A check of its own: the Hub answered for the repo (a listing that listed it, or a HEAD, a 404 included);
    # a poll that failed is none.
    assert repos["acme/flaky"]["last_checked"] is None
    assert [repos[name]["last_checked"] == repos[name]["last_poll"] for name in ("acme/gone", "acme/ok", "acme/typo")] \
        == [True, True, True]
    for r in repos.values():
        polled = datetime.fromisoformat(r["last_poll"].replace("Z", "+00:00"))
        due = datetime.fromisoformat(r["next_due"].replace("Z", "+00:00"))
        # A failed poll is tried again after the cycle's error retry (10 minutes), counted from when the
        # poll gave up (its five retries take a moment after last_poll); the rest at their interval plus
        # the cycle's jitter ([poll] jitter, 5 minutes by default).
        if r["last_outcome"] == "error":
            assert timedelta(minutes=10) <= due - polled < timedelta(minutes=11)
        else:
            assert timedelta(hours=1) <= due - polled <= timedelta(hours=1, minutes=5)
        assert (r["deferred_until"], r["lease_holder"], r["pending_revisions"]) == (None, None, 0)
    # The baseline of acme/ok is its newest commit: no lag is counted for a baseline.
    assert repos["acme/ok"]["newest_commit"]["lag_seconds"] is None
    assert repos["acme/ok"]["newest_commit"]["sha"] == hub_standin.commits("acme/ok")[-1]
    assert repos["acme/typo"]["newest_commit"] is None
    assert report["poll_backlog"] == {"pending_revisions": 0, "oldest_listed_at": None}
    assert report["deliveries"] == {"pending": 0, "retrying": 0, "dead": 0, "oldest_pending_at": None}


def test_status_text_and_a_healthy_exit(four_repos, cli, db_url):
    text = cli("status", env={"TRACKER_DATABASE_URL": db_url}).output
    lines = text.splitlines()
    assert lines[0].split() == ["REPO", "STATE", "LAST", "POLL", "LAST", "CHECKED", "OUTCOME", "NEXT", "DUE", "PENDING",
                                "LAG", "HEALTH"]
    polled, checked = lines[0].index("LAST POLL"), lines[0].index("LAST CHECKED")
    rows = [(line.split()[0], line[polled:polled + 16].strip(), line[checked:checked + 16].strip())
            for line in lines[1:] if line.startswith("acme/")]
    # LAST CHECKED: never for the repo whose polls fail; the others were checked on their own at their last poll.
    assert [(repo, last_checked if repo == "acme/flaky" else last_checked == last_poll)
            for repo, last_poll, last_checked in rows] == [
        ("acme/flaky", "never"), ("acme/gone", True), ("acme/ok", True), ("acme/typo", True)]
    assert [line.split()[0:2] + line.split()[-1:] for line in lines[1:] if line.startswith("acme/")] == [
        ["acme/flaky", "active", "unhealthy"], ["acme/gone", "gone", "attention"], ["acme/ok", "active", "ok"],
        ["acme/typo", "not_found", "unhealthy"]]
    assert lines[-1] == "status: unhealthy (2 problems)"
    for repo in ("acme/flaky", "acme/typo", "acme/gone"):
        four_repos.store.repos.remove(repo)
    result = cli("status", env={"TRACKER_DATABASE_URL": db_url})
    assert result.exit_code == 0
    assert result.output.splitlines()[-3:] == [
        "poll backlog: 0 revision(s) waiting to be read", "deliveries: 0 pending (0 being retried), 0 dead",
        "status: healthy"]


# -- the pure part -------------------------------------------------------------------------------------------

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def row(**kw) -> RepoHealthRow:
    base = dict(repo_id="acme/a", branch="main", every_seconds=None, state="active", last_outcome="unchanged",
                last_polled_at=NOW - timedelta(minutes=10), last_error=None, defer_until=None, lease_owner=None,
                lease_until=None, created_at=NOW - timedelta(days=30), pending=0, oldest_pending_listed_at=None,
                newest_sha="a" * 40, newest_date=NOW - timedelta(hours=5), newest_status="done",
                newest_baseline=False, newest_analysed_at=NOW - timedelta(hours=4), newest_advisory=None,
                newest_advisory_at=None)
    base.update(kw)
    return RepoHealthRow(**base)


NO_DELIVERIES = DeliveryBacklog(pending=0, retrying=0, dead=0, oldest_pending_at=None)


def test_lag_runs_from_the_commit_to_its_advisory_or_to_its_reading_or_to_now():
    with_advisory = row(newest_advisory="UPT-1", newest_advisory_at=NOW - timedelta(hours=3))
    assert assess_repo(with_advisory, now=NOW, default_every=3600).lag_seconds == 2 * 3600
    assert assess_repo(row(), now=NOW, default_every=3600).lag_seconds == 3600
    waiting = row(newest_status="pending", newest_analysed_at=None, pending=1,
                  oldest_pending_listed_at=NOW - timedelta(minutes=30))
    assert assess_repo(waiting, now=NOW, default_every=3600).lag_seconds == 5 * 3600
    assert assess_repo(row(newest_baseline=True), now=NOW, default_every=3600).lag_seconds is None
    # A backfilled history: the newest commit is a year old, but watching began two hours ago.
    backfilled = row(newest_date=NOW - timedelta(days=337), created_at=NOW - timedelta(hours=2),
                     newest_advisory="UPT-1", newest_advisory_at=NOW - timedelta(hours=1))
    assert assess_repo(backfilled, now=NOW, default_every=3600).lag_seconds == 3600


@pytest.mark.parametrize(("seconds", "said"), [
    (None, "-"), (45, "45 s"), (720, "12 min"), (3 * 3600, "3 h"), (3 * 3600 + 60, "3 h 1 min"),
    (2 * 86400 + 4 * 3600, "2 d 4 h"), (3 * 86400, "3 d"), (337 * 86400 + 22 * 3600, "337 d"),
])
def test_durations_are_human(seconds, said):
    assert span(seconds) == said


def test_the_status_table_shows_minutes_and_human_lags():
    report = assess([row(newest_advisory="UPT-1", newest_advisory_at=NOW - timedelta(hours=3))], NO_DELIVERIES,
                    now=NOW, default_every=3600)
    assert render(report).splitlines()[:2] == [
        f"{'REPO':40} STATE     LAST POLL        LAST CHECKED     OUTCOME   NEXT DUE         PENDING       LAG  HEALTH",
        f"{'acme/a':40} active    2026-05-01 11:50 never            unchanged 2026-05-01 12:50       0       2 h  ok",
    ]


def test_a_fresh_outage_is_less_than_a_minute():
    assert hub_unreachable(2, 2, NOW - timedelta(seconds=20), now=NOW) == (
        "Hub unreachable for less than a minute (every poll since 2026-05-01T11:59:40Z failed)")


def test_a_deferral_and_a_lease_are_shown_and_need_attention_only():
    status = assess_repo(row(defer_until=NOW + timedelta(minutes=20), lease_owner="host:12:abcd",
                             lease_until=NOW + timedelta(minutes=5)), now=NOW, default_every=3600)
    assert (status.health, status.deferred_until, status.lease_holder, status.next_due) == (
        "attention", NOW + timedelta(minutes=20), "host:12:abcd", NOW + timedelta(minutes=50))
    scheduled = assess_repo(row(next_poll_at=NOW + timedelta(minutes=7)), now=NOW, default_every=3600)
    assert scheduled.next_due == NOW + timedelta(minutes=7)
    expired = assess_repo(row(lease_owner="host:12:abcd", lease_until=NOW - timedelta(seconds=1)), now=NOW,
                          default_every=3600)
    assert (expired.health, expired.lease_holder) == ("ok", None)


def test_a_repo_not_polled_for_more_than_n_cycles_is_unhealthy():
    stale = row(last_polled_at=NOW - timedelta(hours=3, minutes=1))
    assert assess_repo(stale, now=NOW, default_every=3600, max_cycles=3).problems == (
        "acme/a: not polled for 3 h 1 min, more than 3 intervals of 1 h (last polled 2026-05-01T08:59:00Z); "
        "is `tracker run` running?",)
    assert assess_repo(stale, now=NOW, default_every=3600, max_cycles=4).problems == ()
    never = row(last_polled_at=None, created_at=NOW - timedelta(minutes=5))
    assert assess_repo(never, now=NOW, default_every=3600).health == "ok"


def test_a_poll_backlog_older_than_n_cycles_and_dead_deliveries_are_unhealthy():
    backlog = row(pending=7, oldest_pending_listed_at=NOW - timedelta(hours=4), newest_status="pending")
    deliveries = DeliveryBacklog(pending=3, retrying=1, dead=2, oldest_pending_at=NOW - timedelta(minutes=5))
    report = assess([backlog, row(repo_id="acme/b")], deliveries, now=NOW, default_every=3600)
    assert report.problems == (
        "acme/a: 7 revision(s) waiting to be read since 2026-05-01T08:00:00Z, more than 3 intervals of 1 h",
        "2 dead deliveries: see `tracker deliveries --failed`, resend with `tracker deliveries retry ID`",
    )
    assert (report.pending_revisions, report.healthy) == (7, False)
    assert render(report).splitlines()[-6:] == [
        "poll backlog: 7 revision(s) waiting to be read (oldest listed 2026-05-01T08:00:00Z)",
        "deliveries: 3 pending (1 being retried), 2 dead",
        "problems:",
        "  acme/a: 7 revision(s) waiting to be read since 2026-05-01T08:00:00Z, more than 3 intervals of 1 h",
        "  2 dead deliveries: see `tracker deliveries --failed`, resend with `tracker deliveries retry ID`",
        "status: unhealthy (2 problems)",
    ]
    old_outbox = DeliveryBacklog(pending=1, retrying=1, dead=0, oldest_pending_at=NOW - timedelta(hours=5))
    assert assess([], old_outbox, now=NOW, default_every=3600).problems == (
        "1 deliveries waiting since 2026-05-01T07:00:00Z, more than 3 intervals of 1 h",)


# -- the Hub unreachable -------------------------------------------------------------------------------------


def test_every_poll_failing_with_the_hub_unreachable_is_said_by_status_and_readyz(hub_standin, settings, make,
                                                                                 db_url, cli):
    """The stand-in read the baseline, then the Hub's address refuses connections for 12 minutes."""
    from fastapi.testclient import TestClient

    from tracker.adapters.hub import HubClient
    from tracker.app import make_tracker
    from tracker.surfaces.api import create_app

    url = migrated(db_url)
    reader = make(settings, database={"url": url})
    hub_standin.create_repo("acme/ok")
    hub_standin.commit("acme/ok", {"config.json": config_json()})
    reader.store.repos.add("acme/ok", now=reader.clock())
    assert [r.status.value for r in reader.poll()] == ["baseline"]
    client = TestClient(create_app(reader))
    assert client.get("/readyz").json()["checks"]["hub"] == "serving"

    clock = ManualClock(datetime.now(UTC) + timedelta(hours=2))
    refused = settings.changed(database={"url": url},
                               hub={"endpoint": "http://127.0.0.1:9", "max_retries": 0})
    away = make_tracker(refused, hub=HubClient(refused.hub.endpoint, timeout=2, max_retries=0,
                                               sleep=lambda _s: None),
                        clock=clock)
    started = clock.now
    for _ in range(3):
        assert away.poll_repo("acme/ok").status.value == "error"
        clock.now += timedelta(minutes=6)
    # 12 minutes after the first failure (the third poll's), seen by a process whose clock says so
    watcher = make_tracker(settings.changed(database={"url": url}),
                           clock=lambda: started + timedelta(minutes=12))
    answer = TestClient(create_app(watcher)).get("/readyz")
    expected = f"Hub unreachable for 12 minutes (every poll since {started.isoformat(timespec='seconds')[:19]}Z failed)"
    assert answer.status_code == 200  # still ready: the API serves from the database
    assert answer.json()["status"] == "ready" and answer.json()["checks"]["hub"] == expected

    report = assess(watcher.store.health.repos(), watcher.store.health.deliveries(),
                    now=started + timedelta(minutes=12), default_every=3600)
    assert report.hub == expected and report.problems[0] == expected and not report.healthy
    assert f"hub: {expected}" in render(report).splitlines()

    # The Hub answers again: one good poll ends the outage.
    assert reader.poll_repo("acme/ok").status.value == "unchanged"
    assert client.get("/readyz").json()["checks"]["hub"] == "serving"
    result = cli("status", "--json", env={"TRACKER_DATABASE_URL": url})
    assert json.loads(result.output)["hub"] == "serving"
