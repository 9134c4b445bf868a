"""SqlStore: the tracker's durable state, one store per domain over one database.

Each domain has one obvious place (SQLite or PostgreSQL alike):

- ``repos``: the watch list; ``events``: what happened to a repo (``repos.py``);
- ``revisions``: revisions and the commit graph; ``blobs``: the small files' cache (``revisions.py``);
- ``advisories``: advisories and the reach index (``advisories.py``, ``index.py``);
- ``outbox``: subscriptions and deliveries (``delivery.py``);
- ``schedule``: the poll schedule and every lease (``schedule.py``);
- ``rules``: watch rules and the repos they added (``rules.py``); ``listing``: the Hub-wide change
  listing's watermarks (``listing.py``);
- ``tokens``: API tokens (``tokens.py``);
- ``health`` and ``pages``: aggregate reads for status and the web pages (``health.py``, ``pages.py``).

Every method of a domain store is one transaction on ``db`` (:class:`~tracker.adapters.store.db.Database`);
the writes that span domains (a revision's report with its advisories and their deliveries) are one
call of the domain that owns the cause.
"""

from __future__ import annotations

from tracker.adapters.store.advisories import AdvisoryStore
from tracker.adapters.store.db import Database, open_database
from tracker.adapters.store.delivery import OutboxStore
from tracker.adapters.store.health import HealthReads
from tracker.adapters.store.listing import ListingStore
from tracker.adapters.store.pages import PageReads
from tracker.adapters.store.repos import EventStore, RepoStore
from tracker.adapters.store.revisions import BlobStore, RevisionStore
from tracker.adapters.store.rules import RuleStore
from tracker.adapters.store.schedule import ScheduleStore
from tracker.adapters.store.tokens import TokenStore


class SqlStore:
    """The domain stores over one database; closing it closes the database."""

    def __init__(self, db: Database, *, max_versions: int = 1000) -> None:
        self.db = db
        self.outbox = OutboxStore(db)
        self.advisories = AdvisoryStore(db, self.outbox, max_versions=max_versions)
        self.repos = RepoStore(db)
        self.events = EventStore(db, self.repos, self.advisories)
        self.revisions = RevisionStore(db, self.advisories)
        self.blobs = BlobStore(db)
        self.schedule = ScheduleStore(db)
        self.rules = RuleStore(db)
        self.listing = ListingStore(db)
        self.tokens = TokenStore(db)
        self.health = HealthReads(db)
        self.pages = PageReads(db)

    def close(self) -> None:
        self.db.close()


def open_store(url: str, *, auto_upgrade: bool | None = None, max_versions: int = 1000) -> SqlStore:
    """Open the store; SQLite upgrades itself unless told otherwise, other databases must be current."""
    return SqlStore(open_database(url, auto_upgrade=auto_upgrade), max_versions=max_versions)
