"""Revisions, the commit graph they sit in, and the content cache of their small files."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from tracker.adapters.store import index as reach_index
from tracker.adapters.store import stored
from tracker.adapters.store.advisories import AdvisoryStore
from tracker.adapters.store.db import Database
from tracker.adapters.store.tables import blobs, commits, repos, revisions
from tracker.core.errors import RevisionUnresolved, StoreConflict
from tracker.core.model import (
    Commit,
    CommitSha,
    FileEntry,
    Finding,
    RepoRow,
    RevisionRow,
    RevisionStatus,
    Severity,
    Snapshot,
    StoredEstimate,
)
from tracker.core.report import AdvisoryWrite, RevisionReport
from tracker.core.store_types import SeenAdvisories


def snapshot_to_json(snapshot: Snapshot) -> list[dict[str, Any]]:
    return [
        {"path": f.path, "size": f.size, "blob_id": f.blob_id, "lfs_sha256": f.lfs_sha256, "xet_hash": f.xet_hash}
        for f in snapshot.files
    ]


def snapshot_from_json(data: Iterable[dict[str, Any]]) -> Snapshot:
    return Snapshot(files=tuple(FileEntry(**item) for item in data))


def revision_row(row: Any) -> RevisionRow:
    """A ``revisions`` row as the rest of the tracker sees it."""
    return RevisionRow(
        pk=row.id,
        repo_pk=row.repo_pk,
        sha=row.sha,
        seq=row.seq,
        parent_sha=row.parent_sha,
        date=row.date,
        title=row.title,
        message=row.message,
        authors=list(row.authors or []),
        status=RevisionStatus(row.status),
        baseline=bool(row.baseline),
        snapshot=snapshot_from_json(row.snapshot) if row.snapshot is not None else None,
        diff=stored.diff_of(row.sha, row.diff),
        findings=stored.findings_of(row.sha, row.findings),
        worst_severity=row.worst_severity,
        summary=row.summary,
        estimate=stored.estimate_of(row.sha, row.estimate),
        analysed_at=row.analysed_at,
        dependencies_pending=bool(row.dependencies_pending),
        attempts=row.attempts or 0,
        last_error=row.last_error,
        libraries=tuple(row.libraries or ()),
        backlog=bool(row.backlog),
    )


def insert_edges(conn: Connection, repo_pk: int, edges: Iterable[tuple[str, str | None]], now: datetime) -> int:
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


class RevisionStore:
    """Revisions from listed to done, and the commit graph. Every method is one transaction."""

    def __init__(self, db: Database, advisories: AdvisoryStore) -> None:
        self.db = db
        self.advisories = advisories

    # -- listing ------------------------------------------------------------------------------

    # The listing and how to file it (keyword-only): what the Poller knows when it lists, passed as it is.
    def record_listing(self, repo: RepoRow, listed: Sequence[Commit], *, parent: CommitSha | None,
                       baseline: bool, now: datetime, backlog: bool = False) -> int:
        """Insert newly listed commits as pending revisions and move ``last_seen_sha``, atomically.

        ``parent`` is the revision the first commit is diffed against. Commits
        already stored are skipped, so listing twice never duplicates. Returns
        how many were inserted. ``backlog``: a flood's intermediate revisions, read after the others.
        """
        if not listed:
            return 0
        with self.db.transaction() as conn:
            known = set(conn.execute(select(revisions.c.sha).where(
                and_(revisions.c.repo_pk == repo.pk, revisions.c.sha.in_([c.sha for c in listed])))).scalars())
            seq = conn.execute(select(func.max(revisions.c.seq)).where(revisions.c.repo_pk == repo.pk)).scalar()
            seq = -1 if seq is None else seq
            inserted = 0
            previous = parent
            for i, commit in enumerate(listed):
                if commit.sha not in known:
                    seq += 1
                    conn.execute(insert(revisions).values(
                        repo_pk=repo.pk, sha=commit.sha, seq=seq, parent_sha=previous, date=commit.date,
                        title=commit.title, message=commit.message, authors=list(commit.authors),
                        status="pending", baseline=baseline and i == 0 and previous is None, backlog=backlog))
                    inserted += 1
                previous = commit.sha
            # The commit graph follows git ancestry as the Hub lists it, which is not always the diff
            # base: a repo re-created under the same name starts a new root, it does not descend from
            # the old owner's commits.
            insert_edges(conn, repo.pk, [(c.sha, c.parents[0] if c.parents else None) for c in listed], now)
            conn.execute(update(repos).where(repos.c.id == repo.pk).values(last_seen_sha=listed[-1].sha))
            return inserted

    def prepend_listing(self, repo: RepoRow, older: Sequence[Commit], *, before: CommitSha, now: datetime) -> int:
        """Insert commits older than the baseline ``before`` (oldest first) as pending revisions ahead of it,
        atomically: the oldest becomes the baseline, and ``before`` a pending revision diffed against the
        newest of them (read again). Returns how many were inserted (0 when ``before`` is not the baseline)."""
        if not older:
            return 0
        with self.db.transaction() as conn:
            first = conn.execute(select(revisions).where(and_(revisions.c.repo_pk == repo.pk,
                                                              revisions.c.sha == before))).first()
            if first is None or not first.baseline:
                return 0
            known = set(conn.execute(select(revisions.c.sha).where(
                and_(revisions.c.repo_pk == repo.pk, revisions.c.sha.in_([c.sha for c in older])))).scalars())
            fresh = [c for c in older if c.sha not in known]
            if not fresh:
                return 0
            shift = len(fresh)
            # Make room at the front of the listing order without breaking (repo, seq) uniqueness mid-statement.
            mine = revisions.c.repo_pk == repo.pk
            conn.execute(update(revisions).where(mine).values(seq=-(revisions.c.seq + shift) - 1))
            conn.execute(update(revisions).where(mine).values(seq=-revisions.c.seq - 1))
            previous: str | None = None
            for seq, commit in enumerate(fresh):
                conn.execute(insert(revisions).values(
                    repo_pk=repo.pk, sha=commit.sha, seq=seq, parent_sha=previous, date=commit.date,
                    title=commit.title, message=commit.message, authors=list(commit.authors),
                    status="pending", baseline=previous is None, backlog=False))
                previous = commit.sha
            conn.execute(update(revisions).where(revisions.c.id == first.id).values(
                baseline=False, parent_sha=previous, status="pending"))
            insert_edges(conn, repo.pk, [(c.sha, c.parents[0] if c.parents else None) for c in fresh], now)
            return shift

    # -- reading ------------------------------------------------------------------------------

    def pending(self, repo_pk: int) -> list[RevisionRow]:
        """The repo's revisions still to read: listing order, a flood's backlog last."""
        with self.db.transaction() as conn:
            rows = conn.execute(select(revisions)
                                .where(and_(revisions.c.repo_pk == repo_pk, revisions.c.status == "pending"))
                                .order_by(revisions.c.backlog, revisions.c.seq))
            return [revision_row(r) for r in rows]

    def of_repo(self, repo_pk: int, *, status: str | None = None,
             dependencies_pending: bool | None = None) -> list[RevisionRow]:
        """The repo's revisions in listing order."""
        with self.db.transaction() as conn:
            query = select(revisions).where(revisions.c.repo_pk == repo_pk)
            if status:
                query = query.where(revisions.c.status == status)
            if dependencies_pending is not None:
                query = query.where(revisions.c.dependencies_pending.is_(dependencies_pending))
            return [revision_row(r) for r in conn.execute(query.order_by(revisions.c.seq))]

    def get(self, repo_pk: int, sha_or_prefix: str) -> RevisionRow | None:
        """A revision by sha or unambiguous prefix; RevisionUnresolved when the prefix is ambiguous."""
        with self.db.transaction() as conn:
            if len(sha_or_prefix) == 40:
                cond = revisions.c.sha == sha_or_prefix
            else:
                cond = revisions.c.sha.startswith(sha_or_prefix, autoescape=True)
            rows = conn.execute(select(revisions).where(and_(revisions.c.repo_pk == repo_pk, cond))).all()
            if len(rows) > 1:
                raise RevisionUnresolved(f"revision prefix {sha_or_prefix!r} is ambiguous: give more digits")
            return revision_row(rows[0]) if rows else None

    def last_done(self, repo_pk: int) -> RevisionRow | None:
        with self.db.transaction() as conn:
            row = conn.execute(
                select(revisions)
                .where(and_(revisions.c.repo_pk == repo_pk, revisions.c.status == "done"))
                .order_by(revisions.c.seq.desc())
                .limit(1)
            ).first()
            return revision_row(row) if row else None

    # -- the commit graph ---------------------------------------------------------------------

    def commit_graph(self, repo_pk: int) -> dict[str, list[str]]:
        """sha -> parents, as far as known."""
        with self.db.transaction() as conn:
            return {r.sha: [r.parent_sha] if r.parent_sha else []
                    for r in conn.execute(select(commits.c.sha, commits.c.parent_sha).where(
                        commits.c.repo_pk == repo_pk))}

    def has_commit(self, repo_pk: int, sha: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute(select(commits.c.id).where(and_(
                commits.c.repo_pk == repo_pk, commits.c.sha == sha))).first() is not None

    def find_commit(self, sha_or_prefix: str, repo_pk: int | None = None) -> list[tuple[int, str]]:
        """(repo_pk, full sha) of known commits matching a sha or a prefix."""
        with self.db.read() as conn:
            cond = (commits.c.sha == sha_or_prefix if len(sha_or_prefix) == 40
                    else commits.c.sha.startswith(sha_or_prefix, autoescape=True))
            query = select(commits.c.repo_pk, commits.c.sha).where(cond)
            if repo_pk is not None:
                query = query.where(commits.c.repo_pk == repo_pk)
            return [(r.repo_pk, r.sha) for r in conn.execute(query.limit(50))]

    # -- writing ------------------------------------------------------------------------------

    def save_report(self, report: RevisionReport, *, seen: SeenAdvisories | None = None) -> bool:
        """Store a revision's results and its advisories (with their index), and mark it done: one transaction.

        Only a revision that is still pending is written (exactly once in effect): when another
        process finished it first, nothing at all is written and False comes back. ``seen``: the
        advisories as the report was computed from them (AdvisoryConflict when one changed since).
        """
        findings = [f.to_json() for f in report.findings]
        worst = report.worst_severity
        with self.db.transaction() as conn:
            done = conn.execute(
                update(revisions)
                .where(and_(revisions.c.id == report.revision_pk, revisions.c.status == RevisionStatus.PENDING))
                .values(status=RevisionStatus.DONE, snapshot=snapshot_to_json(report.snapshot),
                        diff=report.diff.to_json() if report.diff is not None else None, findings=findings,
                        worst_severity=worst.value if worst else None, summary=report.summary,
                        estimate=report.estimate.to_json() if report.estimate is not None else None,
                        analysed_at=report.analysed_at,
                        dependencies_pending=report.dependencies_pending, libraries=list(report.libraries))
            ).rowcount == 1
            if not done:
                return False
            if report.repo_updates:
                conn.execute(update(repos).where(repos.c.id == report.repo_pk).values(**report.repo_updates))
            self.advisories.apply(conn, report.repo_pk, report.advisories, now=report.analysed_at, seen=seen)
            return True

    # Keyword-only, one per column re-analysis replaces (and the advisories with what they were computed from).
    def save_reanalysis(self, revision_pk: int, repo_pk: int, *, findings: Sequence[Finding],  # noqa: PLR0913 - one keyword per column it replaces
                        estimate: StoredEstimate | None, now: datetime, dependencies_pending: bool | None,
                        advisories: Iterable[AdvisoryWrite], libraries: Sequence[str] | None = None,
                        seen: SeenAdvisories | None = None) -> None:
        """Replace a done revision's findings (re-analysis, retried lookups) and its advisories, together."""
        worst = Severity.worst(f.severity for f in findings)
        values: dict[str, Any] = dict(findings=[f.to_json() for f in findings],
                                      worst_severity=worst.value if worst else None,
                                      estimate=estimate.to_json() if estimate is not None else None, analysed_at=now)
        if dependencies_pending is not None:
            values["dependencies_pending"] = dependencies_pending
        if libraries is not None:
            values["libraries"] = list(libraries)
        with self.db.transaction() as conn:
            conn.execute(update(revisions).where(revisions.c.id == revision_pk).values(**values))
            self.advisories.apply(conn, repo_pk, advisories, now=now, seen=seen)

    def note_attempt(self, pk: int, error: str) -> int:
        """Count a transient failure while reading a pending revision; returns the count so far."""
        with self.db.transaction() as conn:
            conn.execute(update(revisions).where(revisions.c.id == pk).values(
                attempts=revisions.c.attempts + 1, last_error=error[:1000]))
            return int(conn.execute(select(revisions.c.attempts).where(revisions.c.id == pk)).scalar() or 0)

    def mark(self, pk: int, status: str) -> None:
        with self.db.transaction() as conn:
            conn.execute(update(revisions).where(revisions.c.id == pk).values(status=status))


class BlobStore:
    """Small tracked files by content id: each version is fetched from the Hub once."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get_blob(self, content_id: str) -> bytes | None:
        with self.db.transaction() as conn:
            data = conn.execute(select(blobs.c.data).where(blobs.c.content_id == content_id)).scalar()
            return bytes(data) if data is not None else None

    def put_blob(self, content_id: str, data: bytes, *, now: datetime) -> None:
        try:
            with self.db.transaction() as conn:
                conn.execute(insert(blobs).values(content_id=content_id, size=len(data), data=data, fetched_at=now))
        except StoreConflict:
            pass  # content-addressed: someone stored the same bytes first

    def evict(self, *, max_bytes: int, older_than: datetime) -> tuple[int, int]:
        """Drop cached file versions fetched before ``older_than``, then the oldest fetched while the cache is
        over ``max_bytes``; never one the latest done revision of a watched repo lists (what its next revision
        is compared with). Returns (versions dropped, bytes dropped). A dropped version is fetched again
        from the Hub if a later read needs it."""
        with self.db.transaction() as conn:
            keep = _needed(conn)
            rows = conn.execute(select(blobs.c.content_id, blobs.c.size, blobs.c.fetched_at)
                                .order_by(blobs.c.fetched_at, blobs.c.content_id)).all()
            total = sum(int(r.size) for r in rows)
            drop: list[str] = []
            dropped_bytes = 0
            for row in rows:
                if row.content_id in keep or (row.fetched_at >= older_than and total <= max_bytes):
                    continue
                drop.append(row.content_id)
                total -= int(row.size)
                dropped_bytes += int(row.size)
            for start in range(0, len(drop), EVICT_CHUNK):
                conn.execute(delete(blobs).where(blobs.c.content_id.in_(drop[start:start + EVICT_CHUNK])))
        return len(drop), dropped_bytes


EVICT_CHUNK = 500  # content ids per DELETE (SQLite's bound parameters)


def _needed(conn: Connection) -> set[str]:
    """The content ids the latest done revision of each watched repo lists."""
    latest = (select(revisions.c.repo_pk, func.max(revisions.c.seq).label("seq"))
              .where(revisions.c.status == RevisionStatus.DONE).group_by(revisions.c.repo_pk).subquery())
    snapshots = conn.execute(select(revisions.c.snapshot).join(
        latest, and_(revisions.c.repo_pk == latest.c.repo_pk, revisions.c.seq == latest.c.seq))).scalars()
    return {str(entry.get("lfs_sha256") or entry.get("blob_id")) for snapshot in snapshots for entry in snapshot or []
            if isinstance(entry, dict)}
