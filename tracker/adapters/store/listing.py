"""The Hub-wide change listing's state (the one ``hub_listing`` row) and the polls a walk asks for.

What a walk means, its watermarks and chains, is :mod:`tracker.pipeline.changes`; this module only
reads and writes the row and makes the watched repos a walk saw move due.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime

from sqlalchemy import and_, insert, select, update

from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import hub_listing, repos
from tracker.core.model import RepoState
from tracker.core.store_types import ListingRow, Moved


class ListingStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self) -> ListingRow | None:
        with self.db.transaction() as conn:
            row = conn.execute(select(hub_listing).where(hub_listing.c.id == 1)).first()
        if row is None:
            return None
        return ListingRow(epoch=int(row.epoch), marks=row.marks if isinstance(row.marks, list) else [],
                          rate=float(row.rate), page_size=int(row.page_size))

    def write(self, *, epoch: int, marks: list[dict[str, str]], rate: float, page_size: int, now: datetime) -> None:
        values = {"epoch": epoch, "marks": marks, "rate": rate, "page_size": page_size, "updated_at": now}
        with self.db.transaction() as conn:
            if conn.execute(update(hub_listing).where(hub_listing.c.id == 1).values(**values)).rowcount == 0:
                conn.execute(insert(hub_listing).values(id=1, **values))

    def request_moved(self, listed: Mapping[str, str | None], *, now: datetime,
                      gated: Collection[str] = ()) -> list[Moved]:
        """Make due now, for a check of its own (as a webhook does: ``poll_requests`` + 1), every active
        watched repo on ``main`` that ``listed`` (lower-case id -> head) shows

        * with a head other than the last one read (``moved``);
        * as gated (``gated``, lower-case ids): the HEAD tells whether this tracker may still read it;
        * not under its own id, but its last head under another (``renamed?``): the HEAD of the
          watched id answers a redirect (renamed) or a 404 (a copy elsewhere, the original gone).

        Those repos."""
        moved: list[Moved] = []
        # A head listed under one id only: a head many models share (copies of one repo) names no rename.
        ids_of: dict[str, list[str]] = {}
        for key, sha in listed.items():
            if sha:
                ids_of.setdefault(sha, []).append(key)
        by_sha = {sha: keys[0] for sha, keys in ids_of.items() if len(keys) == 1}
        with self.db.transaction() as conn:
            rows = conn.execute(select(repos.c.id, repos.c.repo_id, repos.c.last_seen_sha).where(and_(
                repos.c.branch == "main", repos.c.state == RepoState.ACTIVE.value,
                repos.c.last_seen_sha.is_not(None), repos.c.renamed_to.is_(None))))
            for pk, repo_id, last_seen in rows:
                key = repo_id.lower()
                if key in listed and listed[key] != last_seen:
                    moved.append(Moved(pk=pk, key=key, sha=listed[key]))
                elif key in listed and key in gated:
                    moved.append(Moved(pk=pk, key=key, sha=listed[key], why="gated"))
                elif key not in listed and last_seen in by_sha:
                    moved.append(Moved(pk=pk, key=key, sha=last_seen, why="renamed?"))
            for i in range(0, len(moved), 500):
                ids = [m.pk for m in moved[i:i + 500]]
                conn.execute(update(repos).where(repos.c.id.in_(ids)).values(
                    poll_requests=repos.c.poll_requests + 1, next_poll_at=now))
        return moved


__all__ = ["ListingRow", "ListingStore", "Moved"]
