"""Preprocessing of vision libraries outside transformers: timm's ``pretrained_cfg``, open_clip's ``preprocess_cfg``.

How pixels become the tensor a model sees: normalisation (``mean``/``std``), input size,
interpolation, crop. A changed mean/std silently shifts every input; it is not a config detail.
timm keeps it under ``pretrained_cfg`` in ``config.json`` (with ``num_classes``, the head),
open_clip under ``preprocess_cfg`` in ``open_clip_config.json``. Codes (category ``preprocessing``):
``normalisation_changed``, ``input_changed``, ``classes_changed``, ``value_changed``, ``malformed``.
(transformers image processors and audio feature extractors are ``processor.*``.) Pure.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tracker.core.findings.config import (
    JsonProblem,
    change_summary,
    file_changed,
    flat_diff,
    json_value,
    load_json_object,
)
from tracker.core.findings.inputs import RevisionInputs
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import Finding, RevisionChange

CATEGORY = "preprocessing"
MAX_BYTES = 4 * 1024 * 1024
NORMALISATION = {"mean", "std"}
INPUT = {"input_size", "interpolation", "crop_pct", "crop_mode", "resize_mode", "image_size", "fill_color",
         "test_input_size", "fixed_input_size"}
CLASSES = {"num_classes", "label_names", "label_descriptions"}
IGNORED = {"tag", "hf_hub_id", "source", "license", "paper_ids", "paper_name", "notes", "origin_url"}


def _code(key: str) -> str | None:
    leaf = key.rsplit(".", 1)[-1]
    if leaf in NORMALISATION:
        return "preprocessing.normalisation_changed"
    if leaf in INPUT:
        return "preprocessing.input_changed"
    if leaf in CLASSES:
        return "preprocessing.classes_changed"
    if leaf in IGNORED:
        return None
    return "preprocessing.value_changed"


def compare(path: str, old: Any, new: Any, prefix: str, *, rules: SeverityRules, library: str) -> list[Finding]:
    out = []
    for key, before, after in flat_diff(old, new, prefix):
        code = _code(key)
        if code is None:
            continue
        out.append(dataclasses.replace(rules.finding(
            code, CATEGORY, f"{path}: {change_summary(key, before, after)}", path=path,
            before=json_value(before), after=json_value(after), evidence={"key": key},
        ), library=library))
    return out


def load(inputs: RevisionInputs, side: str, path: str) -> dict[str, Any] | None:
    data = inputs.text(side, path)
    return None if data is None else load_json_object(data, max_bytes=MAX_BYTES)


def analyse_file(change: RevisionChange, inputs: RevisionInputs, rules: SeverityRules, *, path: str,
                 sections: dict[str, str], library: str, report_malformed: bool = True) -> list[Finding]:
    """Compare the ``sections`` (key -> dotted prefix) of one JSON file between the two sides.

    ``report_malformed``: False where another analyser already reports the file unparseable.
    """
    if change.old is None or not file_changed(change, path):
        return []
    try:
        new = load(inputs, "new", path)
    except JsonProblem as exc:
        if not report_malformed:
            return []
        return [dataclasses.replace(rules.finding(
            "preprocessing.malformed", CATEGORY, f"{path} cannot be parsed: {exc}; {library} cannot load the model",
            path=path, evidence={"error": str(exc)}), library=library)]
    try:
        old = load(inputs, "old", path)
    except JsonProblem:
        return []
    if old is None or new is None:
        return []
    out: list[Finding] = []
    for section, prefix in sections.items():
        a, b = old.get(section), new.get(section)
        if section == "":
            a, b = {k: v for k, v in old.items() if k in CLASSES}, {k: v for k, v in new.items() if k in CLASSES}
        out += compare(path, a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}, prefix,
                       rules=rules, library=library)
    return out
