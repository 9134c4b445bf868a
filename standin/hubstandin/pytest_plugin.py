"""Pytest fixtures for the local Hub stand-in.

Register with ``pytest_plugins = ["hubstandin.pytest_plugin"]`` in ``tests/conftest.py``.

Importing this plugin sets, *before* any test module imports ``huggingface_hub``
(which reads them at import time), the environment a hermetic run needs:

* ``HF_HUB_DISABLE_TELEMETRY=1``: no ``/api/agent-harnesses`` call to huggingface.co;
* ``HF_HUB_DISABLE_XET=1``: plain HTTP downloads only;
* ``HF_HOME``: a fresh temporary directory, removed when the process exits, so no real cache or
  token is used (``HF_TOKEN`` is removed for the same reason).

``HF_ENDPOINT`` is left alone (the port is only known per test): pass
``endpoint=hub_standin.url`` to ``HfApi``/``hf_hub_download``, or use ``hf_api``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .hub import HubStandin

if TYPE_CHECKING:
    from huggingface_hub import HfApi

os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_XET"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="standin-hf-home-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)
os.environ.pop("HF_HUB_OFFLINE", None)


@pytest.fixture
def hub_standin(tmp_path: Path) -> Iterator[HubStandin]:
    """A fresh, started Hub stand-in over ``tmp_path/hub``; stopped after the test."""
    hub = HubStandin(tmp_path / "hub").start()
    try:
        yield hub
    finally:
        hub.stop(wait=False)  # the server thread drains in the background (~0.15 s)


@pytest.fixture
def hf_cache_dir(tmp_path: Path) -> Path:
    """A per-test ``cache_dir`` for ``hf_hub_download`` (HF_HOME is shared by the session)."""
    path = tmp_path / "hf-cache"
    path.mkdir()
    return path


@pytest.fixture
def hf_api(hub_standin: HubStandin) -> HfApi:
    """The real ``HfApi`` client pointed at ``hub_standin``."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub_standin.url)
