"""The raw difference between two revisions: files, and structured diffs of tracked text files. Pure.

This is the complete, addressable record later layers (findings, advisories)
build meaning on. File identity is the content id (LFS sha256, else git blob
id), never the commit, so a squash that keeps content changes nothing here.

Every file here was written by a stranger, so each step is bounded: JSON and YAML
are parsed with depth and size bounds (:mod:`tracker.core.bounded`), a structured diff
of more than :data:`MAX_STRUCTURED_DIFF_ITEMS` elements is summarised by hashes,
and :func:`text_diff` (the one text diff of the tracker) works in time and memory
linear in the input up to its caps, then says only what changed
("changed: sha256 a → b, N lines → M lines").
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from deepdiff import DeepDiff
from rapidfuzz.distance import Indel

from tracker.core.bounded import count_items, json_safe, load_yaml, loads_json
from tracker.core.model import FileEntry, Snapshot

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
        # sentence-transformers, diffusers, open_clip, PEFT: small JSON configs those libraries load
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "model_index.json",
        "scheduler_config.json",
        "open_clip_config.json",
        "adapter_config.json",
    }
)
TRACKED_SUFFIXES = (".jinja", ".py", ".index.json")
MAX_LISTED = 200  # entries listed per side in a vocabulary diff; counts are always complete
MAX_STRUCTURED_DIFF_ITEMS = 50_000
"""Elements (keys, values, list items) per side beyond which a JSON/YAML diff is summarised by hashes."""
MAX_TEXT_DIFF_BYTES = 4 * 1024 * 1024
"""Bytes per side beyond which a text diff is summarised (no real modeling file or template comes close)."""
MAX_TEXT_DIFF_LINES = 100_000
"""Lines per side beyond which a text diff is summarised."""
MAX_TEXT_DIFF_CELLS = 100_000_000
"""Changed lines old × new (after the common head and tail) beyond which a text diff is summarised.

The diff is an exact longest-common-subsequence over line ids, bit-parallel in C++ (rapidfuzz):
10,000 × 10,000 changed lines take about 30 ms and 12.5 MB. difflib, which it replaces, is
quadratic or worse on crafted input (pairs of swapped lines: 50 s for 20,000 lines).
"""
MAX_UNIFIED_LINES = 400
"""Lines of a unified diff kept in the raw diff; the counts stay exact."""


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
    """The YAML front matter of a model card (between leading ``---`` lines), or None.

    Raises ``ValueError`` (``UntrustedInput`` for a bound passed) or ``yaml.YAMLError``.
    """
    text = data.decode("utf-8")
    if not text.startswith("---"):
        return None
    end = text.find("\n---", 3)
    if end == -1:
        return None
    return load_yaml(text[3:end])


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _deepdiff(a: Any, b: Any, **kwargs: Any) -> dict[str, Any]:
    if a == b:
        return {}
    diff: dict[str, Any] = json.loads(DeepDiff(a, b, verbose_level=2, **kwargs).to_json())
    return diff


def _too_large(*values: Any) -> bool:
    return any(count_items(v, MAX_STRUCTURED_DIFF_ITEMS) > MAX_STRUCTURED_DIFF_ITEMS for v in values)


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
    def key(merge: Any) -> str:  # merges are "a b" or ["a", "b"]
        return " ".join(merge) if isinstance(merge, list) else str(merge)

    sa, sb = {key(m) for m in a}, {key(m) for m in b}
    added, removed = sorted(sb - sa), sorted(sa - sb)
    return {"added_count": len(added), "removed_count": len(removed), "added": added[:MAX_LISTED],
            "removed": removed[:MAX_LISTED]}


def _without_vocab(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` minus ``model.vocab`` and ``model.merges`` (shallow copies; diffed by set operations)."""
    model = {k: v for k, v in doc["model"].items() if k not in ("vocab", "merges")}
    return {**doc, "model": model}


def _tokenizer_json_diff(a: Any, b: Any, summary: str) -> dict[str, Any]:
    model_a = a.get("model") if isinstance(a, dict) else None
    model_b = b.get("model") if isinstance(b, dict) else None
    if not (isinstance(model_a, dict) and isinstance(model_b, dict)):
        return _structured("json", a, b, summary)
    rest_a, rest_b = _without_vocab(a), _without_vocab(b)
    result: dict[str, Any] = {"kind": "tokenizer"}
    if _too_large(rest_a, rest_b):
        result["summary"] = summary
    else:
        result["deepdiff"] = _deepdiff(rest_a, rest_b)
    va, vb = model_a.get("vocab"), model_b.get("vocab")
    if isinstance(va, dict) and isinstance(vb, dict):
        result["vocab"] = _vocab_diff(va, vb)
    elif va != vb:  # unigram vocabularies are lists of [piece, score]
        result["vocab"] = {"summary": "changed"} if _too_large(va, vb) else {"deepdiff": _deepdiff(va, vb)}
    ma, mb = model_a.get("merges"), model_b.get("merges")
    if isinstance(ma, list) and isinstance(mb, list):
        result["merges"] = _merges_diff(ma, mb)
    return result


# --------------------------------------------------------------------------- text diffs


@dataclass(frozen=True)
class TextDiff:
    """A unified diff of two texts, bounded in the time and memory it takes and in its output.

    ``lines`` holds at most the ``max_lines`` first lines of the unified diff; ``total_lines``
    is how many it has in all, and ``added`` / ``removed`` count changed lines exactly. When
    an input is over a cap (``diffed`` False) nothing is aligned: ``lines`` is one summary
    line, ``"changed: sha256 a → b, N lines → M lines"``, and the counts are None.
    """

    lines: tuple[str, ...]
    total_lines: int
    added: int | None
    removed: int | None
    diffed: bool
    skipped: str | None = None  # why the texts were not diffed

    @property
    def truncated(self) -> bool:
        return self.total_lines > len(self.lines)

    def text(self, *, trailer: bool = True) -> str:
        """The lines kept, with ``... N more lines`` when cut (unless ``trailer`` is False)."""
        more = self.total_lines - len(self.lines)
        return "\n".join([*self.lines, f"... {more} more lines"] if more and trailer else self.lines)


def _as_text(data: str | bytes) -> tuple[str, bytes]:
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace"), data
    return data, data.encode("utf-8", errors="surrogatepass")


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _summary_diff(raw_a: bytes, raw_b: bytes, text_a: str, text_b: str, why: str) -> TextDiff:
    line = (f"changed: sha256 {_sha256(raw_a)[:12]} → {_sha256(raw_b)[:12]}, "
            f"{_line_count(text_a):,} lines → {_line_count(text_b):,} lines (not diffed: {why})")
    return TextDiff(lines=(line,), total_lines=1, added=None, removed=None, diffed=False, skipped=why)


Opcode = tuple[str, int, int, int, int]


def common_affixes(a: Sequence[Any], b: Sequence[Any]) -> tuple[int, int]:
    """How many items ``a`` and ``b`` share at the start, and then at the end (never overlapping)."""
    head = 0
    limit = min(len(a), len(b))
    while head < limit and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < limit - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    return head, tail


def _opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode] | None:
    """Line opcodes (difflib's shape) of a longest common subsequence; None over the cell cap."""
    head, tail = common_affixes(a, b)
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    if len(mid_a) * len(mid_b) > MAX_TEXT_DIFF_CELLS:
        return None
    ids: dict[str, int] = {}  # exact line identity: rapidfuzz would otherwise compare hash() values
    seq_a = [ids.setdefault(line, len(ids)) for line in mid_a]
    seq_b = [ids.setdefault(line, len(ids)) for line in mid_b]
    ops: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    for op in Indel.opcodes(seq_a, seq_b):
        i1, i2, j1, j2 = op.src_start + head, op.src_end + head, op.dest_start + head, op.dest_end + head
        if op.tag != "equal" and ops and ops[-1][0] != "equal":
            _, i1, _, j1, _ = ops.pop()  # one block of - then + lines per change, as difflib writes it
        ops.append((op.tag, i1, i2, j1, j2))
    ops = [(tag if tag == "equal" else "replace" if i1 < i2 and j1 < j2 else "delete" if i1 < i2 else "insert",
            i1, i2, j1, j2) for tag, i1, i2, j1, j2 in ops]
    if tail:
        ops.append(("equal", len(a) - tail, len(a), len(b) - tail, len(b)))
    return ops


def _groups(codes: list[Opcode], n: int) -> Iterator[list[Opcode]]:
    """Change clusters with ``n`` lines of context: difflib's ``get_grouped_opcodes``."""
    if not any(tag != "equal" for tag, *_ in codes):
        return
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


def _range(start: int, stop: int) -> str:
    """A unified diff's ``start,length`` (difflib's ``_format_range_unified``)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def text_diff(old: str | bytes, new: str | bytes, path: str, *, context: int = 3,
              max_lines: int = MAX_UNIFIED_LINES) -> TextDiff:
    """The unified diff of ``old`` and ``new`` (``a/path``, ``b/path``), bounded.

    Linear in practice: each side is capped in bytes and lines, the common head and
    tail are skipped in one pass, and the rest is aligned by a bit-parallel exact LCS
    whose cost is capped by :data:`MAX_TEXT_DIFF_CELLS`. Past any cap, a one-line summary
    by hashes and line counts. Only the first ``max_lines`` output lines are built.
    """
    text_a, raw_a = _as_text(old)
    text_b, raw_b = _as_text(new)
    if max(len(raw_a), len(raw_b)) > MAX_TEXT_DIFF_BYTES:
        return _summary_diff(raw_a, raw_b, text_a, text_b, f"over {MAX_TEXT_DIFF_BYTES:,} bytes")
    if max(_line_count(text_a), _line_count(text_b)) > MAX_TEXT_DIFF_LINES:
        return _summary_diff(raw_a, raw_b, text_a, text_b, f"over {MAX_TEXT_DIFF_LINES:,} lines")
    a, b = text_a.splitlines(), text_b.splitlines()
    codes = _opcodes(a, b)
    if codes is None:
        return _summary_diff(raw_a, raw_b, text_a, text_b,
                             f"changed region over {MAX_TEXT_DIFF_CELLS:,} line pairs")
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag != "equal")
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag != "equal")
    out: list[str] = []
    total = 0

    def emit(line: str) -> None:
        nonlocal total
        total += 1
        if len(out) < max_lines:
            out.append(line)

    for n, group in enumerate(_groups(codes, context)):
        if n == 0:
            emit(f"--- a/{path}")
            emit(f"+++ b/{path}")
        first, last = group[0], group[-1]
        emit(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if len(out) >= max_lines:  # past the output cap only count
                total += (i2 - i1) if tag == "equal" else (i2 - i1) + (j2 - j1)
                continue
            if tag == "equal":
                for line in a[i1:i2]:
                    emit(" " + line)
                continue
            for line in a[i1:i2]:
                emit("-" + line)
            for line in b[j1:j2]:
                emit("+" + line)
    return TextDiff(lines=tuple(out), total_lines=total, added=added, removed=removed, diffed=True)


# --------------------------------------------------------------------------- structured diffs


def _structured(kind: str, a: Any, b: Any, summary: str) -> dict[str, Any]:
    if _too_large(a, b):
        return {"kind": kind, "summary": summary}
    return {"kind": kind, "deepdiff": _deepdiff(a, b)}


def _hash_summary(old: bytes | None, new: bytes | None) -> str:
    def side(data: bytes | None) -> str:
        return "(absent)" if data is None else f"sha256 {_sha256(data)[:12]} ({len(data):,} bytes)"

    return (f"changed: {side(old)} → {side(new)} (over {MAX_STRUCTURED_DIFF_ITEMS:,} elements: "
            "not diffed element by element)")


def diff_text(path: str, old: bytes | None, new: bytes | None) -> dict[str, Any]:
    """A structured diff of one tracked file; unreadable content is described, never raised."""
    name = posixpath.basename(path)
    sides: list[Any] = []
    kind = "json" if name.endswith(".json") else "front_matter" if name == "README.md" else "text"
    if kind == "text":
        return {"kind": "text", "unified": text_diff(old or b"", new or b"", path).text()}
    for label, data in (("old", old), ("new", new)):
        if data is None:
            sides.append(None)
            continue
        try:
            if kind == "json":
                sides.append(loads_json(data))
            else:
                sides.append(readme_front_matter(data))
        except (ValueError, yaml.YAMLError) as exc:  # UnicodeDecodeError and UntrustedInput are ValueErrors
            reason = " ".join(str(exc).split())[:300]
            return {"kind": "error", "side": label, "error": f"{type(exc).__name__}: {reason}"}
    a, b = sides
    summary = _hash_summary(old, new)
    structured = _tokenizer_json_diff(a, b, summary) if name == "tokenizer.json" and a is not None and b is not None \
        else _structured(kind, a, b, summary)
    safe: dict[str, Any] = json_safe(structured)
    return safe


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
