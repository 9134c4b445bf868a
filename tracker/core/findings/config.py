"""Findings for ``config.json``: what a change to the model's configuration means.

A raw JSON diff says "config.json changed"; a user needs to know whether the
model class, its shape, its RoPE scaling, its dtype or the code it loads with
``trust_remote_code`` changed. Each changed key is classified by *what it
controls* into a stable code (``config.rope_changed``, ``config.shape_changed``,
``config.auto_map_changed`` ...); the severity comes from the rules table.

Keys that transformers spells differently across model families (``n_embd`` /
``hidden_size``, ``layer_norm_epsilon`` / ``layer_norm_eps``, ``torch_dtype`` /
``dtype`` ...) are compared as one quantity, so a native port that only renames
keys (Phi-2, January 2024) reads as renames, not as a new architecture.

The small JSON helpers at the top (``load_json_object``, ``flat_diff``,
``fmt_value``, ``file_changed``) are shared by the generation, tokenizer and
consistency analysers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from tracker.core.bounded import NestedTooDeep, TooManyItems, UntrustedInput, loads_json
from tracker.core.findings import libraries as lib
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange, Snapshot

CATEGORY = "config"
PATH = "config.json"

# A config.json is a few KB; anything beyond this is not a config we should parse.
DEFAULT_MAX_BYTES = 8 * 1024 * 1024

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING", "__bool__": lambda self: False})()
"""Marks a key absent on one side (distinct from a JSON ``null``)."""


# --------------------------------------------------------------------------- shared helpers


class JsonProblem(ValueError):
    """Why a file could not be read as a JSON object; the message is shown to users."""


class JsonTooLarge(JsonProblem):
    """Refused for its size (bytes or elements) before parsing: it may well be valid, and load fine."""


def load_json_object(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """Parse ``data`` as a UTF-8 JSON object, or raise JsonProblem saying what is wrong.

    Hostile or broken files are ordinary upstream events (a truncated upload, a
    UTF-16 re-save, a 1 GB "config"), so every failure mode becomes one exception
    type that analysers turn into a finding instead of crashing the poll. Nesting depth
    and element count are bounded (:func:`tracker.core.bounded.loads_json`): a config nested
    100,000 levels deep is "invalid JSON: nested too deeply to parse", refused by a linear
    pre-scan rather than a ``RecursionError``; one of 3 M keys is "unreadable: JSON with
    more than 2,000,000 elements" before a byte of it is parsed.
    """
    if len(data) > max_bytes:
        raise JsonTooLarge(f"{len(data)} bytes, over the {max_bytes}-byte limit; not parsed")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JsonProblem(f"not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    try:
        value = loads_json(text)
    except (NestedTooDeep, RecursionError):
        raise JsonProblem("invalid JSON: nested too deeply to parse") from None
    except TooManyItems as exc:
        raise JsonTooLarge(f"unreadable: {exc}") from None
    except UntrustedInput as exc:
        raise JsonProblem(f"unreadable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise JsonProblem(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # e.g. an integer literal with too many digits
        raise JsonProblem(f"invalid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise JsonProblem(f"expected a JSON object, found {_json_type(value)}")
    return value


class Unreadable(Exception):
    """A side file (a pipeline's or a module's config) that is there but cannot be used; shown to users."""


def read_side_json(inputs: RevisionInputs, snapshot: Snapshot, side: str, path: str, *, max_bytes: int,
                   array: bool = False) -> Any:
    """A bounded JSON object (or ``array``) of one side; None when absent; Unreadable when present but unusable.

    The size is checked against the tree listing before a byte is fetched.
    """
    entry = snapshot.get(path)
    if entry is None:
        return None
    if entry.size > max_bytes:
        raise Unreadable(f"{path}: {entry.size:,} bytes, over the {max_bytes:,}-byte limit; not read")
    data = inputs.text(side, path)
    if data is None:
        return None
    try:
        return _json_array(data) if array else load_json_object(data, max_bytes=max_bytes)
    except JsonProblem as exc:
        raise Unreadable(f"{path} cannot be parsed: {exc}") from None


def _json_array(data: bytes) -> list[Any]:
    try:
        value = loads_json(data)
    except ValueError as exc:
        raise JsonProblem(" ".join(str(exc).split())[:300]) from None
    if not isinstance(value, list):
        raise JsonProblem("expected a JSON array")
    return value


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def file_changed(change: RevisionChange, path: str) -> bool:
    """Whether ``path`` differs between the two sides (added, removed or new content).

    Decided from the file lists alone, so unchanged files are never read.
    At the first revision (``change.old is None``) every present file counts as changed.
    """
    new = change.new.get(path)
    if change.old is None:
        return new is not None
    old = change.old.get(path)
    if old is None or new is None:
        return (old is None) != (new is None)
    return old.content_id != new.content_id


def fmt_value(value: Any, limit: int = 60) -> str:
    """A short human rendering: bare strings, compact JSON otherwise, long values elided.

    ``128001`` → ``128001``; ``[128001, 128009]`` → ``[128001, 128009]``;
    ``"su"`` → ``su``; an absent key → ``(unset)``.
    """
    if value is MISSING:
        return "(unset)"
    if isinstance(value, str) and value:
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), sort_keys=False)
        except (TypeError, ValueError):
            text = repr(value)
    text = text.replace("\n", "\\n")
    if len(text) <= limit:
        return text
    suffix = f"… ({len(value)} items)" if isinstance(value, (list, dict)) else "…"
    return text[: limit - len(suffix)] + suffix


def json_value(value: Any) -> Any:
    """``before``/``after`` for a Finding: None for an absent key, the value otherwise."""
    return None if value is MISSING else value


def flat_diff(old: Any, new: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Yield ``(dotted.path, before, after)`` for each leaf that differs; lists are leaves.

    Used for small structures (a config, a normalizer, a rope_scaling block),
    never for a vocabulary: it is exact and readable, not fast.
    """
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            child = f"{prefix}.{key}" if prefix else str(key)
            yield from flat_diff(old.get(key, MISSING), new.get(key, MISSING), child)
    elif not _same(old, new):
        yield prefix, old, new


def _same(a: Any, b: Any) -> bool:
    """JSON equality that keeps ``1`` and ``True`` apart (Python's ``==`` does not)."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def change_summary(path: str, before: Any, after: Any) -> str:
    """``"rope_scaling.type: su → longrope"``."""
    return f"{path}: {fmt_value(before)} → {fmt_value(after)}"


# --------------------------------------------------------------------------- classification

# Quantities that families spell differently; first spelling is the canonical one.
ALIASES: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "width": ("hidden_size", "n_embd", "n_embed", "d_model", "dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "kv_heads": ("num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size"),
    "head_dim": ("head_dim", "d_kv", "kv_channels"),
    "context": ("max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"),
    "norm_eps": ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps"),
    "activation": ("hidden_act", "hidden_activation", "activation_function"),
    "dtype": ("torch_dtype", "dtype"),
}

GROUP_CODE = {
    "layers": "config.shape_changed",
    "width": "config.shape_changed",
    "heads": "config.shape_changed",
    "kv_heads": "config.shape_changed",
    "intermediate": "config.shape_changed",
    "head_dim": "config.shape_changed",
    "context": "config.context_length_changed",
    "norm_eps": "config.computation_changed",
    "activation": "config.computation_changed",
    "dtype": "config.dtype_changed",
}

KEY_CODE: dict[str, str] = {
    "architectures": "config.architectures_changed",
    "model_type": "config.model_type_changed",
    "vocab_size": "config.vocab_size_changed",
    "tie_word_embeddings": "config.tie_word_embeddings_changed",
}
for _key in (
    "num_experts num_local_experts n_routed_experts num_experts_per_tok experts_per_token n_shared_experts "
    "moe_intermediate_size kv_lora_rank q_lora_rank qk_rope_head_dim qk_nope_head_dim v_head_dim "
    "first_k_dense_replace moe_layer_freq type_vocab_size word_embed_proj_dim num_decoder_layers "
    "encoder_layers decoder_layers encoder_attention_heads decoder_attention_heads encoder_ffn_dim "
    "decoder_ffn_dim num_nextn_predict_layers n_group topk_group"
).split():
    KEY_CODE[_key] = "config.shape_changed"
for _key in (
    "rope_theta rope_scaling rope_parameters partial_rotary_factor rotary_dim rotary_pct rotary_emb_base "
    "rope_local_base_freq original_max_position_embeddings rotary rope_type"
).split():
    KEY_CODE[_key] = "config.rope_changed"
for _key in (
    "sliding_window sliding_window_size use_sliding_window max_window_layers sliding_window_pattern "
    "layer_types attention_chunk_size"
).split():
    KEY_CODE[_key] = "config.sliding_window_changed"
for _key in (
    "query_pre_attn_scalar attn_logit_softcapping final_logit_softcapping attention_bias mlp_bias bias "
    "scale_embedding embedding_multiplier residual_multiplier attention_multiplier logits_scaling "
    "routed_scaling_factor norm_topk_prob scoring_func topk_method position_embedding_type alibi "
    "parallel_attn new_decoder_architecture use_parallel_residual qk_layernorm use_qk_norm "
    "apply_residual_connection_post_layernorm do_layer_norm_before normalize_before feed_forward_proj "
    "relative_attention_num_buckets relative_attention_max_distance swiglu_limit scale_attn_weights "
    "attention_softmax_in_fp32 pretraining_tp"
).split():
    KEY_CODE[_key] = "config.computation_changed"
for _key in (
    "bos_token_id eos_token_id pad_token_id decoder_start_token_id sep_token_id unk_token_id "
    "forced_bos_token_id forced_eos_token_id"
).split():
    KEY_CODE[_key] = "config.token_id_changed"
for _key in (
    "transformers_version _name_or_path _commit_hash use_cache initializer_range initializer_factor "
    "init_std gradient_checkpointing output_attentions output_hidden_states return_dict torchscript "
    "output_past output_router_logits router_aux_loss_coef aux_loss_alpha router_jitter_noise "
    "layerdrop encoder_layerdrop decoder_layerdrop bias_dropout_fusion masked_softmax_fusion"
).split():
    KEY_CODE[_key] = "config.metadata_changed"

# Subtrees compared as a whole by their own rules, never recursed into generically.
SPECIAL_SUBTREES = {"auto_map", "quantization_config", "compression_config", "rope_scaling", "rope_parameters"}
# Mappings compared as one value: a relabelled classifier is one change, not 1000.
LEAF_MAPPINGS = {"id2label", "label2id", "task_specific_params"}

# RoPE scaling types renamed upstream: same scaling, new name (Phi-3 'su' → 'longrope', July 2024).
ROPE_TYPE_RENAMES = {"su": "longrope"}

_SPELLING_CODE = {k: GROUP_CODE[g] for g, ks in ALIASES.items() for k in ks}
_SPELLINGS = frozenset(_SPELLING_CODE)

MAX_GENERIC_FINDINGS = 20
"""``config.value_changed`` findings itemised; the rest are one finding listing their keys."""
MAX_FINDINGS_PER_CODE = 50
"""Findings itemised per other code (a crafted config can repeat known keys in a million sub-objects)."""
MAX_LISTED_KEYS = 200
"""Keys listed in the evidence of a "N more" finding; the count is exact."""


class _Collected:
    """Findings with a per-code cap: past it a change is only counted (and its key listed).

    Callers ask :meth:`want` *before* building a finding, so a config of a million
    changed keys costs a million dictionary lookups, not a million findings.
    """

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.seen: Counter[str] = Counter()
        self.skipped: dict[str, list[str]] = {}

    def want(self, code: str, key: str) -> bool:
        self.seen[code] += 1
        cap = MAX_GENERIC_FINDINGS if code == "config.value_changed" else MAX_FINDINGS_PER_CODE
        if self.seen[code] <= cap:
            return True
        listed = self.skipped.setdefault(code, [])
        if len(listed) < MAX_LISTED_KEYS:
            listed.append(key)
        return False

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def result(self, rules: SeverityRules) -> list[Finding]:
        """The itemised findings, then one "N more" finding per capped code (same code, same severity)."""
        out = list(self.findings)
        for code, keys in self.skipped.items():
            cap = MAX_GENERIC_FINDINGS if code == "config.value_changed" else MAX_FINDINGS_PER_CODE
            more = self.seen[code] - cap
            summary = (f"{more} more config values changed" if code == "config.value_changed"
                       else f"{more} more changes of this kind ({code})")
            out.append(rules.finding(code, CATEGORY, summary, path=PATH, evidence={"keys": keys, "count": more}))
        return out


def _leaf_code(key: str) -> str:
    if key in KEY_CODE:
        return KEY_CODE[key]
    if "dropout" in key or key.endswith("pdrop"):
        return "config.metadata_changed"
    return "config.value_changed"


# --------------------------------------------------------------------------- the analyser


@analyser(library=lib.TRANSFORMERS, order=20)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    """Findings for config.json at this revision; nothing when it did not change.

    At the first revision only validity is checked (there is nothing to compare).
    A config absent on either side is left to the files analyser.
    """
    if not file_changed(change, PATH):
        return []
    new_bytes = inputs.text("new", PATH)
    if new_bytes is None:
        return []
    try:
        new = load_json_object(new_bytes)
    except JsonProblem as exc:
        return [
            rules.finding(
                "config.malformed",
                CATEGORY,
                f"config.json cannot be parsed: {exc}; transformers will fail to load the model",
                path=PATH,
                evidence={"error": str(exc), "size": len(new_bytes)},
            )
        ]
    if isinstance(new.get("pretrained_cfg"), dict) and "model_type" not in new:
        return []  # a timm config, not a transformers one: tracker/core/findings/timm_config.py reads it
    if change.old is None:
        return []
    old_bytes = inputs.text("old", PATH)
    if old_bytes is None:
        return []
    try:
        old = load_json_object(old_bytes)
    except JsonProblem as exc:
        return [
            rules.finding(
                "config.repaired",
                CATEGORY,
                f"config.json parses again (the previous revision's did not: {exc})",
                path=PATH,
                evidence={"old_error": str(exc)},
            )
        ]
    return diff_configs(old, new, rules)


MAX_LABELS_NAMED = 20  # moved ids named in a summary; the finding's before/after hold them all


def _id_to_label(key: str, value: Any) -> dict[str, str]:
    """A label map as ``{id: label}`` (label2id inverted), ids and labels as text."""
    if not isinstance(value, dict):
        return {}
    pairs = value.items() if key.endswith("id2label") else ((v, k) for k, v in value.items())
    return {str(i): str(label) for i, label in pairs}


def label_map_summary(key: str, before: Any, after: Any) -> str:
    """``"id2label: 0: negative → positive, 1: positive → negative"``: the ids whose label moved."""
    a, b = _id_to_label(key, before), _id_to_label(key, after)
    ids = sorted(set(a) | set(b), key=lambda i: (len(i), i))
    moved = [f"{i}: {a.get(i, '(none)')} → {b.get(i, '(none)')}" for i in ids if a.get(i) != b.get(i)]
    if not moved:
        return f"{key}: rewritten, same labels"
    more = f" (+{len(moved) - MAX_LABELS_NAMED} more)" if len(moved) > MAX_LABELS_NAMED else ""
    return f"{key}: " + ", ".join(moved[:MAX_LABELS_NAMED]) + more


def diff_configs(old: Mapping[str, Any], new: Mapping[str, Any], rules: SeverityRules) -> list[Finding]:
    """Compare two parsed configs; pure, so tests and other analysers can call it directly."""
    found = _Collected()
    _diff_dict(old, new, "", rules, found)
    return found.result(rules)


def _finding(rules: SeverityRules, code: str, key: str, before: Any, after: Any, *, summary: str | None = None,
             **evidence: Any) -> Finding:
    return rules.finding(
        code,
        CATEGORY,
        summary or change_summary(key, before, after),
        path=PATH,
        before=json_value(before),
        after=json_value(after),
        evidence={"key": key, **evidence},
    )


def _diff_dict(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str, rules: SeverityRules,
               out: _Collected) -> None:
    handled = _diff_aliases(old, new, prefix, rules, out)
    for key in list(old) + [k for k in new if k not in old]:
        if key in handled:
            continue
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if _same(before, after) or {type(before), type(after)} == {type(None), type(MISSING)}:
            continue  # an explicit null is the class default, as is an absent key
        _diff_key(key, before, after, prefix=prefix, rules=rules, out=out)


def _diff_aliases(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str, rules: SeverityRules,
                  out: _Collected) -> set[str]:
    """Keys spelled differently on the two sides (a rename, or a value moved between spellings).

    Returns the keys handled here, which the key-by-key comparison skips.
    """
    handled: set[str] = set()
    if _SPELLINGS.intersection(old) == _SPELLINGS.intersection(new):
        return handled
    for group, spellings in ALIASES.items():
        old_keys = [k for k in spellings if k in old]
        new_keys = [k for k in spellings if k in new]
        if old_keys == new_keys:
            continue  # same spellings on both sides: compared key by key
        handled.update(old_keys, new_keys)
        old_key = old_keys[0] if old_keys else None
        new_key = new_keys[0] if new_keys else None
        before = old[old_key] if old_key else MISSING
        after = new[new_key] if new_key else MISSING
        old_name = prefix + (old_key or new_key or group)
        new_name = prefix + (new_key or old_key or group)
        renamed = bool(old_key and new_key and _same(before, after))
        if not out.want("config.key_renamed" if renamed else GROUP_CODE[group], new_name):
            continue
        if renamed:
            out.add(_finding(
                rules, "config.key_renamed", new_name, before, after,
                summary=f"{old_name} renamed to {new_name} (value {fmt_value(after)} unchanged)",
                old_key=old_name,
            ))
        elif old_name == new_name:
            out.add(_finding(rules, GROUP_CODE[group], new_name, before, after))
        else:
            out.add(_finding(
                rules, GROUP_CODE[group], new_name, before, after,
                summary=f"{old_name}: {fmt_value(before)} → {new_name}: {fmt_value(after)}",
                old_key=old_name,
            ))
    return handled


def _diff_key(key: str, before: Any, after: Any, *, prefix: str, rules: SeverityRules, out: _Collected) -> None:
    """One key whose value changed: the key's own comparison, a nested config, or one leaf finding."""
    name = prefix + str(key)
    if key == "auto_map" and not prefix:
        for finding in _diff_auto_map(before, after, rules):
            if out.want(finding.code, str(finding.evidence.get("key", name))):
                out.add(finding)
    elif key in ("quantization_config", "compression_config"):
        _diff_subtree(name, before, after, "config.quantization_changed", rules=rules, out=out)
    elif key in ("rope_scaling", "rope_parameters"):
        _diff_rope(name, before, after, rules, out)
    elif key in ("id2label", "label2id"):
        if out.want("config.labels_changed", name):
            out.add(_finding(rules, "config.labels_changed", name, before, after,
                             summary=label_map_summary(name, before, after)))
    elif isinstance(before, dict) and isinstance(after, dict) and key not in LEAF_MAPPINGS:
        _diff_dict(before, after, name + ".", rules, out)  # text_config, vision_config, ...
    else:
        code = _SPELLING_CODE.get(key) or _leaf_code(key)
        if out.want(code, name):
            out.add(_finding(rules, code, name, before, after))


def _diff_subtree(name: str, before: Any, after: Any, code: str, *, rules: SeverityRules, out: _Collected) -> None:
    """One finding per changed leaf; a block that appears or disappears is one finding."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        if before is MISSING or before is None:
            summary: str | None = f"{name} added: {fmt_value(after)}"
        elif after is MISSING or after is None:
            summary = f"{name} removed (was {fmt_value(before)})"
        else:
            summary = None
        if out.want(code, name):
            out.add(_finding(rules, code, name, before, after, summary=summary))
        return
    for path, b, a in flat_diff(before, after):
        if out.want(code, f"{name}.{path}"):
            out.add(_finding(rules, code, f"{name}.{path}", b, a))


def _rope_type(block: Mapping[str, Any]) -> tuple[str | None, Any]:
    for key in ("rope_type", "type"):
        if key in block:
            return key, block[key]
    return None, MISSING


def _diff_rope(name: str, before: Any, after: Any, rules: SeverityRules, out: _Collected) -> None:
    """RoPE scaling: a known type rename or a ``type``→``rope_type`` key move is not a new scaling."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        _diff_subtree(name, before, after, "config.rope_changed", rules=rules, out=out)
        return
    findings: list[Finding] = []
    old_key, old_type = _rope_type(before)
    new_key, new_type = _rope_type(after)
    rest_old = {k: v for k, v in before.items() if k not in ("type", "rope_type")}
    rest_new = {k: v for k, v in after.items() if k not in ("type", "rope_type")}
    if not _same(old_type, new_type) or old_key != new_key:
        old_name, new_name = f"{name}.{old_key or new_key}", f"{name}.{new_key or old_key}"
        if isinstance(old_type, str) and ROPE_TYPE_RENAMES.get(old_type) == new_type:
            findings.append(_finding(
                rules, "config.rope_type_renamed", new_name, old_type, new_type,
                note="renamed upstream: the same scaling, but loaders that only know the old name reject it",
            ))
        elif _same(old_type, new_type):
            findings.append(_finding(
                rules, "config.key_renamed", new_name, old_type, new_type,
                summary=f"{old_name} renamed to {new_name} (value {fmt_value(new_type)} unchanged)",
                old_key=old_name,
            ))
        elif old_name == new_name:
            findings.append(_finding(rules, "config.rope_changed", new_name, old_type, new_type))
        else:
            findings.append(_finding(
                rules, "config.rope_changed", new_name, old_type, new_type,
                summary=f"{old_name}: {fmt_value(old_type)} → {new_name}: {fmt_value(new_type)}",
            ))
    for finding in findings:
        if out.want(finding.code, str(finding.evidence.get("key"))):
            out.add(finding)
    for path, b, a in flat_diff(rest_old, rest_new):
        if out.want("config.rope_changed", f"{name}.{path}"):
            out.add(_finding(rules, "config.rope_changed", f"{name}.{path}", b, a))


def _auto_map_entries(value: Any) -> dict[str, str]:
    """``{"AutoTokenizer": [slow, fast]}`` → ``{"AutoTokenizer": "slow", "AutoTokenizer[fast]": "fast"}``."""
    if not isinstance(value, dict):
        return {}
    entries: dict[str, str] = {}
    for cls, ref in value.items():
        if isinstance(ref, list):
            for label, item in zip(("", "[fast]"), ref):
                if item is not None:
                    entries[f"{cls}{label}"] = str(item)
        elif ref is not None:
            entries[cls] = str(ref)
    return entries


def _diff_auto_map(before: Any, after: Any, rules: SeverityRules) -> list[Finding]:
    """auto_map decides which code ``trust_remote_code=True`` executes: any new target is critical.

    A reference of the form ``owner/repo--module.Class`` loads code from *another* repository,
    which this tracker does not watch: that gets its own code.
    """
    old, new = _auto_map_entries(before), _auto_map_entries(after)
    findings: list[Finding] = []
    if not old and new:
        targets = sorted({ref.rsplit(".", 1)[0] for ref in new.values()})
        findings.append(rules.finding(
            "config.auto_map_added",
            CATEGORY,
            f"auto_map added: loading with trust_remote_code now runs repository code ({', '.join(targets)})",
            path=PATH, before=json_value(before), after=after, evidence={"key": "auto_map", "entries": new},
        ))
    elif old and not new:
        findings.append(rules.finding(
            "config.auto_map_removed",
            CATEGORY,
            "auto_map removed: transformers' built-in classes now load this model instead of repository code",
            path=PATH, before=before, after=json_value(after), evidence={"key": "auto_map"},
        ))
    else:
        for cls in list(old) + [c for c in new if c not in old]:
            b, a = old.get(cls, MISSING), new.get(cls, MISSING)
            if b == a:
                continue
            code = "config.auto_map_removed" if a is MISSING else "config.auto_map_changed"
            findings.append(_finding(rules, code, f"auto_map.{cls}", b, a))
    for cls, ref in new.items():
        if "--" in ref and old.get(cls) != ref:
            findings.append(rules.finding(
                "config.auto_map_external",
                CATEGORY,
                f"auto_map.{cls} loads code from another repository: {ref}",
                path=PATH, after=ref, evidence={"key": f"auto_map.{cls}", "repo": ref.split("--", 1)[0]},
            ))
    return findings
