"""``tracker scan`` end to end: find, look up each repo once, report. The CLI only parses and prints."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.model import OUTPUT_FORMATS, RepoId
from tracker.pipeline.scan.finder import find_references
from tracker.pipeline.scan.model import Found, PinStatus
from tracker.pipeline.scan.report import ScanReport
from tracker.pipeline.scan.source import AdvisorySource, TrackerLike

if TYPE_CHECKING:
    from tracker.pipeline.scan.cyclonedx import BomModel

FORMATS = OUTPUT_FORMATS
LOOKUP_WORKERS = 4  # repos looked up at once: each is a few Hub round trips
PROGRESS_AFTER = 1.0  # seconds of looking up before a progress bar shows


def progress(total: int, what: str) -> tqdm[Any]:
    """A progress bar on stderr that shows once the work has taken a second, and only on a terminal.

    Never in a pipe or a CI log (``disable=None``: tqdm's test for a TTY), where it would be noise
    between the report's lines.
    """
    return tqdm(total=total, desc=what, unit="repo", delay=PROGRESS_AFTER, leave=False, disable=None,
                file=sys.stderr)


def has_store(settings: Settings) -> bool:
    """Whether the user has a store to read: an SQLite file that does not exist yet is none.

    A scan in CI should not leave a database behind in the checkout it scans.
    """
    url = settings.database.url
    if not url.startswith("sqlite"):
        return True
    database = url.split(":///", 1)[1] if ":///" in url else ""
    return bool(database) and database != ":memory:" and os.path.exists(database.split("?", 1)[0])


def look_up(found: Found, source: AdvisorySource, *,
            workers: int = LOOKUP_WORKERS) -> dict[tuple[str, str | None], PinStatus]:
    """One lookup per repo, covering every revision the code names for it; repos in parallel (Hub-bound)."""
    by_repo: dict[RepoId, list[str | None]] = {}
    for reference in found.references:
        by_repo.setdefault(reference.repo, []).append(reference.ref)
    return look_up_all(by_repo, source, workers=workers)


def look_up_all(by_repo: Mapping[RepoId, Sequence[str | None]], source: AdvisorySource, *,
                workers: int = LOOKUP_WORKERS) -> dict[tuple[str, str | None], PinStatus]:
    """The status of each (repo, revision): one lookup per repo, repos in parallel, progress on a terminal."""
    source.refresh(by_repo)
    statuses: dict[tuple[str, str | None], PinStatus] = {}
    with progress(len(by_repo), "looking up") as bar, \
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scan-lookup") as pool:
        answers = pool.map(lambda item: (item[0], source.lookup(*item)), by_repo.items())
        for repo, answer in answers:
            for ref, status in answer.items():
                statuses[(repo, ref)] = status
            bar.update()
    return statuses


def run_scan(path: Path, *, settings: Settings, user_tracker: Callable[[], TrackerLike], output_format: str,
             fail_on: Iterable[str] = (), watch: bool = False, version: str = "0") -> tuple[str, int]:
    """The rendered report and the exit status (0, or 1 when ``fail_on`` trips)."""
    found = find_references(path)
    tracker = user_tracker() if (watch or has_store(settings)) and found.references else None
    cards = output_format == "cyclonedx"
    # Nothing found: nothing to look up or watch, and no store opened for it.
    with AdvisorySource(settings, tracker=tracker, new_tracker=make_tracker, watch=watch and tracker is not None, cards=cards) as source:
        statuses = look_up(found, source)
        first_seen = list(dict.fromkeys(r.repo for r in found.references))
        watched = [repo for repo in first_seen if repo in source.added]
        report = ScanReport.build(str(path), found, statuses, fail_on=fail_on, watched=watched)
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
