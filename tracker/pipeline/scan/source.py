"""The scan's one door to the tracker: ``AdvisorySource.lookup(repo, refs) -> {ref: PinStatus}``.

Every call the scan makes to the tracker is in this module, so that it can be
re-pointed in one place when the orchestration changes. It uses only
``make_tracker`` (a scratch one given settings naming its own SQLite file), the store's ``repos.get``/``add``, ``revisions.commit_graph``/``get``,
``advisories.list``/``ids_for_commits``, ``blobs.get_blob`` and ``pages.estimate_in_force``,
``Tracker.poll`` and ``Tracker.query``.

A repo the user watches is polled (so the head is current) and queried in
their store. A repo nobody watches is read without touching their watch list:

1. a scratch tracker over a throw-away SQLite file reads only the head and
   places each pin on the branch, which says how many commits it is behind;
2. a second scratch tracker (or, with ``--watch``, the user's own store)
   reads the history from the commit before the oldest pin up to the head,
   at most ``history`` revisions, so the pins' own revisions are analysed
   and every later change counts; a pin older than that is said to be.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol

from tracker.core.advisory.record import Advisory
from tracker.core.errors import TrackerError, first_line
from tracker.core.model import AdvisoryRow, RepoId, Severity, Snapshot
from tracker.pipeline.ports import Store
from tracker.pipeline.scan.advice import Open, explain, suggest
from tracker.pipeline.scan.card import model_facts
from tracker.pipeline.scan.model import AdvisoryHit, ModelFacts, PinStatus

log = logging.getLogger("tracker.scan.source")  # the name operators filter logs by, not the module path

INVALID_REVISION = "not a revision name git allows (spaces, control characters or ~^:?*[\\): not looked up"
_GIT_REFUSES = frozenset(" ~^:?*[\\")


def plausible_revision(ref: str) -> bool:
    """Whether ``ref`` could name a commit, branch or tag: printable, and none of the characters git refuses
    in a ref name (a revision literal in code is a stranger's text; what no Hub has is not asked for)."""
    return 0 < len(ref) <= 255 and ref.isprintable() and not _GIT_REFUSES.intersection(ref)

HISTORY = 100  # revisions read, at most, for a repo nobody watches


class _Query(Protocol):
    """What the scan reads from an advisory query (``tracker query``'s result)."""

    revision: str
    vulns: list[AdvisoryRow]  # worst first
    head: str | None
    behind: int | None
    known: bool


class _Poll(Protocol):
    @property
    def repo(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...


class _Repo(Protocol):
    @property
    def pk(self) -> int: ...
    @property
    def branch(self) -> str: ...
    @property
    def last_seen_sha(self) -> str | None: ...


class _Advisory(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def severity(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def record(self) -> Advisory: ...


class _Revision(Protocol):
    @property
    def seq(self) -> int: ...
    @property
    def snapshot(self) -> Snapshot | None: ...
    @property
    def estimate(self) -> dict[str, Any] | None: ...


class TrackerLike(Protocol):
    """The slice of ``tracker.app.Tracker`` the scan uses."""

    @property
    def store(self) -> Store: ...
    @property
    def hub(self) -> Any: ...  # handed on to the scratch trackers, never called here

    def poll(self, repo_ids: Iterable[str] | None = None, *, backfill: int = 0) -> Sequence[_Poll]: ...
    def query(self, repo_id: str, revision: str) -> _Query: ...
    def close(self) -> None: ...


def _severity(value: object) -> Severity:
    try:
        return Severity(str(value).lower())
    except ValueError:
        return Severity.INFO


def _hit(record: Advisory) -> AdvisoryHit:
    specific = record.specific
    return AdvisoryHit(id=record.id, severity=_severity(specific.severity or ""), kind=specific.kind or "",
                       summary=record.summary or "", details=record.details or "", published=record.published,
                       modified=record.modified, urls=tuple((r.type, r.url) for r in record.references))


def _by_severity(advisory: _Advisory) -> tuple[int, str]:
    """Worst first, as ``tracker query`` lists them (an unknown severity last)."""
    try:
        return Severity(advisory.severity).rank, advisory.id
    except ValueError:
        return 9, advisory.id


@dataclass
class _Answer:
    """A query's answer for a commit on the line read (the shape of ``tracker query``'s result)."""

    revision: str
    vulns: list[AdvisoryRow]
    head: str | None
    behind: int | None
    known: bool = True


@dataclass
class _Branch:
    """A repo's branch as one store holds it: the first-parent line from the head, and what is open on it."""

    head: str | None
    line: list[tuple[str, Open]] = field(default_factory=list)  # newest first
    position: dict[str | None, int] = field(default_factory=dict)  # sha -> commits behind the head
    records: dict[str, list[AdvisoryRow]] = field(default_factory=dict)  # sha -> its open advisories

    def answer(self, sha: str | None) -> _Answer:
        assert sha is not None
        return _Answer(revision=sha, vulns=self.records[sha], head=self.head, behind=self.position[sha])


def _reason(view: _Branch, revision: str, hits: tuple[AdvisoryHit, ...], suggested: str | None) -> str | None:
    """Why ``suggested`` rather than ``revision`` (None when they are the same, or nothing is suggested)."""
    if suggested is None or suggested == revision or suggested not in view.records:
        return None
    target = [(a.id, _severity(a.severity), a.kind) for a in view.records[suggested]]
    line = [{a.id for a in view.records[sha]} for sha, _ in view.line]
    older = revision in view.position and view.position[suggested] > view.position[revision]
    return explain([(h.id, h.severity, h.kind) for h in hits], target, line, older=older)


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:  # str() of a KeyError quotes its argument
        text = str(exc.args[0]).strip()
        return text.splitlines()[0] if text else type(exc).__name__
    return first_line(exc)


def _now() -> datetime:
    return datetime.now(UTC)


class ScanHubSection(Protocol):
    """``[hub]``: the Hub budget of a run."""

    @property
    def budget_api_per_5min(self) -> int: ...
    @property
    def budget_resolvers_per_5min(self) -> int: ...


class ScanDatabaseSection(Protocol):
    """``[database]``, a dataclass, so that a scratch tracker's can name its own database."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


class ScanSettings(Protocol):
    """What the scan reads of the settings (``tracker.adapters.settings.Settings``): the Hub budget of a run, and
    a dataclass's fields, so that a scratch tracker's settings are the same but for their own database."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def hub(self) -> ScanHubSection: ...
    @property
    def database(self) -> ScanDatabaseSection: ...


# The composition root's make_tracker, handed in by the command (the pipeline does not import the root).
NewTracker = Callable[..., TrackerLike]


class AdvisorySource:
    """Pin statuses for the references a scan found, from the user's tracker or scratch ones.

    ``tracker`` is the user's (its store holds their watch list), or None
    when they have no store yet; ``watch`` adds the repos found to it.
    """

    def __init__(self, settings: ScanSettings, *, tracker: TrackerLike | None, new_tracker: NewTracker,
                 watch: bool = False, history: int = HISTORY, cards: bool = False) -> None:
        if watch and tracker is None:
            raise ValueError("--watch needs the tracker's store")
        self.settings = settings
        self.tracker = tracker
        self.new_tracker = new_tracker  # builds a scratch tracker for repos the user does not watch
        self.watch = watch
        self.history = history
        self.cards = cards  # read each revision's model facts (for CycloneDX model cards)
        self.added: list[RepoId] = []  # repos --watch added to the watch list
        self.from_store: set[RepoId] = set()  # repos answered from the user's store (they watch them)
        self._dir: Path | None = None
        self._scratch: list[TrackerLike] = []
        self._hub: Any = tracker.hub if tracker is not None else None
        self._lock = threading.Lock()  # lookups of different repos run in threads
        self._branches: dict[tuple[int, str], _Branch] = {}
        self._facts_seen: dict[tuple[str | None, ...], ModelFacts | None] = {}  # by config, card and estimate
        self._refreshed: dict[str, str | None] = {}  # watched repo -> the error of its poll in refresh()

    def __enter__(self) -> AdvisorySource:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for scratch in self._scratch:
            scratch.close()
        self._scratch.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _new_scratch(self) -> TrackerLike:
        with self._lock:
            if self._dir is None:
                self._dir = Path(tempfile.mkdtemp(prefix="tracker-scan-"))
            url = f"sqlite:///{self._dir}/scratch-{len(self._scratch)}.sqlite3"
            # the scratch tracker opens its store, and closes it with itself
            own = dataclasses.replace(self.settings.database, url=url)
            scratch = self.new_tracker(dataclasses.replace(self.settings, database=own), hub=self._hub)
            self._hub = scratch.hub
            self._scratch.append(scratch)
            return scratch

    @property
    def requests_by_bucket(self) -> dict[str, int]:
        """The Hub requests this run has sent, per rate-limit bucket (none before a repo is read)."""
        counts = getattr(self._hub, "requests_by_bucket", None)
        return dict(counts) if isinstance(counts, dict) else {}

    def _budget_spent(self) -> str | None:
        """Why a repo nobody watches is not read: this run has sent a 5-minute window's Hub budget.

        The budget is ``[hub] budget_api_per_5min`` and ``budget_resolvers_per_5min``, the
        daemon's; a repo starts only while both have room, so a large cache or codebase does not
        burst past the Hub's rate limits (it may overrun by what the repos already started read).
        """
        counts = self.requests_by_bucket
        if not counts:
            return None
        api, resolvers = counts.get("api", 0), counts.get("resolvers", 0)
        if api < self.settings.hub.budget_api_per_5min and resolvers < self.settings.hub.budget_resolvers_per_5min:
            return None
        return (f"not read from the Hub: this run has sent its Hub request budget ({api} api and {resolvers} "
                f"resolvers requests; [hub] budget_api_per_5min = {self.settings.hub.budget_api_per_5min}, "
                f"budget_resolvers_per_5min = {self.settings.hub.budget_resolvers_per_5min}): watch the repo, "
                "or run again later")

    # -- the lookup -------------------------------------------------------------------------------

    def refresh(self, repos: Iterable[RepoId]) -> None:
        """Poll the watched ones among ``repos`` in one cycle, before their lookups.

        One cycle over many repos is much cheaper than one per repo: the Hub-wide change
        listing vouches for every repo that did not change. A repo the cycle did not report
        (another process was polling it) is polled again by its lookup.
        """
        if self.tracker is None:
            return
        store = self.tracker.store
        watched = [repo for repo in dict.fromkeys(repos) if store.repos.get(repo) is not None]
        if not watched:
            return
        try:
            errors = {result.repo: result.error for result in self.tracker.poll(watched)}
        except (TrackerError, LookupError) as exc:
            errors = dict.fromkeys(watched, _message(exc))
        with self._lock:
            self._refreshed.update({repo: errors[repo] for repo in watched if repo in errors})

    def lookup(self, repo: RepoId, refs: Sequence[str | None]) -> dict[str | None, PinStatus]:
        """The status of each revision of ``repo`` as written in the code (None: no revision given)."""
        refs = list(dict.fromkeys(refs))
        invalid: dict[str | None, PinStatus] = {ref: PinStatus(repo=repo, ref=ref, notes=(INVALID_REVISION,))
                                                for ref in refs if ref is not None and not plausible_revision(ref)}
        refs = [ref for ref in refs if ref not in invalid]
        if not refs:
            return invalid
        try:
            return {**self._lookup(repo, refs), **invalid}
        except (TrackerError, LookupError) as exc:
            note = _message(exc)
        except Exception as exc:  # one repo's surprise must not cost the whole report; logged in full
            log.exception("scan: looking up %s failed", repo)
            note = f"lookup failed: {type(exc).__name__}: {_message(exc)}"
        return {**{ref: PinStatus(repo=repo, ref=ref, notes=(note,)) for ref in refs}, **invalid}

    def _lookup(self, repo: RepoId, refs: list[str | None]) -> dict[str | None, PinStatus]:
        row = self.tracker.store.repos.get(repo) if self.tracker is not None else None
        if row is not None and self.tracker is not None:
            with self._lock:
                self.from_store.add(repo)
                refreshed = repo in self._refreshed
                error = self._refreshed.get(repo)
            if not refreshed:
                (polled,) = self.tracker.poll([repo])
                error = polled.error
            stale = () if error is None else (f"could not refresh from the Hub ({error}); as of the last poll",)
            return {ref: self._status(self.tracker, repo, ref, row.branch, stale) for ref in refs}

        spent = self._budget_spent()
        if spent is not None:
            return {ref: PinStatus(repo=repo, ref=ref, notes=(spent,)) for ref in refs}
        probe = self._new_scratch()
        probe.store.repos.add(repo, now=_now())
        (polled,) = probe.poll([repo], backfill=0)
        if polled.status != "baseline":
            note = f"not read from the Hub: {polled.error or polled.status}"
            return {ref: PinStatus(repo=repo, ref=ref, notes=(note,)) for ref in refs}
        distances: dict[str | None, int | None] = {}
        for ref in refs:
            try:
                distances[ref] = probe.query(repo, ref or "main").behind
            except (TrackerError, LookupError):
                distances[ref] = None  # said again, in full, by the status below
        deepest = max((d for d in distances.values() if d is not None), default=0)
        backfill = min(deepest + 1, self.history)

        if self.watch and self.tracker is not None:
            target = self.tracker
            target.store.repos.add(repo, now=_now())
            with self._lock:
                self.added.append(repo)
        else:
            target = self._new_scratch()
            target.store.repos.add(repo, now=_now())
        (polled,) = target.poll([repo], backfill=backfill)
        if polled.error is not None:
            note = f"not read from the Hub: {polled.error}"
            return {ref: PinStatus(repo=repo, ref=ref, notes=(note,)) for ref in refs}
        statuses = {}
        for ref in refs:
            distance = distances[ref]
            notes: tuple[str, ...] = ()
            if distance is not None and distance + 1 > backfill:
                notes = (f"{distance} revisions behind: only the newest {self.history} were read, "
                         "older changes are not analysed",)
            statuses[ref] = self._status(target, repo, ref, "main", notes)
        return statuses

    def _status(self, tracker: TrackerLike, repo: RepoId, ref: str | None, branch: str,
                notes: tuple[str, ...]) -> PinStatus:
        view = self._branch(tracker, repo)
        try:
            # A commit on the line read is answered from it; anything else (a branch or tag name, an
            # older or unknown commit) is placed by the tracker's query.
            found: _Query = view.answer(ref) if ref in view.position else tracker.query(repo, ref or branch)
        except (TrackerError, LookupError) as exc:
            return PinStatus(repo=repo, ref=ref, notes=(*notes, _message(exc)))
        if not found.known:
            notes = (*notes, f"{ref or branch} is not in the history of {branch} as read from the Hub")
        hits = tuple(_hit(advisory.record) for advisory in found.vulns)
        pinned = (found.revision, [(h.severity, h.kind) for h in hits]) if found.known else None
        suggested = suggest(view.line, pinned=pinned) if found.head is not None else None
        facts = self._facts(tracker, repo, found.revision) if self.cards and found.known else None
        reason = _reason(view, found.revision, hits, suggested) if found.known else None
        return PinStatus(repo=repo, ref=ref, revision=found.revision if found.known else None, head=found.head,
                         behind=found.behind, advisories=hits, suggested=suggested, notes=notes, facts=facts,
                         reason=reason)

    def _facts(self, tracker: TrackerLike, repo: RepoId, sha: str) -> ModelFacts | None:
        """The model facts of a revision the store read: its config.json, card and memory estimate.

        Revisions of a repo mostly share their config and card, so their blobs and the facts
        drawn from them are read once per content, not once per revision.
        """
        store = tracker.store
        row = store.repos.get(repo)
        revision = store.revisions.get(row.pk, sha) if row is not None else None
        if row is None or revision is None or revision.snapshot is None:
            return None
        files = revision.snapshot.by_path()
        estimate = revision.estimate
        if not (estimate is not None and estimate.params):
            # the estimate in force: the newest at or before it
            in_force = store.pages.estimate_in_force(row.pk, revision.seq)
            estimate = in_force[1] if in_force is not None else None
        contents = tuple(files[p].content_id if p in files else None for p in ("config.json", "README.md"))
        key = (*contents, json.dumps(estimate.to_json() if estimate else None, sort_keys=True, default=str))
        with self._lock:
            if key in self._facts_seen:
                return self._facts_seen[key]
        config, readme = (store.blobs.get_blob(c) if c is not None else None for c in contents)
        facts = model_facts(config=config, readme=readme, estimate=estimate)
        with self._lock:
            self._facts_seen[key] = facts
        return facts

    def _branch(self, tracker: TrackerLike, repo: RepoId) -> _Branch:
        """The branch's first-parent line from the head, newest first, each commit with its open advisories.

        Read once per (store, repo), in four queries whatever the number of revisions looked up:
        every revision of the repo shares it, for the advice and, when it sits on the line, for
        its own status.
        """
        key = (id(tracker), repo)
        with self._lock:
            cached = self._branches.get(key)
        if cached is not None:
            return cached
        store = tracker.store
        row = store.repos.get(repo)
        view = _Branch(head=row.last_seen_sha if row is not None else None)
        if row is not None and row.last_seen_sha is not None:
            parents = store.revisions.commit_graph(row.pk)
            shas: list[str] = []
            current: str | None = row.last_seen_sha
            while current is not None and current not in view.position and len(shas) <= self.history:
                view.position[current] = len(shas)
                shas.append(current)
                above = parents.get(current) or []
                current = above[0] if above else None
            live = {a.id: a for a in store.advisories.find(repo_pk=row.pk, include_withdrawn=False)}
            index = store.advisories.ids_for_commits(shas, row.pk) if live else {}
            for sha in shas:
                open_here = sorted((live[i] for i in index.get(sha, ()) if i in live), key=_by_severity)
                view.records[sha] = open_here
                view.line.append((sha, [(_severity(a.severity), a.kind) for a in open_here]))
        with self._lock:
            self._branches[key] = view
        return view
