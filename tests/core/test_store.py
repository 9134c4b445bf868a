"""The store on SQLite and PostgreSQL: migrations, exactly-once revision rows, content cache, events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect

from tracker.adapters.store import open_store, schema_status
from tracker.adapters.store.db import make_engine, upgrade_schema
from tracker.core.errors import SchemaBehind
from tracker.core.model import Commit, CommitSha, FileEntry, RepoId, Snapshot

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def sha(n: int) -> CommitSha:
    return CommitSha(f"{n:040x}")


def commit(n: int) -> Commit:
    return Commit(sha=sha(n), date=datetime(2026, 10, n, tzinfo=UTC), title=f"commit {n}")


def test_sqlite_creates_its_schema_on_first_use(tmp_path):
    url = f"sqlite:///{tmp_path}/tracker.sqlite3"
    store = open_store(url)
    current, head = schema_status(store.engine)
    assert current == head
    assert {"repos", "revisions", "blobs", "events", "alembic_version"} <= set(inspect(store.engine).get_table_names())


@pytest.mark.postgres
def test_postgres_refuses_a_schema_that_is_behind_and_init_migrates_it(postgres_server_url):
    from tests.postgres import fresh_database

    url = fresh_database(postgres_server_url)
    with pytest.raises(SchemaBehind, match=r"is at nothing, this tracker needs \w+: run `tracker init`"):
        open_store(url)
    upgrade_schema(make_engine(url))
    store = open_store(url)
    current, head = schema_status(store.engine)
    assert current == head


def test_listing_is_idempotent_and_ordered(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, created = store.add_watch(RepoId("acme/model"), now=NOW)
    assert created
    assert store.record_listing(repo, [commit(1)], parent=None, baseline=True) == 1
    # The same listing again (a crash between listing and processing) inserts nothing.
    assert store.record_listing(repo, [commit(1)], parent=None, baseline=True) == 0
    assert store.record_listing(repo, [commit(2), commit(3)], parent=sha(1), baseline=False) == 2
    assert store.record_listing(repo, [commit(2), commit(3)], parent=sha(1), baseline=False) == 0
    rows = store.revisions(repo.pk)
    assert [(r.sha, r.seq, r.parent_sha, r.baseline, r.status) for r in rows] == [
        (sha(1), 0, None, True, "pending"),
        (sha(2), 1, sha(1), False, "pending"),
        (sha(3), 2, sha(2), False, "pending"),
    ]
    assert store.get_repo("acme/model").last_seen_sha == sha(3)


def test_a_revision_completes_exactly_once(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.add_watch(RepoId("acme/model"), now=NOW)
    store.record_listing(repo, [commit(1)], parent=None, baseline=True)
    (row,) = store.pending_revisions(repo.pk)
    snap = Snapshot((FileEntry("config.json", 10, "b" * 40),))
    kwargs = dict(snapshot=snap, diff=None, findings=[], worst_severity=None, summary="baseline", estimate=None,
                  now=NOW)
    assert store.complete_revision(row.pk, **kwargs) is True
    assert store.complete_revision(row.pk, **kwargs) is False
    done = store.get_revision(repo.pk, sha(1)[:12])
    assert done.status == "done" and done.snapshot == snap and done.analysed_at == NOW
    assert store.pending_revisions(repo.pk) == []


def test_blobs_are_content_addressed_and_events_deduplicated(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.add_watch(RepoId("acme/model"), now=NOW)
    store.put_blob("c" * 40, b"{}", now=NOW)
    store.put_blob("c" * 40, b"{}", now=NOW)
    assert store.get_blob("c" * 40) == b"{}"
    assert store.get_blob("d" * 40) is None
    assert store.add_event(repo.pk, "renamed", dedupe_key="to:x/y", detail={"to": "x/y"}, now=NOW) is True
    assert store.add_event(repo.pk, "renamed", dedupe_key="to:x/y", detail={"to": "x/y"}, now=NOW) is False
    (event,) = store.events()
    assert (event.repo_id, event.kind, event.detail, event.created_at) == ("acme/model", "renamed", {"to": "x/y"}, NOW)


def test_watch_add_updates_and_remove_cascades(db_url):
    store = open_store(db_url, auto_upgrade=True)
    repo, _ = store.add_watch(RepoId("acme/model"), now=NOW)
    store.record_listing(repo, [commit(1)], parent=None, baseline=True)
    again, created = store.add_watch(RepoId("acme/model"), branch="dev", every=900.0, now=NOW)
    assert not created and (again.branch, again.every_seconds) == ("dev", 900.0)
    assert store.remove_watch(RepoId("acme/model")) is True
    assert store.remove_watch(RepoId("acme/model")) is False
    assert store.list_watches() == []


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
    (row,) = store.revisions(store.get_repo("acme/old").pk)
    assert (row.sha, row.status, row.dependencies_pending) == (sha(1), "done", False)
    assert store.advisories_for() == []
