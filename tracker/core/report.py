"""The revision report: everything one revision (or one repo event) implies, computed without I/O.

A revision is processed in three steps: **read** (the Hub, through the sources),
**report** (this module: findings in, records out, pure) and **save** (one store
transaction that writes the report and marks the revision done). The report holds
the revision's results and every advisory write it causes: advisories created,
rebuilt, withdrawn or undone. What an advisory affects is its GIT range: the store indexes it
as spans over the commit graph (tracker/core/advisory/reach.py), so a new revision costs no write to
the advisories it merely joins, and ``versions`` are computed when a record is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tracker.core.advisory import (
    build_revision_advisories,
    classify,
    mark_fixed,
    range_events,
    repo_event_advisory,
    repo_event_id,
    validate,
)
from tracker.core.advisory.reach import ReachIndex
from tracker.core.diff import summarize_files
from tracker.core.model import (
    SHA_RE,
    AdvisoryKind,
    AdvisoryRow,
    Finding,
    RawDiff,
    RepoId,
    Severity,
    Snapshot,
)

if TYPE_CHECKING:
    from tracker.core.inherit import InheritInputs

# Repo events the tracker records -> the advisory about the repo itself. A 404 cannot
# tell "deleted" from "made private" on the Hub, so "deleted" covers both.
EVENT_ADVISORIES: Mapping[str, AdvisoryKind] = {
    "history_rewritten": AdvisoryKind.HISTORY_REWRITTEN,
    "renamed": AdvisoryKind.RENAMED,
    "deleted": AdvisoryKind.DELETED,
    "recreated": AdvisoryKind.RECREATED,
    "gated": AdvisoryKind.GATED,
    "upstream.commit_flood": AdvisoryKind.COMMIT_FLOOD,
}

# A risk is undone when its file goes away or changes back to what it was before. For these
# families the file is re-analysed on every change, so a change that no longer raises a finding of
# the same family undoes it too (a template that compiles again, a pickle replaced by a clean one).
# Not for licences: a README edited for prose keeps its restrictive licence without a new finding.
RECHECKED_RISKS = ("chat_template.", "weights.pickle_")


@dataclass(frozen=True)
class AdvisoryWrite:
    """One advisory to insert or update.

    The store indexes it from its GIT range; ``listed``: the commits a repo-event advisory names
    instead (renamed, deleted, gated, history rewritten), replacing those stored.
    """

    record: dict[str, Any]
    revision_sha: str | None
    kind: str
    severity: str
    fixed_sha: str | None
    listed: frozenset[str] | None = None
    repo_pk: int | None = None  # the repo it is about when not the report's (a derivative's inherited advisory)

    @property
    def id(self) -> str:
        return str(self.record["id"])


@dataclass(frozen=True)
class RevisionReport:
    """What processing one revision stores, in one transaction."""

    repo_pk: int
    revision_pk: int
    sha: str
    snapshot: Snapshot
    diff: RawDiff | None
    findings: tuple[Finding, ...]
    summary: str
    estimate: dict[str, Any] | None
    dependencies_pending: bool
    analysed_at: datetime
    advisories: tuple[AdvisoryWrite, ...] = ()
    repo_updates: Mapping[str, Any] = field(default_factory=dict)  # e.g. the base model its card now declares
    libraries: tuple[str, ...] = ()  # what the revision is loaded with (tracker/core/findings/libraries.py)

    @property
    def worst_severity(self) -> Severity | None:
        return Severity.worst(f.severity for f in self.findings)


@dataclass(frozen=True)
class EventReport:
    """A repo event (rewrite, rename, deletion, re-creation, gating), the repo's new state and its advisory."""

    repo_pk: int
    kind: str
    dedupe_key: str
    detail: dict[str, Any]
    revision_sha: str | None
    created_at: datetime
    repo_updates: Mapping[str, Any] = field(default_factory=dict)
    advisories: tuple[AdvisoryWrite, ...] = ()


@dataclass(frozen=True)
class AdvisoryContext:
    """What the report needs to know about the repo as stored: its advisories, revisions and graph.

    Only what one revision is compared with is read: its own advisories, the open risks and
    inherited advisories, and the labels of their commits in the reachability index (``reach``).
    """

    repo_id: RepoId
    endpoint: str
    tracker_url: str | None
    min_severity: Severity
    advisories: Sequence[AdvisoryRow]  # the revision's own advisories, the open risks and inherited ones
    now: datetime
    reach: ReachIndex = field(default_factory=ReachIndex)  # chains, and the labels of those advisories' commits
    snapshots: Mapping[str, Snapshot] = field(default_factory=dict)  # done revisions' file lists, by sha
    diff_bases: Mapping[str, str | None] = field(default_factory=dict)  # revision sha -> the one it was diffed against
    commits: Sequence[str] = ()  # every commit of the graph: only for repo events (a re-created repo's id)
    inherited_ids: frozenset[str] = frozenset()  # the repo's inherited advisories, open or not

    def descends(self, ancestor: str | None, sha: str) -> bool:
        """Whether ``sha`` is ``ancestor`` or one of its descendants in the graph."""
        a, b = self.reach.labels.get(ancestor or ""), self.reach.labels.get(sha)
        return a is not None and b is not None and self.reach.is_ancestor(a, b)


def summarize(findings: Sequence[Finding], diff: RawDiff | None, snapshot: Snapshot) -> str:
    """The one line a revision list shows: the worst finding, or what files moved."""
    if diff is None:
        summary = f"baseline: {len(snapshot.files)} files"
        if findings and findings[0].severity.at_least(Severity.MODERATE):
            summary += f"; {findings[0].summary}"
        return summary
    if findings:
        return findings[0].summary + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else "")
    return summarize_files(diff.to_json()["files"])


def _write(record: dict[str, Any], *, revision_sha: str | None, kind: str, fixed_sha: str | None,
           listed: Iterable[str] | None = None, repo_pk: int | None = None) -> AdvisoryWrite:
    validate(record)
    severity = str(record["database_specific"]["severity"]).lower()
    return AdvisoryWrite(record=record, revision_sha=revision_sha, kind=kind, severity=severity,
                         fixed_sha=fixed_sha, listed=frozenset(listed) if listed is not None else None,
                         repo_pk=repo_pk)


def revision_advisories(ctx: AdvisoryContext, *, sha: str, parent: str | None, date: datetime | None,
                        findings: Sequence[Finding], estimate_delta: dict[str, Any] | None) -> list[AdvisoryWrite]:
    """Build, rebuild or withdraw the advisories of one analysed revision (0, 1 or 2 records)."""
    related = sorted({i for f in findings if f.code == "dependencies.known_vulnerability"
                      for i in (f.evidence.get("ids") or [])})
    previous = [a.record for a in ctx.advisories if a.revision_sha == sha]
    records = build_revision_advisories(
        repo_id=ctx.repo_id, revision=sha, parent=parent, revision_date=date, findings=list(findings),
        endpoint=ctx.endpoint, tracker_url=ctx.tracker_url, estimate_delta=estimate_delta, related=related,
        parents={}, now=ctx.now, min_severity=ctx.min_severity, previous=previous,
    )
    writes = []
    for record in records:
        kind = record["database_specific"]["kind"]
        fixes = [e["fixed"] for e in range_events(record) if "fixed" in e]
        writes.append(_write(record, revision_sha=sha, kind=kind,
                             fixed_sha=fixes[-1] if kind == AdvisoryKind.RISK and fixes else None))
    return writes


def _undone(finding: Mapping[str, Any], then: Mapping[str, str], before: Mapping[str, str],
            now: Mapping[str, str], findings_here: set[tuple[str, Any]]) -> bool:
    path = finding.get("path")
    if path is None:
        return False
    for family in RECHECKED_RISKS:
        if finding["code"].startswith(family):
            # Changed again, and the new content carries no risk of the same family.
            return now.get(path) != then.get(path) and not any(
                code.startswith(family) and classify(code) == "risk" and p == path for code, p in findings_here)
    # The file is gone, or back to what it was before the risky revision.
    return path not in now or (path in before and now[path] == before[path])


def undone_risks(ctx: AdvisoryContext, *, sha: str, snapshot: Snapshot,
                 findings: Sequence[Finding]) -> list[AdvisoryWrite]:
    """Open risk advisories this revision undoes, marked fixed by it."""
    now_files = {f.path: f.content_id for f in snapshot.files}
    findings_here = {(f.code, f.path) for f in findings}
    writes = []
    for adv in ctx.advisories:
        if (adv.kind != AdvisoryKind.RISK or adv.withdrawn or adv.fixed_sha or adv.revision_sha in (None, sha)
                or not ctx.descends(adv.revision_sha, sha)):
            continue
        introduced = ctx.snapshots.get(adv.revision_sha)
        if introduced is None:
            continue
        base = ctx.diff_bases.get(adv.revision_sha)
        before_snapshot = ctx.snapshots.get(base) if base else None
        then = {f.path: f.content_id for f in introduced.files}
        before = {f.path: f.content_id for f in before_snapshot.files} if before_snapshot else {}
        risky = adv.record["database_specific"].get("findings", [])
        if risky and all(_undone(f, then, before, now_files, findings_here) for f in risky):
            record = mark_fixed(adv.record, sha, ctx.now, affected_commits=())
            writes.append(_write(record, revision_sha=adv.revision_sha, kind=adv.kind, fixed_sha=sha))
    return writes


def revision_report(ctx: AdvisoryContext, *, repo_pk: int, revision_pk: int, sha: str, parent: str | None,
                    date: datetime | None, baseline: bool, snapshot: Snapshot, diff: RawDiff | None,
                    findings: Sequence[Finding], estimate: dict[str, Any] | None,
                    dependencies_pending: bool, inherit: InheritInputs | None = None,
                    repo_updates: Mapping[str, Any] | None = None,
                    libraries: tuple[str, ...] = ()) -> RevisionReport:
    """Everything a newly read revision implies: its results, its advisories, risks it undoes, the index.

    ``inherit``: along the model tree (tracker/core/inherit.py), the inherited advisories this revision
    creates or closes, its own (as a derivative) and its watched derivatives' (as a base).
    """
    writes: list[AdvisoryWrite] = []
    if not baseline:
        writes += revision_advisories(ctx, sha=sha, parent=parent, date=date, findings=findings,
                                      estimate_delta=(estimate or {}).get("delta"))
    writes += undone_risks(ctx, sha=sha, snapshot=snapshot, findings=findings)
    if inherit is not None:
        from tracker.core.inherit import inherited_writes

        writes += inherited_writes(ctx, inherit, sha=sha, written=writes)
    return RevisionReport(
        repo_pk=repo_pk, revision_pk=revision_pk, sha=sha, snapshot=snapshot, diff=diff,
        findings=tuple(findings), summary=summarize(findings, diff, snapshot), estimate=estimate,
        dependencies_pending=dependencies_pending, analysed_at=ctx.now, advisories=tuple(writes),
        repo_updates=dict(repo_updates or {}), libraries=libraries,
    )


def event_advisory(ctx: AdvisoryContext, *, kind: str, detail: Mapping[str, Any],
                   done_revisions: Sequence[str]) -> AdvisoryWrite | None:
    """The advisory about the repo itself that an event calls for, if any."""
    advisory_kind = EVENT_ADVISORIES.get(kind)
    if advisory_kind is None:
        return None
    if advisory_kind == AdvisoryKind.HISTORY_REWRITTEN:
        revisions = list(detail.get("unreachable_revisions") or [])  # nothing pinned is gone: no advisory
    elif advisory_kind == AdvisoryKind.COMMIT_FLOOD:
        revisions = [str(detail.get("first") or ""), str(detail.get("head") or "")]
    elif advisory_kind == AdvisoryKind.RECREATED:
        revisions = sorted(ctx.commits) if done_revisions else []  # every commit under that name is suspect
    else:
        revisions = list(done_revisions)
    revisions = [r for r in revisions if SHA_RE.match(r or "")]
    if not revisions:
        return None
    advisory_id = repo_event_id(ctx.repo_id, advisory_kind, revisions)
    stored = next((a for a in ctx.advisories if a.id == advisory_id), None)
    record = repo_event_advisory(repo_id=ctx.repo_id, kind=advisory_kind.value,  # type: ignore[arg-type]
                                 detail=dict(detail), revisions=revisions, endpoint=ctx.endpoint, now=ctx.now,
                                 tracker_url=ctx.tracker_url, previous=stored.record if stored else None)
    return _write(record, revision_sha=None, kind=advisory_kind.value, fixed_sha=None, listed=revisions)
