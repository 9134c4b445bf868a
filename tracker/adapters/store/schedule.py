"""The poll schedule in the database: which repos are due, and who polls them.

Replicas (several ``tracker run`` against one PostgreSQL) share the watch list through these
rows, not through any process's memory: a repo is *due* when ``next_poll_at`` has passed (NULL:
never polled), and a replica *claims* due repos by taking their lease (``lease_owner``,
``lease_until``: migration 0004) in one statement. On PostgreSQL the candidate rows are
selected ``FOR UPDATE SKIP LOCKED``, so replicas claiming at the same moment take disjoint
sets without waiting on each other; on SQLite (one process) the statement is the same without
the lock clause. A lease that runs out is free again, and a lease held by a dead process of
this host is freed at once (:meth:`ScheduleStore.free_dead_leases`), so a crashed replica's repos
are taken over. Every write of a lease is in this module: the Poller's own (one repo, while it
polls it) and the schedule's (claims, completions, releases).

A Hub webhook bumps ``poll_requests`` and makes the repo due now; a claim remembers the count
it saw, and finishing the poll records it in ``poll_served``, unless a request arrived during
the poll (the count moved): then the repo stays due, so a change pushed mid-poll is not lost.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Integer, and_, bindparam, case, func, not_, or_, select, update

from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import repos, revisions
from tracker.core.model import RepoId, RepoState, RevisionStatus
from tracker.core.store_types import DueRepo

_NO_LEASE: dict[str, Any] = {"lease_owner": None, "lease_until": None}


def _lease_free(now: datetime) -> ColumnElement[bool]:
    """Nobody holds the repo's lease: never taken, or run out."""
    return or_(repos.c.lease_until.is_(None), repos.c.lease_until < now)


def _due(now: datetime) -> ColumnElement[bool]:
    """The repo's next poll is due: never polled, or its time has passed."""
    return or_(repos.c.next_poll_at.is_(None), repos.c.next_poll_at <= now)


def _not_deferred(now: datetime) -> ColumnElement[bool]:
    return or_(repos.c.defer_until.is_(None), repos.c.defer_until <= now)


def checkable_sql() -> ColumnElement[bool]:
    """:attr:`DueRepo.checkable` as SQL, so a claim can ask for the repos an owner listing may check."""
    return and_(repos.c.state == RepoState.ACTIVE.value, repos.c.hub_uid.is_not(None),
                repos.c.last_seen_sha.is_not(None), repos.c.branch == "main", repos.c.renamed_to.is_(None),
                repos.c.poll_requests <= repos.c.poll_served, repos.c.repo_id.contains("/"))


_COLUMNS = (repos.c.id, repos.c.repo_id, repos.c.branch, repos.c.every_seconds, repos.c.state, repos.c.hub_uid,
            repos.c.renamed_to, repos.c.last_seen_sha, repos.c.poll_requests, repos.c.poll_served,
            repos.c.listing_epoch, repos.c.last_polled_at, repos.c.last_checked)


def _due_repo(r: Any) -> DueRepo:
    """A row with the _COLUMNS."""
    return DueRepo(pk=r.id, repo_id=RepoId(r.repo_id), branch=r.branch, every_seconds=r.every_seconds,
                   state=RepoState(r.state), hub_uid=r.hub_uid, renamed_to=r.renamed_to,
                   last_seen_sha=r.last_seen_sha, poll_requests=r.poll_requests, poll_served=r.poll_served,
                   listing_epoch=r.listing_epoch, last_polled_at=r.last_polled_at, last_checked=r.last_checked)


class ScheduleStore:
    """The poll schedule and the leases: claims, completions and requests of polls (one transaction each)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- one repo's lease (the Poller, while it polls it) -------------------------------------

    def acquire_lease(self, repo_pk: int, owner: str, *, now: datetime, until: datetime,
                      steal_from: str | None = None) -> bool:
        """Take (or extend) a repo's lease; False while another owner's lease is unexpired.

        ``steal_from``: take it from that owner whatever its expiry (a holder known to be dead).
        One conditional UPDATE, so two workers racing for it cannot both win.
        """
        free = or_(_lease_free(now), repos.c.lease_owner == owner)
        if steal_from is not None:
            free = or_(free, repos.c.lease_owner == steal_from)
        with self.db.transaction() as conn:
            taken = conn.execute(
                update(repos).where(and_(repos.c.id == repo_pk, free)).values(lease_owner=owner, lease_until=until)
            ).rowcount
            return bool(taken == 1)

    def release_lease(self, repo_pk: int, owner: str) -> None:
        self.release([repo_pk], owner)

    def lease_of(self, repo_pk: int) -> tuple[str | None, datetime | None]:
        """(owner, until) of a repo's lease; (None, None) when free or not watched."""
        with self.db.transaction() as conn:
            row = conn.execute(select(repos.c.lease_owner, repos.c.lease_until).where(repos.c.id == repo_pk)).first()
            return (row.lease_owner, row.lease_until) if row else (None, None)

    # -- the schedule -------------------------------------------------------------------------

    # Keyword-only: the claim's window and its filters, each a clause of the one statement.
    def claim_due(self, owner: str, *, now: datetime, until: datetime, limit: int,
                  checkable: bool | None = None, only: Collection[int] | None = None) -> list[DueRepo]:
        """Lease up to ``limit`` due repos to ``owner`` until ``until``: never polled first, then most overdue.

        Rows another claimer has locked are skipped (PostgreSQL), and rows it has already leased no
        longer match, so two replicas never claim the same repo. Owners' repos come together
        (ties broken by repo id), so one listing can check them. ``checkable``: only repos an
        owner listing may check (read before, active, on ``main``, not asked for by a webhook),
        or only the others (False); None: any. ``only``: among these repos (primary keys) alone.
        """
        if limit <= 0 or (only is not None and not only):
            return []
        free = and_(_due(now), _lease_free(now), _not_deferred(now))
        listable = checkable_sql()
        if checkable is True:
            free = and_(free, listable)
        elif checkable is False:
            free = and_(free, not_(listable))
        if only is not None:
            free = and_(free, repos.c.id.in_(list(only)))
        with self.db.transaction() as conn:
            candidates = (select(repos.c.id).where(free)
                          .order_by(repos.c.next_poll_at.asc().nulls_first(), repos.c.repo_id).limit(limit))
            if conn.dialect.name == "postgresql":
                # A CTE, evaluated once: PostgreSQL may run an ``IN (SELECT … LIMIT n FOR UPDATE
                # SKIP LOCKED)`` subquery more than once and so take more than n rows.
                # MATERIALIZED: never inlined into the UPDATE, so the LIMIT holds whatever the planner does.
                due = candidates.with_for_update(skip_locked=True).cte("due").prefix_with("MATERIALIZED")
                stmt = update(repos).where(repos.c.id == due.c.id)
            else:
                stmt = update(repos).where(repos.c.id.in_(candidates.scalar_subquery()))
            rows = conn.execute(stmt.where(free).values(lease_owner=owner, lease_until=until)
                                .returning(*_COLUMNS)).all()
        claimed = [_due_repo(r) for r in rows]
        claimed.sort(key=lambda d: d.repo_id)
        return claimed

    def release(self, pks: Iterable[int], owner: str) -> None:
        """Give claimed repos back unpolled (still due): e.g. no Hub budget left for them now."""
        ids = list(pks)
        if not ids:
            return
        with self.db.transaction() as conn:
            conn.execute(update(repos).where(and_(repos.c.id.in_(ids), repos.c.lease_owner == owner))
                         .values(**_NO_LEASE))

    # Keyword-only: each is a column the completion sets.
    def finish(self, due: DueRepo, owner: str, *, next_at: datetime, now: datetime,
               unchanged: bool = False, epoch: int | None = None) -> None:
        """A poll of ``due`` is over: schedule the next one, serve the requests seen, free the lease.

        If a webhook asked for a poll while this one ran, the repo stays due (``next_at`` is
        ignored). ``unchanged``: checked by an owner listing, so the poll bookkeeping that the
        Poller does for the repos it polls is done here. ``epoch``: the change-listing chain the
        check was made in (the repo is current in it); None leaves the repo's as it was.
        """
        values: dict[str, object] = {
            "next_poll_at": case((repos.c.poll_requests == due.poll_requests, next_at), else_=now),
            "poll_served": due.poll_requests,
            "lease_owner": case((repos.c.lease_owner == owner, None), else_=repos.c.lease_owner),
            "lease_until": case((repos.c.lease_owner == owner, None), else_=repos.c.lease_until),
        }
        if unchanged:
            values.update(last_polled_at=now, last_success_at=now, last_error=None, defer_until=None,
                          last_outcome="unchanged")
        if epoch is not None:
            values["listing_epoch"] = epoch
        with self.db.transaction() as conn:
            conn.execute(update(repos).where(repos.c.id == due.pk).values(**values))

    def finish_unchanged(self, dues: Sequence[DueRepo], owner: str, *, next_at: Callable[[DueRepo], datetime],
                         now: datetime, epoch: int | None = None, checked: bool = False) -> None:
        """:meth:`finish` for many repos a listing found unchanged: one statement run for all, one transaction.

        ``checked``: an owner listing listed them, a check of their own (``last_checked``); the
        Hub-wide change listing only vouches for their content, and leaves it as it was.
        """
        if not dues:
            return
        values: dict[str, object] = {
            "next_poll_at": case((repos.c.poll_requests == bindparam("b_requests", type_=Integer), bindparam("b_next", type_=repos.c.next_poll_at.type)), else_=now),
            "poll_served": bindparam("b_requests", type_=Integer),
            "lease_owner": case((repos.c.lease_owner == owner, None), else_=repos.c.lease_owner),
            "lease_until": case((repos.c.lease_owner == owner, None), else_=repos.c.lease_until),
            "last_polled_at": now, "last_success_at": now, "last_error": None, "defer_until": None,
            "last_outcome": "unchanged",
        }
        if checked:
            values["last_checked"] = now
        if epoch is not None:
            values["listing_epoch"] = epoch
        stmt = update(repos).where(repos.c.id == bindparam("b_pk")).values(**values)
        params = [{"b_pk": d.pk, "b_requests": d.poll_requests, "b_next": next_at(d)} for d in dues]
        with self.db.transaction() as conn:
            conn.execute(stmt, params)

    def request_poll(self, repo_id: str, *, now: datetime) -> bool:
        """A Hub webhook said the repo changed: due now, checked fully; False when it is not watched."""
        with self.db.transaction() as conn:
            return conn.execute(update(repos).where(repos.c.repo_id == repo_id).values(
                poll_requests=repos.c.poll_requests + 1,
                next_poll_at=case((or_(repos.c.next_poll_at.is_(None), repos.c.next_poll_at > now), now),
                                  else_=repos.c.next_poll_at),
            )).rowcount == 1

    def make_due(self, pks: Collection[int], *, now: datetime) -> None:
        """These repos are due now (``tracker poll``: one cycle over them, whatever their schedule)."""
        ids = list(pks)
        with self.db.transaction() as conn:
            for i in range(0, len(ids), 500):
                conn.execute(update(repos).where(and_(repos.c.id.in_(ids[i:i + 500]), or_(
                    repos.c.next_poll_at.is_(None), repos.c.next_poll_at > now))).values(next_poll_at=now))

    def claimable(self, *, now: datetime, only: Collection[int] | None = None) -> int:
        """How many repos (of ``only``) are due with their lease free and not deferred: what a claim could take."""
        cond = and_(_due(now), _lease_free(now), _not_deferred(now))
        if only is not None:
            cond = and_(cond, repos.c.id.in_(list(only)))
        with self.db.transaction() as conn:
            return int(conn.execute(select(func.count()).select_from(repos).where(cond)).scalar_one())

    def due_owners(self, *, now: datetime, limit: int, only: Collection[int] | None = None) -> int:
        """Distinct owners among (up to ``limit``) due repos on ``main``: what checking them one by one would cost at least."""
        cond = and_(_due(now), _lease_free(now), repos.c.branch == "main")
        if only is not None:
            cond = and_(cond, repos.c.id.in_(list(only)))
        with self.db.transaction() as conn:
            ids = list(conn.execute(select(repos.c.repo_id).where(cond).limit(limit)).scalars())
            owners = len({r.split("/", 1)[0].lower() for r in ids})
            if len(ids) < limit:
                return owners
            # A sample: scale its owners to every due repo (the walk serves all of them, not one batch).
            total = int(conn.execute(select(func.count()).select_from(repos).where(cond)).scalar_one())
            return owners * total // max(1, len(ids))

    def release_all(self, owner: str) -> int:
        """Free every lease ``owner`` holds (a replica shutting down); how many."""
        with self.db.transaction() as conn:
            return conn.execute(update(repos).where(repos.c.lease_owner == owner)
                                .values(**_NO_LEASE)).rowcount

    def with_pending(self, pks: Sequence[int]) -> set[int]:
        """Which of these repos have revisions listed but not read yet (a poll must finish them)."""
        if not pks:
            return set()
        with self.db.transaction() as conn:
            return set(conn.execute(select(revisions.c.repo_pk).distinct().where(and_(
                revisions.c.repo_pk.in_(list(pks)), revisions.c.status == RevisionStatus.PENDING.value))).scalars())

    def lease_owners(self) -> list[str]:
        """Every process holding a lease now (to find dead ones)."""
        with self.db.transaction() as conn:
            return [o for o in conn.execute(select(repos.c.lease_owner).distinct()
                                            .where(repos.c.lease_owner.is_not(None))).scalars() if o]

    def free_dead_leases(self, is_dead: Callable[[str], bool]) -> int:
        """Free every lease whose holder ``is_dead`` (a killed process of this host); how many."""
        freed = 0
        for holder in self.lease_owners():
            if is_dead(holder):
                with self.db.transaction() as conn:
                    freed += conn.execute(update(repos).where(repos.c.lease_owner == holder)
                                          .values(**_NO_LEASE)).rowcount
        return freed

    def schedule(self) -> list[tuple[RepoId, str, float | None]]:
        """(repo id, branch, interval) of every watched repo: what the budget estimate needs."""
        with self.db.transaction() as conn:
            return [(RepoId(r.repo_id), r.branch, r.every_seconds)
                    for r in conn.execute(select(repos.c.repo_id, repos.c.branch, repos.c.every_seconds))]

    def overdue(self, now: datetime) -> tuple[int, datetime | None]:
        """How many repos are due, and since when the oldest one is (for the lag warning)."""
        with self.db.transaction() as conn:
            row = conn.execute(select(func.count(), func.min(repos.c.next_poll_at)).where(
                repos.c.next_poll_at <= now)).one()
            return int(row[0]), row[1]
