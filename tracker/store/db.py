"""Engines and schema migrations.

SQLite (the embedded default) is created or upgraded on first use, so a new
user needs no extra step. PostgreSQL is migrated explicitly with
``tracker init``; opening a store on a schema that is behind raises
``SchemaBehind`` saying what to run.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from tracker.errors import SchemaBehind, StoreError


def migrations_dir() -> Path:
    """The Alembic scripts: ``migrations/`` in a source tree, ``tracker/migrations`` once installed."""
    installed = Path(__file__).resolve().parents[1] / "migrations"
    source = Path(__file__).resolve().parents[2] / "migrations"
    for path in (installed, source):
        if (path / "env.py").exists():
            return path
    raise StoreError(f"the tracker's migrations are missing (looked in {installed} and {source}): reinstall it")


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    return cfg


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:
            cursor = dbapi_connection.cursor()
            # WAL lets the API read while a poll writes; foreign keys are off by default in SQLite.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def schema_status(engine: Engine) -> tuple[str | None, str]:
    """(revision the database is at, revision this code needs)."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    assert head is not None
    return current, head


def upgrade_schema(engine: Engine) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def check_schema(engine: Engine, *, auto_upgrade: bool) -> None:
    current, head = schema_status(engine)
    if current == head:
        return
    if auto_upgrade:
        upgrade_schema(engine)
        return
    where = engine.url.render_as_string(hide_password=True)
    raise SchemaBehind(
        f"the database schema at {where} is at {current or 'nothing'}, this tracker needs {head}: "
        "run `tracker init` to migrate it"
    )


def open_store(url: str, *, auto_upgrade: bool | None = None):
    """Open the store; SQLite upgrades itself unless told otherwise, other databases must be current."""
    from tracker.store.store import SqlStore

    engine = make_engine(url)
    if auto_upgrade is None:
        auto_upgrade = engine.url.get_backend_name() == "sqlite"
    check_schema(engine, auto_upgrade=auto_upgrade)
    return SqlStore(engine)
