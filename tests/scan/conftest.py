"""The test codebase (tests/scan/fixtures/codebase) and the Hub stand-in histories its pins point into.

Histories on the stand-in:

- ``acme/chat-model``: r0 initial; r1 fixes eos_token_id (an ``update`` advisory: r0 lacks it);
  r2 edits the README; r3 adds a pickle (a ``risk``); r4 edits the README; r5 removes the pickle
  (an ``update``: the removal, and the risk is fixed). The same history as tests/core/test_advisories.py.
- ``acme/encoder``: e0 (tagged ``v1.0``), then e1 edits the README (no advisory).
- ``acme/risky``: k0 with a clean pickle, then k1 whose pickle imports ``os.system`` (a ``risk`` at the head).
- ``acme/missing`` is referenced but does not exist.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from hubstandin import HubStandin

from tests.core.conftest import config_json
from tests.core.test_advisories import README, torch_zip
from tracker.adapters.settings import Settings

FIXTURE = Path(__file__).parent / "fixtures" / "codebase"

CHAT, ENCODER, RISKY = "acme/chat-model", "acme/encoder", "acme/risky"
SAFE_PICKLE = torch_zip(b"\0" * 4096)
EVIL_PICKLE = torch_zip(b"\0" * 4096, ("os", "system"))


@dataclass
class Histories:
    chat: list[str]  # r0..r5
    encoder: list[str]  # e0, e1
    risky: list[str]  # k0, k1

    @property
    def placeholders(self) -> dict[str, str]:
        names = {f"@CHAT_R{i}@": sha for i, sha in enumerate(self.chat)}
        names.update({f"@ENC_R{i}@": sha for i, sha in enumerate(self.encoder)})
        names.update({f"@RISKY_R{i}@": sha for i, sha in enumerate(self.risky)})
        return names


@pytest.fixture
def histories(hub_standin) -> Histories:
    return make_histories(hub_standin)


def make_histories(hub: HubStandin) -> Histories:
    """The three histories above, committed to ``hub``."""
    hub.create_repo(CHAT)
    chat = [hub.commit(CHAT, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 128001}',
                              "README.md": README}, message="initial")]
    chat.append(hub.commit(CHAT, {"generation_config.json": b'{"eos_token_id": [128001, 128009]}'},
                           message="fix eos"))
    chat.append(hub.commit(CHAT, {"README.md": README + "\nBetter words.\n"}, message="typo"))
    chat.append(hub.commit(CHAT, {"pytorch_model.bin": torch_zip(b"\0" * 4096)}, message="add pt weights"))
    chat.append(hub.commit(CHAT, {"README.md": README + "\nEven better words.\n"}, message="docs"))
    chat.append(hub.commit(CHAT, {}, delete=["pytorch_model.bin"], message="remove pickle"))

    hub.create_repo(ENCODER)
    encoder = [hub.commit(ENCODER, {"config.json": config_json(), "README.md": README}, message="initial")]
    encoder.append(hub.commit(ENCODER, {"README.md": README + "\nUsage.\n"}, message="usage"))
    hub.tag(ENCODER, "v1.0", encoder[0])

    hub.create_repo(RISKY)
    risky = [hub.commit(RISKY, {"config.json": config_json(), "pytorch_model.bin": SAFE_PICKLE}, message="initial")]
    risky.append(hub.commit(RISKY, {"pytorch_model.bin": EVIL_PICKLE}, message="new weights"))
    return Histories(chat=chat, encoder=encoder, risky=risky)


def fill(source: Path, target: Path, placeholders: dict[str, str]) -> Path:
    """Copy a fixture tree, writing each ``@NAME@`` as the sha it stands for."""
    shutil.copytree(source, target)
    for path in target.rglob("*"):
        if path.is_file():
            text = path.read_text("utf-8")
            for name, sha in placeholders.items():
                text = text.replace(name, sha)
            path.write_text(text, "utf-8")
    return target


@pytest.fixture
def codebase(histories, tmp_path) -> Path:
    return make_codebase(histories, tmp_path / "codebase")


def make_codebase(histories: Histories, target: Path) -> Path:
    """The fixture codebase with its pins filled in at ``target``, plus what a scan must never read."""
    root = fill(FIXTURE, target, histories.placeholders)
    never = 'from transformers import AutoModel\nAutoModel.from_pretrained("acme/never-read")\n'
    (root / ".gitignore").write_text("build/\n*.generated.py\n!keep.generated.py\n")
    for relative in ("build/old.py", "src/cache.generated.py", ".venv/lib/site.py", "envs/py311/lib/mod.py",
                     "node_modules/pkg/index.py", ".git/hooks/hook.py", "src/__pycache__/app.py"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(never)
    (root / "envs/py311/pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "node_modules/pkg/config.json").write_text('{"model": "acme/never-read"}')
    (root / "configs/blob.json").write_bytes(b'{"model": "acme/never-read"}\0\0\0')
    (root / "src/keep.generated.py").write_text('from transformers import AutoModel\n'
                                                'AutoModel.from_pretrained("acme/encoder", revision="v1.0")\n')
    return root


@pytest.fixture
def scan_settings(hub_standin, tmp_path) -> Settings:
    """Settings for the user's tracker: its store is an SQLite file that does not exist yet."""
    return Settings(database={"url": f"sqlite:///{tmp_path}/user.sqlite3"},
                    hub={"endpoint": hub_standin.url, "timeout": 30.0})


@pytest.fixture
def cli_env(hub_standin, tmp_path) -> dict[str, str]:
    """The environment of a `tracker scan` run against the stand-in, with no config file and no store yet."""
    config = tmp_path / "empty.toml"
    config.write_text("")
    return {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/user.sqlite3",
            "TRACKER_CONFIG": str(config)}
