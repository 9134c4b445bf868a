"""Findings for generation defaults: ``generation_config.json`` (or config.json in its absence).

The generation config decides when ``generate()`` stops (eos ids), how long it
may run and whether it samples. These change what every user gets without any
code change on their side — Llama-3-8B-Instruct's eos fix (``128001`` →
``[128001, 128009]``) turned endless answers into ones that stop at ``<|eot_id|>``.

transformers reads generation defaults from ``generation_config.json`` and,
when that file is absent, derives them from the generation keys of
``config.json``. This analyser compares those *effective* defaults, so adding a
generation_config.json that repeats config.json's values is not reported as a
change, while one that sets a new eos is.

Keys are classed by what they change, each class with its code: special token ids (eos, bos),
length and stopping, sampling, timestamps and forced or suppressed tokens (Whisper's long-form
keys among them: openai/whisper's ``max_initial_timestamp_index`` 1 → 50 and a new
``prev_sot_token_id`` in January 2024 changed long-form transcripts), cache, metadata.
"""

from __future__ import annotations

from typing import Any

from tracker.core.findings import libraries as lib
from tracker.core.findings.config import (
    MISSING,
    JsonProblem,
    change_summary,
    file_changed,
    json_value,
    load_json_object,
)
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange

CATEGORY = "generation"
PATH = "generation_config.json"
MAX_ITEMISED = 50
"""Changed keys reported one by one; the rest are one finding per code, listing their keys."""
MAX_LISTED_KEYS = 200
CONFIG = "config.json"

TOKEN_ID_KEYS = {
    "eos_token_id": "generation.eos_token_id_changed",
    "bos_token_id": "generation.bos_token_id_changed",
    "pad_token_id": "generation.pad_token_id_changed",
    "decoder_start_token_id": "generation.bos_token_id_changed",
    "forced_bos_token_id": "generation.bos_token_id_changed",
    "forced_eos_token_id": "generation.eos_token_id_changed",
}
# Keys by what they change (each class its own code and severity, see severity/generation.toml).
LENGTH_KEYS = (  # length and stopping: where outputs end
    "max_length", "max_new_tokens", "min_length", "min_new_tokens", "max_time", "early_stopping", "stop_strings",
    "exponential_decay_length_penalty",
)
SAMPLING_KEYS = (  # sampling and search: which tokens are picked
    "do_sample", "temperature", "top_p", "top_k", "min_p", "typical_p", "repetition_penalty",
    "no_repeat_ngram_size", "num_beams", "length_penalty", "epsilon_cutoff", "eta_cutoff",
    "encoder_repetition_penalty", "encoder_no_repeat_ngram_size", "num_beam_groups", "diversity_penalty",
    "guidance_scale", "penalty_alpha", "top_h", "renormalize_logits", "remove_invalid_values",
    "num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold",
    "prompt_lookup_num_tokens", "dola_layers",
)
FORCED_TOKEN_KEYS = (  # timestamps, forced and suppressed tokens: which tokens may appear at all, and where
    "suppress_tokens", "begin_suppress_tokens", "bad_words_ids", "sequence_bias", "forced_decoder_ids",
    "token_healing", "watermarking_config",
    # Whisper: long-form transcription, timestamps, language and task selection
    "max_initial_timestamp_index", "prev_sot_token_id", "no_timestamps_token_id", "return_timestamps",
    "lang_to_id", "task_to_id", "is_multilingual", "alignment_heads", "begin_index", "language", "task",
    "condition_on_prev_tokens", "compression_ratio_threshold", "logprob_threshold", "no_speech_threshold",
)
CACHE_KEYS = (  # the key/value cache: memory and speed, the text stays the same
    "use_cache", "cache_implementation", "cache_config", "return_legacy_cache", "prefill_chunk_size",
    "disable_compile", "compile_config",
)
METADATA_KEYS = ("transformers_version", "_from_model_config", "_commit_hash")
# config.json keys transformers copies into a derived GenerationConfig.
FROM_MODEL_CONFIG = tuple(TOKEN_ID_KEYS) + LENGTH_KEYS + SAMPLING_KEYS + FORCED_TOKEN_KEYS
CLASSES = (  # (keys, code, effect class named in the evidence)
    (LENGTH_KEYS, "generation.max_length_changed", "length and stopping"),
    (SAMPLING_KEYS, "generation.sampling_changed", "sampling"),
    (FORCED_TOKEN_KEYS, "generation.forced_tokens_changed", "timestamps and forced or suppressed tokens"),
    (CACHE_KEYS, "generation.cache_changed", "cache"),
    (METADATA_KEYS, "generation.metadata_changed", "metadata"),
)


def _class(key: str) -> tuple[str, str]:
    """The code and the effect class of a generation key."""
    if key in TOKEN_ID_KEYS:
        return TOKEN_ID_KEYS[key], "special token ids"
    for keys, code, effect in CLASSES:
        if key in keys:
            return code, effect
    return "generation.value_changed", "other"


def _code(key: str) -> str:
    return _class(key)[0]


def _same_ids(a: Any, b: Any) -> bool:
    """eos ``128001`` and ``[128001]`` (or a re-ordered list) stop generation at the same tokens."""
    def ids(v: Any) -> Any:
        if isinstance(v, bool):
            return v
        if isinstance(v, int):
            return frozenset([v])
        if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return frozenset(v)
        return v if v is not MISSING else None
    try:
        return bool(ids(a) == ids(b))
    except TypeError:
        return False


def _effective(inputs: RevisionInputs, side: str, findings: list[Finding], rules: SeverityRules,
               report_errors: bool) -> tuple[dict[str, Any] | None, str]:
    """The generation defaults transformers would use on ``side``, and the file they come from."""
    data = inputs.text(side, PATH)
    if data is not None:
        try:
            return load_json_object(data), PATH
        except JsonProblem as exc:
            if report_errors:
                findings.append(rules.finding(
                    "generation.malformed",
                    CATEGORY,
                    f"generation_config.json cannot be parsed: {exc}; generate() will fail or fall back",
                    path=PATH,
                    evidence={"error": str(exc)},
                ))
            return None, PATH
    config = inputs.text(side, CONFIG)
    if config is None:
        return {}, CONFIG
    try:
        parsed = load_json_object(config)
    except JsonProblem:
        return None, CONFIG  # reported by the config analyser
    return {k: parsed[k] for k in FROM_MODEL_CONFIG if k in parsed}, CONFIG


@analyser(library=lib.TRANSFORMERS, order=30)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    """Findings for the effective generation defaults at this revision."""
    gen_changed = file_changed(change, PATH)
    uses_config = change.new.get(PATH) is None or (change.old is not None and change.old.get(PATH) is None)
    if not gen_changed and not (uses_config and file_changed(change, CONFIG)):
        return []
    findings: list[Finding] = []
    new, new_path = _effective(inputs, "new", findings, rules, report_errors=True)
    if change.old is None or new is None:
        return findings
    old, old_path = _effective(inputs, "old", findings, rules, report_errors=False)
    if old is None:
        return findings
    if old_path != new_path:
        code = "generation.file_added" if new_path == PATH else "generation.file_removed"
        summary = (
            "generation_config.json added: generation defaults now come from it, not config.json"
            if new_path == PATH
            else "generation_config.json removed: generation defaults fall back to config.json"
        )
        findings.append(rules.finding(code, CATEGORY, summary, path=PATH))
    more: dict[str, list[str]] = {}  # code -> keys past the cap (a crafted file may hold a million)
    itemised = 0
    for key in list(old) + [k for k in new if k not in old]:
        before, after = old.get(key, MISSING), new.get(key, MISSING)
        if key in TOKEN_ID_KEYS:
            if _same_ids(before, after):
                continue
        elif before == after and type(before) is type(after):
            continue
        if itemised >= MAX_ITEMISED:
            more.setdefault(_code(key), []).append(key)
            continue
        itemised += 1
        findings.append(rules.finding(
            _code(key),
            CATEGORY,
            change_summary(key, before, after),
            path=new_path,
            before=json_value(before),
            after=json_value(after),
            evidence={"key": key, "effect": _class(key)[1], "old_source": old_path, "new_source": new_path},
        ))
    for code, keys in more.items():  # same code, so the same severity: a cap never lowers one
        findings.append(rules.finding(
            code, CATEGORY, f"{len(keys)} more generation defaults changed", path=new_path,
            evidence={"keys": keys[:MAX_LISTED_KEYS], "count": len(keys)},
        ))
    return findings
