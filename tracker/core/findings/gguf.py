"""GGUF files: what a new ``*.gguf`` means, read from its header alone.

A GGUF file (llama.cpp, Ollama, LM Studio) carries its own tokenizer, its own
chat template and its quantization inside the weights file, so a fix upstream
of a conversion, or a re-quantization, never shows in ``tokenizer_config.json``.
This module reads the **header** (metadata key/values and tensor infos) by
range requests, never the tensor data, and reports:

* the embedded chat template (``tokenizer.chat_template`` and named
  ``tokenizer.chat_template.<name>``): rendered on the canonical and derived
  conversations exactly like a ``tokenizer_config.json`` template, with the
  same ``chat_template.*`` codes;
* the embedded tokenizer (``tokenizer.ggml.tokens``/``merges`` and the special
  token ids): the same ``tokenizer.*`` codes as ``tokenizer.json``;
* ``weights.quantization_changed``: tensors stored in another type, named by
  the file type (``Q4_K_M → Q4_0``) and the per-tensor type changes;
* ``gguf.architecture_changed``, ``gguf.context_length_changed``,
  ``gguf.tensors_changed`` (names or shapes), ``weights.parameter_count_changed``
  and ``gguf.metadata_changed`` for any other key.

The reader (:func:`read_gguf_header`) is a bounded, hand-written parser of the
GGUF v2/v3 layout rather than ``gguf.GGUFReader``, because that reader
memory-maps a local file, and here the bytes come from HTTP range reads that
must stop at a cap: it asks for the first ``FIRST_CHUNK`` bytes, then doubles
only while the header goes on, and refuses a header over ``MAX_HEADER_BYTES``.
The format's vocabulary (value types, quantization types, file types) is in
``tracker.core.findings.gguf_types``. Every length read from the file is checked
against the bytes that can remain before anything is allocated.

Pure: the analyser reads only through ``inputs``.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tracker.core.findings import chat_template, tokenizer
from tracker.core.findings import libraries as lib
from tracker.core.findings.files import renames
from tracker.core.findings.gguf_types import GGMLQuantizationType, GGUFValueType, LlamaFileType
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import FileEntry, Finding, RevisionChange
from tracker.core.templates import TemplateRenderer

CATEGORY = "gguf"
MAGIC = b"GGUF"
FIRST_CHUNK = 128 * 1024
"""The first range read; small headers (and tests of multi-GB files) need no second one."""
MAX_HEADER_BYTES = 64 * 1024 * 1024
"""Real headers with a 256k-token vocabulary and its merges are 5-15 MB."""
MAX_TENSORS = 1_000_000
MAX_KV = 100_000
MAX_DIMS = 8
KEEP_ARRAY = 1024
"""Arrays longer than this are kept as a digest (length, type, blake2b), except the tokens and merges."""
KEPT_ARRAYS = frozenset({"tokenizer.ggml.tokens", "tokenizer.ggml.merges"})
MAX_LISTED = 20

TEMPLATE_KEY = "tokenizer.chat_template"
TOKENS_KEY = "tokenizer.ggml.tokens"
MERGES_KEY = "tokenizer.ggml.merges"
# GGUF special-token id keys -> the transformers special token names a template sees
SPECIAL_IDS = {
    "tokenizer.ggml.bos_token_id": "bos_token",
    "tokenizer.ggml.eos_token_id": "eos_token",
    "tokenizer.ggml.unknown_token_id": "unk_token",
    "tokenizer.ggml.padding_token_id": "pad_token",
    "tokenizer.ggml.seperator_token_id": "sep_token",  # sic: the GGUF key is spelled so
    "tokenizer.ggml.mask_token_id": "mask_token",
    "tokenizer.ggml.eot_token_id": "eot_token",
    "tokenizer.ggml.eom_token_id": "eom_token",
}


class GGUFError(ValueError):
    """The bytes are not a GGUF header we can read within the limits."""


class GGUFTooLarge(GGUFError):
    """The header goes on past the byte cap it was read with (not past the end of the file)."""


# ----------------------------------------------------------------------------- the bounded reader


class _Cursor:
    """Sequential little- or big-endian reads over a prefix of the file that grows on demand."""

    def __init__(self, read: Callable[[int, int], bytes], size: int, max_bytes: int, first_chunk: int) -> None:
        self.read = read
        self.size = size
        self.limit = min(size, max_bytes)
        self.max_bytes = max_bytes
        self.buf = bytearray()
        self.pos = 0
        self.order = "<"
        self.fetches = 0
        self._grow(min(first_chunk, self.limit))

    def _grow(self, want: int) -> None:
        want = min(want, self.limit)
        if want <= len(self.buf):
            return
        data = self.read(len(self.buf), want - len(self.buf))
        self.fetches += 1
        if len(data) != want - len(self.buf):
            raise GGUFError(f"range read returned {len(data)} of {want - len(self.buf)} bytes")
        self.buf += data

    def need(self, n: int) -> None:
        end = self.pos + n
        if end <= len(self.buf):
            return
        if end > self.size:
            raise GGUFError(f"header runs past the end of the file ({self.size:,} bytes)")
        if end > self.max_bytes:
            raise GGUFTooLarge(f"header is larger than the {self.max_bytes:,}-byte cap")
        self._grow(max(end, 2 * len(self.buf)))

    def unpack(self, fmt: str) -> Any:
        fmt = self.order + fmt
        n = struct.calcsize(fmt)
        self.need(n)
        value = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value[0] if len(value) == 1 else value

    def remaining_possible(self) -> int:
        return self.limit - self.pos

    def past(self, what: str) -> GGUFError:
        """The error for ``what`` running past the readable prefix: the end of the file, or the cap."""
        return (GGUFError if self.limit == self.size else GGUFTooLarge)(f"{what} runs past {self.beyond()}")

    def beyond(self) -> str:
        """What a too-long item runs past: the end of the file, or the cap."""
        if self.limit == self.size:
            return f"the end of the file ({self.size:,} bytes)"
        return f"the {self.max_bytes:,}-byte cap"

    def string(self) -> str:
        n = self.unpack("Q")
        if n > self.remaining_possible():
            raise self.past(f"string of {n:,} bytes at offset {self.pos:,}")
        self.need(n)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw.decode("utf-8", "replace")


_SCALARS: dict[int, tuple[str, int]] = {
    GGUFValueType.UINT8: ("B", 1), GGUFValueType.INT8: ("b", 1), GGUFValueType.UINT16: ("H", 2),
    GGUFValueType.INT16: ("h", 2), GGUFValueType.UINT32: ("I", 4), GGUFValueType.INT32: ("i", 4),
    GGUFValueType.FLOAT32: ("f", 4), GGUFValueType.BOOL: ("?", 1), GGUFValueType.UINT64: ("Q", 8),
    GGUFValueType.INT64: ("q", 8), GGUFValueType.FLOAT64: ("d", 8),
}  # fmt: skip


def _value_type(raw: int) -> GGUFValueType:
    try:
        return GGUFValueType(raw)
    except ValueError:
        raise GGUFError(f"unknown metadata value type {raw}") from None


def _value(cur: _Cursor, vtype: GGUFValueType, key: str, depth: int = 0) -> Any:
    if vtype == GGUFValueType.STRING:
        return cur.string()
    if vtype in _SCALARS:
        return cur.unpack(_SCALARS[vtype][0])
    if vtype != GGUFValueType.ARRAY:
        raise GGUFError(f"unknown metadata value type {vtype}")
    if depth > 2:
        raise GGUFError(f"{key}: arrays nested too deeply")
    etype = _value_type(cur.unpack("I"))
    n = cur.unpack("Q")
    least = _SCALARS[etype][1] if etype in _SCALARS else 8
    if n * least > cur.remaining_possible():
        raise cur.past(f"{key}: array of {n:,} items")
    keep = n <= KEEP_ARRAY or key in KEPT_ARRAYS
    if etype in _SCALARS:
        fmt, width = _SCALARS[etype]
        cur.need(n * width)
        start = cur.pos
        cur.pos += n * width
        if not keep:
            return _digest(etype, n, bytes(cur.buf[start : cur.pos]))
        return list(struct.unpack_from(f"{cur.order}{n}{fmt}", cur.buf, start))
    items = [_value(cur, etype, key, depth + 1) for _ in range(n)]
    if not keep:
        return _digest(etype, n, repr(items).encode("utf-8", "replace"))
    return items


def _digest(etype: GGUFValueType, n: int, raw: bytes) -> dict[str, Any]:
    return {"array": etype.name, "length": n, "blake2b": hashlib.blake2b(raw, digest_size=16).hexdigest()}


def quant_name(raw: int) -> str:
    """``Q4_K``, ``F16``...; an unknown id is ``type<N>``."""
    try:
        return GGMLQuantizationType(raw).name
    except ValueError:
        return f"type{raw}"


def file_type_name(raw: Any) -> str | None:
    """``general.file_type`` as llama.cpp names it (``Q4_K_M``, ``Q4_0``, ``F16``)."""
    if not isinstance(raw, int):
        return None
    try:
        return LlamaFileType(raw).name.removeprefix("MOSTLY_").replace("ALL_F32", "F32")
    except ValueError:
        return f"file_type {raw}"


def read_gguf_header(
    read: Callable[[int, int], bytes],
    size: int,
    *,
    max_bytes: int = MAX_HEADER_BYTES,
    first_chunk: int = FIRST_CHUNK,
) -> dict[str, Any]:
    """Parse a GGUF header through ``read(offset, length)`` (range reads) of a file of ``size`` bytes.

    Returns ``{"version", "metadata": {key: value}, "tensors": {name: {"type", "shape", "offset"}},
    "header_bytes", "fetches"}``; shapes are in GGUF order (fastest dimension first).
    Raises :class:`GGUFError` for anything that is not a readable GGUF v2/v3 header within ``max_bytes``.
    """
    if size < 24:
        raise GGUFError(f"{size} bytes is too short for a GGUF header")
    cur = _Cursor(read, size, max_bytes, first_chunk)
    cur.need(4)
    if bytes(cur.buf[:4]) != MAGIC:
        raise GGUFError(f"not a GGUF file (magic {bytes(cur.buf[:4])!r})")
    cur.pos = 4
    version = cur.unpack("I")
    if version > 0xFFFF:  # a big-endian file reads its version byte-swapped
        cur.order = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise GGUFError(f"GGUF version {version} is not supported (2 and 3 are)")
    n_tensors, n_kv = cur.unpack("QQ")
    if n_tensors > MAX_TENSORS or n_kv > MAX_KV:
        raise GGUFError(f"{n_tensors:,} tensors and {n_kv:,} metadata keys is over the limits")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        metadata[key] = _value(cur, _value_type(cur.unpack("I")), key)
    tensors: dict[str, dict[str, Any]] = {}
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("I")
        if n_dims > MAX_DIMS:
            raise GGUFError(f"tensor {name!r} has {n_dims} dimensions")
        shape = [cur.unpack("Q") for _ in range(n_dims)]
        qtype, offset = cur.unpack("IQ")
        tensors[name] = {"type": quant_name(qtype), "shape": shape, "offset": offset}
    return {"version": version, "metadata": metadata, "tensors": tensors, "header_bytes": cur.pos,
            "fetches": cur.fetches}


def gguf_params(header: Mapping[str, Any]) -> int:
    """Elements of every tensor the header lists: the checkpoint's parameter count."""
    return sum(math.prod(t["shape"]) for t in (header.get("tensors") or {}).values())


# ----------------------------------------------------------------------------- what the header says


def _tokens(header: Mapping[str, Any]) -> list[str] | None:
    tokens = (header.get("metadata") or {}).get(TOKENS_KEY)
    return tokens if isinstance(tokens, list) else None


def special_tokens(header: Mapping[str, Any]) -> dict[str, str]:
    """``{"bos_token": "<s>", ...}`` from the special token ids and the embedded vocabulary."""
    meta = header.get("metadata") or {}
    tokens = _tokens(header) or []
    out: dict[str, str] = {}
    for key, name in SPECIAL_IDS.items():
        i = meta.get(key)
        if isinstance(i, int) and 0 <= i < len(tokens):
            out[name] = tokens[i]
    return out


def templates(header: Mapping[str, Any], path: str) -> dict[str, chat_template.TemplateSource]:
    meta = header.get("metadata") or {}
    out: dict[str, chat_template.TemplateSource] = {}
    for key, value in meta.items():
        if not isinstance(value, str):
            continue
        if key == TEMPLATE_KEY:
            out["default"] = chat_template.TemplateSource("default", path, value)
        elif key.startswith(TEMPLATE_KEY + "."):
            name = key[len(TEMPLATE_KEY) + 1 :]
            out[name] = chat_template.TemplateSource(name, path, value)
    return out


def _architecture(header: Mapping[str, Any]) -> str | None:
    value = (header.get("metadata") or {}).get("general.architecture")
    return value if isinstance(value, str) else None


def _context_length(header: Mapping[str, Any]) -> Any:
    arch = _architecture(header)
    return (header.get("metadata") or {}).get(f"{arch}.context_length") if arch else None


def file_type(header: Mapping[str, Any]) -> str:
    """The quantization a reader would name: ``general.file_type``, else the commonest tensor type."""
    named = file_type_name((header.get("metadata") or {}).get("general.file_type"))
    if named is not None:
        return named
    counts: dict[str, int] = {}
    for t in (header.get("tensors") or {}).values():
        counts[t["type"]] = counts.get(t["type"], 0) + 1
    return max(sorted(counts), key=lambda k: counts[k]) if counts else "?"


# ----------------------------------------------------------------------------- the analyser


def _pairs(old: Mapping[str, FileEntry], new: Mapping[str, FileEntry]) -> list[tuple[str | None, str]]:
    """(old path, new path) per GGUF file to look at: same path with new content, or added.

    One GGUF removed and one added in the same folder is a replacement (a new
    quantization under a new name), compared as such. A GGUF renamed with identical
    bytes is no change of content (``files.renamed`` says it): neither side is read.
    """
    moved = renames(old, new)
    ggufs_old = {p for p in old if p.lower().endswith(".gguf") and p not in moved}
    ggufs_new = {p for p in new if p.lower().endswith(".gguf") and p not in moved.values()}
    out: list[tuple[str | None, str]] = []
    for path in sorted(ggufs_old & ggufs_new):
        if old[path].content_id != new[path].content_id:
            out.append((path, path))
    gone, came = sorted(ggufs_old - ggufs_new), sorted(ggufs_new - ggufs_old)
    if len(gone) == 1 and len(came) == 1 and posixpath.dirname(gone[0]) == posixpath.dirname(came[0]):
        out.append((gone[0], came[0]))
    else:
        out.extend((None, p) for p in came)
    return out


def gguf_pairs(change: RevisionChange) -> list[tuple[str | None, str]]:
    """The GGUF files compared, (old path or None, new path): each is analysed on its own."""
    new = change.new.by_path()
    if change.old is None:
        return [(None, p) for p in sorted(new) if p.lower().endswith(".gguf")]
    return _pairs(change.old.by_path(), new)


@analyser(library=lib.GGUF, order=100, renders=True, parts=gguf_pairs)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules, *,
            renderer: TemplateRenderer | None = None,
            only: Sequence[tuple[str | None, str]] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    for old_path, new_path in gguf_pairs(change) if only is None else only:
        after = inputs.gguf_header("new", new_path)
        if after is None:
            continue  # unreadable: the reader recorded why
        before = inputs.gguf_header("old", old_path) if old_path is not None else None
        if old_path is not None and before is None:
            continue
        findings += _compare(rules, old_path, new_path, before, after, baseline=change.old is None, renderer=renderer)
    return findings


def _compare(
    rules: SeverityRules,
    old_path: str | None,
    path: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any],
    *,
    baseline: bool,
    renderer: TemplateRenderer | None,
) -> list[Finding]:
    out: list[Finding] = []
    # The embedded chat templates: the same findings as tokenizer_config.json's.
    old_templates = templates(before, old_path or path) if before is not None else {}
    new_templates = templates(after, path)
    old_tokens = special_tokens(before) if before is not None else {}
    new_tokens = special_tokens(after)
    for name in sorted(set(old_templates) | set(new_templates), key=lambda n: (n != "default", n)):
        out += chat_template.template_findings(
            rules, old_templates.get(name), new_templates.get(name), old_tokens, new_tokens,
            baseline=before is None and baseline, renderer=renderer,
        )
    if before is None:
        return out
    out += _tokenizer(rules, path, before, after)
    out += _weights(rules, old_path or path, path, before, after)
    return out


def _retarget(findings: Iterable[Finding], path: str) -> list[Finding]:
    return [replace(f, path=path, evidence={**f.evidence, "embedded_in": path}) for f in findings]


def _tokenizer(rules: SeverityRules, path: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Finding]:
    """The embedded vocabulary, merges and special tokens, with tokenizer.json's codes."""
    out: list[Finding] = []
    old_tokens, new_tokens = _tokens(before), _tokens(after)
    if old_tokens is not None and new_tokens is not None and old_tokens != new_tokens:
        out += _retarget(
            tokenizer.diff_vocab(
                {t: i for i, t in enumerate(old_tokens)}, {t: i for i, t in enumerate(new_tokens)}, rules
            ),
            path,
        )
    old_merges = (before.get("metadata") or {}).get(MERGES_KEY)
    new_merges = (after.get("metadata") or {}).get(MERGES_KEY)
    if isinstance(old_merges, list) and isinstance(new_merges, list) and old_merges != new_merges:
        out += _retarget(tokenizer.diff_merges(old_merges, new_merges, rules), path)
    old_special, new_special = special_tokens(before), special_tokens(after)
    old_meta, new_meta = before.get("metadata") or {}, after.get("metadata") or {}
    for key, name in SPECIAL_IDS.items():
        a, b = old_meta.get(key), new_meta.get(key)
        sa, sb = old_special.get(name), new_special.get(name)
        if a == b and sa == sb:
            continue
        code = tokenizer.SPECIAL_TOKEN_CODES.get(name, "tokenizer.special_token_changed")
        out.append(rules.finding(
            code, tokenizer.CATEGORY,
            f"{path}: {name} {_token(sa, a)} → {_token(sb, b)}",
            path=path, before=sa, after=sb,
            evidence={"key": key, "old_id": a, "new_id": b, "embedded_in": path},
        ))
    return out


def _token(text: str | None, i: Any) -> str:
    if i is None:
        return "(none)"
    return f"{text!r} ({i})" if text is not None else f"id {i}"


_IGNORED_KEYS = frozenset({TOKENS_KEY, MERGES_KEY, "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                           "general.file_type", "general.architecture", *SPECIAL_IDS})


def _weights(
    rules: SeverityRules, old_path: str, path: str, before: Mapping[str, Any], after: Mapping[str, Any]
) -> list[Finding]:
    out: list[Finding] = []
    label = path if old_path == path else f"{old_path} → {path}"
    arch_a, arch_b = _architecture(before), _architecture(after)
    if arch_a != arch_b:
        out.append(rules.finding("gguf.architecture_changed", CATEGORY,
                                 f"{label}: general.architecture {arch_a} → {arch_b}",
                                 path=path, before=arch_a, after=arch_b))
    ctx_a, ctx_b = _context_length(before), _context_length(after)
    if ctx_a != ctx_b and arch_a == arch_b:
        out.append(rules.finding("gguf.context_length_changed", CATEGORY,
                                 f"{label}: context length {ctx_a} → {ctx_b}",
                                 path=path, before=ctx_a, after=ctx_b))
    ta, tb = before.get("tensors") or {}, after.get("tensors") or {}
    common = sorted(set(ta) & set(tb))
    retyped = [n for n in common if ta[n]["type"] != tb[n]["type"]]
    if retyped:
        out.append(_quantization_changed(rules, label, path, (before, after), retyped))
    added, removed = sorted(set(tb) - set(ta)), sorted(set(ta) - set(tb))
    reshaped = [n for n in common if ta[n]["shape"] != tb[n]["shape"]]
    if added or removed or reshaped:
        parts = [f"{len(x)} {word}" for x, word in ((added, "added"), (removed, "removed"), (reshaped, "reshaped")) if x]
        out.append(rules.finding(
            "gguf.tensors_changed", CATEGORY, f"{label}: tensors " + ", ".join(parts),
            path=path,
            evidence={"added": added[:MAX_LISTED], "removed": removed[:MAX_LISTED],
                      "reshaped": {n: [ta[n]["shape"], tb[n]["shape"]] for n in reshaped[:MAX_LISTED]}},
        ))
    pa, pb = gguf_params(before), gguf_params(after)
    if pa != pb:
        out.append(rules.finding("weights.parameter_count_changed", "weights",
                                 f"{label}: parameters {pa:,} → {pb:,} ({pb - pa:+,})",
                                 path=path, before=pa, after=pb))
    ma, mb = before.get("metadata") or {}, after.get("metadata") or {}
    keys = sorted(
        k for k in set(ma) | set(mb)
        if k not in _IGNORED_KEYS and not k.startswith(TEMPLATE_KEY) and k != f"{arch_b}.context_length"
        and ma.get(k) != mb.get(k)
    )
    if keys:
        out.append(rules.finding(
            "gguf.metadata_changed", CATEGORY,
            f"{label}: {len(keys)} metadata keys changed ({', '.join(keys[:5])}{', …' if len(keys) > 5 else ''})",
            path=path,
            evidence={"keys": {k: [_short(ma.get(k)), _short(mb.get(k))] for k in keys[:MAX_LISTED]}},
        ))
    return out


def _quantization_changed(
    rules: SeverityRules, label: str, path: str, sides: tuple[Mapping[str, Any], Mapping[str, Any]],
    retyped: list[str],
) -> Finding:
    """Tensors whose quantization type changed, counted by (old type → new type)."""
    before, after = sides
    ta, tb = before.get("tensors") or {}, after.get("tensors") or {}
    pairs: dict[str, int] = {}
    for n in retyped:
        pair = f"{ta[n]['type']} → {tb[n]['type']}"
        pairs[pair] = pairs.get(pair, 0) + 1
    fa, fb = file_type(before), file_type(after)
    head = f"re-quantized {fa} → {fb}" if fa != fb else f"quantization changed within {fb}"
    listed = ", ".join(f"{p} ×{c}" for p, c in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0])))
    return rules.finding(
        "weights.quantization_changed", "weights",
        f"{label}: {head}; {len(retyped)} of {len(tb)} tensors changed type ({listed})",
        path=path, before=fa, after=fb,
        evidence={"type_changes": pairs, "count": len(retyped),
                  "tensors": {n: [ta[n]["type"], tb[n]["type"]] for n in retyped[:MAX_LISTED]}},
    )


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > 200:
        return value[:199] + "…"
    if isinstance(value, list) and len(value) > 16:
        return {"length": len(value)}
    return value
