"""Exports beside the source weights: ONNX (``onnx/``, ``*.onnx``) and OpenVINO (``openvino/``, ``openvino_model.*``).

Many repos ship an export next to the PyTorch/safetensors weights, and users of ONNX Runtime or
OpenVINO load only the export. A revision that replaces the source weights but leaves an export
alone leaves those users on the old model (``exports.stale``; not for source weights renamed, or measured as
re-saved with the same values); one that replaces an export but not
the source weights makes the two disagree (``exports.diverged``). Decided from the file lists.

A replaced ``.onnx`` file is also read, within a window (:mod:`tracker.core.findings.onnx_model`):
a changed opset or IR version (older runtimes refuse the model) and changed graph inputs or
outputs (callers feed or read other tensors) are findings of their own; so are the Parameter and
Result layers of a replaced OpenVINO IR (``openvino_model.xml``, :mod:`tracker.core.findings.openvino_ir`). Pure.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from tracker.core.findings import openvino_ir
from tracker.core.findings.inputs import ONNX as ONNX_MODEL
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.libraries import ONNX, OPENVINO
from tracker.core.findings.onnx_model import describe
from tracker.core.findings.registry import analyser
from tracker.core.findings.rules import SeverityRules
from tracker.core.findings.weights import measured_resave
from tracker.core.model import Finding, RevisionChange, Snapshot

CATEGORY = "exports"
SOURCE_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
MAX_ONNX_FILES = 16  # .onnx files read per revision (onnx/ holds model, model_quantized, model_fp16, ...)


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


@analyser(library=None, order=190)
def analyse(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules) -> list[Finding]:
    if change.old is None:
        return []
    # a source measured as re-saved with the same values leaves every export as current as it was
    sources_replaced = [p for p in _replaced(change.old, change.new, _is_source)
                        if not measured_resave(change, inputs, p)]
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
    replaced_onnx = [p for p in _replaced(change.old, change.new, lambda p: p.lower().endswith(".onnx"))]
    inputs.want(inputs.file_key(ONNX_MODEL, side, path) for path in replaced_onnx[:MAX_ONNX_FILES]
                for side in ("old", "new"))
    for path in replaced_onnx[:MAX_ONNX_FILES]:
        out += _onnx_findings(path, inputs.onnx_model("old", path), inputs.onnx_model("new", path), rules)
    replaced_ir = _replaced(change.old, change.new,
                            lambda p: p.lower().endswith(".xml") and export_format(p) == OPENVINO)
    for path in replaced_ir[:MAX_ONNX_FILES]:
        out += _openvino_findings(path, change, inputs, rules)
    return out


def _openvino_findings(path: str, change: RevisionChange, inputs: RevisionInputs,
                       rules: SeverityRules) -> list[Finding]:
    assert change.old is not None
    sides: dict[str, dict[str, Any]] = {}
    for side, snapshot in (("new", change.new), ("old", change.old)):
        entry = snapshot.get(path)
        if entry is None:
            return []
        if entry.size > openvino_ir.MAX_BYTES:
            return [rules.finding("exports.openvino_not_read", CATEGORY,
                                  f"{path} changed and was not compared: {entry.size:,} bytes ({side}) is over the "
                                  f"{openvino_ir.MAX_BYTES:,}-byte cap", path=path)]
        data = inputs.text(side, path)
        if data is None:
            return []
        try:
            sides[side] = openvino_ir.read_ir(data)
        except openvino_ir.OpenVinoError as exc:
            if side == "old":
                return []
            return [rules.finding("exports.openvino_malformed", CATEGORY,
                                  f"{path} is not a readable OpenVINO IR: {exc}; OpenVINO cannot load it",
                                  path=path, evidence={"error": str(exc)})]
    return _io_findings("openvino", path, sides["old"], sides["new"], rules)


def _io_findings(fmt: str, path: str, old: Mapping[str, Any], new: Mapping[str, Any],
                 rules: SeverityRules) -> list[Finding]:
    """``exports.<fmt>_inputs_changed`` and ``..._outputs_changed``: the same comparison for ONNX and OpenVINO."""
    out: list[Finding] = []
    for kind, key in (("input", "inputs"), ("output", "outputs")):
        parts = _io_changes(kind, old[key], new[key])
        if parts:
            out.append(rules.finding(f"exports.{fmt}_{key}_changed", CATEGORY, f"{path}: {'; '.join(parts[:5])}"
                                     + (f" (+{len(parts) - 5} more)" if len(parts) > 5 else ""), path=path,
                                     before=[describe(io) for io in old[key][:50]],
                                     after=[describe(io) for io in new[key][:50]]))
    return out


def _io_changes(kind: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[str]:
    before = {io["name"]: io for io in old}
    after = {io["name"]: io for io in new}
    parts = [f"{kind} {describe(io)} removed" for name, io in before.items() if name not in after]
    parts += [f"{kind} {describe(io)} added" for name, io in after.items() if name not in before]
    parts += [f"{kind} {describe(io)} → {describe(after[name])}" for name, io in before.items()
              if name in after and io != after[name]]
    if not parts and [io["name"] for io in old] != [io["name"] for io in new]:
        parts.append(f"{kind}s reordered: {', '.join(before)} → {', '.join(after)}")
    return parts


def _onnx_findings(path: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None,
                   rules: SeverityRules) -> list[Finding]:
    if new is None:
        return []
    if "malformed" in new:
        return [rules.finding("exports.onnx_malformed", CATEGORY,
                              f"{path} is not a readable ONNX model: {new['malformed']}; ONNX Runtime cannot load it",
                              path=path, evidence={"error": new["malformed"]})]
    unread = next((m for m in (new, old) if m is not None and "not_read" in m), None)
    if unread is not None:
        return [rules.finding("exports.onnx_not_read", CATEGORY,
                              f"{path} changed and was not compared: {unread['not_read']}",
                              path=path, evidence={"reason": unread["not_read"]})]
    if old is None or "malformed" in old:
        return []
    out: list[Finding] = []
    if old["opsets"] != new["opsets"]:
        domains = sorted(set(old["opsets"]) | set(new["opsets"]))
        moved = ", ".join(f"{d} {old['opsets'].get(d, 'none')} → {new['opsets'].get(d, 'none')}" for d in domains
                          if old["opsets"].get(d) != new["opsets"].get(d))
        out.append(rules.finding("exports.onnx_opset_changed", CATEGORY, f"{path}: opset {moved}", path=path,
                                 before=dict(old["opsets"]), after=dict(new["opsets"])))
    if old["ir_version"] != new["ir_version"]:
        out.append(rules.finding("exports.onnx_ir_version_changed", CATEGORY,
                                 f"{path}: IR version {old['ir_version']} → {new['ir_version']}", path=path,
                                 before=old["ir_version"], after=new["ir_version"]))
    return out + _io_findings("onnx", path, old, new, rules)
