"""A real Hugging Face cache, filled with ``hf_hub_download`` from the Hub stand-in, and a user store watching one repo.

On the stand-in:

- ``acme/chat-model`` (watched): r0 initial; r1 fixes eos_token_id (an ``update``, high: r0 lacks
  it); r2 edits the README. The cache holds r0 (downloaded by its sha: no ref points at it) and
  r2 (downloaded as ``main``).
- ``acme/risky`` (not watched): k0 with a clean pickle, k1 whose pickle imports ``os.system`` (a
  critical ``risk`` at the head). The cache holds k1, as ``main``.

Beside them the cache holds what the audit skips: a dataset and a canonical model without an
owner (both laid out by hand, as huggingface_hub lays them out). huggingface_hub reads
``HF_ENDPOINT`` and ``HF_HUB_CACHE`` at import, so the downloads name the stand-in and the cache
folder explicitly; the audit itself finds the cache through ``HF_HUB_CACHE`` in its environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hubstandin.hub import HubStandin
from huggingface_hub import hf_hub_download

from tests.core.conftest import config_json
from tests.core.test_advisories import torch_zip
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.model import RepoId

CHAT, RISKY = RepoId("acme/chat-model"), RepoId("acme/risky")
CARD = "---\nlicense: apache-2.0\npipeline_tag: feature-extraction\nlibrary_name: transformers\n---\n# Chat model\n"
DATASET_SHA, CANONICAL_SHA = "d" * 40, "c" * 40


@dataclass
class Machine:
    hub: HubStandin
    cache: Path
    env: dict[str, str]
    chat: list[str]
    risky: list[str]
    sizes: dict[str, int]  # bytes downloaded per cached revision
    params: dict[str, int] = field(default_factory=dict)  # the estimator's count per revision, from the store


def lay_out_by_hand(cache: Path, folder: str, sha: str, name: str, data: bytes) -> None:
    """A cache entry as huggingface_hub writes one: a blob, a snapshot linking to it, refs/main."""
    blob = cache / folder / "blobs" / ("0" * 40)
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    snapshot = cache / folder / "snapshots" / sha
    snapshot.mkdir(parents=True)
    (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    (cache / folder / "refs").mkdir()
    (cache / folder / "refs" / "main").write_text(sha)


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machine]:
    work = tmp_path_factory.mktemp("audit")
    hub = HubStandin(work / "hub").start()
    try:
        hub.create_repo(CHAT)
        chat = [hub.commit(CHAT, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 128001}',
                                  "README.md": CARD.encode()}, message="initial")]
        chat.append(hub.commit(CHAT, {"generation_config.json": b'{"eos_token_id": [128001, 128009]}'},
                               message="fix eos"))
        chat.append(hub.commit(CHAT, {"README.md": (CARD + "\nBetter words.\n").encode()}, message="typo"))
        hub.create_repo(RISKY)
        risky = [hub.commit(RISKY, {"config.json": config_json(), "pytorch_model.bin": torch_zip(b"\0" * 4096)},
                            message="initial")]
        risky.append(hub.commit(RISKY, {"pytorch_model.bin": torch_zip(b"\0" * 4096, ("os", "system"))},
                                message="new weights"))

        cache = work / "hf-cache"
        sizes: dict[str, int] = {}

        def download(repo: str, revision: str, sha: str, *names: str) -> None:
            for name in names:
                path = hf_hub_download(repo, name, revision=revision, cache_dir=cache, endpoint=hub.url)
                sizes[sha] = sizes.get(sha, 0) + Path(path).stat().st_size

        download(CHAT, chat[0], chat[0], "config.json", "generation_config.json")
        download(CHAT, "main", chat[2], "config.json", "generation_config.json", "README.md")
        download(RISKY, "main", risky[1], "config.json", "pytorch_model.bin")
        lay_out_by_hand(cache, "datasets--acme--data", DATASET_SHA, "train.csv", b"a,b\n1,2\n")
        lay_out_by_hand(cache, "models--gpt2", CANONICAL_SHA, "config.json", b"{}")

        database = f"sqlite:///{work}/user.sqlite3"
        settings = Settings(database={"url": database}, hub={"endpoint": hub.url, "timeout": 30.0})
        user = make_tracker(settings, auto_upgrade=True)
        user.store.repos.add(CHAT, now=user.clock())
        user.poll([CHAT], backfill=5)
        row = user.store.repos.get(CHAT)
        assert row is not None and row.last_seen_sha == chat[2]
        params, in_force = {}, None  # the estimate runs where the config changes; later revisions keep it
        for sha in chat:
            revision = user.store.revisions.get(row.pk, sha)
            assert revision is not None and revision.status == "done", sha
            if revision.estimate and revision.estimate.params:
                in_force = revision.estimate.params
            assert in_force is not None
            params[sha] = in_force
        user.store.close()

        config = work / "empty.toml"
        config.write_text("")
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(cache), "TRACKER_DATABASE_URL": database,
               "TRACKER_CONFIG": str(config)}
        yield Machine(hub=hub, cache=cache, env=env, chat=chat, risky=risky, sizes=sizes, params=params)
    finally:
        hub.stop(wait=False)
