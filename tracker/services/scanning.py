"""Scan and audit: the Hub models a codebase loads (``tracker scan``) or a machine's Hugging Face cache holds
(``tracker audit``), each repo looked up once, and the report. The commands render the report; the tracker
they read from is the user's own (opened only when there is a store to read, or ``--watch``), and repos it
does not watch are read into scratch stores (tracker/pipeline/scan/source.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tracker.adapters.settings import Settings
from tracker.core.model import RepoId
from tracker.pipeline.audit.cache import default_cache_dir, read_cache
from tracker.pipeline.audit.report import AuditReport
from tracker.pipeline.scan.finder import find_references
from tracker.pipeline.scan.model import Found, PinStatus
from tracker.pipeline.scan.report import ScanReport
from tracker.pipeline.scan.source import AdvisorySource, TrackerLike

__all__ = ["LOOKUP_WORKERS", "Bar", "Scanning", "has_store", "look_up_all"]

LOOKUP_WORKERS = 4  # repos looked up at once: each is a few Hub round trips


class Bar(Protocol):
    """What a progress display is told: one more repo looked up."""

    def update(self, n: float | None = 1) -> bool | None: ...


class _NoBar:
    def update(self, n: float | None = 1) -> bool | None:
        return None


Progress = Callable[[int, str], AbstractContextManager[Bar]]  # (total, what) -> a bar, shown while it is open


def _no_progress(_total: int, _what: str) -> AbstractContextManager[Bar]:
    return nullcontext(_NoBar())


def has_store(settings: Settings) -> bool:
    """Whether the user has a store to read: an SQLite file that does not exist yet is none.

    A scan in CI should not leave a database behind in the checkout it scans.
    """
    url = settings.database.url
    if not url.startswith("sqlite"):
        return True
    database = url.split(":///", 1)[1] if ":///" in url else ""
    return bool(database) and database != ":memory:" and os.path.exists(database.split("?", 1)[0])


def look_up_all(by_repo: Mapping[RepoId, Sequence[str | None]], source: AdvisorySource, *,
                workers: int = LOOKUP_WORKERS,
                progress: Progress = _no_progress) -> dict[tuple[str, str | None], PinStatus]:
    """The status of each (repo, revision): one lookup per repo, repos in parallel."""
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


def _by_repo(found: Found) -> dict[RepoId, list[str | None]]:
    by_repo: dict[RepoId, list[str | None]] = {}
    for reference in found.references:
        by_repo.setdefault(reference.repo, []).append(reference.ref)
    return by_repo


@dataclass(frozen=True)
class Scanning:
    """Scans and audits, reading from the user's tracker (``user_tracker`` opens it when needed)."""

    settings: Settings
    user_tracker: Callable[[], TrackerLike]
    progress: Progress = _no_progress

    def scan(self, path: Path, *, fail_on: Iterable[str] = (), watch: bool = False, cards: bool = False) -> ScanReport:
        """The references a codebase makes to Hub models, each with what changed upstream since its pin;
        ``watch`` adds the repos found to the watch list; ``cards`` reads each model's card (a BOM's)."""
        from tracker.app import make_tracker

        found = find_references(path)
        tracker = self.user_tracker() if (watch or has_store(self.settings)) and found.references else None
        # Nothing found: nothing to look up or watch, and no store opened for it.
        with AdvisorySource(self.settings, tracker=tracker, new_tracker=make_tracker,
                            watch=watch and tracker is not None, cards=cards) as source:
            statuses = look_up_all(_by_repo(found), source, progress=self.progress)
            first_seen = list(dict.fromkeys(r.repo for r in found.references))
            watched = [repo for repo in first_seen if repo in source.added]
            return ScanReport.build(str(path), found, statuses, fail_on=fail_on, watched=watched)

    def audit(self, cache_dir: Path | None, *, fail_on: Iterable[str] = (), cards: bool = False) -> AuditReport:
        """The revisions a Hugging Face cache holds (``cache_dir``, else the default one), each with the
        advisories affecting it. Raises ``CacheUnreadable`` (one line) when the cache cannot be read at all."""
        from tracker.app import make_tracker

        cache = read_cache(cache_dir if cache_dir is not None else default_cache_dir())
        by_repo: dict[RepoId, list[str | None]] = {}
        for revision in cache.revisions:
            by_repo.setdefault(revision.repo, []).append(revision.sha)
        tracker = self.user_tracker() if has_store(self.settings) and by_repo else None
        with AdvisorySource(self.settings, tracker=tracker, new_tracker=make_tracker, cards=cards) as source:
            statuses = look_up_all(by_repo, source, progress=self.progress)
            watched = set(source.from_store)
        return AuditReport.build(cache, {(r, str(s)): v for (r, s), v in statuses.items()}, watched=watched,
                                 fail_on=fail_on)
