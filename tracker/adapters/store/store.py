"""SqlStore: intent-named reads and writes over the tables, SQLite or PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, overload

from sqlalchemy import Connection, Engine, Text, and_, cast, func, insert, literal, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from tracker.adapters.store.db import database_error, describe_url
from tracker.adapters.store.delivery import DeliveryStoreMixin
from tracker.core.advisory.reach import ReachIndex, events_of
from tracker.core.errors import RevisionUnresolved, StoreConflict
from tracker.core.model import (
    AdvisoryEvent,
    AdvisoryEventType,
    AdvisoryKind,
    AdvisoryRow,
    Commit,
    CommitSha,
    EventRow,
    FileEntry,
    Finding,
    RepoId,
    RepoRow,
    RepoState,
    RevisionRow,
    RevisionStatus,
    Severity,
    Snapshot,
)
from tracker.core.report import AdvisoryWrite, EventReport, RevisionReport

__all__ = ["AdvisoryRow", "EventRow", "RepoRow", "RevisionRow", "SqlStore"]
from tracker.adapters.store import index as reach_index
from tracker.adapters.store.tables import (
    advisories,
    blobs,
    commits,
    events,
    repos,
    revisions,
)


def _insert_edges(conn: Connection, repo_pk: int, edges: Iterable[tuple[str, str | None]], now: datetime) -> int:
    """Add (sha, parent) edges to a repo's commit graph, oldest first, and label them in the reachability
    index; commits already known are left as they are."""
    by_sha = dict(edges)
    if not by_sha:
        return 0
    known: set[str] = set()
    shas = list(by_sha)
    for i in range(0, len(shas), reach_index.CHUNK):
        known |= set(conn.execute(select(commits.c.sha).where(and_(
            commits.c.repo_pk == repo_pk, commits.c.sha.in_(shas[i:i + reach_index.CHUNK])))).scalars())
    rows = [{"repo_pk": repo_pk, "sha": s, "parent_sha": p, "created_at": now}
            for s, p in by_sha.items() if s not in known]
    if rows:
        conn.execute(insert(commits), rows)
        reach_index.index_commits(conn, repo_pk, [(s, [p] if p else []) for s, p in by_sha.items() if s not in known])
    return len(rows)


@overload
def _utc(value: datetime) -> datetime: ...
@overload
def _utc(value: None) -> None: ...
def _utc(value: datetime | None) -> datetime | None:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def snapshot_to_json(snapshot: Snapshot) -> list[dict[str, Any]]:
    return [
        {"path": f.path, "size": f.size, "blob_id": f.blob_id, "lfs_sha256": f.lfs_sha256, "xet_hash": f.xet_hash}
        for f in snapshot.files
    ]


def snapshot_from_json(data: Iterable[dict[str, Any]]) -> Snapshot:
    return Snapshot(files=tuple(FileEntry(**item) for item in data))


class AdvisoryStoreMixin:
    """Advisories, the commit graph and the commit -> advisory index."""

    engine: Engine
    _tx: Any
    _enqueue_deliveries: Callable[[Connection, Sequence[AdvisoryEvent]], None]
    update_repo: Callable[..., None]

    # -- commit graph -----------------------------------------------------------------------

    def add_commits(self, repo_pk: int, edges: Iterable[tuple[str, str | None]], *, now: datetime) -> int:
        """Record (sha, parent) edges; known commits are left as they are."""
        with self._tx() as conn:
            return _insert_edges(conn, repo_pk, edges, now)

    def commit_graph(self, repo_pk: int) -> dict[str, list[str]]:
        """sha -> parents, as far as known."""
        with self._tx() as conn:
            return {r.sha: [r.parent_sha] if r.parent_sha else []
                    for r in conn.execute(select(commits.c.sha, commits.c.parent_sha).where(
                        commits.c.repo_pk == repo_pk))}

    def has_commit(self, repo_pk: int, sha: str) -> bool:
        with self._tx() as conn:
            return conn.execute(select(commits.c.id).where(and_(
                commits.c.repo_pk == repo_pk, commits.c.sha == sha))).first() is not None

    def find_commit(self, sha_or_prefix: str, repo_pk: int | None = None) -> list[tuple[int, str]]:
        """(repo_pk, full sha) of known commits matching a sha or a prefix."""
        with self._tx() as conn:
            cond = (commits.c.sha == sha_or_prefix if len(sha_or_prefix) == 40
                    else commits.c.sha.startswith(sha_or_prefix, autoescape=True))
            query = select(commits.c.repo_pk, commits.c.sha).where(cond)
            if repo_pk is not None:
                query = query.where(commits.c.repo_pk == repo_pk)
            return [(r.repo_pk, r.sha) for r in conn.execute(query.limit(50))]

    def reach(self, repo_pk: int, shas: Iterable[str]) -> ReachIndex:
        """The repo's chains and the labels of ``shas``: what a revision's report asks of the graph."""
        with self._tx() as conn:
            return reach_index.load_index(conn, repo_pk, shas)

    # -- advisories -------------------------------------------------------------------------

    max_versions: int = 1000  # [advisories] max_versions: the newest affected commits a record lists
    _versions_cache: reach_index.VersionsCache

    @staticmethod
    def _advisory(row: Any) -> AdvisoryRow:
        return AdvisoryRow(id=row.id, repo_id=RepoId(row.repo_id), revision_sha=row.revision_sha, kind=row.kind,
                           severity=row.severity, record=row.record, published=_utc(row.published),
                           modified=_utc(row.modified), withdrawn=bool(row.withdrawn), fixed_sha=row.fixed_sha)

    def _advisory_query(self):
        return select(advisories, repos.c.repo_id).join(repos, repos.c.id == advisories.c.repo_pk)

    def _served(self, conn: Connection, rows: Sequence[Any]) -> list[AdvisoryRow]:
        """Rows as read: each record with its ``versions`` computed from the index (bounded)."""
        found = reach_index.versions_of(conn, [(r.id, r.repo_pk, r.kind) for r in rows], self.max_versions,
                                        cache=self._versions_cache)
        out = []
        for r in rows:
            row = self._advisory(r)
            versions, total = found.get(r.id, ([], 0))
            out.append(replace(row, record=reach_index.with_versions(row.record, versions, total)))
        return out

    def get_advisory(self, advisory_id: str) -> AdvisoryRow | None:
        with self._tx() as conn:
            row = conn.execute(self._advisory_query().where(advisories.c.id == advisory_id)).first()
            return self._served(conn, [row])[0] if row else None

    def save_advisory(self, repo_pk: int, record: dict[str, Any], *, revision_sha: str | None, kind: str,
                      severity: str, fixed_sha: str | None, affected: Iterable[str] | None = None) -> bool:
        """Insert or update one advisory alone (tests, benchmarks); ``affected``: the commits a repo-event
        advisory lists (those with a GIT range are indexed from it)."""
        write = AdvisoryWrite(record=record, revision_sha=revision_sha, kind=kind, severity=severity,
                              fixed_sha=fixed_sha, listed=frozenset(affected) if affected is not None else None)
        with self._tx() as conn:
            return self._apply_advisories(conn, repo_pk, [write])

    def _apply_advisories(self, conn: Connection, repo_pk: int, writes: Iterable[AdvisoryWrite]) -> bool:
        """Write advisories and their index (spans, or listed commits) on ``conn``, and queue what they
        announce; True if any changed."""
        announced: list[AdvisoryEvent] = []
        changed_any = False
        for write in writes:
            pk = write.repo_pk if write.repo_pk is not None else repo_pk  # another repo's: an inherited advisory
            record = reach_index.stored_record(write.record)
            withdrawn = "withdrawn" in record
            old = conn.execute(select(advisories.c.record).where(advisories.c.id == write.id)).scalar()
            changed = old != record
            if old is None:
                conn.execute(insert(advisories).values(
                    id=write.id, repo_pk=pk, revision_sha=write.revision_sha, kind=write.kind,
                    severity=write.severity, record=record, published=_parse_ts(record.get("published",
                                                                                           record["modified"])),
                    modified=_parse_ts(record["modified"]), withdrawn=withdrawn, fixed_sha=write.fixed_sha))
            elif changed:
                conn.execute(update(advisories).where(advisories.c.id == write.id).values(
                    record=record, severity=write.severity, modified=_parse_ts(record["modified"]),
                    withdrawn=withdrawn, fixed_sha=write.fixed_sha))
            if withdrawn:
                reach_index.drop_index(conn, write.id)
                reach_index.set_listed(conn, pk, write.id, ())
            elif not reach_index.ranged(write.kind):
                if write.listed is not None:
                    reach_index.set_listed(conn, pk, write.id, write.listed)
            elif old is None or "withdrawn" in old or events_of(old) != events_of(record):
                reach_index.set_spans(conn, pk, write.id, events_of(record))
            event = advisory_event(old, record)
            if event is not None:
                announced.append(event)
            changed_any = changed_any or changed
        if announced:
            # Subscribers get the record as served: its versions computed now, in this transaction.
            served = {r.id: r.record for r in self._served(conn, conn.execute(self._advisory_query().where(
                advisories.c.id.in_([e.advisory_id for e in announced]))).all())}
            self._enqueue_deliveries(conn, [replace(e, record=served.get(e.advisory_id, e.record))
                                            for e in announced])
        return changed_any

    def save_revision_report(self, report: RevisionReport) -> bool:
        """Store a revision's results and its advisories (with their index), and mark it done: one transaction.

        Only a revision that is still pending is written (exactly once in effect): when another
        process finished it first, nothing at all is written and False comes back.
        """
        findings = [f.to_json() for f in report.findings]
        worst = report.worst_severity
        with self._tx() as conn:
            done = conn.execute(
                update(revisions)
                .where(and_(revisions.c.id == report.revision_pk, revisions.c.status == RevisionStatus.PENDING))
                .values(status=RevisionStatus.DONE, snapshot=snapshot_to_json(report.snapshot),
                        diff=report.diff.to_json() if report.diff is not None else None, findings=findings,
                        worst_severity=worst.value if worst else None, summary=report.summary,
                        estimate=report.estimate, analysed_at=report.analysed_at,
                        dependencies_pending=report.dependencies_pending, libraries=list(report.libraries))
            ).rowcount == 1
            if not done:
                return False
            if report.repo_updates:
                conn.execute(update(repos).where(repos.c.id == report.repo_pk).values(**report.repo_updates))
            self._apply_advisories(conn, report.repo_pk, report.advisories)
            return True

    def save_reanalysis(self, revision_pk: int, repo_pk: int, *, findings: Sequence[Finding],
                        estimate: dict[str, Any] | None, now: datetime, dependencies_pending: bool | None,
                        advisories: Iterable[AdvisoryWrite], libraries: Sequence[str] | None = None) -> None:
        """Replace a done revision's findings (re-analysis, retried lookups) and its advisories, together."""
        worst = Severity.worst(f.severity for f in findings)
        values: dict[str, Any] = dict(findings=[f.to_json() for f in findings],
                                      worst_severity=worst.value if worst else None, estimate=estimate,
                                      analysed_at=now)
        if dependencies_pending is not None:
            values["dependencies_pending"] = dependencies_pending
        if libraries is not None:
            values["libraries"] = list(libraries)
        with self._tx() as conn:
            conn.execute(update(revisions).where(revisions.c.id == revision_pk).values(**values))
            self._apply_advisories(conn, repo_pk, advisories)

    def save_event_report(self, report: EventReport) -> bool:
        """Record a repo event once per (kind, dedupe key), with the repo's new state and its advisory.

        Returns False (and writes nothing) when the same event was recorded before.
        """
        try:
            with self._tx() as conn:
                conn.execute(insert(events).values(
                    repo_pk=report.repo_pk, kind=report.kind, dedupe_key=report.dedupe_key[:200],
                    detail=report.detail, revision_sha=report.revision_sha, created_at=report.created_at))
                if report.repo_updates:
                    conn.execute(update(repos).where(repos.c.id == report.repo_pk).values(**report.repo_updates))
                self._apply_advisories(conn, report.repo_pk, report.advisories)
            return True
        except StoreConflict:
            if report.repo_updates:
                self.update_repo(report.repo_pk, **report.repo_updates)
            return False

    def advisories_for(self, *, repo_pk: int | None = None, since: datetime | None = None,
                       include_withdrawn: bool = True, versions: bool = True) -> list[AdvisoryRow]:
        """Advisories, oldest first; ``versions=False``: records as stored, without computing their versions."""
        with self._tx() as conn:
            query = self._advisory_query()
            if repo_pk is not None:
                query = query.where(advisories.c.repo_pk == repo_pk)
            if since is not None:
                query = query.where(advisories.c.modified >= since)
            if not include_withdrawn:
                query = query.where(advisories.c.withdrawn.is_(False))
            rows = conn.execute(query.order_by(advisories.c.published, advisories.c.id)).all()
            return self._served(conn, rows) if versions else [self._advisory(r) for r in rows]

    def iter_advisories(self, *, batch: int = 500) -> Iterator[AdvisoryRow]:
        """Every advisory with its versions, in id order, read ``batch`` at a time (memory bounded: the export)."""
        after = ""
        while True:
            with self._tx() as conn:
                rows = conn.execute(self._advisory_query().where(advisories.c.id > after)
                                    .order_by(advisories.c.id).limit(batch)).all()
                if not rows:
                    return
                served = self._served(conn, rows)
            yield from served
            after = rows[-1].id

    def advisories_of_revision(self, repo_pk: int, sha: str) -> list[AdvisoryRow]:
        """What processing a revision compares with: its own advisories, and the repo's open risks and
        inherited advisories (records as stored). Never the whole history of update advisories."""
        with self._tx() as conn:
            query = self._advisory_query().where(advisories.c.repo_pk == repo_pk, or_(
                advisories.c.revision_sha == sha,
                and_(advisories.c.kind.in_([AdvisoryKind.RISK.value, AdvisoryKind.INHERITED.value]),
                     advisories.c.withdrawn.is_(False), advisories.c.fixed_sha.is_(None))))
            return [self._advisory(r) for r in conn.execute(query.order_by(advisories.c.published, advisories.c.id))]

    def advisory_ids_of_kind(self, repo_pk: int, kind: str) -> frozenset[str]:
        with self._tx() as conn:
            return frozenset(conn.execute(select(advisories.c.id).where(and_(
                advisories.c.repo_pk == repo_pk, advisories.c.kind == kind))).scalars())

    def advisory_ids_for_commit(self, sha: str, repo_pk: int | None = None) -> list[str]:
        """The one lookup a query needs: which live advisories affect this commit."""
        with self._tx() as conn:
            matched = reach_index.live_ids_for_commit(conn, sha, repo_pk).subquery()
            query = (select(advisories.c.id).join(matched, matched.c.advisory_id == advisories.c.id)
                     .where(advisories.c.withdrawn.is_(False)))
            return sorted(conn.execute(query).scalars())

    def advisory_ids_for_commits(self, shas: Sequence[str], repo_pk: int) -> dict[str, list[str]]:
        """The index for many commits of one repo at once (a branch weighed for the scan's advice)."""
        found: dict[str, list[str]] = {sha: [] for sha in shas}
        with self._tx() as conn:
            for start in range(0, len(shas), 500):  # bound the statement's parameters
                chunk = list(shas[start:start + 500])
                for sha, advisory_id in conn.execute(reach_index.live_ids_for_commits(chunk, repo_pk)):
                    found[sha].append(advisory_id)
        return {sha: sorted(set(ids)) for sha, ids in found.items()}

    def live_records_for_commit(self, sha: str, repo_pk: int | None = None, *, limit: int, offset: int = 0,
                                versions: bool = True, versions_budget: int | None = None
                                ) -> tuple[list[tuple[str, str, str]], bool]:
        """One page of (id, modified, record as JSON text) of the live advisories affecting a commit, by id,
        and whether more follow.

        The API's hot path: the stored text is served with its ``versions`` spliced in, never decoded
        (``versions=False``: as stored, for answers that give ids only). ``versions_budget``: the page
        ends (after one record at least) once the versions it lists reach it; the count comes from
        the spans alone, so only the records served are read and only their versions computed.
        """
        with self._tx() as conn:
            matched = reach_index.live_ids_for_commit(conn, sha, repo_pk).subquery()
            ids = conn.execute(
                select(advisories.c.id, advisories.c.repo_pk, advisories.c.kind)
                .join(matched, matched.c.advisory_id == advisories.c.id)
                .where(advisories.c.withdrawn.is_(False))
                .order_by(advisories.c.id).limit(limit + 1).offset(offset)).all()
            more = len(ids) > limit
            ids = ids[:limit]
            items = [(r[0], r[1], r[2]) for r in ids]
            spans = reach_index.spans_of(conn, [r[0] for r in ids if reach_index.ranged(r[2])]) if versions else {}
            if versions and versions_budget is not None and ids:
                counts = reach_index.affected_counts(conn, items, spans)
                listed, shown = 0, 0
                while shown < len(ids) and (shown == 0 or listed < versions_budget):
                    listed += min(counts.get(ids[shown][0], 0), self.max_versions)
                    shown += 1
                more = more or shown < len(ids)
                ids = ids[:shown]
            if not ids:
                return [], more
            texts = {r[0]: (r[1], r[2]) for r in conn.execute(
                select(advisories.c.id, advisories.c.record["modified"].as_string(), cast(advisories.c.record, Text))
                .where(advisories.c.id.in_([r[0] for r in ids])))}
            if not versions:
                return [(r[0], *texts[r[0]]) for r in ids], more
            found = reach_index.versions_of(conn, [i for i in items if i[0] in texts], self.max_versions,
                                            spans=spans, cache=self._versions_cache)
            out = []
            for r in ids:
                modified, text = texts[r[0]]
                shas, total = found.get(r[0], ([], 0))
                out.append((r[0], modified, reach_index.with_versions_text(text, shas, total)))
            return out, more

    def ping(self) -> None:
        with self._tx() as conn:
            conn.execute(select(literal(1)))

    def advisories_by_ids(self, ids: Sequence[str], *, versions: bool = True) -> list[AdvisoryRow]:
        if not ids:
            return []
        with self._tx() as conn:
            rows = conn.execute(self._advisory_query().where(advisories.c.id.in_(list(ids)))).all()
            by_id = {r.id: r for r in (self._served(conn, rows) if versions else [self._advisory(r) for r in rows])}
            return [by_id[i] for i in ids if i in by_id]


def _announced(record: dict[str, Any]) -> dict[str, Any]:
    """What a reader sees of a record: without the affected ``versions`` list and ``modified``."""
    return {**{k: v for k, v in record.items() if k != "modified"},
            "affected": [{k: v for k, v in a.items() if k != "versions"} for a in record.get("affected", [])]}


def advisory_event(old: dict[str, Any] | None, new: dict[str, Any]) -> AdvisoryEvent | None:
    """The announceable change from ``old`` to ``new`` (None: nothing a subscriber should hear of)."""
    if "withdrawn" in new:
        kind = None if old is not None and "withdrawn" in old else AdvisoryEventType.WITHDRAWN
        if old is None:
            kind = None  # never announced, nothing to take back
    elif old is None:
        kind = AdvisoryEventType.CREATED
    else:
        kind = AdvisoryEventType.UPDATED if _announced(old) != _announced(new) else None
    if kind is None:
        return None
    ds = new.get("database_specific") or {}
    return AdvisoryEvent(type=kind, advisory_id=new["id"], repo_id=RepoId(ds.get("repo_id", "")),
                         severity=str(ds.get("severity", "info")).lower(),
                         categories=tuple(ds.get("categories") or ()), record=new)


def _parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


class SqlStore(DeliveryStoreMixin, AdvisoryStoreMixin):
    """The tracker's durable state. Every method is one transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._versions_cache = reach_index.VersionsCache()

    @contextmanager
    def _tx(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise database_error(exc, describe_url(self.engine.url.render_as_string(hide_password=False))) from exc

    def close(self) -> None:
        self.engine.dispose()

    # _enqueue_deliveries (the outbox seam, called inside the advisories' transaction): DeliveryStoreMixin

    # -- watch list -------------------------------------------------------------------------

    @staticmethod
    def _repo(row: Any) -> RepoRow:
        return RepoRow(
            pk=row.id,
            repo_id=RepoId(row.repo_id),
            branch=row.branch,
            every_seconds=row.every_seconds,
            state=RepoState(row.state),
            hub_uid=row.hub_uid,
            renamed_to=row.renamed_to,
            last_seen_sha=row.last_seen_sha,
            defer_until=_utc(row.defer_until),
            last_polled_at=_utc(row.last_polled_at),
            last_error=row.last_error,
            created_at=_utc(row.created_at),
            base_repo_id=RepoId(row.base_repo_id) if row.base_repo_id else None,
            rule_id=row.rule_id,
        )

    def add_watch(self, repo_id: RepoId, *, branch: str = "main", every: float | None = None,
                  now: datetime) -> tuple[RepoRow, bool]:
        """Watch a repo; returns (row, created). Re-adding updates branch and interval."""
        with self._tx() as conn:
            row = conn.execute(select(repos).where(repos.c.repo_id == repo_id)).first()
            if row is None:
                conn.execute(
                    insert(repos).values(repo_id=repo_id, branch=branch, every_seconds=every, state="active",
                                         created_at=now)
                )
                created = True
            else:
                conn.execute(update(repos).where(repos.c.id == row.id).values(branch=branch, every_seconds=every))
                created = False
            row = conn.execute(select(repos).where(repos.c.repo_id == repo_id)).one()
            return self._repo(row), created

    def remove_watch(self, repo_id: RepoId) -> bool:
        with self._tx() as conn:
            return conn.execute(repos.delete().where(repos.c.repo_id == repo_id)).rowcount > 0

    def list_watches(self) -> list[RepoRow]:
        with self._tx() as conn:
            return [self._repo(r) for r in conn.execute(select(repos).order_by(repos.c.repo_id))]

    def get_repo(self, repo_id: str) -> RepoRow | None:
        with self._tx() as conn:
            row = conn.execute(select(repos).where(repos.c.repo_id == repo_id)).first()
            return self._repo(row) if row else None

    def derivatives_of(self, repo_id: str) -> list[RepoRow]:
        """Watched repos whose card declares ``repo_id`` as their base model."""
        with self._tx() as conn:
            return [self._repo(r) for r in conn.execute(
                select(repos).where(repos.c.base_repo_id == repo_id).order_by(repos.c.repo_id))]

    def update_repo(self, pk: int, **values: Any) -> None:
        with self._tx() as conn:
            conn.execute(update(repos).where(repos.c.id == pk).values(**values))

    def mark_unreachable(self, pk: int, *, now: datetime, **values: Any) -> None:
        with self._tx() as conn:
            conn.execute(update(repos).where(repos.c.id == pk)
                         .values(unreachable_since=func.coalesce(repos.c.unreachable_since, now), **values))

    # -- revisions --------------------------------------------------------------------------

    @staticmethod
    def _revision(row: Any) -> RevisionRow:
        return RevisionRow(
            pk=row.id,
            repo_pk=row.repo_pk,
            sha=row.sha,
            seq=row.seq,
            parent_sha=row.parent_sha,
            date=_utc(row.date),
            title=row.title,
            message=row.message,
            authors=list(row.authors or []),
            status=RevisionStatus(row.status),
            baseline=bool(row.baseline),
            snapshot=snapshot_from_json(row.snapshot) if row.snapshot is not None else None,
            diff=row.diff,
            findings=row.findings,
            worst_severity=row.worst_severity,
            summary=row.summary,
            estimate=row.estimate,
            analysed_at=_utc(row.analysed_at),
            dependencies_pending=bool(row.dependencies_pending),
            attempts=row.attempts or 0,
            last_error=row.last_error,
            libraries=tuple(row.libraries or ()),
            backlog=bool(row.backlog),
        )

    def record_listing(self, repo: RepoRow, listed: Sequence[Commit], *, parent: CommitSha | None,
                       baseline: bool, backlog: bool = False) -> int:
        """Insert newly listed commits as pending revisions and move ``last_seen_sha``, atomically.

        ``parent`` is the revision the first commit is diffed against. Commits
        already stored are skipped, so listing twice never duplicates. Returns
        how many were inserted. ``backlog``: a flood's intermediate revisions, read after the others.
        """
        if not listed:
            return 0
        with self._tx() as conn:
            known = set(
                conn.execute(
                    select(revisions.c.sha).where(
                        and_(revisions.c.repo_pk == repo.pk, revisions.c.sha.in_([c.sha for c in listed]))
                    )
                ).scalars()
            )
            seq = conn.execute(select(func.max(revisions.c.seq)).where(revisions.c.repo_pk == repo.pk)).scalar()
            seq = -1 if seq is None else seq
            inserted = 0
            previous = parent
            for i, commit in enumerate(listed):
                if commit.sha not in known:
                    seq += 1
                    conn.execute(
                        insert(revisions).values(
                            repo_pk=repo.pk, sha=commit.sha, seq=seq, parent_sha=previous, date=commit.date,
                            title=commit.title, message=commit.message, authors=list(commit.authors),
                            status="pending", baseline=baseline and i == 0 and previous is None,
                            backlog=backlog,
                        )
                    )
                    inserted += 1
                previous = commit.sha
            # The commit graph follows git ancestry as the Hub lists it, which is not always the diff
            # base: a repo re-created under the same name starts a new root, it does not descend from
            # the old owner's commits.
            _insert_edges(conn, repo.pk, [(c.sha, c.parents[0] if c.parents else None) for c in listed],
                          datetime.now(UTC))
            conn.execute(update(repos).where(repos.c.id == repo.pk).values(last_seen_sha=listed[-1].sha))
            return inserted

    def pending_revisions(self, repo_pk: int) -> list[RevisionRow]:
        with self._tx() as conn:
            rows = conn.execute(
                select(revisions)
                .where(and_(revisions.c.repo_pk == repo_pk, revisions.c.status == "pending"))
                .order_by(revisions.c.backlog, revisions.c.seq)
            )
            return [self._revision(r) for r in rows]

    def complete_revision(self, pk: int, *, snapshot: Snapshot, diff: dict[str, Any] | None,
                          findings: list[dict[str, Any]], worst_severity: str | None, summary: str,
                          estimate: dict[str, Any] | None, now: datetime,
                          dependencies_pending: bool = False) -> bool:
        """Store a revision's results and mark it done, only if it is still pending (exactly once)."""
        with self._tx() as conn:
            result = conn.execute(
                update(revisions)
                .where(and_(revisions.c.id == pk, revisions.c.status == "pending"))
                .values(status="done", snapshot=snapshot_to_json(snapshot), diff=diff, findings=findings,
                        worst_severity=worst_severity, summary=summary, estimate=estimate, analysed_at=now,
                        dependencies_pending=dependencies_pending)
            )
            return result.rowcount == 1

    def update_revision_analysis(self, pk: int, *, findings: list[dict[str, Any]], worst_severity: str | None,
                                 estimate: dict[str, Any] | None, now: datetime,
                                 dependencies_pending: bool | None = None) -> None:
        """Replace a done revision's findings after re-analysis (its snapshot and diff stay)."""
        values: dict[str, Any] = dict(findings=findings, worst_severity=worst_severity, estimate=estimate,
                                      analysed_at=now)
        if dependencies_pending is not None:
            values["dependencies_pending"] = dependencies_pending
        with self._tx() as conn:
            conn.execute(update(revisions).where(revisions.c.id == pk).values(**values))

    def note_attempt(self, pk: int, error: str) -> int:
        """Count a transient failure while reading a pending revision; returns the count so far."""
        with self._tx() as conn:
            conn.execute(update(revisions).where(revisions.c.id == pk).values(
                attempts=revisions.c.attempts + 1, last_error=error[:1000]))
            return int(conn.execute(select(revisions.c.attempts).where(revisions.c.id == pk)).scalar() or 0)

    # -- leases: one worker per repo at a time, across processes and replicas ---------------------

    def acquire_lease(self, repo_pk: int, owner: str, *, now: datetime, until: datetime,
                      steal_from: str | None = None) -> bool:
        """Take (or extend) a repo's lease; False while another owner's lease is unexpired.

        ``steal_from``: take it from that owner whatever its expiry (a holder known to be dead).
        One conditional UPDATE, so two workers racing for it cannot both win.
        """
        free = or_(repos.c.lease_until.is_(None), repos.c.lease_until < now, repos.c.lease_owner == owner)
        if steal_from is not None:
            free = or_(free, repos.c.lease_owner == steal_from)
        with self._tx() as conn:
            taken = conn.execute(
                update(repos).where(and_(repos.c.id == repo_pk, free)).values(lease_owner=owner, lease_until=until)
            ).rowcount
            return taken == 1

    def release_lease(self, repo_pk: int, owner: str) -> None:
        with self._tx() as conn:
            conn.execute(update(repos).where(and_(repos.c.id == repo_pk, repos.c.lease_owner == owner))
                         .values(lease_owner=None, lease_until=None))

    def lease_of(self, repo_pk: int) -> tuple[str | None, datetime | None]:
        with self._tx() as conn:
            row = conn.execute(select(repos.c.lease_owner, repos.c.lease_until).where(repos.c.id == repo_pk)).first()
            return (row.lease_owner, _utc(row.lease_until)) if row else (None, None)

    def mark_revision(self, pk: int, status: str) -> None:
        with self._tx() as conn:
            conn.execute(update(revisions).where(revisions.c.id == pk).values(status=status))

    def revisions(self, repo_pk: int, *, status: str | None = None,
                  dependencies_pending: bool | None = None) -> list[RevisionRow]:
        with self._tx() as conn:
            query = select(revisions).where(revisions.c.repo_pk == repo_pk)
            if status:
                query = query.where(revisions.c.status == status)
            if dependencies_pending is not None:
                query = query.where(revisions.c.dependencies_pending.is_(dependencies_pending))
            return [self._revision(r) for r in conn.execute(query.order_by(revisions.c.seq))]

    def get_revision(self, repo_pk: int, sha_or_prefix: str) -> RevisionRow | None:
        with self._tx() as conn:
            if len(sha_or_prefix) == 40:
                cond = revisions.c.sha == sha_or_prefix
            else:
                cond = revisions.c.sha.startswith(sha_or_prefix, autoescape=True)
            rows = conn.execute(select(revisions).where(and_(revisions.c.repo_pk == repo_pk, cond))).all()
            if len(rows) > 1:
                raise RevisionUnresolved(f"revision prefix {sha_or_prefix!r} is ambiguous: give more digits")
            return self._revision(rows[0]) if rows else None

    def last_done_revision(self, repo_pk: int) -> RevisionRow | None:
        with self._tx() as conn:
            row = conn.execute(
                select(revisions)
                .where(and_(revisions.c.repo_pk == repo_pk, revisions.c.status == "done"))
                .order_by(revisions.c.seq.desc())
                .limit(1)
            ).first()
            return self._revision(row) if row else None

    # -- content cache ----------------------------------------------------------------------

    def get_blob(self, content_id: str) -> bytes | None:
        with self._tx() as conn:
            return conn.execute(select(blobs.c.data).where(blobs.c.content_id == content_id)).scalar()

    def put_blob(self, content_id: str, data: bytes, *, now: datetime) -> None:
        try:
            with self._tx() as conn:
                conn.execute(insert(blobs).values(content_id=content_id, size=len(data), data=data, fetched_at=now))
        except StoreConflict:
            pass  # content-addressed: someone stored the same bytes first

    # -- events -----------------------------------------------------------------------------

    def add_event(self, repo_pk: int, kind: str, *, dedupe_key: str, detail: dict[str, Any],
                  revision_sha: str | None = None, now: datetime) -> bool:
        """Record a repo event once per (kind, dedupe_key); returns whether it is new."""
        try:
            with self._tx() as conn:
                conn.execute(
                    insert(events).values(repo_pk=repo_pk, kind=kind, dedupe_key=dedupe_key[:200], detail=detail,
                                          revision_sha=revision_sha, created_at=now)
                )
            return True
        except StoreConflict:
            return False

    def events(self, repo_pk: int | None = None) -> list[EventRow]:
        with self._tx() as conn:
            query = select(events, repos.c.repo_id).join(repos, repos.c.id == events.c.repo_pk)
            if repo_pk is not None:
                query = query.where(events.c.repo_pk == repo_pk)
            return [
                EventRow(pk=r.id, repo_id=RepoId(r.repo_id), kind=r.kind, revision_sha=r.revision_sha,
                         detail=r.detail, created_at=_utc(r.created_at))
                for r in conn.execute(query.order_by(events.c.id))
            ]
