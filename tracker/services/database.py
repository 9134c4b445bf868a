"""The database itself: its schema brought to the newest migration (`tracker init`), and where it is, said
without its password."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Migrated", "describe_database", "migrate"]


@dataclass(frozen=True)
class Migrated:
    """Where the database is (password hidden), and its schema before and after."""

    where: str
    before: str | None  # None: empty
    head: str

    @property
    def changed(self) -> bool:
        return self.before != self.head


def migrate(database_url: str) -> Migrated:
    """Create or migrate the schema of the database at ``database_url`` to the newest migration."""
    from tracker.adapters.store.db import make_engine, schema_status, upgrade_schema

    engine = make_engine(database_url)
    before, head = schema_status(engine)
    upgrade_schema(engine)
    return Migrated(where=engine.url.render_as_string(hide_password=True), before=before, head=head)


def describe_database(database_url: str) -> str:
    """The database's URL as a log line may show it (no password)."""
    from tracker.adapters.store.db import describe_url

    return describe_url(database_url)
