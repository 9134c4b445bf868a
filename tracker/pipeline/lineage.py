"""The model tree: the base model a repo's card declares, and watching a derivative's base chain.

A model card's front matter names the model it was made from in ``base_model``: a repo id, or a
list of them (merges list several; the first is taken as *the* base). The front matter is read
with the bounded reader of the licence findings (:func:`tracker.core.findings.licence.front_matter`).
The relation is stored on the repo (``repos.base_repo_id``): set by
``tracker watch add REPO --with-base`` from the card at the head, and refreshed by every polled
revision that changes the README. It is what inherited advisories follow: ``ModelTree`` gathers,
for the revision being processed, what the pure comparison in tracker/core/inherit.py needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracker.core.advisory import inherited_id
from tracker.core.bounded import json_object
from tracker.core.errors import EntryGone
from tracker.core.findings.licence import README, front_matter
from tracker.core.inherit import (
    INHERITABLE,
    BaseChange,
    Contents,
    Derivative,
    InheritInputs,
    base_change,
    inheritable_paths,
)
from tracker.core.model import (
    AdvisoryKind,
    AdvisoryRow,
    RawDiff,
    RepoId,
    RepoRow,
    RevisionRow,
    RevisionStatus,
    Snapshot,
    validate_repo_id,
)
from tracker.core.report import AdvisoryContext
from tracker.pipeline.ports import HubReader, Store
from tracker.pipeline.reads import AdvisoryReads
from tracker.pipeline.sources import HubSources

MAX_DEPTH = 4
"""How many bases above a repo ``--with-base`` follows (a quantization of a fine-tune of a base is 2)."""

README_MAX_BYTES = 4 * 1024 * 1024  # the front matter is capped far below; a card is rarely over 100 kB


@dataclass(frozen=True)
class DeclaredBase:
    """What a card says about its base model."""

    repo_id: RepoId | None  # the base (the first one when the card lists several); None: none usable
    problem: str | None = None  # why the card's base_model cannot be used
    readable: bool = True  # False: the front matter could not be read, so what was known stands


def declared_base(readme: bytes | None, repo_id: str | None = None) -> DeclaredBase:
    """The base model a README's front matter declares (None without a README or a ``base_model``).

    A repo that names itself is refused like an invalid id: it is no base.
    """
    if readme is None:
        return DeclaredBase(None)
    meta, problem = front_matter(readme)
    if problem is not None:
        return DeclaredBase(None, f"its card's front matter is unusable ({problem})", readable=False)
    value = meta.get("base_model")
    if value is None or value == "" or value == []:
        return DeclaredBase(None)
    first = value[0] if isinstance(value, list) else value
    if not isinstance(first, str):
        return DeclaredBase(None, f"its card's base_model is a {type(first).__name__}, not a repo id")
    try:
        base = validate_repo_id(first.strip())
    except ValueError as exc:
        return DeclaredBase(None, f"its card's base_model is not usable: {exc}")
    if repo_id is not None and base.lower() == repo_id.lower():
        return DeclaredBase(None, f"its card names itself ({base}) as its base_model")
    return DeclaredBase(base)


@dataclass(frozen=True)
class TreeRead:
    """The revision the model tree is read for: its repo's advisories, its files, the revision before it."""

    ctx: AdvisoryContext
    snapshot: Snapshot
    prior: RevisionRow | None  # the revision compared with; None on a first revision
    strict: bool  # a transient Hub failure while reading raises (the revision is read again later)
    reads: AdvisoryReads = field(default_factory=AdvisoryReads)  # the advisories read, for the save's check


@dataclass
class Chain:
    """What ``watch_base_chain`` did: each (derivative, base, newly watched) link, and why it stopped."""

    links: list[tuple[RepoId, RepoId, bool]] = field(default_factory=list)
    problem: str | None = None  # the chain was refused here (an invalid id, a cycle, a base not on the Hub)
    note: str | None = None  # it stopped at the depth limit


def read_card(hub: HubReader, repo_id: RepoId, branch: str = "main") -> DeclaredBase:
    """The base declared by the card at a branch head on the Hub (two requests; HubError when the repo is not there)."""
    head = hub.head(repo_id, branch)
    try:
        readme = hub.read_file(repo_id, head.sha, README, max_bytes=README_MAX_BYTES)
    except EntryGone:
        readme = None
    return declared_base(readme, repo_id)


def watch_base_chain(store: Store, hub: HubReader, repo_id: RepoId, *, branch: str = "main",
                     every: float | None = None, now: datetime, max_depth: int = MAX_DEPTH) -> Chain:
    """Watch the bases above a watched repo, reading each card at its head, and record each relation.

    At most ``max_depth`` levels; a cycle, an invalid ``base_model`` or a base the Hub does not have
    stops the chain with ``problem`` set (nothing is watched for it). Bases already watched keep their
    branch and interval; new ones follow ``main`` every ``every``. Hub errors about ``repo_id``
    itself propagate (the caller says them in one line).
    """
    from tracker.core.errors import RepoGone

    chain = Chain()
    seen = [repo_id]
    current = repo_id
    card = read_card(hub, repo_id, branch)
    for _ in range(max_depth):
        if card.problem is not None:
            chain.problem = f"{current}: {card.problem}; its base is not watched"
            return chain
        base = card.repo_id
        if base is None:
            return chain
        if base.lower() in {s.lower() for s in seen}:
            chain.problem = (f"{current}: base_model {base} makes a cycle ({' -> '.join([*seen, base])}); "
                             "not followed")
            return chain
        try:
            next_card = read_card(hub, base)
        except RepoGone as exc:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            chain.problem = f"{current}: base_model {base} is not on the Hub ({reason}); not watched"
            return chain
        known = store.repos.get(base)
        created = known is None
        if created:
            store.repos.add(base, every=every, now=now)
        row = store.repos.get(current)
        if row is not None:
            store.repos.update(row.pk, base_repo_id=base)
        chain.links.append((current, base, created))
        seen.append(base)
        current, card = base, next_card
    if card.repo_id is not None:
        chain.note = (f"{current} declares base_model {card.repo_id}: not followed, the chain is limited to "
                      f"{max_depth} levels")
    return chain


# -- what a revision report compares along the tree ----------------------------------------------

SourcesFactory = Callable[..., HubSources]  # Processor.sources: (repo_id, *, old, new, strict) -> HubSources


def _contents(sources: HubSources, side: str, parse: set[str] | frozenset[str],
              parsed: dict[str, dict[str, Any] | None]) -> Contents | None:
    """One side's inheritable files (tracker/core/inherit.py), with the JSON of the ``parse`` paths read."""
    rev = sources.revisions.get(side)
    if rev is None:
        return None
    sha, snapshot = rev
    files = {f.path: f.content_id for f in snapshot.files if f.path in INHERITABLE}
    objects: dict[str, dict[str, Any]] = {}
    for path in sorted(parse):
        content_id = files.get(path)
        if content_id is None or not path.endswith(".json"):
            continue
        if content_id not in parsed:
            parsed[content_id] = json_object(sources.text(side, path))
        obj = parsed[content_id]
        if obj is not None:
            objects[path] = obj
    return Contents(sha=sha, files=files, json=objects)


class ModelTree:
    """Gathers what a revision report compares along the model tree (the pure part: tracker/core/inherit.py).

    For the revision being processed: the base its card declares (and whether that changed), the
    base's update advisories it must be checked against with what each changed, its own inheritable
    files, and — when it is a base — its watched derivatives as they stand.
    """

    def __init__(self, store: Store, *, sources: SourcesFactory,
                 diff_base: Callable[[RepoRow, RevisionRow], RevisionRow | None]) -> None:
        self.store = store
        self._sources = sources
        self._diff_base = diff_base

    def declared_base(self, repo: RepoRow, sources: HubSources, raw: RawDiff, snapshot: Snapshot, *,
                      baseline: bool) -> tuple[RepoId | None, dict[str, Any]]:
        """The base model the revision's card declares, and the repo update when it changed the relation."""
        if not baseline and "README.md" not in raw.touched():
            return repo.base_repo_id, {}
        readme = sources.text("new", "README.md") if snapshot.get("README.md") is not None else None
        if readme is None and snapshot.get("README.md") is not None:
            return repo.base_repo_id, {}  # the card cannot be read now: what was known stands
        declared = declared_base(readme, repo.repo_id)
        if not declared.readable:
            return repo.base_repo_id, {}
        if declared.repo_id == repo.base_repo_id:
            return repo.base_repo_id, {}
        return declared.repo_id, {"base_repo_id": declared.repo_id}

    def inputs(self, repo: RepoRow, read: TreeRead, *, sources: HubSources, raw: RawDiff, base_id: RepoId | None,
               relation_changed: bool) -> InheritInputs | None:
        """What the report needs along the model tree; None when the repo has neither a watched base nor
        watched derivatives nor open inherited advisories (nothing is read then)."""
        ctx, prior = read.ctx, read.prior
        derivatives = [d for d in self.store.repos.derivatives_of(repo.repo_id) if d.pk != repo.pk]
        base = self.store.repos.get(base_id) if base_id and base_id.lower() != repo.repo_id.lower() else None
        open_items = [item for a in ctx.advisories if a.kind == AdvisoryKind.INHERITED and not a.withdrawn
                      and not a.fixed_sha for item in a.record.specific.items]
        if not derivatives and base is None and not open_items:
            return None
        parsed: dict[str, dict[str, Any] | None] = {}  # JSON read once per content id
        touched = raw.touched() & set(INHERITABLE) if prior is not None else set(INHERITABLE)
        changes = self._base_changes(repo, base, read, touched=touched, relation_changed=relation_changed,
                                     parsed=parsed) if base is not None else []
        wanted = {p for c in changes for p in c.paths} | {i.path for i in open_items}
        as_base = derivatives if prior is not None and touched else []
        content = _contents(sources, "new", wanted | (touched if as_base else set()), parsed)
        assert content is not None
        before = _contents(sources, "old", touched, parsed) if as_base else None
        gathered = [d for d in (self._derivative(d, touched, parsed, read.reads) for d in as_base) if d is not None]
        return InheritInputs(content=content, before=before, derivatives=gathered, base_changes=changes)

    def _base_changes(self, repo: RepoRow, base: RepoRow, read: TreeRead, *, touched: set[str],
                      relation_changed: bool, parsed: dict[str, dict[str, Any] | None]) -> list[BaseChange]:
        """The base's update advisories this revision must be checked against.

        Skipped: those it already has an inherited advisory for, those on files it does not carry, and
        those its previous revision was already checked against with the same files (the advisory
        is older than that revision's analysis and this one changed none of its files).
        """
        ctx, prior = read.ctx, read.prior
        existing = ctx.inherited_ids | {a.id for a in ctx.advisories}
        carried = {f.path for f in read.snapshot.files if f.path in INHERITABLE}
        changes = []
        updates = [a for a in self.store.advisories.find(repo_pk=base.pk, versions=False) if a.kind == AdvisoryKind.UPDATE]
        read.reads.kind(base.pk, AdvisoryKind.UPDATE.value, {a.id: a.modified for a in updates})
        for adv in updates:
            if adv.withdrawn or adv.revision_sha is None:
                continue
            if inherited_id(repo.repo_id, adv.id) in existing:
                continue
            paths = inheritable_paths(adv.record) & carried
            if not paths:
                continue
            if (prior is not None and not relation_changed and not paths & touched and prior.analysed_at is not None
                    and adv.published <= prior.analysed_at):
                continue
            change = self._base_change(base, adv, strict=read.strict, parsed=parsed)
            if change is not None:
                changes.append(change)
        return changes

    def _base_change(self, base: RepoRow, adv: AdvisoryRow, *, strict: bool,
                     parsed: dict[str, dict[str, Any] | None]) -> BaseChange | None:
        """What a base's update advisory changed, from the base's stored revisions (blob cache, else the Hub)."""
        revision = self.store.revisions.get(base.pk, adv.revision_sha or "")
        if revision is None or revision.snapshot is None or revision.status != RevisionStatus.DONE:
            return None
        prior = self._diff_base(base, revision)
        old = (prior.sha, prior.snapshot) if prior is not None and prior.snapshot is not None else None
        sources = self._sources(base.repo_id, old=old, new=(revision.sha, revision.snapshot), strict=strict)
        paths = inheritable_paths(adv.record)
        after = _contents(sources, "new", paths, parsed)
        assert after is not None
        return base_change(adv.record, _contents(sources, "old", paths, parsed), after)

    def _derivative(self, repo: RepoRow, paths: set[str], parsed: dict[str, dict[str, Any] | None],
                    reads: AdvisoryReads) -> Derivative | None:
        """A watched derivative as it stands: its newest done revision's files. Its own read trouble
        never holds the base's revision back (not strict): its next revision is checked again anyway."""
        last = self.store.revisions.last_done(repo.pk)
        if last is None or last.snapshot is None:
            return None
        sources = self._sources(repo.repo_id, old=None, new=(last.sha, last.snapshot), strict=False)
        content = _contents(sources, "new", paths, parsed)
        assert content is not None
        return Derivative(repo_pk=repo.pk, repo_id=repo.repo_id, content=content,
                          advisory_ids=reads.kind(repo.pk, AdvisoryKind.INHERITED.value, self.store.advisories
                                                  .versions_of_kind(repo.pk, AdvisoryKind.INHERITED.value)))

