"""Only what pyproject.toml cannot say: the top-level migrations/ ships inside the package as
``tracker.migrations``, so a plain (non-editable) install and the container image find it."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["tracker", "tracker.*"]), "tracker.migrations", "tracker.migrations.versions"],
    package_dir={"tracker.migrations": "migrations"},
)
