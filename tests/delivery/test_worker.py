"""The sender in-process: signatures, retries, Retry-After, order per subscription, dead letters, retry."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner
from standardwebhooks import Webhook

from tests.delivery.conftest import REPO, push_history, start_repo
from tracker.adapters.delivery.worker import LEASE_MARGIN, DeliveryWorker, retry_after_seconds
from tracker.adapters.settings import DeliverySettings
from tracker.surfaces.cli import main


@pytest.fixture
def queued(hub_standin, tracker_settings, make, receiver):
    """A webhook subscription to acme/chat-model with four deliveries queued, and its receiver."""
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()

    def subscribe(script=()):
        from tracker.adapters.delivery import new_secret

        secret = new_secret()
        got = receiver(secret=secret, script=list(script))
        sub = tracker.store.outbox.add_subscription(target=REPO, kind="webhook", url=got.url, secret=secret,
                                             min_severity="info", categories=(), now=tracker.clock())
        return sub, got

    return tracker, subscribe


def drain(worker: DeliveryWorker, seconds: float = 120.0) -> None:
    """Run rounds (on the real clock; retries here are due within milliseconds) until nothing is pending."""
    deadline = time.monotonic() + seconds
    while any(d.state == "pending" for d in worker.store.list_deliveries()):  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "deliveries still pending"
        if not worker.run_once():
            time.sleep(0.02)


def test_signed_bodies_in_order_through_500_429_and_503(queued, hub_standin, tmp_path):
    tracker, subscribe = queued
    sub, got = subscribe(script=[500, (429, {"Retry-After": "30"}), 503])
    push_history(hub_standin)
    tracker.poll()
    rows = tracker.store.outbox.list_deliveries()
    assert sorted(r.event_type for r in rows) == ["advisory.created"] * 3 + ["advisory.updated"]
    clock = [datetime.now(UTC)]
    worker = DeliveryWorker(tracker.store.outbox, DeliverySettings(max_attempts=4, backoff_base=2.0, backoff_max=10.0,
                                                            timeout=2.0, allow_hosts=("127.0.0.1",)),
                            clock=lambda: clock[0], jitter=lambda: 1.0)

    # 1st attempt: 500 -> retried after the backoff (base 2 s, full jitter value 1.0 -> 2 s).
    assert worker.run_once() == 1
    first = tracker.store.outbox.get_delivery(rows[0].id)
    assert (first.state, first.attempts, first.last_status) == ("pending", 1, 500)
    assert first.last_error.startswith("HTTP 500 from http://127.0.0.1:")
    assert first.next_attempt_at == clock[0] + timedelta(seconds=2)
    assert worker.run_once() == 0  # not due yet, and nothing overtakes it
    # 2nd: 429 with Retry-After: 30 -> honoured instead of the backoff.
    clock[0] += timedelta(seconds=2)
    assert worker.run_once() == 1
    first = tracker.store.outbox.get_delivery(rows[0].id)
    assert (first.attempts, first.last_status, first.next_attempt_at) == (2, 429, clock[0] + timedelta(seconds=30))
    clock[0] += timedelta(seconds=29)
    assert worker.run_once() == 0
    # 3rd: 503 without Retry-After -> backoff 2 * 2**2 = 8 s.
    clock[0] += timedelta(seconds=1)
    assert worker.run_once() == 1
    assert tracker.store.outbox.get_delivery(rows[0].id).next_attempt_at == clock[0] + timedelta(seconds=8)
    # 4th: delivered; the rest follow, one per round, in order.
    clock[0] += timedelta(seconds=8)
    for _ in range(4):
        assert worker.run_once() == 1
    assert worker.run_once() == 0
    assert [tracker.store.outbox.get_delivery(r.id).state for r in rows] == ["delivered"] * 4
    assert tracker.store.outbox.get_delivery(rows[0].id).attempts == 4

    # What the receiver saw: every request verified with standardwebhooks, bodies in outbox order.
    assert [r.answered for r in got.got] == [500, 429, 503, 200, 200, 200, 200]
    assert all(r.verified for r in got.got)
    assert len({r.webhook_id for r in got.got[:4]}) == 1  # retries keep the webhook-id
    assert len({r.body for r in got.got[:4]}) == 1  # and the very same body
    unique = got.unique()
    assert list(unique) == [r.webhook_id for r in rows]
    for row, received in zip(rows, unique.values()):
        body = Webhook(got.secret).verify(received.body, received.headers)
        assert body == {"type": row.event_type, "timestamp": row.created_at.isoformat().replace("+00:00", "Z"),
                        "data": row.record}
    worker.stop()


def test_a_row_a_dead_sender_leased_waits_for_its_lease_then_goes_out_with_the_same_webhook_id(queued, hub_standin):
    tracker, subscribe = queued
    _sub, got = subscribe()
    push_history(hub_standin)
    tracker.poll()
    first, second = tracker.store.outbox.list_deliveries()[:2]
    clock = [datetime.now(UTC)]
    worker = DeliveryWorker(tracker.store.outbox, DeliverySettings(timeout=2.0, allow_hosts=("127.0.0.1",)),
                            clock=lambda: clock[0])
    assert worker.lease == timedelta(seconds=2.0 + LEASE_MARGIN)
    # A sender killed mid-attempt: it took the lease and recorded nothing.
    assert tracker.store.outbox.lease_delivery(first.id, now=clock[0], until=clock[0] + worker.lease)
    clock[0] += worker.lease - timedelta(seconds=1)
    assert worker.run_once() == 0  # still held, and the next alert does not overtake it
    assert got.got == []
    clock[0] += timedelta(seconds=2)
    assert worker.run_once() == 1
    assert (tracker.store.outbox.get_delivery(first.id).state, tracker.store.outbox.get_delivery(second.id).state) == (
        "delivered", "pending")
    assert [r.webhook_id for r in got.got] == [first.webhook_id]
    worker.stop()


def test_a_dead_letter_is_listed_and_retried_from_the_cli(queued, hub_standin, tmp_path):
    tracker, subscribe = queued
    sub, got = subscribe(script=[500, 500, 500, 500])
    hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")
    tracker.poll()
    (row,) = tracker.store.outbox.list_deliveries()
    worker = DeliveryWorker(tracker.store.outbox, DeliverySettings(max_attempts=2, backoff_base=0.01, backoff_max=0.01,
                                                            allow_hosts=("127.0.0.1",)))
    drain(worker)
    dead = tracker.store.outbox.get_delivery(row.id)
    assert (dead.state, dead.attempts, dead.last_status) == ("dead", 2, 500)

    config = tmp_path / "cli.toml"
    config.write_text("")
    env = {"TRACKER_DATABASE_URL": tracker.settings.database.url, "TRACKER_CONFIG": str(config),
           "HF_ENDPOINT": hub_standin.url}
    runner = CliRunner()
    listed = json.loads(runner.invoke(main, ["deliveries", "--failed", "--json"], env=env).output)
    assert [(d["id"], d["state"], d["attempts"], d["last_status"], d["type"], d["webhook_id"]) for d in listed] == [
        (row.id, "dead", 2, 500, "advisory.created", row.webhook_id)]
    assert listed[0]["last_error"].startswith("HTTP 500 from http://127.0.0.1:")
    text = runner.invoke(main, ["deliveries"], env=env).output
    assert text.splitlines()[0] == "    ID  STATE      SUB      TYPE                ADVISORY  ATTEMPTS  LAST ERROR"
    assert text.splitlines()[1].startswith(f"{row.id:>6}  dead       sub {sub.id:<4} advisory.created    x_HFUT-")

    result = runner.invoke(main, ["deliveries", "retry", str(row.id)], env=env)
    assert (result.exit_code, result.output) == (0, f"delivery {row.id} queued again; `tracker run` sends it\n")
    again = runner.invoke(main, ["deliveries", "retry", str(row.id)], env=env)
    assert again.exit_code == 1
    assert again.output == f"error: delivery {row.id} is pending, not dead: only a dead delivery is retried\n"
    missing = runner.invoke(main, ["deliveries", "retry", "999"], env=env)
    assert (missing.exit_code, missing.output) == (1, "error: no delivery 999\n")

    assert runner.invoke(main, ["deliveries", "retry", "--all"], env=env).output == "no dead deliveries to retry\n"
    drain(worker)  # dead again: every dead letter is sent again at once
    assert tracker.store.outbox.get_delivery(row.id).state == "dead"
    every = runner.invoke(main, ["deliveries", "retry", "--all"], env=env)
    assert (every.exit_code, every.output) == (0, "1 dead delivery queued again; `tracker run` sends them\n")
    both = runner.invoke(main, ["deliveries", "retry", str(row.id), "--failed"], env=env)
    assert (both.exit_code, both.output.splitlines()[-1]) == (2, "Error: give a delivery ID, or --all")
    drain(worker)
    sent = tracker.store.outbox.get_delivery(row.id)
    assert (sent.state, sent.attempts, sent.last_status) == ("delivered", 1, 200)
    assert [r.answered for r in got.got] == [500, 500, 500, 500, 200]
    assert {r.webhook_id for r in got.got} == {row.webhook_id}  # the resend keeps its idempotency key
    assert json.loads(runner.invoke(main, ["deliveries", "--failed", "--json"], env=env).output) == []
    worker.stop()


def test_a_dead_letter_does_not_block_the_alerts_behind_it(queued, hub_standin):
    tracker, subscribe = queued
    sub, got = subscribe(script=[500])
    push_history(hub_standin)
    tracker.poll()
    rows = tracker.store.outbox.list_deliveries()
    worker = DeliveryWorker(tracker.store.outbox, DeliverySettings(max_attempts=1, allow_hosts=("127.0.0.1",)))
    drain(worker)
    assert [tracker.store.outbox.get_delivery(r.id).state for r in rows] == ["dead", "delivered", "delivered", "delivered"]
    worker.stop()


def test_backoff_is_exponential_capped_and_jittered():
    settings = DeliverySettings(backoff_base=5.0, backoff_max=900.0)
    top = DeliveryWorker(None, settings, jitter=lambda: 1.0)  # type: ignore[arg-type]
    low = DeliveryWorker(None, settings, jitter=lambda: 0.0)  # type: ignore[arg-type]
    assert [top.backoff(n) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 320, 640, 900]
    assert [low.backoff(n) for n in range(1, 4)] == [2.5, 5, 10]
    # The defaults keep trying for over an hour even at the shortest jitter: a receiver down for an hour
    # gets everything when it returns.
    defaults = DeliverySettings()
    shortest = DeliveryWorker(None, defaults, jitter=lambda: 0.0)  # type: ignore[arg-type]
    assert sum(shortest.backoff(n) for n in range(1, defaults.max_attempts)) > 1.5 * 3600


@pytest.mark.parametrize("header, seconds", [
    ("30", 30.0), ("0", 0.0), ("-5", 0.0), ("9999999", 86400.0), ("Mon, 01 Dec 2026 12:01:00 GMT", 60.0),
    ("soon", None), (None, None), ("nan", 86400.0), ("inf", 86400.0),
    ("Mon, 01 Dec 9999999999999999999 12:00:00 GMT", None),
])
def test_retry_after_is_read_as_seconds_or_a_date(header, seconds):
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert retry_after_seconds(header, now) == seconds
