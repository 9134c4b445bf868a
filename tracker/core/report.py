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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.core.advisory import classify, repo_event_id
from tracker.core.advisory.build import (
    RepoEvent,
    RevisionFacts,
    record_fixed,
    repo_event_record,
    revision_records,
)
from tracker.core.diff import summarize_files
from tracker.core.inherit import InheritInputs, inherited_writes
from tracker.core.model import (
    SHA_RE,
    AdvisoryKind,
    Finding,
    RawDiff,
    RevisionRow,
    Severity,
    Snapshot,
    StoredEstimate,
)
from tracker.core.writes import AdvisoryContext, AdvisoryWrite, advisory_write

__all__ = [
    "EVENT_ADVISORIES",
    "RECHECKED_RISKS",
    "AdvisoryContext",
    "AdvisoryWrite",
    "Analysed",
    "EventReport",
    "RevisionReport",
    "event_advisory",
    "revision_advisories",
    "revision_report",
    "summarize",
    "undone_risks",
]

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
class RevisionReport:
    """What processing one revision stores, in one transaction."""

    repo_pk: int
    revision_pk: int
    sha: str
    snapshot: Snapshot
    diff: RawDiff | None
    findings: tuple[Finding, ...]
    summary: str
    estimate: StoredEstimate | None
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


@dataclass(frozen=True)
class Analysed:
    """What reading and analysing one revision gave: the input of its report."""

    snapshot: Snapshot
    findings: Sequence[Finding]
    diff: RawDiff | None = None  # None: it was compared with nothing (a baseline)
    estimate: StoredEstimate | None = None
    dependencies_pending: bool = False
    libraries: tuple[str, ...] = ()


def revision_advisories(ctx: AdvisoryContext, revision: RevisionRow, findings: Sequence[Finding],
                        estimate_delta: Mapping[str, Any] | None) -> list[AdvisoryWrite]:
    """Build, rebuild or withdraw the advisories of one analysed revision (0, 1 or 2 records)."""
    sha = revision.sha
    related = sorted({i for f in findings if f.code == "dependencies.known_vulnerability"
                      for i in (f.evidence.get("ids") or [])})
    facts = RevisionFacts(repo_id=ctx.repo_id, revision=sha, parent=revision.parent_sha, revision_date=revision.date,
                          findings=list(findings), endpoint=ctx.endpoint, tracker_url=ctx.tracker_url,
                          estimate_delta=estimate_delta, related=related, min_severity=ctx.min_severity)
    previous = [a.record for a in ctx.advisories if a.revision_sha == sha]
    writes = []
    for record in revision_records(facts, parents={}, now=ctx.now, previous=previous):
        kind = str(record.kind)
        fixes = record.fixes
        writes.append(advisory_write(record, revision_sha=sha, kind=kind,
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
        advisory = adv.record
        risky = advisory.specific.findings
        if risky and all(_undone(f, then, before, now_files, findings_here) for f in risky):
            record = record_fixed(advisory, sha, ctx.now, affected_commits=())
            writes.append(advisory_write(record, revision_sha=adv.revision_sha, kind=adv.kind, fixed_sha=sha))
    return writes


def revision_report(ctx: AdvisoryContext, revision: RevisionRow, analysed: Analysed, *,
                    inherit: InheritInputs | None = None,
                    repo_updates: Mapping[str, Any] | None = None) -> RevisionReport:
    """Everything a newly read revision implies: its results, its advisories, risks it undoes, the index.

    A baseline (or a revision compared with nothing) gets no advisory of its own. ``inherit``: along
    the model tree (tracker/core/inherit.py), the inherited advisories this revision creates or
    closes, its own (as a derivative) and its watched derivatives' (as a base).
    """
    sha, findings, snapshot = revision.sha, analysed.findings, analysed.snapshot
    writes: list[AdvisoryWrite] = []
    if not (revision.baseline or analysed.diff is None):
        writes += revision_advisories(ctx, revision, findings, analysed.estimate.delta if analysed.estimate else None)
    writes += undone_risks(ctx, sha=sha, snapshot=snapshot, findings=findings)
    if inherit is not None:
        writes += inherited_writes(ctx, inherit, sha=sha, written=writes)
    return RevisionReport(
        repo_pk=revision.repo_pk, revision_pk=revision.pk, sha=sha, snapshot=snapshot, diff=analysed.diff,
        findings=tuple(findings), summary=summarize(findings, analysed.diff, snapshot), estimate=analysed.estimate,
        dependencies_pending=analysed.dependencies_pending, analysed_at=ctx.now, advisories=tuple(writes),
        repo_updates=dict(repo_updates or {}), libraries=analysed.libraries,
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
    event = RepoEvent(repo_id=ctx.repo_id, kind=advisory_kind.value,  # type: ignore[arg-type]
                      detail=dict(detail), revisions=revisions, endpoint=ctx.endpoint, tracker_url=ctx.tracker_url)
    record = repo_event_record(event, now=ctx.now, previous=stored.record if stored else None)
    return advisory_write(record, revision_sha=None, kind=advisory_kind.value, fixed_sha=None, listed=revisions)
