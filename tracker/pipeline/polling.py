"""Polling: what to read. One cheap request tells whether a repo moved; new commits become pending revisions.

A poll (1) asks the branch head, (2) lists the commits since the last one read and stores them
as ``pending`` revisions with their graph edges (one transaction), then (3) hands the pending
revisions to the ``Processor``. What happens to the repo itself (renamed, deleted, re-created,
gated, history rewritten) is an event, stored with the repo's new state and its advisory in one
transaction. A poll never raises for one repo's trouble: it returns a ``PollResult`` saying what
happened, so the others in the cycle are polled all the same.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tracker.core.diff import same_content
from tracker.core.errors import (
    HubError,
    HubRateLimited,
    HubUnavailable,
    HubUnreachable,
    NotWatched,
    RepoDisabled,
    RepoGated,
    RepoGone,
    StoreBusy,
    StoreError,
    TrackerError,
    first_line,
)
from tracker.core.hub_types import CommitListing
from tracker.core.model import (
    Commit,
    CommitSha,
    PollOutcome,
    RepoId,
    RepoRow,
    RepoState,
    RevisionStatus,
    Severity,
)
from tracker.core.report import EventReport, event_advisory
from tracker.pipeline.ports import Clock, HubReader, Metrics, PipelineSettings, Store
from tracker.pipeline.processing import Processor, save_checked, seen_of

log = logging.getLogger("tracker.polling")  # the name operators filter logs by, not the module path
_SEVERITIES = frozenset(s.value for s in Severity)
LEASE_MARGIN_SECONDS = 300.0  # a lease outlives the poll's Hub deadline by this much (analysis time)
NOT_POLLED_INTERRUPTED = "not polled: interrupted; the next poll reads it"  # a run stopped before this repo


@dataclass
class PollResult:
    """What one poll of one repo did, for the CLI and the daemon's log."""

    repo: RepoId
    status: PollOutcome = PollOutcome.UNCHANGED
    new_revisions: int = 0
    processed: int = 0
    events: list[str] = field(default_factory=list)
    error: str | None = None
    advisories: int = 0  # advisories this poll raised (revisions and repo events)
    worst_advisory: str | None = None  # the worst severity among them
    hub_unreachable: bool = False  # the Hub could not be reached at all: said once per cycle, not per repo

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


def dead_here(owner: str) -> bool:
    """Whether a lease owner (``host:pid:nonce``) is a process of this host that no longer runs."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname()[:60] or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class Poller:
    def __init__(self, settings: PipelineSettings, store: Store, hub: HubReader, processor: Processor, *,
                 clock: Clock, metrics: Metrics) -> None:
        self.settings = settings
        self.metrics = metrics
        self.store = store
        self.hub = hub
        self.processor = processor
        self.clock = clock
        self.stopping = threading.Event()  # set on shutdown: finish the revision in hand, then return
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # Who holds a repo's lease: unique per Poller, readable in `tracker status`.
        self.owner = f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def _repo_lock(self, repo_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(repo_id, threading.Lock())

    def poll_repo(self, repo_id: str, *, backfill: int = 0,
                  progress: Callable[[int], Any] | None = None, release: bool = True) -> PollResult:
        """Poll one repo; never raises for the repo's own trouble (the result says what happened).

        One poll per repo at a time: a lock in this process (a webhook may arrive during a
        scheduled poll) and a lease in the database across processes and replicas (a second
        ``tracker poll`` skips the repo with a clear line). The Hub requests of the whole poll
        share one wall-clock deadline (``hub.poll_deadline``). ``release=False``: keep the lease
        after the poll (the daemon's cycle frees it when it has scheduled the next poll, so that
        no other replica polls the repo again in between).
        """
        with self._repo_lock(repo_id):
            repo = self.store.repos.get(repo_id)
            if repo is None:
                raise NotWatched(repo_id)
            result = PollResult(repo=repo.repo_id)
            if not self._lease(repo):
                owner, until = self.store.schedule.lease_of(repo.pk)
                result.status = PollOutcome.BUSY
                result.error = (f"being polled by another process ({owner}, lease until "
                                f"{until.isoformat(timespec='seconds') if until else '?'}); skipped")
                return result
            started = self.clock()
            try:
                with self.hub.deadline(self.settings.hub.poll_deadline):
                    self._poll_guarded(repo, result, backfill=backfill, progress=progress)
            except StoreBusy as exc:
                result.status, result.error = PollOutcome.BUSY, first_line(exc)
            except Exception as exc:  # a bug must cost one repo's poll, not the cycle: logged, counted
                log.exception("%s: poll failed", repo.repo_id)
                result.status, result.error = PollOutcome.ERROR, f"internal error: {first_line(exc)}"
            finally:
                if release:
                    self.store.schedule.release_lease(repo.pk, self.owner)
            self._account(repo, result, started)
            return result

    def _account(self, repo: RepoRow, result: PollResult, started: datetime) -> None:
        """The advisories this poll raised (for its line), its outcome (for `tracker status`), metrics."""
        self.metrics.poll_done(result.status.value)
        if result.status == PollOutcome.BUSY:
            return  # the process that holds the lease accounts for its own poll
        try:
            if result.processed or result.events:
                raised = [a for a in self.store.advisories.find(repo_pk=repo.pk, since=started, include_withdrawn=False,
                                                               versions=False)
                          if a.published is not None and a.published >= started]
                result.advisories = len(raised)
                worst = Severity.worst(Severity(a.severity) for a in raised if a.severity in _SEVERITIES)
                result.worst_advisory = worst.value if worst else None
                self.metrics.advisories_raised(a.severity for a in raised)
            self.store.repos.update(repo.pk, last_outcome=result.status.value)
        except StoreError as exc:  # the poll itself is done and stored; only its accounting is lost
            log.warning("%s: could not record the poll's outcome: %s", repo.repo_id, first_line(exc))

    def _lease(self, repo: RepoRow) -> bool:
        now = self.clock()
        until = now + timedelta(seconds=self.settings.hub.poll_deadline + LEASE_MARGIN_SECONDS)
        if self.store.schedule.acquire_lease(repo.pk, self.owner, now=now, until=until):
            return True
        # A lease left by a process of this host that is gone (killed) is free now, not at expiry.
        holder, _ = self.store.schedule.lease_of(repo.pk)
        if holder and dead_here(holder):
            return self.store.schedule.acquire_lease(repo.pk, self.owner, now=now, until=until, steal_from=holder)
        return False

    def _keep_lease(self, repo: RepoRow) -> bool:
        """Between revisions: stop when shutting down, or when the lease was lost (taken over)."""
        return self.stopping.is_set() or not self._lease(repo)

    def _poll_guarded(self, repo: RepoRow, result: PollResult, *, backfill: int,
                      progress: Callable[[int], Any] | None) -> None:
        now = self.clock()
        if repo.defer_until and repo.defer_until > now:
            result.status = PollOutcome.DEFERRED
            result.error = f"rate limited until {repo.defer_until.isoformat(timespec='seconds')}"
            return
        try:
            self._poll(repo, result, backfill=backfill, progress=progress)
        except HubRateLimited as exc:
            wait = min(exc.retry_after or self.settings.poll.every, self.settings.hub.max_defer)
            self.store.repos.update(repo.pk, defer_until=now + timedelta(seconds=wait), last_error=first_line(exc),
                                   unreachable_since=None)
            result.status, result.error = PollOutcome.DEFERRED, first_line(exc)
        except (RepoGated, RepoGone, RepoDisabled) as exc:
            self._unreachable(repo, exc, result)
        except (HubError, TrackerError) as exc:
            if isinstance(exc, StoreBusy):
                raise
            if isinstance(exc, HubUnavailable):  # the outage's start is kept; any answer from the Hub ends it
                self.store.repos.mark_unreachable(repo.pk, now=now, last_error=first_line(exc), last_polled_at=now)
            else:
                self.store.repos.update(repo.pk, last_error=first_line(exc), last_polled_at=now, unreachable_since=None)
            result.status, result.error = PollOutcome.ERROR, first_line(exc)
            result.hub_unreachable = isinstance(exc, HubUnreachable)
        else:
            done = self.clock()
            self.store.repos.update(repo.pk, last_error=None, defer_until=None, last_polled_at=done,
                                   last_success_at=done, last_checked=done, unreachable_since=None)

    # -- events -------------------------------------------------------------------------------

    def _event(self, repo: RepoRow, kind: str, key: str, detail: dict[str, Any], result: PollResult, *,
               sha: str | None = None, repo_updates: dict[str, Any] | None = None) -> None:
        """Store an event with the repo's new state and its advisory, in one transaction (once per key)."""
        now = self.clock()
        done = [r.sha for r in self.store.revisions.of_repo(repo.pk, status=RevisionStatus.DONE)]

        def save() -> bool:
            ctx = self.processor.context(repo, now=now)
            advisory = event_advisory(ctx, kind=kind, detail=detail, done_revisions=done)
            report = EventReport(repo_pk=repo.pk, kind=kind, dedupe_key=key, detail=detail, revision_sha=sha,
                                 created_at=now, repo_updates=repo_updates or {},
                                 advisories=(advisory,) if advisory else ())
            return self.store.events.save_report(report, seen=seen_of(ctx))

        if save_checked(f"{repo.repo_id}: {kind}", save):
            result.events.append(kind)  # said in the poll's line (`tracker poll`, the daemon's log)
            log.debug("%s: %s", repo.repo_id, kind)

    def _unreachable(self, repo: RepoRow, exc: HubError, result: PollResult) -> None:
        now = self.clock()
        # The Hub answered for the repo itself: a check of its own, as much as a HEAD that named a head.
        updates = {"last_error": first_line(exc), "last_polled_at": now, "last_checked": now,
                   "unreachable_since": None}
        never_read = repo.last_seen_sha is None and repo.hub_uid is None
        if never_read and not isinstance(exc, RepoDisabled):
            # Never read: a typo in the watch list, or a private or gated repo without a token.
            self.store.repos.update(repo.pk, state=RepoState.NOT_FOUND, **updates)
            result.status = PollOutcome.NOT_FOUND
            result.error = "not found on the Hub (check the id; private and gated repos need HF_TOKEN)"
            return
        kind, state = (
            ("gated", RepoState.GATED) if isinstance(exc, RepoGated)
            else ("disabled", RepoState.DISABLED) if isinstance(exc, RepoDisabled)
            else ("deleted", RepoState.GONE)
        )
        if repo.state != state:
            # One event per transition: the key changes only when the repo comes back and goes again.
            self._event(repo, kind, f"{kind}:{repo.last_seen_sha}:{now.isoformat()}",
                        {"reason": first_line(exc), "last_seen_sha": repo.last_seen_sha}, result,
                        repo_updates={"state": state, **updates})
        else:
            self.store.repos.update(repo.pk, **updates)
        result.status = PollOutcome(state.value)
        result.error = first_line(exc)

    def _check_identity(self, repo: RepoRow, result: PollResult) -> None:
        """Learn the Hub's internal id; a different one under the same name is a re-created repo."""
        info = self.hub.repo_info(repo.repo_id)
        updates = {"hub_uid": info.uid or repo.hub_uid, "state": RepoState.ACTIVE}
        if repo.hub_uid and info.uid and info.uid != repo.hub_uid:
            self._event(repo, "recreated", f"recreated:{info.uid}",
                        {"old_uid": repo.hub_uid, "new_uid": info.uid, "last_seen_sha": repo.last_seen_sha}, result,
                        repo_updates=updates)
        elif repo.state not in (RepoState.ACTIVE, RepoState.NOT_FOUND):
            self._event(repo, "restored", f"restored:{repo.state}:{self.clock().isoformat()}",
                        {"previous_state": repo.state.value}, result, repo_updates=updates)
        else:
            self.store.repos.update(repo.pk, **updates)

    # -- reading the branch ---------------------------------------------------------------------

    def _poll(self, repo: RepoRow, result: PollResult, *, backfill: int,
              progress: Callable[[int], Any] | None) -> None:
        head = self.hub.head(repo.repo_id, repo.branch)
        if head.renamed_to and head.renamed_to != repo.renamed_to:
            self._event(repo, "renamed", f"renamed:{head.renamed_to}", {"from": repo.repo_id, "to": head.renamed_to},
                        result, repo_updates={"renamed_to": head.renamed_to})
        if repo.state != RepoState.ACTIVE or repo.hub_uid is None:
            self._check_identity(repo, result)
        repo = self._reload(repo)
        read_before = repo.last_seen_sha is not None
        if head.sha != repo.last_seen_sha:
            if repo.last_seen_sha is None:
                listing = self.hub.commits_since(repo.repo_id, repo.branch, None, limit=backfill + 1)
                commits = list(listing.commits)
                if not commits:
                    raise HubUnavailable(f"{repo.repo_id}: the Hub listed no commits on {repo.branch!r}")
                result.new_revisions = self.store.revisions.record_listing(repo, commits, parent=None, baseline=True,
                                                                           now=self.clock())
                result.status = PollOutcome.BASELINE
            else:
                limit = self.settings.poll.max_new_commits
                listing = self.hub.commits_since(repo.repo_id, repo.branch, repo.last_seen_sha, limit=limit + 1)
                parent: CommitSha | None
                if listing.truncated or (listing.reached_since and len(listing.commits) > limit):
                    result.new_revisions = self._flood(repo, listing, result)
                else:
                    if listing.reached_since:
                        commits, parent = list(listing.commits), repo.last_seen_sha
                    else:
                        commits, parent = self._history_rewritten(repo, listing.commits, head.sha, result)
                    result.new_revisions = self.store.revisions.record_listing(repo, commits, parent=parent,
                                                                               baseline=False, now=self.clock())
                result.status = PollOutcome.NEW if result.new_revisions else PollOutcome.UNCHANGED
            repo = self._reload(repo)
        if backfill and read_before:  # a first poll read its backfill with the baseline
            older = self._backfill_older(repo, backfill)
            if older:
                result.new_revisions += older
                result.status = PollOutcome.NEW
        result.processed = self.processor.process_pending(repo, progress=progress,
                                                          should_stop=lambda: self._keep_lease(repo))
        self.processor.retry_dependencies(repo)

    def _backfill_older(self, repo: RepoRow, count: int) -> int:
        """``--backfill N`` on a repo read before: up to N commits older than its baseline, read ahead of it
        (the baseline becomes a revision diffed against the newest of them). How many were added."""
        stored = self.store.revisions.of_repo(repo.pk)
        if not stored or not stored[0].baseline:
            return 0
        oldest = stored[0].sha
        listing = self.hub.commits_since(repo.repo_id, repo.branch, None, limit=len(stored) + count + 1)
        shas = [c.sha for c in listing.commits]
        if oldest not in shas:
            return 0  # not on the branch's line as listed now (a rewrite): nothing older to put before it
        at = shas.index(oldest)
        older = list(listing.commits[max(0, at - count):at])
        return self.store.revisions.prepend_listing(repo, older, before=CommitSha(oldest), now=self.clock())

    def _reload(self, repo: RepoRow) -> RepoRow:
        fresh = self.store.repos.get(repo.repo_id)
        if fresh is None:
            raise NotWatched(repo.repo_id)
        return fresh

    def _flood(self, repo: RepoRow, listing: CommitListing, result: PollResult) -> int:
        """More new commits than ``[poll] max_new_commits``: the head now, the ones in between later.

        The head is stored as the next revision, diffed against the last one read, so the next
        cycle's users hear about the current state; the commits in between (the newest
        ``max_new_commits`` of them: the listing stops there) are stored as backlog revisions,
        read after everything else, ``[poll] backlog_per_poll`` per poll. A repo event
        ``upstream.commit_flood`` and its advisory cover them until then. When the listing stopped
        before meeting the last revision read, the oldest commit listed is taken to descend from
        it (a rewrite longer than ``max_new_commits`` reads as a flood).
        """
        assert repo.last_seen_sha is not None
        last = CommitSha(repo.last_seen_sha)
        commits = list(listing.commits)
        head, between = commits[-1], commits[:-1]
        if not listing.reached_since:
            first = between[0]
            between[0] = Commit(first.sha, first.date, first.title, first.message, first.authors, (last,))
        new = self.store.revisions.record_listing(repo, between, parent=last, baseline=False, backlog=True,
                                                  now=self.clock())
        new += self.store.revisions.record_listing(repo, [head], parent=last, baseline=False, now=self.clock())
        limit = self.settings.poll.max_new_commits
        log.warning("%s: %s%d new commits (more than [poll] max_new_commits = %d): reading the head %s now, "
                    "the rest in the background", repo.repo_id, "" if listing.reached_since else "over ",
                    len(commits), limit, head.sha[:12])
        self._event(repo, "upstream.commit_flood", f"flood:{last}->{head.sha}",
                    {"last_read": last, "head": head.sha, "first": between[0].sha, "new_commits": len(commits),
                     "all_listed": listing.reached_since, "max_new_commits": limit}, result, sha=head.sha)
        return new

    def _history_rewritten(self, repo: RepoRow, listed: tuple[Commit, ...], head_sha: str,
                           result: PollResult) -> tuple[list[Commit], CommitSha | None]:
        """The last revision read is gone from the branch: find where the new history forks.

        Returns the commits to read and the revision to diff the first against.
        Content hashes, not commit ids, decide whether anything really changed.
        """
        stored = {r.sha: r for r in self.store.revisions.of_repo(repo.pk)}
        listed_shas = [c.sha for c in listed]
        fork = next((i for i in range(len(listed) - 1, -1, -1) if listed_shas[i] in stored), None)
        unreachable = sorted(sha for sha in stored if sha not in set(listed_shas))
        last_done = self.store.revisions.last_done(repo.pk)
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
