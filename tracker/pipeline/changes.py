"""The Hub-wide change listing: a firehose of pushes, and a voucher for content between a repo's own checks.

``GET /api/models?sort=lastModified&direction=-1&expand=sha&expand=lastModified&expand=gated`` lists
every model on the Hub, the most recently changed first, with its head sha and whether it is gated.
A walk pages through it (the ``Link`` cursor) until a page's oldest model is older than the
watermark, less a safety overlap. Then, for every watched repo on ``main``:

* listed with a head other than the last one read: it moved, so it is made due now and polled
  (the same request a Hub webhook makes, :meth:`ScheduleStore.request_poll`);
* listed as gated, or not listed but its last head listed under another id (renamed?): checked on
  its own at once (a HEAD says whether it is readable, or where it went);
* listed with the same head, or not listed at all: its content is unchanged since the watermark.
  The listing never vouches for the repo itself: a deleted, private or renamed repo is simply not
  listed, so each repo still gets a check of its own once per its interval (:mod:`.cycle`).

The daemon walks every ``[poll] listen_every`` whether or not any repo is due, so a push to any
watched repo is read within about that long.

The watermark is the newest ``lastModified`` (the Hub's clock, never compared with ours) of the
walk *before* the previous one: each stretch of the listing is read by two walks, so a model
that one walk missed (a page skipped while the Hub reshuffled) is found by the next.

A repo is vouched for only while the walks form an unbroken *chain* since it was last checked
on its own: the chain has an epoch, a check stamps the repo with the epoch it ran in
(``repos.listing_epoch``), and anything that leaves a gap starts a new chain (epoch + 1), so
every repo is checked on its own once more before walks vouch for it again. Gaps: a walk that
stops before its watermark (a page cap, a page served twice), a listing out of
``lastModified`` order or whose newest change is older than the last walk's (clocks disagree,
a stale replica), and a HEAD that says a repo the listing called moved did not move. A walk that
fails (the Hub is away) breaks nothing: the repos due are checked on their own, and the next
walk goes back to the same watermark.

Without the firehose (``listen_every = "0s"``) and in ``tracker poll``, whether to walk is a cost
decision: the pages it should take (the change rate the last walk saw, times the stretch to cover,
over the page size) against the owner listings and HEADs the due repos would cost otherwise
(:meth:`ChangeFeed.worth_walking`).
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tracker.core.errors import HubRateLimited, TrackerError, first_line
from tracker.core.hub_types import ChangeListing
from tracker.pipeline.ports import HubReader, Store

log = logging.getLogger("tracker.changes")  # the name operators filter logs by, not the module path

# The walk reaches this far (Hub clock) past its watermark: replication lag, skew. Each stretch is read by two
# walks already, so a model listed up to a walk late is still seen; a minute more keeps a walk every
# minute at two pages when a thousand models change in three minutes (docs/scaling.md).
OVERLAP_SECONDS = 60.0
MAX_WALK_PAGES = 200  # a walk needing more starts a new chain (the repos due are checked on their own)
DEFAULT_PAGE_SIZE = 1000  # what one page of /api/models holds on the Hub


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _parse(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except ValueError:
        return None


@dataclass(frozen=True)
class Mark:
    """One complete walk: the newest change it listed (Hub clock) and when it ran (ours)."""

    top: datetime
    at: datetime


@dataclass
class ListingState:
    """The ``hub_listing`` row."""

    epoch: int = 0
    marks: list[Mark] = field(default_factory=list)  # the last two complete walks, oldest first
    rate: float = 0.0  # changes per second the last walk saw
    page_size: int = DEFAULT_PAGE_SIZE

    @property
    def chained(self) -> bool:
        return bool(self.marks)


@dataclass(frozen=True)
class WalkReport:
    """What one walk did (for logs, tests and the benchmark)."""

    pages: int
    listed: int
    moved: int  # watched repos it made due
    vouching: bool  # the chain holds: repos current in it and not listed are unchanged
    problem: str | None = None


class ChangeFeed:
    """Walks the Hub-wide change listing and keeps its watermarks in the database (``store.listing``)."""

    def __init__(self, store: Store, hub: HubReader, *, overlap: float = OVERLAP_SECONDS,
                 max_pages: int = MAX_WALK_PAGES) -> None:
        self.store = store
        self.hub = hub
        self.overlap = timedelta(seconds=overlap)
        self.max_pages = max_pages
        self._lock = threading.Lock()
        self._moved: dict[str, str | None] = {}  # repo id (lower case) -> the head the listing named

    # -- the state row ------------------------------------------------------------------------

    def load(self) -> ListingState:
        row = self.store.listing.read()
        if row is None:
            return ListingState()
        marks = []
        for item in row.marks:
            top = _parse(item.get("top")) if isinstance(item, dict) else None
            at = _parse(item.get("at")) if isinstance(item, dict) else None
            if top is not None and at is not None:
                marks.append(Mark(top=top, at=at))
        return ListingState(epoch=row.epoch, marks=marks[-2:], rate=row.rate,
                            page_size=row.page_size or DEFAULT_PAGE_SIZE)

    def _save(self, state: ListingState, now: datetime) -> None:
        self.store.listing.write(epoch=state.epoch, marks=[{"top": _iso(m.top), "at": _iso(m.at)} for m in state.marks[-2:]],
                                 rate=state.rate, page_size=state.page_size, now=now)

    def break_chain(self, reason: str, now: datetime) -> None:
        """Start a new chain: every watched repo is checked on its own once before walks vouch for it again."""
        with self._lock:
            state = self.load()
            state.epoch += 1
            state.marks = []
            self._save(state, now)
        log.warning("hub change listing: %s; the watched repos are checked one by one once, then by the "
                    "listing again", reason)

    # -- deciding -----------------------------------------------------------------------------

    def pages_expected(self, state: ListingState, now: datetime) -> int:
        """Pages the next walk should take: the changes since the watermark's walk, at the rate seen last."""
        if not state.marks:
            return 1
        seconds = max(0.0, (now - state.marks[0].at).total_seconds()) + self.overlap.total_seconds()
        return max(1, math.ceil(state.rate * seconds / max(1, state.page_size)))

    def worth_walking(self, state: ListingState, now: datetime, individual_cost: int) -> bool:
        """Whether a walk costs fewer requests than checking the due repos on their own (``individual_cost``)."""
        return individual_cost > 0 and self.pages_expected(state, now) < individual_cost

    @staticmethod
    def vouch_epoch(state: ListingState, since: datetime) -> int | None:
        """The epoch whose repos the last walk vouches for, if the chain holds and that walk ran at or after ``since``.

        Only for repos checked before that walk ran (:meth:`vouches`): a change after the walk is
        the next walk's to see.
        """
        if state.marks and state.marks[-1].at >= since:
            return state.epoch
        return None

    @staticmethod
    def vouches(state: ListingState, epoch: int | None, listing_epoch: int | None,
                last_checked: datetime | None) -> bool:
        """Whether the last walk vouches for a repo last checked at ``last_checked`` in chain ``listing_epoch``."""
        return (epoch is not None and listing_epoch == epoch and last_checked is not None and bool(state.marks)
                and last_checked <= state.marks[-1].at)

    # -- walking ------------------------------------------------------------------------------

    def walk(self, now: datetime, *, max_pages: int | None = None) -> WalkReport:
        """One walk: make the watched repos that moved due, and move the watermarks. Never raises for the Hub's trouble.

        ``max_pages``: the walk's share of the api budget; a walk that needs more stops there, short of
        its watermark, and starts a new chain (as one past :data:`MAX_WALK_PAGES` does).
        """
        state = self.load()
        stop = state.marks[0].top - self.overlap if state.marks else None
        cap = self.max_pages if max_pages is None else max(1, min(self.max_pages, max_pages))
        try:
            listing = self.hub.recent_models(stop_before=stop, max_pages=cap)
        except HubRateLimited as exc:
            log.info("hub change listing: %s; the repos due are checked on their own", first_line(exc))
            return WalkReport(pages=0, listed=0, moved=0, vouching=False, problem=first_line(exc))
        except TrackerError as exc:
            log.warning("hub change listing failed (%s); the repos due are checked on their own", first_line(exc))
            return WalkReport(pages=0, listed=0, moved=0, vouching=False, problem=first_line(exc))
        moved = self._act(listing, now)
        problem = self._problem(state, listing, stop)
        previous = state.marks[-1] if state.marks else None
        top = listing.top
        if top is not None and previous is not None:
            newer = sum(1 for m in listing.models if m.last_modified > previous.top)
            seconds = (now - previous.at).total_seconds()
            if seconds > 0:
                state.rate = newer / seconds
        state.page_size = max(listing.page_size, 1) if listing.pages > 1 else max(state.page_size, listing.page_size)
        vouching = False
        if problem is not None or top is None:
            state.epoch += 1
            state.marks = [Mark(top=top, at=now)] if top is not None and not listing.disorder else []
            if problem is not None:
                log.warning("hub change listing: %s; the watched repos are checked one by one once, then by the "
                            "listing again", problem)
        elif stop is None:
            state.epoch += 1  # a first watermark: vouches for the repos checked from now on
            state.marks = [Mark(top=top, at=now)]
        else:
            state.marks = [*state.marks[-1:], Mark(top=max(top, previous.top if previous else top), at=now)]
            vouching = True
        self._save(state, now)
        log.debug("hub change listing: %d page(s), %d model(s), %d watched repo(s) moved", listing.pages,
                  len(listing.models), moved)
        return WalkReport(pages=listing.pages, listed=len(listing.models), moved=moved, vouching=vouching,
                          problem=problem)

    def _problem(self, state: ListingState, listing: ChangeListing, stop: datetime | None) -> str | None:
        if listing.disorder:
            return "the listing is not in lastModified order (the Hub's clocks disagree?)"
        top = listing.top
        if state.marks and top is not None and top < state.marks[-1].top - self.overlap:
            return (f"its newest change ({_iso(top)}) is older than the last walk's ({_iso(state.marks[-1].top)}): "
                    "a stale answer, or the Hub's clock went back")
        if stop is not None and not listing.reached:
            return (f"the walk stopped after {listing.pages} page(s) before reaching its watermark"
                    + (f" ({listing.repeated} model(s) listed twice)" if listing.repeated else ""))
        return None

    def _act(self, listing: ChangeListing, now: datetime) -> int:
        """Make every watched repo the listing shows moved due now; how many."""
        if not listing.models:
            return 0
        listed = {m.repo_id.lower(): m.sha for m in listing.models}
        gated = {m.repo_id.lower() for m in listing.models if m.gated}
        moved = self.store.listing.request_moved(listed, now=now, gated=gated)
        with self._lock:  # only a new head is a claim a HEAD can contradict
            self._moved.update({m.key: m.sha for m in moved if m.why == "moved"})
        for m in moved:
            if m.why != "moved":
                log.info("hub change listing: %s %s; checking it on its own", m.key,
                         "is listed as gated" if m.why == "gated" else f"is not listed, but its head {str(m.sha)[:12]} "
                         "is, under another id (renamed?)")
        return len(moved)

    def listed_move(self, repo_id: str) -> tuple[bool, str | None]:
        """Whether the last walks called this repo moved (and to which head); forgets it."""
        with self._lock:
            key = repo_id.lower()
            if key in self._moved:
                return True, self._moved.pop(key)
            return False, None


__all__ = ["ChangeFeed", "ListingState", "Mark", "WalkReport"]
