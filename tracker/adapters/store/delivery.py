"""OutboxStore: subscriptions, the delivery outbox and its state.

The outbox rows for an advisory are written by :meth:`OutboxStore.enqueue`,
on the connection of the transaction that stores the advisory, so an advisory and the alerts it
causes are committed together or not at all. A row's ``webhook_id`` is unique: a replayed
transaction (or two processes storing the same change) cannot queue the same announcement twice.

Webhook secrets are stored as they are, because signing needs them back (an HMAC key cannot be
hashed like a password): they are never logged, shown once by ``tracker subscribe``, never listed
again, and hidden from ``repr``. The database is therefore a credential store; see docs/delivery.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from tracker.adapters.delivery.plan import wants, webhook_id
from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import deliveries, subscriptions
from tracker.core.model import AdvisoryEvent
from tracker.core.store_types import DeliveryRow, SubscriptionRow


def _subscription(row: Any) -> SubscriptionRow:
    return SubscriptionRow(id=row.id, target=row.target, kind=row.kind, url=row.url, secret=row.secret,
                           min_severity=row.min_severity, categories=tuple(row.categories or ()),
                           created_at=row.created_at)


def _delivery(row: Any) -> DeliveryRow:
    return DeliveryRow(
        id=row.id, subscription_id=row.subscription_id, webhook_id=row.webhook_id, event_type=row.event_type,
        advisory_id=row.advisory_id, repo_id=row.repo_id, severity=row.severity, record=row.record,
        state=row.state, attempts=row.attempts, next_attempt_at=row.next_attempt_at,
        leased_until=row.leased_until, last_status=row.last_status, last_error=row.last_error,
        created_at=row.created_at, delivered_at=row.delivered_at)


class OutboxStore:
    """Subscriptions and the outbox. Every method is one transaction, but :meth:`enqueue` (the caller's)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- subscriptions ----------------------------------------------------------------------

    # Keyword-only, one per column of the row it inserts.
    def add_subscription(self, *, target: str, kind: str, url: str, secret: str | None, min_severity: str,
                         categories: Sequence[str], now: datetime) -> SubscriptionRow:
        with self.db.transaction() as conn:
            pk = conn.execute(insert(subscriptions).values(
                target=target, kind=kind, url=url, secret=secret, min_severity=min_severity,
                categories=list(categories), created_at=now).returning(subscriptions.c.id)).scalar_one()
            return _subscription(conn.execute(select(subscriptions).where(subscriptions.c.id == pk)).one())

    def list_subscriptions(self) -> list[SubscriptionRow]:
        with self.db.transaction() as conn:
            return [_subscription(r) for r in conn.execute(select(subscriptions).order_by(subscriptions.c.id))]

    def remove_subscription(self, subscription_id: int) -> int | None:
        """Delete a subscription and its outbox rows; how many were still pending (None: no such id)."""
        with self.db.transaction() as conn:
            pending = conn.execute(select(func.count()).select_from(deliveries).where(and_(
                deliveries.c.subscription_id == subscription_id, deliveries.c.state == "pending"))).scalar_one()
            conn.execute(delete(deliveries).where(deliveries.c.subscription_id == subscription_id))
            gone = conn.execute(delete(subscriptions).where(subscriptions.c.id == subscription_id)).rowcount
            return int(pending) if gone else None

    # -- the outbox -------------------------------------------------------------------------

    def enqueue(self, conn: Connection, events: Sequence[AdvisoryEvent], *, now: datetime,
                serve: Callable[[Sequence[str]], Mapping[str, Mapping[str, Any]]] | None = None) -> None:
        """One outbox row per (matching subscription, event), on ``conn``: the advisory's own transaction.

        ``serve(ids)``: the records as served of the advisories some subscription hears of, in
        place of the events' own (called only when there is one: no subscriber, nothing computed).
        """
        if not events:
            return
        subs = conn.execute(select(subscriptions.c.id, subscriptions.c.target, subscriptions.c.min_severity,
                                   subscriptions.c.categories).order_by(subscriptions.c.id)).all()
        pairs = [(event, sub.id) for event in events for sub in subs
                 if wants(sub.target, sub.min_severity, sub.categories or (), event)]
        if not pairs:
            return
        served = serve(sorted({e.advisory_id for e, _ in pairs})) if serve is not None else {}
        rows = [
            {"subscription_id": sub_id, "webhook_id": webhook_id(sub_id, event), "event_type": event.type.value,
             "advisory_id": event.advisory_id, "repo_id": event.repo_id, "severity": event.severity,
             "record": dict(served.get(event.advisory_id, event.record)), "state": "pending", "attempts": 0,
             "next_attempt_at": now, "created_at": now}
            for event, sub_id in pairs
        ]
        dialect = conn.dialect.name
        if dialect in ("sqlite", "postgresql"):
            stmt = (sqlite_insert if dialect == "sqlite" else pg_insert)(deliveries)
            conn.execute(stmt.on_conflict_do_nothing(index_elements=["webhook_id"]), rows)
            return
        known = set(conn.execute(select(deliveries.c.webhook_id).where(
            deliveries.c.webhook_id.in_([r["webhook_id"] for r in rows]))).scalars())
        fresh = [r for r in rows if r["webhook_id"] not in known]
        if fresh:
            conn.execute(insert(deliveries), fresh)

    def due_deliveries(self, now: datetime, *, limit: int = 100) -> list[tuple[DeliveryRow, SubscriptionRow]]:
        """The oldest pending delivery of each subscription, where it is due and not leased.

        Only a subscription's *oldest* pending row is ever offered, so a subscription's alerts go
        out in order: a later one waits while an earlier one is being retried.
        """
        with self.db.transaction() as conn:
            heads = (select(func.min(deliveries.c.id).label("id")).where(deliveries.c.state == "pending")
                     .group_by(deliveries.c.subscription_id).subquery())
            query = (
                select(deliveries, subscriptions.c.target, subscriptions.c.kind, subscriptions.c.url,
                       subscriptions.c.secret, subscriptions.c.min_severity, subscriptions.c.categories,
                       subscriptions.c.created_at.label("sub_created_at"))
                .join(heads, heads.c.id == deliveries.c.id)
                .join(subscriptions, subscriptions.c.id == deliveries.c.subscription_id)
                .where(deliveries.c.next_attempt_at <= now)
                .where(or_(deliveries.c.leased_until.is_(None), deliveries.c.leased_until < now))
                .order_by(deliveries.c.id).limit(limit)
            )
            out = []
            for row in conn.execute(query):
                sub = SubscriptionRow(id=row.subscription_id, target=row.target, kind=row.kind, url=row.url,
                                      secret=row.secret, min_severity=row.min_severity,
                                      categories=tuple(row.categories or ()),
                                      created_at=row.sub_created_at)
                out.append((_delivery(row), sub))
            return out

    def lease_delivery(self, delivery_id: int, *, now: datetime, until: datetime) -> bool:
        """Take a pending delivery for one attempt (until ``until``); False if someone else holds it."""
        with self.db.transaction() as conn:
            return conn.execute(update(deliveries).where(and_(
                deliveries.c.id == delivery_id, deliveries.c.state == "pending",
                or_(deliveries.c.leased_until.is_(None), deliveries.c.leased_until < now),
            )).values(leased_until=until)).rowcount == 1

    def delivery_succeeded(self, delivery_id: int, *, status: int, now: datetime) -> None:
        with self.db.transaction() as conn:
            conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(
                state="delivered", attempts=deliveries.c.attempts + 1, last_status=status, last_error=None,
                leased_until=None, delivered_at=now))

    def delivery_failed(self, delivery_id: int, *, status: int | None, error: str,
                        retry_at: datetime | None) -> None:
        """Record a failed attempt: retried at ``retry_at``, or a dead letter when it is None."""
        values: dict[str, Any] = {"attempts": deliveries.c.attempts + 1, "last_status": status,
                                  "last_error": error[:2000], "leased_until": None}
        if retry_at is None:
            values["state"] = "dead"
        else:
            values["next_attempt_at"] = retry_at
        with self.db.transaction() as conn:
            conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(**values))

    def list_deliveries(self, *, failed: bool = False, limit: int | None = None) -> list[DeliveryRow]:
        """Oldest first; ``failed``: dead letters and pending deliveries whose last attempt failed."""
        with self.db.transaction() as conn:
            query = select(deliveries).order_by(deliveries.c.id)
            if failed:
                query = query.where(or_(deliveries.c.state == "dead", and_(
                    deliveries.c.state == "pending", deliveries.c.attempts > 0)))
            if limit is not None:
                query = query.limit(limit)
            return [_delivery(r) for r in conn.execute(query)]

    def get_delivery(self, delivery_id: int) -> DeliveryRow | None:
        with self.db.transaction() as conn:
            row = conn.execute(select(deliveries).where(deliveries.c.id == delivery_id)).first()
            return _delivery(row) if row else None

    def retry_delivery(self, delivery_id: int, *, now: datetime) -> bool:
        """Send a dead letter again (attempts start over); False unless it is dead."""
        with self.db.transaction() as conn:
            return conn.execute(update(deliveries).where(and_(
                deliveries.c.id == delivery_id, deliveries.c.state == "dead")).values(
                state="pending", attempts=0, next_attempt_at=now, leased_until=None)).rowcount == 1
