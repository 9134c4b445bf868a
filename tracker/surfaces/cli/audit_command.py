"""``tracker audit``'s output: the scanning service (tracker/services/scanning.py) reads the cache, looks up
each repo once and reports; this renders the report (text, JSON, SARIF, CycloneDX)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.adapters.settings import Settings
from tracker.core.model import OUTPUT_FORMATS
from tracker.pipeline.audit.report import AuditReport
from tracker.pipeline.scan.source import TrackerLike
from tracker.services.scanning import Scanning
from tracker.surfaces.cli.scan_command import hub_url, progress

if TYPE_CHECKING:
    from tracker.pipeline.scan.cyclonedx import BomModel

FORMATS = OUTPUT_FORMATS


def run_audit(cache_dir: Path | None, *, settings: Settings, user_tracker: Callable[[], TrackerLike],
              output_format: str, fail_on: Iterable[str] = (), version: str = "0") -> tuple[str, int]:
    """The rendered report and the exit status (0, or 1 when ``fail_on`` trips).

    Raises ``CacheUnreadable`` (one line) when the cache cannot be read at all.
    """
    if output_format not in FORMATS:
        raise ValueError(f"unknown format {output_format!r}: use one of {', '.join(FORMATS)}")
    scanning = Scanning(settings, user_tracker, progress=progress)
    report = scanning.audit(cache_dir, fail_on=fail_on, cards=output_format == "cyclonedx")
    return render(report, output_format, version=version, hub_url=hub_url(settings)), report.exit_code


def bom_models(report: AuditReport) -> list[BomModel]:
    """One BOM model per cached revision, with its snapshot folder, size, last access and refs as properties."""
    from tracker.pipeline.scan.cyclonedx import BomModel  # cyclonedx-python-lib takes a second to import

    models = []
    for entry in report.entries:
        rev = entry.revision
        properties = [("cache-path", f"{report.cache.path.rstrip('/')}/{rev.path}"), ("size", str(rev.size)),
                      ("last-accessed", rev.last_accessed.isoformat().replace("+00:00", "Z"))]
        properties += [("ref", ref) for ref in rev.refs]
        models.append(BomModel(repo=rev.repo, sha=rev.sha, status=entry.status, properties=tuple(properties)))
    return models


def render(report: AuditReport, output_format: str, *, version: str, hub_url: str) -> str:
    data: Any
    if output_format == "text":
        return report.to_text()
    if output_format == "json":
        data = report.to_json()
    elif output_format == "sarif":
        data = report.to_sarif(version=version)
    else:
        from tracker.pipeline.scan.cyclonedx import build_bom

        data = build_bom(bom_models(report), version=version, hub_url=hub_url)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

