"""OSV tests use the OSV stand-in fixtures."""

from hubstandin.osv_pytest_plugin import osv_standin, osv_standin_server  # noqa: F401
