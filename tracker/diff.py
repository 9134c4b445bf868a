"""The raw difference between two revisions: files, and structured diffs of tracked text files. Pure.

This is the complete, addressable record later layers (findings, advisories)
build meaning on. File identity is the content id (LFS sha256, else git blob
id), never the commit, so a squash that keeps content changes nothing here.
"""

from __future__ import annotations

import difflib
import json
import posixpath
from collections.abc import Callable, Mapping
from typing import Any

import yaml
from deepdiff import DeepDiff

from tracker.model import FileEntry, Snapshot

TRACKED_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "tokenizer.json",
        "preprocessor_config.json",
        "chat_template.json",
        "requirements.txt",
        "README.md",
    }
)
TRACKED_SUFFIXES = (".jinja", ".py", ".index.json")
MAX_LISTED = 200  # entries listed per side in a vocabulary diff; counts are always complete


def is_tracked(path: str) -> bool:
    """Files whose content the tracker reads and diffs (small, meaningful, never weights)."""
    name = posixpath.basename(path)
    if path in TRACKED_NAMES or (name in TRACKED_NAMES and name != "README.md"):
        return True
    return name.endswith(TRACKED_SUFFIXES)


def entry_json(entry: FileEntry) -> dict[str, Any]:
    return {"path": entry.path, "size": entry.size, "blob_id": entry.blob_id, "lfs_sha256": entry.lfs_sha256,
            "xet_hash": entry.xet_hash}


def diff_files(old: Snapshot | None, new: Snapshot) -> dict[str, list[dict[str, Any]]]:
    """Files added, removed and changed (by content id) between two snapshots."""
    before = old.by_path() if old else {}
    after = new.by_path()
    added = [entry_json(after[p]) for p in sorted(after.keys() - before.keys())]
    removed = [entry_json(before[p]) for p in sorted(before.keys() - after.keys())]
    changed = [
        {"path": p, "before": entry_json(before[p]), "after": entry_json(after[p])}
        for p in sorted(before.keys() & after.keys())
        if before[p].content_id != after[p].content_id or before[p].size != after[p].size
    ]
    return {"added": added, "removed": removed, "changed": changed}


def same_content(a: Snapshot, b: Snapshot) -> bool:
    """Whether two revisions hold exactly the same files (a squash or re-push that changed nothing)."""
    return {f.path: f.content_id for f in a.files} == {f.path: f.content_id for f in b.files}


def readme_front_matter(data: bytes) -> Any:
    """The YAML front matter of a model card (between leading ``---`` lines), or None."""
    text = data.decode("utf-8")
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end == -1:
        return None
    return yaml.safe_load(text[3:end])


def _deepdiff(a: Any, b: Any, **kwargs: Any) -> dict[str, Any]:
    if a == b:
        return {}
    return json.loads(DeepDiff(a, b, verbose_level=2, **kwargs).to_json())


def _vocab_diff(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, Any]:
    """Vocabulary diff by set operations: DeepDiff is far too slow on 100k+ entries."""
    added = sorted(b.keys() - a.keys(), key=lambda t: b[t])
    removed = sorted(a.keys() - b.keys(), key=lambda t: a[t])
    renumbered = sorted((t for t in a.keys() & b.keys() if a[t] != b[t]), key=lambda t: b[t])
    return {
        "added_count": len(added),
        "removed_count": len(removed),
        "renumbered_count": len(renumbered),
        "added": {t: b[t] for t in added[:MAX_LISTED]},
        "removed": {t: a[t] for t in removed[:MAX_LISTED]},
        "renumbered": {t: [a[t], b[t]] for t in renumbered[:MAX_LISTED]},
    }


def _merges_diff(a: list[Any], b: list[Any]) -> dict[str, Any]:
    key = lambda m: " ".join(m) if isinstance(m, list) else str(m)  # noqa: E731 - merges are "a b" or ["a","b"]
    sa, sb = {key(m) for m in a}, {key(m) for m in b}
    added, removed = sorted(sb - sa), sorted(sa - sb)
    return {"added_count": len(added), "removed_count": len(removed), "added": added[:MAX_LISTED],
            "removed": removed[:MAX_LISTED]}


def _tokenizer_json_diff(a: Any, b: Any) -> dict[str, Any]:
    model_a = a.get("model") if isinstance(a, dict) else None
    model_b = b.get("model") if isinstance(b, dict) else None
    if not (isinstance(model_a, dict) and isinstance(model_b, dict)):
        return {"kind": "json", "deepdiff": _deepdiff(a, b)}
    excluded = ["root['model']['vocab']", "root['model']['merges']"]
    result: dict[str, Any] = {"kind": "tokenizer", "deepdiff": _deepdiff(a, b, exclude_paths=excluded)}
    va, vb = model_a.get("vocab"), model_b.get("vocab")
    if isinstance(va, dict) and isinstance(vb, dict):
        result["vocab"] = _vocab_diff(va, vb)
    elif va != vb:
        result["vocab"] = {"deepdiff": _deepdiff(va, vb)}  # unigram vocabularies are lists of [piece, score]
    ma, mb = model_a.get("merges"), model_b.get("merges")
    if isinstance(ma, list) and isinstance(mb, list):
        result["merges"] = _merges_diff(ma, mb)
    return result


def _unified(a: str, b: str, path: str, limit: int = 400) -> str:
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), f"a/{path}", f"b/{path}", lineterm=""))
    if len(lines) > limit:
        lines = lines[:limit] + [f"... {len(lines) - limit} more lines"]
    return "\n".join(lines)


def diff_text(path: str, old: bytes | None, new: bytes | None) -> dict[str, Any]:
    """A structured diff of one tracked file; unreadable content is described, never raised."""
    name = posixpath.basename(path)
    sides: list[Any] = []
    kind = "json" if name.endswith(".json") else "front_matter" if name == "README.md" else "text"
    for label, data in (("old", old), ("new", new)):
        if data is None:
            sides.append(None)
            continue
        try:
            if kind == "json":
                sides.append(json.loads(data))
            elif kind == "front_matter":
                sides.append(readme_front_matter(data))
            else:
                sides.append(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as exc:
            return {"kind": "error", "side": label, "error": f"{type(exc).__name__}: {exc}"}
    a, b = sides
    if kind == "text":
        return {"kind": "text", "unified": _unified(a or "", b or "", path)}
    if name == "tokenizer.json" and a is not None and b is not None:
        return _tokenizer_json_diff(a, b)
    return {"kind": kind, "deepdiff": _deepdiff(a, b)}


def diff_revisions(
    old: Snapshot | None, new: Snapshot, read: Callable[[str, str], bytes | None]
) -> dict[str, Any]:
    """Files plus text diffs of every changed tracked file; ``read(side, path)`` supplies content."""
    files = diff_files(old, new)
    texts: dict[str, Any] = {}
    if old is not None:
        candidates = [c["path"] for c in files["changed"]] + [a["path"] for a in files["added"]] + [
            r["path"] for r in files["removed"]
        ]
        for path in sorted(p for p in candidates if is_tracked(p)):
            texts[path] = diff_text(path, read("old", path), read("new", path))
    return {"files": files, "texts": texts}


def summarize_files(files: Mapping[str, list[Any]]) -> str:
    """One line: what changed, by file names."""
    parts = []
    for label, key in (("changed", "changed"), ("added", "added"), ("removed", "removed")):
        paths = [item["path"] for item in files.get(key, [])]
        if paths:
            shown = ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")
            parts.append(f"{label} {shown}")
    return "; ".join(parts) if parts else "no file changes"
