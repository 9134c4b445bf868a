"""Processing one revision: read and analyse (``tracker/pipeline/analysis.py``) → report (pure) → save (one transaction).

``Processor.process`` is the only way a revision becomes done. Everything the revision
implies — findings, estimate and its delta, advisories created, updated, withdrawn or
undone, index rows, and (through the store's outbox seam) the alerts they cause — is
written by one ``save_revision_report`` call, so a crash anywhere leaves either a
pending revision (read again by the next poll) or a done one with all of it.
Any exception while analysing becomes an ``analysis.failed`` finding: bad content
never leaves a revision pending.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from tracker.core.errors import (
    AdvisoryConflict,
    HubRateLimited,
    HubUnavailable,
    RevisionGone,
    TrackerError,
    first_line,
)
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import (
    AdvisoryKind,
    Finding,
    RawDiff,
    RepoRow,
    RevisionRow,
    RevisionStatus,
    Snapshot,
    StoredEstimate,
    sort_findings,
)
from tracker.core.report import (
    AdvisoryContext,
    AdvisoryWrite,
    Analysed,
    RevisionReport,
    revision_advisories,
    revision_report,
)
from tracker.core.store_types import AdvisoriesRead
from tracker.pipeline.analysis import Analysis, RevisionAnalyst
from tracker.pipeline.lineage import ModelTree, TreeRead
from tracker.pipeline.ports import Clock, HubReader, Metrics, PipelineSettings, Store
from tracker.pipeline.reads import AdvisoryReads

if TYPE_CHECKING:
    from tracker.pipeline.verification import RevisionVerifier

log = logging.getLogger("tracker.processing")  # the name operators filter logs by, not the module path


SAVE_ATTEMPTS = 3  # a save whose advisories another process changed meanwhile is recomputed this often, at most

T = TypeVar("T")


def seen_of(ctx: AdvisoryContext) -> dict[str, datetime | None]:
    """The advisories a report was computed from, as read (what its save checks they still are)."""
    return {a.id: a.modified for a in ctx.advisories}


def save_checked(what: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` (read, compute, save) again while another writer changed its advisories first.

    Each conflict means someone else's save went through, so the next read sees it; past
    ``SAVE_ATTEMPTS`` the last conflict is raised, with what was being saved.
    """
    for tries in range(1, SAVE_ATTEMPTS):
        try:
            return attempt()
        except AdvisoryConflict as exc:
            log.info("%s: %s; reading again (attempt %d of %d)", what, first_line(exc), tries, SAVE_ATTEMPTS)
    try:
        return attempt()
    except AdvisoryConflict as exc:
        raise AdvisoryConflict(f"{what}: gave up after {SAVE_ATTEMPTS} attempts, the advisories kept changing "
                               f"under it ({first_line(exc)}); it is tried again at the next poll") from exc


def _one_line(exc: BaseException) -> str:
    """The error's class and its first line, for findings and the revision's last error."""
    return f"{type(exc).__name__}: {first_line(exc)[:300]}" if str(exc).strip() else type(exc).__name__


class Processor:
    """Processes revisions: its RevisionAnalyst reads and analyses them, it reports and saves; also ``reanalyse`` and retried lookups."""

    def __init__(self, settings: PipelineSettings, store: Store, hub: HubReader, *, clock: Clock,
                 rules: SeverityRules, metrics: Metrics, analyst: RevisionAnalyst,
                 verifier: RevisionVerifier | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.verifier = verifier  # [verify] enabled: run both revisions once the report is saved
        self.store = store
        self.hub = hub
        self.clock = clock
        self.rules = rules
        self.analyst = analyst  # reads and analyses (tracker/pipeline/analysis.py); the processor reports and saves
        self.tree = ModelTree(store, sources=analyst.sources, diff_base=self.diff_base)

    # -- the stored side of a comparison ----------------------------------------------------

    def diff_base(self, repo: RepoRow, revision: RevisionRow) -> RevisionRow | None:
        """The done revision a stored one is compared with (skipping rows rewritten away before being read)."""
        if revision.parent_sha is None:
            return None
        parent = self.store.revisions.get(repo.pk, revision.parent_sha)
        while parent is not None and parent.status != RevisionStatus.DONE and parent.parent_sha:
            parent = self.store.revisions.get(repo.pk, parent.parent_sha)
        return parent if parent is not None and parent.status == RevisionStatus.DONE else None

    def context(self, repo: RepoRow, *, now: datetime, sha: str | None = None,
                reads: AdvisoryReads | None = None) -> AdvisoryContext:
        """What the report needs from the store about a repo, read once per revision.

        Only what the revision is compared with is read, never the whole history: its own
        advisories, the open risks and inherited advisories, the labels of their commits, and the
        file lists of the revisions that introduced an open risk and those they were diffed
        against (what the undo check compares). ``sha=None``: a repo event, which reads every
        advisory of the repo and every commit. ``reads`` records the advisories read (for the save's check).
        """
        reads = reads if reads is not None else AdvisoryReads()
        if sha is None:
            advisories = self.store.advisories.find(repo_pk=repo.pk, versions=False)
            commits: list[str] = sorted(self.store.revisions.commit_graph(repo.pk))
        else:
            advisories = self.store.advisories.of_revision(repo.pk, sha)
            commits = []
        snapshots: dict[str, Snapshot] = {}
        diff_bases: dict[str, str | None] = {}
        for adv in advisories:
            if adv.kind != AdvisoryKind.RISK or adv.withdrawn or adv.fixed_sha or adv.revision_sha is None:
                continue
            introduced = self.store.revisions.get(repo.pk, adv.revision_sha)
            if introduced is None:
                continue
            diff_bases[introduced.sha] = introduced.parent_sha
            before = self.store.revisions.get(repo.pk, introduced.parent_sha) if introduced.parent_sha else None
            for row in (introduced, before):
                if row is not None and row.snapshot is not None:
                    snapshots[row.sha] = row.snapshot
        reach = self.store.advisories.reach(repo.pk, [sha or "", *(a.revision_sha or "" for a in advisories)])
        return AdvisoryContext(
            repo_id=repo.repo_id, endpoint=self.hub.endpoint, tracker_url=self.settings.public_url,
            min_severity=self.settings.advisories.min_severity, advisories=advisories, now=now, reach=reach,
            snapshots=snapshots, diff_bases=diff_bases, commits=commits,
            inherited_ids=reads.kind(repo.pk, AdvisoryKind.INHERITED.value, self.store.advisories.versions_of_kind(
                repo.pk, AdvisoryKind.INHERITED.value)),
        )

    # -- process ----------------------------------------------------------------------------

    def process_pending(self, repo: RepoRow, *, progress: Callable[[int], Any] | None = None,
                        should_stop: Callable[[], bool] = lambda: False, backlog: int | None = None) -> int:
        """Process the repo's pending revisions, oldest first; returns how many were completed.

        A commit flood's intermediate revisions come after every other one, and at most
        ``backlog`` of them per call (default ``[poll] backlog_per_poll``): the head and any
        newer commit are read first, and the rest a few at a time, poll after poll.
        """
        done = 0
        allowance = self.settings.poll.backlog_per_poll if backlog is None else backlog
        for revision in self.store.revisions.pending(repo.pk):
            if should_stop():
                break
            if revision.backlog:
                if allowance <= 0:
                    break
                allowance -= 1
            try:
                if self.process(repo, revision):
                    done += 1
            except RevisionGone as exc:
                # Rewritten away before we read it: keep the row, say why, move on.
                self.store.revisions.mark(revision.pk, RevisionStatus.UNREACHABLE)
                log.warning("%s@%s unreachable: %s", repo.repo_id, revision.sha[:12], exc)
                continue
            if progress:
                progress(1)
        return done

    def process(self, repo: RepoRow, revision: RevisionRow) -> bool:
        """Read, report and save one pending revision; False when another process completed it first.

        Transient Hub failures (down, rate limited, the poll's deadline) propagate and leave the
        revision pending, counted; after ``poll.max_attempts`` of them it is completed with what
        could be read (the rest become "unreadable" findings), or marked unreachable when even its
        file list cannot be read, so that later revisions are not held behind it. Anything wrong
        with the content itself is a finding on the revision.
        """
        strict = revision.attempts + 1 < self.settings.poll.max_attempts
        try:
            return self._process(repo, revision, strict=strict)
        except (HubUnavailable, HubRateLimited) as exc:
            attempts = self.store.revisions.note_attempt(revision.pk, _one_line(exc))
            if attempts >= self.settings.poll.max_attempts and not strict:
                self.store.revisions.mark(revision.pk, RevisionStatus.UNREACHABLE)
                log.warning("%s@%s: given up after %d attempts: %s", repo.repo_id, revision.sha[:12], attempts,
                            _one_line(exc))
            raise

    def _process(self, repo: RepoRow, revision: RevisionRow, *, strict: bool) -> bool:
        snapshot, rejected = self.hub.snapshot_checked(repo.repo_id, revision.sha)
        base = self.diff_base(repo, revision)
        old = (base.sha, base.snapshot) if base and base.snapshot is not None else None
        analysis = self.analyst.analyse(repo.repo_id, old, (revision.sha, snapshot),
                                old_estimate=base.estimate if base else None, strict=strict)
        unsafe = [self.rules.finding("upstream.unsafe_path", "files",
                                     f"{r.path!r}: {r.reason}; left out and never requested",
                                     path=r.path, evidence={"reason": r.reason}) for r in rejected]
        try:
            dependency_findings, retry = self.analyst.dependencies(analysis.raw, analysis.sources, old is None)
        except TrackerError as exc:
            dependency_findings, retry = [], True
            log.warning("%s@%s: dependency lookups failed: %s", repo.repo_id, revision.sha[:12], exc)
        findings = sort_findings([*analysis.findings, *dependency_findings, *unsafe])
        now = self.clock()

        def save() -> bool:
            report, seen = self._report(repo, revision, replace(analysis, findings=findings), now=now,
                                        snapshot=snapshot, prior=base, retry=retry, strict=strict)
            return self.store.revisions.save_report(report, seen=seen)

        saved = save_checked(f"{repo.repo_id}@{revision.sha[:12]}", save)
        if saved:
            self.metrics.revision_saved(finding_severities=[f.severity.value for f in findings], committed_at=revision.date,
                                   read_at=now, baseline=revision.baseline or old is None)
            if self.verifier is not None and self.verifier.wanted(findings, old[0] if old else None):
                self.verifier.after_save(repo, revision, old[0] if old else "")  # outside the transaction
        return saved

    def _report(self, repo: RepoRow, revision: RevisionRow, analysis: Analysis, *, now: datetime,
                snapshot: Snapshot, prior: RevisionRow | None, retry: bool, strict: bool
                ) -> tuple[RevisionReport, AdvisoriesRead]:
        """The revision's report, from its analysis with every finding (dependencies and unsafe paths too),
        and what it read of the advisories (its own, its inherited ones, its base's and derivatives').

        ``prior`` is the revision it was compared with; without a snapshot it is a first revision.
        """
        compared = prior is not None and prior.snapshot is not None
        reads = AdvisoryReads()
        ctx = self.context(repo, now=now, sha=revision.sha, reads=reads)
        reads.rows(ctx.advisories)
        base_id, updates = self.tree.declared_base(repo, analysis.sources, analysis.raw, snapshot,
                                                   baseline=not compared)
        read = TreeRead(ctx=ctx, snapshot=snapshot, prior=prior if compared else None, strict=strict, reads=reads)
        inherit = self.tree.inputs(repo, read, sources=analysis.sources, raw=analysis.raw, base_id=base_id,
                                   relation_changed=bool(updates))
        analysed = Analysed(snapshot=snapshot, findings=analysis.findings, diff=analysis.raw if compared else None,
                            estimate=analysis.estimate, dependencies_pending=retry, libraries=analysis.libraries)
        return revision_report(ctx, revision, analysed, inherit=inherit, repo_updates=updates), reads.seen()

    # -- re-analysis ------------------------------------------------------------------------

    def _rebuild(self, repo: RepoRow, revision: RevisionRow, findings: Sequence[Finding],
                 estimate: StoredEstimate | None, *, dependencies_pending: bool | None,
                 libraries: Sequence[str] | None = None) -> None:
        """Store re-analysed findings and the advisories they imply, in one transaction."""
        now = self.clock()

        def save() -> None:
            writes: list[AdvisoryWrite] = []
            seen: dict[str, datetime | None] = {}
            if not revision.baseline:
                ctx = self.context(repo, now=now, sha=revision.sha)
                writes = revision_advisories(ctx, revision, findings, estimate.delta if estimate else None)
                seen = seen_of(ctx)
            self.store.revisions.save_reanalysis(revision.pk, repo.pk, findings=findings, estimate=estimate, now=now,
                                                 dependencies_pending=dependencies_pending, advisories=writes,
                                                 libraries=libraries, seen=seen)

        save_checked(f"{repo.repo_id}@{revision.sha[:12]}", save)

    def reanalyse(self, repo: RepoRow) -> int:
        """Re-run analysis of every stored revision with today's rules; advisories are rebuilt or withdrawn.

        Snapshots and file contents come from the store, so this costs the Hub
        nothing but the safetensors headers it needs again.
        """
        changed = 0
        for revision in self.store.revisions.of_repo(repo.pk, status=RevisionStatus.DONE):
            if revision.snapshot is None:
                continue
            base = self.diff_base(repo, revision)
            old = (base.sha, base.snapshot) if base and base.snapshot is not None else None
            analysis = self.analyst.analyse(repo.repo_id, old, (revision.sha, revision.snapshot),
                                    old_estimate=base.estimate if base else None)
            kept = [f for f in revision.findings or () if f.category == "dependencies"]
            findings = sort_findings([*analysis.findings, *kept])
            if [f.to_json() for f in findings] != [f.to_json() for f in revision.findings or ()]:
                changed += 1
            self._rebuild(repo, revision, findings, analysis.estimate or revision.estimate,
                          dependencies_pending=None, libraries=analysis.libraries)
        return changed

    def retry_dependencies(self, repo: RepoRow) -> int:
        """Redo the OSV.dev lookups that failed earlier; findings and advisories follow. Returns how many."""
        if self.analyst.osv is None:
            return 0
        done = 0
        for revision in self.store.revisions.of_repo(repo.pk, status=RevisionStatus.DONE, dependencies_pending=True):
            if not revision.dependencies_pending or revision.snapshot is None:
                continue
            base = self.diff_base(repo, revision)
            old = (base.sha, base.snapshot) if base and base.snapshot is not None else None
            sources = self.analyst.sources(repo.repo_id, old=old, new=(revision.sha, revision.snapshot))
            raw = revision.diff or RawDiff.from_json({})
            found, still_pending = self.analyst.dependencies(raw, sources, revision.baseline or base is None)
            if still_pending:
                continue
            kept = [f for f in revision.findings or () if not f.code.startswith("dependencies.")]
            self._rebuild(repo, revision, sort_findings([*kept, *found]), revision.estimate,
                          dependencies_pending=False)
            done += 1
        return done
