"""The reads `tracker status`, `/readyz` and `/metrics` need: aggregates, never whole rows.

One transaction per call, SQLite and PostgreSQL alike. The pure
judgement of what is healthy lives in ``tracker/surfaces/status.py``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, case, func, select

from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import advisories, commits, deliveries, repos, revisions
from tracker.core.model import RevisionStatus
from tracker.core.store_types import DeliveryBacklog, FleetFigures, HubOutage, RepoHealthRow


class HealthReads:
    """Aggregates over the watch list, the revisions and the outbox."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def next_poll_at(self, repo_id: str) -> datetime | None:
        """When the daemon's schedule tries a repo next (None: due now, or not watched)."""
        with self.db.transaction() as conn:
            return conn.execute(select(repos.c.next_poll_at).where(repos.c.repo_id == repo_id)).scalar()

    def hub_outage(self) -> HubOutage:
        """One aggregate over the watch list, cheap enough for every ``/readyz``."""
        with self.db.transaction() as conn:
            row = conn.execute(select(func.count(repos.c.last_polled_at), func.count(repos.c.unreachable_since),
                                      func.max(repos.c.unreachable_since))).one()
        return HubOutage(polled=int(row[0]), unreachable=int(row[1]), since=row[2])

    def repos(self) -> list[RepoHealthRow]:
        with self.db.transaction() as conn:
            repo_rows = conn.execute(select(repos).order_by(repos.c.repo_id)).all()
            pending = {
                r.repo_pk: (int(r.n), r.oldest)
                for r in conn.execute(
                    select(revisions.c.repo_pk, func.count().label("n"), func.min(commits.c.created_at).label("oldest"))
                    .select_from(revisions)
                    .outerjoin(commits, and_(commits.c.repo_pk == revisions.c.repo_pk, commits.c.sha == revisions.c.sha))
                    .where(revisions.c.status == RevisionStatus.PENDING)
                    .group_by(revisions.c.repo_pk))
            }
            top = (select(revisions.c.repo_pk, func.max(revisions.c.seq).label("seq"))
                   .group_by(revisions.c.repo_pk).subquery())
            newest = {
                r.repo_pk: r for r in conn.execute(
                    select(revisions.c.repo_pk, revisions.c.sha, revisions.c.date, revisions.c.status,
                           revisions.c.baseline, revisions.c.analysed_at)
                    .join(top, and_(top.c.repo_pk == revisions.c.repo_pk, top.c.seq == revisions.c.seq)))
            }
            shas = [r.sha for r in newest.values()]
            raised: dict[tuple[int, str], tuple[str, datetime | None]] = {}
            if shas:
                for a in conn.execute(
                        select(advisories.c.repo_pk, advisories.c.revision_sha, advisories.c.id, advisories.c.published)
                        .where(advisories.c.revision_sha.in_(shas))
                        .order_by(advisories.c.published, advisories.c.id)):
                    raised.setdefault((a.repo_pk, a.revision_sha), (a.id, a.published))
        out = []
        for r in repo_rows:
            count, oldest = pending.get(r.id, (0, None))
            top_row = newest.get(r.id)
            advisory = raised.get((r.id, top_row.sha)) if top_row is not None else None
            out.append(RepoHealthRow(
                repo_id=r.repo_id, branch=r.branch, every_seconds=r.every_seconds, state=r.state,
                last_outcome=r.last_outcome, last_polled_at=r.last_polled_at, last_error=r.last_error,
                defer_until=r.defer_until, lease_owner=r.lease_owner, lease_until=r.lease_until,
                created_at=r.created_at, pending=count, oldest_pending_listed_at=oldest,
                newest_sha=top_row.sha if top_row else None, newest_date=top_row.date if top_row else None,
                newest_status=top_row.status if top_row else None,
                newest_baseline=bool(top_row.baseline) if top_row else False,
                newest_analysed_at=top_row.analysed_at if top_row else None,
                newest_advisory=advisory[0] if advisory else None,
                newest_advisory_at=advisory[1] if advisory else None,
                next_poll_at=r.next_poll_at, unreachable_since=r.unreachable_since, last_checked=r.last_checked,
            ))
        return out

    def deliveries(self) -> DeliveryBacklog:
        with self.db.transaction() as conn:
            rows = {r.state: r for r in conn.execute(
                select(deliveries.c.state, func.count().label("n"),
                       func.sum(case((deliveries.c.attempts > 0, 1), else_=0)).label("tried"),
                       func.min(deliveries.c.created_at).label("oldest"))
                .where(deliveries.c.state.in_(["pending", "dead"]))
                .group_by(deliveries.c.state))}
        pending, dead = rows.get("pending"), rows.get("dead")
        return DeliveryBacklog(pending=int(pending.n) if pending else 0,
                               retrying=int(pending.tried or 0) if pending else 0,
                               dead=int(dead.n) if dead else 0,
                               oldest_pending_at=pending.oldest if pending else None)

    def pending_revisions(self) -> int:
        with self.db.transaction() as conn:
            return int(conn.execute(select(func.count()).select_from(revisions)
                                    .where(revisions.c.status == RevisionStatus.PENDING)).scalar_one())

    def last_successes(self, *, limit: int) -> tuple[list[tuple[str, datetime]], int]:
        """The ``limit`` watched repos whose last successful poll is oldest, stalest first, as (repo id, when it
        succeeded, or when it was watched for a repo never polled successfully), and how many repos are watched."""
        since = func.coalesce(repos.c.last_success_at, repos.c.created_at).label("since")
        with self.db.transaction() as conn:
            rows = conn.execute(select(repos.c.repo_id, repos.c.last_success_at, repos.c.created_at)
                                .order_by(since, repos.c.repo_id).limit(limit)).all()
            total = int(conn.execute(select(func.count()).select_from(repos)).scalar_one())
        out = []
        for r in rows:
            when = r.last_success_at or r.created_at
            assert when is not None  # created_at is NOT NULL
            out.append((str(r.repo_id), when))
        return out, total

    def fleet(self) -> FleetFigures:
        """What every replica reports at scrape time, whichever process polled: three statements."""
        with self.db.transaction() as conn:
            by_status: dict[str, int] = dict(conn.execute(select(revisions.c.status, func.count())
                                          .group_by(revisions.c.status)).all())
            oldest = conn.execute(
                select(func.min(commits.c.created_at)).select_from(revisions)
                .join(commits, and_(commits.c.repo_pk == revisions.c.repo_pk, commits.c.sha == revisions.c.sha))
                .where(revisions.c.status == RevisionStatus.PENDING)).scalar()
            live: dict[str, int] = dict(conn.execute(select(advisories.c.severity, func.count())
                                     .where(advisories.c.withdrawn.is_(False))
                                     .group_by(advisories.c.severity)).all())
        return FleetFigures(revisions_read=int(by_status.get(RevisionStatus.DONE, 0)),
                            revisions_pending=int(by_status.get(RevisionStatus.PENDING, 0)),
                            oldest_pending_listed_at=oldest,
                            advisories_by_severity={str(k): int(v) for k, v in live.items()})
