"""What polling costs upstream: request counts and bytes, from the stand-in's own log."""

from __future__ import annotations

import json
import os
import struct

from tests.core.conftest import config_json
from tracker.core.model import RepoId

GIB = 1024**3


def sparse_safetensors(path, n_params: int) -> int:
    """A real safetensors header followed by a sparse hole: a >1 GB file that costs no disk."""
    header = json.dumps({
        "__metadata__": {"format": "pt"},
        "embed.weight": {"dtype": "F32", "shape": [n_params], "data_offsets": [0, 4 * n_params]},
    }).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    size = 8 + len(header) + 4 * n_params
    os.truncate(path, size)
    return size


def test_reading_a_repo_with_over_1_gb_of_weights_transfers_under_1_mb(hub_standin, settings, make, tmp_path):
    repo = RepoId("acme/big-model")
    hub_standin.create_repo(repo)
    hub_standin.commit(repo, {"config.json": config_json()})
    tracker = make(settings)
    tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()

    shard1 = tmp_path / "model-00001-of-00002.safetensors"
    shard2 = tmp_path / "model-00002-of-00002.safetensors"
    total = sparse_safetensors(shard1, 200_000_000) + sparse_safetensors(shard2, 100_000_000)
    assert total > 1.1 * GIB
    index = {"metadata": {"total_size": total},
             "weight_map": {"embed.weight": "model-00001-of-00002.safetensors"}}
    sha = hub_standin.commit(repo, {shard1.name: shard1, shard2.name: shard2,
                                    "model.safetensors.index.json": json.dumps(index).encode()})
    hub_standin.clear_log()
    (result,) = tracker.poll()
    assert (result.status, result.processed) == ("new", 1)
    served = hub_standin.bytes_served()
    assert served < 1_000_000, served
    row = tracker.store.revisions.get(tracker.store.repos.get(repo).pk, sha)
    added = {a["path"]: a["size"] for a in row.diff.files["added"]}
    assert added[shard1.name] + added[shard2.name] == total
    # No request ever asked for a whole weight file.
    weight_gets = [r for r in hub_standin.requests if r.method == "GET" and r.url_path.endswith(".safetensors")]
    assert all(r.range for r in weight_gets)


def test_unchanged_repos_of_one_owner_cost_one_listing_together(hub_standin, settings, make):
    tracker = make(settings)
    for n in range(5):
        repo = RepoId(f"acme/model-{n}")
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json(num_hidden_layers=n + 1)})
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    hub_standin.clear_log()
    results = tracker.poll()
    assert [r.status for r in results] == ["unchanged"] * 5
    assert [(r.method, r.url_path) for r in hub_standin.requests] == [
        ("GET", "/api/models?author=acme&expand=sha&expand=lastModified&expand=gated")
    ]


def test_one_watched_repo_costs_one_head(hub_standin, settings, make):
    tracker = make(settings)
    repo = RepoId("acme/model")
    hub_standin.create_repo(repo)
    hub_standin.commit(repo, {"config.json": config_json()})
    tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()
    hub_standin.clear_log()
    assert [r.status for r in tracker.poll()] == ["unchanged"]
    assert [(r.method, r.url_path) for r in hub_standin.requests] == [
        ("HEAD", "/acme/model/resolve/main/config.json")]


def test_repos_of_two_owners_cost_one_page_of_the_change_listing(hub_standin, settings, make):
    tracker = make(settings)
    for owner in ("acme", "other"):
        repo = RepoId(f"{owner}/model")
        hub_standin.create_repo(repo)
        hub_standin.commit(repo, {"config.json": config_json()})
        tracker.store.repos.add(repo, now=tracker.clock())
    tracker.poll()  # reads both, and the listing's first watermark
    hub_standin.clear_log()
    assert [r.status for r in tracker.poll()] == ["unchanged"] * 2
    assert [(r.method, r.url_path) for r in hub_standin.requests] == [
        ("GET", "/api/models?sort=lastModified&direction=-1&expand=sha&expand=lastModified&expand=gated")]
