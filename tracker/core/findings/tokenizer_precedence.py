"""Which tokenizer file the loader obeys, and the tokenizer it really builds.

``tokenizer.json`` is not always what runs. transformers 5 builds a tokenizer of a class that has
its own ``__init__`` from scratch and takes only some parts from ``tokenizer.json``:

- the BERT family (``BertTokenizer`` and its aliases and subclasses: DistilBERT, ELECTRA,
  MobileBERT, SqueezeBERT, LayoutLM, ...) rebuilds the normalizer from ``tokenizer_config.json``
  (``do_lower_case``, default true; ``strip_accents``; ``tokenize_chinese_chars``) and the
  post-processor (``[CLS] $A [SEP]`` from ``cls_token``/``sep_token``), ignoring both parts of
  ``tokenizer.json``; the vocabulary and the added tokens come from ``tokenizer.json``.
  transformers 4 (``BertTokenizerFast``) also rebuilt the normalizer from ``tokenizer_config.json``,
  but obeyed ``tokenizer.json``'s post-processor.
- any class loaded with a ``tokenizer.json``: ``add_bos_token`` / ``add_eos_token`` in
  ``tokenizer_config.json`` are dropped before the tokenizer is built, so ``tokenizer.json``'s
  post-processor decides (transformers 4's Llama and Gemma fast tokenizers rebuilt it from them).

:func:`effective_tokenizer` applies these rules to a parsed ``tokenizer.json``, so drift is measured
with the tokenizer users get. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"

BERT_FAMILY = frozenset(
    f"{name}{suffix}"
    for name in ("Bert", "DistilBert", "Electra", "MobileBert", "SqueezeBert", "LayoutLM", "Lxmert", "RetriBert")
    for suffix in ("Tokenizer", "TokenizerFast")
)
"""Classes that are ``BertTokenizer`` (an alias or a subclass) in transformers 5."""

NORMALIZER_KEYS = ("do_lower_case", "strip_accents", "tokenize_chinese_chars")


@dataclass(frozen=True)
class Precedence:
    """Which file decides each part on one side: ``{"normalizer": "tokenizer_config.json", ...}``."""

    decides: Mapping[str, str]
    notes: tuple[str, ...] = field(default=())

    def winner(self, part: str) -> str:
        return self.decides.get(part, TOKENIZER_JSON)


def tokenizer_class(config: Mapping[str, Any]) -> str:
    value = config.get("tokenizer_class")
    return value if isinstance(value, str) else ""


def is_bert_family(config: Mapping[str, Any]) -> bool:
    return tokenizer_class(config) in BERT_FAMILY


def precedence(config: Mapping[str, Any]) -> Precedence:
    """Which file decides the normalizer and the post-processor, under transformers 5."""
    decides: dict[str, str] = {}
    notes: list[str] = []
    if is_bert_family(config):
        decides["normalizer"] = TOKENIZER_CONFIG
        decides["post_processor"] = TOKENIZER_CONFIG
        notes.append(f"transformers 5 rebuilds {tokenizer_class(config)}'s normalizer and post-processor from "
                     f"{TOKENIZER_CONFIG} (transformers 4 rebuilt the normalizer only)")
    return Precedence(decides, tuple(notes))


def _special(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def bert_normalizer(config: Mapping[str, Any]) -> dict[str, Any]:
    """The normalizer ``BertTokenizer.__init__`` builds from ``tokenizer_config.json``."""
    lower = config.get("do_lower_case", True)
    accents = config.get("strip_accents")
    chinese = config.get("tokenize_chinese_chars", True)
    return {"type": "BertNormalizer", "clean_text": True,
            "handle_chinese_chars": chinese if isinstance(chinese, bool) else True,
            "strip_accents": accents if isinstance(accents, bool) else None,
            "lowercase": lower if isinstance(lower, bool) else True}


def _ids(doc: Mapping[str, Any]) -> dict[str, int]:
    model = doc.get("model")
    vocab = model.get("vocab") if isinstance(model, dict) else None
    ids = dict(vocab) if isinstance(vocab, dict) else {}
    for t in doc.get("added_tokens") or []:
        if isinstance(t, dict) and isinstance(t.get("content"), str) and isinstance(t.get("id"), int):
            ids[t["content"]] = t["id"]
    return ids


def _template(first: list[str], last: list[str], ids: Mapping[str, int]) -> dict[str, Any] | None:
    """A ``TemplateProcessing`` adding ``first`` before and ``last`` after each input; None if a token is unknown."""
    tokens = [*first, *last]
    if any(t not in ids for t in tokens):
        return None

    def special(t: str, type_id: int) -> dict[str, Any]:
        return {"SpecialToken": {"id": t, "type_id": type_id}}

    def seq(name: str, type_id: int) -> dict[str, Any]:
        return {"Sequence": {"id": name, "type_id": type_id}}

    single = [special(t, 0) for t in first] + [seq("A", 0)] + [special(t, 0) for t in last]
    pair = single + [seq("B", 1)] + [special(t, 1) for t in last]
    return {"type": "TemplateProcessing", "single": single, "pair": pair,
            "special_tokens": {t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in dict.fromkeys(tokens)}}


def _post_processor(doc: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
    """The BERT family's ``[CLS] $A [SEP]``, from ``cls_token`` and ``sep_token``."""
    cls = _special(config.get("cls_token")) or "[CLS]"
    sep = _special(config.get("sep_token")) or "[SEP]"
    return _template([cls], [sep], _ids(doc)) or doc.get("post_processor")


def effective_tokenizer(doc: Mapping[str, Any], config: Mapping[str, Any] | None,
                        lowercase: bool = False) -> dict[str, Any]:
    """``doc`` as transformers 5 really builds it with ``config``; ``lowercase`` adds what
    sentence-transformers' ``do_lower_case`` adds (a Lowercase normalizer, unless one is there)."""
    out = dict(doc)
    config = config or {}
    rules = precedence(config)
    if rules.winner("normalizer") == TOKENIZER_CONFIG:
        out["normalizer"] = bert_normalizer(config)
    if rules.winner("post_processor") == TOKENIZER_CONFIG:
        out["post_processor"] = _post_processor(doc, config)
    if lowercase and not lowercases(out):
        current = out.get("normalizer")
        rest = current.get("normalizers", []) if isinstance(current, dict) and current.get("type") == "Sequence" \
            else [current] if current else []
        out["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}, *rest]}
    return out


def _normalizers(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    current = doc.get("normalizer")
    if not isinstance(current, dict):
        return []
    if current.get("type") == "Sequence":
        return [n for n in current.get("normalizers") or [] if isinstance(n, dict)]
    return [current]


def lowercases(doc: Mapping[str, Any]) -> bool:
    """Whether the normalizer lowercases every input (a ``Lowercase``, or a ``BertNormalizer`` with lowercase)."""
    return any(n.get("type") == "Lowercase" or (n.get("type") == "BertNormalizer" and n.get("lowercase") is True)
               for n in _normalizers(doc))


def added_around(doc: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The special tokens the post-processor puts before and after every single input."""
    post = doc.get("post_processor")
    if not isinstance(post, dict):
        return (), ()
    kind = post.get("type")
    if kind == "TemplateProcessing":
        single = post.get("single") or []
        names = [("A" if "Sequence" in p else str((p.get("SpecialToken") or {}).get("id")))
                 for p in single if isinstance(p, dict)]
        at = names.index("A") if "A" in names else len(names)
        return tuple(names[:at]), tuple(names[at + 1:])
    if kind in ("BertProcessing", "RobertaProcessing"):
        cls, sep = post.get("cls"), post.get("sep")
        return ((str(cls[0]),) if isinstance(cls, list) and cls else (),
                (str(sep[0]),) if isinstance(sep, list) and sep else ())
    if kind == "Sequence":
        first: tuple[str, ...] = ()
        last: tuple[str, ...] = ()
        for p in post.get("processors") or []:
            if isinstance(p, dict):
                a, b = added_around({"post_processor": p})
                first, last = first + a, last + b
        return first, last
    return (), ()


def dumps(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode("utf-8")
