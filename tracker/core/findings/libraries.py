"""Which libraries a revision is loaded with, from its card and its file layout. Pure.

A repo on the Hub is rarely "a transformers model" alone: intfloat/multilingual-e5-large is
loaded by sentence-transformers (``modules.json``), a Stable Diffusion repo by diffusers
(``model_index.json``), a vision backbone by timm (``pretrained_cfg`` in ``config.json``).
What a change means depends on the library, so analysers register per library
(``@analyser`` in :mod:`tracker.core.findings.registry`) and their findings are grouped by it.

The card's ``library_name`` and ``tags`` count, and so does the layout: a card can be silent
or wrong, the files are what the library reads.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tracker.core.bounded import loads_json
from tracker.core.model import Snapshot

TRANSFORMERS = "transformers"
SENTENCE_TRANSFORMERS = "sentence-transformers"
DIFFUSERS = "diffusers"
TIMM = "timm"
OPEN_CLIP = "open_clip"
PEFT = "peft"
GGUF = "gguf"
ONNX = "onnx"
OPENVINO = "openvino"

# Display order: the libraries a user loads the repo with first, then formats and adapters.
LIBRARIES: tuple[str, ...] = (SENTENCE_TRANSFORMERS, DIFFUSERS, TIMM, OPEN_CLIP, TRANSFORMERS, PEFT, GGUF, ONNX,
                              OPENVINO)

# Card spellings (library_name or a tag) of each library.
_CARD_NAMES: Mapping[str, str] = {
    "sentence-transformers": SENTENCE_TRANSFORMERS, "sentence_transformers": SENTENCE_TRANSFORMERS,
    "diffusers": DIFFUSERS, "timm": TIMM, "open_clip": OPEN_CLIP, "open-clip": OPEN_CLIP,
    "transformers": TRANSFORMERS, "peft": PEFT, "gguf": GGUF, "onnx": ONNX, "openvino": OPENVINO,
}
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json read only to tell timm from transformers


def _card(front_matter: Any) -> set[str]:
    if not isinstance(front_matter, dict):
        return set()
    names: list[Any] = [front_matter.get("library_name")]
    tags = front_matter.get("tags")
    if isinstance(tags, list):
        names += tags[:1000]
    return {_CARD_NAMES[n.strip().lower()] for n in names if isinstance(n, str) and n.strip().lower() in _CARD_NAMES}


def _layout(paths: Iterable[str], config: Mapping[str, Any] | None) -> set[str]:
    found: set[str] = set()
    for path in paths:
        name = posixpath.basename(path)
        top = path.split("/", 1)[0]
        if path == "modules.json" or path == "config_sentence_transformers.json":
            found.add(SENTENCE_TRANSFORMERS)
        elif path == "model_index.json":
            found.add(DIFFUSERS)
        elif name == "open_clip_config.json" or name.startswith("open_clip_"):
            found.add(OPEN_CLIP)
        elif name == "adapter_config.json":
            found.add(PEFT)
        elif name.lower().endswith(".gguf"):
            found.add(GGUF)
        elif top == "onnx" or name.endswith(".onnx"):
            found.add(ONNX)
        elif top == "openvino" or name.startswith("openvino_model"):
            found.add(OPENVINO)
    if config is not None:
        if isinstance(config.get("pretrained_cfg"), dict):
            found.add(TIMM)
        elif "model_type" in config or "architectures" in config:
            found.add(TRANSFORMERS)
    return found


def detect_libraries(snapshot: Snapshot, read: Callable[[str], bytes | None],
                     front_matter: Callable[[bytes], Any]) -> tuple[str, ...]:
    """The libraries ``snapshot`` is loaded with, in :data:`LIBRARIES` order.

    ``read(path)`` gives a file's bytes (None when absent or unreadable); only ``README.md`` and
    the root ``config.json`` are read. ``front_matter`` parses the card's YAML (bounded).
    """
    paths = [f.path for f in snapshot.files]
    found = set()
    if "README.md" in paths:
        data = read("README.md")
        if data is not None:
            try:
                found |= _card(front_matter(data))
            except Exception:  # a broken card is the licence analyser's finding; here it names nothing
                pass
    config = None
    if "config.json" in paths:
        entry = snapshot.get("config.json")
        data = read("config.json") if entry is not None and entry.size <= MAX_CONFIG_BYTES else None
        if data is not None:
            try:
                parsed = loads_json(data)
                config = parsed if isinstance(parsed, dict) else None
            except ValueError:
                config = None
    found |= _layout(paths, config)
    return tuple(lib for lib in LIBRARIES if lib in found)


ANY = "any"  # the group of findings about the repo's files whatever loads them (weights, licence, files)
VERDICT_CODES = ("embeddings.incompatible",)  # verdicts a reader needs before anything else


def group_by_library(findings: Iterable[Any]) -> list[tuple[str, list[Any]]]:
    """Findings (objects with ``.library`` and ``.severity``) grouped by library, most severe group first.

    Inside a group the order given is kept; groups with the same worst severity follow
    :data:`LIBRARIES` order, then ``any``.
    """
    groups: dict[str, list[Any]] = {}
    for finding in findings:
        groups.setdefault(finding.library or ANY, []).append(finding)
    order = {name: i for i, name in enumerate((*LIBRARIES, ANY))}

    def key(item: tuple[str, list[Any]]) -> tuple[int, int]:
        name, items = item
        return min(f.severity.rank for f in items), order.get(name, len(order))

    return sorted(groups.items(), key=key)


def library_label(name: str) -> str:
    return "any library" if name == ANY else name
