"""The index verdict against the real library: sentence-transformers encodes both revisions of each scenario.

Each scenario of ``index_repos`` is written to disk with the real all-MiniLM-L6-v2 weights and loaded with
sentence-transformers (the ``verify`` extra; skipped without it). The index side is what a stored item gets:
``encode`` (the default prompt) and ``encode`` with each document-side prompt. The tracker's verdict
(``embeddings.incompatible`` present or not) must agree with whether those vectors moved.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from .hub import analyse_scenarios
from .index_repos import SCENARIOS
from .st_repos import package_dir

st = pytest.importorskip("sentence_transformers")
np = pytest.importorskip("numpy")

DOCUMENT_PROMPTS = ("document", "passage", "corpus", "text")
"""Prompts stored items are encoded with (sentence-transformers' encode_document tries the first three)."""
MOVED = 1e-4
"""Largest 1 - cosine still counted as the same vector (float32 noise is ~1e-7)."""

pytestmark = pytest.mark.timeout(1800)  # about 25 revisions loaded and encoded on CPU, once each

LIBRARY_SCENARIOS = [name for name in SCENARIOS if name != "module_path_absolute"]


def _write(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("model.safetensors"):
            shutil.copyfile(package_dir() / "model.safetensors", path)  # the real weights, not the stand-in's
        else:
            path.write_bytes(data)
    return folder


_ENCODES: dict[str, dict[str, object]] = {}


def _encodes(root: Path, files: dict[str, bytes], texts: list[str], query: bool = False) -> dict[str, object]:
    """The sample encoded by one revision: default, document-side (and query-side), once per content."""
    key = hashlib.sha256(json.dumps({k: hashlib.sha256(v).hexdigest() for k, v in sorted(files.items())}).encode()
                         + bytes([query])).hexdigest()
    if key not in _ENCODES:
        model = st.SentenceTransformer(str(_write(root / key[:16], files)), device="cpu", local_files_only=True)
        default = model.encode(texts, convert_to_numpy=True)
        out = {"default": default}
        for name in DOCUMENT_PROMPTS:  # as an index encodes with it: encode(prompt_name="passage")
            prompt = model.prompts.get(name) or ""
            out[name] = model.encode(texts, prompt=prompt, convert_to_numpy=True) if prompt else default
        if query:
            out["query"] = model.encode_query(texts, convert_to_numpy=True)
        _ENCODES[key] = out
    return _ENCODES[key]


def _moved(a: object, b: object) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return True
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return bool((1 - cos).max() > MOVED)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    return analyse_scenarios(tmp_path_factory.mktemp("hub"), "sentence-transformers",
                             {name: SCENARIOS[name] for name in LIBRARY_SCENARIOS})


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """Which encodes moved between a scenario's two revisions, by the real library (each revision loaded once)."""
    from tracker.core.findings.tokenizer import drift_sample

    texts = list(drift_sample())
    root = tmp_path_factory.mktemp("library")

    def moved(name: str) -> dict[str, bool]:
        before, after = SCENARIOS[name]
        a = _encodes(root, before, texts, query=name == "query_prompt")
        b = _encodes(root, after, texts, query=name == "query_prompt")
        out = {side: _moved(a[side], b[side]) for side in a}
        out["document"] = any(out.pop(p) for p in DOCUMENT_PROMPTS)
        return out

    # offline for this module only: the tests after it in this worker poll the stand-in
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield moved


@pytest.mark.parametrize("name", LIBRARY_SCENARIOS)
def test_the_index_verdict_agrees_with_the_library(verdicts, library, name):
    moved = library(name)
    verdict = [f.code for f in verdicts[name]].count("embeddings.incompatible") == 1
    assert verdict == (moved["default"] or moved["document"]), (name, moved, [f.summary for f in verdicts[name]][:1])


def test_a_query_prompt_change_moves_queries_and_not_the_index(library):
    assert library("query_prompt") == {"default": False, "document": False, "query": True}
