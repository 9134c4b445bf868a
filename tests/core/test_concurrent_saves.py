"""A base and its derivative processed at once, by two trackers on one PostgreSQL, lose no advisory update.

The derivative's report is computed from what it read of its own advisories; the base's report,
saved meanwhile, gives the derivative an inherited advisory. The derivative's save must see that
its read is stale and compute again, not overwrite the base's advisory with its own copy.

The interleaving is forced, not hoped for: the derivative's tracker is held (a SQLAlchemy event on
its engine) at the moment it reads the base's advisories, after it read its own, until the base's
poll has committed.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from sqlalchemy import event

from tests.core.conftest import config_json
from tests.core.test_inherited import BASE, COPY, NEW_EOS, OLD_EOS, card, fix_base, gen
from tracker.adapters.hub import HubClient
from tracker.app import make_tracker
from tracker.core.advisory import advisory_id, inherited_id
from tracker.core.advisory.record import to_osv
from tracker.core.model import AdvisoryKind, PollOutcome

WAIT = 120.0  # seconds any step may take on a loaded machine before the test says it is stuck


@pytest.fixture
def two_trackers(hub_standin, settings, sleeps, postgres_server_url):
    from tests.postgres import fresh_database

    settings = settings.changed(database={"url": fresh_database(postgres_server_url)})
    made = []
    for _ in range(2):
        hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout,
                        max_retries=settings.hub.max_retries,
                        max_wait=settings.hub.max_wait, sleep=sleeps)
        made.append(make_tracker(settings, hub=hub, auto_upgrade=True))
    yield made
    for tracker in made:
        tracker.close()


@pytest.mark.postgres
def test_a_derivative_saved_while_its_base_writes_its_inherited_advisory_keeps_the_bases(hub_standin, two_trackers):
    hub = hub_standin
    base_side, copy_side = two_trackers
    c0 = _base_and_fine_tune(hub, base_side, subscribe=True)
    r1 = fix_base(hub)  # the base fixes eos_token_id: an update advisory, and an inherited one for the copy
    c1 = hub.commit(COPY, {"README.md": card(BASE, "Better words.\n")}, message="docs")  # still the old value

    base_pk = base_side.repo(BASE).pk
    reading_base = threading.Event()  # the copy's tracker has read its own advisories, and reads the base's now
    base_saved = threading.Event()

    def hold_at_base_read(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any,
                          _many: bool) -> None:
        asks_base = isinstance(parameters, dict) and any(
            k.startswith("repo_pk") and v == base_pk for k, v in parameters.items())
        if "FROM advisories JOIN repos" in statement and asks_base and not base_saved.is_set():
            reading_base.set()
            base_saved.wait(WAIT)

    event.listen(copy_side.store.db.engine, "before_cursor_execute", hold_at_base_read)
    # The base's poll commits the base's advisory and the copy's inherited one while the copy is held.
    base_result, copy_result = _poll_base_while_copy_held(
        base_side, copy_side, held=reading_base, released=base_saved,
        stuck="the copy's poll never read the base's advisories")
    assert (base_result.status, base_result.processed, base_result.error) == (PollOutcome.NEW, 1, None)
    assert (copy_result.status, copy_result.processed, copy_result.error) == (PollOutcome.NEW, 1, None)

    base_adv = advisory_id(BASE, r1, "update")
    inherited = inherited_id(COPY, base_adv)
    store = base_side.store
    assert [(a.id, a.kind, a.revision_sha, a.fixed_sha) for a in store.advisories.find(repo_pk=base_pk)] == [
        (base_adv, AdvisoryKind.UPDATE, r1, None)]
    (row,) = store.advisories.find(repo_pk=base_side.repo(COPY).pk)
    # The base's advisory as the base wrote it (found at the copy's c0), not the copy's recomputed one (at c1);
    # the copy's c1 still has the old value, so it is affected too.
    assert (row.id, row.kind, row.revision_sha, row.fixed_sha) == (inherited, AdvisoryKind.INHERITED, c0, None)
    assert to_osv(row.record)["database_specific"]["revision"] == c0
    assert to_osv(row.record)["database_specific"]["items"][0]["value"] == OLD_EOS
    assert to_osv(row.record)["database_specific"]["items"][0]["base_after"] == NEW_EOS
    assert to_osv(row.record)["affected"][0]["versions"] == sorted([c0, c1])
    # Announced once: created by the base's save; the copy's stale copy was never written over it.
    assert [(d.event_type, d.advisory_id) for d in store.outbox.list_deliveries()] == [
        ("advisory.created", inherited)]
    assert [(r.sha, r.status) for r in store.revisions.of_repo(base_side.repo(COPY).pk)] == [
        (c0, "done"), (c1, "done")]


@pytest.mark.postgres
def test_a_derivative_whose_report_read_the_base_before_its_fix_is_recomputed_though_it_writes_no_inherited(
        hub_standin, two_trackers):
    """The copy takes the base's fix in the revision it is processing, but its report was computed before the
    base's save gave it the inherited advisory (at the copy's previous revision): the report writes nothing
    about that advisory. Its save must see the advisories it read have changed, compute again and close it."""
    hub = hub_standin
    base_side, copy_side = two_trackers
    c0 = _base_and_fine_tune(hub, base_side)
    r1 = fix_base(hub)
    c1 = hub.commit(COPY, {"generation_config.json": gen(NEW_EOS, temperature=0.6)}, message="take the eos fix")

    saving = threading.Event()  # the copy's report is computed (the base read before its fix was saved)
    base_saved = threading.Event()

    def hold_at_save(_conn: Any, _cursor: Any, statement: str, _parameters: Any, _context: Any, _many: bool) -> None:
        if statement.startswith("UPDATE revisions SET status") and not base_saved.is_set():
            saving.set()
            base_saved.wait(WAIT)

    event.listen(copy_side.store.db.engine, "before_cursor_execute", hold_at_save)
    # The base's poll writes the base's advisory, and the copy's inherited one at c0, while the copy is held.
    base_result, copy_result = _poll_base_while_copy_held(
        base_side, copy_side, held=saving, released=base_saved, stuck="the copy's poll never saved")
    assert (base_result.status, base_result.processed, base_result.error) == (PollOutcome.NEW, 1, None)
    assert (copy_result.status, copy_result.processed, copy_result.error) == (PollOutcome.NEW, 1, None)

    inherited = inherited_id(COPY, advisory_id(BASE, r1, "update"))
    own_fix = advisory_id(COPY, c1, "update")
    store = base_side.store
    rows = {a.id: a for a in store.advisories.find(repo_pk=base_side.repo(COPY).pk)}
    assert sorted(rows) == sorted([inherited, own_fix])
    row = rows[inherited]
    assert (row.kind, row.revision_sha, row.fixed_sha) == (AdvisoryKind.INHERITED, c0, c1)  # closed by c1
    assert to_osv(row.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": c1}]
    assert to_osv(row.record)["affected"][0]["versions"] == [c0]
    assert base_side.query(COPY, c1).vulns == []
    assert [(r.sha, r.status) for r in store.revisions.of_repo(base_side.repo(COPY).pk)] == [
        (c0, "done"), (c1, "done")]


def _base_and_fine_tune(hub, base_side, *, subscribe: bool = False) -> str:
    """A base and its fine-tune, both at the old eos, watched and polled once; the fine-tune's first commit.
    ``subscribe``: a webhook subscription to the fine-tune's advisories, so its deliveries can be counted."""
    for repo in (BASE, COPY):
        hub.create_repo(repo)
    hub.commit(BASE, {"config.json": config_json(), "generation_config.json": gen(OLD_EOS), "README.md": card()},
               message="initial")
    c0 = hub.commit(COPY, {"config.json": config_json(), "generation_config.json": gen(OLD_EOS, temperature=0.6),
                           "README.md": card(BASE)}, message="fine-tune")
    for repo in (BASE, COPY):
        base_side.store.repos.add(repo, now=base_side.clock())
    if subscribe:
        base_side.store.outbox.add_subscription(target=str(COPY), kind="webhook", url="https://alerts.example.org/hf",
                                                secret="whsec_dGVzdA==", min_severity="info", categories=[],
                                                now=base_side.clock())
    base_side.poll()
    return c0


def _poll_base_while_copy_held(base_side, copy_side, *, held: threading.Event, released: threading.Event,
                               stuck: str) -> tuple[Any, Any]:
    """Poll the copy in a thread until its engine's hook sets ``held``, poll the base meanwhile, then set
    ``released`` to let the copy go on; each side's one poll result."""
    results: dict[str, Any] = {}
    copy_poll = threading.Thread(target=lambda: results.update(copy=copy_side.poll([COPY])))
    copy_poll.start()
    try:
        assert held.wait(WAIT), stuck
        (base_result,) = base_side.poll([BASE])
    finally:
        released.set()
        copy_poll.join(WAIT)
    assert not copy_poll.is_alive()
    (copy_result,) = results["copy"]
    return base_result, copy_result
