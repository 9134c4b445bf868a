"""The tokenization a sentence-transformers Transformer module really feeds its model, on both sides.

The effective tokenizer is ``tokenizer.json`` as the loader rebuilds it from ``tokenizer_config.json``
(:mod:`tracker.core.findings.tokenizer_precedence`), plus a Lowercase step when
``sentence_bert_config.json`` sets ``do_lower_case`` on a tokenizer that does not lowercase already
(what sentence-transformers adds). The fixed drift sample is encoded with both; the result says how
many texts tokenize differently, why, and how many are longer than a ``max_seq_length``. Pure.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from tracker.core.findings.config import JsonProblem, load_json_object
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.tokenizer import (
    DEFAULT_LIMITS,
    TokenizerLoadError,
    drift_sample,
    effective_bytes,
    encode_sample,
    model_parts,
    parse_tokenizer_json,
)
from tracker.core.findings.tokenizer_precedence import (
    TOKENIZER_CONFIG,
    TOKENIZER_JSON,
    added_around,
    effective_tokenizer,
    lowercases,
    precedence,
)
from tracker.core.model import RevisionChange, Snapshot

ST_CONFIG = "sentence_bert_config.json"
TOKENIZER_FILES = (TOKENIZER_JSON, TOKENIZER_CONFIG, "special_tokens_map.json", "added_tokens.json", "vocab.txt",
                   "merges.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model")
CONFIG_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Side:
    """One side's effective tokenizer: the parsed docs and what decided them."""

    doc: dict[str, Any]  # tokenizer.json as parsed
    config: dict[str, Any]  # tokenizer_config.json ({} when absent)
    st_lower: bool  # sentence_bert_config.json do_lower_case
    effective: dict[str, Any]
    data: bytes  # the effective tokenizer.json, as encoded

    @property
    def lowercase_source(self) -> str | None:
        """The file that makes the tokenizer lowercase, or None when it does not."""
        base = effective_tokenizer(self.doc, self.config)
        if lowercases(base):
            return TOKENIZER_CONFIG if precedence(self.config).winner("normalizer") == TOKENIZER_CONFIG \
                else TOKENIZER_JSON
        return ST_CONFIG if self.st_lower else None

    @property
    def around(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return added_around(self.effective)


@dataclass(frozen=True)
class Tokenization:
    changed: int  # sample texts that tokenize differently
    total: int
    lengths: tuple[int, ...]  # tokens of each sample text on the new side, special tokens included
    old: Side
    new: Side


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if folder else name


def tokenizer_files_changed(change: RevisionChange, old_folder: str, new_folder: str) -> list[str]:
    """The tokenizer files of the module that differ between the two sides (by content id)."""
    assert change.old is not None
    out = []
    for name in (*TOKENIZER_FILES, ST_CONFIG):
        a, b = change.old.get(_join(old_folder, name)), change.new.get(_join(new_folder, name))
        if (a is None) != (b is None) or (a is not None and b is not None and a.content_id != b.content_id):
            out.append(_join(new_folder, name))
    return out


def _config(inputs: RevisionInputs, snapshot: Snapshot, side: str, path: str) -> dict[str, Any]:
    entry = snapshot.get(path)
    if entry is None or entry.size > CONFIG_MAX_BYTES:
        return {}
    data = inputs.text(side, path)
    if data is None:
        return {}
    try:
        return load_json_object(data, max_bytes=CONFIG_MAX_BYTES)
    except JsonProblem:
        return {}


def read_side(inputs: RevisionInputs, snapshot: Snapshot, side: str, folder: str) -> Side | None:
    """The module's effective tokenizer on one side; None without a readable tokenizer.json."""
    entry = snapshot.get(_join(folder, TOKENIZER_JSON))
    if entry is None or entry.size > DEFAULT_LIMITS.max_bytes:
        return None
    data = inputs.text(side, _join(folder, TOKENIZER_JSON))
    if data is None:
        return None
    try:
        doc = parse_tokenizer_json(data)
        model_parts(doc)
    except JsonProblem:
        return None
    config = _config(inputs, snapshot, side, _join(folder, TOKENIZER_CONFIG))
    st_lower = _config(inputs, snapshot, side, _join(folder, ST_CONFIG)).get("do_lower_case") is True
    effective = effective_tokenizer(doc, config, st_lower)
    return Side(doc=doc, config=config, st_lower=st_lower, effective=effective,
                data=effective_bytes(data, doc, config, st_lower))


def measure(old: Side, new: Side) -> Tokenization:
    """Encode the drift sample with both effective tokenizers. Raises TokenizerLoadError."""
    texts = drift_sample()
    a = encode_sample(old.data, texts)
    b = encode_sample(new.data, texts)
    changed = sum(1 for x, y in zip(a.ids, b.ids, strict=True) if x != y)
    return Tokenization(changed=changed, total=len(texts), lengths=tuple(len(ids) for ids in b.ids), old=old, new=new)


def _names(tokens: tuple[str, ...]) -> str:
    return " ".join(tokens)


def _edge_change(label: str, before: tuple[str, ...], after: tuple[str, ...]) -> str:
    """``[MASK] now appended to``; tokens are listed from the text outwards."""
    if after[:len(before)] == before:
        return f"{_names(after[len(before):])} now {label}"
    if before[:len(after)] == after:
        return f"{_names(before[len(after):])} no longer {label}"
    return f"{_names(before)} → {_names(after)} {label}"


def explain(t: Tokenization, changed_files: list[str], pooling: str) -> str:
    """Why the sample tokenizes differently: ``lowercasing turned off in tokenizer_config.json``."""
    parts = []
    was, now = t.old.lowercase_source, t.new.lowercase_source
    if (was is None) != (now is None):
        parts.append(f"lowercasing turned off in {was}" if now is None else f"lowercasing turned on in {now}")
    (first_a, last_a), (first_b, last_b) = t.old.around, t.new.around
    where = f"the post-processor rebuilt from {TOKENIZER_CONFIG}" \
        if precedence(t.new.config).winner("post_processor") == TOKENIZER_CONFIG else f"{TOKENIZER_JSON}'s post-processor"
    pooled = " (the token this pooling reads)" if pooling in ("cls", "lasttoken") else ""
    for label, before, after, edge in (("prepended to", first_a[::-1], first_b[::-1], "cls"),
                                       ("appended to", last_a, last_b, "lasttoken")):
        if before != after:
            note = pooled if pooling == edge else ""
            parts.append(_edge_change(label, before, after) + f" every input by {where}{note}")
    if not parts:
        parts.append("changed " + ", ".join(changed_files) if changed_files else "the tokenizer changed")
    return "; ".join(parts)


def unmeasured(exc: TokenizerLoadError) -> str:
    return f"the tokenizer changed and the new one fails to {exc.stage} ({str(exc)[:160]})"


def longer_than(t: Tokenization, limit: int) -> int:
    """Sample texts with more tokens than ``limit`` (special tokens included)."""
    return sum(1 for n in t.lengths if n > limit)

