"""A revision's model facts (architecture, parameters, task, licence) from what the tracker stored. Contains no I/O."""

from __future__ import annotations

from typing import Any

from tracker.core.bounded import json_object
from tracker.core.findings.licence import front_matter
from tracker.core.model import StoredEstimate
from tracker.pipeline.scan.model import ModelFacts


def _text(value: Any, limit: int = 200) -> str | None:
    return value.strip()[:limit] or None if isinstance(value, str) else None


def model_facts(*, config: bytes | None, readme: bytes | None, estimate: StoredEstimate | None) -> ModelFacts | None:
    """The facts the stored config.json, README front matter and memory estimate give; None when none does."""
    conf = json_object(config) or {}
    architectures = conf.get("architectures")
    architecture = _text(architectures[0]) if isinstance(architectures, list) and architectures else None
    params = estimate.params if estimate else None
    meta = front_matter(readme)[0] if readme else {}
    licence = meta.get("license")
    if isinstance(licence, list):  # the Hub takes the first of a list
        licence = licence[0] if licence else None
    if licence == "other":
        licence = meta.get("license_name") or licence
    facts = ModelFacts(
        architecture=architecture or _text(estimate.architecture if estimate else None),
        model_type=_text(conf.get("model_type")) or _text(estimate.model_type if estimate else None),
        parameters=params if isinstance(params, int) and not isinstance(params, bool) and params > 0 else None,
        task=_text(meta.get("pipeline_tag")),
        licence=_text(licence),
        library=_text(meta.get("library_name")),
    )
    return facts if facts != ModelFacts() else None
