"""Weight manifests: does the sharded index still describe the files the revision holds?

A sharded checkpoint is loaded *through its index* (``model.safetensors.index.json``,
``pytorch_model.bin.index.json``): transformers, accelerate, vLLM and TGI open the
files its ``weight_map`` names, and some fetch one tensor from the one file the map
names. So an index that disagrees with the revision breaks loading even though
every file "looks fine" in a file diff. For each index this analyser checks the
revision's own state, and reports what became wrong at this revision:

* ``manifest.shard_missing`` (high): the map names a file the revision does not
  have; every loader that honours the index fails to open it.
* ``manifest.tensor_not_in_shard`` (high): the map sends a tensor to a shard whose
  safetensors header does not hold it (e.g. the map was edited after a tensor moved,
  or the shards were re-uploaded without the map); loaders that read tensors by the
  map fail with a missing key.
* ``manifest.tensor_unindexed`` (moderate): a shard holds tensors the map does not
  list; loaders that trust the map never load them (left at their initialisation).
* ``manifest.shard_in_subfolder`` (moderate): the map names a file in a subfolder of
  the index's folder; download allow-lists such as ``*.safetensors`` and snapshot
  filters written for flat repos miss it.
* ``manifest.shard_orphaned`` (low): shard files beside the index that the map no
  longer names: downloaded for nothing, or picked up by tools that glob shards.
* ``manifest.total_size_mismatch`` (low): ``metadata.total_size`` is not the sum of
  the tensor bytes in the shards' headers; tools that size downloads or device maps
  from it are misled.

Problems are reported when they appear (at the first revision read, everything that
is wrong then); a problem carried over unchanged from the revision before is not
repeated. ``adapter_config.json`` (PEFT) is compared too: a new base model or base
revision (``adapter.base_model_changed``), other target modules
(``adapter.target_modules_changed``) and the rest of the LoRA setup
(``adapter.config_changed``).

Pure: reads only through ``inputs`` (small JSON files, safetensors headers).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tracker.core.bounded import json_object
from tracker.core.findings.inputs import SAFETENSORS, RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.weights import SHARD_RE
from tracker.core.model import FileEntry, Finding, RevisionChange, Snapshot

CATEGORY = "manifest"
ADAPTER_CATEGORY = "adapter"
INDEX_SUFFIXES = {".safetensors.index.json": ".safetensors", ".bin.index.json": ".bin"}
ADAPTER_CONFIG = "adapter_config.json"
MAX_INDEX_BYTES = 16 * 1024 * 1024
MAX_LISTED = 20
"""Items named in evidence per finding; counts are always exact."""

# code -> (severity is in severity/manifests.toml) what the summary calls one item
_ITEM_WORDS = {
    "manifest.shard_missing": "file the revision does not have",
    "manifest.tensor_not_in_shard": "tensor the named shard does not hold",
    "manifest.tensor_unindexed": "tensor in the shards that the index does not list",
    "manifest.shard_in_subfolder": "file in a subfolder",
    "manifest.shard_orphaned": "shard no longer referenced",
}


def index_format(path: str) -> str | None:
    """``.safetensors`` or ``.bin`` for an index path, else None."""
    for suffix, ext in INDEX_SUFFIXES.items():
        if path.endswith(suffix):
            return ext
    return None


@dataclass
class IndexState:
    """What is wrong with one index at one revision: code -> {item: detail}."""

    problems: dict[str, dict[str, str]] = field(default_factory=dict)
    total_size: Any = None
    header_bytes: int | None = None
    readable: bool = True

    def add(self, code: str, item: str, detail: str) -> None:
        self.problems.setdefault(code, {})[item] = detail


def _load_index(inputs: RevisionInputs, side: str, path: str) -> dict[str, Any] | None:
    raw = inputs.text(side, path)
    if raw is None or len(raw) > MAX_INDEX_BYTES:
        return None
    data = json_object(raw)  # None when unreadable: weights.index_unreadable reports it
    return data if data is not None and isinstance(data.get("weight_map"), dict) else None


def _data_bytes(info: Mapping[str, Any]) -> int | None:
    offsets = info.get("data_offsets")
    if isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets):
        return int(offsets[1]) - int(offsets[0])
    return None


def check_index(inputs: RevisionInputs, side: str, path: str, snapshot: Snapshot) -> IndexState | None:
    """The problems of the index at ``path`` against ``snapshot``'s files and shard headers; None if unreadable."""
    data = _load_index(inputs, side, path)
    if data is None:
        return None
    ext = index_format(path) or ""
    folder = posixpath.dirname(path)
    files = snapshot.by_path()
    state = IndexState(total_size=(data.get("metadata") or {}).get("total_size"))
    weight_map: dict[str, Any] = data["weight_map"]
    by_file: dict[str, list[str]] = {}
    for tensor, target in weight_map.items():
        if not isinstance(target, str) or not target:
            state.add("manifest.shard_missing", str(target), f"{tensor} maps to {target!r}, not a file name")
            continue
        by_file.setdefault(target, []).append(tensor)
    by_name: dict[str, list[str]] = {}
    for p in files:
        by_name.setdefault(posixpath.basename(p), []).append(p)
    for target, tensors in sorted(by_file.items()):
        resolved = posixpath.normpath(posixpath.join(folder, target))
        if "/" in target or resolved.startswith("../"):
            state.add("manifest.shard_in_subfolder", target, f"{len(tensors)} tensors in {resolved}")
        if resolved not in files:
            elsewhere = [p for p in by_name.get(posixpath.basename(target), []) if p != resolved]
            detail = f"{len(tensors)} tensors" + (f"; a file of that name is at {elsewhere[0]}" if elsewhere else "")
            state.add("manifest.shard_missing", resolved, detail)
    # Orphans: shard-named files of the same format and stem beside the index that the map does not name.
    stem = posixpath.basename(path)[: -len(ext + ".index.json")]
    named = {posixpath.normpath(posixpath.join(folder, t)) for t in by_file}
    for p in sorted(files):
        m = SHARD_RE.match(posixpath.basename(p))
        if posixpath.dirname(p) != folder or p in named or not p.endswith(ext) or not m or m.group("stem") != stem:
            continue
        state.add("manifest.shard_orphaned", p, f"{files[p].size:,} bytes")
    if ext == ".safetensors":
        _check_headers(inputs, side, folder, by_file, files=files, state=state)
    return state


def _check_headers(
    inputs: RevisionInputs,
    side: str,
    folder: str,
    by_file: Mapping[str, list[str]],
    *,
    files: Mapping[str, FileEntry],
    state: IndexState,
) -> None:
    """Tensors against the shards' own headers, and total_size against their tensor bytes."""
    total = 0
    complete = True
    listed = {t: f for f, ts in by_file.items() for t in ts}
    shard_of = {target: posixpath.normpath(posixpath.join(folder, target)) for target in sorted(by_file)}
    inputs.want(inputs.file_key(SAFETENSORS, side, shard) for shard in shard_of.values() if shard in files)
    for target, tensors in sorted(by_file.items()):
        resolved = shard_of[target]
        if resolved not in files:
            complete = False
            continue
        header = inputs.safetensors_header(side, resolved)
        if not isinstance(header, Mapping):
            complete = False  # unreadable: the reader recorded why
            continue
        held = {name: info for name, info in header.items() if name != "__metadata__" and isinstance(info, Mapping)}
        for tensor in sorted(set(tensors) - set(held)):
            state.add("manifest.tensor_not_in_shard", tensor, f"mapped to {target}")
        for tensor in sorted(set(held) - set(listed)):
            state.add("manifest.tensor_unindexed", tensor, f"held by {target}")
        for info in held.values():
            size = _data_bytes(info)
            if size is None:
                complete = False
            else:
                total += size
    if complete:
        state.header_bytes = total
        if isinstance(state.total_size, bool) or not isinstance(state.total_size, (int, float)):
            if state.total_size is not None:
                state.add("manifest.total_size_mismatch", "total_size", f"{state.total_size!r} is not a number")
        elif int(state.total_size) != total:
            state.add("manifest.total_size_mismatch", "total_size",
                      f"index says {int(state.total_size):,}, the shards' headers hold {total:,}")


def _relevant(path: str, change: RevisionChange) -> bool:
    """Did the index, or any file of its format in its folder or below, change at this revision?"""
    if change.old is None:
        return True
    ext = index_format(path) or ""
    folder = posixpath.dirname(path)
    old, new = change.old.by_path(), change.new.by_path()

    def watched(p: str) -> bool:
        return p == path or (p.endswith(ext) and (not folder or p.startswith(folder + "/")))

    keys = {p for p in set(old) | set(new) if watched(p)}
    return any((old.get(p) is None) != (new.get(p) is None) or
               (old.get(p) is not None and new.get(p) is not None and old[p].content_id != new[p].content_id)
               for p in keys)


@analyser(library=None, order=90)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    findings: list[Finding] = []
    for path in sorted(p for p in change.new.by_path() if index_format(p)):
        if not _relevant(path, change):
            continue
        new = check_index(inputs, "new", path, change.new)
        if new is None:
            continue
        old = None
        if change.old is not None and change.old.get(path) is not None:
            old = check_index(inputs, "old", path, change.old)
        findings += _report(rules, path, new, old)
    findings += _adapter(change, inputs, rules)
    return findings


def _report(rules: SeverityRules, path: str, new: IndexState, old: IndexState | None) -> list[Finding]:
    out: list[Finding] = []
    for code in ("manifest.shard_missing", "manifest.tensor_not_in_shard", "manifest.tensor_unindexed",
                 "manifest.shard_in_subfolder", "manifest.shard_orphaned"):
        items = new.problems.get(code, {})
        before = old.problems.get(code, {}) if old is not None else {}
        fresh = {k: v for k, v in items.items() if before.get(k) != v}
        if not fresh:
            continue
        names = sorted(fresh)
        word = _ITEM_WORDS[code]
        first = names[0]
        summary = (f"{path} names {_plural(len(names), word)}: {first} ({fresh[first]})"
                   if code in ("manifest.shard_missing", "manifest.shard_in_subfolder", "manifest.tensor_not_in_shard")
                   else f"{path}: {_plural(len(names), word)}: {first} ({fresh[first]})")
        if len(names) > 1:
            summary += f" and {len(names) - 1} more"
        out.append(rules.finding(
            code, CATEGORY, summary, path=path, after=names[:MAX_LISTED],
            evidence={"count": len(names), "items": {k: fresh[k] for k in names[:MAX_LISTED]}},
        ))
    mismatch = new.problems.get("manifest.total_size_mismatch", {}).get("total_size")
    was = old.problems.get("manifest.total_size_mismatch", {}).get("total_size") if old is not None else None
    if mismatch is not None and mismatch != was:
        out.append(rules.finding(
            "manifest.total_size_mismatch", CATEGORY, f"{path}: total_size disagrees with the shards: {mismatch}",
            path=path, before=new.total_size, after=new.header_bytes,
            evidence={"total_size": new.total_size, "header_bytes": new.header_bytes},
        ))
    return out


def _plural(n: int, word: str) -> str:
    head, _, tail = word.partition(" ")
    return f"{n} {head}{'' if n == 1 else 's'}" + (f" {tail}" if tail else "")


# ----------------------------------------------------------------------------- PEFT adapters

_BASE_KEYS = ("base_model_name_or_path", "revision")
_SETUP_KEYS = ("peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "use_dora", "use_rslora",
               "modules_to_save", "layers_to_transform", "bias", "fan_in_fan_out", "rank_pattern", "alpha_pattern")


def _adapter_config(inputs: RevisionInputs, side: str, path: str) -> dict[str, Any] | None:
    raw = inputs.text(side, path)
    if raw is None or len(raw) > MAX_INDEX_BYTES:
        return None
    return json_object(raw)


def _modules(value: Any) -> list[str] | str | None:
    if isinstance(value, list):
        return sorted(str(v) for v in value)
    return value if value is None or isinstance(value, str) else str(value)


def _adapter(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    if change.old is None:
        return []
    out: list[Finding] = []
    old_files, new_files = change.old.by_path(), change.new.by_path()
    for path in sorted(p for p in new_files if posixpath.basename(p) == ADAPTER_CONFIG):
        a, b = old_files.get(path), new_files[path]
        if a is None or a.content_id == b.content_id:
            continue
        before, after = _adapter_config(inputs, "old", path), _adapter_config(inputs, "new", path)
        if before is None or after is None:
            continue
        base_changes = {k: [before.get(k), after.get(k)] for k in _BASE_KEYS if before.get(k) != after.get(k)}
        if base_changes:
            parts = [f"{k} {_fmt(v[0])} → {_fmt(v[1])}" for k, v in base_changes.items()]
            out.append(rules.finding(
                "adapter.base_model_changed", ADAPTER_CATEGORY,
                f"{path}: the adapter now applies to another base: " + "; ".join(parts),
                path=path, before={k: v[0] for k, v in base_changes.items()},
                after={k: v[1] for k, v in base_changes.items()},
            ))
        ta, tb = _modules(before.get("target_modules")), _modules(after.get("target_modules"))
        if ta != tb:
            if isinstance(ta, list) and isinstance(tb, list):
                plus, minus = sorted(set(tb) - set(ta)), sorted(set(ta) - set(tb))
                desc = ", ".join(x for x in (_signed("+", plus), _signed("-", minus)) if x)
            else:
                desc = f"{_fmt(ta)} → {_fmt(tb)}"
            out.append(rules.finding(
                "adapter.target_modules_changed", ADAPTER_CATEGORY, f"{path}: target_modules {desc}",
                path=path, before=ta, after=tb,
            ))
        setup = {k: [before.get(k), after.get(k)] for k in _SETUP_KEYS if before.get(k) != after.get(k)}
        if setup:
            out.append(rules.finding(
                "adapter.config_changed", ADAPTER_CATEGORY,
                f"{path}: " + ", ".join(f"{k} {_fmt(v[0])} → {_fmt(v[1])}" for k, v in setup.items()),
                path=path, before={k: v[0] for k, v in setup.items()}, after={k: v[1] for k, v in setup.items()},
            ))
    return out


def _signed(sign: str, items: Iterable[str]) -> str:
    items = list(items)
    return f"{sign}{len(items)} ({', '.join(items[:5])})" if items else ""


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
