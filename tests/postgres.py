"""A PostgreSQL server for tests: ``TRACKER_TEST_POSTGRES_URL``, or a throwaway cluster.

The throwaway cluster is made with the ``initdb``/``pg_ctl`` of a Debian
``postgresql`` package (run as the ``postgres`` user when the tests run as
root, since PostgreSQL refuses root). With neither, PostgreSQL tests are
skipped, unless ``TRACKER_TEST_POSTGRES_REQUIRED=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        raise RuntimeError("no initdb/pg_ctl found (install the Debian package postgresql)")
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    workdir = tempfile.mkdtemp(prefix="tracker-pg-")
    datadir = os.path.join(workdir, "data")
    if as_root:
        shutil.chown(workdir, "postgres")
    port = _free_port()
    subprocess.run(prefix + [initdb, "-D", datadir, "-U", "tracker", "--auth=trust", "-E", "UTF8"],
                   check=True, capture_output=True)
    subprocess.run(prefix + [pg_ctl, "-D", datadir, "-o", f"-p {port} -k {workdir} -c listen_addresses=127.0.0.1",
                             "-l", os.path.join(workdir, "log"), "-w", "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://tracker@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(prefix + [pg_ctl, "-D", datadir, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yield a server URL (a maintenance database we may create databases in)."""
    url = os.environ.get("TRACKER_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    try:
        with throwaway_cluster() as url:
            yield url
    except (RuntimeError, subprocess.CalledProcessError, OSError) as exc:
        if os.environ.get("TRACKER_TEST_POSTGRES_REQUIRED") == "1":
            raise
        pytest.skip(f"no PostgreSQL available: {exc}")


def fresh_database(server_url: str) -> str:
    """Create an empty database on the server and return its URL."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"t_{uuid.uuid4().hex[:12]}"
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    for _ in range(20):
        try:
            with engine.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            break
        except Exception:
            time.sleep(0.25)
    engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)
