"""Querying: which advisories affect a revision of a repo. Reads only.

A commit the tracker has listed is answered from the commit -> advisory index (one lookup,
as OSV.dev does). A revision it has not seen (a branch, a tag, an older or newer commit) is
looked up on the Hub, explicitly and within a budget of Hub requests per call, and its
ancestry is kept in an in-memory cache — a read never writes to the store. A revision that
cannot be resolved raises ``RevisionUnresolved`` (temporary when the Hub could not be asked),
so callers answer an error, never an empty "no known vulnerabilities".
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tracker.core.advisory import ancestors, commit_affected
from tracker.core.advisory.affected import graph_commits
from tracker.core.advisory.reach import ranged
from tracker.core.errors import HubError, NotWatched, RepoGone, RevisionGone, RevisionUnresolved, first_line
from tracker.core.model import SHA_RE, AdvisoryKind, AdvisoryRow, RepoId, RepoRow, Severity
from tracker.pipeline.ports import HubReader, Store

log = logging.getLogger("tracker.querying")  # the name operators filter logs by, not the module path

LOOKUP_LISTING_LIMIT = 500  # commits walked per listing when placing an unseen revision in the graph
CACHE_SIZE = 2048  # unseen revisions remembered per process


@dataclass
class LookupBudget:
    """Hub requests one API call (a query, a whole querybatch) may spend on unseen revisions."""

    requests: int

    def spend(self, what: str, count: int = 1) -> None:
        if self.requests <= 0:
            raise RevisionUnresolved(f"{what}: this request's budget of Hub look-ups is spent; "
                                     "ask again in a separate request", temporary=True)
        self.requests -= count


@dataclass(frozen=True)
class Placement:
    """Where an unseen revision sits: its full sha and the extra edges that join it to the known graph."""

    sha: str
    edges: Mapping[str, list[str]] = field(default_factory=dict)
    on_graph: bool = False  # joined to the known graph (else it is unrelated to anything read)


@dataclass
class QueryResult:
    repo: RepoId
    revision: str
    vulns: list[AdvisoryRow]  # worst first
    head: str | None
    behind: int | None  # commits between the revision and the branch head; None if not on it
    known: bool  # the revision is in the repo's history as far as the tracker can tell

    def to_json(self) -> dict[str, Any]:
        return {"vulns": [v.osv for v in self.vulns], "repo": self.repo, "revision": self.revision, "head": self.head,
                "behind": self.behind, "known": self.known}


def pin(hub: HubReader, repo_id: RepoId, revision: str) -> str:
    """A branch, tag or short id pinned to its 40-hex commit on the Hub (a full sha is taken as it is)."""
    if SHA_RE.match(revision):
        return revision
    info = hub.repo_info(repo_id, revision=revision)
    if not info.sha:
        raise RevisionGone(f"{repo_id}: cannot resolve revision {revision!r}")
    return info.sha


def _by_severity(row: AdvisoryRow) -> tuple[int, str]:
    try:
        rank = Severity(row.severity).rank
    except ValueError:
        rank = 9
    return rank, row.id


class Querier:
    def __init__(self, store: Store, hub: HubReader, *, requests_per_call: int = 20) -> None:
        self.store = store
        self.hub = hub
        self.requests_per_call = requests_per_call
        self._cache: OrderedDict[tuple[int, str], Placement] = OrderedDict()
        self._lock = threading.Lock()

    def budget(self) -> LookupBudget:
        return LookupBudget(self.requests_per_call)

    # -- placing a revision ---------------------------------------------------------------------

    def _cached(self, key: tuple[int, str]) -> Placement | None:
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
            return found

    def _cached_prefix(self, repo_pk: int, prefix: str) -> Placement | None:
        """A short sha of a commit an earlier look-up fetched: placed from that look-up's edges."""
        if not 7 <= len(prefix) < 40 or not all(c in "0123456789abcdef" for c in prefix):
            return None
        with self._lock:
            hits = {sha: placement for (pk, _), placement in self._cache.items() if pk == repo_pk
                    for sha in placement.edges if sha.startswith(prefix)}
        if len(hits) != 1:
            return None
        ((sha, placement),) = hits.items()
        return Placement(sha=sha, edges=placement.edges, on_graph=placement.on_graph)

    def _remember(self, key: tuple[int, str], placement: Placement) -> Placement:
        with self._lock:
            self._cache[key] = placement
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return placement

    def place(self, repo: RepoRow, revision: str, budget: LookupBudget) -> Placement:
        """The full sha of ``revision`` and how it joins the known graph (Hub look-ups within ``budget``)."""
        matches = self.store.revisions.find_commit(revision, repo.pk) if revision else []
        if len(matches) == 1:
            return Placement(sha=matches[0][1], on_graph=True)
        key = (repo.pk, revision)
        cached = self._cached(key) or self._cached_prefix(repo.pk, revision)
        if cached is not None:
            return cached
        try:
            placement = self._look_up(repo, revision, budget)
        except RevisionGone as exc:
            raise RevisionUnresolved(f"{repo.repo_id}: no revision {revision!r} on the Hub") from exc
        except RepoGone as exc:  # the Hub answered: the repo is gone (or private), not an outage
            raise RevisionUnresolved(f"{repo.repo_id}: the repo is not on the Hub ({first_line(exc)})") from exc
        except HubError as exc:
            raise RevisionUnresolved(f"{repo.repo_id}@{revision}: cannot ask the Hub now ({first_line(exc)}); "
                                     "retry later", temporary=True) from exc
        return self._remember(key, placement)

    def _look_up(self, repo: RepoRow, revision: str, budget: LookupBudget) -> Placement:
        sha = revision
        if not SHA_RE.match(revision):
            budget.spend(f"{repo.repo_id}@{revision}")
            sha = pin(self.hub, repo.repo_id, revision)
            if self.store.revisions.has_commit(repo.pk, sha):
                return Placement(sha=sha, on_graph=True)
        graph = self.store.revisions.commit_graph(repo.pk)
        if not graph:
            return Placement(sha=sha)
        # Newer than (or beside) what was read: walk its history back to a known commit.
        budget.spend(f"{repo.repo_id}@{sha[:12]}")
        listing = self.hub.commits_since(repo.repo_id, sha, set(graph))
        budget.requests -= max(0, listing.pages - 1)
        if listing.reached_since and listing.commits:
            return Placement(sha=sha, edges={c.sha: list(c.parents) for c in listing.commits}, on_graph=True)
        # Older than anything read? Walk back from each known root until it is met.
        for root in sorted(s for s, parents in graph.items() if not parents):
            budget.spend(f"{repo.repo_id}@{sha[:12]}")
            older = self.hub.commits_since(repo.repo_id, root, {sha})
            budget.requests -= max(0, older.pages - 1)
            if older.reached_since:
                edges: dict[str, list[str]] = {c.sha: list(c.parents) for c in older.commits}
                edges.setdefault(sha, [])
                return Placement(sha=sha, edges=edges, on_graph=True)
        return Placement(sha=sha)

    # -- which advisories -------------------------------------------------------------------------

    def advisory_ids(self, repo: RepoRow, placement: Placement) -> list[str]:
        """Live advisories affecting a placed revision: the index for a known commit, else computed."""
        if not placement.edges:
            if not placement.on_graph:
                return []
            return self.store.advisories.ids_for_commit(placement.sha, repo.pk)
        # An unseen revision (rare, and a Hub look-up anyway): its range events evaluated over the
        # known graph joined with the fetched edges. Advisories that list revisions by name (repo
        # events) name none it could be.
        graph = {**self.store.revisions.commit_graph(repo.pk), **placement.edges}
        history = ancestors(graph, [placement.sha])
        every = graph_commits(graph)
        rootsets: dict[str, set[str]] = {}
        ids = []
        for adv in self.store.advisories.find(repo_pk=repo.pk, include_withdrawn=False, versions=False):
            if not ranged(adv.kind):
                continue
            if adv.kind == AdvisoryKind.RECREATED or commit_affected(
                    graph, [e.as_json() for e in adv.record.events], placement.sha, history, all_commits=every, rootsets=rootsets):
                ids.append(adv.id)
        return sorted(ids)

    def behind(self, repo: RepoRow, sha: str, edges: Mapping[str, list[str]] | None = None) -> int | None:
        head = repo.last_seen_sha
        if head is None:
            return None
        parents = {**self.store.revisions.commit_graph(repo.pk), **(edges or {})}
        steps, seen = 0, set()
        current: str | None = head
        while current is not None and current not in seen:
            if current == sha:
                return steps
            seen.add(current)
            nxt = parents.get(current) or []
            current = nxt[0] if nxt else None
            steps += 1
        return None

    def query(self, repo_id: str, revision: str) -> QueryResult:
        """``tracker query``: the advisories affecting a revision, and how far behind the head it is."""
        repo = self.store.repos.get(repo_id)
        if repo is None:
            raise NotWatched(repo_id)
        placement = self.place(repo, revision, self.budget())
        rows = [r for r in self.store.advisories.by_ids(self.advisory_ids(repo, placement)) if not r.withdrawn]
        return QueryResult(repo=repo.repo_id, revision=placement.sha,
                           vulns=sorted(rows, key=_by_severity), head=repo.last_seen_sha,
                           behind=self.behind(repo, placement.sha, placement.edges) if placement.on_graph else None,
                           known=placement.on_graph)
