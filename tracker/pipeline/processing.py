"""Processing one revision: read (Hub) → report (pure) → save (one transaction).

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
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from tracker.core.bounded import json_object
from tracker.core.diff import diff_revisions
from tracker.core.errors import (
    AdvisoryConflict,
    HubRateLimited,
    HubUnavailable,
    RevisionGone,
    TrackerError,
    first_line,
)
from tracker.core.estimate import compare_estimates
from tracker.core.findings import analyse_revision, libraries_of
from tracker.core.findings.rules import SeverityRules
from tracker.core.model import (
    AdvisoryKind,
    CommitSha,
    Finding,
    RawDiff,
    RepoId,
    RepoRow,
    RevisionChange,
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
from tracker.pipeline.lineage import ModelTree, TreeRead
from tracker.pipeline.ports import Clock, HubReader, Metrics, OsvLookup, PipelineSettings, Store
from tracker.pipeline.reads import AdvisoryReads
from tracker.pipeline.sources import HubSources, RevisionBudget

if TYPE_CHECKING:
    from tracker.pipeline.verification import RevisionVerifier

log = logging.getLogger("tracker.processing")  # the name operators filter logs by, not the module path

Side = tuple[str, Snapshot]  # (sha, file list)




def safetensors_headers(sources: HubSources, side: str) -> dict[str, Any]:
    """The readable safetensors headers of every weight file on one side, by path (range reads only)."""
    rev = sources.revisions.get(side)
    if rev is None:
        return {}
    read = {f.path: sources.safetensors_header(side, f.path) for f in rev[1].files if f.path.endswith(".safetensors")}
    return {path: header for path, header in read.items() if header is not None}


def estimate_from_sources(sources: HubSources, side: str, *, checkpoint_params: int | None = None,
                          read_headers: bool = True) -> Any:
    """The estimate of one side's config.json, with its safetensors headers when asked; None without a config."""
    from tracker.core.estimate import estimate

    config = json_object(sources.text(side, "config.json"))
    if config is None:
        return _estimate_from_gguf(sources, side, read_headers=read_headers, checkpoint_params=checkpoint_params)
    headers = (safetensors_headers(sources, side) or None) if read_headers else None
    return estimate(config, checkpoint_params=checkpoint_params, checkpoint_headers=headers)


def _estimate_from_gguf(sources: HubSources, side: str, *, read_headers: bool,
                        checkpoint_params: int | None) -> Any:
    """A GGUF-only repo (a llama.cpp conversion): the config and the parameter count from its header."""
    from tracker.core.estimate import estimate
    from tracker.core.estimate.architectures import config_from_gguf
    from tracker.core.findings.gguf import gguf_params

    rev = sources.revisions.get(side)
    ggufs = sorted(f.path for f in rev[1].files if f.path.lower().endswith(".gguf")) if rev else []
    for path in ggufs:
        header = sources.gguf_header(side, path)
        config = config_from_gguf(header) if header else None
        if config is not None and header is not None:
            params = gguf_params(header) if read_headers else checkpoint_params
            return estimate(config, checkpoint_params=params)
    return None


def estimate_delta(old: Any, new: Any) -> dict[str, Any]:
    """What moved between two estimates, for the advisory: {key: {"before", "after"}}."""
    if old is None or not getattr(old, "supported", False) or not new.supported:
        return {}
    before_json, after_json = old.to_json(), new.to_json()
    delta: dict[str, Any] = {}
    for key in ("params", "active_params", "checkpoint_params", "seq_len", "full_finetune_gb", "lora_gb"):
        a, b = before_json.get(key), after_json.get(key)
        if key == "checkpoint_params" and a is None:
            continue  # the old count was not read (its headers were not fetched): nothing is known to move
        if a != b:
            delta[key] = {"before": a, "after": b}
    old_cards = {c["card"]: c for c in before_json["cards"]}
    for card in after_json["cards"]:
        before = old_cards.get(card["card"], {})
        for key in ("full_batch", "lora_batch", "serve_batch"):
            if before.get(key) != card.get(key):
                delta[f"{card['card']}.{key}"] = {"before": before.get(key), "after": card.get(key)}
    return delta


@dataclass(frozen=True)
class Analysis:
    """What comparing two revisions yields: the raw diff, the findings, the estimate (when rerun)."""

    raw: RawDiff
    findings: list[Finding]
    sources: HubSources
    estimate: StoredEstimate | None
    libraries: tuple[str, ...] = ()  # what the new side is loaded with
    old_libraries: tuple[str, ...] = ()

    def diff_json(self, old_sha: str, new_sha: str) -> dict[str, Any]:
        """``tracker diff --json`` and the API's diff: the findings, also grouped by library; files; texts."""
        from tracker.core.findings.libraries import group_by_library

        return {
            "from": old_sha, "to": new_sha,
            "libraries": {"old": list(self.old_libraries), "new": list(self.libraries)},
            "findings": [f.to_json() for f in self.findings],
            "by_library": {name: [f.to_json() for f in items] for name, items in group_by_library(self.findings)},
            "files": self.raw.files, "texts": self.raw.texts,
        }


# Failures that say nothing about the content: the revision is read again later (see ``process``).
TRANSIENT = (RevisionGone, HubUnavailable, HubRateLimited)
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
    """Reads, reports and saves revisions; also ``tracker diff``, ``reanalyse`` and retried lookups."""

    def __init__(self, settings: PipelineSettings, store: Store, hub: HubReader, *, clock: Clock,
                 rules: SeverityRules, metrics: Metrics, osv: OsvLookup | None = None,
                 verifier: RevisionVerifier | None = None) -> None:
        self.settings = settings
        self.metrics = metrics
        self.verifier = verifier  # [verify] enabled: run both revisions once the report is saved
        self.store = store
        self.hub = hub
        self.clock = clock
        self.rules = rules
        self.osv = osv
        self.tree = ModelTree(store, sources=self.sources, diff_base=self.diff_base)

    # -- read -------------------------------------------------------------------------------

    def sources(self, repo_id: RepoId, *, old: Side | None, new: Side, strict: bool = False) -> HubSources:
        """The reads of one revision's analysis, with a fresh budget (``[limits] revision_*``)."""
        budget = RevisionBudget(requests=self.settings.limits.revision_requests,
                                header_bytes=self.settings.limits.revision_header_bytes,
                                cpu_seconds=self.settings.limits.revision_cpu)
        sources = HubSources(self.hub, self.store.blobs, repo_id, {"old": old, "new": new},
                             max_file_bytes=self.settings.limits.max_file_bytes,
                             max_header_bytes=self.settings.limits.max_header_bytes, now=self.clock, strict=strict,
                             budget=budget)
        limits = self.settings.limits
        sources.weight_compare = (limits.weight_compare_requests, limits.weight_compare_bytes)
        return sources

    def analyse(self, repo_id: RepoId, old: Side | None, new: Side, *,
                old_estimate: StoredEstimate | None = None, strict: bool = False) -> Analysis:
        """Raw diff, findings and estimate between two snapshots (either from the store or the Hub).

        Polling, ``reanalyse`` and ``tracker diff`` all come through here, so they agree.
        An analyser that fails becomes an ``analysis.failed`` finding, never an exception. What
        the revision's budgets left out is one ``analysis.budget_exceeded`` finding per budget.
        A ``MemoryError`` drops everything read so far (the caches go with it) and the revision
        is completed with one ``analysis.failed`` finding; nothing else of it is analysed.
        """
        try:
            return self._analyse(repo_id, old, new, old_estimate=old_estimate, strict=strict)
        except MemoryError:
            log.warning("%s@%s: out of memory while analysing; the revision is completed unanalysed",
                        repo_id, new[0][:12])
        # outside the handler, so the traceback (and every frame holding what was parsed) is gone
        failed = self.rules.finding(
            "analysis.failed", "analysis", "analysis failed: MemoryError: the revision's content did not fit in "
            "memory; nothing of it was analysed", evidence={"step": "analysis", "exception": "MemoryError"})
        return Analysis(raw=RawDiff.from_json({"files": {}, "texts": {}}), findings=[failed],
                        sources=self.sources(repo_id, old=old, new=new, strict=strict), estimate=None)

    def _analyse(self, repo_id: RepoId, old: Side | None, new: Side, *,
                 old_estimate: StoredEstimate | None, strict: bool) -> Analysis:
        sources = self.sources(repo_id, old=old, new=new, strict=strict)
        failures: list[Finding] = []
        try:
            raw = RawDiff.from_json(diff_revisions(old[1] if old else None, new[1], sources.text))
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:  # hostile content must not stop the revision
            raw = RawDiff.from_json({"files": {}, "texts": {}})
            failures.append(self._failed("diff", exc))
        change = RevisionChange(repo=repo_id, old=old[1] if old else None, new=new[1],
                                old_sha=CommitSha(old[0]) if old else None, new_sha=CommitSha(new[0]))
        try:
            findings = analyse_revision(change, sources, self.rules)
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:
            findings = []
            failures.append(self._failed("findings", exc))
        for problem in sources.problems:
            findings.append(self.rules.finding(
                "upstream.file_unreadable", "files", f"{problem['path']} ({problem['side']}): {problem['reason']}",
                path=problem["path"], evidence=problem,
            ))
        try:
            estimate_json, estimate_findings = (self._estimate(raw, sources, old is not None, old_estimate)
                                                if sources.allows("the estimate") else (None, []))
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:
            estimate_json, estimate_findings = None, [self._failed("estimate", exc)]
        try:
            libraries = libraries_of(change.new, sources, "new")
            old_libraries = libraries_of(change.old, sources, "old")
        except (*TRANSIENT, MemoryError):
            raise
        except Exception as exc:
            libraries, old_libraries = (), ()
            failures.append(self._failed("libraries", exc))
        return Analysis(raw=raw, findings=sort_findings([*findings, *estimate_findings, *failures,
                                                         *self._over_budget(sources)]),
                        sources=sources, estimate=estimate_json, libraries=libraries, old_libraries=old_libraries)

    def _over_budget(self, sources: HubSources) -> list[Finding]:
        """One ``analysis.budget_exceeded`` finding per budget the revision ran out of, naming what was skipped."""
        budget = sources.budget
        limits = {"requests": f"{budget.requests:,} range requests ([limits] revision_requests)",
                  "header_bytes": f"{budget.header_bytes:,} bytes of parsed headers ([limits] revision_header_bytes)",
                  "cpu": f"{budget.cpu_seconds:g} s of CPU time ([limits] revision_cpu)"}
        out = []
        for name, skipped in sorted(budget.skipped.items()):
            count = budget.skipped_count[name]
            shown = "; ".join(skipped[:3]) + (f"; and {count - 3:,} more" if count > 3 else "")
            out.append(self.rules.finding(
                "analysis.budget_exceeded", "analysis",
                f"the revision's budget of {limits[name]} ran out: {count:,} skipped ({shown})",
                evidence={"budget": name, "limit": limits[name], "skipped_count": count, "skipped": skipped,
                          "requests_spent": budget.spent_requests}))
        return out

    def _failed(self, step: str, exc: BaseException) -> Finding:
        log.warning("analysis step %s failed: %s", step, _one_line(exc))
        return self.rules.finding("analysis.failed", "analysis", f"{step} failed: {_one_line(exc)}",
                                  evidence={"step": step, "exception": type(exc).__name__,
                                            "reason": _one_line(exc)})

    def _estimate(self, raw: RawDiff, sources: HubSources, has_old: bool,
                  old_estimate: StoredEstimate | None) -> tuple[StoredEstimate | None, list[Finding]]:
        """Rerun the estimator when the config or the weights moved (and on the first revision)."""
        if has_old and not any(p == "config.json" or p.endswith((".safetensors", ".gguf")) for p in raw.touched()):
            return None, []
        new = estimate_from_sources(sources, "new")
        if new is None:
            return None, []
        old = None
        if has_old:
            ckpt = old_estimate.checkpoint_params if old_estimate else None
            old = estimate_from_sources(sources, "old", checkpoint_params=ckpt, read_headers=False)
        findings = compare_estimates(old, new, self.rules)
        return StoredEstimate.from_json({**new.to_json(), "delta": estimate_delta(old, new)}), findings

    def dependencies(self, raw: RawDiff, sources: HubSources, baseline: bool) -> tuple[list[Finding], bool]:
        """Known vulnerabilities of the packages a revision asks for (OSV.dev); (findings, retry later)."""
        if self.osv is None:
            return [], False
        touched = raw.touched("added", "changed")
        if not baseline and not any(p in ("requirements.txt", "config.json") or p.endswith(".py") for p in touched):
            return [], False
        from tracker.core.advisory.dependencies import (
            collect_dependencies,
            unpinned_findings,
            vulnerability_findings,
        )

        snapshot = sources.revisions["new"][1]  # type: ignore[index]
        code = {f.path: sources.text("new", f.path) or b"" for f in snapshot.files if f.path.endswith(".py")}
        scan = collect_dependencies(requirements_txt=sources.text("new", "requirements.txt"),
                                    config=json_object(sources.text("new", "config.json")), remote_code=code)
        if not scan.queries:
            return unpinned_findings(scan, self.rules), False
        result = self.osv.querybatch([(q[0], q[1], q[2]) for q in scan.queries])
        findings, _ = vulnerability_findings(scan, result.vulns, self.rules)
        return findings + unpinned_findings(scan, self.rules), not result.ok

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
        analysis = self.analyse(repo.repo_id, old, (revision.sha, snapshot),
                                old_estimate=base.estimate if base else None, strict=strict)
        unsafe = [self.rules.finding("upstream.unsafe_path", "files",
                                     f"{r.path!r}: {r.reason}; left out and never requested",
                                     path=r.path, evidence={"reason": r.reason}) for r in rejected]
        try:
            dependency_findings, retry = self.dependencies(analysis.raw, analysis.sources, old is None)
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
            analysis = self.analyse(repo.repo_id, old, (revision.sha, revision.snapshot),
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
        if self.osv is None:
            return 0
        done = 0
        for revision in self.store.revisions.of_repo(repo.pk, status=RevisionStatus.DONE, dependencies_pending=True):
            if not revision.dependencies_pending or revision.snapshot is None:
                continue
            base = self.diff_base(repo, revision)
            old = (base.sha, base.snapshot) if base and base.snapshot is not None else None
            sources = self.sources(repo.repo_id, old=old, new=(revision.sha, revision.snapshot))
            raw = revision.diff or RawDiff.from_json({})
            found, still_pending = self.dependencies(raw, sources, revision.baseline or base is None)
            if still_pending:
                continue
            kept = [f for f in revision.findings or () if not f.code.startswith("dependencies.")]
            self._rebuild(repo, revision, sort_findings([*kept, *found]), revision.estimate,
                          dependencies_pending=False)
            done += 1
        return done
