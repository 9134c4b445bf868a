"""Findings for the tokenizer: ``tokenizer.json``, ``tokenizer_config.json``,
``special_tokens_map.json`` and ``added_tokens.json``.

A re-exported tokenizer can look identical in a diff viewer (same size, same
keys) and still map text to different ids, which silently changes every
prompt. So this analyser reports what the ids do: tokens added, removed or
re-numbered, merges added/removed/re-ranked, special tokens and pipeline
components (normalizer, pre-tokenizer, post-processor, decoder), and it
measures **tokenization drift** by encoding a fixed multilingual sample
(``data/drift_sample.txt``) with both versions through the ``tokenizers``
library (each content once, from a copy pruned to what the sample can use).

Speed matters: a 256k-token vocabulary is compared with dict/set operations
(C-level ``dict.items()`` differences), never with a generic structural diff,
which is orders of magnitude slower (see ``bench/bench_tokenizer_diff.py``).
Hostile input is contained: a file over ``TokenizerLimits.max_bytes`` is not
read at all, and malformed JSON or an unexpected structure is a finding.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from tracker.core.bounded import MAX_JSON_ITEMS
from tracker.core.errors import first_line
from tracker.core.findings import libraries as lib
from tracker.core.findings.config import (
    MISSING,
    JsonProblem,
    JsonTooLarge,
    change_summary,
    file_changed,
    flat_diff,
    fmt_value,
    json_value,
    load_json_object,
)
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer_precedence import dumps, effective_tokenizer, precedence, tokenizer_class
from tracker.core.model import Finding, RevisionChange

CATEGORY = "tokenizer"
TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
ADDED_TOKENS = "added_tokens.json"

MB = 1024 * 1024


@dataclass(frozen=True)
class TokenizerLimits:
    """Caps that keep a hostile or merely huge tokenizer from stalling a poll.

    ``max_bytes``: a tokenizer.json larger than this is reported (``tokenizer.too_large``)
    without being read or parsed (real ones are 0.5-35 MB; json.loads of 50 MB takes ~1 s).
    Drift has no size cap of its own: each content is encoded once, from a pruned copy
    (see :func:`encode_sample`), so a 256k-token tokenizer drifts in well under a second.
    ``config_max_bytes``: cap for the small JSON side files.
    """

    max_bytes: int = 64 * MB
    config_max_bytes: int = 16 * MB
    examples: int = 5


DEFAULT_LIMITS = TokenizerLimits()

COMPONENT_CODES = {
    "normalizer": "tokenizer.normalizer_changed",
    "pre_tokenizer": "tokenizer.pre_tokenizer_changed",
    "post_processor": "tokenizer.post_processor_changed",
    "decoder": "tokenizer.decoder_changed",
    "truncation": "tokenizer.truncation_padding_changed",
    "padding": "tokenizer.truncation_padding_changed",
}

OVERRIDABLE = ("normalizer", "post_processor")
"""tokenizer.json parts a loader may rebuild from tokenizer_config.json (see tokenizer_precedence)."""

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
SPECIAL_TOKEN_CODES = {"bos_token": "tokenizer.bos_token_changed", "eos_token": "tokenizer.eos_token_changed"}
CONFIG_KEY_CODES = {
    "add_bos_token": "tokenizer.add_special_tokens_changed",
    "add_eos_token": "tokenizer.add_special_tokens_changed",
    "model_max_length": "tokenizer.model_max_length_changed",
    "padding_side": "tokenizer.padding_side_changed",
    "truncation_side": "tokenizer.padding_side_changed",
    "tokenizer_class": "tokenizer.class_changed",
}
for _key in (
    "legacy do_lower_case strip_accents tokenize_chinese_chars add_prefix_space split_special_tokens "
    "clean_up_tokenization_spaces spaces_between_special_tokens do_basic_tokenize add_dummy_prefix"
).split():
    CONFIG_KEY_CODES[_key] = "tokenizer.behaviour_changed"
# Owned by other analysers (chat templates) or handled specially here.
CONFIG_SKIP = {"chat_template", "added_tokens_decoder", "additional_special_tokens", *SPECIAL_TOKEN_KEYS}


# --------------------------------------------------------------------------- helpers


def _tok(token: Any) -> str:
    """A token as a reader sees it: quoted, escapes visible (``"Ġthe"``, ``"\\n"``)."""
    text = json.dumps(token, ensure_ascii=False) if isinstance(token, str) else repr(token)
    return text if len(text) <= 40 else text[:39] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@functools.lru_cache(maxsize=4)
def _parse_cached(digest: str, data: bytes, max_bytes: int) -> dict[str, Any]:
    return load_json_object(data, max_bytes=max_bytes)


def parse_tokenizer_json(data: bytes, max_bytes: int = DEFAULT_LIMITS.max_bytes) -> dict[str, Any]:
    """Parse tokenizer.json once per content: the consistency analyser reads the same bytes.

    The four most recent parses are kept (old and new side of this revision and the one
    before, so the blob two revisions share is parsed once). Callers must not mutate the result.
    """
    if len(data) > max_bytes:
        raise JsonTooLarge(f"{len(data)} bytes, over the {max_bytes}-byte limit; not parsed")
    return _parse_cached(hashlib.blake2b(data, digest_size=16).hexdigest(), data, max_bytes)


@dataclass(frozen=True)
class ModelParts:
    """The parts of ``tokenizer.json``'s ``model`` that decide ids."""

    type: str
    vocab: dict[str, int]  # token -> id
    merges: list[Any] | None  # BPE only, as stored
    scores: dict[str, float] | None  # Unigram only
    params: dict[str, Any]  # everything else (unk_token, byte_fallback, ...)


def model_parts(doc: Mapping[str, Any]) -> ModelParts:
    """Extract vocab/merges from a parsed tokenizer.json, or raise JsonProblem if the shape is wrong."""
    model = doc.get("model")
    if not isinstance(model, dict):
        raise JsonProblem("no 'model' object")
    kind = model.get("type")
    if kind is None:  # old exports omit the type; infer it
        kind = "BPE" if "merges" in model else "Unigram" if isinstance(model.get("vocab"), list) else "WordPiece"
    vocab_raw = model.get("vocab", {})
    scores = None
    if isinstance(vocab_raw, dict):
        vocab = vocab_raw
    elif isinstance(vocab_raw, list):  # Unigram: [[piece, score], ...], id = position
        try:
            vocab = {piece: i for i, (piece, _score) in enumerate(vocab_raw)}
            scores = {piece: score for piece, score in vocab_raw}
        except (TypeError, ValueError):
            raise JsonProblem("model.vocab is a list but not of [piece, score] pairs") from None
    else:
        raise JsonProblem(f"model.vocab is neither an object nor a list ({type(vocab_raw).__name__})")
    merges = model.get("merges")
    if merges is not None and not isinstance(merges, list):
        raise JsonProblem("model.merges is not a list")
    params = {k: v for k, v in model.items() if k not in ("vocab", "merges", "type")}
    return ModelParts(type=str(kind), vocab=vocab, merges=merges, scores=scores, params=params)


def tokenizer_vocab_size(doc: Mapping[str, Any]) -> int:
    """Ids the tokenizer can emit: one past the largest id in the vocab or the added tokens."""
    parts = model_parts(doc)
    ids = [i for i in parts.vocab.values() if isinstance(i, int)]
    ids += [t["id"] for t in doc.get("added_tokens") or [] if isinstance(t, dict) and isinstance(t.get("id"), int)]
    return max(ids) + 1 if ids else 0


def token_ids(doc: Mapping[str, Any]) -> dict[str, int]:
    """token -> id for every token the tokenizer knows, added tokens included."""
    ids = dict(model_parts(doc).vocab)
    for t in doc.get("added_tokens") or []:
        if isinstance(t, dict) and isinstance(t.get("content"), str) and isinstance(t.get("id"), int):
            ids[t["content"]] = t["id"]
    return ids


# --------------------------------------------------------------------------- tokenizer.json diff


def diff_tokenizer_json(
    old: Mapping[str, Any], new: Mapping[str, Any], rules: SeverityRules, limits: TokenizerLimits = DEFAULT_LIMITS
) -> list[Finding]:
    """Compare two parsed tokenizer.json documents: vocab, merges, added tokens, components.

    Pure and fast (set/dict operations only); drift is measured separately, from the raw text.
    """
    findings: list[Finding] = []
    o, n = model_parts(old), model_parts(new)

    def add(code: str, summary: str, before: Any = None, after: Any = None, **evidence: Any) -> None:
        findings.append(rules.finding(code, CATEGORY, summary, path=TOKENIZER_JSON, before=before, after=after,
                                      evidence=evidence))

    if o.type != n.type:
        add("tokenizer.model_type_changed", f"tokenizer model: {o.type} → {n.type}", o.type, n.type)
    findings.extend(_diff_vocab(o.vocab, n.vocab, rules, limits))
    if o.scores is not None and n.scores is not None:
        changed = [t for t, s in o.scores.items() if t in n.scores and n.scores[t] != s]
        if changed:
            ex = changed[: limits.examples]
            add("tokenizer.scores_changed", f"{_plural(len(changed), 'token')} have new Unigram scores "
                f"(e.g. {', '.join(_tok(t) for t in ex)})", count=len(changed),
                examples=[{"token": t, "old": o.scores[t], "new": n.scores[t]} for t in ex])
    if o.merges != n.merges:
        findings.extend(_diff_merges(o.merges or [], n.merges or [], rules, limits))
    for path, before, after in flat_diff(o.params, n.params):
        add("tokenizer.model_params_changed", change_summary(f"model.{path}", before, after),
            json_value(before), json_value(after), key=f"model.{path}")
    findings.extend(_diff_added_tokens(old.get("added_tokens") or [], new.get("added_tokens") or [],
                                       TOKENIZER_JSON, rules, limits))
    for part, code in COMPONENT_CODES.items():
        before, after = old.get(part), new.get(part)
        if before == after and type(before) is type(after):
            continue
        changes = list(flat_diff(before, after, part))
        if not changes:
            continue
        old_type = before.get("type") if isinstance(before, dict) else before
        new_type = after.get("type") if isinstance(after, dict) else after
        if old_type != new_type:
            summary = f"{part}: {fmt_value(old_type)} → {fmt_value(new_type)}"
        else:
            first = changes[0]
            summary = f"{part} changed: {change_summary(first[0].removeprefix(part + '.'), first[1], first[2])}"
            if len(changes) > 1:
                summary += f" (and {len(changes) - 1} more)"
        add(code, summary, before, after,
            changes=[{"path": p, "before": json_value(b), "after": json_value(a)} for p, b, a in changes[:20]],
            changes_total=len(changes))
    return findings


def _diff_vocab(old: dict[str, int], new: dict[str, int], rules: SeverityRules,
                limits: TokenizerLimits) -> list[Finding]:
    """Added, removed and re-numbered tokens; ``dict.items()`` set differences run in C."""
    try:
        gone = old.items() - new.items()  # (token, old_id) no longer present as such
        came = new.items() - old.items()
    except TypeError:  # an unhashable id: not a real vocabulary
        raise JsonProblem("model.vocab maps tokens to non-integer ids") from None
    if not gone and not came:
        return []
    by_id = lambda p: (p[1] if isinstance(p[1], int) else -1, p[0])  # noqa: E731
    removed = sorted(((t, i) for t, i in gone if t not in new), key=by_id)
    added = sorted(((t, i) for t, i in came if t not in old), key=by_id)
    renumbered = sorted(((t, i, new[t]) for t, i in gone if t in new), key=by_id)
    k = limits.examples
    sizes = {"old_size": len(old), "new_size": len(new)}
    findings = []
    if renumbered:
        ex = renumbered[:k]
        findings.append(rules.finding(
            "tokenizer.tokens_renumbered", CATEGORY,
            f"{_plural(len(renumbered), 'token')} re-numbered (e.g. "
            + ", ".join(f"{_tok(t)} {a} → {b}" for t, a, b in ex[:3]) + ")",
            path=TOKENIZER_JSON, before=len(old), after=len(new),
            evidence={"count": len(renumbered), "examples": [{"token": t, "old_id": a, "new_id": b} for t, a, b in ex],
                      **sizes},
        ))
    if removed:
        ex_removed = removed[:k]
        findings.append(rules.finding(
            "tokenizer.tokens_removed", CATEGORY,
            f"{_plural(len(removed), 'token')} removed from the vocabulary (e.g. "
            + ", ".join(f"{_tok(t)} ({i})" for t, i in ex_removed[:3]) + ")",
            path=TOKENIZER_JSON, before=len(old), after=len(new),
            evidence={"count": len(removed), "examples": [{"token": t, "id": i} for t, i in ex_removed], **sizes},
        ))
    if added:
        ex_added = added[:k]
        findings.append(rules.finding(
            "tokenizer.tokens_added", CATEGORY,
            f"{_plural(len(added), 'token')} added to the vocabulary (e.g. "
            + ", ".join(f"{_tok(t)} ({i})" for t, i in ex_added[:3]) + ")",
            path=TOKENIZER_JSON, before=len(old), after=len(new),
            evidence={"count": len(added), "examples": [{"token": t, "id": i} for t, i in ex_added], **sizes},
        ))
    return findings


def diff_vocab(old: dict[str, int], new: dict[str, int], rules: SeverityRules,
               limits: TokenizerLimits = DEFAULT_LIMITS) -> list[Finding]:
    """Tokens added, removed and re-numbered between two ``token -> id`` maps (also used for GGUF vocabularies)."""
    return _diff_vocab(old, new, rules, limits)


def diff_merges(old: list[Any], new: list[Any], rules: SeverityRules,
                limits: TokenizerLimits = DEFAULT_LIMITS) -> list[Finding]:
    """Merges added, removed or re-ranked between two BPE merge lists (also used for GGUF merges)."""
    return _diff_merges(old, new, rules, limits)


def _merge_key(m: Any) -> tuple[str, ...]:
    """``"a b"`` (tokenizers < 0.20) and ``["a", "b"]`` (>= 0.20) are the same merge."""
    if isinstance(m, str):
        return tuple(m.split(" ", 1))
    if isinstance(m, list):
        return tuple(str(x) for x in m)
    raise JsonProblem(f"model.merges holds a {type(m).__name__}, not a string or pair")


def _diff_merges(old: list[Any], new: list[Any], rules: SeverityRules, limits: TokenizerLimits) -> list[Finding]:
    findings = []
    old_strings = set(map(type, old)) <= {str}  # map/set run in C: ~50x faster than all(isinstance ...)
    new_strings = set(map(type, new)) <= {str}
    if old and new and old_strings != new_strings:
        findings.append(rules.finding(
            "tokenizer.merges_format_changed", CATEGORY,
            f"merges stored as {'strings' if new_strings else 'pairs'} instead of "
            f"{'strings' if old_strings else 'pairs'}"
            + ("" if new_strings else "; tokenizers < 0.20 cannot load this file"),
            path=TOKENIZER_JSON,
        ))
    if old_strings and new_strings:  # the common case: compare the strings themselves, no conversion
        old_keys, new_keys = old, new
    else:
        old_keys = [_merge_key(m) for m in old]
        new_keys = [_merge_key(m) for m in new]
    if old_keys == new_keys:
        return findings
    # set operations and filter() with a bound __contains__ keep the per-merge work in C
    old_set, new_set = set(old_keys), set(new_keys)
    added_set, removed_set = new_set - old_set, old_set - new_set
    added = list(filter(added_set.__contains__, new_keys)) if added_set else []
    removed = list(filter(removed_set.__contains__, old_keys)) if removed_set else []
    k = limits.examples
    def text(m: Any) -> str:
        return m if isinstance(m, str) else " ".join(m)
    def show(ms: list[Any]) -> str:
        return ", ".join(_tok(text(m)) for m in ms[:3])

    if removed:
        findings.append(rules.finding(
            "tokenizer.merges_removed", CATEGORY,
            f"{_plural(len(removed), 'merge')} removed (e.g. {show(removed)})",
            path=TOKENIZER_JSON, before=len(old_keys), after=len(new_keys),
            evidence={"count": len(removed), "examples": [text(m) for m in removed[:k]]},
        ))
    if added:
        findings.append(rules.finding(
            "tokenizer.merges_added", CATEGORY,
            f"{_plural(len(added), 'merge')} added (e.g. {show(added)})",
            path=TOKENIZER_JSON, before=len(old_keys), after=len(new_keys),
            evidence={"count": len(added), "examples": [text(m) for m in added[:k]]},
        ))
    common_old = list(filter(new_set.__contains__, old_keys)) if removed_set else old_keys
    common_new = list(filter(old_set.__contains__, new_keys)) if added_set else new_keys
    if common_old != common_new:
        rank_new = {m: i for i, m in enumerate(common_new)}
        moved = [m for i, m in enumerate(common_old) if rank_new[m] != i]
        findings.append(rules.finding(
            "tokenizer.merges_reordered", CATEGORY,
            f"{_plural(len(moved), 'merge')} changed priority (e.g. {show(moved)})",
            path=TOKENIZER_JSON,
            evidence={"count": len(moved), "examples": [text(m) for m in moved[:k]]},
        ))
    return findings


_ADDED_TOKEN_FLAGS = ("special", "single_word", "lstrip", "rstrip", "normalized")


def _diff_added_tokens(old: Iterable[Any], new: Iterable[Any], path: str, rules: SeverityRules,
                       limits: TokenizerLimits) -> list[Finding]:
    """Added/special tokens keyed by content: appeared, disappeared, re-numbered, flags changed."""
    def index(entries: Iterable[Any]) -> dict[str, dict[str, Any]]:
        out = {}
        for e in entries:
            if isinstance(e, dict) and isinstance(e.get("content"), str):
                out[e["content"]] = e
        return out

    o, n = index(old), index(new)
    findings = []
    k = limits.examples
    added = [c for c in n if c not in o]
    removed = [c for c in o if c not in n]
    renumbered = [c for c in o if c in n and o[c].get("id") != n[c].get("id")]
    reflagged = [c for c in o if c in n and c not in renumbered
                 and any(o[c].get(f) != n[c].get(f) for f in _ADDED_TOKEN_FLAGS)]
    if added:
        findings.append(rules.finding(
            "tokenizer.added_tokens_added", CATEGORY,
            f"{_plural(len(added), 'added token')} new (e.g. "
            + ", ".join(f"{_tok(c)} ({n[c].get('id')})" for c in added[:3]) + ")",
            path=path, after=[n[c].get("id") for c in added[:k]],
            evidence={"count": len(added), "examples": [{"content": c, "id": n[c].get("id"),
                                                          "special": n[c].get("special")} for c in added[:k]]},
        ))
    if removed:
        findings.append(rules.finding(
            "tokenizer.added_tokens_removed", CATEGORY,
            f"{_plural(len(removed), 'added token')} removed (e.g. "
            + ", ".join(f"{_tok(c)} ({o[c].get('id')})" for c in removed[:3]) + ")",
            path=path, before=[o[c].get("id") for c in removed[:k]],
            evidence={"count": len(removed), "examples": [{"content": c, "id": o[c].get("id")} for c in removed[:k]]},
        ))
    if renumbered:
        findings.append(rules.finding(
            "tokenizer.added_tokens_renumbered", CATEGORY,
            f"{_plural(len(renumbered), 'added token')} re-numbered (e.g. "
            + ", ".join(f"{_tok(c)} {o[c].get('id')} → {n[c].get('id')}" for c in renumbered[:3]) + ")",
            path=path,
            evidence={"count": len(renumbered), "examples": [
                {"content": c, "old_id": o[c].get("id"), "new_id": n[c].get("id")} for c in renumbered[:k]]},
        ))
    if reflagged:
        c = reflagged[0]
        flags = [f for f in _ADDED_TOKEN_FLAGS if o[c].get(f) != n[c].get(f)]
        findings.append(rules.finding(
            "tokenizer.added_tokens_changed", CATEGORY,
            f"{_plural(len(reflagged), 'added token')} changed flags (e.g. {_tok(c)}: "
            + ", ".join(f"{f} {fmt_value(o[c].get(f))} → {fmt_value(n[c].get(f))}" for f in flags) + ")",
            path=path,
            evidence={"count": len(reflagged), "examples": [
                {"content": c, "old": {f: o[c].get(f) for f in _ADDED_TOKEN_FLAGS},
                 "new": {f: n[c].get(f) for f in _ADDED_TOKEN_FLAGS}} for c in reflagged[:k]]},
        ))
    return findings


# --------------------------------------------------------------------------- drift


@functools.lru_cache(maxsize=1)
def drift_sample() -> tuple[str, ...]:
    """The fixed multilingual sample shipped with the package: one text per non-empty line."""
    text = resources.files("tracker.core.findings").joinpath("data/drift_sample.txt").read_text("utf-8")
    return tuple(line for line in text.split("\n") if line.strip())


@dataclass(frozen=True)
class Drift:
    changed: int
    total: int
    example: dict[str, Any] | None

    @property
    def share(self) -> float:
        return self.changed / self.total if self.total else 0.0


def _short(exc: BaseException) -> str:
    text = first_line(exc)
    return text if len(text) <= 160 else text[:159] + "…"


def measure_drift(old_text: str, new_text: str, samples: Iterable[str] | None = None) -> Drift:
    """Encode the sample with both tokenizers (special tokens included, as users get by default).

    Each side is encoded once per content (see :func:`encode_sample`), so the side a
    revision shares with the one before costs nothing. Raises whatever ``tokenizers``
    raises for a file it cannot load or encode; the caller turns that into a finding.
    """
    texts = tuple(samples if samples is not None else drift_sample())
    old_enc = encode_sample(old_text.encode("utf-8"), texts)
    new_enc = encode_sample(new_text.encode("utf-8"), texts)
    return _compare_encodings(old_enc, new_enc, texts)


@dataclass(frozen=True)
class SampleEncoding:
    """The ids and tokens one tokenizer gives the sample texts."""

    ids: tuple[tuple[int, ...], ...]
    tokens: tuple[tuple[str, ...], ...]


def _compare_encodings(old: SampleEncoding, new: SampleEncoding, texts: tuple[str, ...]) -> Drift:
    changed = [i for i, (a, b) in enumerate(zip(old.ids, new.ids)) if a != b]
    example = None
    if changed:
        i = changed[0]
        example = {"text": texts[i], "old_ids": list(old.ids[i]), "new_ids": list(new.ids[i]),
                   "old_tokens": list(old.tokens[i]), "new_tokens": list(new.tokens[i])}
    return Drift(changed=len(changed), total=len(texts), example=example)


# tokenizers raises Exception for bad files, and a pyo3 PanicException (a BaseException) when a
# file that loaded panics while encoding (e.g. an unk_token missing from the vocabulary).
_RUST_ERRORS = BaseException


class TokenizerLoadError(Exception):
    """``tokenizers`` refuses the file (or would): ``stage`` is ``load`` or ``encode``."""

    def __init__(self, stage: str, cause: BaseException | str) -> None:
        super().__init__(str(cause))
        self.stage = stage
        self.cause = cause


_ENCODINGS: dict[tuple[str, tuple[str, ...]], SampleEncoding | TokenizerLoadError] = {}
_ENCODINGS_KEPT = 8


def forget_encodings() -> None:
    """Empty the cache :func:`encode_sample` keeps, so the next call encodes again (a cold run)."""
    _ENCODINGS.clear()


def encode_sample(data: bytes, texts: tuple[str, ...] | None = None) -> SampleEncoding:
    """The sample encoded by the tokenizer.json in ``data``; once per content, then from a small cache.

    A tokenizer is built from a *pruned* copy of the file (:func:`pruned_tokenizer_doc`):
    only the vocabulary entries and merges that can occur in the sample's own pieces,
    which gives exactly the ids the full tokenizer gives, in a fraction of the load time
    (a 256k-token BPE loads in ~1.2 s; its pruned copy in milliseconds).
    Raises :class:`TokenizerLoadError` when the file does not load or cannot encode the sample.
    """
    texts = texts if texts is not None else drift_sample()
    key = (hashlib.blake2b(data, digest_size=16).hexdigest(), texts)
    if key not in _ENCODINGS:
        if len(_ENCODINGS) >= _ENCODINGS_KEPT:
            del _ENCODINGS[next(iter(_ENCODINGS))]
        try:
            _ENCODINGS[key] = _encode(data, texts)
        except TokenizerLoadError as exc:
            _ENCODINGS[key] = exc
    found = _ENCODINGS[key]
    if isinstance(found, TokenizerLoadError):
        raise found
    return found


def _encode(data: bytes, texts: tuple[str, ...]) -> SampleEncoding:
    from tokenizers import Tokenizer

    try:
        doc = parse_tokenizer_json(data)
    except JsonProblem as exc:
        raise TokenizerLoadError("load", exc) from None
    problem = _merge_problem(doc)
    if problem is not None:
        raise TokenizerLoadError("load", problem)
    try:
        pruned, id_map = pruned_tokenizer_doc(doc, texts)
    except _RUST_ERRORS as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        pruned, id_map = None, None  # pruning needs the pipeline to load; the full load says why not
    try:
        tok = Tokenizer.from_str(json.dumps(pruned) if pruned is not None else data.decode("utf-8-sig"))
    except _RUST_ERRORS as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise TokenizerLoadError("load", exc) from None
    tok.no_truncation()  # the file's own truncation/padding settings would hide drift
    tok.no_padding()
    try:
        encodings = tok.encode_batch(list(texts), add_special_tokens=True)
    except _RUST_ERRORS as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise TokenizerLoadError("encode", exc) from None
    ids = tuple(tuple(e.ids) for e in encodings)
    if id_map is not None:
        ids = tuple(tuple(id_map[i] if 0 <= i < len(id_map) else i for i in row) for row in ids)
    return SampleEncoding(ids=ids, tokens=tuple(tuple(e.tokens) for e in encodings))


def _merge_problem(doc: Mapping[str, Any]) -> str | None:
    """What ``tokenizers`` would refuse in a BPE's merges (a part or result missing from the vocabulary).

    Pruning drops most merges before loading, so this check, which loading the full
    file would make, is made here (set operations: ~0.1 s for 280k merges).
    """
    model = doc.get("model")
    if not isinstance(model, dict) or model.get("type", "BPE" if "merges" in model else None) != "BPE":
        return None
    vocab, merges = model.get("vocab"), model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        return None
    prefix = model.get("continuing_subword_prefix") or ""
    for m in merges:
        try:
            a, b = _merge_key(m)
        except (JsonProblem, ValueError):
            return f"merge {m!r} is not a pair of tokens"
        for token in (a, b, a + (b[len(prefix):] if prefix and b.startswith(prefix) else b)):
            if token not in vocab:
                return f"merge {m!r}: token {token!r} out of vocabulary"
    return None


def _pieces(doc: Mapping[str, Any], texts: tuple[str, ...]) -> set[str]:
    """Every string the model can be asked to split: the sample normalised and pre-tokenised by the file's own pipeline.

    Each text is run whole and also cut at every added token (as the tokenizer cuts it),
    so the result is a superset of the pieces the model really sees.
    """
    import re

    from tokenizers import Tokenizer

    shell = dict(doc)
    shell["model"] = {"type": "WordLevel", "vocab": {"<unk>": 0}, "unk_token": "<unk>"}
    shell["added_tokens"] = []
    shell["post_processor"] = None
    tok = Tokenizer.from_str(json.dumps(shell))
    added = sorted({t["content"] for t in doc.get("added_tokens") or [] if isinstance(t, dict)
                    and isinstance(t.get("content"), str) and t["content"]}, key=len, reverse=True)
    cut = re.compile("|".join(map(re.escape, added))) if added else None
    pieces: set[str] = set()
    for text in texts:
        segments = [text, *(cut.split(text) if cut else [])]
        for segment in segments:
            if not segment:
                continue
            normal = tok.normalizer.normalize_str(segment) if tok.normalizer is not None else segment
            if tok.pre_tokenizer is not None:
                pieces.update(p for p, _offsets in tok.pre_tokenizer.pre_tokenize_str(normal))
            else:
                pieces.add(normal)
    return pieces


def pruned_tokenizer_doc(doc: Mapping[str, Any], texts: tuple[str, ...]) -> tuple[dict[str, Any], list[int] | None]:
    """A copy of ``doc`` whose model keeps only what can occur when encoding ``texts``; ids unchanged.

    Every token a BPE, WordPiece, WordLevel or Unigram model emits for a piece of text
    is a substring of that piece (less the continuing-subword prefix or end-of-word
    suffix), and a BPE merge can only fire if its result is one. So dropping the other
    vocabulary entries and merges (merges keep their order) changes no encoding of
    ``texts``. Byte-fallback tokens, the unknown token and the added tokens are kept.
    Unigram ids are positions, so for Unigram the second value maps pruned ids back
    to the file's ids; otherwise it is None.
    """
    parts = model_parts(doc)
    model = dict(doc["model"])
    prefix = str(model.get("continuing_subword_prefix") or "")
    suffix = str(model.get("end_of_word_suffix") or "")
    longest = max(map(len, parts.vocab), default=0)
    subs: set[str] = set()
    for piece in _pieces(doc, texts):
        n = len(piece)
        for i in range(n):
            subs.update(piece[i:j] for j in range(i + 1, min(n, i + longest) + 1))
    keep_always = {str(model.get("unk_token") or "")}
    keep_always.update(t["content"] for t in doc.get("added_tokens") or [] if isinstance(t, dict)
                       and isinstance(t.get("content"), str))

    def relevant(token: str) -> bool:
        core = token
        if prefix and core.startswith(prefix):
            core = core[len(prefix):]
        if suffix and core.endswith(suffix):
            core = core[: -len(suffix)]
        return core in subs or token in subs or token in keep_always or (
            token.startswith("<0x") and len(token) == 6 and token.endswith(">"))

    out = dict(doc)
    id_map: list[int] | None = None
    if parts.type == "Unigram":
        entries = doc["model"]["vocab"]
        kept_positions = [i for i, (piece, _score) in enumerate(entries) if relevant(piece)]
        unk = model.get("unk_id")
        if isinstance(unk, int) and 0 <= unk < len(entries) and unk not in kept_positions:
            kept_positions = sorted([*kept_positions, unk])
        model["vocab"] = [entries[i] for i in kept_positions]
        if isinstance(unk, int):
            model["unk_id"] = kept_positions.index(unk) if unk in kept_positions else None
        id_map = kept_positions
    else:
        vocab = {t: i for t, i in parts.vocab.items() if relevant(t)}
        model["vocab"] = vocab
        if parts.merges is not None:
            kept: list[Any] = []
            for m in parts.merges:
                a, b = _merge_key(m)
                if a + (b[len(prefix):] if prefix and b.startswith(prefix) else b) in vocab:
                    kept.append(m)
            model["merges"] = kept
    out["model"] = model
    return out, id_map


def _drift_findings(old_data: bytes, new_data: bytes, rules: SeverityRules, limits: TokenizerLimits) -> list[Finding]:
    texts = drift_sample()
    try:
        new_enc = encode_sample(new_data, texts)
    except TokenizerLoadError as exc:
        if exc.stage == "load":
            return [rules.finding(
                "tokenizer.load_failed", CATEGORY,
                f"the new tokenizer.json does not load with tokenizers: {_short(exc)}",
                path=TOKENIZER_JSON, evidence={"error": str(exc)[:2000]},
            )]
        return [rules.finding(
            "tokenizer.load_failed", CATEGORY,
            f"the new tokenizer.json loads but fails to encode the sample texts: {_short(exc)}",
            path=TOKENIZER_JSON, evidence={"error": str(exc)[:2000], "type": type(exc.cause).__name__,
                                           "stage": "encode"},
        )]
    try:
        old_enc = encode_sample(old_data, texts)
    except TokenizerLoadError as exc:
        return [rules.finding(
            "tokenizer.drift_skipped", CATEGORY,
            f"tokenization drift not measured: the old tokenizer.json fails to {exc.stage} ({_short(exc)})",
            path=TOKENIZER_JSON, evidence={"error": str(exc)[:2000], "type": type(exc.cause).__name__},
        )]
    drift = _compare_encodings(old_enc, new_enc, texts)
    if not drift.changed:
        return []
    ex = drift.example or {}
    text = ex.get("text", "")
    shown = text if len(text) <= 30 else text[:29] + "…"
    old_ids, new_ids = ex.get("old_ids", []), ex.get("new_ids", [])
    at = next((i for i, (a, b) in enumerate(zip(old_ids, new_ids)) if a != b), min(len(old_ids), len(new_ids)))
    def piece(tokens: list[str], ids: list[int]) -> str:
        return f"{_tok(tokens[at])} ({ids[at]})" if at < len(ids) else "(end)"
    return [rules.finding(
        "tokenizer.drift", CATEGORY,
        f"tokenization changed for {drift.changed} of {drift.total} sample texts ({drift.share:.0%}), "
        f"e.g. {json.dumps(shown, ensure_ascii=False)}: token {at} {piece(ex.get('old_tokens', []), old_ids)} → "
        f"{piece(ex.get('new_tokens', []), new_ids)}",
        path=TOKENIZER_JSON, before=ex.get("old_ids"), after=ex.get("new_ids"),
        evidence={"changed": drift.changed, "total": drift.total, "share": round(drift.share, 4), "example": ex},
    )]


# --------------------------------------------------------------------------- tokenizer_config & co


def _special_content(value: Any) -> Any:
    """``"<s>"`` and ``{"content": "<s>", "lstrip": false, ...}`` name the same token."""
    if isinstance(value, dict) and "content" in value:
        return value["content"]
    return value


def _diff_special_tokens(old: Mapping[str, Any], new: Mapping[str, Any], path: str,
                         rules: SeverityRules) -> list[Finding]:
    findings = []
    for key in SPECIAL_TOKEN_KEYS:
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if before == after:
            continue
        b, a = _special_content(before), _special_content(after)
        if b == a:
            code, summary = "tokenizer.special_token_attributes_changed", f"{key} {fmt_value(a)}: attributes changed"
        else:
            code = SPECIAL_TOKEN_CODES.get(key, "tokenizer.special_token_changed")
            summary = change_summary(key, b, a)
        findings.append(rules.finding(code, CATEGORY, summary, path=path, before=json_value(b), after=json_value(a),
                                      evidence={"key": key, "old": json_value(before), "new": json_value(after)}))
    before = [_special_content(v) for v in old.get("additional_special_tokens") or []]
    after = [_special_content(v) for v in new.get("additional_special_tokens") or []]
    if before != after:
        plus = [t for t in after if t not in before]
        minus = [t for t in before if t not in after]
        parts = []
        if plus:
            parts.append(f"+{len(plus)} ({', '.join(_tok(t) for t in plus[:3])})")
        if minus:
            parts.append(f"-{len(minus)} ({', '.join(_tok(t) for t in minus[:3])})")
        summary = "additional_special_tokens: " + (", ".join(parts) if parts else "re-ordered")
        findings.append(rules.finding("tokenizer.special_token_changed", CATEGORY, summary, path=path,
                                      before=before, after=after, evidence={"key": "additional_special_tokens"}))
    return findings


def _added_tokens_decoder(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    decoder = config.get("added_tokens_decoder")
    if not isinstance(decoder, dict):
        return []
    out = []
    for key, entry in decoder.items():
        if isinstance(entry, dict):
            try:
                out.append({**entry, "id": int(key)})
            except ValueError:
                continue
    return out


def _diff_tokenizer_config(old: Mapping[str, Any], new: Mapping[str, Any], rules: SeverityRules,
                           limits: TokenizerLimits) -> list[Finding]:
    findings = _diff_special_tokens(old, new, TOKENIZER_CONFIG, rules)
    for key in list(old) + [k for k in new if k not in old]:
        if key in CONFIG_SKIP:
            continue
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if before == after and type(before) is type(after):
            continue
        code = CONFIG_KEY_CODES.get(key, "tokenizer.config_value_changed")
        findings.append(rules.finding(code, CATEGORY, change_summary(key, before, after), path=TOKENIZER_CONFIG,
                                      before=json_value(before), after=json_value(after), evidence={"key": key}))
    findings.extend(_diff_added_tokens(_added_tokens_decoder(old), _added_tokens_decoder(new), TOKENIZER_CONFIG,
                                       rules, limits))
    return findings


def _added_tokens_json(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"content": c, "id": i} for c, i in doc.items() if isinstance(i, int)]


# --------------------------------------------------------------------------- the analyser


@analyser(library=lib.TRANSFORMERS, order=40)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    return analyse_tokenizer(change, inputs, rules, DEFAULT_LIMITS)


def analyse_tokenizer(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules,
                      limits: TokenizerLimits = DEFAULT_LIMITS) -> list[Finding]:
    """Findings for every tokenizer file that changed at this revision.

    At the first revision (``change.old is None``) only validity is checked.
    """
    findings: list[Finding] = []
    if file_changed(change, TOKENIZER_JSON):
        findings.extend(_analyse_tokenizer_json(change, inputs, rules, limits))
    if not any(f.code in ("tokenizer.malformed", "tokenizer.too_large") for f in findings):
        findings.extend(_effective_drift(change, inputs, rules, limits))
    side_files = (
        (TOKENIZER_CONFIG, _diff_tokenizer_config),
        (SPECIAL_TOKENS_MAP, lambda o, n, r, lim: _diff_special_tokens(o, n, SPECIAL_TOKENS_MAP, r)),
        (ADDED_TOKENS, lambda o, n, r, lim: _diff_added_tokens(_added_tokens_json(o), _added_tokens_json(n),
                                                                 ADDED_TOKENS, r, lim)),
    )
    for path, differ in side_files:
        if not file_changed(change, path):
            continue
        new = _load_side(inputs, "new", path, cap=limits.config_max_bytes, rules=rules, findings=findings)
        if new is None or change.old is None:
            continue
        old = _load_side(inputs, "old", path, cap=limits.config_max_bytes, rules=None, findings=findings)
        if old is None:
            old = {}  # added at this revision: everything in it is new
        findings.extend(differ(old, new, rules, limits))
    if change.new.get(TOKENIZER_JSON) is not None:
        findings = [_dropped_with_tokenizer_json(f, rules) for f in findings]
    return findings


def _dropped_with_tokenizer_json(finding: Finding, rules: SeverityRules) -> Finding:
    """add_bos_token / add_eos_token: transformers 5 drops them when a tokenizer.json is there."""
    if finding.code != "tokenizer.add_special_tokens_changed" or finding.path != TOKENIZER_CONFIG:
        return finding
    return rules.finding(
        "tokenizer.ignored_by_loader", CATEGORY,
        f"{finding.summary}, with no effect: transformers 5 drops add_bos_token / add_eos_token when a "
        f"{TOKENIZER_JSON} is there (transformers 4's Llama and Gemma fast tokenizers obeyed them), "
        f"so {TOKENIZER_JSON}'s post-processor decides",
        path=TOKENIZER_CONFIG, before=finding.before, after=finding.after,
        evidence={**finding.evidence, "decided_by": TOKENIZER_JSON, "ignored_code": finding.code},
    )


def _load_side(inputs: RevisionInputs, side: str, path: str, *, cap: int, rules: SeverityRules | None,
               findings: list[Finding]) -> dict[str, Any] | None:
    data = inputs.text(side, path)
    if data is None:
        return None
    try:
        return load_json_object(data, max_bytes=cap)
    except JsonTooLarge as exc:
        if rules is not None:
            findings.append(_too_large(rules, path, str(exc), {"limit": cap}))
        return None
    except JsonProblem as exc:
        if rules is not None:
            findings.append(_malformed(rules, path, exc))
        return None


def _malformed(rules: SeverityRules, path: str, exc: Exception) -> Finding:
    return rules.finding("tokenizer.malformed", CATEGORY, f"{path} cannot be parsed: {exc}; loading the tokenizer fails",
                         path=path, evidence={"error": str(exc)})


def _too_large(rules: SeverityRules, path: str, why: str, evidence: dict[str, Any]) -> Finding:
    """Over an analysis cap: the tracker did not look, which says nothing about whether it loads."""
    return rules.finding(
        "tokenizer.too_large", CATEGORY,
        f"{path} is too large to analyse: {why}",
        path=path, evidence=evidence,
    )


def _too_many_bytes(rules: SeverityRules, size: int, limits: TokenizerLimits) -> Finding:
    return _too_large(rules, TOKENIZER_JSON, f"{size / MB:.1f} MB, over the {limits.max_bytes / MB:.0f} MB limit",
                      {"size": size, "limit": limits.max_bytes})


def _too_many_items(rules: SeverityRules, exc: JsonTooLarge) -> Finding:
    why = str(exc).removeprefix("unreadable: ")
    if why.startswith("JSON with more than"):
        why = f"more than {MAX_JSON_ITEMS:,} JSON elements, over the analysis limit"
    return _too_large(rules, TOKENIZER_JSON, why, {"error": why, "limit": MAX_JSON_ITEMS})


def _analyse_tokenizer_json(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules,
                            limits: TokenizerLimits) -> list[Finding]:
    entry = change.new.get(TOKENIZER_JSON)
    if entry is None:
        return []  # removed: the files analyser reports it
    if entry.size > limits.max_bytes:
        return [_too_many_bytes(rules, entry.size, limits)]  # not even read
    new_data = inputs.text("new", TOKENIZER_JSON)
    if new_data is None:
        return []
    if len(new_data) > limits.max_bytes:
        return [_too_many_bytes(rules, len(new_data), limits)]
    try:
        new = parse_tokenizer_json(new_data, limits.max_bytes)
        model_parts(new)
    except JsonTooLarge as exc:
        return [_too_many_items(rules, exc)]
    except JsonProblem as exc:
        return [_malformed(rules, TOKENIZER_JSON, exc)]
    if change.old is None:
        return []
    old_entry = change.old.get(TOKENIZER_JSON)
    if old_entry is None or old_entry.size > limits.max_bytes:
        return []
    old_data = inputs.text("old", TOKENIZER_JSON)
    if old_data is None or len(old_data) > limits.max_bytes:
        return []
    try:
        old = parse_tokenizer_json(old_data, limits.max_bytes)
        model_parts(old)
    except JsonProblem:
        return []  # nothing to compare against; the old revision's problem was reported then
    try:  # once per analyser: a later round (it reads tokenizer_config.json next) keeps the diff
        findings = inputs.remembered(("diff_tokenizer_json", limits), lambda: diff_tokenizer_json(old, new, rules, limits))
    except JsonProblem as exc:
        return [_malformed(rules, TOKENIZER_JSON, exc)]
    configs = (_config_or_empty(inputs, "old", limits), _config_or_empty(inputs, "new", limits))
    return [_ignored_if_overridden(f, configs, rules) for f in findings]


def _config_or_empty(inputs: RevisionInputs, side: str, limits: TokenizerLimits) -> dict[str, Any]:
    """tokenizer_config.json of one side, or {} (its own problems are reported by its own diff)."""
    data = inputs.text(side, TOKENIZER_CONFIG)
    if data is None:
        return {}
    try:
        return load_json_object(data, max_bytes=limits.config_max_bytes)
    except JsonProblem:
        return {}


def _ignored_if_overridden(finding: Finding, configs: tuple[dict[str, Any], dict[str, Any]],
                           rules: SeverityRules) -> Finding:
    """A tokenizer.json part the loader rebuilds from tokenizer_config.json on both sides changes nothing."""
    part = next((p for p, c in COMPONENT_CODES.items() if c == finding.code and p in OVERRIDABLE), None)
    if part is None:
        return finding
    if any(precedence(c).winner(part) != TOKENIZER_CONFIG for c in configs):
        return finding
    v4 = "as did transformers 4" if part == "normalizer" else "transformers 4 obeyed tokenizer.json's"
    return rules.finding(
        "tokenizer.ignored_by_loader", CATEGORY,
        f"{finding.summary}, with no effect: transformers 5 rebuilds {tokenizer_class(configs[1])}'s {part} "
        f"from {TOKENIZER_CONFIG} ({v4}), so {TOKENIZER_CONFIG} decides",
        path=TOKENIZER_JSON, before=finding.before, after=finding.after,
        evidence={**finding.evidence, "part": part, "decided_by": TOKENIZER_CONFIG, "ignored_code": finding.code},
    )


def _tokenizer_doc(inputs: RevisionInputs, side: str, snapshot_size: int | None,
                   limits: TokenizerLimits) -> tuple[bytes, dict[str, Any]] | None:
    if snapshot_size is None or snapshot_size > limits.max_bytes:
        return None
    data = inputs.text(side, TOKENIZER_JSON)
    if data is None or len(data) > limits.max_bytes:
        return None
    try:
        doc = parse_tokenizer_json(data, limits.max_bytes)
        model_parts(doc)
    except JsonProblem:
        return None
    return data, doc


def effective_bytes(data: bytes, doc: dict[str, Any], config: dict[str, Any], lowercase: bool = False) -> bytes:
    """The tokenizer.json the loader really builds (the file itself when it obeys all of it)."""
    effective = effective_tokenizer(doc, config, lowercase)
    return data if effective == doc else dumps(effective)


def _effective_drift(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules,
                     limits: TokenizerLimits) -> list[Finding]:
    """Drift of the tokenizer the loader builds from tokenizer.json and tokenizer_config.json together."""
    if change.old is None or not (file_changed(change, TOKENIZER_JSON) or file_changed(change, TOKENIZER_CONFIG)):
        return []
    old_entry, new_entry = change.old.get(TOKENIZER_JSON), change.new.get(TOKENIZER_JSON)
    new = _tokenizer_doc(inputs, "new", new_entry.size if new_entry else None, limits)
    old = _tokenizer_doc(inputs, "old", old_entry.size if old_entry else None, limits)
    if new is None or old is None:
        return []
    configs = (_config_or_empty(inputs, "old", limits), _config_or_empty(inputs, "new", limits))
    old_bytes = effective_bytes(old[0], old[1], configs[0])
    new_bytes = effective_bytes(new[0], new[1], configs[1])
    if old_bytes == new_bytes:
        return []
    found = _drift_findings(old_bytes, new_bytes, rules, limits)
    notes = list(dict.fromkeys(precedence(configs[0]).notes + precedence(configs[1]).notes))
    if not notes:
        return found
    return [dataclasses.replace(f, evidence={**f.evidence, "precedence": notes}) for f in found]
