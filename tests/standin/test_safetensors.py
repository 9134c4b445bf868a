"""Weight headers are read with Range requests, never by downloading weights."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path

import httpx2
import numpy as np
import pytest
from hubstandin import HubStandin
from huggingface_hub import HfApi
from safetensors.numpy import save

from .helpers import big_header_safetensors, tiny_weights


def test_single_file_metadata_uses_one_range_get(hub_standin: HubStandin, hf_api: HfApi) -> None:
    hub_standin.create_repo("acme/single")
    hub_standin.commit("acme/single", {"model.safetensors": tiny_weights()})
    meta = hf_api.get_safetensors_metadata("acme/single")
    assert meta.sharded is False
    assert meta.parameter_count == {"F32": 16}
    tensor = meta.files_metadata["model.safetensors"].tensors["w"]
    assert (tensor.dtype, tensor.shape) == ("F32", [4, 4])
    ranged = [r for r in hub_standin.requests if r.range]
    assert [(r.host.split(":")[0], r.status, r.range) for r in ranged] == [
        ("127.0.0.1", 302, "bytes=0-100000"),
        ("localhost", 206, "bytes=0-100000"),
    ]


def test_sharded_metadata_with_a_header_over_100kb(hub_standin: HubStandin, hf_api: HfApi) -> None:
    big = big_header_safetensors()
    small = save({"lm_head": np.zeros((2, 3), dtype=np.float32)})
    index = {
        "metadata": {"total_size": 0},
        "weight_map": {
            **{
                k: "model-00001-of-00002.safetensors"
                for k in json.loads(big[8 : 8 + struct.unpack("<Q", big[:8])[0]])
            },
            "lm_head": "model-00002-of-00002.safetensors",
        },
    }
    hub_standin.create_repo("acme/sharded")
    hub_standin.commit(
        "acme/sharded",
        {
            "model.safetensors.index.json": json.dumps(index),
            "model-00001-of-00002.safetensors": big,
            "model-00002-of-00002.safetensors": small,
        },
    )
    meta = hf_api.get_safetensors_metadata("acme/sharded")
    assert meta.sharded is True
    assert meta.parameter_count == {"F16": 1500, "F32": 6}
    header_len = struct.unpack("<Q", big[:8])[0]
    big_ranges = sorted(
        r.range for r in hub_standin.requests if r.range and r.status == 206 and r.bytes_out > 100_000
    )
    assert big_ranges == ["bytes=0-100000", f"bytes=8-{header_len + 7}"]
    cdn = [r for r in hub_standin.requests if r.path.startswith("/cdn-lfs/")]
    assert len(cdn) == 3 and all(r.range for r in cdn)  # headers only, via Range, never a whole shard

    server_side = hf_api.get_sharded_safetensors_metadata("acme/sharded")
    assert server_side.parameter_count == meta.parameter_count
    assert server_side.weight_map == meta.weight_map and server_side.metadata == {"total_size": 0}


@pytest.mark.slow  # hashes 1 GiB of zeros (~2 s on an idle core)
def test_sparse_gigabyte_file_header_read_with_under_1mb_served(
    hub_standin: HubStandin, hf_api: HfApi, tmp_path: Path
) -> None:
    header = json.dumps(
        {"w": {"dtype": "BF16", "shape": [1024, 1024, 512], "data_offsets": [0, 2**30]}}
    ).encode()
    header += b" " * (-len(header) % 8)
    weights = tmp_path / "model.safetensors"
    with open(weights, "wb") as fh:
        fh.write(struct.pack("<Q", len(header)) + header)
    os.truncate(weights, 8 + len(header) + 2**30)  # sparse: no gigabyte written or held in memory
    hub_standin.create_repo("acme/huge")
    sha = hub_standin.commit("acme/huge", {"model.safetensors": weights})
    hub_standin.clear_log()
    meta = hf_api.get_safetensors_metadata("acme/huge", revision=sha)
    assert meta.parameter_count == {"BF16": 2**29}
    [entry] = hf_api.list_repo_tree("acme/huge", revision=sha)
    assert entry.size == weights.stat().st_size  # type: ignore[union-attr]
    assert hub_standin.bytes_served() < 1_000_000


def test_client_hanging_up_stops_the_stream(hub_standin: HubStandin, tmp_path: Path) -> None:
    weights = tmp_path / "w.bin"
    weights.write_bytes(b"\x01")
    os.truncate(weights, 64 * 2**20)
    hub_standin.create_repo("acme/stream")
    hub_standin.commit("acme/stream", {"w.bin": weights})
    url = f"{hub_standin.url}/acme/stream/resolve/main/w.bin"
    with httpx2.Client(follow_redirects=True) as client, client.stream("GET", url) as response:
        first = next(response.iter_raw(2**16))
    assert first[:1] == b"\x01"
    deadline = time.monotonic() + 60
    while hub_standin.requests[-1].bytes_out < 64 * 2**20 and time.monotonic() < deadline:
        time.sleep(0.05)
        last = hub_standin.requests[-1].bytes_out
        time.sleep(0.05)
        if hub_standin.requests[-1].bytes_out == last:
            break
    assert hub_standin.requests[-1].bytes_out < 64 * 2**20
