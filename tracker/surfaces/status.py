"""`tracker status`: what the tracker is doing and whether it is healthy, for people and cron checks.

``assess`` is pure (rows and a clock in, a report out); ``gather`` reads the rows from the store.

Per repo: its state on the Hub, the last poll and its outcome, the last error, when it is due
next, a deferral (rate limited until), who holds its lease, how many revisions wait to be read,
and the lag of its newest upstream commit: from the commit's date to the advisory it raised (or,
without one, to the tracker having read it; still growing while it waits). Overall: the poll
backlog and the delivery outbox.

Unhealthy (exit 1), each with a problem line:
- every poll for N minutes failed with the Hub unreachable: "Hub unreachable for N minutes" (the
  ``hub`` line, "serving" otherwise; ``/readyz`` says the same in its ``hub`` check);
- a repo not found on the Hub (never read: a typo, or private/gated without a token);
- a repo whose last poll failed (``error``);
- a repo not polled for more than ``max_cycles`` of its intervals (is `tracker run` running?);
- revisions or deliveries waiting longer than ``max_cycles`` intervals;
- dead deliveries.
A repo gone, gated or disabled upstream is "attention", not unhealthy: the tracker is working and
raised an advisory about it; `tracker watch remove` ends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tracker.core.escaping import escape_lines
from tracker.core.intervals import clamp_interval
from tracker.core.model import PollOutcome, RepoState
from tracker.core.store_types import DeliveryBacklog, RepoHealthRow
from tracker.services import Polling

if TYPE_CHECKING:
    from tracker.app import Tracker

DEFAULT_MAX_CYCLES = 3
NOT_FOUND_TEXT = "not found on the Hub (check the id; private and gated repos need HF_TOKEN)"


def iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds").replace("+00:00", "Z") if value else None


def span(seconds: float | None) -> str:
    """A duration as people read it: 45 s, 12 min, 3 h 20 min, 2 d 4 h, 337 d."""
    if seconds is None:
        return "-"
    seconds = int(max(0, seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours and days < 10 else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min"
    return f"{secs} s"


def minute(value: datetime | None) -> str | None:
    """A time in a table, to the minute (UTC): 2026-05-01 08:59."""
    return value.strftime("%Y-%m-%d %H:%M") if value else None


@dataclass(frozen=True)
class RepoStatus:
    repo: str
    branch: str
    state: str
    health: str  # ok | attention | unhealthy
    problems: tuple[str, ...]
    last_poll: datetime | None
    last_outcome: str | None
    last_error: str | None
    next_due: datetime
    deferred_until: datetime | None
    lease_holder: str | None
    pending_revisions: int
    newest_commit: str | None
    newest_commit_at: datetime | None
    advisory: str | None
    lag_seconds: float | None
    last_checked: datetime | None = None  # its last check of its own (a HEAD, an owner listing), not a listing's vouching

    def to_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo, "branch": self.branch, "state": self.state, "health": self.health,
            "problems": list(self.problems), "last_poll": iso(self.last_poll),
            "last_checked": iso(self.last_checked), "last_outcome": self.last_outcome,
            "last_error": self.last_error, "next_due": iso(self.next_due),
            "deferred_until": iso(self.deferred_until), "lease_holder": self.lease_holder,
            "pending_revisions": self.pending_revisions,
            "newest_commit": None if self.newest_commit is None else {
                "sha": self.newest_commit, "date": iso(self.newest_commit_at), "advisory": self.advisory,
                "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds),
            },
        }


@dataclass(frozen=True)
class StatusReport:
    checked_at: datetime
    repos: tuple[RepoStatus, ...]
    pending_revisions: int
    oldest_pending_listed_at: datetime | None
    deliveries: DeliveryBacklog
    problems: tuple[str, ...]
    hub: str = "serving"  # or "Hub unreachable for N minutes (...)"

    @property
    def healthy(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "hub": self.hub,
            "checked_at": iso(self.checked_at),
            "repos": [r.to_json() for r in self.repos],
            "poll_backlog": {"pending_revisions": self.pending_revisions,
                             "oldest_listed_at": iso(self.oldest_pending_listed_at)},
            "deliveries": {"pending": self.deliveries.pending, "retrying": self.deliveries.retrying,
                           "dead": self.deliveries.dead, "oldest_pending_at": iso(self.deliveries.oldest_pending_at)},
            "problems": list(self.problems),
        }


def hub_unreachable(polled: int, unreachable: int, since: datetime | None, *, now: datetime) -> str | None:
    """"Hub unreachable for N minutes" when every polled repo's polls failed so since ``since``; else None."""
    if polled == 0 or unreachable < polled or since is None:
        return None
    minutes = max(0, int((now - since).total_seconds() // 60))
    lasted = "less than a minute" if minutes == 0 else f"{minutes} minute{'' if minutes == 1 else 's'}"
    return f"Hub unreachable for {lasted} (every poll since {iso(since)} failed)"


def _lag(row: RepoHealthRow, now: datetime) -> float | None:
    """From the newest commit's date to its advisory (else to its being read; still open while pending). A
    commit older than the watch (a backfilled history) counts from when watching began, not from its date."""
    if row.newest_date is None or row.newest_baseline:
        return None  # a baseline is read when watching starts, however old the commit
    start = max(row.newest_date, row.created_at)
    if row.newest_advisory_at is not None:
        end = row.newest_advisory_at
    elif row.newest_status == "done" and row.newest_analysed_at is not None:
        end = row.newest_analysed_at
    else:
        end = now
    return max(0.0, (end - start).total_seconds())


def assess_repo(row: RepoHealthRow, *, now: datetime, default_every: float,
                max_cycles: int = DEFAULT_MAX_CYCLES) -> RepoStatus:
    every = clamp_interval(row.every_seconds or default_every)
    limit = timedelta(seconds=max_cycles * every)
    deferred = row.defer_until if row.defer_until and row.defer_until > now else None
    holder = row.lease_owner if row.lease_owner and row.lease_until and row.lease_until > now else None
    if row.next_poll_at is not None:  # the daemon's schedule says
        due = row.next_poll_at
    else:
        due = row.last_polled_at + timedelta(seconds=every) if row.last_polled_at else now
    if deferred and deferred > due:
        due = deferred
    problems: list[str] = []
    attention = False
    name = row.repo_id
    if row.state == RepoState.NOT_FOUND:
        problems.append(f"{name}: {NOT_FOUND_TEXT}")
    elif row.last_outcome == PollOutcome.ERROR:
        problems.append(f"{name}: last poll failed: {row.last_error or 'unknown error'}")
    if row.state in (RepoState.GONE, RepoState.GATED, RepoState.DISABLED):
        attention = True
    since = max(d for d in (row.last_polled_at or row.created_at, row.defer_until) if d is not None)
    if now - since > limit:
        what = f"last polled {iso(row.last_polled_at)}" if row.last_polled_at else f"watched since {iso(row.created_at)}"
        problems.append(f"{name}: not polled for {span((now - since).total_seconds())}, more than {max_cycles} "
                        f"intervals of {span(every)} ({what}); is `tracker run` running?")
    if row.oldest_pending_listed_at is not None and now - row.oldest_pending_listed_at > limit:
        problems.append(f"{name}: {row.pending} revision(s) waiting to be read since "
                        f"{iso(row.oldest_pending_listed_at)}, more than {max_cycles} intervals of {span(every)}")
    if deferred is not None:
        attention = True
    health = "unhealthy" if problems else "attention" if attention else "ok"
    return RepoStatus(
        repo=name, branch=row.branch, state=row.state, health=health, problems=tuple(problems),
        last_poll=row.last_polled_at, last_outcome=row.last_outcome, last_error=row.last_error, next_due=due,
        deferred_until=deferred, lease_holder=holder, pending_revisions=row.pending,
        newest_commit=row.newest_sha, newest_commit_at=row.newest_date, advisory=row.newest_advisory,
        lag_seconds=_lag(row, now), last_checked=row.last_checked,
    )


def assess(rows: Sequence[RepoHealthRow], deliveries: DeliveryBacklog, *, now: datetime, default_every: float,
           max_cycles: int = DEFAULT_MAX_CYCLES) -> StatusReport:
    """The whole picture, and what is wrong with it (pure)."""
    repos = tuple(assess_repo(r, now=now, default_every=default_every, max_cycles=max_cycles) for r in rows)
    problems = [p for r in repos for p in r.problems]
    if deliveries.dead:
        problems.append(f"{deliveries.dead} dead deliveries: see `tracker deliveries --failed`, resend with "
                        "`tracker deliveries retry ID`")
    limit = timedelta(seconds=max_cycles * clamp_interval(default_every))
    if deliveries.oldest_pending_at is not None and now - deliveries.oldest_pending_at > limit:
        problems.append(f"{deliveries.pending} deliveries waiting since {iso(deliveries.oldest_pending_at)}, "
                        f"more than {max_cycles} intervals of {span(clamp_interval(default_every))}")
    polled = [r for r in rows if r.last_polled_at is not None]
    outages = [r.unreachable_since for r in polled if r.unreachable_since is not None]
    outage = hub_unreachable(len(polled), len(outages), max(outages, default=None), now=now)
    if outage:
        problems.insert(0, outage)
    listed = [r.oldest_pending_listed_at for r in rows if r.oldest_pending_listed_at is not None]
    return StatusReport(checked_at=now, repos=repos, pending_revisions=sum(r.pending for r in rows),
                        oldest_pending_listed_at=min(listed) if listed else None, deliveries=deliveries,
                        problems=tuple(problems), hub=outage or "serving")


def gather(tracker: Tracker, *, max_cycles: int = DEFAULT_MAX_CYCLES) -> StatusReport:
    polling = Polling(tracker)
    return assess(polling.repo_health(), polling.deliveries(), now=tracker.clock(), default_every=tracker.settings.poll.every,
                  max_cycles=max_cycles)


def render(report: StatusReport) -> str:
    """The text `tracker status` prints."""
    lines = []
    if report.repos:
        lines.append(f"{'REPO':40} {'STATE':9} {'LAST POLL':16} {'LAST CHECKED':16} {'OUTCOME':9} {'NEXT DUE':16} "
                     f"{'PENDING':>7} {'LAG':>9}  HEALTH")
        for r in report.repos:
            lines.append(f"{r.repo:40} {r.state:9} {minute(r.last_poll) or 'never':16} "
                         f"{minute(r.last_checked) or 'never':16} {r.last_outcome or '-':9} "
                         f"{minute(r.next_due) or '-':16} {r.pending_revisions:>7} {span(r.lag_seconds):>9}  "
                         f"{r.health}")
            if r.deferred_until:
                lines.append(f"    rate limited until {iso(r.deferred_until)}")
            if r.lease_holder:
                lines.append(f"    being polled by {r.lease_holder}")
            if r.last_error and r.last_outcome != PollOutcome.ERROR and r.health != "ok":
                lines.append(f"    last error: {r.last_error}")
    else:
        lines.append("no repos watched; add some with `tracker watch add OWNER/NAME`")
    d = report.deliveries
    lines.append(f"hub: {report.hub}")
    lines.append(f"poll backlog: {report.pending_revisions} revision(s) waiting to be read"
                 + (f" (oldest listed {iso(report.oldest_pending_listed_at)})" if report.oldest_pending_listed_at else ""))
    lines.append(f"deliveries: {d.pending} pending ({d.retrying} being retried), {d.dead} dead")
    if report.problems:
        lines.append("problems:")
        lines += [f"  {p}" for p in report.problems]
        lines.append(f"status: unhealthy ({len(report.problems)} problem{'s' if len(report.problems) != 1 else ''})")
    else:
        lines.append("status: healthy")
    return escape_lines(lines)  # a Hub's or a receiver's error text is a stranger's
