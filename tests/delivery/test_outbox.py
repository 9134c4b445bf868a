"""The outbox: rows written with the advisories, matched to subscriptions, never twice for one announcement."""

from __future__ import annotations

from sqlalchemy import create_engine, text

from tests.core.conftest import config_json
from tests.delivery.conftest import OTHER, REPO, push_history, start_repo
from tracker.adapters.delivery.plan import webhook_id
from tracker.core.advisory import advisory_id
from tracker.core.advisory.record import to_osv
from tracker.core.model import AdvisoryEvent, AdvisoryEventType, RepoId


def subscribe(tracker, target: str, *, min_severity: str = "info", categories=(), kind: str = "webhook"):
    return tracker.store.outbox.add_subscription(target=target, kind=kind, url="http://127.0.0.1:9/hook",
                                          secret="whsec_" + "A" * 43 if kind == "webhook" else None,
                                          min_severity=min_severity, categories=categories, now=tracker.clock())


def queued(tracker) -> list[tuple[int, str, str]]:
    return [(d.subscription_id, d.event_type, d.advisory_id) for d in tracker.store.outbox.list_deliveries()]


def test_each_advisory_is_queued_for_exactly_the_matching_subscriptions(hub_standin, tracker_settings, make):
    start_repo(hub_standin)
    start_repo(hub_standin, OTHER)
    tracker = make(tracker_settings)
    for repo in (REPO, OTHER):
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    everything = subscribe(tracker, "*")
    by_repo = subscribe(tracker, REPO)
    by_owner = subscribe(tracker, "ACME", kind="slack")  # owners match case-insensitively, as on the Hub
    weights_only = subscribe(tracker, "*", categories=("weights",))
    high_only = subscribe(tracker, "*", min_severity="high")
    other_only = subscribe(tracker, OTHER)

    r1, _r2, r3, _r4, r5 = push_history(hub_standin)
    tracker.poll()
    fix, risk, removal = (advisory_id(REPO, r1, "update"), advisory_id(REPO, r3, "risk"),
                          advisory_id(REPO, r5, "update"))
    stored = {a.id: a for a in tracker.store.advisories.find()}
    assert set(stored) == {fix, risk, removal}
    assert {i: a.severity for i, a in stored.items()} == {fix: "high", risk: "moderate", removal: "moderate"}
    assert {i: a.record.specific.categories for i, a in stored.items()} == {
        fix: ("generation",), risk: ("weights",), removal: ("files", "weights")}
    # The risk was introduced (r3) and undone (r5) in the same poll: created, then updated with its fix.
    announced = [("advisory.created", fix), ("advisory.created", risk), ("advisory.updated", risk),
                 ("advisory.created", removal)]
    wanted = {everything.id: announced, by_repo.id: announced, by_owner.id: announced,
              weights_only.id: [a for a in announced if a[1] in (risk, removal)],
              high_only.id: [a for a in announced if a[1] == fix], other_only.id: []}
    got = queued(tracker)
    for sub_id, expected in wanted.items():
        mine = [(t, a) for s, t, a in got if s == sub_id]
        assert sorted(mine) == sorted(expected), sub_id
        # Within one subscription the risk's creation is queued before its update.
        if ("advisory.updated", risk) in mine:
            assert mine.index(("advisory.created", risk)) < mine.index(("advisory.updated", risk))
    expected = sorted(got)
    rows = tracker.store.outbox.list_deliveries()
    assert all(d.state == "pending" and d.attempts == 0 for d in rows)
    assert len({d.webhook_id for d in rows}) == len(rows)
    # Each row carries the record as it was announced.
    for d in rows:
        if (d.event_type, d.advisory_id) == ("advisory.created", risk):
            assert d.record["affected"][0]["ranges"][0]["events"] == [{"introduced": r3}]
        else:
            assert d.record == stored[d.advisory_id].osv
    assert to_osv(stored[risk].record)["affected"][0]["ranges"][0]["events"] == [{"introduced": r3}, {"fixed": r5}]

    # Polling again and re-analysing with the same rules announce nothing new.
    tracker.poll()
    assert tracker.reanalyse(REPO) == 0
    assert sorted(queued(tracker)) == expected


def test_a_withdrawal_is_announced_once(hub_standin, tracker_settings, make):
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    sub = subscribe(tracker, REPO)
    r1 = hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")
    tracker.poll()
    fix = advisory_id(REPO, r1, "update")
    assert queued(tracker) == [(sub.id, "advisory.created", fix)]

    newer = make(tracker_settings, severity={"generation.eos_token_id_changed": "info"})
    assert newer.reanalyse(REPO) == 1
    assert newer.reanalyse(REPO) == 0
    assert queued(newer) == [(sub.id, "advisory.created", fix), (sub.id, "advisory.withdrawn", fix)]
    withdrawn = newer.store.outbox.list_deliveries()[1]
    assert withdrawn.record["withdrawn"] == newer.store.advisories.get(fix).record.withdrawn


def test_the_idempotency_key_is_stable_and_replaying_the_same_event_adds_no_row(hub_standin, tracker_settings,
                                                                                   make):
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    sub = subscribe(tracker, "*")
    hub_standin.commit(REPO, {"config.json": config_json(vocab_size=1000)}, message="vocab")
    tracker.poll()
    (row,) = tracker.store.outbox.list_deliveries()
    advisory = tracker.store.advisories.get(row.advisory_id)
    event = AdvisoryEvent(type=AdvisoryEventType.CREATED, advisory_id=row.advisory_id, repo_id=RepoId(REPO),
                          severity=row.severity, categories=advisory.record.specific.categories,
                          record=advisory.osv)
    assert row.webhook_id == webhook_id(sub.id, event)
    # A transaction replayed after a crash announces the same event again: the key makes it a no-op.
    with tracker.store.db.transaction() as conn:
        tracker.store.outbox.enqueue(conn, [event], now=tracker.clock())
    assert len(tracker.store.outbox.list_deliveries()) == 1
    # The rows live in the same database as the advisories (one transaction wrote both).
    engine = create_engine(tracker.settings.database.url)
    with engine.connect() as conn:
        assert conn.execute(text("select count(*) from deliveries")).scalar() == 1
    engine.dispose()


def test_unsubscribing_drops_what_was_not_sent(hub_standin, tracker_settings, make):
    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    keep, drop = subscribe(tracker, "*"), subscribe(tracker, REPO)
    push_history(hub_standin)
    tracker.poll()
    assert tracker.store.outbox.remove_subscription(drop.id) == 4  # three created, one updated
    assert tracker.store.outbox.remove_subscription(drop.id) is None
    assert {d.subscription_id for d in tracker.store.outbox.list_deliveries()} == {keep.id}


def test_reanalyse_counts_what_it_changed(hub_standin, tracker_settings, make):
    from tracker.services import Revisions

    start_repo(hub_standin)
    tracker = make(tracker_settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    subscribe(tracker, REPO)
    hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": [1, 2]}'}, message="fix eos")
    tracker.poll()
    (same,) = Revisions(tracker).reanalyse([REPO])
    assert same.line() == (f"{REPO}: 2 revision(s) re-analysed, 0 changed; advisories: 0 new, 0 updated, "
                           "0 withdrawn; 0 alert(s) queued")
    newer = make(tracker_settings, severity={"generation.eos_token_id_changed": "info"})
    (done,) = Revisions(newer).reanalyse([REPO])
    assert done.line() == (f"{REPO}: 2 revision(s) re-analysed, 1 changed; advisories: 0 new, 0 updated, "
                           "1 withdrawn; 1 alert(s) queued")
