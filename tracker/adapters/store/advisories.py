"""Advisories and the reach index: how they are written (checked against what was read) and read.

Every write of an advisory goes through :meth:`AdvisoryStore.apply`, on the connection of the
transaction that stores what caused it. It takes the row lock of every repo it writes to (``SELECT
... FOR UPDATE`` on PostgreSQL; SQLite serialises writers anyway), so a base writing its
derivative's inherited advisory and the derivative saving its own revision are never interleaved.
Given ``seen`` (what the computation read: the ``modified`` of each advisory, and every advisory of
a kind of a repo where it read them all), it checks that nothing it read changed since, whether or
not the save writes it, and raises :class:`~tracker.core.errors.AdvisoryConflict` (writing nothing)
when something did: the caller reads again and recomputes. A report computed from a stale read can
lead to no write at all (an inherited advisory it should have fixed, created or withdrawn, it never
saw): the check of what it read catches that too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Select, Text, and_, cast, func, insert, select, union, update

from tracker.adapters.store import index as reach_index
from tracker.adapters.store.db import Database
from tracker.adapters.store.delivery import OutboxStore
from tracker.adapters.store.tables import advisories, repos
from tracker.core.advisory.reach import ReachIndex, events_of
from tracker.core.advisory.record import OsvJson, parse_advisory
from tracker.core.errors import AdvisoryConflict
from tracker.core.model import AdvisoryEvent, AdvisoryEventType, AdvisoryKind, AdvisoryRow, RepoId, Severity
from tracker.core.report import AdvisoryWrite
from tracker.core.store_types import AdvisoriesRead, SeenAdvisories

FeedItem = AdvisoryRow  # a feed shows advisories as stored (withdrawn ones too)
BUDGET_STEP = 32  # advisories whose spans are read at once while a page's versions are counted


def advisory_row(row: Any, served: Mapping[str, Any] | None = None) -> AdvisoryRow:
    """An ``advisories`` row (joined with its repo's id), its record parsed once, here: ``served`` (the
    JSON with its versions filled in), else the column as stored (without its ``versions``)."""
    osv = row.record if served is None else served
    return AdvisoryRow(id=row.id, repo_id=RepoId(row.repo_id), revision_sha=row.revision_sha, kind=row.kind,
                       severity=row.severity, record=parse_advisory(osv), published=row.published,
                       modified=row.modified, withdrawn=bool(row.withdrawn), fixed_sha=row.fixed_sha, osv=osv)


def _with_repo() -> Select[Any]:
    return select(advisories, repos.c.repo_id).join(repos, repos.c.id == advisories.c.repo_pk)


def _parse_ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _announced(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a reader sees of a record: without the affected ``versions`` list and ``modified``."""
    return {**{k: v for k, v in record.items() if k != "modified"},
            "affected": [{k: v for k, v in a.items() if k != "versions"} for a in record.get("affected", [])]}


def advisory_event(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> AdvisoryEvent | None:
    """The announceable change from ``old`` to ``new``, records as stored (None: nothing a subscriber
    should hear of)."""
    if "withdrawn" in new:
        # Taken back once; an advisory never announced has nothing to take back.
        kind = None if old is None or "withdrawn" in old else AdvisoryEventType.WITHDRAWN
    elif old is None:
        kind = AdvisoryEventType.CREATED
    else:
        kind = AdvisoryEventType.UPDATED if _announced(old) != _announced(new) else None
    if kind is None:
        return None
    record = parse_advisory(new)
    ds = record.specific
    return AdvisoryEvent(type=kind, advisory_id=record.id, repo_id=RepoId(ds.repo_id or ""),
                         severity=(ds.severity or "info").lower(), categories=ds.categories, record=new)


def lock_repos(conn: Connection, repo_pks: Collection[int]) -> None:
    """Take the row locks of these repos until the transaction ends, in key order (so two writers
    locking overlapping sets cannot deadlock). PostgreSQL only: SQLite has one writer at a time."""
    if conn.dialect.name == "postgresql" and repo_pks:
        conn.execute(select(repos.c.id).where(repos.c.id.in_(sorted(repo_pks))).order_by(repos.c.id)
                     .with_for_update())


class AdvisoryStore:
    """Advisories with their reach index; reads serve each record with its ``versions`` computed."""

    def __init__(self, db: Database, outbox: OutboxStore, *, max_versions: int = 1000) -> None:
        self.db = db
        self.outbox = outbox
        self.max_versions = max_versions  # [advisories] max_versions: the newest affected commits a record lists
        self._versions_cache = reach_index.VersionsCache()
        self._chains = reach_index.ChainCache()  # each chain's commits, read once: versions computed without SQL

    # -- writing ------------------------------------------------------------------------------

    def apply(self, conn: Connection, repo_pk: int, writes: Iterable[AdvisoryWrite], *, now: datetime,
              seen: SeenAdvisories | None = None) -> bool:
        """Write advisories and their index on ``conn``, and queue what they announce; True if any changed.

        ``repo_pk``: the repo of writes that name none. ``seen``: checked first, even when nothing is
        written (see the module's docstring); None writes whatever is stored (a caller that read nothing
        to compute them).
        """
        writes = list(writes)
        read = seen if isinstance(seen, AdvisoriesRead) else AdvisoriesRead(each=seen or {})
        if not writes and not read.each and not read.kinds:
            return False
        lock_repos(conn, {w.repo_pk if w.repo_pk is not None else repo_pk for w in writes}
                   | {pk for pk, _kind in read.kinds} | ({repo_pk} if seen is not None else set()))
        stored = {r.id: (r.record, r.modified) for r in conn.execute(
            select(advisories.c.id, advisories.c.record, advisories.c.modified)
            .where(advisories.c.id.in_(sorted({w.id for w in writes} | set(read.each)))))}
        if seen is not None:
            _check_seen(writes, stored, read.each)
            _check_kinds(conn, read.kinds)
        if not writes:
            return False
        announced: list[AdvisoryEvent] = []
        changed_any = False
        for write in writes:
            old = stored.get(write.id, (None, None))[0]
            record = self._write_one(conn, repo_pk, write, old)
            stored[write.id] = (record, None)  # a later write of the same id in this call sees this one
            event = advisory_event(old, record)
            if event is not None:
                announced.append(event)
            changed_any = changed_any or old != record
        if announced:
            # Subscribers get the record as served: its versions computed now, in this transaction (and
            # only for an advisory some subscription hears of).
            self.outbox.enqueue(conn, announced, now=now, serve=lambda ids: {
                r.id: r.osv for r in self._served(conn, conn.execute(_with_repo().where(
                    advisories.c.id.in_(list(ids)))).all())})
        return changed_any

    @staticmethod
    def _write_one(conn: Connection, repo_pk: int, write: AdvisoryWrite, old: OsvJson | None
                   ) -> OsvJson:
        """Insert or update one advisory and its index; the record as stored."""
        pk = write.repo_pk if write.repo_pk is not None else repo_pk  # another repo's: an inherited advisory
        record = reach_index.stored_record(write.record)
        withdrawn = "withdrawn" in record
        if old is None:
            conn.execute(insert(advisories).values(
                id=write.id, repo_pk=pk, revision_sha=write.revision_sha, kind=write.kind,
                severity=write.severity, record=record,
                published=_parse_ts(str(record.get("published", record["modified"]))),
                modified=_parse_ts(record["modified"]), withdrawn=withdrawn, fixed_sha=write.fixed_sha))
        elif old != record:
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
        return record

    # -- reading ------------------------------------------------------------------------------

    def _served(self, conn: Connection, rows: Sequence[Any]) -> list[AdvisoryRow]:
        """Rows as read: each record with its ``versions`` computed from the index (bounded)."""
        found = reach_index.versions_of(conn, [(r.id, r.repo_pk, r.kind) for r in rows], self.max_versions,
                                        cache=self._versions_cache, chains=self._chains)
        out = []
        for r in rows:
            versions, total = found.get(r.id, ([], 0))
            out.append(advisory_row(r, reach_index.with_versions(r.record, versions, total)))
        return out

    def get(self, advisory_id: str) -> AdvisoryRow | None:
        with self.db.transaction() as conn:
            row = conn.execute(_with_repo().where(advisories.c.id == advisory_id)).first()
            return self._served(conn, [row])[0] if row else None

    def find(self, *, repo_pk: int | None = None, since: datetime | None = None,
             include_withdrawn: bool = True, versions: bool = True) -> list[AdvisoryRow]:
        """Advisories, oldest first; ``versions=False``: records as stored, without computing their versions."""
        with self.db.transaction() as conn:
            query = _with_repo()
            if repo_pk is not None:
                query = query.where(advisories.c.repo_pk == repo_pk)
            if since is not None:
                query = query.where(advisories.c.modified >= since)
            if not include_withdrawn:
                query = query.where(advisories.c.withdrawn.is_(False))
            rows = conn.execute(query.order_by(advisories.c.published, advisories.c.id)).all()
            return self._served(conn, rows) if versions else [advisory_row(r) for r in rows]

    def iter_all(self, *, batch: int = 500) -> Iterator[AdvisoryRow]:
        """Every advisory with its versions, in id order, read ``batch`` at a time (memory bounded: the export)."""
        after = ""
        while True:
            with self.db.transaction() as conn:
                rows = conn.execute(_with_repo().where(advisories.c.id > after)
                                    .order_by(advisories.c.id).limit(batch)).all()
                if not rows:
                    return
                served = self._served(conn, rows)
            yield from served
            after = rows[-1].id

    def by_ids(self, ids: Sequence[str], *, versions: bool = True) -> list[AdvisoryRow]:
        """These advisories, in the order asked (unknown ids left out)."""
        if not ids:
            return []
        with self.db.transaction() as conn:
            rows = conn.execute(_with_repo().where(advisories.c.id.in_(list(ids)))).all()
            by_id = {r.id: r for r in (self._served(conn, rows) if versions else [advisory_row(r) for r in rows])}
            return [by_id[i] for i in ids if i in by_id]

    def of_revision(self, repo_pk: int, sha: str) -> list[AdvisoryRow]:
        """What processing a revision compares with: its own advisories, and the repo's open risks and
        inherited advisories (records as stored). Never the whole history of update advisories."""
        # Two index look-ups, (repo, revision) and (repo, kind, withdrawn): one condition with OR
        # between them would read every advisory of the repo.
        own = select(advisories.c.id).where(advisories.c.repo_pk == repo_pk, advisories.c.revision_sha == sha)
        open_ = select(advisories.c.id).where(
            advisories.c.repo_pk == repo_pk,
            advisories.c.kind.in_([AdvisoryKind.RISK.value, AdvisoryKind.INHERITED.value]),
            advisories.c.withdrawn.is_(False), advisories.c.fixed_sha.is_(None))
        with self.db.transaction() as conn:
            query = _with_repo().where(advisories.c.id.in_(union(own, open_)))
            return [advisory_row(r) for r in conn.execute(query.order_by(advisories.c.published, advisories.c.id))]

    def versions_of_kind(self, repo_pk: int, kind: str) -> dict[str, datetime]:
        """Every advisory of ``kind`` of the repo, withdrawn ones too: id -> modified (what a save checks
        is unchanged when it was computed from them: :class:`AdvisoriesRead`)."""
        with self.db.connect() as conn:
            return _kind_versions(conn, repo_pk, kind)

    def ids_of_kind(self, repo_pk: int, kind: str) -> frozenset[str]:
        with self.db.transaction() as conn:
            return frozenset(conn.execute(select(advisories.c.id).where(and_(
                advisories.c.repo_pk == repo_pk, advisories.c.kind == kind))).scalars())

    def feed_items(self, *, repo_id: str | None = None, owner: str | None = None,
                   min_severity: Severity | None = None, limit: int = 100) -> list[FeedItem]:
        """The advisories a feed shows (withdrawn ones too, records as stored), most recently modified first."""
        with self.db.transaction() as conn:
            query = _with_repo()
            if repo_id is not None:
                query = query.where(repos.c.repo_id == repo_id)
            if owner is not None:
                query = query.where(func.lower(repos.c.repo_id).startswith(owner.lower() + "/", autoescape=True))
            if min_severity is not None:
                wanted = [s.value for s in Severity if s.at_least(min_severity)]
                query = query.where(advisories.c.severity.in_(wanted))
            query = query.order_by(advisories.c.modified.desc(), advisories.c.id).limit(limit)
            return [advisory_row(r) for r in conn.execute(query)]

    # -- the reach index ----------------------------------------------------------------------

    def reach(self, repo_pk: int, shas: Iterable[str]) -> ReachIndex:
        """The repo's chains and the labels of ``shas``: what a revision's report asks of the graph."""
        with self.db.transaction() as conn:
            return reach_index.load_index(conn, repo_pk, shas)

    def ids_for_commit(self, sha: str, repo_pk: int | None = None) -> list[str]:
        """The one lookup a query needs: which live advisories affect this commit."""
        with self.db.read() as conn:
            matched = reach_index.live_ids_for_commit(sha, repo_pk).subquery()
            query = (select(advisories.c.id).join(matched, matched.c.advisory_id == advisories.c.id)
                     .where(advisories.c.withdrawn.is_(False)))
            return sorted(conn.execute(query).scalars())

    def ids_for_commits(self, shas: Sequence[str], repo_pk: int) -> dict[str, list[str]]:
        """The index for many commits of one repo at once (a branch weighed for the scan's advice)."""
        found: dict[str, list[str]] = {sha: [] for sha in shas}
        with self.db.transaction() as conn:
            for start in range(0, len(shas), reach_index.CHUNK):  # bound the statement's parameters
                chunk = list(shas[start:start + reach_index.CHUNK])
                for sha, advisory_id in conn.execute(reach_index.live_ids_for_commits(chunk, repo_pk)):
                    found[sha].append(advisory_id)
        return {sha: sorted(set(ids)) for sha, ids in found.items()}

    # The API's query parameters, one keyword each: a parameter object would only be unpacked again here.
    def live_records_for_commit(
            self, sha: str, repo_pk: int | None = None, *, limit: int, offset: int = 0, versions: bool = True,
            versions_budget: int | None = None) -> tuple[list[tuple[str, str, str]], int | None]:
        """One page of (id, modified, record as JSON text) of the live advisories affecting a commit, by id,
        and the offset of the next page (None: this is the last).

        The API's hot path: the page is cut from the index alone (no advisory row is read for the
        advisories it does not show), and the stored text is served with its ``versions`` spliced in,
        never decoded (``versions=False``: as stored, for answers that give ids only).
        ``versions_budget``: the page ends (after one record at least) once the versions it lists
        reach it; the count comes from the spans of the records shown, read a few at a time.
        """
        with self.db.read() as conn:
            matched = reach_index.live_ids_for_commit(sha, repo_pk).subquery()
            result = conn.execute(select(matched.c.advisory_id, matched.c.ranged).order_by(matched.c.advisory_id)
                                  .limit(limit + 1).offset(offset))
            spans: dict[str, list[Any]] = {}
            ids, more = self._cut_page(conn, result, limit, spans, versions_budget if versions else None)
            result.close()
            next_offset = offset + len(ids) if more else None
            texts = {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
                select(advisories.c.id, advisories.c.record["modified"].as_string(), cast(advisories.c.record, Text),
                       advisories.c.kind)
                .where(advisories.c.id.in_([i for i, _ in ids]), advisories.c.withdrawn.is_(False)))} if ids else {}
            ids = [(i, is_ranged) for i, is_ranged in ids if i in texts]
            if not versions:
                return [(i, texts[i][0], texts[i][1]) for i, _ in ids], next_offset
            if not spans:
                spans = reach_index.spans_of(conn, [i for i, is_ranged in ids if is_ranged])
            found = reach_index.versions_of(conn, [(i, 0, texts[i][2]) for i, _ in ids], self.max_versions,
                                            spans=spans, cache=self._versions_cache, chains=self._chains)
            out = []
            for advisory_id, _ in ids:
                modified, text, _ = texts[advisory_id]
                shas, total = found.get(advisory_id, ([], 0))
                out.append((advisory_id, modified, reach_index.with_versions_text(text, shas, total)))
            return out, next_offset

    def _cut_page(self, conn: Connection, result: Any, limit: int, spans: dict[str, list[Any]],
                  budget: int | None) -> tuple[list[tuple[str, bool]], bool]:
        """The ``(id, ranged)`` a page shows, read from ``result`` a few at a time, and whether more follow.

        At most ``limit``; with a versions ``budget``, at least one and then until the versions
        listed reach it: the counts come from the spans of those rows alone (added to ``spans``), so
        a page of 20 records of 1,000 versions reads 32 index rows and their spans, not 1,000.
        """
        page: list[tuple[str, bool]] = []
        listed = 0
        while True:
            chunk = [(r[0], bool(r[1])) for r in result.fetchmany(BUDGET_STEP)]
            if not chunk:
                return page, False
            counts: dict[str, int] = {}
            if budget is not None:
                spans.update(reach_index.spans_of(conn, [i for i, is_ranged in chunk if is_ranged]))
                counts = reach_index.affected_counts(conn, chunk, spans)
            for item in chunk:
                if len(page) == limit or (budget is not None and page and listed >= budget):
                    return page, True
                page.append(item)
                listed += min(counts.get(item[0], 0), self.max_versions)


def _check_seen(writes: Sequence[AdvisoryWrite], stored: Mapping[str, tuple[Any, datetime | None]],
                seen: Mapping[str, datetime | None]) -> None:
    """Raise AdvisoryConflict unless every advisory read or written is as the writer read it (one written
    without being read: absent)."""
    for advisory_id in dict.fromkeys([*seen, *(w.id for w in writes)]):
        found = stored[advisory_id][1] if advisory_id in stored else None
        expected = seen.get(advisory_id)
        if found != expected:
            what = "was created" if expected is None else ("was deleted" if found is None else "was modified")
            raise AdvisoryConflict(
                f"advisory {advisory_id} {what} by another writer after it was read"
                f" (read: {expected.isoformat() if expected else 'absent'},"
                f" now: {found.isoformat() if found else 'absent'}): nothing was written")


def _check_kinds(conn: Connection, kinds: Mapping[tuple[int, str], Mapping[str, datetime]]) -> None:
    """Raise AdvisoryConflict unless every (repo, kind) read whole holds what was read, no more, no less."""
    for (pk, kind), expected in sorted(kinds.items()):
        found = _kind_versions(conn, pk, kind)
        if found != expected:
            changed = sorted(set(found).symmetric_difference(expected)
                             | {i for i in set(found) & set(expected) if found[i] != expected[i]})
            raise AdvisoryConflict(
                f"the {kind} advisories of repo {pk} changed after they were read ({len(changed)} created, "
                f"modified or deleted by another writer: {', '.join(changed[:3])}): nothing was written")


def _kind_versions(conn: Connection, repo_pk: int, kind: str) -> dict[str, datetime]:
    return {r.id: r.modified for r in conn.execute(select(advisories.c.id, advisories.c.modified).where(
        and_(advisories.c.repo_pk == repo_pk, advisories.c.kind == kind)))}
