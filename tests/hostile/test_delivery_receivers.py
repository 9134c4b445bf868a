"""Slow and bloated receivers beside an honest one: the honest alerts arrive while the slow attempts are
still held, every attempt ends by its deadline, and no answer costs more than the byte cap.

One run of the real sender, in a child process under an address-space limit (``RLIMIT_AS``), on
a real SQLite outbox: four alerts each for an honest receiver and for receivers that drip their
headers, drip their body, send a 1 GiB body, and send a gzip bomb (1 MiB that inflates to 1
GiB). The drips last ten minutes; the attempt deadline is ``DEADLINE``. So "the honest alerts
arrived before the slow attempts' deadline" is read from the receivers themselves: at the honest
receiver's fourth alert, both drips were still being held open. No wall-clock time is asserted.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert

from tests.hostile.content_support import MiB, run_python
from tests.hostile.delivery_support import GiB, Honest, gzip_bomb, snapshot, started
from tracker.adapters.delivery.webhook import new_secret
from tracker.adapters.store import open_store
from tracker.adapters.store.tables import deliveries

DEADLINE = 30  # seconds: the attempt deadline the test sets ([delivery] timeout)
ALERTS = 4  # per subscription
# The sender's RLIMIT_AS: what it has mapped once its imports are done (libraries reserve address space
# by the gigabyte, differently from machine to machine) plus HEADROOM, where a body read whole (1 GiB)
# cannot fit. MEMORY bounds the child before it sets that.
HEADROOM = 512 * MiB
MEMORY = 8192 * MiB
PEAK_MB = 400  # the sender's resident peak stays far below one inflated answer

CHILD = """
import json, resource, time
from tests.hostile.content_support import peak_mb
from tracker.adapters.delivery.worker import DeliveryWorker
from tracker.adapters.settings import DeliverySettings
from tracker.adapters.store import open_store

store = open_store({url!r}, auto_upgrade=False)
store.outbox.list_deliveries()
mapped = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (mapped + {headroom}, resource.getrlimit(resource.RLIMIT_AS)[1]))
worker = DeliveryWorker(store.outbox, DeliverySettings(max_attempts=1, timeout={deadline}, allow_hosts=("127.0.0.1",)))
worker.start()
end = time.monotonic() + 240
while any(d.state == "pending" for d in store.outbox.list_deliveries()) and time.monotonic() < end:
    time.sleep(0.2)
worker.stop()
rows = [[d.subscription_id, d.webhook_id, d.state, d.attempts, d.last_status, d.last_error]
        for d in store.outbox.list_deliveries()]
print(json.dumps({{"rows": rows, "peak_mb": peak_mb(), "limit": resource.getrlimit(resource.RLIMIT_AS)[0],
                  "mapped": mapped}}))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Any]:
    """The scenario, once: the receivers, the outbox, the sender's child run and what each receiver saw."""
    gzip_bomb()  # compressed before the clock of any attempt starts
    url = f"sqlite:///{tmp_path_factory.mktemp('outbox')}/tracker.sqlite3"
    hostile = {name: started(name) for name in ("drip-headers", "drip-body", "big-body", "gzip-bomb")}
    honest = Honest(new_secret(), snapshot({k: v for k, v in hostile.items() if k.startswith("drip")})).start()
    store = open_store(url, auto_upgrade=True)
    try:
        now = datetime.now(UTC)
        urls = {"honest": honest.url, **{name: r.url for name, r in hostile.items()}}
        subs = {name: store.outbox.add_subscription(target="*", kind="webhook", url=target, min_severity="info",
                                             secret=honest.secret if name == "honest" else new_secret(),
                                             categories=(), now=now)
                for name, target in urls.items()}
        rows = [{"subscription_id": sub.id, "webhook_id": f"msg_{name}_{n}", "event_type": "advisory.created",
                 "advisory_id": f"HF-{n}", "repo_id": "acme/m", "severity": "low", "record": {"n": n},
                 "state": "pending", "attempts": 0, "next_attempt_at": now - timedelta(seconds=1),
                 "created_at": now}
                for n in range(ALERTS) for name, sub in subs.items()]
        with store.db.engine.begin() as conn:
            conn.execute(insert(deliveries), rows)
        result = run_python(CHILD.format(url=url, deadline=DEADLINE, headroom=HEADROOM), memory=MEMORY, timeout=400,
                            env={"MALLOC_ARENA_MAX": "2"}).result()
        by_name = {sub.id: name for name, sub in subs.items()}
        outcome: dict[str, Any] = {name: [] for name in subs}
        for sub_id, webhook_id, state, attempts, status, error in result["rows"]:
            outcome[by_name[sub_id]].append((webhook_id, state, attempts, status, error))
        return {"rows": outcome, "peak_mb": result["peak_mb"], "honest": list(honest.arrivals),
                "limit": result["limit"] - result["mapped"],
                "hostile": hostile}
    finally:
        store.close()
        honest.stop()
        for receiver in hostile.values():
            receiver.stop()


def test_the_honest_alerts_arrive_in_order_while_the_drips_are_still_held(run):
    arrivals = run["honest"]
    assert [(webhook_id, verified) for webhook_id, verified, _ in arrivals] == [
        (f"msg_honest_{n}", True) for n in range(ALERTS)]
    # At the last honest alert, neither dripping attempt had reached its deadline: both still held open.
    assert arrivals[-1][2] == {"drip-headers": 1, "drip-body": 1}
    assert [r[1:4] for r in run["rows"]["honest"]] == [("delivered", 1, 200)] * ALERTS


def test_a_receiver_dripping_its_headers_is_cut_off_at_the_deadline(run):
    first, *rest = run["rows"]["drip-headers"]
    origin = run["hostile"]["drip-headers"].origin
    assert first[1:] == ("dead", 1, None, f"timed out after {DEADLINE}s ({origin})")
    assert [r[1:4] for r in rest] == [("delivered", 1, 200)] * (ALERTS - 1)  # the alerts behind it go on
    (sent,) = run["hostile"]["drip-headers"].written
    assert 0 < sent <= DEADLINE + 5  # a byte a second: the sender hung up at its deadline, not after 600 s


def test_a_receiver_dripping_its_body_is_cut_off_at_the_deadline(run):
    first, *rest = run["rows"]["drip-body"]
    origin = run["hostile"]["drip-body"].origin
    assert first[1:4] == ("dead", 1, 500)
    assert re.fullmatch(rf"HTTP 500 from {re.escape(origin)}: x+", first[4]), first[4]
    assert [r[1:4] for r in rest] == [("delivered", 1, 200)] * (ALERTS - 1)
    (sent,) = run["hostile"]["drip-body"].written
    assert 0 < sent <= DEADLINE + 5


@pytest.mark.parametrize("name", ["big-body", "gzip-bomb"])
def test_a_bloated_answer_is_read_up_to_the_cap_and_no_further(run, name):
    origin = run["hostile"][name].origin
    assert [r[1:] for r in run["rows"][name]] == [("dead", 1, 500, f"HTTP 500 from {origin}: " + "A" * 200)] + [
        ("delivered", 1, 200, None)] * (ALERTS - 1)


def test_a_gigabyte_body_is_not_read(run):
    (written,) = run["hostile"]["big-body"].written
    # What the receiver got into the socket before the sender hung up: kernel buffers, never the gigabyte.
    assert written < 64 * MiB < GiB


def test_the_sender_stays_small_under_its_address_space_limit(run):
    assert run["limit"] == HEADROOM  # every attempt above ran under it
    assert run["peak_mb"] < PEAK_MB, run["peak_mb"]
