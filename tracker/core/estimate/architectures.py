"""Reconstruct a model's architecture from its ``config.json`` alone.

Each supported family is a small pure function from the config to an
:class:`Arch`: the exact parameter count of the module ``architectures[0]``
names (tied weights counted once, as ``model.parameters()`` would), the linear
layers LoRA would wrap, the per-token activation and KV-cache footprint, and
what the structure table needs.  Counts are exact, not approximations, so that
they can be held against the checkpoint's own count: a disagreement then means
something (a stored tied copy, a missing pooler, extra layers), never rounding.

A family we do not know returns :class:`Unsupported`; we never guess.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

BF16 = 2  # bytes per activation / weight element under bf16 autocast


@dataclass(frozen=True)
class Unsupported:
    """An honest "we do not reconstruct this": the model_type and why."""

    model_type: str
    reason: str


@dataclass(frozen=True)
class Arch:
    """What the estimator needs to know about one architecture.

    ``params`` is every parameter of the graph; ``active_params`` those a token
    goes through (differs only for mixture-of-experts).  ``lora_linears`` lists
    ``(fan_in, fan_out, count)`` for every linear layer but the head.
    ``act_bytes_per_token`` is the activation memory one token keeps for the
    backward pass (bf16 autocast, SDPA: no score matrix) and ``logit_bytes_per_token``
    the fp32 logits a language-model loss keeps.  ``kv_layers`` holds, per
    attention layer that caches, ``(kv_width, window)``: K and V are each
    ``kv_width`` wide and ``window`` caps the cached tokens (None: all of them).
    """

    family: str
    model_type: str
    architecture: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    context: int | None
    params: int
    active_params: int
    embedding_params: int
    head_params: int  # LM head / pooler / classifier: what LoRA leaves alone
    per_layer_params: int  # of a typical (last) block, for explaining layer-count mismatches
    tied: bool
    lora_linears: tuple[tuple[int, int, int], ...]
    act_bytes_per_token: int
    logit_bytes_per_token: int
    kv_layers: tuple[tuple[int, int | None], ...]
    # structure-table vocabulary
    positional: str  # "learned" | "rotary" | "alibi" | "relative"
    norm: str  # "LayerNorm" | "RMSNorm"
    post_norm: bool
    ffn_kind: str  # "Feed Forward" | "Gated Feed Forward" | "Mixture of Experts (...)"
    lm_head: bool
    encoder_decoder: bool = False
    decoder_layers: int = 0
    experts: int = 0
    experts_per_token: int = 0
    sliding_layers: tuple[int, ...] = ()  # 0-based indices of sliding-window layers
    initializer_range: float | None = None
    depth_scaled_init: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    # multimodal models: ("text", n), ("vision", n), ("projector", n); they add up to params
    components: tuple[tuple[str, int], ...] = ()
    # persistent buffers the checkpoint stores beside the parameters (not in params): (name, elements)
    buffers: tuple[tuple[str, int], ...] = ()


def get(cfg: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    """First key present with a non-null value; configs name the same thing many ways."""
    for k in keys:
        v = cfg.get(k)
        if v is not None:
            return v
    return default


def _dropout(cfg: Mapping[str, Any], *keys: str) -> bool:
    """Whether residual dropout is on: then a 1-byte mask per element is kept."""
    return any((cfg.get(k) or 0) > 0 for k in keys)


def _context(cfg: Mapping[str, Any], fallback: int | None = None) -> int | None:
    context: int | None = get(
        cfg, "max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_sequence_length", default=fallback
    )
    return context


def _num_labels(cfg: Mapping[str, Any]) -> int:
    if isinstance(cfg.get("id2label"), Mapping) and cfg["id2label"]:
        return len(cfg["id2label"])
    return int(cfg.get("num_labels") or 2)


def _arch_name(cfg: Mapping[str, Any]) -> str:
    archs = cfg.get("architectures") or []
    return str(archs[0]) if archs else ""


def _attn_act(h: int, q_dim: int, kv_dim: int, dropout: bool) -> int:
    """Bytes per token an attention block keeps: its input, Q, K, V, the context
    (input of the output projection), and the residual-dropout mask when on.
    For BERT (q = kv = h) that is Korthikanti et al.'s 11·h without the score term."""
    return BF16 * (h + 2 * q_dim + 2 * kv_dim) + (h if dropout else 0)


def _mlp_act(h: int, inter: int, gated: bool, dropout: bool) -> int:
    """Plain MLP: input, fc1 output, activation output (+mask) = 2h + 4I (+h).
    Gated MLP: input, gate, up, act(gate), act(gate)*up = 2h + 8I."""
    if gated:
        return BF16 * (h + 4 * inter)
    return BF16 * (h + 2 * inter) + (h if dropout else 0)


# ---------------------------------------------------------------------------
# BERT-style encoders: bert, roberta, xlm-roberta, camembert (MiniLM, E5, BGE...)
# ---------------------------------------------------------------------------

def _bert(cfg: Mapping[str, Any]) -> Arch:
    mt = cfg.get("model_type", "bert")
    h = int(cfg["hidden_size"])
    L = int(cfg["num_hidden_layers"])
    nh = int(cfg["num_attention_heads"])
    inter = int(get(cfg, "intermediate_size", default=4 * h))
    V = int(cfg["vocab_size"])
    P = int(get(cfg, "max_position_embeddings", default=512))
    T = int(get(cfg, "type_vocab_size", default=2))
    arch = _arch_name(cfg) or "BertModel"
    emb = V * h + P * h + T * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h
    pooler = h * h + h
    n = _num_labels(cfg)
    roberta_like = mt in ("roberta", "xlm-roberta", "camembert", "xlm-roberta-xl")
    mlm = h * h + h + 2 * h + V  # transform dense + LayerNorm + decoder bias (decoder weight tied)
    tied = bool(get(cfg, "tie_word_embeddings", default=True))
    lm_head = False
    if arch.endswith("ForMaskedLM") or arch.endswith("ForCausalLM"):
        head = mlm + (0 if tied else V * h)
        lm_head = True
    elif arch.endswith("ForPreTraining"):
        head = pooler + mlm + (0 if tied else V * h) + 2 * h + 2
        lm_head = True
    elif arch.endswith("ForSequenceClassification"):
        head = (h * h + h + h * n + n) if roberta_like else (pooler + h * n + n)
    elif arch.endswith("ForQuestionAnswering"):
        head = 2 * h + 2
    elif arch.endswith("ForTokenClassification"):
        head = h * n + n
    elif arch.endswith("ForMultipleChoice"):
        head = pooler + h + 1 if not roberta_like else pooler + h + 1
    else:  # *Model: the bare encoder with its pooler, as sentence-embedding repos ship it
        head = pooler
    drop = _dropout(cfg, "hidden_dropout_prob")
    per_layer_act = _attn_act(h, h, h, drop) + _mlp_act(h, inter, False, drop) + 2 * BF16 * h
    act = L * per_layer_act + BF16 * h + (h if drop else 0)  # + embedding LayerNorm output and dropout mask
    logit = 0
    if lm_head:
        act += 2 * BF16 * h
        logit = 4 * V
    params = emb + L * layer + head
    return Arch(
        family="bert", model_type=mt, architecture=arch, hidden=h, layers=L, heads=nh, kv_heads=nh,
        head_dim=h // nh if nh else 0, intermediate=inter, vocab=V, context=P, params=params,
        active_params=params, embedding_params=emb, head_params=head, per_layer_params=layer, tied=tied,
        lora_linears=((h, h, 4 * L), (h, inter, L), (inter, h, L)),
        act_bytes_per_token=act, logit_bytes_per_token=logit,
        kv_layers=tuple((h, None) for _ in range(L)),
        positional="learned", norm="LayerNorm", post_norm=True, ffn_kind="Feed Forward", lm_head=lm_head,
        initializer_range=cfg.get("initializer_range", 0.02),
    )


def _distilbert(cfg: Mapping[str, Any]) -> Arch:
    h = int(get(cfg, "dim", "hidden_size", default=768))
    L = int(get(cfg, "n_layers", "num_hidden_layers", default=6))
    nh = int(get(cfg, "n_heads", "num_attention_heads", default=12))
    inter = int(get(cfg, "hidden_dim", "intermediate_size", default=4 * h))
    V = int(cfg["vocab_size"])
    P = int(get(cfg, "max_position_embeddings", default=512))
    arch = _arch_name(cfg) or "DistilBertModel"
    emb = V * h + P * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h) + 2 * h
    n = _num_labels(cfg)
    lm_head = arch.endswith("ForMaskedLM")
    if lm_head:
        head = h * h + h + 2 * h + V  # vocab_transform, vocab_layer_norm, projector bias (weight tied)
    elif arch.endswith("ForSequenceClassification"):
        head = h * h + h + h * n + n
    elif arch.endswith("ForQuestionAnswering"):
        head = 2 * h + 2
    elif arch.endswith("ForTokenClassification"):
        head = h * n + n
    else:
        head = 0
    drop = _dropout(cfg, "dropout")
    act = L * (_attn_act(h, h, h, drop) + _mlp_act(h, inter, False, drop) + 2 * BF16 * h) + BF16 * h + (h if drop else 0)
    params = emb + L * layer + head
    return Arch(
        family="distilbert", model_type="distilbert", architecture=arch, hidden=h, layers=L, heads=nh, kv_heads=nh,
        head_dim=h // nh, intermediate=inter, vocab=V, context=P, params=params, active_params=params,
        embedding_params=emb, head_params=head, per_layer_params=layer, tied=True,
        lora_linears=((h, h, 4 * L), (h, inter, L), (inter, h, L)),
        act_bytes_per_token=act + (2 * BF16 * h if lm_head else 0), logit_bytes_per_token=4 * V if lm_head else 0,
        kv_layers=tuple((h, None) for _ in range(L)),
        positional="learned", norm="LayerNorm", post_norm=True, ffn_kind="Feed Forward", lm_head=lm_head,
        initializer_range=cfg.get("initializer_range", 0.02),
    )


# ---------------------------------------------------------------------------
# Learned-position / ALiBi decoders with LayerNorm: GPT-2, GPT-J, GPT-NeoX, OPT, BLOOM, Falcon
# ---------------------------------------------------------------------------

# Keyword-only, one per dimension of a decoder, as each family reads them from its config: a builder of Arch.
def _decoder_common(  # noqa: PLR0913
    cfg: Mapping[str, Any], *, family: str, h: int, L: int, nh: int, kv: int, hd: int, inter: int, V: int,
    context: int | None, emb: int, layer: int, final: int, tied: bool, head_bias: int = 0,
    positional: str, norm: str, gated: bool, dropout: bool, lora_per_layer: tuple[tuple[int, int, int], ...],
    depth_scaled_init: bool = False, norms_per_layer: int = 2, extra_lora: tuple[tuple[int, int, int], ...] = (),
    sliding: tuple[int | None, ...] | None = None, experts: int = 0, top_k: int = 0, active_layer: int | None = None,
    ffn_kind: str | None = None, extra_act_per_layer: int = 0, mlp_act_override: int | None = None,
    post_norm: bool = False,
) -> Arch:
    """Assemble an :class:`Arch` for a causal decoder from per-family pieces."""
    arch = _arch_name(cfg)
    has_head = not arch.endswith("Model") or arch.endswith("LMHeadModel")
    head = (0 if tied else V * h) + head_bias if has_head else 0
    params = emb + L * layer + final + head
    active = params if active_layer is None else emb + L * active_layer + final + head
    q_dim, kv_dim = nh * hd, kv * hd
    mlp_act = mlp_act_override if mlp_act_override is not None else _mlp_act(h, inter, gated, dropout)
    per_layer_act = _attn_act(h, q_dim, kv_dim, dropout) + mlp_act + norms_per_layer * BF16 * h + extra_act_per_layer
    act = L * per_layer_act + BF16 * h + (h if dropout else 0)
    logit = 0
    if has_head:
        act += 2 * BF16 * h
        logit = 4 * V
    windows = sliding if sliding is not None else tuple(None for _ in range(L))
    lora = tuple((i, o, c * L) for i, o, c in lora_per_layer) + extra_lora
    if ffn_kind is None:
        ffn_kind = "Gated Feed Forward" if gated else "Feed Forward"
    return Arch(
        family=family, model_type=str(cfg.get("model_type")), architecture=arch, hidden=h, layers=L, heads=nh,
        kv_heads=kv, head_dim=hd, intermediate=inter, vocab=V, context=context, params=params, active_params=active,
        embedding_params=emb, head_params=head, per_layer_params=layer, tied=tied, lora_linears=lora,
        act_bytes_per_token=act, logit_bytes_per_token=logit,
        kv_layers=tuple((kv_dim, w) for w in windows),
        positional=positional, norm=norm, post_norm=post_norm, ffn_kind=ffn_kind, lm_head=has_head,
        experts=experts, experts_per_token=top_k,
        sliding_layers=tuple(i for i, w in enumerate(windows) if w is not None),
        initializer_range=get(cfg, "initializer_range", "init_std", default=0.02),
        depth_scaled_init=depth_scaled_init,
    )


def _gpt2(cfg: Mapping[str, Any]) -> Arch:
    h, L, nh = int(cfg["n_embd"]), int(cfg["n_layer"]), int(cfg["n_head"])
    inter = int(cfg.get("n_inner") or 4 * h)
    V, P = int(cfg["vocab_size"]), int(get(cfg, "n_positions", "n_ctx", default=1024))
    emb = V * h + P * h
    layer = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h)
    return _decoder_common(
        cfg, family="gpt2", h=h, L=L, nh=nh, kv=nh, hd=h // nh, inter=inter, V=V, context=P, emb=emb, layer=layer,
        final=2 * h, tied=bool(get(cfg, "tie_word_embeddings", default=True)), positional="learned", norm="LayerNorm",
        gated=False, dropout=_dropout(cfg, "resid_pdrop"), depth_scaled_init=True,
        lora_per_layer=((h, 3 * h, 1), (h, h, 1), (h, inter, 1), (inter, h, 1)),
    )


def _gptj(cfg: Mapping[str, Any]) -> Arch:
    h, L, nh = int(cfg["n_embd"]), int(cfg["n_layer"]), int(cfg["n_head"])
    inter = int(cfg.get("n_inner") or 4 * h)
    V = int(cfg["vocab_size"])
    layer = 2 * h + 4 * h * h + (h * inter + inter) + (inter * h + h)
    return _decoder_common(
        cfg, family="gptj", h=h, L=L, nh=nh, kv=nh, hd=h // nh, inter=inter, V=V,
        context=int(get(cfg, "n_positions", default=2048)), emb=V * h, layer=layer, final=2 * h,
        tied=bool(get(cfg, "tie_word_embeddings", default=False)), head_bias=V, positional="rotary",
        norm="LayerNorm", gated=False, dropout=_dropout(cfg, "resid_pdrop"), norms_per_layer=1,
        lora_per_layer=((h, h, 4), (h, inter, 1), (inter, h, 1)),
    )


def _gpt_neox(cfg: Mapping[str, Any]) -> Arch:
    h, L, nh = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
    inter = int(get(cfg, "intermediate_size", default=4 * h))
    V = int(cfg["vocab_size"])
    bias = bool(get(cfg, "attention_bias", default=True))
    layer = 4 * h + (h * 3 * h + (3 * h if bias else 0)) + (h * h + (h if bias else 0)) + (h * inter + inter) + (inter * h + h)
    return _decoder_common(
        cfg, family="gpt_neox", h=h, L=L, nh=nh, kv=nh, hd=h // nh, inter=inter, V=V, context=_context(cfg, 2048),
        emb=V * h, layer=layer, final=2 * h, tied=bool(get(cfg, "tie_word_embeddings", default=False)),
        positional="rotary", norm="LayerNorm", gated=False, dropout=_dropout(cfg, "hidden_dropout"),
        lora_per_layer=((h, 3 * h, 1), (h, h, 1), (h, inter, 1), (inter, h, 1)),
    )


def _opt(cfg: Mapping[str, Any]) -> Arch:
    h, L, nh = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
    inter = int(get(cfg, "ffn_dim", default=4 * h))
    V = int(cfg["vocab_size"])
    wp = int(get(cfg, "word_embed_proj_dim", default=h))
    P = int(get(cfg, "max_position_embeddings", default=2048))
    bias = bool(get(cfg, "enable_bias", default=True))
    ln_affine = bool(get(cfg, "layer_norm_elementwise_affine", default=True))
    ln = 2 * h if ln_affine else 0
    emb = V * wp + (P + 2) * h + (2 * h * wp if wp != h else 0)  # OPT's learned positions carry an offset of 2
    layer = 4 * (h * h + (h if bias else 0)) + ln + (h * inter + (inter if bias else 0)) + (inter * h + (h if bias else 0)) + ln
    pre = bool(get(cfg, "do_layer_norm_before", default=True))
    final = ln if pre and not cfg.get("_remove_final_layer_norm", False) else 0
    arch = _decoder_common(
        cfg, family="opt", h=h, L=L, nh=nh, kv=nh, hd=h // nh, inter=inter, V=V, context=P, emb=emb, layer=layer,
        final=final, tied=bool(get(cfg, "tie_word_embeddings", default=True)), positional="learned",
        norm="LayerNorm", gated=False, dropout=_dropout(cfg, "dropout"),
        lora_per_layer=((h, h, 4), (h, inter, 1), (inter, h, 1)),
        extra_lora=((h, wp, 1), (wp, h, 1)) if wp != h else (), post_norm=not pre,
    )
    if wp != h:  # the LM head maps word_embed_proj_dim, not hidden, to the vocabulary
        from dataclasses import replace
        fix = (V * wp - V * h) if not arch.tied and arch.lm_head else 0
        arch = replace(arch, params=arch.params + fix, active_params=arch.active_params + fix)
    return arch


def _bloom(cfg: Mapping[str, Any]) -> Arch:
    h = int(get(cfg, "hidden_size", "n_embed"))
    L = int(get(cfg, "n_layer", "num_hidden_layers"))
    nh = int(get(cfg, "n_head", "num_attention_heads"))
    V = int(cfg["vocab_size"])
    inter = 4 * h
    layer = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h)
    return _decoder_common(
        cfg, family="bloom", h=h, L=L, nh=nh, kv=nh, hd=h // nh, inter=inter, V=V,
        context=get(cfg, "seq_length", default=None), emb=V * h + 2 * h, layer=layer, final=2 * h,
        tied=bool(get(cfg, "tie_word_embeddings", default=True)), positional="alibi", norm="LayerNorm",
        gated=False, dropout=_dropout(cfg, "hidden_dropout"),
        lora_per_layer=((h, 3 * h, 1), (h, h, 1), (h, inter, 1), (inter, h, 1)),
    )


def _falcon(cfg: Mapping[str, Any]) -> Arch:
    h = int(get(cfg, "hidden_size", "n_embd"))
    L = int(get(cfg, "num_hidden_layers", "n_layer"))
    nh = int(get(cfg, "num_attention_heads", "n_head"))
    V = int(cfg["vocab_size"])
    hd = h // nh
    new_arch = bool(get(cfg, "new_decoder_architecture", default=False)) or cfg.get("n_head_kv") is not None and cfg.get("model_type") == "RefinedWeb"
    if new_arch:
        kv = int(get(cfg, "num_kv_heads", "n_head_kv", default=nh))
    elif get(cfg, "multi_query", default=True):
        kv = 1
    else:
        kv = nh
    bias = bool(get(cfg, "bias", default=False))
    inter = int(get(cfg, "ffn_hidden_size", default=4 * h))
    qkv_out = (nh + 2 * kv) * hd
    n_ln = 2 if new_arch and int(get(cfg, "num_ln_in_parallel_attn", default=2)) == 2 else 1
    if not new_arch and not get(cfg, "parallel_attn", default=True):
        n_ln = 2
    layer = n_ln * 2 * h + h * qkv_out + (qkv_out if bias else 0) + h * h + (h if bias else 0) + h * inter + (inter if bias else 0) + inter * h + (h if bias else 0)
    alibi = bool(get(cfg, "alibi", default=False))
    return _decoder_common(
        cfg, family="falcon", h=h, L=L, nh=nh, kv=kv, hd=hd, inter=inter, V=V, context=_context(cfg, 2048),
        emb=V * h, layer=layer, final=2 * h, tied=bool(get(cfg, "tie_word_embeddings", default=True)),
        positional="alibi" if alibi else "rotary", norm="LayerNorm", gated=False,
        dropout=_dropout(cfg, "hidden_dropout"), norms_per_layer=n_ln,
        lora_per_layer=((h, qkv_out, 1), (h, h, 1), (h, inter, 1), (inter, h, 1)),
    )


# ---------------------------------------------------------------------------
# RMSNorm / rotary decoders: Llama, Mistral, Qwen2/3, Gemma 1-3, Phi-3, Granite, and their MoEs
# ---------------------------------------------------------------------------

_TIED_DEFAULT = {"gemma": True, "gemma2": True, "gemma3_text": True, "granite": True, "granitemoe": True}


def _windows(cfg: Mapping[str, Any], L: int) -> tuple[int | None, ...]:
    """Per-layer sliding window (None: full attention), from whichever keys the family uses."""
    mt = cfg.get("model_type")
    w = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) == L and w:
        return tuple(int(w) if t == "sliding_attention" else None for t in types)
    if not w:
        return tuple(None for _ in range(L))
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        if not cfg.get("use_sliding_window", False):
            return tuple(None for _ in range(L))
        mwl = int(get(cfg, "max_window_layers", default=L))
        return tuple(int(w) if i >= mwl else None for i in range(L))
    if mt == "gemma2":
        return tuple(int(w) if i % 2 == 0 else None for i in range(L))
    if mt == "gemma3_text":
        pattern = int(get(cfg, "sliding_window_pattern", default=6))
        return tuple(None if (i + 1) % pattern == 0 else int(w) for i in range(L))
    return tuple(int(w) for _ in range(L))


def _llama_like(cfg: Mapping[str, Any]) -> Arch:
    mt = str(cfg.get("model_type"))
    h, L = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    nh = int(cfg["num_attention_heads"])
    kv = int(get(cfg, "num_key_value_heads", default=nh))
    hd = int(get(cfg, "head_dim", default=h // nh if nh else 0))
    inter = int(cfg["intermediate_size"])
    V = int(cfg["vocab_size"])
    q_dim, kv_dim = nh * hd, kv * hd
    attn_bias = bool(get(cfg, "attention_bias", default=mt == "qwen2" or mt == "qwen2_moe"))
    o_bias = attn_bias and mt not in ("qwen2", "qwen2_moe")
    mlp_bias = bool(get(cfg, "mlp_bias", default=False))
    qk_norm = mt in ("qwen3", "qwen3_moe", "gemma3_text")
    n_norms = 4 if mt in ("gemma2", "gemma3_text") else 2
    attn = h * q_dim + 2 * h * kv_dim + q_dim * h
    if attn_bias:
        attn += q_dim + 2 * kv_dim
    if o_bias:
        attn += h
    if qk_norm:
        attn += 2 * hd
    dense_mlp = 3 * h * inter + ((2 * inter + h) if mlp_bias else 0)
    norms = n_norms * h
    # mixture of experts
    E = int(get(cfg, "num_local_experts", "num_experts", "n_routed_experts", default=0))
    top_k = int(get(cfg, "num_experts_per_tok", default=0))
    moe_inter = int(get(cfg, "moe_intermediate_size", default=inter))
    shared_inter = int(get(cfg, "shared_expert_intermediate_size", default=0))
    lora = [(h, q_dim, 1), (h, kv_dim, 2), (q_dim, h, 1)]
    if E:
        expert = 3 * h * moe_inter
        router = h * E
        shared = (3 * h * shared_inter + h) if shared_inter else 0  # shared expert + its sigmoid gate
        layer = attn + norms + E * expert + router + shared
        active_layer = attn + norms + top_k * expert + router + shared
        lora += [(h, moe_inter, 2 * E), (moe_inter, h, E), (h, E, 1)]
        if shared_inter:
            lora += [(h, shared_inter, 2), (shared_inter, h, 1), (h, 1, 1)]
        mlp_act = top_k * BF16 * (4 * moe_inter) + BF16 * h + 4 * E + (BF16 * 4 * shared_inter if shared_inter else 0)
        ffn_kind = f"Mixture of Experts ({E}, top {top_k})"
        sparse_step = int(get(cfg, "decoder_sparse_step", default=1))
        mlp_only = cfg.get("mlp_only_layers") or []
        if sparse_step != 1 or mlp_only:
            raise _Unsupported(f"{mt} with dense layers between sparse ones (decoder_sparse_step / mlp_only_layers)")
    else:
        layer = attn + norms + dense_mlp
        active_layer = None
        lora += [(h, inter, 2), (inter, h, 1)]
        mlp_act = None
        ffn_kind = None
    tied = bool(get(cfg, "tie_word_embeddings", default=_TIED_DEFAULT.get(mt, False)))
    family = {"mixtral": "mixtral", "qwen2_moe": "qwen_moe", "qwen3_moe": "qwen_moe"}.get(mt, mt)
    return _decoder_common(
        cfg, family=family, h=h, L=L, nh=nh, kv=kv, hd=hd, inter=moe_inter if E else inter, V=V,
        context=_context(cfg), emb=V * h, layer=layer, final=h, tied=tied, positional="rotary", norm="RMSNorm",
        gated=True, dropout=False, norms_per_layer=n_norms, sliding=_windows(cfg, L),
        lora_per_layer=tuple(lora), experts=E, top_k=top_k, active_layer=active_layer, ffn_kind=ffn_kind,
        mlp_act_override=mlp_act,
    )


def _gpt_oss(cfg: Mapping[str, Any]) -> Arch:
    h, L = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"])
    nh = int(cfg["num_attention_heads"])
    kv = int(get(cfg, "num_key_value_heads", default=nh))
    hd = int(get(cfg, "head_dim", default=h // nh))
    inter = int(cfg["intermediate_size"])
    V = int(cfg["vocab_size"])
    E = int(get(cfg, "num_local_experts", "num_experts"))
    top_k = int(get(cfg, "num_experts_per_tok", "experts_per_token"))
    q_dim, kv_dim = nh * hd, kv * hd
    attn = (h * q_dim + q_dim) + 2 * (h * kv_dim + kv_dim) + (q_dim * h + h) + nh  # biases + attention sinks
    expert = h * 2 * inter + 2 * inter + inter * h + h
    router = h * E + E
    layer = attn + 2 * h + E * expert + router
    active_layer = attn + 2 * h + top_k * expert + router
    return _decoder_common(
        cfg, family="gpt_oss", h=h, L=L, nh=nh, kv=kv, hd=hd, inter=inter, V=V, context=_context(cfg),
        emb=V * h, layer=layer, final=h, tied=bool(get(cfg, "tie_word_embeddings", default=False)),
        positional="rotary", norm="RMSNorm", gated=True, dropout=False, sliding=_windows(cfg, L),
        lora_per_layer=((h, q_dim, 1), (h, kv_dim, 2), (q_dim, h, 1), (h, E, 1)),
        experts=E, top_k=top_k, active_layer=active_layer, ffn_kind=f"Mixture of Experts ({E}, top {top_k})",
        mlp_act_override=top_k * BF16 * 4 * inter + BF16 * h + 4 * E,
    )


# ---------------------------------------------------------------------------
# T5 family: t5, mt5 (encoder-decoder, relative position buckets)
# ---------------------------------------------------------------------------

def _t5(cfg: Mapping[str, Any]) -> Arch:
    mt = str(cfg.get("model_type"))
    d = int(cfg["d_model"])
    inner = int(cfg["num_heads"]) * int(cfg["d_kv"])
    nh = int(cfg["num_heads"])
    ff = int(cfg["d_ff"])
    Le = int(cfg["num_layers"])
    Ld = int(get(cfg, "num_decoder_layers", default=Le))
    V = int(cfg["vocab_size"])
    buckets = int(get(cfg, "relative_attention_num_buckets", default=32))
    proj = str(get(cfg, "feed_forward_proj", default="relu"))
    gated = proj.startswith("gated-")
    ffn = (2 if gated else 1) * d * ff + ff * d
    attn = 3 * d * inner + inner * d
    enc_layer = attn + d + ffn + d
    dec_layer = 2 * attn + 3 * d + ffn
    emb = V * d
    arch_name = _arch_name(cfg) or "T5ForConditionalGeneration"
    tied = bool(get(cfg, "tie_word_embeddings", default=True))
    encoder_only = arch_name.endswith("EncoderModel")
    enc = Le * enc_layer + buckets * nh + d
    dec = 0 if encoder_only else Ld * dec_layer + buckets * nh + d
    lm = arch_name.endswith("ConditionalGeneration")
    head = (0 if tied else V * d) if lm else 0
    params = emb + enc + dec + head
    drop = _dropout(cfg, "dropout_rate")
    enc_act = Le * (_attn_act(d, inner, inner, drop) + _mlp_act(d, ff, gated, drop) + 2 * BF16 * d)
    dec_act = Ld * (2 * _attn_act(d, inner, inner, drop) + _mlp_act(d, ff, gated, drop) + 3 * BF16 * d)
    act = enc_act + (0 if encoder_only else dec_act) + 2 * BF16 * d + (2 * d if drop else 0)
    lora = ((d, inner, 3 * Le + 6 * Ld), (inner, d, Le + 2 * Ld), (d, ff, (2 if gated else 1) * (Le + Ld)), (ff, d, Le + Ld))
    return Arch(
        family="t5", model_type=mt, architecture=arch_name, hidden=d, layers=Le, heads=nh, kv_heads=nh,
        head_dim=int(cfg["d_kv"]), intermediate=ff, vocab=V, context=int(get(cfg, "n_positions", default=512)),
        params=params, active_params=params, embedding_params=emb, head_params=head, per_layer_params=enc_layer,
        tied=tied, lora_linears=lora, act_bytes_per_token=act + (2 * BF16 * d if lm else 0),
        logit_bytes_per_token=4 * V if lm else 0,
        # decoder self-attention cache plus the cross-attention K/V of the encoded input
        kv_layers=tuple((inner, None) for _ in range(2 * Ld)),
        positional="relative", norm="RMSNorm", post_norm=False,
        ffn_kind="Gated Feed Forward" if gated else "Feed Forward", lm_head=lm, encoder_decoder=not encoder_only,
        decoder_layers=0 if encoder_only else Ld, initializer_range=None,
    )


# ---------------------------------------------------------------------------
# Multi-head latent attention: DeepSeek-V2 / V3 (and R1), dense first layers then MoE
# ---------------------------------------------------------------------------

def _deepseek(cfg: Mapping[str, Any]) -> Arch:
    """DeepseekV2/V3ForCausalLM as transformers builds it (the multi-token-prediction layer is not part of it)."""
    mt = str(cfg.get("model_type"))
    h, L, nh = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
    V, inter = int(cfg["vocab_size"]), int(cfg["intermediate_size"])
    q_lora = cfg.get("q_lora_rank")
    kv_lora = int(cfg["kv_lora_rank"])
    nope, rope, vd = int(cfg["qk_nope_head_dim"]), int(cfg["qk_rope_head_dim"]), int(cfg["v_head_dim"])
    bias = bool(get(cfg, "attention_bias", default=False))
    qk = nope + rope
    if q_lora:
        q_lora = int(q_lora)
        q = h * q_lora + (q_lora if bias else 0) + q_lora + q_lora * nh * qk  # q_a_proj, q_a_layernorm, q_b_proj
        q_lora_linears = [(h, q_lora, 1), (q_lora, nh * qk, 1)]
    else:
        q = h * nh * qk
        q_lora_linears = [(h, nh * qk, 1)]
    kv = h * (kv_lora + rope) + (kv_lora + rope if bias else 0) + kv_lora + kv_lora * nh * (nope + vd)
    attn = q + kv + nh * vd * h + (h if bias else 0)
    E = int(get(cfg, "n_routed_experts", default=0))
    top_k = int(get(cfg, "num_experts_per_tok", default=0))
    moe_inter = int(get(cfg, "moe_intermediate_size", default=inter))
    shared_inter = int(get(cfg, "n_shared_experts", default=0) or 0) * moe_inter
    first_dense = int(get(cfg, "first_k_dense_replace", default=0))
    freq = int(get(cfg, "moe_layer_freq", default=1))
    moe_layers = [i for i in range(L) if E and i >= first_dense and i % freq == 0]
    dense_layer = attn + 2 * h + 3 * h * inter
    moe_layer = attn + 2 * h + E * 3 * h * moe_inter + h * E + 3 * h * shared_inter
    moe_active = attn + 2 * h + top_k * 3 * h * moe_inter + h * E + 3 * h * shared_inter
    n_moe, n_dense = len(moe_layers), L - len(moe_layers)
    # V3's router keeps a per-expert score correction as a persistent buffer, saved in the checkpoint
    router_bias = mt == "deepseek_v3" or cfg.get("topk_method") == "noaux_tc"
    lora = [*q_lora_linears, (h, kv_lora + rope, 1), (kv_lora, nh * (nope + vd), 1), (nh * vd, h, 1)]
    arch = _decoder_common(
        cfg, family="deepseek", h=h, L=L, nh=nh, kv=nh, hd=qk, inter=moe_inter if E else inter, V=V,
        context=_context(cfg), emb=V * h, layer=moe_layer if n_moe else dense_layer, final=h,
        tied=bool(get(cfg, "tie_word_embeddings", default=False)), positional="rotary", norm="RMSNorm",
        gated=True, dropout=False, lora_per_layer=tuple(lora),
        extra_lora=((h, moe_inter, 2 * E * n_moe), (moe_inter, h, E * n_moe), (h, inter, 2 * n_dense),
                    (inter, h, n_dense), (h, shared_inter, 2 * n_moe), (shared_inter, h, n_moe)),
        experts=E, top_k=top_k, active_layer=moe_active if n_moe else None,
        ffn_kind=f"Mixture of Experts ({E}, top {top_k})" if n_moe else None,
        mlp_act_override=(top_k * BF16 * 4 * moe_inter + BF16 * 4 * shared_inter + BF16 * h + 4 * E) if n_moe else None,
    )
    from dataclasses import replace

    if n_moe:  # the first_k_dense_replace layers are dense
        fix = n_dense * (dense_layer - moe_layer)
        fix_active = n_dense * (dense_layer - moe_active)
        arch = replace(arch, params=arch.params + fix, active_params=arch.active_params + fix_active)
    # MLA caches one latent of kv_lora_rank + qk_rope_head_dim per token and layer (as vLLM and SGLang do);
    # kv_layers counts K and V of kv_width each, so the latent is split in two halves.
    return replace(
        arch, kv_layers=tuple(((kv_lora + rope + 1) // 2, None) for _ in range(L)),
        buffers=(("e_score_correction_bias", E * n_moe),) if router_bias and n_moe else (),
        notes=("multi-head latent attention: KV cache holds the compressed latent",),
    )


# ---------------------------------------------------------------------------
# BART family: bart, mbart, marian (encoder-decoder, learned or sinusoidal positions)
# ---------------------------------------------------------------------------

def _bart(cfg: Mapping[str, Any]) -> Arch:
    mt = str(cfg.get("model_type"))
    d = int(cfg["d_model"])
    Le, Ld = int(cfg["encoder_layers"]), int(get(cfg, "decoder_layers", "encoder_layers"))
    He, Hd = int(cfg["encoder_attention_heads"]), int(get(cfg, "decoder_attention_heads", "encoder_attention_heads"))
    Fe, Fd = int(cfg["encoder_ffn_dim"]), int(get(cfg, "decoder_ffn_dim", "encoder_ffn_dim"))
    V, P = int(cfg["vocab_size"]), int(get(cfg, "max_position_embeddings", default=1024))
    arch_name = _arch_name(cfg) or ("MarianMTModel" if mt == "marian" else "BartModel")
    if mt == "marian" and get(cfg, "decoder_vocab_size", default=V) != V:
        raise _Unsupported("marian with a separate decoder vocabulary")
    lm = arch_name.endswith("ForConditionalGeneration") or arch_name == "MarianMTModel"
    if not lm and not arch_name.endswith("Model"):
        raise _Unsupported(f"{arch_name} head")
    # BART/mBART learn positions with an offset of 2; Marian's sinusoidal table is a (frozen) parameter too
    pos = P * d if mt == "marian" else (P + 2) * d
    emb_norm = 0 if mt == "marian" else 2 * d  # layernorm_embedding, per stack
    final_norm = 2 * d if mt == "mbart" else 0  # encoder.layer_norm / decoder.layer_norm
    attn = 4 * (d * d + d)
    enc_layer = attn + 2 * d + (d * Fe + Fe) + (Fe * d + d) + 2 * d
    dec_layer = 2 * attn + 3 * 2 * d + (d * Fd + Fd) + (Fd * d + d)
    shared = V * d
    tied = bool(get(cfg, "tie_word_embeddings", default=True))
    head = (0 if tied else V * d) if lm else 0
    enc = pos + emb_norm + Le * enc_layer + final_norm
    dec = pos + emb_norm + Ld * dec_layer + final_norm
    params = shared + enc + dec + head
    drop = _dropout(cfg, "dropout")
    hd = d // He
    enc_act = Le * (_attn_act(d, d, d, drop) + _mlp_act(d, Fe, False, drop) + 2 * BF16 * d)
    dec_act = Ld * (2 * _attn_act(d, d, d, drop) + _mlp_act(d, Fd, False, drop) + 3 * BF16 * d)
    act = enc_act + dec_act + 2 * BF16 * d + (2 * d if drop else 0)
    return Arch(
        family="bart", model_type=mt, architecture=arch_name, hidden=d, layers=Le, heads=He, kv_heads=He,
        head_dim=hd, intermediate=Fe, vocab=V, context=P, params=params, active_params=params,
        embedding_params=shared, head_params=head, per_layer_params=enc_layer, tied=tied,
        lora_linears=((d, d, 4 * Le + 8 * Ld), (d, Fe, Le), (Fe, d, Le), (d, Fd, Ld), (Fd, d, Ld)),
        act_bytes_per_token=act + (2 * BF16 * d if lm else 0), logit_bytes_per_token=4 * V if lm else 0,
        kv_layers=tuple((Hd * (d // Hd), None) for _ in range(2 * Ld)),
        positional="learned", norm="LayerNorm", post_norm=not bool(get(cfg, "normalize_before", default=mt == "mbart")),
        ffn_kind="Feed Forward", lm_head=lm, encoder_decoder=True, decoder_layers=Ld,
        initializer_range=get(cfg, "init_std", default=0.02),
        buffers=(("final_logits_bias", V),) if lm else (),
    )


# ---------------------------------------------------------------------------
# Multimodal: a text model inside (Gemma 3, Llama 3.2 Vision, Qwen2-VL), vision tower and projector counted apart
# ---------------------------------------------------------------------------

# What transformers fills in when a nested text_config leaves a key out (Gemma3TextConfig defaults).
_GEMMA3_TEXT_DEFAULTS = {
    "model_type": "gemma3_text", "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
    "max_position_embeddings": 131_072, "sliding_window": 4096, "tie_word_embeddings": True,
}
_SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_channels": 3,
                    "image_size": 224, "patch_size": 16, "vision_use_head": True}


def _siglip_vision(v: Mapping[str, Any]) -> int:
    v = {**_SIGLIP_DEFAULTS, **{k: x for k, x in v.items() if x is not None}}
    hv, inter, layers = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["num_hidden_layers"])
    p, c, size = int(v["patch_size"]), int(v["num_channels"]), int(v["image_size"])
    embeddings = c * p * p * hv + hv + (size // p) ** 2 * hv
    layer = 2 * 2 * hv + 4 * (hv * hv + hv) + (hv * inter + inter) + (inter * hv + hv)
    head = 0
    if v["vision_use_head"]:  # attention-pooling head: probe, MultiheadAttention, LayerNorm, MLP
        head = hv + (3 * hv * hv + 3 * hv) + (hv * hv + hv) + 2 * hv + (hv * inter + inter) + (inter * hv + hv)
    return embeddings + layers * layer + 2 * hv + head


def _with_parts(text: Arch, cfg: Mapping[str, Any], family: str, parts: list[tuple[str, int]]) -> Arch:
    from dataclasses import replace

    extra = sum(n for name, n in parts if name != "text")
    return replace(
        text, family=family, model_type=str(cfg.get("model_type")), architecture=_arch_name(cfg),
        params=text.params + extra, active_params=text.active_params + extra, components=tuple(parts),
        notes=(*text.notes, "activations and LoRA counted for the text model; the vision tower is counted in params"),
    )


def _gemma3(cfg: Mapping[str, Any]) -> Arch:
    if not isinstance(cfg.get("text_config"), Mapping) or not isinstance(cfg.get("vision_config"), Mapping):
        raise _Unsupported("gemma3 without text_config and vision_config")
    arch_name = _arch_name(cfg) or "Gemma3ForConditionalGeneration"
    text_cfg = {**_GEMMA3_TEXT_DEFAULTS, **{k: v for k, v in cfg["text_config"].items() if v is not None},
                "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]}
    if "tie_word_embeddings" in cfg:
        text_cfg["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    if not arch_name.endswith("ForConditionalGeneration"):
        text_cfg["architectures"] = ["Gemma3TextModel"]
    text = _llama_like(text_cfg)
    vision = _siglip_vision(cfg["vision_config"])
    hv = int(get(cfg["vision_config"], "hidden_size", default=_SIGLIP_DEFAULTS["hidden_size"]))
    projector = hv * text.hidden + hv  # mm_input_projection_weight + mm_soft_emb_norm
    return _with_parts(text, cfg, "gemma3", [("text", text.params), ("vision", vision), ("projector", projector)])


def _qwen2_vl(cfg: Mapping[str, Any]) -> Arch:
    vision_cfg = cfg.get("vision_config")
    if not isinstance(vision_cfg, Mapping):
        raise _Unsupported("qwen2_vl without vision_config")
    nested = cfg.get("text_config")
    flat: Mapping[str, Any] = nested if isinstance(nested, Mapping) else cfg
    text_cfg = {**{k: v for k, v in flat.items() if k not in ("vision_config", "text_config")},
                "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}
    if "tie_word_embeddings" in cfg:
        text_cfg["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    text = _llama_like(text_cfg)
    e = int(get(vision_cfg, "embed_dim", default=1280))
    depth = int(get(vision_cfg, "depth", default=32))
    mlp = int(e * float(get(vision_cfg, "mlp_ratio", default=4)))
    c = int(get(vision_cfg, "in_chans", "in_channels", default=3))
    p = int(get(vision_cfg, "patch_size", "spatial_patch_size", default=14))
    t = int(get(vision_cfg, "temporal_patch_size", default=2))
    merge = int(get(vision_cfg, "spatial_merge_size", default=2))
    out = int(get(vision_cfg, "hidden_size", default=text.hidden))
    block = 2 * 2 * e + (e * 3 * e + 3 * e) + (e * e + e) + (e * mlp + mlp) + (mlp * e + e)
    merged = e * merge * merge
    merger = 2 * e + (merged * merged + merged) + (merged * out + out)
    vision = c * t * p * p * e + depth * block + merger
    return _with_parts(text, cfg, "qwen2_vl", [("text", text.params), ("vision", vision)])


def _mllama(cfg: Mapping[str, Any]) -> Arch:
    """MllamaForConditionalGeneration: a Llama text model with gated cross-attention layers, and a tiled ViT."""
    t, v = cfg.get("text_config"), cfg.get("vision_config")
    if not isinstance(t, Mapping) or not isinstance(v, Mapping):
        raise _Unsupported("mllama without text_config and vision_config")
    cross = [int(i) for i in t.get("cross_attention_layers") or []]
    text_cfg = {**t, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    base = _llama_like(text_cfg)
    from dataclasses import replace

    h, V, hd = base.hidden, base.vocab, base.head_dim
    # embed_tokens has 8 extra rows (vocab_size + 8); a cross-attention layer adds q/k norms and two gates
    text_params = base.params + 8 * h + len(cross) * (2 * hd + 2)
    text = replace(base, params=text_params, active_params=text_params, embedding_params=(V + 8) * h)
    hv = int(v["hidden_size"])
    inter = int(v["intermediate_size"])
    p, c = int(v["patch_size"]), int(get(v, "num_channels", default=3))
    tiles = int(get(v, "max_num_tiles", default=4))
    ratios = len(v.get("supported_aspect_ratios") or [[1, 1], [1, 2], [1, 3], [1, 4], [2, 1], [2, 2], [3, 1], [4, 1]])
    patches = (int(v["image_size"]) // p) ** 2 + 1
    layer = 4 * hv * hv + (hv * inter + inter) + (inter * hv + hv) + 2 * 2 * hv
    vision = (
        c * p * p * hv + hv  # patch embedding (no bias), class embedding
        + 1 + patches * hv + (ratios + 1) * tiles * patches * hv  # gated position and tile-position embeddings
        + 2 * ((ratios + 1) * tiles * hv + 1)  # pre/post tile embeddings, gated
        + 2 * 2 * hv  # layernorm_pre, layernorm_post
        + int(v["num_hidden_layers"]) * layer
        + int(get(v, "num_global_layers", default=8)) * (layer + 2)  # gated global layers
    )
    out = int(get(v, "vision_output_dim", default=7680))
    projector = out * h + h
    return _with_parts(text, cfg, "mllama", [("text", text_params), ("vision", vision), ("projector", projector)])


class _Unsupported(Exception):
    """Raised inside a family builder when a config uses a variant we do not reconstruct."""


BUILDERS: dict[str, Callable[[Mapping[str, Any]], Arch]] = {
    "bert": _bert,
    "roberta": _bert,
    "xlm-roberta": _bert,
    "camembert": _bert,
    "distilbert": _distilbert,
    "gpt2": _gpt2,
    "gptj": _gptj,
    "gpt_neox": _gpt_neox,
    "opt": _opt,
    "bloom": _bloom,
    "falcon": _falcon,
    "RefinedWeb": _falcon,
    "RefinedWebModel": _falcon,
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _llama_like,
    "qwen3": _llama_like,
    "gemma": _llama_like,
    "gemma2": _llama_like,
    "gemma3_text": _llama_like,
    "phi3": _llama_like,
    "granite": _llama_like,
    "mixtral": _llama_like,
    "qwen2_moe": _llama_like,
    "qwen3_moe": _llama_like,
    "granitemoe": _llama_like,
    "gpt_oss": _gpt_oss,
    "t5": _t5,
    "mt5": _t5,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "bart": _bart,
    "mbart": _bart,
    "marian": _bart,
    "gemma3": _gemma3,
    "mllama": _mllama,
    "qwen2_vl": _qwen2_vl,
}

SUPPORTED_MODEL_TYPES = tuple(sorted(BUILDERS))


def build(config: Mapping[str, Any]) -> Arch | Unsupported:
    """The architecture of ``config``, or :class:`Unsupported` saying why not.

    A config missing a key its family needs is unsupported too (with the key
    named), rather than an exception: the tracker reruns this on whatever an
    upstream revision holds."""
    mt = str(config.get("model_type") or "")
    builder = BUILDERS.get(mt)
    if builder is None:
        return Unsupported(mt or "<none>", "model_type not reconstructed")
    try:
        return builder(config)
    except _Unsupported as e:
        return Unsupported(mt, str(e))
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        return Unsupported(mt, f"config lacks or mangles {e}")


# ---------------------------------------------------------------------------
# GGUF headers: a config for the estimator from llama.cpp's metadata keys
# ---------------------------------------------------------------------------

# GGUF general.architecture -> (transformers model_type, architectures[0]) for the llama-like families
_GGUF_ARCHS = {
    "llama": ("llama", "LlamaForCausalLM"),
    "mistral": ("mistral", "MistralForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "qwen3": ("qwen3", "Qwen3ForCausalLM"),
    "gemma": ("gemma", "GemmaForCausalLM"),
    "gemma2": ("gemma2", "Gemma2ForCausalLM"),
    "gemma3": ("gemma3_text", "Gemma3ForCausalLM"),
    "phi3": ("phi3", "Phi3ForCausalLM"),
}


def config_from_gguf(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``config.json`` a GGUF header implies, for the families whose keys map one to one; else None.

    ``header`` is :func:`tracker.core.findings.gguf.read_gguf_header`'s result. The output
    embedding is tied when the file holds no ``output.weight`` tensor (llama.cpp then
    reuses ``token_embd.weight``)."""
    meta = header.get("metadata") or {}
    arch = meta.get("general.architecture")
    if arch not in _GGUF_ARCHS:
        return None
    model_type, architecture = _GGUF_ARCHS[arch]

    def key(name: str) -> Any:
        return meta.get(f"{arch}.{name}")

    tokens = meta.get("tokenizer.ggml.tokens")
    vocab = key("vocab_size") or (len(tokens) if isinstance(tokens, list) else None)
    heads = key("attention.head_count")
    ffn = key("feed_forward_length")
    if not all(isinstance(v, int) for v in (key("embedding_length"), key("block_count"), heads, ffn, vocab)):
        return None
    config: dict[str, Any] = {
        "model_type": model_type, "architectures": [architecture], "hidden_size": key("embedding_length"),
        "num_hidden_layers": key("block_count"), "intermediate_size": ffn, "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv") or heads, "vocab_size": vocab,
        "max_position_embeddings": key("context_length"),
    }
    if isinstance(key("attention.key_length"), int) and key("attention.key_length") != config["hidden_size"] // heads:
        config["head_dim"] = key("attention.key_length")
    if key("rope.freq_base") is not None:
        config["rope_theta"] = key("rope.freq_base")
    if key("attention.layer_norm_rms_epsilon") is not None:
        config["rms_norm_eps"] = round(float(key("attention.layer_norm_rms_epsilon")), 9)
    if key("attention.sliding_window") is not None:
        config["sliding_window"] = key("attention.sliding_window")
    config["tie_word_embeddings"] = "output.weight" not in (header.get("tensors") or {})
    return config
