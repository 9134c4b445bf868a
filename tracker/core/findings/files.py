"""The file inventory: every file added, removed, changed or renamed, one finding each.

The other analysers explain *what* a change means for the files they
understand; this one guarantees that no change goes unmentioned, including
files nobody wrote an analyser for. Content is compared by content id (the LFS
sha256 where there is one, else the git blob id), so a file that is only
touched (same bytes) is not "changed", and a file that moves with the same
bytes is one ``files.renamed`` rather than a removal plus an addition. A rename is
judged by identity (:func:`renames`: the LFS sha256, the Xet hash, or the git blob id
of a small file), so a weight, ONNX or GGUF file renamed with identical bytes is never a
content change for the other analysers; it is moderate, because every hard-coded
download link to the old name now answers 404 (black-forest-labs/FLUX.1-dev's
``.sft`` weights renamed ``.safetensors`` in August 2024; Xenova's renamed ONNX files).

On the first revision read (no old snapshot) a single ``files.baseline``
finding lists the whole tree, instead of one "added" per file.

Pure: uses only the two file lists, never ``inputs``.
"""

from __future__ import annotations

from collections.abc import Mapping

from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import FileEntry, Finding, RevisionChange

CATEGORY = "files"
MAX_BASELINE_LISTED = 2000
"""Files listed in the baseline finding's evidence; the count is always exact."""


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


def _storage(entry: FileEntry) -> str:
    return "lfs" if entry.is_lfs else "git"


@analyser(library=None, order=10)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    new = change.new.by_path()
    if change.old is None:
        return [_baseline(new, rules)]
    old = change.old.by_path()
    removed = {p: old[p] for p in sorted(set(old) - set(new))}
    added = {p: new[p] for p in sorted(set(new) - set(old))}
    out = _renames(removed, added, rules)  # consumes matched entries from both dicts
    for path, entry in added.items():
        out.append(rules.finding(
            "files.added", CATEGORY, f"added {path} ({_bytes(entry.size)})",
            path=path, after=entry.content_id, evidence={"size": entry.size, "storage": _storage(entry)},
        ))
    for path, entry in removed.items():
        out.append(rules.finding(
            "files.removed", CATEGORY, f"removed {path} ({_bytes(entry.size)})",
            path=path, before=entry.content_id, evidence={"size": entry.size, "storage": _storage(entry)},
        ))
    for path in sorted(set(old) & set(new)):
        a, b = old[path], new[path]
        if a.content_id == b.content_id:
            continue
        note = ""
        if a.is_lfs != b.is_lfs:
            note = "; now stored in LFS" if b.is_lfs else "; moved out of LFS"
        out.append(rules.finding(
            "files.changed", CATEGORY, f"changed {path} ({_bytes(a.size)} → {_bytes(b.size)}{note})",
            path=path, before=a.content_id, after=b.content_id,
            evidence={"size_before": a.size, "size_after": b.size,
                      "storage_before": _storage(a), "storage_after": _storage(b)},
        ))
    return out


def _identities(entry: FileEntry) -> tuple[str, ...]:
    """What names this content: its content id, and its Xet hash where the Hub lists one."""
    return (entry.content_id, f"xet:{entry.xet_hash}") if entry.xet_hash else (entry.content_id,)


def renames(old: Mapping[str, FileEntry], new: Mapping[str, FileEntry]) -> dict[str, str]:
    """``{old path: new path}`` for each file removed and another added with the same content, in path order.

    Same content means the same LFS sha256 (or the same Xet hash, or the same git blob id for a
    small file). Empty files all share one blob id, so they are never paired: "renaming" one
    empty file to another says nothing true. Every analyser that must not read a rename as a
    removal plus an addition asks this one function.
    """
    by_content: dict[str, list[str]] = {}
    for path in sorted(set(old) - set(new)):
        if old[path].size > 0:
            for identity in _identities(old[path]):
                by_content.setdefault(identity, []).append(path)
    out: dict[str, str] = {}
    for path in sorted(set(new) - set(old)):
        entry = new[path]
        if entry.size == 0:
            continue
        source = next((p for identity in _identities(entry) for p in by_content.get(identity, []) if p not in out), None)
        if source is not None:
            out[source] = path
    return out


def _renames(removed: dict[str, FileEntry], added: dict[str, FileEntry], rules: SeverityRules) -> list[Finding]:
    """One ``files.renamed`` per pair of :func:`renames`, removing the pair from both dicts."""
    out: list[Finding] = []
    for source, path in sorted(renames(removed, added).items(), key=lambda pair: pair[1]):
        entry = added.pop(path)
        del removed[source]
        out.append(rules.finding(
            "files.renamed", CATEGORY,
            f"renamed {source} → {path} ({_bytes(entry.size)}): hard-coded paths to the old name now 404",
            path=path, before=source, after=path, evidence={"content_id": entry.content_id, "size": entry.size},
        ))
    return out


def _baseline(new: Mapping[str, FileEntry], rules: SeverityRules) -> Finding:
    paths = sorted(new)
    total = sum(e.size for e in new.values())
    return rules.finding(
        "files.baseline", CATEGORY,
        f"first tracked revision: {len(paths):,} files, {_bytes(total)}",
        after=len(paths),
        evidence={
            "files": {p: new[p].size for p in paths[:MAX_BASELINE_LISTED]},
            "count": len(paths),
            "total_size": total,
            "lfs_files": sum(1 for e in new.values() if e.is_lfs),
        },
    )
