"""sentence-transformers: the module pipeline, and whether old embeddings still compare with new ones.

A sentence-transformers repo is a pipeline listed in ``modules.json`` (Transformer → Pooling →
Dense → Normalize ...), each module configured in its own folder, plus
``sentence_bert_config.json`` (``max_seq_length``, ``do_lower_case``) and
``config_sentence_transformers.json`` (``prompts``, ``default_prompt_name``,
``similarity_fn_name``, ``truncate_dim``). Any change that moves the vectors it produces makes
every vector a user already stored in an index incomparable with the new ones: the
``embeddings.incompatible`` verdict (critical) says so, once per revision, naming each reason.

Codes (category ``sentence_transformers``): ``modules_changed``, ``normalize_changed``,
``pooling_changed``, ``dense_changed``, ``max_seq_length_changed``, ``do_lower_case_changed``,
``prompts_changed``, ``similarity_changed``, ``truncate_dim_changed``, ``malformed``.
Every file read is bounded (bytes, JSON depth and elements, modules). Pure: reads through ``sources``.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from tracker.core.findings.config import Unreadable, change_summary, fmt_value, read_side_json
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.weights import embedding_cause
from tracker.core.model import Finding, RevisionChange, RevisionSources, Snapshot

CATEGORY = "sentence_transformers"
MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
MAX_BYTES = 1024 * 1024  # every sentence-transformers config is a few hundred bytes
MAX_MODULES = 64  # real pipelines have 2-5 modules
WEIGHT_NAMES = ("model.safetensors", "pytorch_model.bin")
POOLING_MODES = {  # config key -> the mode's name in sentence-transformers
    "pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # folder relative to the repo root; "" for the root
    type: str

    @property
    def kind(self) -> str:
        """``Pooling`` for ``sentence_transformers.models.Pooling``."""
        return self.type.rsplit(".", 1)[-1]


def _json(sources: RevisionSources, snapshot: Snapshot, side: str, path: str, *, array: bool = False) -> Any:
    return read_side_json(sources, snapshot, side, path, max_bytes=MAX_BYTES, array=array)


def _safe_folder(path: Any) -> str:
    if not isinstance(path, str) or len(path) > 200:
        raise Unreadable(f"{MODULES}: a module path is not a short string")
    clean = path.strip("/")
    if clean.startswith("/") or any(p in ("..", ".") for p in clean.split("/") if p) or "\\" in clean \
            or any(ord(c) < 32 for c in clean):
        raise Unreadable(f"{MODULES}: module path {path!r:.60} leaves the repo")
    return clean


def read_modules(sources: RevisionSources, snapshot: Snapshot, side: str) -> list[Module] | None:
    """The pipeline ``modules.json`` lists, in order; None when the revision has none."""
    value = _json(sources, snapshot, side, MODULES, array=True)
    if value is None:
        return None
    if not isinstance(value, list):
        raise Unreadable(f"{MODULES}: expected a list of modules")
    if len(value) > MAX_MODULES:
        raise Unreadable(f"{MODULES} lists {len(value):,} modules, over the limit of {MAX_MODULES}; not read")
    modules = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise Unreadable(f"{MODULES}: each module needs a 'type'")
        modules.append(Module(name=str(item.get("name", ""))[:100], path=_safe_folder(item.get("path", "")),
                              type=item["type"][:200]))
    return modules  # loaded in list order


def pipeline_text(modules: list[Module] | None) -> str:
    """``Transformer → Pooling → Normalize``."""
    return " → ".join(m.kind for m in modules) if modules else "(none)"


def _pooling_mode(config: dict[str, Any]) -> str:
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        return mode
    modes = [name for key, name in POOLING_MODES.items() if config.get(key) is True]
    return "+".join(modes) or "(none)"


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if folder else name


@dataclass
class _Collect:
    rules: SeverityRules
    findings: list[Finding]
    reasons: list[str]
    weights: dict[str, Any] = field(default_factory=dict)  # weight file -> its measured delta (evidence)

    def add(self, code: str, summary: str, path: str, before: Any = None, after: Any = None, *,
            reason: str | None = None, **evidence: Any) -> None:
        self.findings.append(self.rules.finding(code, CATEGORY, summary, path=path, before=before, after=after,
                                                evidence=evidence))
        if reason:
            self.reasons.append(reason)


def _weights_changed(change: RevisionChange, folder: str) -> list[str]:
    assert change.old is not None
    out = []
    for name in WEIGHT_NAMES:
        path = _join(folder, name)
        a, b = change.old.get(path), change.new.get(path)
        if a is not None and b is not None and a.content_id != b.content_id:
            out.append(path)
    return out


def _weight_causes(change: RevisionChange, sources: RevisionSources, folder: str, out: _Collect, *, dense: bool) -> None:
    """A module's re-uploaded weights, as causes of the verdict unless measured within numeric noise.

    The weights finding itself comes from weights.py; the measurement goes into the verdict's evidence.
    """
    for weights in _weights_changed(change, folder):
        cause = embedding_cause(change, sources, weights)
        if cause is None:
            continue
        if cause[1]:
            out.weights[weights] = cause[1]
        if dense:
            out.add("sentence_transformers.dense_changed", f"{weights} re-uploaded: the Dense layer's weights changed",
                    weights, reason=cause[0])
        else:
            out.reasons.append(cause[0])


def _compare_module_configs(change: RevisionChange, sources: RevisionSources, old: Module, new: Module,
                            out: _Collect) -> None:
    assert change.old is not None
    path = _join(new.path, "config.json")
    old_path = _join(old.path, "config.json")
    a = _json(sources, change.old, "old", old_path) or {}
    b = _json(sources, change.new, "new", path) or {}
    if new.kind == "Pooling":
        mode_a, mode_b = _pooling_mode(a), _pooling_mode(b)
        if mode_a != mode_b:
            out.add("sentence_transformers.pooling_changed", f"{path}: pooling {mode_a} → {mode_b}", path,
                    mode_a, mode_b, reason=f"pooling {mode_a} → {mode_b}", key="pooling_mode")
        for key in ("word_embedding_dimension", "include_prompt"):
            if a.get(key) != b.get(key):
                out.add("sentence_transformers.pooling_changed", f"{path}: {change_summary(key, a.get(key), b.get(key))}",
                        path, a.get(key), b.get(key), reason=change_summary(key, a.get(key), b.get(key)), key=key)
    elif new.kind == "Dense":
        for key in ("in_features", "out_features", "bias", "activation_function"):
            if a.get(key) != b.get(key):
                text = change_summary(key, a.get(key), b.get(key))
                out.add("sentence_transformers.dense_changed", f"{path}: {text}", path, a.get(key), b.get(key),
                        reason=f"Dense {text}", key=key)
        _weight_causes(change, sources, new.path, out, dense=True)
    elif new.kind == "Transformer":
        cfg_a = _json(sources, change.old, "old", _join(old.path, "sentence_bert_config.json")) or {}
        cfg_b = _json(sources, change.new, "new", _join(new.path, "sentence_bert_config.json")) or {}
        cfg_path = _join(new.path, "sentence_bert_config.json")
        if cfg_a.get("max_seq_length") != cfg_b.get("max_seq_length"):
            text = change_summary("max_seq_length", cfg_a.get("max_seq_length"), cfg_b.get("max_seq_length"))
            out.add("sentence_transformers.max_seq_length_changed", f"{cfg_path}: {text}", cfg_path,
                    cfg_a.get("max_seq_length"), cfg_b.get("max_seq_length"),
                    reason=f"{text}, so longer texts are truncated elsewhere", key="max_seq_length")
        if bool(cfg_a.get("do_lower_case")) != bool(cfg_b.get("do_lower_case")):
            text = change_summary("do_lower_case", cfg_a.get("do_lower_case"), cfg_b.get("do_lower_case"))
            out.add("sentence_transformers.do_lower_case_changed", f"{cfg_path}: {text}", cfg_path,
                    cfg_a.get("do_lower_case"), cfg_b.get("do_lower_case"), reason=text, key="do_lower_case")
        _weight_causes(change, sources, new.path, out, dense=False)


def _compare_pipelines(old: list[Module], new: list[Module], path: str, out: _Collect) -> list[tuple[Module, Module]]:
    """Findings for the module list itself; the pairs of modules to compare config by config."""
    kinds_a, kinds_b = [m.kind for m in old], [m.kind for m in new]
    before, after = pipeline_text(old), pipeline_text(new)
    if kinds_a != kinds_b or [m.type for m in old] != [m.type for m in new]:
        without_a = [k for k in kinds_a if k != "Normalize"]
        without_b = [k for k in kinds_b if k != "Normalize"]
        if without_a == without_b and [m.type for m in old if m.kind != "Normalize"] == \
                [m.type for m in new if m.kind != "Normalize"]:
            what = "removed: embeddings are no longer unit length" if "Normalize" in kinds_a else \
                "added: embeddings are now unit length"
            out.add("sentence_transformers.normalize_changed", f"{path}: Normalize module {what} ({before} ⇒ {after})",
                    path, before, after, reason=f"Normalize module {what.split(':')[0]}")
        else:
            added = [k for k in kinds_b if k not in kinds_a]
            removed = [k for k in kinds_a if k not in kinds_b]
            parts = ([f"{', '.join(added)} added"] if added else []) + ([f"{', '.join(removed)} removed"] if removed else [])
            retyped = [f"{a.type} → {b.type}" for a, b in zip(old, new, strict=False) if a.kind == b.kind and a.type != b.type]
            parts += [f"type {t}" for t in retyped]
            if not parts:
                parts = ["modules reordered"]
            out.add("sentence_transformers.modules_changed", f"{path}: {'; '.join(parts)} ({before} ⇒ {after})", path,
                    before, after, reason=f"module pipeline {before} ⇒ {after}")
    pairs = []
    by_kind_old: dict[str, list[Module]] = {}
    for m in old:
        by_kind_old.setdefault(m.kind, []).append(m)
    for m in new:
        if by_kind_old.get(m.kind):
            pairs.append((by_kind_old[m.kind].pop(0), m))
    return pairs


def _compare_st_config(change: RevisionChange, sources: RevisionSources, out: _Collect) -> None:
    assert change.old is not None
    a = _json(sources, change.old, "old", ST_CONFIG) or {}
    b = _json(sources, change.new, "new", ST_CONFIG) or {}
    prompts_a: dict[str, Any] = a["prompts"] if isinstance(a.get("prompts"), dict) else {}
    prompts_b: dict[str, Any] = b["prompts"] if isinstance(b.get("prompts"), dict) else {}
    for name in list(prompts_a) + [n for n in prompts_b if n not in prompts_a]:
        pa, pb = prompts_a.get(name), prompts_b.get(name)
        if pa != pb:
            text = (f"prompt {name!r} added: {fmt_value(pb)}" if pa is None else f"prompt {name!r} removed (was {fmt_value(pa)})"
                    if pb is None else f"prompt {name!r}: {pa!r} → {pb!r}")
            out.add("sentence_transformers.prompts_changed", f"{ST_CONFIG}: {text}", ST_CONFIG, pa, pb,
                    reason=text, key=f"prompts.{name}")
    if a.get("default_prompt_name") != b.get("default_prompt_name"):
        text = change_summary("default_prompt_name", a.get("default_prompt_name"), b.get("default_prompt_name"))
        out.add("sentence_transformers.prompts_changed", f"{ST_CONFIG}: {text}", ST_CONFIG,
                a.get("default_prompt_name"), b.get("default_prompt_name"), reason=text, key="default_prompt_name")
    if (a.get("similarity_fn_name") or "cosine") != (b.get("similarity_fn_name") or "cosine"):
        text = change_summary("similarity_fn_name", a.get("similarity_fn_name") or "cosine",
                              b.get("similarity_fn_name") or "cosine")
        # the vectors are the same: scores change, stored vectors stay comparable
        out.add("sentence_transformers.similarity_changed", f"{ST_CONFIG}: {text}", ST_CONFIG,
                a.get("similarity_fn_name"), b.get("similarity_fn_name"), key="similarity_fn_name")
    if a.get("truncate_dim") != b.get("truncate_dim"):
        text = change_summary("truncate_dim", a.get("truncate_dim"), b.get("truncate_dim"))
        out.add("sentence_transformers.truncate_dim_changed", f"{ST_CONFIG}: {text}", ST_CONFIG,
                a.get("truncate_dim"), b.get("truncate_dim"), reason=text, key="truncate_dim")


def _touched(change: RevisionChange) -> bool:
    """Whether anything sentence-transformers reads changed (the file lists alone say so)."""
    assert change.old is not None
    return {f.path: f.content_id for f in change.old.files} != {f.path: f.content_id for f in change.new.files}


def analyse(change: RevisionChange, sources: RevisionSources, rules: SeverityRules) -> list[Finding]:
    out = _Collect(rules, [], [])
    try:
        new_modules = read_modules(sources, change.new, "new")
    except Unreadable as exc:
        return [rules.finding("sentence_transformers.malformed", CATEGORY,
                              f"{exc}; sentence-transformers cannot load the model", path=MODULES,
                              evidence={"error": str(exc)})]
    if change.old is None or not _touched(change):
        return []
    try:
        old_modules = read_modules(sources, change.old, "old")
    except Unreadable:
        return []  # reported at the revision that broke it
    if old_modules is None and new_modules is None:
        return []
    try:
        pairs = _compare_pipelines(old_modules or [], new_modules or [], MODULES, out)
        for old, new in pairs:
            _compare_module_configs(change, sources, old, new, out)
        _compare_st_config(change, sources, out)
    except Unreadable as exc:
        out.add("sentence_transformers.malformed", f"{exc}; sentence-transformers cannot load the model", MODULES,
                error=str(exc))
    if out.reasons:
        reasons = list(dict.fromkeys(out.reasons))
        out.findings.insert(0, rules.finding(
            "embeddings.incompatible", "embeddings",
            "stored embeddings are no longer comparable with new ones: " + "; ".join(reasons)
            + "; re-embed the index",
            path=MODULES, before=pipeline_text(old_modules), after=pipeline_text(new_modules),
            evidence={"reasons": reasons, "pipeline_before": [m.type for m in old_modules or []],
                      "pipeline_after": [m.type for m in new_modules or []],
                      **({"weights": out.weights} if out.weights else {})},
        ))
    return out.findings
