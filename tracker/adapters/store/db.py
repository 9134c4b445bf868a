"""The database: its engine, transactions, and schema migrations.

SQLite (the embedded default) is created or upgraded on first use, so a new
user needs no extra step. PostgreSQL is migrated explicitly with
``tracker init``; opening a store on a schema that is behind raises
``SchemaBehind`` saying what to run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, literal, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tracker.core.errors import (
    SchemaBehind,
    StoreBusy,
    StoreConflict,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
)

DEFAULT_SQLITE_FOLDER = Path("data")  # created on first use; any other folder must exist

# Driver messages -> the tracker's errors, with what to do about them. First match wins.
_ERROR_TABLE: tuple[tuple[tuple[str, ...], type[StoreError], str], ...] = (
    (("unable to open database file",), StoreUnavailable,
     "cannot open the database at {where}: the folder does not exist or is not writable"),
    (("database is locked", "database table is locked"), StoreBusy,
     "the database at {where} is locked by another process; try again when it is done"),
    (("readonly database", "read-only", "read only"), StoreReadOnly,
     "the database at {where} is read-only: check the file's and its folder's permissions"),
    (("file is not a database", "malformed", "disk image", "not a database"), StoreCorrupt,
     "the file at {where} is not a tracker database or is damaged: restore it from a backup or move it away"),
    (("connection refused", "could not connect", "could not translate host name", "name or service not known",
      "timeout expired", "no such host", "connection to server"), StoreUnavailable,
     "cannot connect to the database at {where}: is the server running and reachable?"),
    (("password authentication failed", "role ", 'database "'), StoreUnavailable,
     "the database at {where} refused the connection: check the URL's user, password and database name"),
)


def database_error(exc: BaseException, where: str) -> StoreError:
    """The tracker's error for a driver error, with a sentence a user can act on.

    Its ``public`` message leaves out ``where`` (the URL's user, host and port) and the driver's own
    words (which may name them): the API shows that one, and logs the whole.
    """
    if isinstance(exc, IntegrityError):
        return StoreConflict(f"the database at {where} refused a write: {_first_line(exc)}",
                             public="the database refused a conflicting write: try again")
    text = str(getattr(exc, "orig", None) or exc).lower()
    for needles, kind, message in _ERROR_TABLE:
        if any(n in text for n in needles):
            return kind(message.format(where=where), public=message.replace(" at {where}", ""))
    return StoreError(f"database error at {where}: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.database or ":memory:"
    return parsed.render_as_string(hide_password=True)


def migrations_dir() -> Path:
    """The Alembic scripts: ``migrations/`` in a source tree, ``tracker/migrations`` once installed."""
    installed = Path(__file__).resolve().parents[2] / "migrations"
    source = Path(__file__).resolve().parents[3] / "migrations"
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
        if database and database.startswith("file:"):  # an SQLite URI (?mode=ro&uri=true)
            database = database.removeprefix("file:").split("?", 1)[0]
        if database and database != ":memory:":
            folder = Path(database).parent
            if folder == DEFAULT_SQLITE_FOLDER:
                folder.mkdir(exist_ok=True)
            elif not folder.is_dir():
                raise StoreUnavailable(f"cannot open the database at {database}: the folder {folder} does not exist")
        engine = create_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
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
    """Migrate to the newest schema: each migration in a transaction of its own (a data migration that
    converts in batches commits as it goes, and resumes where it stopped when run again)."""
    cfg = _alembic_config()
    with engine.connect() as conn:
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


class Database:
    """One database: its engine and the transactions every store runs in.

    Driver errors raised inside :meth:`transaction` or :meth:`connect` come out as the tracker's
    ``StoreError`` family, with a sentence a user can act on.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    def describe(self) -> str:
        """Where the database is, as a user may be shown it (no password)."""
        return describe_url(self.engine.url.render_as_string(hide_password=False))

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction, committed when the block ends, rolled back if it raises."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise database_error(exc, self.describe()) from exc

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reads only (nothing is committed)."""
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise database_error(exc, self.describe()) from exc

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in autocommit for reads only: no BEGIN and no COMMIT, so on PostgreSQL each
        statement is one round trip and sees what was committed when it started, as it does in the
        READ COMMITTED transactions of :meth:`transaction` (callers must not rely on one snapshot
        across statements; SQLite's driver begins no transaction for a SELECT either way)."""
        try:
            with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise database_error(exc, self.describe()) from exc

    def ping(self) -> None:
        """One round trip: raises the tracker's error when the database cannot answer."""
        with self.transaction() as conn:
            conn.execute(select(literal(1)))

    def close(self) -> None:
        self.engine.dispose()


def open_database(url: str, *, auto_upgrade: bool | None = None) -> Database:
    """Open the database; SQLite upgrades itself unless told otherwise, other databases must be current."""
    engine = make_engine(url)
    if auto_upgrade is None:
        auto_upgrade = engine.url.get_backend_name() == "sqlite"
    try:
        check_schema(engine, auto_upgrade=auto_upgrade)
    except StoreError:
        engine.dispose()
        raise
    except Exception as exc:  # every driver error becomes one line a user can act on
        engine.dispose()
        if isinstance(exc, (SQLAlchemyError, OSError)) or type(exc).__module__.startswith(("sqlite3", "psycopg")):
            raise database_error(exc, describe_url(url)) from exc
        raise
    return Database(engine)
