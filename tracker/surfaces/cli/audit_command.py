"""``tracker audit`` end to end: read the cache, look up each repo once, report. The CLI only parses and prints."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.model import OUTPUT_FORMATS, RepoId
from tracker.pipeline.audit.cache import default_cache_dir, read_cache
from tracker.pipeline.audit.report import AuditReport
from tracker.pipeline.scan.source import AdvisorySource, TrackerLike
from tracker.surfaces.cli.scan_command import has_store, hub_url, look_up_all

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
    cache = read_cache(cache_dir if cache_dir is not None else default_cache_dir())
    by_repo: dict[RepoId, list[str | None]] = {}
    for revision in cache.revisions:
        by_repo.setdefault(revision.repo, []).append(revision.sha)
    tracker = user_tracker() if has_store(settings) and by_repo else None
    with AdvisorySource(settings, tracker=tracker, new_tracker=make_tracker, cards=output_format == "cyclonedx") as source:
        statuses = look_up_all(by_repo, source)
        watched = set(source.from_store)
    report = AuditReport.build(cache, {(r, str(s)): v for (r, s), v in statuses.items()}, watched=watched,
                               fail_on=fail_on)
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

