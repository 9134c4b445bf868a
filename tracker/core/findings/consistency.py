"""Consistency findings: do config, generation config, tokenizer and chat template agree?

Each file can be correct on its own and the combination still be broken: a
tokenizer that emits ids beyond the embedding matrix (``vocab_size``), a
generation config whose eos is not the token the tokenizer (and the chat
template) ends turns with, a template that writes ``<|eot_id|>`` into the
prompt while the vocabulary has no such token (so it is split into pieces).

Checked only when one of the involved files changed (or at the first revision),
and only problems that are *new* at this revision are reported, so a
long-standing mismatch is reported once, not on every poll.
"""

from __future__ import annotations

import re
from typing import Any

from tracker.core.findings import libraries as lib
from tracker.core.findings.config import JsonProblem, file_changed, fmt_value, load_json_object
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import (
    DEFAULT_LIMITS,
    parse_tokenizer_json,
    token_ids,
    tokenizer_vocab_size,
)
from tracker.core.model import Finding, RevisionChange

CATEGORY = "consistency"
INVOLVED = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
)

# Literal special-looking tokens: <|eot_id|>, <|im_start|>, <start_of_turn>, <end_of_turn>.
MAX_MISSING_TOKENS = 50
"""Template tokens missing from the vocabulary reported one by one per template; the rest as one finding."""
MAX_ID_DIGITS = 12
"""Longest token id read from ``added_tokens_decoder`` keys (real ids have at most 7 digits)."""

# Deliberately narrow: HTML-ish text such as <b> or <think> in a template is not flagged.
SPECIAL_TOKEN_RE = re.compile(r"<\|[^<>|\s]{1,64}\|>|<[a-z][a-z0-9]*(?:_[a-z0-9]+)+>")


def _json(inputs: RevisionInputs, side: str, path: str, cap: int = 16 * 1024 * 1024) -> dict[str, Any] | None:
    data = inputs.text(side, path)
    if data is None:
        return None
    try:
        return load_json_object(data, max_bytes=cap)
    except JsonProblem:
        return None  # reported by the file's own analyser


def _special(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _ids(value: Any) -> set[int]:
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


Problems = dict[tuple[str, str], dict[str, Any]]


def problems(inputs: RevisionInputs, side: str) -> Problems:
    """The consistency problems on one side, keyed by (code, subject) so sides can be compared."""
    config = _json(inputs, side, "config.json") or {}
    gen = _json(inputs, side, "generation_config.json")
    tok_config = _json(inputs, side, "tokenizer_config.json") or {}
    stm = _json(inputs, side, "special_tokens_map.json") or {}
    added_json = _json(inputs, side, "added_tokens.json") or {}
    vocab, size = _vocabulary(inputs, side, tok_config, added_json)
    found: Problems = {}
    found.update(_vocab_size_problem(config, size))
    found.update(_eos_problems(config, gen, tok_config, stm, vocab=vocab, size=size))
    if vocab is not None:
        found.update(_template_token_problems(inputs, side, tok_config, vocab))
    return found


def _vocabulary(
    inputs: RevisionInputs, side: str, tok_config: dict[str, Any], added_json: dict[str, Any]
) -> tuple[dict[str, int] | None, int | None]:
    """The tokenizer's token -> id map with the added tokens, and the number of ids it can produce."""
    vocab: dict[str, int] | None = None
    size: int | None = None
    data = inputs.text(side, "tokenizer.json")
    if data is not None and len(data) <= DEFAULT_LIMITS.max_bytes:
        try:
            doc = parse_tokenizer_json(data)
            vocab, size = token_ids(doc), tokenizer_vocab_size(doc)
        except (JsonProblem, TypeError, ValueError):
            vocab = None
    if vocab is None:
        return None, size
    for content, i in added_json.items():
        if isinstance(i, int):
            vocab.setdefault(content, i)
            size = max(size or 0, i + 1)
    decoder = tok_config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        for key, entry in decoder.items():
            special = _special(entry)
            # ASCII digits only, and short: int() refuses "²" and 5,000-digit strings with ValueError
            if special is not None and key.isascii() and key.isdigit() and len(key) <= MAX_ID_DIGITS:
                vocab.setdefault(special, int(key))
                size = max(size or 0, int(key) + 1)
    return vocab, size


def _vocab_size_problem(config: dict[str, Any], size: int | None) -> Problems:
    """Config vocab_size vs the ids the tokenizer can produce."""
    vocab_size = config.get("vocab_size")
    if size is None or not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or size <= vocab_size:
        return {}
    return {("consistency.vocab_size_too_small", "vocab_size"): {
        "summary": f"tokenizer produces ids up to {size - 1}, but config vocab_size is {vocab_size}: "
                   "those ids index past the embedding matrix",
        "before": None, "after": {"vocab_size": vocab_size, "tokenizer_size": size}, "path": "config.json",
    }}


def _eos_problems(
    config: dict[str, Any],
    gen: dict[str, Any] | None,
    tok_config: dict[str, Any],
    stm: dict[str, Any],
    *,
    vocab: dict[str, int] | None,
    size: int | None,
) -> Problems:
    """Generation eos vs the tokenizer's eos token, and eos ids the tokenizer cannot produce."""
    found: Problems = {}
    gen_source = "generation_config.json" if gen is not None else "config.json"
    eos_ids = _ids((gen if gen is not None else config).get("eos_token_id"))
    eos_token = _special(tok_config.get("eos_token")) or _special(stm.get("eos_token"))
    if vocab is not None and eos_token is not None and eos_ids:
        tok_eos = vocab.get(eos_token)
        if tok_eos is None:
            found[("consistency.eos_token_not_in_vocab", eos_token)] = {
                "summary": f"tokenizer eos_token {eos_token} is not in the vocabulary",
                "before": None, "after": eos_token, "path": "tokenizer_config.json",
            }
        elif tok_eos not in eos_ids:
            found[("consistency.eos_mismatch", f"{eos_token}:{sorted(eos_ids)}")] = {
                "summary": f"{gen_source} eos_token_id {fmt_value(sorted(eos_ids) if len(eos_ids) > 1 else next(iter(eos_ids)))} "
                           f"does not include the tokenizer's eos_token {eos_token} ({tok_eos}): "
                           "generation will not stop where the tokenizer ends text",
                "before": None, "after": {"eos_token_id": sorted(eos_ids), "eos_token": eos_token, "id": tok_eos},
                "path": gen_source,
            }
    if size is not None:
        beyond = sorted(i for i in eos_ids if i >= size or i < 0)
        if beyond:
            found[("consistency.eos_id_out_of_range", str(beyond))] = {
                "summary": f"{gen_source} eos_token_id {fmt_value(beyond)} is outside the tokenizer's "
                           f"{size} ids: generation can never stop on it",
                "before": None, "after": beyond, "path": gen_source,
            }
    return found


def _template_token_problems(
    inputs: RevisionInputs, side: str, tok_config: dict[str, Any], vocab: dict[str, int]
) -> Problems:
    """Literal special tokens in the chat template that the vocabulary lacks."""
    found: Problems = {}
    templates: list[tuple[str, str]] = []
    raw = tok_config.get("chat_template")
    if isinstance(raw, str):
        templates.append(("tokenizer_config.json", raw))
    elif isinstance(raw, list):
        templates += [("tokenizer_config.json", t["template"]) for t in raw
                      if isinstance(t, dict) and isinstance(t.get("template"), str)]
    jinja = inputs.text(side, "chat_template.jinja")
    if jinja is not None:
        templates.append(("chat_template.jinja", jinja.decode("utf-8", errors="replace")))
    for path, text in templates:
        missing = sorted({m for m in SPECIAL_TOKEN_RE.findall(text) if m not in vocab})
        if len(missing) > MAX_MISSING_TOKENS:
            rest = missing[MAX_MISSING_TOKENS:]
            found[("consistency.template_token_missing", f"{path}: {len(rest)} more")] = {
                "summary": f"chat template emits {len(rest)} more tokens that are not in the vocabulary, "
                           f"e.g. {rest[0]}",
                "before": None, "after": rest[:MAX_MISSING_TOKENS], "path": path,
            }
            missing = missing[:MAX_MISSING_TOKENS]
        for token in missing:
            found[("consistency.template_token_missing", token)] = {
                "summary": f"chat template emits {token}, which is not a token in the vocabulary: "
                           "it will be split into ordinary pieces",
                "before": None, "after": token, "path": path,
            }
    return found


@analyser(library=lib.TRANSFORMERS, order=140)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    """New cross-file problems at this revision (all of them at the first revision)."""
    if change.old is not None and not any(file_changed(change, p) for p in INVOLVED):
        return []
    new = problems(inputs, "new")
    if not new:
        return []
    old = problems(inputs, "old") if change.old is not None else {}
    return [
        rules.finding(code, CATEGORY, p["summary"], path=p["path"], before=p["before"], after=p["after"],
                      evidence={"subject": subject})
        for (code, subject), p in new.items()
        if (code, subject) not in old
    ]
