"""The store on SQLite and PostgreSQL: migrations, exactly-once revision reports, checked advisory writes,
content cache, events, UTC timestamps."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import inspect

from tracker.adapters.store import open_store, schema_status
from tracker.adapters.store.db import make_engine, upgrade_schema
from tracker.core.advisory.record import to_osv
from tracker.core.errors import AdvisoryConflict, SchemaBehind
from tracker.core.model import (
    Commit,
    CommitSha,
    FileEntry,
    Finding,
    RepoId,
    RepoState,
    Severity,
    Snapshot,
    StoredEstimate,
)
from tracker.core.report import AdvisoryWrite, EventReport, RevisionReport

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
FINDING = Finding(code="config.changed", category="config", severity=Severity.HIGH, summary="config changed",
                  path="config.json")


def sha(n: int) -> CommitSha:
    return CommitSha(f"{n:040x}")


def commit(n: int) -> Commit:
    return Commit(sha=sha(n), date=datetime(2026, 10, n, tzinfo=UTC), title=f"commit {n}")


def test_sqlite_creates_its_schema_on_first_use(tmp_path):
    url = f"sqlite:///{tmp_path}/tracker.sqlite3"
    store = open_store(url)
    current, head = schema_status(store.db.engine)
    assert current == head
    assert {"repos", "revisions", "blobs", "events", "alembic_version"} <= set(inspect(store.db.engine).get_table_names())


@pytest.mark.postgres
def test_postgres_refuses_a_schema_that_is_behind_and_init_migrates_it(postgres_server_url):
    from tests.postgres import fresh_database

    url = fresh_database(postgres_server_url)
    with pytest.raises(SchemaBehind, match=r"is at nothing, this tracker needs \w+: run `tracker init`"):
        open_store(url)
    upgrade_schema(make_engine(url))
    store = open_store(url)
    current, head = schema_status(store.db.engine)
    assert current == head


def test_listing_is_idempotent_and_ordered(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, created = store.repos.add(RepoId("acme/model"), now=NOW)
    assert created
    assert store.revisions.record_listing(repo, [commit(1)], parent=None, baseline=True, now=NOW) == 1
    # The same listing again (a crash between listing and processing) inserts nothing.
    assert store.revisions.record_listing(repo, [commit(1)], parent=None, baseline=True, now=NOW) == 0
    assert store.revisions.record_listing(repo, [commit(2), commit(3)], parent=sha(1), baseline=False, now=NOW) == 2
    assert store.revisions.record_listing(repo, [commit(2), commit(3)], parent=sha(1), baseline=False, now=NOW) == 0
    rows = store.revisions.of_repo(repo.pk)
    assert [(r.sha, r.seq, r.parent_sha, r.baseline, r.status) for r in rows] == [
        (sha(1), 0, None, True, "pending"),
        (sha(2), 1, sha(1), False, "pending"),
        (sha(3), 2, sha(2), False, "pending"),
    ]
    assert store.repos.get("acme/model").last_seen_sha == sha(3)


def test_older_commits_are_put_ahead_of_the_baseline(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.repos.add(RepoId("acme/model"), now=NOW)
    store.revisions.record_listing(repo, [commit(3)], parent=None, baseline=True, now=NOW)
    store.revisions.record_listing(repo, [commit(4)], parent=sha(3), baseline=False, now=NOW)
    assert store.revisions.prepend_listing(repo, [commit(1), commit(2)], before=sha(3), now=NOW) == 2
    assert store.revisions.prepend_listing(repo, [commit(1), commit(2)], before=sha(3), now=NOW) == 0  # not the baseline
    rows = store.revisions.of_repo(repo.pk)
    assert [(r.sha, r.seq, r.parent_sha, r.baseline, r.status) for r in rows] == [
        (sha(1), 0, None, True, "pending"),
        (sha(2), 1, sha(1), False, "pending"),
        (sha(3), 2, sha(2), False, "pending"),
        (sha(4), 3, sha(3), False, "pending"),
    ]
    assert store.repos.get("acme/model").last_seen_sha == sha(4)


def _report(row, *, advisories=(), analysed_at=NOW) -> RevisionReport:
    return RevisionReport(repo_pk=row.repo_pk, revision_pk=row.pk, sha=row.sha,
                          snapshot=Snapshot((FileEntry("config.json", 10, "b" * 40),)), diff=None,
                          findings=(FINDING,), summary="baseline", estimate=StoredEstimate.from_json({"params": 7}),
                          dependencies_pending=True,
                          analysed_at=analysed_at, advisories=tuple(advisories), repo_updates={"base_repo_id": "acme/base"},
                          libraries=("transformers",))


def _record(repo_id: str, sha_: str, *, modified: datetime = NOW, summary: str = "chat template changed") -> dict:
    stamp = modified.isoformat().replace("+00:00", "Z")
    return {"id": "x_HFUT-aaaa-bbbb-cccc", "modified": stamp, "published": NOW.isoformat().replace("+00:00", "Z"),
            "summary": summary,
            "affected": [{"package": {"ecosystem": "Hugging Face", "name": repo_id},
                          "ranges": [{"type": "GIT", "events": [{"introduced": sha_}]}], "versions": []}],
            "database_specific": {"repo_id": repo_id, "severity": "HIGH", "categories": ["template"]}}


def test_a_revision_report_completes_the_revision_exactly_once_with_its_advisories(db_url):
    """``save_report``, the path processing takes: the revision, the repo's update and the advisory, together."""
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.repos.add(RepoId("acme/model"), now=NOW)
    store.revisions.record_listing(repo, [commit(1)], parent=None, baseline=True, now=NOW)
    (row,) = store.revisions.pending(repo.pk)
    write = AdvisoryWrite(record=_record("acme/model", sha(1)), revision_sha=sha(1), kind="risk", severity="high",
                          fixed_sha=None)
    assert store.revisions.save_report(_report(row, advisories=[write])) is True
    # Saved again (a second process finished it first): nothing is written, not even the advisory.
    later = replace(write, record=_record("acme/model", sha(1), summary="changed again"))
    assert store.revisions.save_report(_report(row, advisories=[later], analysed_at=LATER)) is False
    done = store.revisions.get(repo.pk, sha(1)[:12])
    assert (done.status, done.snapshot, done.analysed_at, done.findings, done.worst_severity, done.estimate,
            done.dependencies_pending, done.libraries) == (
        "done", Snapshot((FileEntry("config.json", 10, "b" * 40),)), NOW, (FINDING,), "high",
        StoredEstimate(keys=("params",), params=7),
        True, ("transformers",))
    assert store.revisions.pending(repo.pk) == []
    assert store.repos.get("acme/model").base_repo_id == "acme/base"
    (advisory,) = store.advisories.find(repo_pk=repo.pk)
    assert (advisory.id, advisory.kind, advisory.revision_sha, to_osv(advisory.record)["summary"], advisory.modified,
            to_osv(advisory.record)["affected"][0]["versions"]) == (
        "x_HFUT-aaaa-bbbb-cccc", "risk", sha(1), "chat template changed", NOW, [sha(1)])
    assert store.advisories.ids_for_commit(sha(1)) == ["x_HFUT-aaaa-bbbb-cccc"]


def test_an_advisory_changed_since_it_was_read_is_not_overwritten(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.repos.add(RepoId("acme/model"), now=NOW)
    store.revisions.record_listing(repo, [commit(1), commit(2)], parent=None, baseline=True, now=NOW)
    first, second = store.revisions.pending(repo.pk)
    write = AdvisoryWrite(record=_record("acme/model", sha(1)), revision_sha=sha(1), kind="risk", severity="high",
                          fixed_sha=None)
    assert store.revisions.save_report(_report(first, advisories=[write]), seen={}) is True
    # Computed from a read that did not see it (absent): refused, and nothing of the report is written.
    stale = replace(write, record=_record("acme/model", sha(1), modified=LATER, summary="stale"))
    with pytest.raises(AdvisoryConflict, match=r"advisory x_HFUT-aaaa-bbbb-cccc was created by another writer "
                                               r"after it was read \(read: absent, now: 2026-11-01T12:00:00\+00:00\)"):
        store.revisions.save_report(_report(second, advisories=[stale]), seen={})
    assert [r.sha for r in store.revisions.pending(repo.pk)] == [sha(2)]
    # Computed from what is stored: written.
    assert store.revisions.save_report(_report(second, advisories=[stale]), seen={write.id: NOW}) is True
    (advisory,) = store.advisories.find(repo_pk=repo.pk)
    assert (to_osv(advisory.record)["summary"], advisory.modified) == ("stale", LATER)


def test_blobs_are_content_addressed_and_events_deduplicated(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.repos.add(RepoId("acme/model"), now=NOW)
    store.blobs.put_blob("c" * 40, b"{}", now=NOW)
    store.blobs.put_blob("c" * 40, b"{}", now=NOW)
    assert store.blobs.get_blob("c" * 40) == b"{}"
    assert store.blobs.get_blob("d" * 40) is None
    report = EventReport(repo_pk=repo.pk, kind="renamed", dedupe_key="to:x/y", detail={"to": "x/y"},
                         revision_sha=None, created_at=NOW, repo_updates={"renamed_to": "x/y"})
    assert store.events.save_report(report) is True
    assert store.events.save_report(replace(report, repo_updates={"renamed_to": "x/z"})) is False
    (event,) = store.events.all()
    assert (event.repo_id, event.kind, event.detail, event.created_at) == ("acme/model", "renamed", {"to": "x/y"}, NOW)
    assert store.repos.get("acme/model").renamed_to == "x/z"  # the repo's state follows even when the event is old


def test_timestamps_come_back_in_utc_whatever_zone_they_were_written_in(db_url):
    store = open_store(db_url, auto_upgrade=True)
    paris = timezone(timedelta(hours=1))
    repo, _ = store.repos.add(RepoId("acme/model"), now=datetime(2026, 11, 1, 13, 0, tzinfo=paris))
    store.repos.update(repo.pk, last_polled_at=datetime(2026, 11, 1, 12, 30))  # naive: taken as UTC
    row = store.repos.get("acme/model")
    assert (row.created_at, row.created_at.tzinfo, row.last_polled_at) == (
        NOW, UTC, datetime(2026, 11, 1, 12, 30, tzinfo=UTC))


def test_watch_add_updates_and_remove_cascades(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.repos.add(RepoId("acme/model"), now=NOW)
    store.revisions.record_listing(repo, [commit(1)], parent=None, baseline=True, now=NOW)
    again, created = store.repos.add(RepoId("acme/model"), branch="dev", every=900.0, now=NOW)
    assert not created and (again.branch, again.every_seconds) == ("dev", 900.0)
    assert store.repos.remove(RepoId("acme/model")) is True
    assert store.repos.remove(RepoId("acme/model")) is False
    assert store.repos.all() == []


def _in_transaction(dbapi_connection) -> bool:
    info = getattr(dbapi_connection, "info", None)  # psycopg: the server's transaction status
    if info is not None and hasattr(info, "transaction_status"):
        return info.transaction_status.name != "IDLE"
    return bool(dbapi_connection.in_transaction)  # sqlite3


def test_a_read_begins_no_transaction_and_the_writes_after_it_still_roll_back(db_url):
    """The API's reads run in autocommit (no BEGIN, no COMMIT); the pooled connection they used comes
    back to the writers in a transaction again."""
    from sqlalchemy import func, select

    from tracker.adapters.store.tables import repos

    store = open_store(db_url, auto_upgrade=True)
    store.repos.add(RepoId("acme/model"), now=NOW)
    with store.db.read() as conn:
        assert conn.execute(select(func.count()).select_from(repos)).scalar() == 1
        assert not _in_transaction(conn.connection.dbapi_connection)
    with pytest.raises(RuntimeError, match="undo"), store.db.transaction() as conn:
        conn.execute(repos.delete())
        assert _in_transaction(conn.connection.dbapi_connection)
        raise RuntimeError("undo")
    assert [r.repo_id for r in store.repos.all()] == ["acme/model"]
    assert store.repos.get("acme/model") is not None and store.repos.get("acme/other") is None
    store.close()


def test_upgrading_a_populated_database_keeps_its_rows(db_url):
    """A database made by an older tracker (schema 0001, with data) upgrades in place."""
    from alembic import command
    from sqlalchemy import text

    from tracker.adapters.store.db import _alembic_config

    engine = make_engine(db_url)
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0001")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO repos (repo_id, branch, state, created_at) "
                          "VALUES ('acme/old', 'main', 'active', '2026-01-01 00:00:00')"))
        conn.execute(text("INSERT INTO revisions (repo_pk, sha, seq, title, message, authors, status, baseline) "
                          f"VALUES (1, '{sha(1)}', 0, 't', '', '[]', 'done', true)"))
    if not db_url.startswith("sqlite"):
        upgrade_schema(engine)  # `tracker init`; SQLite upgrades itself on open
    store = open_store(db_url)
    (row,) = store.revisions.of_repo(store.repos.get("acme/old").pk)
    assert (row.sha, row.status, row.dependencies_pending) == (sha(1), "done", False)
    assert store.advisories.find() == []


def test_the_checkable_rule_is_the_same_in_python_and_in_sql(db_url):
    """A claim asks the database for the repos an owner listing may check; the cycle asks each claimed
    repo. Every combination of what the rule looks at lands on the same side both ways."""
    store = open_store(db_url, auto_upgrade=True)
    combos = list(itertools.product((RepoState.ACTIVE, RepoState.GONE), (None, "uid"), (None, sha(1)),
                                    ("main", "dev"), (None, "acme/elsewhere"), (0, 1), ("acme/", "")))
    for i, (state, uid, seen, branch, renamed, requests, owner) in enumerate(combos):
        repo, _ = store.repos.add(RepoId(f"{owner}m{i}"), branch=branch, now=NOW)
        store.repos.update(repo.pk, state=state.value, hub_uid=uid, last_seen_sha=seen, renamed_to=renamed,
                           poll_requests=requests)
    listable = store.schedule.claim_due("a", now=NOW, until=LATER, limit=len(combos), checkable=True)
    others = store.schedule.claim_due("b", now=NOW, until=LATER, limit=len(combos), checkable=False)
    assert len(listable) + len(others) == len(combos)
    assert [d.checkable for d in listable] == [True]  # active, known, on main, not renamed, not asked for
    assert not any(d.checkable for d in others)
