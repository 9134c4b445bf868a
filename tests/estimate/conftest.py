from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.shared import CONFIGS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
REALDATA = CONFIGS


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text("utf-8"))


def load_real(name: str) -> dict:
    path = REALDATA / name
    if not path.exists():
        pytest.skip(f"real config {name} not present at {REALDATA}")
    return json.loads(path.read_text("utf-8"))


@pytest.fixture
def e5_config() -> dict:
    return load_fixture("intfloat__multilingual-e5-large.json")
