"""The store: the only package that imports SQLAlchemy."""

from tracker.adapters.store.db import open_store, schema_status, upgrade_schema
from tracker.adapters.store.store import SqlStore

__all__ = ["SqlStore", "open_store", "schema_status", "upgrade_schema"]
