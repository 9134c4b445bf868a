"""Migration 0011 converts a database written at schema 0007 (commit lists) to ranges and spans.

``tests/fixtures/stores/store-0007.json`` holds the rows the release at schema 0007 wrote for a
history with every kind of advisory (update, risk undone, inherited and taken, history rewritten,
gated, deleted, re-created); ``make_store_0007.py`` beside it regenerates it with that release.
The rows are loaded into a database migrated to 0007 (SQLite and PostgreSQL), the upgrade is
interrupted after one repo, as a crash would, then run again: it resumes, and afterwards every
commit is affected by exactly the advisories the old index said, and every record reads exactly as
before, its ``versions`` (all shorter than ``max_versions``) included.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import MetaData, Table, create_engine, select, text

from tracker.adapters.store import open_store
from tracker.adapters.store.db import _alembic_config, schema_status, upgrade_schema
from tracker.core.advisory.record import to_osv

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "stores" / "store-0007.json"


def _value(value, column):
    """A value of the dump (SQLite's raw text for dates and JSON, 0/1 for booleans) as the column takes it."""
    if isinstance(value, dict) and "$bytes" in value:
        return base64.b64decode(value["$bytes"])
    if value is None:
        return None
    kind = type(column.type).__name__.upper()
    if "DATETIME" in kind or "TIMESTAMP" in kind:
        return datetime.fromisoformat(value) if isinstance(value, str) else value
    if "JSON" in kind:
        return json.loads(value) if isinstance(value, str) else value
    if "BOOL" in kind:
        return bool(value)
    return value


@pytest.fixture(scope="module")
def dump() -> dict:
    data = json.loads(FIXTURE.read_text())
    assert data["schema"] == "0007"
    return data


def _load_at_0007(url: str, dump: dict) -> None:
    engine = create_engine(url)
    try:
        cfg = _alembic_config()
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0007")
        meta = MetaData()
        with engine.begin() as conn:
            for name in ("repos", "commits", "revisions", "events", "advisories", "advisory_commits"):
                table = Table(name, meta, autoload_with=conn)
                rows = [{k: _value(v, table.c[k]) for k, v in row.items()} for row in dump["tables"][name]]
                if rows:
                    conn.execute(table.insert(), rows)
            if conn.dialect.name == "postgresql":  # the ids were given: move the sequences past them
                for name in ("repos", "commits", "revisions", "events"):
                    conn.execute(text(f"select setval('{name}_id_seq', (select max(id) from {name}))"))
    finally:
        engine.dispose()


def _old_answers(dump: dict) -> dict[tuple[int, str], list[str]]:
    live = {a["id"] for a in dump["tables"]["advisories"] if not a["withdrawn"]}
    out: dict[tuple[int, str], list[str]] = {}
    for row in dump["tables"]["advisory_commits"]:
        if row["advisory_id"] in live:
            out.setdefault((row["repo_pk"], row["sha"]), []).append(row["advisory_id"])
    for c in dump["tables"]["commits"]:
        out.setdefault((c["repo_pk"], c["sha"]), [])
    return {k: sorted(v) for k, v in out.items()}


def test_the_upgrade_resumes_after_a_crash_and_keeps_every_answer(db_url, dump, monkeypatch):
    _load_at_0007(db_url, dump)
    engine = create_engine(db_url)
    monkeypatch.setenv("TRACKER_TEST_MIGRATION_FAIL_AFTER", "1")
    with pytest.raises(RuntimeError, match="conversion stopped after 1 repos"):
        upgrade_schema(engine)
    with engine.connect() as conn:
        # The migrations before it are done, each in its own transaction; this one stopped midway.
        assert conn.execute(text("select version_num from alembic_version")).scalar() == "0010"
        assert conn.execute(text("select count(*) from reach_backfill")).scalar() == 1  # one repo converted
        assert conn.execute(text("select count(distinct repo_pk) from commit_labels")).scalar() == 1
    monkeypatch.delenv("TRACKER_TEST_MIGRATION_FAIL_AFTER")
    upgrade_schema(engine)  # resumes: the converted repo is skipped, the rest converted
    _, head = schema_status(engine)
    with engine.connect() as conn:
        assert conn.execute(text("select version_num from alembic_version")).scalar() == head
        labels = conn.execute(text("select count(*) from commit_labels")).scalar()
        listed_kinds = sorted(set(conn.execute(text(
            "select distinct a.kind from advisory_commits c join advisories a on a.id = c.advisory_id")).scalars()))
    engine.dispose()
    assert labels == len(dump["tables"]["commits"])  # every commit once (this history has no unknown parents)
    assert listed_kinds == ["deleted", "gated", "history_rewritten"]  # only repo events list commits now

    store = open_store(db_url, auto_upgrade=False)
    try:
        for (repo_pk, sha), want in _old_answers(dump).items():
            assert store.advisories.ids_for_commit(sha, repo_pk) == want, sha
            assert store.advisories.ids_for_commit(sha) == want, sha
        old = {a["id"]: a for a in dump["tables"]["advisories"]}
        served = {a.id: a for a in store.advisories.find()}
        assert served.keys() == old.keys()
        kinds = set()
        for advisory_id, row in served.items():
            before = old[advisory_id]["record"]
            before = json.loads(before) if isinstance(before, str) else before
            assert to_osv(row.record) == before, advisory_id  # versions computed on read: the same lists
            kinds.add(row.kind)
        assert kinds == {"update", "risk", "inherited", "history_rewritten", "gated", "deleted", "recreated"}
        # Stored without their versions now.
        meta = MetaData()
        advisories = Table("advisories", meta, autoload_with=store.db.engine)
        with store.db.engine.connect() as conn:
            stored = [r for r in conn.execute(select(advisories.c.record)).scalars()]
        assert all(r["affected"][0]["versions"] == [] for r in stored)
    finally:
        store.close()
