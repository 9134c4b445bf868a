"""Advisories and queries: which advisories affect a revision (the CLI's query, OSV's ``/v1/query``), the
advisories of a repo or of all, one by id, a feed's items, and the pages' reads."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from tracker.adapters.delivery.plan import record_categories
from tracker.core.errors import NotFound
from tracker.core.model import AdvisoryRow, RepoId, Severity
from tracker.services.hubcheck import naming

if TYPE_CHECKING:
    from tracker.app import Tracker
    from tracker.pipeline.ports import Pages
    from tracker.pipeline.querying import LookupBudget, QueryResult

__all__ = ["AdvisoryPage", "Advisories", "FeedWanted"]

# A page of /v1/query also ends (after at least one record) once the records' computed ``versions``
# reach this many: a commit affected by thousands of advisories is answered in pages of bounded
# size (5 records of 1,000 versions, about 225 KB), and the client follows next_page_token as for
# any page. At 20,000 a page was 900 KB, serialised per request.
PAGE_VERSIONS = 5_000


@dataclass(frozen=True)
class AdvisoryPage:
    """One page of the advisories affecting a commit: (id, modified, record JSON) rows, and where the next
    page starts (None: this is the last)."""

    rows: list[tuple[str, str, str]]
    next_offset: int | None


@dataclass(frozen=True)
class FeedWanted:
    """What a feed serves: a watched repo's advisories, an owner's, or all (both None); at least
    ``min_severity``; with a finding in one of ``categories`` (empty: any)."""

    repo_id: str | None = None
    owner: str | None = None
    min_severity: Severity | None = None
    categories: frozenset[str] = frozenset()
    limit: int = 100


@dataclass(frozen=True)
class Advisories:
    """The advisories the tracker wrote, read by revision, repo, id or feed."""

    tracker: Tracker

    def query(self, repo_id: RepoId, revision: str, *, argument: str | None = None) -> QueryResult:
        """The advisories affecting ``revision`` of a watched repo (NotWatched otherwise), and how far behind its
        branch head it is. With ``argument``, the Hub's refusals are said as that argument's (ArgumentError)."""
        if argument is None:
            return self.tracker.query(repo_id, revision)
        with naming(self.tracker.hub, repo_id, argument, revision):
            return self.tracker.query(repo_id, revision)

    def lookup_budget(self) -> LookupBudget:
        """The Hub look-ups one call may make to place commits not read yet (``[api] max_hub_requests``)."""
        return self.tracker.querier.budget()

    def affecting(self, repo_id: str | None, revision: str, budget: LookupBudget, *, offset: int = 0,
                  limit: int, records: bool = True) -> AdvisoryPage:
        """One page of the live advisories affecting ``revision``, of ``repo_id`` or (None: a full sha) of any
        watched repo; a commit not read yet is placed on the Hub within ``budget``.

        ``records=False`` (ids only): the records' versions are not computed. A page with records ends
        early once their versions reach PAGE_VERSIONS (after one record at least). Raises NotWatched,
        RevisionUnresolved, and NotFound for a commit no watched repo has: an empty answer would read as safe.
        """
        store = self.tracker.store
        if repo_id is None:
            sha, repo_pk, ids = revision, None, None
        else:
            repo = self.tracker.repo(repo_id)
            placement = self.tracker.querier.place(repo, revision, budget)
            if not placement.on_graph:
                return AdvisoryPage([], None)
            sha, repo_pk = placement.sha, repo.pk
            ids = self.tracker.querier.advisory_ids(repo, placement) if placement.edges else None
        if ids is None:
            rows, next_offset = store.advisories.live_records_for_commit(
                sha, repo_pk, limit=limit, offset=offset, versions=records, versions_budget=PAGE_VERSIONS)
            if not rows and repo_pk is None and not store.revisions.find_commit(sha):
                raise NotFound(f"the tracker has not read commit {sha}: it is in no watched repo's history; "
                               "name its repo (package.name) to have it looked up on the Hub")
            return AdvisoryPage(rows, next_offset)
        return self._page_of(ids, offset=offset, limit=limit, records=records)

    def _page_of(self, ids: list[str], *, offset: int, limit: int, records: bool) -> AdvisoryPage:
        import json

        live = [r for r in self.tracker.store.advisories.by_ids(ids, versions=records) if not r.withdrawn][offset:]
        shown, listed = 0, 0
        while shown < min(len(live), limit) and (shown == 0 or listed < PAGE_VERSIONS):
            listed += sum(len(a.versions) for a in live[shown].record.affected[:1])
            shown += 1
        page = [(r.id, r.record.modified, json.dumps(r.osv, allow_nan=False)) for r in live[:shown]]
        return AdvisoryPage(page, offset + shown if len(live) > shown else None)

    def find(self, repo_id: RepoId | None = None, *, since: datetime | None = None) -> list[AdvisoryRow]:
        """The advisories of a watched repo (NotWatched otherwise), or of all, oldest first."""
        repo_pk = self.tracker.repo(repo_id).pk if repo_id else None
        return self.tracker.store.advisories.find(repo_pk=repo_pk, since=since)

    def every(self) -> Iterator[AdvisoryRow]:
        """Every advisory, in id order, a batch at a time."""
        return self.tracker.store.advisories.iter_all()

    def get(self, advisory_id: str) -> AdvisoryRow | None:
        return self.tracker.store.advisories.get(advisory_id)

    def feed(self, wanted: FeedWanted) -> list[AdvisoryRow]:
        """A feed's advisories, newest first. Raises NotFound for a repo not watched or an owner with none."""
        store = self.tracker.store
        if wanted.repo_id is not None and store.repos.get(wanted.repo_id) is None:
            raise NotFound(f"not watched: {wanted.repo_id}")
        if wanted.owner is not None and not store.repos.owner_watched(wanted.owner):
            raise NotFound(f"no watched repo belongs to {wanted.owner}")
        # Category filtering happens here (categories are a JSON list), so ask for more than a page.
        items = store.advisories.feed_items(repo_id=wanted.repo_id, owner=wanted.owner,
                                            min_severity=wanted.min_severity,
                                            limit=wanted.limit * 10 if wanted.categories else wanted.limit)
        if wanted.categories:
            items = [i for i in items if wanted.categories & set(record_categories(i.record))][:wanted.limit]
        return items

    def pages(self) -> Pages:
        """The pages' reads (a few statements a page, whatever the history): a read model served as it is."""
        return self.tracker.store.pages
