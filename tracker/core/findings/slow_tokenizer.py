"""Slow (Python) tokenizer files: ``vocab.txt`` (WordPiece, one token per line, id = line) and ``merges.txt`` (BPE).

They decide the ids only where no ``tokenizer.json`` is present (transformers prefers the fast
tokenizer when there is one), so that is when they are compared; the findings are the
``tokenizer.*`` codes of the tokenizer.json diff, at these paths. Bounded: a file over
:data:`MAX_BYTES` is reported, not read (real ones are 0.2-5 MB); at most :data:`MAX_LINES` lines. Pure.
"""

from __future__ import annotations

import dataclasses

from tracker.core.findings import libraries as lib
from tracker.core.findings.config import file_changed
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import CATEGORY, diff_merges, diff_vocab
from tracker.core.model import Finding, RevisionChange

VOCAB = "vocab.txt"
MERGES = "merges.txt"
MAX_BYTES = 16 * 1024 * 1024
MAX_LINES = 2_000_000


class TooLarge(Exception):
    pass


def _lines(data: bytes, path: str) -> list[str]:
    text = data.decode("utf-8", errors="replace")
    if text.count("\n") > MAX_LINES:
        raise TooLarge(f"{path}: more than {MAX_LINES:,} lines; not compared")
    return text.splitlines()


def vocab_ids(data: bytes) -> dict[str, int]:
    """``token -> id`` of a vocab.txt: the first line holding a token gives its id."""
    ids: dict[str, int] = {}
    for i, token in enumerate(_lines(data, VOCAB)):
        ids.setdefault(token, i)
    return ids


def merges(data: bytes) -> list[str]:
    return [line for line in _lines(data, MERGES) if line.strip() and not line.startswith("#version")]


@analyser(library=lib.TRANSFORMERS, order=50)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    if change.old is None or change.new.get("tokenizer.json") is not None:
        return []  # the fast tokenizer is what loads; these files are unused then
    out: list[Finding] = []
    for path in (VOCAB, MERGES):
        if not file_changed(change, path):
            continue
        old_entry, new_entry = change.old.get(path), change.new.get(path)
        if old_entry is None or new_entry is None:
            continue  # added or removed: the files analyser says so
        if new_entry.size > MAX_BYTES:
            out.append(rules.finding("tokenizer.too_large", CATEGORY, f"{path}: {new_entry.size:,} bytes, over the "
                                     f"{MAX_BYTES:,}-byte cap: not read or compared", path=path,
                                     evidence={"size": new_entry.size, "max_bytes": MAX_BYTES}))
            continue
        if old_entry.size > MAX_BYTES:
            continue
        old_data, new_data = inputs.text("old", path), inputs.text("new", path)
        if old_data is None or new_data is None:
            continue
        try:
            found = (diff_vocab(vocab_ids(old_data), vocab_ids(new_data), rules) if path == VOCAB
                     else diff_merges(merges(old_data), merges(new_data), rules))
        except TooLarge as exc:
            out.append(rules.finding("tokenizer.too_large", CATEGORY, str(exc), path=path))
            continue
        out += [dataclasses.replace(f, path=path, summary=f"{path}: {f.summary}") for f in found]
    return out
