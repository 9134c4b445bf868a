"""sentencepiece ``.model`` files: vocabulary, model type and normalizer, read by a bounded protobuf reader.

``tokenizer.model`` (Llama, Mistral, Gemma), ``spiece.model`` (T5), ``sentencepiece.bpe.model``
(XLM-R, e5) decide the ids where no ``tokenizer.json`` is present. The ModelProto's pieces
(field 1), trainer_spec (2: ``model_type`` 3, ``vocab_size`` 4) and normalizer_spec (3: ``name`` 1)
are read with :mod:`tracker.core.findings.protobuf`; nothing is executed or loaded. Findings are the
``tokenizer.*`` codes at the file's path. Pure.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import posixpath
from typing import Any

from tracker.core.findings import libraries as lib
from tracker.core.findings.config import file_changed
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.protobuf import ProtobufError, as_text, fields
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import CATEGORY, diff_vocab
from tracker.core.model import Finding, RevisionChange

NAMES = ("tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "sentencepiece.model")
MAX_BYTES = 32 * 1024 * 1024
MAX_PIECES = 2_000_000
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def read_model(data: bytes) -> dict[str, Any]:
    """``{"pieces": [...], "model_type", "vocab_size", "normalizer"}``; ProtobufError when malformed."""
    pieces: list[str] = []
    model_type, vocab_size, normalizer = "unigram", None, None
    for f in fields(data):
        if f.number == 1 and isinstance(f.value, bytes):
            if len(pieces) >= MAX_PIECES:
                raise ProtobufError(f"more than {MAX_PIECES:,} pieces")
            piece = next((as_text(p.value) for p in fields(f.value, max_fields=16) if p.number == 1), "")
            pieces.append(piece)
        elif f.number == 2 and isinstance(f.value, bytes):
            for t in fields(f.value, max_fields=10_000):
                if t.number == 3 and isinstance(t.value, int):
                    model_type = MODEL_TYPES.get(t.value, str(t.value))
                elif t.number == 4 and isinstance(t.value, int):
                    vocab_size = t.value
        elif f.number == 3 and isinstance(f.value, bytes):
            normalizer = next((as_text(n.value) for n in fields(f.value, max_fields=10_000) if n.number == 1), None)
    return {"pieces": pieces, "model_type": model_type, "vocab_size": vocab_size, "normalizer": normalizer}


@functools.lru_cache(maxsize=2)
def parsed_once(digest: str, data: bytes) -> tuple[dict[str, Any], dict[str, int]]:
    model = read_model(data)
    return model, {p: i for i, p in reversed(list(enumerate(model["pieces"])))}


def parse_cached(data: bytes) -> tuple[dict[str, Any], dict[str, int]]:
    """The model and its piece ids, parsed once per content: a diffusers pipeline's tokenizer folders often
    share one ``spiece.model``, and the two most recent (a revision's old and new) are kept. Not to be mutated."""
    return parsed_once(_digest(data), data)


_COMPARED: dict[tuple[str, str], tuple[SeverityRules, list[Finding]]] = {}
_COMPARED_KEPT = 2


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def vocab_findings(old_data: bytes, new_data: bytes, rules: SeverityRules) -> list[Finding]:
    """The vocabulary findings of one pair of models, computed once per pair of contents (renumbering a
    million pieces takes seconds, and six tokenizer folders may hold the same pair). Not to be mutated."""
    key = (_digest(old_data), _digest(new_data))
    hit = _COMPARED.get(key)
    if hit is not None and hit[0] is rules:
        return hit[1]
    found = diff_vocab(parse_cached(old_data)[1], parse_cached(new_data)[1], rules)
    if len(_COMPARED) >= _COMPARED_KEPT:
        del _COMPARED[next(iter(_COMPARED))]
    _COMPARED[key] = (rules, found)
    return found


@analyser(library=lib.TRANSFORMERS, order=60)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    if change.old is None or change.new.get("tokenizer.json") is not None:
        return []  # the fast tokenizer is what loads
    out: list[Finding] = []
    for entry in change.new.files:
        path = entry.path
        if posixpath.basename(path) not in NAMES or "/" in path or not file_changed(change, path):
            continue
        old_entry = change.old.get(path)
        if old_entry is None:
            continue
        if entry.size > MAX_BYTES:
            out.append(rules.finding("tokenizer.too_large", CATEGORY, f"{path}: {entry.size:,} bytes, over the "
                                     f"{MAX_BYTES:,}-byte cap: not read or compared", path=path))
            continue
        new_data = inputs.text("new", path)
        old_data = inputs.text("old", path) if old_entry.size <= MAX_BYTES else None
        if new_data is None:
            continue
        try:
            new, _ = parse_cached(new_data)
        except ProtobufError as exc:
            out.append(rules.finding("tokenizer.malformed", CATEGORY,
                                     f"{path} is not a sentencepiece model: {exc}; loading the tokenizer fails",
                                     path=path, evidence={"error": str(exc)}))
            continue
        try:
            old = parse_cached(old_data)[0] if old_data is not None else None
        except ProtobufError:
            old = None
        if old is None or old_data is None:
            continue
        if old["model_type"] != new["model_type"]:
            out.append(rules.finding("tokenizer.model_type_changed", CATEGORY,
                                     f"{path}: model type {old['model_type']} → {new['model_type']}", path=path,
                                     before=old["model_type"], after=new["model_type"]))
        if old["normalizer"] != new["normalizer"]:
            out.append(rules.finding("tokenizer.normalizer_changed", CATEGORY,
                                     f"{path}: normalizer {old['normalizer']} → {new['normalizer']}", path=path,
                                     before=old["normalizer"], after=new["normalizer"]))
        out += [dataclasses.replace(f, path=path, summary=f"{path}: {f.summary}")
                for f in vocab_findings(old_data, new_data, rules)]
    return out
