"""Fixtures for advisory tests."""

from __future__ import annotations

import pytest

from tests.advisory.support import linear


@pytest.fixture
def linear5():
    """c1 <- c2 <- c3 <- c4 <- c5, as in NOTES.md §2.6."""
    return linear(5)


from hubstandin.osv_pytest_plugin import osv_standin, osv_standin_server  # noqa: F401
