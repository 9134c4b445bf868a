"""A CycloneDX 1.6 ML-BOM of model revisions and the advisories affecting them. Contains no I/O.

Shared by ``tracker scan`` (the revisions a codebase references, with the files that do) and
``tracker audit`` (the revisions a cache holds). Built with cyclonedx-python-lib:

- one ``machine-learning-model`` component per repo@revision, purl
  ``pkg:huggingface/<owner>/<name>@<sha>`` (also its ``bom-ref``), licence from the card;
  a reference that resolves to no revision is one component without a version;
- a ``modelCard`` (``modelParameters.task``, ``architectureFamily``, ``modelArchitecture``,
  and the estimator's parameter count as a property) where the tracker read the revision.
  cyclonedx-python-lib has no model-card type yet, so the card is added to the serialized
  component; the whole document is then checked by the library's strict validator in the tests;
- each advisory once under ``vulnerabilities``, its OSV id, the tracker as source, a rating,
  its OSV references as ``advisories``, and ``affects`` naming each component it affects, at
  its revision.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cyclonedx.contrib.license.factories import LicenseFactory
from cyclonedx.model import ExternalReference, ExternalReferenceType, Property, XsUri
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.component_evidence import ComponentEvidence, Occurrence
from cyclonedx.model.impact_analysis import ImpactAnalysisAffectedStatus
from cyclonedx.model.tool import ToolRepository
from cyclonedx.model.vulnerability import (
    BomTarget,
    BomTargetVersionRange,
    Vulnerability,
    VulnerabilityAdvisory,
    VulnerabilityRating,
    VulnerabilityScoreSource,
    VulnerabilitySeverity,
    VulnerabilitySource,
)
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from tracker.core.escaping import escape_strings
from tracker.core.model import Severity
from tracker.pipeline.scan.model import AdvisoryHit, ModelFacts, PinStatus

SPEC_VERSION = "1.6"
PROPERTY = "upstream-tracker"  # the prefix of our property names (CycloneDX's property taxonomy asks for one)

_SEVERITY = {Severity.CRITICAL: VulnerabilitySeverity.CRITICAL, Severity.HIGH: VulnerabilitySeverity.HIGH,
             Severity.MODERATE: VulnerabilitySeverity.MEDIUM, Severity.LOW: VulnerabilitySeverity.LOW,
             Severity.INFO: VulnerabilitySeverity.INFO}


@dataclass(frozen=True)
class Where:
    """A place that references a model: a file (relative to what was scanned), a 1-based line and column."""

    file: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True)
class BomModel:
    """One model revision for the BOM: what the tracker knows of it, where it was seen, extra properties."""

    repo: str
    sha: str | None  # None: the reference resolves to no revision the tracker could find
    status: PinStatus | None
    places: tuple[Where, ...] = ()
    properties: tuple[tuple[str, str], ...] = field(default=())

    @property
    def purl(self) -> str:
        return _purl(self.repo, self.sha)


@functools.lru_cache(maxsize=4096)
def _purl(repo: str, sha: str | None) -> str:
    owner, name = repo.split("/", 1)
    return PackageURL(type="huggingface", namespace=owner, name=name, version=sha).to_string()


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _component(model: BomModel, hub_url: str) -> Component:
    owner, name = model.repo.split("/", 1)
    status, facts = model.status, model.status.facts if model.status else None
    properties = [Property(name=f"{PROPERTY}:{key}", value=value) for key, value in model.properties]
    if status is not None:
        if status.behind is not None:
            properties.append(Property(name=f"{PROPERTY}:behind", value=str(status.behind)))
        if status.head:
            properties.append(Property(name=f"{PROPERTY}:head", value=status.head))
        if status.suggested:
            properties.append(Property(name=f"{PROPERTY}:suggested-revision", value=status.suggested))
        properties += [Property(name=f"{PROPERTY}:note", value=note) for note in status.notes]
    licences = [LicenseFactory().make_from_string(facts.licence)] if facts and facts.licence else []
    place = f"/tree/{model.sha}" if model.sha else ""
    occurrences = [Occurrence(location=w.file, line=w.line, offset=w.column) for w in model.places]
    return Component(
        type=ComponentType.MACHINE_LEARNING_MODEL,
        name=name,
        group=owner,
        version=model.sha,
        purl=PackageURL.from_string(model.purl),
        bom_ref=model.purl,
        description=f"Hugging Face model {model.repo}" + (f" at {model.sha}" if model.sha else ""),
        licenses=licences,
        external_references=[ExternalReference(type=ExternalReferenceType.DISTRIBUTION,
                                               url=XsUri(f"{hub_url.rstrip('/')}/{model.repo}{place}"))],
        evidence=ComponentEvidence(occurrences=occurrences) if occurrences else None,
        properties=properties,
    )


def model_card(facts: ModelFacts | None) -> dict[str, Any] | None:
    """The CycloneDX ``modelCard`` object for what the tracker knows of a model (None: nothing)."""
    if facts is None:
        return None
    parameters: dict[str, Any] = {}
    if facts.task:
        parameters["task"] = facts.task
    if facts.model_type:
        parameters["architectureFamily"] = facts.model_type
    if facts.architecture:
        parameters["modelArchitecture"] = facts.architecture
    properties = []
    if facts.parameters is not None:
        properties.append({"name": f"{PROPERTY}:parameters", "value": str(facts.parameters)})
    if facts.library:
        properties.append({"name": f"{PROPERTY}:library", "value": facts.library})
    card: dict[str, Any] = {}
    if parameters:
        card["modelParameters"] = parameters
    if properties:
        card["properties"] = properties
    return card or None


def _vulnerability(hit: AdvisoryHit, affected: Sequence[BomModel]) -> Vulnerability:
    advisory_url = next((url for kind, url in hit.urls if kind == "ADVISORY"), None)
    return Vulnerability(
        bom_ref=f"{PROPERTY}:{hit.id}",
        id=hit.id,
        source=VulnerabilitySource(name="upstream-tracker", url=XsUri(advisory_url) if advisory_url else None),
        ratings=[VulnerabilityRating(severity=_SEVERITY[hit.severity], method=VulnerabilityScoreSource.OTHER,
                                     justification=f"upstream-tracker severity: {hit.severity.value}")],
        description=hit.summary or None,
        detail=hit.details or None,
        advisories=[VulnerabilityAdvisory(url=XsUri(url), title=kind) for kind, url in hit.urls],
        published=_time(hit.published),
        updated=_time(hit.modified),
        affects=[BomTarget(ref=m.purl, versions=[BomTargetVersionRange(
            version=m.sha, status=ImpactAnalysisAffectedStatus.AFFECTED)] if m.sha else None) for m in affected],
        properties=[Property(name=f"{PROPERTY}:kind", value=hit.kind)] if hit.kind else None,
    )


def build_bom(models: Iterable[BomModel], *, version: str, hub_url: str,
              timestamp: datetime | None = None) -> dict[str, Any]:
    """The ML-BOM as a JSON document (CycloneDX 1.6)."""
    merged: dict[str, BomModel] = {}
    for model in models:  # the same revision seen twice (two files, a floating and a pinned reference) is one
        seen = merged.get(model.purl)
        merged[model.purl] = model if seen is None else BomModel(
            seen.repo, seen.sha, seen.status or model.status, seen.places + model.places,
            seen.properties + tuple(p for p in model.properties if p not in seen.properties))
    tool = Component(type=ComponentType.APPLICATION, name="upstream-tracker", version=version)
    bom = Bom()
    bom.metadata.tools = ToolRepository(components=[tool])
    if timestamp is not None:
        bom.metadata.timestamp = timestamp
    hits: dict[str, tuple[AdvisoryHit, list[BomModel]]] = {}
    for model in merged.values():
        for hit in model.status.advisories if model.status else ():
            hits.setdefault(hit.id, (hit, []))[1].append(model)
    # Set at once: the library keeps them sorted, and one sort is cheaper than an insertion each.
    bom.components = [_component(model, hub_url) for model in merged.values()]
    bom.vulnerabilities = [_vulnerability(hit, affected) for hit, affected in hits.values()]
    with warnings.catch_warnings():  # "no dependencies defined": a list of models has none to declare
        warnings.simplefilter("ignore", UserWarning)
        document: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    cards = {purl: model_card(m.status.facts if m.status else None) for purl, m in merged.items()}
    for component in document.get("components", []):
        card = cards.get(component.get("bom-ref"))
        if card is not None:
            component["modelCard"] = card
    escaped: dict[str, Any] = escape_strings(document)  # refs, licences, summaries, card facts: strangers' text
    return escaped
