"""The model tree: the base model a repo's card declares, and watching a derivative's base chain.

A model card's front matter names the model it was made from in ``base_model``: a repo id, or a
list of them (merges list several; the first is taken as *the* base). The front matter is read
with the bounded reader of the licence findings (:func:`tracker.findings.licence.front_matter`).
The relation is stored on the repo (``repos.base_repo_id``): set by
``tracker watch add REPO --with-base`` from the card at the head, and refreshed by every polled
revision that changes the README (tracker/processing.py). It is what inherited advisories follow
(tracker/inherit.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from tracker.errors import EntryGone
from tracker.findings.licence import README, front_matter
from tracker.model import RepoId, validate_repo_id
from tracker.ports import HubReader
from tracker.store import SqlStore

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


def watch_base_chain(store: SqlStore, hub: HubReader, repo_id: RepoId, *, branch: str = "main",
                     every: float | None = None, now: datetime, max_depth: int = MAX_DEPTH) -> Chain:
    """Watch the bases above a watched repo, reading each card at its head, and record each relation.

    At most ``max_depth`` levels; a cycle, an invalid ``base_model`` or a base the Hub does not have
    stops the chain with ``problem`` set (nothing is watched for it). Bases already watched keep their
    branch and interval; new ones follow ``main`` every ``every``. Hub errors about ``repo_id``
    itself propagate (the caller says them in one line).
    """
    from tracker.errors import RepoGone

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
        known = store.get_repo(base)
        created = known is None
        if created:
            store.add_watch(base, every=every, now=now)
        row = store.get_repo(current)
        if row is not None:
            store.update_repo(row.pk, base_repo_id=base)
        chain.links.append((current, base, created))
        seen.append(base)
        current, card = base, next_card
    if card.repo_id is not None:
        chain.note = (f"{current} declares base_model {card.repo_id}: not followed, the chain is limited to "
                      f"{max_depth} levels")
    return chain
