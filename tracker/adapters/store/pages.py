"""Reads for the web pages: a fixed number of statements per page, whatever the history's length.

The pages (``tracker/surfaces/web/``) need summaries across many rows: every watched repo with its newest
revision and its worst open advisory; every revision of a repo with its findings and the few
estimator figures a chart plots; every advisory of a repo without its (long) ``affected`` lists.
The domain stores load whole rows one repo at a time; these select only
what a page shows, with JSON fields picked out by the database, in one statement each.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, or_, select

from tracker.adapters.store import stored
from tracker.adapters.store.db import Database
from tracker.adapters.store.repos import repo_row
from tracker.adapters.store.tables import advisories, repos, revisions
from tracker.core.model import RepoId, RepoRow, Severity, StoredEstimate
from tracker.core.store_types import (
    AdvisoryLine,
    LatestRevision,
    ListedAdvisory,
    RepoSummary,
    TimelineRevision,
)

_SEVERITY_RANK = {s.value: s.rank for s in Severity}
# The estimator figures the repo page charts (the stored estimate holds far more: structure, verifier).
CHART_KEYS = ("supported", "params", "full_finetune_gb", "lora_gb", "cards")
_CHARTED = ("params", "full_finetune_gb", "lora_gb")  # the numbers the chart draws


def _libraries(findings: Any) -> tuple[str, ...]:
    """The libraries an advisory's findings are about: a finding's ``library``, or the package a
    dependencies finding names."""
    found: set[str] = set()
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict):
            continue
        if isinstance(f.get("library"), str):
            found.add(f["library"].lower())
        after = f.get("after")
        if f.get("category") == "dependencies" and isinstance(after, dict) and isinstance(after.get("name"), str):
            found.add(after["name"].lower())
    return tuple(sorted(found))


def _open_advisory() -> Any:
    # Live and unfixed: not withdrawn, no fix recorded, and not an "update" (an update's range is
    # fixed at its own revision by definition: it affects only the revisions before it).
    return and_(advisories.c.withdrawn.is_(False), advisories.c.fixed_sha.is_(None), advisories.c.kind != "update")


class PageReads:
    """The page queries (SQLite or PostgreSQL), each call on one read-only connection."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- the index ------------------------------------------------------------------------

    def repo_summaries(self, *, recent: int = 0) -> list[RepoSummary]:
        """Every watched repo with its newest revision read, open advisories and the worst severity of its
        ``recent`` newest revisions read: four statements, five with ``recent``."""
        with self.db.connect() as conn:
            rows = conn.execute(select(repos).order_by(repos.c.repo_id)).all()
            done = revisions.c.status == "done"
            counts: dict[int, int] = dict(conn.execute(
                select(revisions.c.repo_pk, func.count()).where(done).group_by(revisions.c.repo_pk)).all())
            newest = (select(revisions.c.repo_pk, func.max(revisions.c.seq).label("seq")).where(done)
                      .group_by(revisions.c.repo_pk).subquery())
            latest = {
                r.repo_pk: LatestRevision(sha=r.sha, date=r.date, title=r.title, summary=r.summary,
                                          worst_severity=r.worst_severity, baseline=bool(r.baseline),
                                          analysed_at=r.analysed_at)
                for r in conn.execute(
                    select(revisions.c.repo_pk, revisions.c.sha, revisions.c.date, revisions.c.title,
                           revisions.c.summary, revisions.c.worst_severity, revisions.c.baseline,
                           revisions.c.analysed_at)
                    .join(newest, and_(newest.c.repo_pk == revisions.c.repo_pk, newest.c.seq == revisions.c.seq)))
            }
            open_counts: dict[int, dict[str, int]] = {}
            for pk, severity, n in conn.execute(
                    select(advisories.c.repo_pk, advisories.c.severity, func.count()).where(_open_advisory())
                    .group_by(advisories.c.repo_pk, advisories.c.severity)):
                open_counts.setdefault(pk, {})[severity] = n
            strips = self._recent_severities(conn, recent) if recent else {}
        return [RepoSummary(repo=repo_row(r), revisions_read=counts.get(r.id, 0), latest=latest.get(r.id),
                            open_by_severity=open_counts.get(r.id, {}), recent=tuple(strips.get(r.id, ())))
                for r in rows]

    @staticmethod
    def _recent_severities(conn: Any, per_repo: int) -> dict[int, list[str | None]]:
        """Each repo's newest ``per_repo`` revisions read, their worst severity oldest first: one statement."""
        newest = func.row_number().over(partition_by=revisions.c.repo_pk, order_by=revisions.c.seq.desc())
        ranked = (select(revisions.c.repo_pk, revisions.c.seq, revisions.c.worst_severity, newest.label("n"))
                  .where(revisions.c.status == "done").subquery())
        out: dict[int, list[str | None]] = {}
        for pk, severity in conn.execute(select(ranked.c.repo_pk, ranked.c.worst_severity)
                                         .where(ranked.c.n <= per_repo).order_by(ranked.c.repo_pk, ranked.c.seq)):
            out.setdefault(pk, []).append(severity)
        return out

    # -- a repo ---------------------------------------------------------------------------

    def repo(self, repo_id: RepoId) -> RepoRow | None:
        with self.db.connect() as conn:
            row = conn.execute(select(repos).where(repos.c.repo_id == repo_id)).first()
            return repo_row(row) if row else None

    def counts(self, repo_pk: int) -> tuple[int, int]:
        """(revisions, advisories) of a repo, in one statement."""
        revs = select(func.count()).select_from(revisions).where(revisions.c.repo_pk == repo_pk).scalar_subquery()
        advs = select(func.count()).select_from(advisories).where(advisories.c.repo_pk == repo_pk).scalar_subquery()
        with self.db.connect() as conn:
            row = conn.execute(select(revs.label("revisions"), advs.label("advisories"))).one()
        return int(row.revisions), int(row.advisories)

    def chart_figures(self, repo_pk: int, *, limit: int) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        """The chart's points: (sha, charted figures) of the newest ``limit`` revisions the estimator reran at,
        oldest first, and whether older reruns were left out. Only those rows are read (the revisions in
        between hold the figures of the rerun before them), their figures picked out as numbers by the
        database: the cost is ``limit`` rows however long the history."""
        ran = revisions.c.estimate["supported"].as_boolean()
        query = (select(revisions.c.sha, ran.label("supported"),
                        *(revisions.c.estimate[key].as_float().label(key) for key in _CHARTED))
                 .where(revisions.c.repo_pk == repo_pk, ran.is_not(None))
                 .order_by(revisions.c.seq.desc()).limit(limit + 1))
        with self.db.connect() as conn:
            rows = conn.execute(query).all()
        out = [(str(r.sha), {"supported": bool(r.supported), **{key: getattr(r, key) for key in _CHARTED}})
               for r in rows[:limit]]
        return out[::-1], len(rows) > limit

    def neighbours(self, repo_pk: int, seq: int) -> tuple[str | None, str | None]:
        """The shas of the revisions read just before and just after ``seq`` (None at either end)."""
        with self.db.connect() as conn:
            older = conn.execute(select(revisions.c.sha).where(revisions.c.repo_pk == repo_pk, revisions.c.seq < seq)
                                 .order_by(revisions.c.seq.desc()).limit(1)).scalar()
            newer = conn.execute(select(revisions.c.sha).where(revisions.c.repo_pk == repo_pk, revisions.c.seq > seq)
                                 .order_by(revisions.c.seq).limit(1)).scalar()
        return older, newer

    def timeline(self, repo_pk: int, *, limit: int | None = None, offset: int = 0) -> list[TimelineRevision]:
        """A repo's revisions, newest first (one page of them with ``limit``), with findings and chart figures."""
        picked = [revisions.c.estimate[key].label(f"est_{key}") for key in CHART_KEYS]
        query = (select(revisions.c.sha, revisions.c.seq, revisions.c.date, revisions.c.title, revisions.c.status,
                        revisions.c.baseline, revisions.c.findings, revisions.c.worst_severity, revisions.c.summary,
                        *picked)
                 .where(revisions.c.repo_pk == repo_pk).order_by(revisions.c.seq.desc()))
        if limit is not None:
            query = query.limit(limit).offset(offset)
        with self.db.connect() as conn:
            rows = conn.execute(query).all()
        out = []
        for r in rows:
            figures = {key: getattr(r, f"est_{key}") for key in CHART_KEYS}
            if figures["supported"] is not None:  # SQLite's JSON path gives a true as 1
                figures["supported"] = bool(figures["supported"])
            estimate = stored.estimate_of(r.sha, figures) if any(v is not None for v in figures.values()) else None
            out.append(TimelineRevision(sha=r.sha, seq=r.seq, date=r.date, title=r.title, status=r.status,
                                        baseline=bool(r.baseline), findings=stored.findings_of(r.sha, r.findings) or (),
                                        worst_severity=r.worst_severity, summary=r.summary, estimate=estimate))
        return out

    def advisory_lines(self, repo_pk: int, *, revision_sha: str | None = None,
                       page_of: Sequence[str] | None = None) -> list[AdvisoryLine]:
        """A repo's advisories (or one revision's; or, with ``page_of``, those of these revisions and the repo's
        own), most severe first: one statement, no ``affected`` lists."""
        query = (select(advisories.c.id, advisories.c.revision_sha, advisories.c.kind, advisories.c.severity,
                        advisories.c.record["summary"].label("summary"), advisories.c.withdrawn,
                        advisories.c.fixed_sha, advisories.c.published)
                 .where(advisories.c.repo_pk == repo_pk))
        if revision_sha is not None:
            query = query.where(advisories.c.revision_sha == revision_sha).add_columns(
                advisories.c.record["database_specific"]["measured"].label("measured"))
        if page_of is not None:
            query = query.where(or_(advisories.c.revision_sha.in_(list(page_of)), advisories.c.revision_sha.is_(None)))
        with self.db.connect() as conn:
            rows = conn.execute(query.order_by(advisories.c.published, advisories.c.id)).all()
        lines = [AdvisoryLine(id=r.id, revision_sha=r.revision_sha, kind=r.kind, severity=r.severity,
                              summary=str(r.summary or ""), withdrawn=bool(r.withdrawn), fixed_sha=r.fixed_sha,
                              published=r.published, measured=getattr(r, "measured", None)) for r in rows]
        return sorted(lines, key=lambda a: _SEVERITY_RANK.get(a.severity, len(_SEVERITY_RANK)))  # stable

    def estimate_in_force(self, repo_pk: int, seq: int) -> tuple[str, StoredEstimate] | None:
        """The newest estimate at or before revision ``seq``: (its revision's sha, the stored estimate)."""
        ran = revisions.c.estimate["supported"].as_boolean().is_not(None)
        with self.db.connect() as conn:
            row = conn.execute(
                select(revisions.c.sha, revisions.c.estimate)
                .where(revisions.c.repo_pk == repo_pk, revisions.c.seq <= seq, ran)
                .order_by(revisions.c.seq.desc()).limit(1)).first()
        estimate = stored.estimate_of(row.sha, row.estimate) if row is not None else None
        return (row.sha, estimate) if row is not None and estimate is not None else None

    # -- every advisory ---------------------------------------------------------------------

    def advisory_list(self, *, severities: tuple[str, ...] = (), since: datetime | None = None,
                      repo_ids: tuple[str, ...] | None = None) -> list[ListedAdvisory]:
        """Every advisory (newest modified first) with its repo and categories, filtered by severity and date.

        Categories and libraries live inside the record, so those filters are the caller's (one
        statement, the JSON fields picked by the database).
        """
        ds = advisories.c.record["database_specific"]
        query = (select(advisories.c.id, repos.c.repo_id, advisories.c.revision_sha, advisories.c.kind,
                        advisories.c.severity, advisories.c.record["summary"].label("summary"),
                        advisories.c.withdrawn, advisories.c.fixed_sha, advisories.c.published,
                        advisories.c.modified, ds["categories"].label("categories"),
                        ds["findings"].label("findings"))
                 .join(repos, repos.c.id == advisories.c.repo_pk))
        if severities:
            query = query.where(advisories.c.severity.in_(severities))
        if since is not None:
            query = query.where(advisories.c.modified >= since)
        if repo_ids is not None:
            query = query.where(repos.c.repo_id.in_(repo_ids))
        with self.db.connect() as conn:
            rows = conn.execute(query.order_by(advisories.c.modified.desc(), advisories.c.id)).all()
        return [ListedAdvisory(
            line=AdvisoryLine(id=r.id, revision_sha=r.revision_sha, kind=r.kind, severity=r.severity,
                              summary=str(r.summary or ""), withdrawn=bool(r.withdrawn), fixed_sha=r.fixed_sha,
                              published=r.published),
            repo_id=r.repo_id, modified=r.modified,
            categories=tuple(str(c) for c in r.categories or [] if isinstance(c, str)),
            codes=tuple(str(f.get("code")) for f in r.findings or [] if isinstance(f, dict) and f.get("code")),
            libraries=_libraries(r.findings))
            for r in rows]

    def search_ids(self, text: str, *, limit: int = 20) -> tuple[list[str], list[str]]:
        """Watched repo ids and advisory ids containing ``text`` (case-insensitive): two statements."""
        needle = text.lower()
        with self.db.connect() as conn:
            found_repos = conn.execute(select(repos.c.repo_id).where(
                func.lower(repos.c.repo_id).contains(needle, autoescape=True)).order_by(repos.c.repo_id)
                .limit(limit)).scalars().all()
            found_ids = conn.execute(select(advisories.c.id).where(
                func.lower(advisories.c.id).contains(needle, autoescape=True)).order_by(advisories.c.id)
                .limit(limit)).scalars().all()
        return list(found_repos), list(found_ids)
