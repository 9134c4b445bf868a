"""``tracker scan``'s output: the scanning service (tracker/services/scanning.py) finds, looks up each repo
once and reports; this renders the report (text, JSON, SARIF, CycloneDX) and shows progress on a terminal."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from tracker.adapters.settings import Settings
from tracker.core.model import OUTPUT_FORMATS
from tracker.pipeline.scan.report import ScanReport
from tracker.pipeline.scan.source import TrackerLike
from tracker.services.scanning import Scanning

if TYPE_CHECKING:
    from tracker.pipeline.scan.cyclonedx import BomModel

FORMATS = OUTPUT_FORMATS
PROGRESS_AFTER = 1.0  # seconds of looking up before a progress bar shows


def progress(total: int, what: str) -> tqdm[Any]:
    """A progress bar on stderr that shows once the work has taken a second, and only on a terminal.

    Never in a pipe or a CI log (``disable=None``: tqdm's test for a TTY), where it would be noise
    between the report's lines.
    """
    return tqdm(total=total, desc=what, unit="repo", delay=PROGRESS_AFTER, leave=False, disable=None,
                file=sys.stderr)


def run_scan(path: Path, *, settings: Settings, user_tracker: Callable[[], TrackerLike], output_format: str,
             fail_on: Iterable[str] = (), watch: bool = False, version: str = "0") -> tuple[str, int]:
    """The rendered report and the exit status (0, or 1 when ``fail_on`` trips)."""
    scanning = Scanning(settings, user_tracker, progress=progress)
    report = scanning.scan(path, fail_on=fail_on, watch=watch, cards=output_format == "cyclonedx")
    return render(report, output_format, version=version, hub_url=hub_url(settings)), report.exit_code


def hub_url(settings: Settings) -> str:
    """Where the models live, for the BOM's links: the configured Hub (a mirror, the stand-in) or huggingface.co."""
    return settings.hub.endpoint or "https://huggingface.co"


def bom_models(report: ScanReport) -> list[BomModel]:
    """One BOM model per revision the code references, with the places that reference it."""
    from tracker.pipeline.scan.cyclonedx import (  # cyclonedx-python-lib takes a second to import
        BomModel,
        Where,
    )

    models = []
    for entry in report.entries:
        ref, status = entry.reference, entry.status
        sha = status.revision if status is not None and status.revision else ref.ref if ref.pinned else None
        models.append(BomModel(repo=ref.repo, sha=sha, status=status,
                               places=(Where(ref.file, ref.line, ref.column),)))
    return models


def render(report: ScanReport, output_format: str, *, version: str, hub_url: str = "https://huggingface.co") -> str:
    data: Any
    if output_format == "text":
        return report.to_text()
    if output_format == "json":
        data = report.to_json()
    elif output_format == "sarif":
        data = report.to_sarif(version=version)
    elif output_format == "cyclonedx":
        from tracker.pipeline.scan.cyclonedx import build_bom

        data = build_bom(bom_models(report), version=version, hub_url=hub_url)
    else:
        raise ValueError(f"unknown format {output_format!r}: use one of {', '.join(FORMATS)}")
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
