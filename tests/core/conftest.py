from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.surfaces.cli import main


class RecordingSleep:
    """Stands in for time.sleep in the Hub client: records each wait instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def settings(hub_standin, tmp_path) -> Settings:
    return Settings(database={"url": f"sqlite:///{tmp_path}/tracker.sqlite3"},
                    hub={"endpoint": hub_standin.url, "timeout": 30.0})


@pytest.fixture
def make(hub_standin, sleeps):
    """Build a Tracker over the stand-in: make(settings) or make(settings, **overrides)."""

    def build(settings: Settings, **overrides):
        settings = settings.changed(**overrides)
        hub = HubClient(settings.hub.endpoint, timeout=settings.hub.timeout,
                        max_retries=settings.hub.max_retries,
                        max_wait=settings.hub.max_wait, sleep=sleeps)
        return make_tracker(settings, hub=hub)

    return build


def config_json(**overrides) -> bytes:
    base = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 384, "num_hidden_layers": 6,
            "num_attention_heads": 12, "intermediate_size": 1536, "vocab_size": 30522,
            "max_position_embeddings": 512}
    base.update(overrides)
    return json.dumps(base, indent=2).encode()


@pytest.fixture
def cli(hub_standin, tmp_path, monkeypatch):
    """The real `tracker` command in-process, on a fresh SQLite file, against the stand-in: cli("poll", ...)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracker.toml").write_text("[poll]\nevery = \"2h\"\n")
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/t.sqlite3",
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(main, list(args), env=env, catch_exceptions=False)

    return invoke
