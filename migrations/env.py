"""Alembic environment: the URL comes from the tracker's settings, never from an ini file.

``tracker.adapters.store.db.upgrade_schema`` passes an open connection in
``config.attributes["connection"]``; the ``alembic`` command line works too
and reads ``TRACKER_DATABASE_URL`` / ``config/tracker.toml``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from tracker.adapters.store.tables import metadata

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True,
                      transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from tracker.adapters.settings import load_settings

    engine = create_engine(load_settings().database_url)
    with engine.connect() as conn:
        _run(conn)
