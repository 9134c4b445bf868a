"""sentence-transformers: the module pipeline, and whether old embeddings still compare with new ones.

A sentence-transformers repo is a pipeline listed in ``modules.json`` (Transformer → Pooling →
Dense → Normalize ...), each module configured in its own folder, plus
``sentence_bert_config.json`` (``max_seq_length``, ``do_lower_case``) and
``config_sentence_transformers.json`` (``prompts``, ``default_prompt_name``,
``similarity_fn_name``, ``truncate_dim``). Any change that moves the vectors it produces makes
every vector a user already stored in an index incomparable with the new ones: the
``embeddings.incompatible`` verdict (critical) says so, once per revision, naming each reason.

The verdict answers one question: must stored vectors be recomputed? Its causes are what moves the
vectors of stored items (default encodes and document-side prompts): the pooling, Normalize, Dense
layers, ``truncate_dim``, ``max_seq_length`` where the drift sample has longer texts, the effective
tokenization (:mod:`st_tokenization`), the default or a document-side prompt, and the weights
(:func:`weight_causes`). A query-side prompt changes queries only (``query_prompt_changed``).
Both pooling schemas (``pooling_mode_*_tokens`` booleans; the compact ``pooling_mode`` of 5.4+) and
every module type path (``sentence_transformers.models.Pooling``, 5.4's
``sentence_transformers.sentence_transformer.modules.pooling.Pooling``, 6.x's ``base.modules``) read
into one model; a re-save into the other schema alone is ``schema_migrated``.

Codes (category ``sentence_transformers``): ``modules_changed``, ``normalize_changed``,
``pooling_changed``, ``dense_changed``, ``max_seq_length_changed``, ``do_lower_case_changed``,
``do_lower_case_no_effect``, ``prompts_changed``, ``query_prompt_changed``, ``similarity_changed``,
``truncate_dim_changed``, ``schema_migrated``, ``malformed``.
Every file read is bounded (bytes, JSON depth and elements, modules). Pure: reads through ``inputs``.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from tracker.core.findings import libraries as lib
from tracker.core.findings import st_tokenization
from tracker.core.findings.config import Unreadable, change_summary, fmt_value, read_side_json
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.tokenizer import TokenizerLoadError, drift_sample, encode_sample
from tracker.core.findings.tokenizer_precedence import effective_tokenizer, lowercases
from tracker.core.findings.weights import embedding_cause
from tracker.core.model import Finding, RevisionChange, Snapshot

CATEGORY = "sentence_transformers"
MODULES = "modules.json"
ST_CONFIG = "config_sentence_transformers.json"
BERT_CONFIG = "sentence_bert_config.json"
MAX_BYTES = 1024 * 1024  # every sentence-transformers config is a few hundred bytes
MAX_MODULES = 64  # real pipelines have 2-5 modules
WEIGHT_NAMES = ("model.safetensors", "pytorch_model.bin")
# Classic schema: one boolean per mode, concatenated in this order (sentence-transformers' own).
POOLING_MODES = {
    "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max", "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# Where sentence-transformers' own modules live: ``models`` (to 5.3), ``sentence_transformer.modules`` (5.4),
# ``base.modules`` (6.x, Transformer, Dense, Normalize, Router...), and the sparse encoder's.
KNOWN_PACKAGES = (
    "sentence_transformers.models.", "sentence_transformers.sentence_transformer.modules.",
    "sentence_transformers.base.modules.", "sentence_transformers.sparse_encoder.models.",
    "sentence_transformers.sparse_encoder.modules.",
)
# snake_case module files of 5.4+ whose class name is not their CamelCase spelling
FILE_CLASSES = {"bow": "BoW", "cnn": "CNN", "lstm": "LSTM", "clip_model": "CLIPModel", "mlm_transformer": "MLMTransformer"}
QUERY_SIDE = re.compile(r"quer|question", re.IGNORECASE)
"""Prompt names used for queries only (``query``, ``search_query``, ``retrieval.query``, ``question``)."""


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # folder relative to the repo root; "" for the root
    type: str

    @property
    def kind(self) -> str:
        """``Pooling`` for ``sentence_transformers.models.Pooling`` and for
        ``sentence_transformers.sentence_transformer.modules.pooling.Pooling`` alike."""
        return module_kind(self.type)

    @property
    def identity(self) -> str:
        """What loads: the kind for sentence-transformers' own modules (any of their paths), else the type."""
        return f"st:{self.kind}" if known_type(self.type) else self.type


def known_type(type_path: str) -> bool:
    return type_path.startswith(KNOWN_PACKAGES)


def module_kind(type_path: str) -> str:
    last = type_path.rsplit(".", 1)[-1]
    if known_type(type_path) and last[:1].islower():  # a module file named without its class
        return FILE_CLASSES.get(last, "".join(part.capitalize() for part in last.split("_")))
    return last


def _json(inputs: RevisionInputs, snapshot: Snapshot, side: str, path: str, *, array: bool = False) -> Any:
    return read_side_json(inputs, snapshot, side, path, max_bytes=MAX_BYTES, array=array)


def _safe_folder(path: Any) -> str:
    """A module folder inside the repo; absolute paths, ``..``, ``.`` and backslashes are refused as written."""
    if not isinstance(path, str) or len(path) > 200:
        raise Unreadable(f"{MODULES}: a module path is not a short string")
    if path.startswith("/") or "\\" in path or any(ord(c) < 32 for c in path) \
            or any(p in ("..", ".") for p in path.split("/")):
        raise Unreadable(f"{MODULES}: module path {path!r:.60} leaves the repo")
    return path.rstrip("/")


def read_modules(inputs: RevisionInputs, snapshot: Snapshot, side: str) -> list[Module] | None:
    """The pipeline ``modules.json`` lists, in order; None when the revision has none."""
    value = _json(inputs, snapshot, side, MODULES, array=True)
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


@dataclass(frozen=True)
class PoolingSpec:
    """A Pooling module's meaning, whichever schema wrote it."""

    modes: tuple[str, ...]
    dimension: Any
    include_prompt: Any
    schema: str  # "classic" (pooling_mode_*_tokens booleans) or "compact" (sentence-transformers >= 5.4)

    @property
    def mode(self) -> str:
        return "+".join(self.modes)


def pooling_spec(config: dict[str, Any]) -> PoolingSpec:
    """Both schemas into one model, as sentence-transformers reads them (no mode set means mean)."""
    mode = config.get("pooling_mode")
    if isinstance(mode, str):
        modes: tuple[str, ...] = (mode,)
    elif isinstance(mode, list):
        modes = tuple(str(m) for m in mode)
    else:
        modes = tuple(name for key, name in POOLING_MODES.items() if config.get(key) is True) or ("mean",)
    compact = "pooling_mode" in config or "embedding_dimension" in config
    dimension = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    return PoolingSpec(modes=modes, dimension=dimension, include_prompt=config.get("include_prompt", True),
                       schema="compact" if compact else "classic")


def _join(folder: str, name: str) -> str:
    return posixpath.join(folder, name) if folder else name


def _where(folder: str) -> str:
    return repr(folder) if folder else "the repo root"


@dataclass
class _Collect:
    rules: SeverityRules
    change: RevisionChange
    inputs: RevisionInputs
    findings: list[Finding]
    reasons: list[str]
    migrated: list[str] = field(default_factory=list)
    weights: dict[str, Any] = field(default_factory=dict)  # weight file -> its measured delta (evidence)
    pooling: str = ""  # the new side's pooling mode, once read
    transformer: str | None = None  # the new side's Transformer folder
    _tokenizer: list[st_tokenization.Side | None] = field(default_factory=list)

    def new_tokenizer(self) -> st_tokenization.Side | None:
        """The new side's effective tokenizer (read once), for measuring prompts."""
        if not self._tokenizer:
            self._tokenizer.append(None if self.transformer is None else
                                   st_tokenization.read_side(self.inputs, self.change.new, "new", self.transformer))
        return self._tokenizer[0]

    def add(self, code: str, summary: str, path: str, before: Any = None, after: Any = None, *,
            reason: str | None = None, **evidence: Any) -> None:
        self.findings.append(self.rules.finding(code, CATEGORY, summary, path=path, before=before, after=after,
                                                evidence=evidence))
        if reason:
            self.reasons.append(reason)


def weight_causes(change: RevisionChange, inputs: RevisionInputs, old_folder: str, new_folder: str,
                  measured: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """Why a module's weights make stored vectors incomparable: (weight file, cause) for each cause of
    ``embeddings.incompatible``.

    The one place the verdict learns about weights. A weight file with new content is measured
    (:func:`tracker.core.findings.weights.embedding_cause`): a change within numeric noise is no
    cause, and the measurement of one that is goes into ``measured`` (the verdict's evidence).
    """
    assert change.old is not None
    out = []
    for name in WEIGHT_NAMES:
        path = _join(new_folder, name)
        a, b = change.old.get(_join(old_folder, name)), change.new.get(path)
        if a is None or b is None or a.content_id == b.content_id:
            continue
        cause = embedding_cause(change, inputs, path)
        if cause is None:
            continue
        if cause[1] and measured is not None:
            measured[path] = cause[1]
        out.append((path, cause[0]))
    return out


def _compare_pooling(path: str, a: dict[str, Any], b: dict[str, Any], out: _Collect) -> None:
    spec_a, spec_b = pooling_spec(a), pooling_spec(b)
    out.pooling = spec_b.modes[0] if len(spec_b.modes) == 1 else ""
    if spec_a.schema != spec_b.schema:
        out.migrated.append(f"{path} from the {spec_a.schema} to the {spec_b.schema} pooling schema")
    if spec_a.modes != spec_b.modes:
        out.add("sentence_transformers.pooling_changed", f"{path}: pooling {spec_a.mode} → {spec_b.mode}", path,
                spec_a.mode, spec_b.mode, reason=f"pooling {spec_a.mode} → {spec_b.mode}", key="pooling_mode")
    for key, before, after in (("embedding_dimension", spec_a.dimension, spec_b.dimension),
                               ("include_prompt", spec_a.include_prompt, spec_b.include_prompt)):
        if before != after:
            text = change_summary(key, before, after)
            out.add("sentence_transformers.pooling_changed", f"{path}: {text}", path, before, after, reason=text, key=key)


def _compare_dense(old: Module, new: Module, a: dict[str, Any], b: dict[str, Any], out: _Collect) -> None:
    path = _join(new.path, "config.json")
    for key in ("in_features", "out_features", "bias", "activation_function"):
        if a.get(key) != b.get(key):
            text = change_summary(key, a.get(key), b.get(key))
            out.add("sentence_transformers.dense_changed", f"{path}: {text}", path, a.get(key), b.get(key),
                    reason=f"Dense {text}", key=key)
    for weights, cause in weight_causes(out.change, out.inputs, old.path, new.path, out.weights):
        out.add("sentence_transformers.dense_changed", f"{weights} re-uploaded: the Dense layer's weights changed",
                weights, reason=cause)


def _compare_module_configs(old: Module, new: Module, out: _Collect) -> None:
    change, inputs = out.change, out.inputs
    assert change.old is not None
    if new.kind == "Transformer":
        compare_transformer(old, new, out)
        return
    if new.kind not in ("Pooling", "Dense"):
        return
    a = _json(inputs, change.old, "old", _join(old.path, "config.json")) or {}
    b = _json(inputs, change.new, "new", _join(new.path, "config.json")) or {}
    if new.kind == "Pooling":
        _compare_pooling(_join(new.path, "config.json"), a, b, out)
    else:
        _compare_dense(old, new, a, b, out)


def _tokenization_cause(old: Module, new: Module, out: _Collect, limits: tuple[Any, Any]) -> int | None:
    """The effective tokenization as a cause; the count of sample texts longer than the smaller
    ``max_seq_length`` (None when not measured)."""
    change, inputs = out.change, out.inputs
    assert change.old is not None
    changed_files = st_tokenization.tokenizer_files_changed(change, old.path, new.path)
    if not changed_files and old.path == new.path:
        return None
    side_a = st_tokenization.read_side(inputs, change.old, "old", old.path)
    side_b = st_tokenization.read_side(inputs, change.new, "new", new.path)
    tokenizer_changed = [f for f in changed_files if not f.endswith(BERT_CONFIG)]
    if side_a is None or side_b is None:
        if tokenizer_changed:
            out.reasons.append("tokenizer files changed (" + ", ".join(tokenizer_changed) + "), not measured: "
                               "no readable tokenizer.json")
        return None
    try:
        measured = st_tokenization.measure(side_a, side_b)
    except TokenizerLoadError as exc:
        out.reasons.append(st_tokenization.unmeasured(exc))
        return None
    if measured.changed:
        what = st_tokenization.explain(measured, changed_files, out.pooling)
        out.reasons.append(f"{measured.changed} of {measured.total} sample texts tokenize differently: {what}")
    numbers = [v for v in limits if isinstance(v, int) and not isinstance(v, bool)]
    return st_tokenization.longer_than(measured, min(numbers)) if numbers else None


def _do_lower_case(new: Module, cfg_a: dict[str, Any], cfg_b: dict[str, Any], out: _Collect) -> None:
    if bool(cfg_a.get("do_lower_case")) == bool(cfg_b.get("do_lower_case")):
        return
    cfg_path = _join(new.path, BERT_CONFIG)
    text = change_summary("do_lower_case", cfg_a.get("do_lower_case"), cfg_b.get("do_lower_case"))
    side = st_tokenization.read_side(out.inputs, out.change.new, "new", new.path)
    if side is not None and lowercases(effective_tokenizer(side.doc, side.config)):
        out.add("sentence_transformers.do_lower_case_no_effect",
                f"{cfg_path}: {text}, with no effect: the tokenizer already lowercases "
                f"({side.lowercase_source or 'tokenizer.json'} decides)", cfg_path,
                cfg_a.get("do_lower_case"), cfg_b.get("do_lower_case"), key="do_lower_case")
        return
    # without a readable tokenizer.json the change is assumed to reach the model
    out.add("sentence_transformers.do_lower_case_changed", f"{cfg_path}: {text}", cfg_path,
            cfg_a.get("do_lower_case"), cfg_b.get("do_lower_case"),
            reason=None if side is not None else text, key="do_lower_case")


TRANSFORMER_FILES = ("config.json", *WEIGHT_NAMES, *st_tokenization.TOKENIZER_FILES, BERT_CONFIG)


def _folder_differs(change: RevisionChange, old_folder: str, new_folder: str) -> bool:
    """Whether a moved Transformer module loads other files (any of its config, weights or tokenizer)."""
    assert change.old is not None
    for name in TRANSFORMER_FILES:
        a, b = change.old.get(_join(old_folder, name)), change.new.get(_join(new_folder, name))
        if (a is None) != (b is None) or (a is not None and b is not None and a.content_id != b.content_id):
            return True
    return False


def compare_transformer(old: Module, new: Module, out: _Collect) -> None:
    """sentence_bert_config.json, the effective tokenization, the weights; a re-pointed module."""
    change, inputs = out.change, out.inputs
    assert change.old is not None
    cfg_a = _json(inputs, change.old, "old", _join(old.path, BERT_CONFIG)) or {}
    cfg_b = _json(inputs, change.new, "new", _join(new.path, BERT_CONFIG)) or {}
    if old.path != new.path and _folder_differs(change, old.path, new.path):
        out.reasons.append(f"Transformer module re-pointed from {_where(old.path)} to {_where(new.path)}, "
                           "whose model files differ")
    _do_lower_case(new, cfg_a, cfg_b, out)
    limits = (cfg_a.get("max_seq_length"), cfg_b.get("max_seq_length"))
    longer = _tokenization_cause(old, new, out, limits)
    if limits[0] != limits[1]:
        cfg_path = _join(new.path, BERT_CONFIG)
        text = change_summary("max_seq_length", *limits)
        numbers = [v for v in limits if isinstance(v, int) and not isinstance(v, bool)]
        shorter = min(numbers) if numbers else None
        if longer is None or longer:
            measured = f"{longer} of the sample texts are longer than {shorter} tokens" if longer else "not measured"
            reason: str | None = f"{text}: texts longer than {shorter} tokens embed differently ({measured})"
        else:
            reason = None
        out.add("sentence_transformers.max_seq_length_changed",
                f"{cfg_path}: {text}" + ("" if reason else f" (no sample text is longer than {shorter} tokens)"),
                cfg_path, limits[0], limits[1], reason=reason, key="max_seq_length", longer_sample_texts=longer)
    out.reasons.extend(cause for _path, cause in weight_causes(change, inputs, old.path, new.path, out.weights))


def _compare_pipelines(old: list[Module], new: list[Module], out: _Collect) -> list[tuple[Module, Module]]:
    """Findings for the module list itself; the pairs of modules to compare config by config."""
    ids_a, ids_b = [m.identity for m in old], [m.identity for m in new]
    if [m.type for m in old] != [m.type for m in new] and ids_a == ids_b:
        out.migrated.append(f"{MODULES} type paths (e.g. {_first_retyped(old, new)})")
    if ids_a != ids_b:
        _pipeline_changed(old, new, out)
    pairs = []
    by_id_old: dict[str, list[Module]] = {}
    for m in old:
        by_id_old.setdefault(m.identity, []).append(m)
    for m in new:
        if by_id_old.get(m.identity):
            pairs.append((by_id_old[m.identity].pop(0), m))
    for a, b in pairs:
        if a.path != b.path and b.kind == "Transformer":  # other modules' folders are compared by their configs
            same = "" if _folder_differs(out.change, a.path, b.path) else ", which holds the same model files"
            out.add("sentence_transformers.modules_changed",
                    f"{MODULES}: {b.kind} module moved from {_where(a.path)} to {_where(b.path)}{same}", MODULES,
                    a.path, b.path, module=b.name, kind=b.kind)
    return sorted(pairs, key=lambda p: p[1].kind == "Transformer")  # pooling first: the tokenization needs it


def _first_retyped(old: list[Module], new: list[Module]) -> str:
    return next((f"{a.type} → {b.type}" for a, b in zip(old, new, strict=False) if a.type != b.type), "")


def _pipeline_changed(old: list[Module], new: list[Module], out: _Collect) -> None:
    kinds_a, kinds_b = [m.kind for m in old], [m.kind for m in new]
    before, after = pipeline_text(old), pipeline_text(new)
    without_a = [m.identity for m in old if m.kind != "Normalize"]
    without_b = [m.identity for m in new if m.kind != "Normalize"]
    if without_a == without_b and kinds_a.count("Normalize") != kinds_b.count("Normalize"):
        what = "removed: embeddings are no longer unit length" if "Normalize" in kinds_a else \
            "added: embeddings are now unit length"
        out.add("sentence_transformers.normalize_changed", f"{MODULES}: Normalize module {what} ({before} ⇒ {after})",
                MODULES, before, after, reason=f"Normalize module {what.split(':')[0]}")
        return
    added = [k for k in kinds_b if k not in kinds_a]
    removed = [k for k in kinds_a if k not in kinds_b]
    parts = ([f"{', '.join(added)} added"] if added else []) + ([f"{', '.join(removed)} removed"] if removed else [])
    parts += [f"type {a.type} → {b.type}" for a, b in zip(old, new, strict=False)
              if a.kind == b.kind and a.identity != b.identity]
    if not parts:
        parts = ["modules reordered"]
    out.add("sentence_transformers.modules_changed", f"{MODULES}: {'; '.join(parts)} ({before} ⇒ {after})", MODULES,
            before, after, reason=f"module pipeline {before} ⇒ {after}")


def _prompts(config: dict[str, Any]) -> dict[str, Any]:
    return config["prompts"] if isinstance(config.get("prompts"), dict) else {}


def _default_prompt(config: dict[str, Any]) -> Any:
    name = config.get("default_prompt_name")
    return _prompts(config).get(name) if isinstance(name, str) else None


def _prompt_drift(before: Any, after: Any, out: _Collect) -> int | None:
    """Sample texts whose ids differ with prompt ``after`` instead of ``before`` (None when not measured)."""
    side = out.new_tokenizer()
    if side is None or not all(p is None or isinstance(p, str) for p in (before, after)):
        return None
    texts = drift_sample()
    try:
        a = encode_sample(side.data, tuple((before or "") + t for t in texts))
        b = encode_sample(side.data, tuple((after or "") + t for t in texts))
    except TokenizerLoadError:
        return None
    return sum(1 for x, y in zip(a.ids, b.ids, strict=True) if x != y)


def _prompt_change(name: str, pa: Any, pb: Any, side: str, out: _Collect) -> None:
    text = (f"prompt {name!r} added: {fmt_value(pb)}" if pa is None else f"prompt {name!r} removed (was {fmt_value(pa)})"
            if pb is None else f"prompt {name!r}: {pa!r} → {pb!r}")
    moved = _prompt_drift(pa, pb, out)
    measured = "" if moved is None else f" ({moved} of {len(drift_sample())} sample texts tokenize differently)"
    if moved == 0:
        out.add("sentence_transformers.prompt_same_tokens",
                f"{ST_CONFIG}: {text}, which tokenizes the same for every sample text: no effect", ST_CONFIG,
                pa, pb, key=f"prompts.{name}", side=side)
    elif side == "query":
        out.add("sentence_transformers.query_prompt_changed",
                f"{ST_CONFIG}: {text}: queries encode differently, stored document vectors stay valid",
                ST_CONFIG, pa, pb, key=f"prompts.{name}", side=side, changed_sample_texts=moved)
    else:
        out.add("sentence_transformers.prompts_changed", f"{ST_CONFIG}: {text}", ST_CONFIG, pa, pb,
                reason=f"{'default' if side == 'default' else 'document-side'} {text}{measured}",
                key=f"prompts.{name}", side=side, changed_sample_texts=moved)


def _compare_prompts(a: dict[str, Any], b: dict[str, Any], out: _Collect) -> None:
    """Query-side prompts change queries only; the default and document-side prompts change stored vectors."""
    prompts_a, prompts_b = _prompts(a), _prompts(b)
    defaults = {a.get("default_prompt_name"), b.get("default_prompt_name")}
    for name in list(prompts_a) + [n for n in prompts_b if n not in prompts_a]:
        if prompts_a.get(name) != prompts_b.get(name):
            side = "default" if name in defaults else "query" if QUERY_SIDE.search(name) else "document"
            _prompt_change(name, prompts_a.get(name), prompts_b.get(name), side, out)
    if a.get("default_prompt_name") != b.get("default_prompt_name"):
        text = change_summary("default_prompt_name", a.get("default_prompt_name"), b.get("default_prompt_name"))
        moved = _prompt_drift(_default_prompt(a), _default_prompt(b), out)
        measured = "" if moved is None else f", {moved} of {len(drift_sample())} sample texts tokenize differently"
        now = repr(_default_prompt(b)) if _default_prompt(b) else "no prompt"
        out.add("sentence_transformers.prompts_changed", f"{ST_CONFIG}: {text}", ST_CONFIG,
                a.get("default_prompt_name"), b.get("default_prompt_name"),
                reason=f"{text}: default encodes now start with {now}{measured}"
                if moved or (moved is None and _default_prompt(a) != _default_prompt(b)) else None,
                key="default_prompt_name", side="default")


def _compare_st_config(out: _Collect) -> None:
    change, inputs = out.change, out.inputs
    assert change.old is not None
    a = _json(inputs, change.old, "old", ST_CONFIG) or {}
    b = _json(inputs, change.new, "new", ST_CONFIG) or {}
    _compare_prompts(a, b, out)
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


def _verdict(old_modules: list[Module] | None, new_modules: list[Module] | None, out: _Collect) -> Finding:
    """``embeddings.incompatible``: each cause with its evidence."""
    reasons = list(dict.fromkeys(out.reasons))
    return out.rules.finding(
        "embeddings.incompatible", "embeddings",
        "stored embeddings are no longer comparable with new ones: " + "; ".join(reasons) + "; re-embed the index",
        path=MODULES, before=pipeline_text(old_modules), after=pipeline_text(new_modules),
        evidence={"reasons": reasons, "pipeline_before": [m.type for m in old_modules or []],
                  "pipeline_after": [m.type for m in new_modules or []],
                  **({"weights": out.weights} if out.weights else {})},
    )


def _migration(out: _Collect) -> Finding:
    return out.rules.finding(
        "sentence_transformers.schema_migrated", CATEGORY,
        "re-saved in another sentence-transformers schema with the same meaning: " + "; ".join(out.migrated),
        path=MODULES, evidence={"migrated": out.migrated})


@analyser(library=lib.SENTENCE_TRANSFORMERS, order=150)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    out = _Collect(rules, change, inputs, [], [])
    try:
        new_modules = read_modules(inputs, change.new, "new")
    except Unreadable as exc:
        return [rules.finding("sentence_transformers.malformed", CATEGORY,
                              f"{exc}; sentence-transformers cannot load the model", path=MODULES,
                              evidence={"error": str(exc)})]
    if change.old is None or not _touched(change):
        return []
    try:
        old_modules = read_modules(inputs, change.old, "old")
    except Unreadable:
        return []  # reported at the revision that broke it
    if old_modules is None and new_modules is None:
        return []
    out.transformer = next((m.path for m in new_modules or [] if m.kind == "Transformer"), None)
    try:
        for old, new in _compare_pipelines(old_modules or [], new_modules or [], out):
            _compare_module_configs(old, new, out)
        _compare_st_config(out)
    except Unreadable as exc:
        out.add("sentence_transformers.malformed", f"{exc}; sentence-transformers cannot load the model", MODULES,
                error=str(exc))
    if out.migrated:
        out.findings.append(_migration(out))
    if out.reasons:
        out.findings.insert(0, _verdict(old_modules, new_modules, out))
    return out.findings
