"""The Advisor: keeps OSV advisories, the commit graph and the commit index in step with what is read.

It runs after each revision is stored (a hook of the Tracker) and after each
repo event. The records themselves come from the pure ``tracker.advisory``
package; this module decides *when* to build, fix, withdraw or re-index them,
and answers "which advisories affect revision X of repo Y?" with one lookup in
the commit -> advisory index, as OSV.dev does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracker.advisory import (
    ancestors,
    build_revision_advisories,
    classify,
    format_timestamp,
    mark_fixed,
    record_affected_commits,
    repo_event_advisory,
    validate,
)
from tracker.errors import HubError, RevisionGone
from tracker.model import SHA_RE, Finding, RepoId, Severity
from tracker.store.store import AdvisoryRow, EventRow, RepoRow, RevisionRow

log = logging.getLogger(__name__)

# Repo events the tracker records -> the advisory kind about the repo itself. A 404 cannot
# tell "deleted" from "made private" on the Hub, so "deleted" covers both.
EVENT_ADVISORIES = {
    "history_rewritten": "history_rewritten",
    "renamed": "renamed",
    "deleted": "deleted",
    "recreated": "recreated",
    "gated": "gated",
}

# A risk is undone when its file goes away or changes back to what it was before. For these
# families the file is re-analysed on every change, so a change that no longer raises a finding of
# the same family undoes it too (a template that compiles again, a pickle replaced by a clean one).
# Not for licences: a README edited for prose keeps its restrictive licence without a new finding.
RECHECKED_RISKS = ("chat_template.", "weights.pickle_")


@dataclass
class QueryResult:
    repo: RepoId
    revision: str
    vulns: list[dict[str, Any]]
    head: str | None
    behind: int | None  # commits between the revision and the branch head; None if not on it
    known: bool  # the revision is in the repo's history as far as the tracker can tell

    def to_json(self) -> dict[str, Any]:
        return {"vulns": self.vulns, "repo": self.repo, "revision": self.revision, "head": self.head,
                "behind": self.behind, "known": self.known}


class Advisor:
    def __init__(self, tracker: Any, *, osv: Any | None = None) -> None:
        self.tracker = tracker
        self.store = tracker.store
        self.settings = tracker.settings
        self.osv = osv  # an OsvClient, or None to skip dependency lookups

    @property
    def endpoint(self) -> str:
        return self.tracker.hub.endpoint

    def _now(self) -> datetime:
        return self.tracker.clock()

    # -- hooks ------------------------------------------------------------------------------

    def on_revision(self, repo: RepoRow, revision: RevisionRow) -> None:
        """A revision was stored: extend the graph, build its advisories, undo risks, re-index."""
        if not revision.baseline:
            self.publish_revision(repo, revision)
        self._undo_risks(repo, revision)
        self.reindex(repo)

    def on_event(self, repo: RepoRow, event: EventRow) -> None:
        kind = EVENT_ADVISORIES.get(event.kind)
        if kind is None:
            return
        if kind == "history_rewritten":
            revisions = event.detail.get("unreachable_revisions") or []
            if not revisions:
                return  # nothing anyone could have pinned is gone
        else:
            revisions = [r.sha for r in self.store.revisions(repo.pk, status="done")]
        revisions = [r for r in revisions if SHA_RE.match(r or "")]
        if not revisions:
            return
        if kind == "recreated":
            revisions = sorted(self.store.commit_graph(repo.pk))  # every commit under that name is suspect
        from tracker.advisory import repo_event_id

        stored = self.store.get_advisory(repo_event_id(repo.repo_id, kind, revisions))
        record = repo_event_advisory(repo_id=repo.repo_id, kind=kind, detail=event.detail, revisions=revisions,
                                     endpoint=self.endpoint, now=self._now(), tracker_url=self.settings.tracker_url,
                                     previous=stored.record if stored else None)
        validate(record)
        severity = record["database_specific"]["severity"].lower()
        self.store.save_advisory(repo.pk, record, revision_sha=None, kind=kind, severity=severity, fixed_sha=None,
                                 affected=revisions)

    # -- building ---------------------------------------------------------------------------

    def publish_revision(self, repo: RepoRow, revision: RevisionRow) -> list[dict[str, Any]]:
        """Build (or rebuild, or withdraw) the advisories of one analysed revision."""
        findings = [Finding.from_json(f) for f in revision.findings or []]
        related = sorted({i for f in findings if f.code == "dependencies.known_vulnerability"
                          for i in (f.evidence.get("ids") or [])})
        previous = [a.record for a in self.store.advisories_for(repo_pk=repo.pk) if a.revision_sha == revision.sha]
        records = build_revision_advisories(
            repo_id=repo.repo_id, revision=revision.sha, parent=revision.parent_sha, revision_date=revision.date,
            findings=findings, endpoint=self.endpoint, tracker_url=self.settings.tracker_url,
            estimate_delta=(revision.estimate or {}).get("delta"), related=related,
            parents=self.store.commit_graph(repo.pk), now=self._now(),
            min_severity=self.settings.min_advisory_severity, previous=previous,
        )
        for record in records:
            validate(record)
            ds = record["database_specific"]
            fixed = [e["fixed"] for r in record["affected"][0].get("ranges", []) for e in r["events"] if "fixed" in e]
            self.store.save_advisory(
                repo.pk, record, revision_sha=revision.sha, kind=ds["kind"], severity=ds["severity"].lower(),
                fixed_sha=fixed[-1] if ds["kind"] == "risk" and fixed else None, affected=None,
            )
        return records

    def _undo_risks(self, repo: RepoRow, revision: RevisionRow) -> None:
        """Mark open risk advisories fixed when this revision undoes what introduced them."""
        if revision.snapshot is None:
            return
        open_risks = [adv for adv in self.store.advisories_for(repo_pk=repo.pk, include_withdrawn=False)
                      if adv.kind == "risk" and not adv.fixed_sha and adv.revision_sha not in (None, revision.sha)]
        if not open_risks:
            return
        now_files = {f.path: f.content_id for f in revision.snapshot.files}
        findings_here = {(f["code"], f.get("path")) for f in revision.findings or []}
        history = ancestors(self.store.commit_graph(repo.pk), [revision.sha])
        for adv in open_risks:
            if adv.revision_sha not in history:
                continue
            introduced = self.store.get_revision(repo.pk, adv.revision_sha)
            parent = self.store.get_revision(repo.pk, introduced.parent_sha) if introduced and introduced.parent_sha else None
            if introduced is None or introduced.snapshot is None:
                continue
            then = {f.path: f.content_id for f in introduced.snapshot.files}
            before = {f.path: f.content_id for f in parent.snapshot.files} if parent and parent.snapshot else {}
            risky = adv.record["database_specific"].get("findings", [])
            if risky and all(self._undone(f, then, before, now_files, findings_here) for f in risky):
                record = mark_fixed(adv.record, revision.sha, self._now(), affected_commits=[])
                validate(record)
                self.store.save_advisory(repo.pk, record, revision_sha=adv.revision_sha, kind="risk",
                                         severity=adv.severity, fixed_sha=revision.sha, affected=None)

    @staticmethod
    def _undone(finding: dict[str, Any], then: dict[str, str], before: dict[str, str], now: dict[str, str],
                findings_here: set[tuple[str, Any]]) -> bool:
        path = finding.get("path")
        if path is None:
            return False
        for family in RECHECKED_RISKS:
            if finding["code"].startswith(family):
                # Changed again, and the new content carries no risk of the same family.
                return now.get(path) != then.get(path) and not any(
                    code.startswith(family) and classify(code) == "risk" and p == path
                    for code, p in findings_here)
        # The file is gone, or back to what it was before the risky revision.
        return path not in now or (path in before and now[path] == before[path])

    def reindex(self, repo: RepoRow) -> None:
        """Recompute each advisory's affected commits over the graph as now known; keep ``versions`` in step."""
        parents = self.store.commit_graph(repo.pk)
        for adv in self.store.advisories_for(repo_pk=repo.pk):
            if adv.revision_sha is None:  # repo-event advisories list their revisions explicitly
                record = adv.record
                versions = record["affected"][0].get("versions", [])
                if adv.kind == "recreated" and not adv.withdrawn and sorted(parents) != versions:
                    # A possible takeover: the new owner's commits, as they arrive, are affected too.
                    record = {**record, "affected": [{**record["affected"][0], "versions": sorted(parents)},
                                                     *record["affected"][1:]],
                              "modified": format_timestamp(self._now())}
                    validate(record)
                    versions = sorted(parents)
                self.store.save_advisory(repo.pk, record, revision_sha=None, kind=adv.kind,
                                         severity=adv.severity, fixed_sha=adv.fixed_sha,
                                         affected=[] if adv.withdrawn else versions)
                continue
            record = adv.record
            ranges_only = {**record, "affected": [{**a, "versions": []} for a in record["affected"]]}
            affected = sorted(record_affected_commits(parents, ranges_only)) if not adv.withdrawn else []
            if not adv.withdrawn and record["affected"][0].get("versions", []) != affected:
                record = {**record, "affected": [{**record["affected"][0], "versions": affected},
                                                 *record["affected"][1:]],
                          "modified": format_timestamp(self._now())}
                validate(record)
            self.store.save_advisory(repo.pk, record, revision_sha=adv.revision_sha, kind=adv.kind,
                                     severity=adv.severity, fixed_sha=adv.fixed_sha, affected=affected)

    # -- querying ---------------------------------------------------------------------------

    def resolve(self, repo: RepoRow, revision: str) -> tuple[str, bool]:
        """The full sha of a revision and whether it is (now) in the known graph.

        A revision the tracker has not seen is looked up on the Hub: its history
        is walked back to a commit the tracker knows, or the tracker's oldest
        commit's history is walked back to it, and the graph is extended.
        """
        matches = self.store.find_commit(revision, repo.pk)
        if len(matches) == 1:
            return matches[0][1], True
        sha = self.tracker.pin(repo.repo_id, revision)
        if sha != revision and self.store.has_commit(repo.pk, sha):
            return sha, True
        known = set(self.store.commit_graph(repo.pk))
        if not known:
            return sha, False
        hub = self.tracker.hub
        listing = hub.commits_since(repo.repo_id, sha, known)
        if listing.reached_since and listing.commits:
            self._add_listing(repo, listing.commits)
            return sha, True
        # Older than anything read? Walk back from the oldest known commit.
        roots = [s for s, p in self.store.commit_graph(repo.pk).items() if not p]
        for root in roots:
            older = hub.commits_since(repo.repo_id, root, {sha})
            if older.reached_since:
                chain = list(older.commits)  # oldest first, from just after sha up to root
                edges = [(c.sha, c.parents[0] if c.parents else None) for c in chain]
                edges.append((sha, None))
                self.store.add_commits(repo.pk, edges, now=self._now())
                self._relink_root(repo, root, chain)
                return sha, True
        return sha, False

    def _add_listing(self, repo: RepoRow, commits: Iterable[Any]) -> None:
        self.store.add_commits(repo.pk, [(c.sha, c.parents[0] if c.parents else None) for c in commits],
                               now=self._now())
        self.reindex(repo)

    def _relink_root(self, repo: RepoRow, root: str, chain: list[Any]) -> None:
        """The old root now has a known parent: the commit listed just before it."""
        if chain and chain[-1].sha == root and chain[-1].parents:
            self.store.set_commit_parent(repo.pk, root, chain[-1].parents[0])
        self.reindex(repo)

    def behind(self, repo: RepoRow, sha: str) -> int | None:
        head = repo.last_seen_sha
        if head is None:
            return None
        parents = self.store.commit_graph(repo.pk)
        steps, current = 0, head
        while current is not None:
            if current == sha:
                return steps
            nxt = parents.get(current) or []
            current = nxt[0] if nxt else None
            steps += 1
        return None

    def query(self, repo_id: str, revision: str) -> QueryResult:
        repo = self.store.get_repo(repo_id)
        if repo is None:
            raise KeyError(f"not watched: {repo_id} (add with `tracker watch add {repo_id}`)")
        try:
            sha, known = self.resolve(repo, revision)
        except RevisionGone:
            raise
        except HubError as exc:
            log.warning("lookup of %s@%s failed: %s", repo_id, revision, exc)
            sha, known = revision, False
        ids = self.store.advisory_ids_for_commit(sha, repo.pk) if known else []
        rows = [row for row in self.store.advisories_by_ids(ids) if not row.withdrawn]
        vulns = [r.record for r in sorted(rows, key=_by_severity)]
        return QueryResult(repo=repo.repo_id, revision=sha, vulns=vulns, head=repo.last_seen_sha,
                           behind=self.behind(repo, sha) if known else None, known=known)


def _by_severity(row: AdvisoryRow) -> tuple[int, str]:
    try:
        rank = Severity(row.severity).rank
    except ValueError:
        rank = 9
    return rank, row.id
