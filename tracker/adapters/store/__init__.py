"""The store: the only package that imports SQLAlchemy."""

from tracker.adapters.store.db import Database, open_database, schema_status, upgrade_schema
from tracker.adapters.store.store import SqlStore, open_store

__all__ = ["Database", "SqlStore", "open_database", "open_store", "schema_status", "upgrade_schema"]
