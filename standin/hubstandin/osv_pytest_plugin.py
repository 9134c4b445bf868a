"""Pytest fixture ``osv_standin``: the OSV API stand-in serving ``shared/osv/pypi``.

Register with ``pytest_plugins = ["hubstandin.osv_pytest_plugin"]`` in the
top-level ``tests/conftest.py`` (or import the fixtures into a conftest). One
server runs per session (loading the 68 records and starting uvicorn once keeps
tests fast); each test gets it reset: no pending faults, an empty request log,
default page sizes. Tests are skipped when the records directory is missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hubstandin.osv import OsvStandin, default_records_dir


@pytest.fixture(scope="session")
def osv_standin_server() -> Iterator[OsvStandin]:
    records = default_records_dir()
    if not records.is_dir():
        pytest.skip(f"OSV fixture records not found at {records} (set TRACKER_OSV_RECORDS)")
    with OsvStandin(records) as server:
        yield server


@pytest.fixture
def osv_standin(osv_standin_server: OsvStandin) -> Iterator[OsvStandin]:
    """The running stand-in, reset for this test (``.url``, ``.fail_next``, ``.requests``, ``.set_page_size``)."""
    osv_standin_server.reset()
    yield osv_standin_server
    osv_standin_server.reset()
