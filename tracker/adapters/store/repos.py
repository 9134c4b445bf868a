"""The watch list (``repos``) and what happened to each repo (``events``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from tracker.adapters.store.advisories import AdvisoryStore
from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import events, repos
from tracker.core.errors import StoreConflict
from tracker.core.model import EventRow, RepoId, RepoRow, RepoState
from tracker.core.report import EventReport
from tracker.core.store_types import SeenAdvisories


def repo_row(row: Any) -> RepoRow:
    """A ``repos`` row as the rest of the tracker sees it."""
    return RepoRow(
        pk=row.id,
        repo_id=RepoId(row.repo_id),
        branch=row.branch,
        every_seconds=row.every_seconds,
        state=RepoState(row.state),
        hub_uid=row.hub_uid,
        renamed_to=row.renamed_to,
        last_seen_sha=row.last_seen_sha,
        defer_until=row.defer_until,
        last_polled_at=row.last_polled_at,
        last_error=row.last_error,
        created_at=row.created_at,
        base_repo_id=RepoId(row.base_repo_id) if row.base_repo_id else None,
        rule_id=row.rule_id,
        last_checked=row.last_checked,
    )


class RepoStore:
    """Watched repos: added, listed, updated after each poll. Every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, repo_id: RepoId, *, branch: str | None = None, every: float | None = None,
            now: datetime) -> tuple[RepoRow, bool]:
        """Watch a repo (on ``main`` unless ``branch``); returns (row, created). Re-adding updates the branch and
        interval given, and leaves a setting not given (None) as it was.

        An upsert: the insert does nothing when the repo is watched already (``ON CONFLICT DO
        NOTHING``, on SQLite and PostgreSQL alike), so concurrent adds of one repo make one row, one
        of them ``created``, and none fails on the unique key.
        """
        insert_ = sqlite_insert if self.db.dialect == "sqlite" else pg_insert
        with self.db.transaction() as conn:
            inserted = conn.execute(insert_(repos).values(
                repo_id=repo_id, branch=branch or "main", every_seconds=every, state="active", created_at=now,
            ).on_conflict_do_nothing(index_elements=["repo_id"]).returning(repos.c.id)).first()
            if inserted is None:
                changes = {k: v for k, v in (("branch", branch), ("every_seconds", every)) if v is not None}
                if changes:
                    conn.execute(update(repos).where(repos.c.repo_id == repo_id).values(**changes))
            row = conn.execute(select(repos).where(repos.c.repo_id == repo_id)).one()
            return repo_row(row), inserted is not None

    def remove(self, repo_id: RepoId) -> bool:
        with self.db.transaction() as conn:
            return bool(conn.execute(repos.delete().where(repos.c.repo_id == repo_id)).rowcount > 0)

    def all(self) -> list[RepoRow]:
        """Every watched repo, by id."""
        with self.db.transaction() as conn:
            return [repo_row(r) for r in conn.execute(select(repos).order_by(repos.c.repo_id))]

    def get(self, repo_id: str) -> RepoRow | None:
        with self.db.read() as conn:
            row = conn.execute(select(repos).where(repos.c.repo_id == repo_id)).first()
            return repo_row(row) if row else None

    def derivatives_of(self, repo_id: str) -> list[RepoRow]:
        """Watched repos whose card declares ``repo_id`` as their base model."""
        with self.db.transaction() as conn:
            return [repo_row(r) for r in conn.execute(
                select(repos).where(repos.c.base_repo_id == repo_id).order_by(repos.c.repo_id))]

    def owner_watched(self, owner: str) -> bool:
        """Whether any watched repo belongs to ``owner`` (case-insensitive)."""
        with self.db.transaction() as conn:
            return conn.execute(select(repos.c.id).where(func.lower(repos.c.repo_id).startswith(
                owner.lower() + "/", autoescape=True)).limit(1)).first() is not None

    def update(self, pk: int, **values: Any) -> None:
        with self.db.transaction() as conn:
            conn.execute(update(repos).where(repos.c.id == pk).values(**values))

    def mark_unreachable(self, pk: int, *, now: datetime, **values: Any) -> None:
        """:meth:`update` after a poll that could not reach the Hub: ``unreachable_since`` set unless set."""
        with self.db.transaction() as conn:
            conn.execute(update(repos).where(repos.c.id == pk)
                         .values(unreachable_since=func.coalesce(repos.c.unreachable_since, now), **values))


class EventStore:
    """Repo events (rewrites, renames, deletion, gating), each recorded once with its advisory."""

    def __init__(self, db: Database, repos: RepoStore, advisories: AdvisoryStore) -> None:
        self.db = db
        self.repos = repos
        self.advisories = advisories

    def save_report(self, report: EventReport, *, seen: SeenAdvisories | None = None) -> bool:
        """Record a repo event once per (kind, dedupe key), with the repo's new state and its advisory.

        Returns False (and writes nothing but the repo's new state) when the same event was recorded
        before. ``seen``: see :meth:`AdvisoryStore.apply`.
        """
        try:
            with self.db.transaction() as conn:
                conn.execute(insert(events).values(
                    repo_pk=report.repo_pk, kind=report.kind, dedupe_key=report.dedupe_key[:200],
                    detail=report.detail, revision_sha=report.revision_sha, created_at=report.created_at))
                if report.repo_updates:
                    conn.execute(update(repos).where(repos.c.id == report.repo_pk).values(**report.repo_updates))
                self.advisories.apply(conn, report.repo_pk, report.advisories, now=report.created_at, seen=seen)
            return True
        except StoreConflict:
            if report.repo_updates:
                self.repos.update(report.repo_pk, **report.repo_updates)
            return False

    def all(self, repo_pk: int | None = None) -> list[EventRow]:
        """Events, oldest first (of one repo, or all)."""
        with self.db.transaction() as conn:
            query = select(events, repos.c.repo_id).join(repos, repos.c.id == events.c.repo_pk)
            if repo_pk is not None:
                query = query.where(events.c.repo_pk == repo_pk)
            return [EventRow(pk=r.id, repo_id=RepoId(r.repo_id), kind=r.kind, revision_sha=r.revision_sha,
                             detail=r.detail, created_at=r.created_at)
                    for r in conn.execute(query.order_by(events.c.id))]
