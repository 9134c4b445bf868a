"""Sane ranges for the config values the estimator multiplies together.

A ``config.json`` is written by whoever controls the repo. The family builders
turn its sizes into parameter counts, byte counts and one entry per layer, so a
value of ``1e308`` overflows a float, ``-4096`` gives a negative parameter count
and ``num_hidden_layers: 100000000`` builds a hundred-million-entry structure.
:func:`implausible` checks every size the builders read, under every spelling
families use, *before* any arithmetic: each must be an integer (not a bool, a
float, not even ``4096.0``, nor a string) within the range below. The maxima are an order of magnitude
or more above any published model (noted per entry); a config outside them is
reported as an implausible config, not estimated.

Keys absent or null are left to the builders' defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_LAYERS = 4_096  # deepest published stacks: ~200 blocks; DeepNet's 1,000-layer experiment
MAX_HIDDEN = 262_144  # widest published: 25,600 (PaLM 540B), 16,384 (Llama 3.1 405B)
MAX_HEADS = 16_384  # most published: 128
MAX_HEAD_DIM = 16_384  # typical 64-256
MAX_INTERMEDIATE = 4_194_304  # widest published: 73,728 (PaLM); 53,248 (Llama 3.1 405B)
MAX_VOCAB = 16_777_216  # largest published: ~262,144 (Gemma 3)
MAX_EXPERTS = 65_536  # most published: 256 routed experts (DeepSeek-V3)
MAX_CONTEXT = 1 << 30  # longest published: ~10 M tokens (Llama 4 Scout)
MAX_LABELS = 1 << 20  # classifier heads; ImageNet-21k has 21,843 classes
MAX_RANK = 65_536  # LoRA / latent-attention ranks; typical 8-1,536

# (spellings, least, most): every key a family builder reads as a size or count.
RANGES: tuple[tuple[tuple[str, ...], int, int], ...] = (
    (("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers"), 1, MAX_LAYERS),
    (("num_decoder_layers", "decoder_layers", "first_k_dense_replace", "num_nextn_predict_layers",
      "max_window_layers"), 0, MAX_LAYERS),
    (("hidden_size", "n_embd", "n_embed", "d_model", "dim", "word_embed_proj_dim"), 1, MAX_HIDDEN),
    (("num_attention_heads", "n_head", "num_heads", "n_heads", "encoder_attention_heads",
      "decoder_attention_heads"), 1, MAX_HEADS),
    (("num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads", "multi_query_group_num"), 1, MAX_HEADS),
    (("head_dim", "d_kv", "kv_channels", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"), 1, MAX_HEAD_DIM),
    (("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size", "hidden_dim", "encoder_ffn_dim",
      "decoder_ffn_dim", "moe_intermediate_size"), 1, MAX_INTERMEDIATE),
    (("shared_expert_intermediate_size",), 0, MAX_INTERMEDIATE),
    (("vocab_size",), 1, MAX_VOCAB),
    (("type_vocab_size",), 0, MAX_VOCAB),
    (("num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
      "experts_per_token", "decoder_sparse_step", "moe_layer_freq", "n_group", "topk_group"), 0, MAX_EXPERTS),
    (("max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_sequence_length", "max_seq_len"),
     1, MAX_CONTEXT),
    (("sliding_window", "sliding_window_size", "attention_chunk_size"), 0, MAX_CONTEXT),
    (("sliding_window_pattern",), 1, MAX_LAYERS),
    (("relative_attention_num_buckets", "relative_attention_max_distance"), 0, MAX_CONTEXT),
    (("num_labels",), 1, MAX_LABELS),
    (("kv_lora_rank", "q_lora_rank"), 0, MAX_RANK),
)
"""Ranges are inclusive. A zero is allowed only where the key means "none" (no experts, no window)."""

MAX_LIST_LENGTH = MAX_LAYERS
"""``layer_types``, ``mlp_only_layers`` and ``id2label`` are walked per entry; ``id2label`` may be longer."""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return f"{value!r}" if math.isfinite(value) else {"nan": "NaN"}.get(str(value), str(value).replace("inf", "Infinity"))
    if isinstance(value, str):
        return "a string"
    return {"list": "a list", "dict": "an object"}.get(type(value).__name__, f"a {type(value).__name__}")


def implausible(config: Mapping[str, Any], *, _depth: int = 0) -> str | None:
    """Why ``config`` cannot be a real model's configuration, or None when its sizes are sane.

    One reason, naming the key and the bound: ``"num_hidden_layers is 100000000, over the
    maximum of 4096"``, ``"hidden_size is -4096; expected an integer from 1 to 262144"``.
    Sub-configs (``text_config``, ``vision_config``, ... any ``*_config`` object, nested up
    to 3 levels) are checked the same way, their reasons prefixed with the key.
    """
    for key, value in config.items():
        if isinstance(key, str) and key.endswith("_config") and isinstance(value, Mapping) and _depth < 3:
            why = implausible(value, _depth=_depth + 1)
            if why is not None:
                return f"{key}.{why}"
    for spellings, least, most in RANGES:
        for key in spellings:
            value = config.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                return f"{key} is {_kind(value)}; expected an integer from {least} to {most}"
            if value > most:
                return f"{key} is {value}, over the maximum of {most}"
            if value < least:
                return f"{key} is {value}; expected an integer from {least} to {most}"
    for key in ("layer_types", "mlp_only_layers"):
        value = config.get(key)
        if isinstance(value, list) and len(value) > MAX_LIST_LENGTH:
            return f"{key} has {len(value)} entries, over the maximum of {MAX_LIST_LENGTH}"
    labels = config.get("id2label")
    if isinstance(labels, Mapping) and len(labels) > MAX_LABELS:
        return f"id2label has {len(labels)} entries, over the maximum of {MAX_LABELS}"
    return None
