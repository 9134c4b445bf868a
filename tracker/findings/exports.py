"""Exports beside the source weights: ONNX (``onnx/``, ``*.onnx``) and OpenVINO (``openvino/``, ``openvino_model.*``).

Many repos ship an export next to the PyTorch/safetensors weights, and users of ONNX Runtime or
OpenVINO load only the export. A revision that replaces the source weights but leaves an export
alone leaves those users on the old model (``exports.stale``); one that replaces an export but not
the source weights makes the two disagree (``exports.diverged``). Decided from the file lists
alone: nothing is read. Pure.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from tracker.findings.libraries import ONNX, OPENVINO
from tracker.findings.rules import SeverityRules
from tracker.model import Finding, RevisionChange, RevisionSources, Snapshot

CATEGORY = "exports"
SOURCE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def export_format(path: str) -> str | None:
    """``onnx``, ``openvino`` or None (source weights, or not a weight file)."""
    top, name = path.split("/", 1)[0], posixpath.basename(path)
    if top == "onnx" or name.endswith((".onnx", ".onnx_data", ".onnx.data")):
        return ONNX
    if top == "openvino" or name.startswith("openvino_model"):
        return OPENVINO
    return None


def _is_source(path: str) -> bool:
    return export_format(path) is None and path.endswith(SOURCE_SUFFIXES) and "/" not in path \
        and not path.startswith(("training_args", "optimizer", "scheduler", "rng_state"))


def _replaced(old: Snapshot, new: Snapshot, keep: Callable[[str], bool]) -> list[str]:
    out = []
    for entry in new.files:
        before = old.get(entry.path)
        if keep(entry.path) and before is not None and before.content_id != entry.content_id:
            out.append(entry.path)
    return out


def analyse(change: RevisionChange, sources: RevisionSources, rules: SeverityRules) -> list[Finding]:
    if change.old is None:
        return []
    sources_replaced = _replaced(change.old, change.new, _is_source)
    out: list[Finding] = []
    for fmt, label in ((ONNX, "ONNX"), (OPENVINO, "OpenVINO")):
        old_exports = sorted(f.path for f in change.old.files if export_format(f.path) == fmt)
        new_exports = sorted(f.path for f in change.new.files if export_format(f.path) == fmt)
        if not old_exports or not new_exports:
            continue  # an export added or removed is a file change, not a lag
        exports_replaced = [p for p in _replaced(change.old, change.new, lambda p: export_format(p) is not None)
                            if export_format(p) == fmt]
        if sources_replaced and not exports_replaced:
            out.append(rules.finding(
                "exports.stale", CATEGORY,
                f"{', '.join(sources_replaced[:3])} changed but the {label} export ({', '.join(new_exports[:3])}) "
                f"did not: {label} users still get the old weights",
                path=new_exports[0], evidence={"format": fmt, "sources": sources_replaced[:50],
                                               "exports": new_exports[:50]}))
        elif exports_replaced and not sources_replaced and any(_is_source(f.path) for f in change.new.files):
            out.append(rules.finding(
                "exports.diverged", CATEGORY,
                f"the {label} export changed ({', '.join(exports_replaced[:3])}) but the source weights did not: "
                "the two no longer give the same model",
                path=exports_replaced[0], evidence={"format": fmt, "exports": exports_replaced[:50]}))
    return out
