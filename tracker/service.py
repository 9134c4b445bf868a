"""The Tracker: poll a repo, read every new revision in order, snapshot, diff, analyse, store.

Orchestration only: Hub I/O goes through ``HubClient``, persistence through
``SqlStore``, meaning through the pure ``diff`` and ``findings`` modules.

Exactly once in effect: a poll first records the newly listed commits as
``pending`` rows (one transaction, which also moves the repo's
``last_seen_sha``), then processes pending rows oldest first, each finished
in one transaction that is conditional on the row still being pending. A
crash anywhere leaves either a pending row (processed by the next poll) or a
done one (never processed again).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tracker.diff import diff_revisions, same_content, summarize_files
from tracker.errors import (
    HubError,
    HubRateLimited,
    HubUnavailable,
    RepoDisabled,
    RepoGated,
    RepoGone,
    RevisionGone,
)
from tracker.estimate import compare_estimates
from tracker.findings import analyse_revision
from tracker.findings.rules import SeverityRules
from tracker.hub import HubClient
from tracker.model import (
    SHA_RE,
    Commit,
    CommitSha,
    Finding,
    RepoId,
    RevisionChange,
    Severity,
    Snapshot,
    sort_findings,
)
from tracker.settings import Settings
from tracker.sources import HubSources
from tracker.store import SqlStore
from tracker.store.store import EventRow, RepoRow, RevisionRow

log = logging.getLogger(__name__)


def _json_or_none(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def estimate_from_sources(sources: HubSources, side: str, *, checkpoint_params: int | None = None,
                          read_headers: bool = True) -> Any:
    """The estimate of one side's config.json, with its safetensors headers when asked; None without a config."""
    from tracker.estimate import estimate

    config = _json_or_none(sources.text(side, "config.json"))
    if not isinstance(config, dict):
        return None
    headers = (safetensors_headers(sources, side) or None) if read_headers else None
    try:
        return estimate(config, checkpoint_params=checkpoint_params, checkpoint_headers=headers)
    except Exception:
        log.exception("estimate failed")
        return None


def safetensors_headers(sources: HubSources, side: str) -> dict[str, Any]:
    """The readable safetensors headers of every weight file on one side, by path (range reads only)."""
    rev = sources.revisions.get(side)
    if rev is None:
        return {}
    read = {f.path: sources.safetensors_header(side, f.path) for f in rev[1].files if f.path.endswith(".safetensors")}
    return {path: header for path, header in read.items() if header is not None}


def worst_severity(findings: Iterable[Finding]) -> str | None:
    worst = Severity.worst(f.severity for f in findings)
    return worst.value if worst else None


def estimate_delta(old: Any, new: Any) -> dict[str, Any]:
    """What moved between two estimates, for the advisory: {key: {"before", "after"}}."""
    if old is None or not getattr(old, "supported", False) or not new.supported:
        return {}
    before_json, after_json = old.to_json(), new.to_json()
    delta: dict[str, Any] = {}
    for key in ("params", "active_params", "checkpoint_params", "seq_len", "full_finetune_gb", "lora_gb"):
        a, b = before_json.get(key), after_json.get(key)
        if a != b:
            delta[key] = {"before": a, "after": b}
    old_cards = {c["card"]: c for c in before_json["cards"]}
    for card in after_json["cards"]:
        before = old_cards.get(card["card"], {})
        for key in ("full_batch", "lora_batch", "serve_batch"):
            if before.get(key) != card.get(key):
                delta[f"{card['card']}.{key}"] = {"before": before.get(key), "after": card.get(key)}
    return delta


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Analysis:
    """What comparing two revisions yields: the raw diff, the findings, the estimate (when rerun)."""

    raw: dict[str, Any]
    findings: list[Finding]
    sources: HubSources
    estimate: dict[str, Any] | None


@dataclass
class PollResult:
    """What one poll of one repo did, for the CLI and the daemon's log."""

    repo: RepoId
    status: str = "unchanged"  # unchanged|new|baseline|deferred|gone|gated|disabled|error
    new_revisions: int = 0
    processed: int = 0
    events: list[str] = field(default_factory=list)
    error: str | None = None

    def line(self) -> str:
        text = f"{self.repo}: {self.status}"
        if self.new_revisions:
            text += f", {self.new_revisions} new revision(s)"
        if self.processed:
            text += f", {self.processed} analysed"
        if self.events:
            text += f" [{', '.join(self.events)}]"
        if self.error:
            text += f": {self.error}"
        return text


class Tracker:
    def __init__(
        self,
        settings: Settings,
        store: SqlStore,
        hub: HubClient,
        *,
        clock: Callable[[], datetime] = utcnow,
        rules: SeverityRules | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.hub = hub
        self.clock = clock
        self.rules = rules or SeverityRules.default().with_overrides(settings.severity)
        self.after_revision: list[Callable[[RepoRow, RevisionRow], None]] = []  # hooks: advisories, alerts
        self.after_event: list[Callable[[RepoRow, EventRow], None]] = []
        self.osv: Any | None = None  # an OsvClient when dependency lookups are on
        self.advisor: Any | None = None  # set by app.make_tracker
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # -- watch list -------------------------------------------------------------------------

    def sync_config_watches(self) -> None:
        """Add the repos listed in the config file (never removes what users added)."""
        known = {r.repo_id for r in self.store.list_watches()}
        for spec in self.settings.watch:
            if spec.repo not in known:
                self.store.add_watch(spec.repo, branch=spec.branch, every=spec.every, now=self.clock())

    # -- polling ----------------------------------------------------------------------------

    def poll(self, repo_ids: Iterable[str] | None = None, *, backfill: int = 0,
             progress: Callable[[int], Any] | None = None) -> list[PollResult]:
        rows = self.store.list_watches()
        if repo_ids is not None:
            wanted = list(repo_ids)
            by_id = {r.repo_id: r for r in rows}
            missing = [r for r in wanted if r not in by_id]
            if missing:
                raise KeyError(f"not watched: {', '.join(missing)} (add with `tracker watch add`)")
            rows = [by_id[r] for r in wanted]
        return [self.poll_repo(row.repo_id, backfill=backfill, progress=progress) for row in rows]

    def _repo_lock(self, repo_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(repo_id, threading.Lock())

    def poll_repo(self, repo_id: str, *, backfill: int = 0,
                  progress: Callable[[int], Any] | None = None) -> PollResult:
        # One poll per repo at a time in this process (a webhook may arrive during a scheduled poll);
        # across processes the store's unique keys and conditional updates keep it exactly once.
        with self._repo_lock(repo_id):
            return self._poll_repo(repo_id, backfill=backfill, progress=progress)

    def _poll_repo(self, repo_id: str, *, backfill: int,
                   progress: Callable[[int], Any] | None) -> PollResult:
        repo = self.store.get_repo(repo_id)
        if repo is None:
            raise KeyError(f"not watched: {repo_id}")
        result = PollResult(repo=repo.repo_id)
        now = self.clock()
        if repo.defer_until and repo.defer_until > now:
            result.status = "deferred"
            result.error = f"rate limited until {repo.defer_until.isoformat(timespec='seconds')}"
            return result
        try:
            self._poll(repo, result, backfill=backfill, progress=progress)
        except HubRateLimited as exc:
            wait = exc.retry_after or self.settings.poll_every
            self.store.update_repo(repo.pk, defer_until=now + timedelta(seconds=wait), last_error=str(exc))
            result.status, result.error = "deferred", str(exc)
        except (RepoGated, RepoGone, RepoDisabled) as exc:
            self._repo_unreachable(repo, exc, result)
        except HubError as exc:
            self.store.update_repo(repo.pk, last_error=str(exc), last_polled_at=now)
            result.status, result.error = "error", str(exc)
        else:
            self.store.update_repo(repo.pk, last_error=None, defer_until=None, last_polled_at=self.clock())
        return result

    def _event(self, repo: RepoRow, kind: str, key: str, detail: dict[str, Any], result: PollResult,
               sha: str | None = None) -> None:
        now = self.clock()
        if self.store.add_event(repo.pk, kind, dedupe_key=key, detail=detail, revision_sha=sha, now=now):
            result.events.append(kind)
            log.warning("%s: %s %s", repo.repo_id, kind, detail)
            event = EventRow(pk=0, repo_id=repo.repo_id, kind=kind, revision_sha=sha, detail=detail, created_at=now)
            for hook in self.after_event:
                hook(repo, event)

    def _repo_unreachable(self, repo: RepoRow, exc: HubError, result: PollResult) -> None:
        kind, state = (
            ("gated", "gated") if isinstance(exc, RepoGated)
            else ("disabled", "disabled") if isinstance(exc, RepoDisabled)
            else ("deleted", "gone")
        )
        # One event per transition: the key changes only when the repo comes back and goes again.
        if repo.state != state:
            self._event(repo, kind, f"{kind}:{repo.last_seen_sha}:{self.clock().isoformat()}",
                        {"reason": str(exc), "last_seen_sha": repo.last_seen_sha}, result)
        self.store.update_repo(repo.pk, state=state, last_error=str(exc), last_polled_at=self.clock())
        result.status, result.error = state, str(exc)

    def _poll(self, repo: RepoRow, result: PollResult, *, backfill: int,
              progress: Callable[[int], Any] | None) -> None:
        head = self.hub.head(repo.repo_id, repo.branch)
        if head.renamed_to and head.renamed_to != repo.renamed_to:
            self._event(repo, "renamed", f"renamed:{head.renamed_to}",
                        {"from": repo.repo_id, "to": head.renamed_to}, result)
            self.store.update_repo(repo.pk, renamed_to=head.renamed_to)
        if repo.state != "active" or repo.hub_uid is None:
            self._check_identity(repo, result)
            repo = self.store.get_repo(repo.repo_id)  # type: ignore[assignment]
            assert repo is not None
        if head.sha == repo.last_seen_sha:
            result.processed = self.process_pending(repo, progress=progress)
            self.retry_dependencies(repo)
            return

        if repo.last_seen_sha is None:
            listing = self.hub.commits_since(repo.repo_id, repo.branch, None, limit=backfill + 1)
            commits = list(listing.commits)
            if not commits:
                raise HubUnavailable(f"{repo.repo_id}: the Hub listed no commits on {repo.branch!r}")
            result.new_revisions = self.store.record_listing(repo, commits, parent=None, baseline=True)
            result.status = "baseline"
        else:
            listing = self.hub.commits_since(repo.repo_id, repo.branch, repo.last_seen_sha)
            if listing.reached_since:
                commits = list(listing.commits)
                parent = repo.last_seen_sha
            else:
                commits, parent = self._history_rewritten(repo, listing.commits, head.sha, result)
            result.new_revisions = self.store.record_listing(repo, commits, parent=parent, baseline=False)
            result.status = "new" if result.new_revisions else "unchanged"
        repo = self.store.get_repo(repo.repo_id)  # type: ignore[assignment]
        assert repo is not None
        result.processed = self.process_pending(repo, progress=progress)
        self.retry_dependencies(repo)

    def _check_identity(self, repo: RepoRow, result: PollResult) -> None:
        """Learn the Hub's internal id; a different one under the same name is a re-created repo."""
        info = self.hub.repo_info(repo.repo_id)
        if repo.hub_uid and info.uid and info.uid != repo.hub_uid:
            self._event(repo, "recreated", f"recreated:{info.uid}",
                        {"old_uid": repo.hub_uid, "new_uid": info.uid, "last_seen_sha": repo.last_seen_sha}, result)
        elif repo.state != "active":
            self._event(repo, "restored", f"restored:{repo.state}:{self.clock().isoformat()}",
                        {"previous_state": repo.state}, result)
        self.store.update_repo(repo.pk, hub_uid=info.uid or repo.hub_uid, state="active")

    def _history_rewritten(self, repo: RepoRow, listed: tuple[Commit, ...], head_sha: str,
                           result: PollResult) -> tuple[list[Commit], CommitSha | None]:
        """The last revision read is gone from the branch: find where the new history forks.

        Returns the commits to read and the revision to diff the first against.
        Content hashes, not commit ids, decide whether anything really changed.
        """
        stored = {r.sha: r for r in self.store.revisions(repo.pk)}
        listed_shas = [c.sha for c in listed]
        fork = next((i for i in range(len(listed) - 1, -1, -1) if listed_shas[i] in stored), None)
        unreachable = sorted(sha for sha in stored if sha not in set(listed_shas))
        last_done = self.store.last_done_revision(repo.pk)
        new_snapshot = self.hub.snapshot(repo.repo_id, head_sha)
        same = bool(last_done and last_done.snapshot and same_content(last_done.snapshot, new_snapshot))
        self._check_identity(repo, result)
        self._event(
            repo, "history_rewritten", f"rewrite:{repo.last_seen_sha}->{head_sha}",
            {"previous_head": repo.last_seen_sha, "new_head": head_sha, "same_content": same,
             "unreachable_revisions": unreachable, "new_commits": len(listed)},
            result, sha=head_sha,
        )
        if fork is not None:
            return list(listed[fork + 1:]), CommitSha(listed_shas[fork])
        # Nothing in common: read only the new head, diffed against the last revision we read.
        return [listed[-1]] if listed else [], last_done.sha if last_done else None

    # -- processing -------------------------------------------------------------------------

    def process_pending(self, repo: RepoRow, *, progress: Callable[[int], Any] | None = None) -> int:
        done = 0
        for revision in self.store.pending_revisions(repo.pk):
            try:
                self.process_revision(repo, revision)
            except RevisionGone as exc:
                # Rewritten away before we read it: keep the row, say why, move on.
                self.store.mark_revision(revision.pk, "unreachable")
                log.warning("%s@%s unreachable: %s", repo.repo_id, revision.sha[:12], exc)
                continue
            done += 1
            if progress:
                progress(1)
        return done

    def _parent(self, repo: RepoRow, revision: RevisionRow) -> RevisionRow | None:
        if revision.parent_sha is None:
            return None
        parent = self.store.get_revision(repo.pk, revision.parent_sha)
        while parent is not None and parent.status != "done" and parent.parent_sha:
            parent = self.store.get_revision(repo.pk, parent.parent_sha)  # skip unreachable rows
        return parent if parent is not None and parent.status == "done" else None

    def _sources(self, repo_id: RepoId, *, old: tuple[str, Snapshot] | None,
                 new: tuple[str, Snapshot]) -> HubSources:
        return HubSources(self.hub, self.store, repo_id, {"old": old, "new": new},
                          max_file_bytes=self.settings.max_file_bytes,
                          max_header_bytes=self.settings.max_header_bytes, now=self.clock)

    def _sides(self, repo: RepoRow, revision: RevisionRow
               ) -> tuple[RevisionRow | None, tuple[str, Snapshot] | None]:
        """The revision a stored one is compared with, and that revision's side of the comparison."""
        parent = self._parent(repo, revision)
        old = (parent.sha, parent.snapshot) if parent and parent.snapshot is not None else None
        return parent, old

    def pin(self, repo_id: RepoId, revision: str) -> str:
        """A branch, tag or short id pinned to its 40-hex commit (a full sha is taken as it is)."""
        if SHA_RE.match(revision):
            return revision
        info = self.hub.repo_info(repo_id, revision=revision)
        if not info.sha:
            raise RevisionGone(f"{repo_id}: cannot resolve revision {revision!r}")
        return info.sha

    def analyse(self, repo_id: RepoId, old: tuple[str, Snapshot] | None, new: tuple[str, Snapshot], *,
                old_estimate: dict[str, Any] | None = None) -> Analysis:
        """Raw diff, findings and estimate between two snapshots (either from the store or the Hub).

        Polling, ``reanalyse`` and ``tracker diff`` all come through here, so they agree.
        ``old_estimate`` is the stored estimate of the old side, for its checkpoint count.
        """
        sources = self._sources(repo_id, old=old, new=new)
        raw = diff_revisions(old[1] if old else None, new[1], sources.text)
        change = RevisionChange(repo=repo_id, old=old[1] if old else None, new=new[1],
                                old_sha=CommitSha(old[0]) if old else None, new_sha=CommitSha(new[0]))
        findings = analyse_revision(change, sources, self.rules)
        for problem in sources.problems:
            findings.append(self.rules.finding(
                "upstream.file_unreadable", "files", f"{problem['path']} ({problem['side']}): {problem['reason']}",
                path=problem["path"], evidence=problem,
            ))
        estimate_json, estimate_findings = self._estimate(raw, sources, old is not None, old_estimate)
        return Analysis(raw=raw, findings=sort_findings([*findings, *estimate_findings]), sources=sources,
                        estimate=estimate_json)

    def _estimate(self, raw: dict[str, Any], sources: HubSources, has_old: bool,
                  old_estimate: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[Finding]]:
        """Rerun the estimator when the config or the weights moved (and on the first revision)."""
        files = raw["files"]
        touched = {e["path"] for k in ("added", "removed", "changed") for e in files[k]}
        if has_old and not any(p == "config.json" or p.endswith(".safetensors") for p in touched):
            return None, []
        new = estimate_from_sources(sources, "new")
        if new is None:
            return None, []
        old = None
        if has_old:
            ckpt = (old_estimate or {}).get("checkpoint_params")
            old = estimate_from_sources(sources, "old", checkpoint_params=ckpt, read_headers=False)
        findings = compare_estimates(old, new, self.rules)
        data = new.to_json()
        data["delta"] = estimate_delta(old, new)
        return data, findings

    def _dependencies(self, raw: dict[str, Any], sources: HubSources, baseline: bool
                      ) -> tuple[list[Finding], bool]:
        """Known vulnerabilities of the packages a revision asks for (OSV.dev); (findings, retry later)."""
        if self.osv is None:
            return [], False
        files = raw["files"]
        touched = {e["path"] for k in ("added", "changed") for e in files[k]}
        if not baseline and not any(p in ("requirements.txt", "config.json") or p.endswith(".py") for p in touched):
            return [], False
        from tracker.advisory.dependencies import (
            collect_dependencies,
            unpinned_findings,
            vulnerability_findings,
        )

        snapshot = sources.revisions["new"][1]  # type: ignore[index]
        config = _json_or_none(sources.text("new", "config.json"))
        code = {f.path: sources.text("new", f.path) or b"" for f in snapshot.files if f.path.endswith(".py")}
        scan = collect_dependencies(requirements_txt=sources.text("new", "requirements.txt"),
                                    config=config if isinstance(config, dict) else None, remote_code=code)
        if not scan.queries:
            return unpinned_findings(scan, self.rules), False
        result = self.osv.querybatch([tuple(q) for q in scan.queries])
        findings, _ = vulnerability_findings(scan, result.vulns, self.rules)
        return findings + unpinned_findings(scan, self.rules), not result.ok

    def retry_dependencies(self, repo: RepoRow) -> int:
        """Redo the OSV.dev lookups that failed earlier; findings and advisories follow. Returns how many."""
        if self.osv is None:
            return 0
        done = 0
        for revision in self.store.revisions(repo.pk, status="done"):
            if not revision.dependencies_pending or revision.snapshot is None:
                continue
            parent, old = self._sides(repo, revision)
            sources = self._sources(repo.repo_id, old=old, new=(revision.sha, revision.snapshot))
            raw = {"files": (revision.diff or {}).get("files") or {"added": [], "removed": [], "changed": []}}
            found, still_pending = self._dependencies(raw, sources, revision.baseline or parent is None)
            if still_pending:
                continue
            kept = [Finding.from_json(f) for f in revision.findings or [] if not f["code"].startswith("dependencies.")]
            findings = sort_findings([*kept, *found])
            self.store.update_revision_analysis(revision.pk, findings=[f.to_json() for f in findings],
                                                worst_severity=worst_severity(findings),
                                                estimate=revision.estimate, now=self.clock(),
                                                dependencies_pending=False)
            done += 1
            self._republish(repo, revision)
        if done and self.advisor is not None:
            self.advisor.reindex(repo)
        return done

    def _republish(self, repo: RepoRow, revision: RevisionRow) -> None:
        """Rebuild a re-analysed revision's advisories (the caller re-indexes once, after the loop)."""
        if self.advisor is not None and not revision.baseline:
            updated = self.store.get_revision(repo.pk, revision.sha)
            assert updated is not None
            self.advisor.publish_revision(repo, updated)

    def process_revision(self, repo: RepoRow, revision: RevisionRow) -> None:
        snapshot = self.hub.snapshot(repo.repo_id, revision.sha)
        parent, old = self._sides(repo, revision)
        analysis = self.analyse(repo.repo_id, old, (revision.sha, snapshot),
                                old_estimate=parent.estimate if parent else None)
        raw, estimate_json = analysis.raw, analysis.estimate
        dependency_findings, retry = self._dependencies(raw, analysis.sources, old is None)
        findings = sort_findings([*analysis.findings, *dependency_findings])
        if old is None:
            summary = f"baseline: {len(snapshot.files)} files"
            if findings and findings[0].severity.at_least(Severity.MODERATE):
                summary += f"; {findings[0].summary}"
        else:
            summary = summarize_files(raw["files"])
            if findings:
                summary = f"{findings[0].summary}" + (f" (+{len(findings) - 1} more)" if len(findings) > 1 else "")
        stored = self.store.complete_revision(
            revision.pk, snapshot=snapshot, diff=raw if old is not None else None,
            findings=[f.to_json() for f in findings], worst_severity=worst_severity(findings),
            summary=summary, estimate=estimate_json, dependencies_pending=retry, now=self.clock(),
        )
        if stored:
            done = self.store.get_revision(repo.pk, revision.sha)
            assert done is not None
            for hook in self.after_revision:
                hook(repo, done)

    # -- reading back -----------------------------------------------------------------------

    def snapshot_of(self, repo: RepoRow, sha: str) -> tuple[str, Snapshot]:
        """A revision's snapshot from the store, or from the Hub when not read yet."""
        row = self.store.get_revision(repo.pk, sha)
        if row is not None and row.snapshot is not None:
            return row.sha, row.snapshot
        sha = row.sha if row is not None else self.pin(repo.repo_id, sha)
        return sha, self.hub.snapshot(repo.repo_id, sha)

    def config_and_headers(self, repo_id: RepoId, revision: str) -> tuple[Any, dict[str, Any]]:
        """A repo's config.json and safetensors headers at a revision, for ``tracker estimate`` (no store needed)."""
        sha = self.pin(repo_id, revision)
        snapshot = self.hub.snapshot(repo_id, sha)
        if snapshot.get("config.json") is None:
            raise HubUnavailable(f"{repo_id}@{sha[:12]} has no config.json")
        sources = self._sources(repo_id, old=None, new=(sha, snapshot))
        return _json_or_none(sources.text("new", "config.json")), safetensors_headers(sources, "new")

    def reanalyse(self, repo_id: str) -> int:
        """Re-run analysis of every stored revision with today's rules; advisories are rebuilt or withdrawn.

        Snapshots and file contents come from the store, so this costs the Hub
        nothing but the safetensors headers it needs again.
        """
        repo = self.store.get_repo(repo_id)
        if repo is None:
            raise KeyError(f"not watched: {repo_id}")
        changed = 0
        for revision in self.store.revisions(repo.pk, status="done"):
            if revision.snapshot is None:
                continue
            parent, old = self._sides(repo, revision)
            analysis = self.analyse(repo.repo_id, old, (revision.sha, revision.snapshot),
                                    old_estimate=parent.estimate if parent else None)
            estimate_json = analysis.estimate
            findings = sort_findings([*analysis.findings,
                                      *[f for f in map(Finding.from_json, revision.findings or [])
                                        if f.category == "dependencies"]])
            payload = [f.to_json() for f in findings]
            if payload != revision.findings:
                self.store.update_revision_analysis(revision.pk, findings=payload,
                                                    worst_severity=worst_severity(findings),
                                                    estimate=estimate_json or revision.estimate, now=self.clock())
                changed += 1
            self._republish(repo, revision)
        if self.advisor is not None:
            self.advisor.reindex(repo)
        return changed

