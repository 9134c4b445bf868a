"""Shared builders for the stand-in tests: small real safetensors files and a demo repo."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
from hubstandin import HubStandin
from safetensors.numpy import save


def git_blob_sha1(data: bytes) -> str:
    """What ``git hash-object`` prints: the Hub's ``oid``/``ETag`` for a regular file."""
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


def pointer(data: bytes) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{hashlib.sha256(data).hexdigest()}\n"
        f"size {len(data)}\n"
    ).encode()


@dataclass
class Demo:
    """``acme/tiny``: commit ``first`` (config, LFS weights, sub/extra.txt), then ``second`` (config)."""

    first: str
    second: str
    config1: bytes
    config2: bytes
    weights: bytes


def tiny_weights() -> bytes:
    return save({"w": np.arange(16, dtype=np.float32).reshape(4, 4)}, metadata={"format": "pt"})


def make_demo(hub: HubStandin, repo_id: str = "acme/tiny") -> Demo:
    config1 = json.dumps({"hidden_size": 4}).encode()
    config2 = json.dumps({"hidden_size": 8}).encode()
    weights = tiny_weights()
    hub.create_repo(repo_id)
    first = hub.commit(
        repo_id,
        {"config.json": config1, "model.safetensors": weights, "sub/extra.txt": "extra\n"},
        message="Initial commit\n\nWith a body.",
    )
    second = hub.commit(repo_id, {"config.json": config2}, message="Bump hidden size")
    return Demo(first, second, config1, config2, weights)


def big_header_safetensors() -> bytes:
    """A safetensors file whose JSON header is over 100 kB (forces the client's 2nd Range GET)."""
    tensors = {
        f"layer.{i}.weight_with_a_rather_long_name_to_fill_the_header": np.zeros((1,), dtype=np.float16)
        for i in range(1500)
    }
    data = save(tensors)
    assert int.from_bytes(data[:8], "little") > 100_000
    return data
