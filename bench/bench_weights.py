"""What measuring a changed checkpoint's weights spends: a 7B and a 70B safetensors checkpoint, re-saved,
converted and fine-tuned, against the budget of ``[limits] weight_compare_requests`` and ``weight_compare_bytes``.

Run: python bench/bench_weights.py [--requests 64] [--bytes 16777216]

The headers are as on the Hub: meta-llama/Llama-2-7b-hf (291 F16 tensors in 2 shards, the first 9.98 GB) and
meta-llama/Meta-Llama-3-70B (723 BF16 tensors in 30 shards of about 5 GB), names, shapes, dtypes and shard
splits as ``save_pretrained`` writes them. The data is synthetic (no 140 GB file is written): each element's
value is a function of its tensor and index, so every range read returns what that file would hold. The
weights analyser runs as a poll runs it (``tracker.core.findings.weights.analyse``), through sources that
count each range request and its bytes per side. Printed per case: the finding, the requests and bytes per
side against the budget, how many tensors and what share of their elements were compared, and the time the
analyser took (planning, decoding, comparing; making the synthetic bytes left out).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tracker.core.findings import weight_delta, weights
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import CommitSha, FileEntry, RepoId, RevisionChange, Snapshot

ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def llama(hidden: int, layers: int, kv_dim: int, ffn: int, vocab: int) -> dict[str, list[int]]:
    """Llama's tensors as transformers names them, in the order save_pretrained shards them."""
    out: dict[str, list[int]] = {"model.embed_tokens.weight": [vocab, hidden]}
    for i in range(layers):
        p = f"model.layers.{i}."
        out |= {p + "self_attn.q_proj.weight": [hidden, hidden], p + "self_attn.k_proj.weight": [kv_dim, hidden],
                p + "self_attn.v_proj.weight": [kv_dim, hidden], p + "self_attn.o_proj.weight": [hidden, hidden],
                p + "mlp.gate_proj.weight": [ffn, hidden], p + "mlp.up_proj.weight": [ffn, hidden],
                p + "mlp.down_proj.weight": [hidden, ffn], p + "input_layernorm.weight": [hidden],
                p + "post_attention_layernorm.weight": [hidden]}
    return out | {"model.norm.weight": [hidden], "lm_head.weight": [vocab, hidden]}


def shard(tensors: Mapping[str, list[int]], dtype: str, max_shard: int, stem: str = "model") -> dict[str, dict[str, Any]]:
    """``{file: header}``: tensors packed in order into shards of at most ``max_shard`` bytes."""
    groups: list[list[str]] = [[]]
    size = 0
    for name, shape in tensors.items():
        nbytes = int(np.prod(shape)) * ITEMSIZE[dtype]
        if groups[-1] and size + nbytes > max_shard:
            groups.append([])
            size = 0
        groups[-1].append(name)
        size += nbytes
    files = {}
    for i, names in enumerate(groups, 1):
        header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name in sorted(names):  # safetensors writes each file's data sorted by name
            nbytes = int(np.prod(tensors[name])) * ITEMSIZE[dtype]
            header[name] = {"dtype": dtype, "shape": tensors[name], "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
        name = f"{stem}-{i:05d}-of-{len(groups):05d}.safetensors" if len(groups) > 1 else f"{stem}.safetensors"
        files[name] = header
    return files


def _size(header: Mapping[str, Any]) -> int:
    raw = json.dumps(header).encode()
    return 8 + len(raw) + max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")


def values(name: str, first: int, count: int, tuned: float) -> np.ndarray:
    """The synthetic weights of ``name`` at elements ``first..first+count`` (a fine-tune adds ``tuned`` × noise)."""
    seed = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")
    index = np.arange(first, first + count, dtype=np.float64)
    out = 0.02 * np.sin(index * 0.7548776662 + seed) * np.cos(index * 0.0001 + seed % 7)
    if tuned:
        out *= 1 + tuned * np.sin(index * 1.3247179572 + seed + 1)
    return out


def encode(array: np.ndarray, dtype: str) -> bytes:
    if dtype == "F32":
        return array.astype("<f4").tobytes()
    if dtype == "F16":
        return array.astype("<f2").tobytes()
    bits = array.astype("<f4").view("<u4")
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2").tobytes()  # round to nearest even


class BenchSources:
    """Headers as given; tensor bytes synthesised per range; every range request counted per side."""

    def __init__(self, headers: Mapping[str, Mapping[str, Any]], tuned: Mapping[str, float],
                 budget: tuple[int, int]) -> None:
        self.headers, self.tuned, self.budget = headers, tuned, budget
        self.spent = {"old": [0, 0], "new": [0, 0]}
        self.synthesis = 0.0  # seconds spent making the synthetic bytes, left out of the time printed

    def safetensors_header(self, side: str, path: str) -> Mapping[str, Any] | None:
        return self.headers[side].get(path)

    def weight_budget(self) -> tuple[int, int]:
        return self.budget

    def read_ranges(self, side: str, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        began = time.perf_counter()
        header = self.headers[side][path]
        placed = weight_delta.placements(header, path, _size(header))
        assert placed is not None
        out = []
        for start, length in ranges:
            self.spent[side][0] += 1
            self.spent[side][1] += length
            out.append(self._bytes(placed, start, length, self.tuned[side]))
        self.synthesis += time.perf_counter() - began
        return out

    @staticmethod
    def _bytes(placed: Mapping[str, weight_delta.Placed], start: int, length: int, tuned: float) -> bytes:
        buf = bytearray(length)
        for name, p in placed.items():
            lo, hi = max(start, p.start), min(start + length, p.start + p.count * p.itemsize)
            if lo >= hi:
                continue
            first, last = (lo - p.start) // p.itemsize, (hi - p.start + p.itemsize - 1) // p.itemsize
            raw = encode(values(name, first, last - first, tuned), p.dtype)
            skip = lo - (p.start + first * p.itemsize)
            buf[lo - start:hi - start] = raw[skip:skip + hi - lo]
        return bytes(buf)

    def text(self, side: str, path: str) -> bytes | None:
        return None

    def pickle_globals(self, side: str, path: str) -> None:
        return None

    def gguf_header(self, side: str, path: str) -> None:
        return None

    def onnx_model(self, side: str, path: str) -> None:
        return None


def _entries(headers: Mapping[str, Mapping[str, Any]], tag: str) -> tuple[FileEntry, ...]:
    return tuple(FileEntry(path, _size(h), hashlib.sha1(f"{tag}{path}".encode()).hexdigest(),
                           hashlib.sha256(f"{tag}{path}".encode()).hexdigest()) for path, h in sorted(headers.items()))


def case(label: str, old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]], tuned: float,
         budget: tuple[int, int]) -> None:
    change = RevisionChange(RepoId("bench/model"), Snapshot(_entries(old, "a")), Snapshot(_entries(new, "b")),
                            CommitSha("a" * 40), CommitSha("b" * 40))
    sources = BenchSources({"old": old, "new": new}, {"old": 0.0, "new": tuned}, budget)
    began = time.perf_counter()
    found = [f for f in weights.analyse(change, sources, SeverityRules.default())  # type: ignore[arg-type]
             if f.code in ("weights.resaved", "weights.dtype_changed", "weights.values_changed")]
    took = time.perf_counter() - began - sources.synthesis
    total = sum(_size(h) for h in new.values())
    for f in found:
        e = f.evidence
        print(f"{label:<28} {f.code:<24} {sources.spent['old'][0]:>4}/{budget[0]} req {sources.spent['old'][1]:>11,}"
              f"/{budget[1]:,} B (old)  {sources.spent['new'][0]:>4} req {sources.spent['new'][1]:>11,} B (new)  "
              f"{e['tensors_compared']}/{e['tensors_total']} tensors  {e['elements_compared'] / e['elements_total']:.4%} "
              f"of {total / 1e9:.1f} GB  rel L2 {e['relative_l2']}  {took:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--bytes", type=int, default=16 * 1024 * 1024)
    args = parser.parse_args()
    budget = (args.requests, args.bytes)
    models = {
        "Llama-2-7b (F16, 2 shards)": (llama(4096, 32, 4096, 11008, 32000), "F16", 10 * 10**9, "BF16"),
        "Llama-3-70B (BF16, 30 sh.)": (llama(8192, 80, 1024, 28672, 128256), "BF16", 5 * 10**9, "F16"),
    }
    for label, (tensors, dtype, max_shard, other) in models.items():
        base = shard(tensors, dtype, max_shard)
        resaved = {p: {**h, "__metadata__": {"format": "pt", "resaved": "yes"}} for p, h in shard(
            tensors, dtype, max_shard // 2).items()}  # resharded in half-size files, new metadata
        converted = shard(tensors, other, max_shard)
        print(f"{label}: {len(tensors)} tensors, {len(base)} files")
        case("  re-saved (resharded)", base, resaved, 0.0, budget)
        case(f"  converted {dtype} → {other}", base, converted, 0.0, budget)
        case("  fine-tuned (1e-3)", base, base, 1e-3, budget)


if __name__ == "__main__":
    main()
