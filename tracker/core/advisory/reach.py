"""A reachability index over a repo's commit graph, linear in its commits: pure, no I/O.

Each commit gets a **label** ``(chain, pos)``: chains are first-parent paths. A commit whose
first parent is the tip of its chain extends that chain (``pos + 1``); any other commit (a
root, or a fork off an older commit: a rewritten history, a re-created repo) starts a new
chain. A chain remembers its **reach**: for each other chain, the highest position that its
first commit descends from (the fork's ancestry). Merges (a second parent) are rare: each adds
an entry to its chain's ``merges``, the reach gained from that position on.

Because a commit's first parent is its predecessor on the chain, the ancestors of any commit
on any chain form a prefix of that chain. So "is A an ancestor of X" is one look-up in X's
reach (its chain's reach, the merges up to X's position found by bisection, and X's own
chain): O(log m) for m merges on the chain, O(1) on first-parent histories.

An advisory's ``GIT`` range (``introduced`` / ``fixed`` events) affects a commit when an
introduced commit is an ancestor of it (itself included) and no fixed one is; the affected
commits of one chain are then one **span** ``[lo, hi]`` of positions (both conditions only
switch on along a chain). An advisory is stored as its spans: one row per chain it touches,
``hi = OPEN`` while no fix has reached the chain. A new commit that extends a chain changes no
span; a new chain or a merge adds or cuts at most one span per advisory.

``introduced: "0"`` follows OSV.dev (see ``affected.py``): the roots that are ancestors of a
``fixed`` commit in the graph, or every root when none is. ``last_affected`` and ``limit`` are
not written by the tracker and are not indexed here (``affected.affected_commits`` evaluates
them).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LISTED_KINDS", "OPEN", "Chain", "ChainUpdate", "Label", "ReachIndex", "Span", "events_of", "ranged", "span_for_chain",
           "spans_for"]

OPEN = 2**31 - 1  # ``hi`` of a span that no fix has closed (fits a 32-bit integer column)

# Repo-event advisories that name the revisions they concern instead of a range the tracker evaluates.
LISTED_KINDS = frozenset({"history_rewritten", "renamed", "deleted", "gated"})


def ranged(kind: str) -> bool:
    """Whether an advisory of ``kind`` affects what its GIT range says (else: the commits it lists)."""
    return kind not in LISTED_KINDS


@dataclass(frozen=True)
class Label:
    chain: int
    pos: int


@dataclass
class Chain:
    """One first-parent path: where it forks from (``reach``), its tree's root chain, its tip and merges."""

    id: int
    root: int
    reach: dict[int, int] = field(default_factory=dict)  # other chain -> highest ancestor position
    tip: int = 0
    merges: list[tuple[int, dict[int, int]]] = field(default_factory=list)  # (pos, reach from there on)
    starts_at_root: bool = True  # its first commit has no parents

    def to_json(self) -> dict[str, Any]:
        return {"reach": {str(k): v for k, v in self.reach.items()},
                "merges": [[p, {str(k): v for k, v in r.items()}] for p, r in self.merges]}

    @staticmethod
    def from_json(id: int, root: int, tip: int, starts_at_root: bool, data: Mapping[str, Any] | None) -> Chain:
        data = data or {}
        return Chain(id=id, root=root, tip=tip, starts_at_root=starts_at_root,
                     reach={int(k): int(v) for k, v in (data.get("reach") or {}).items()},
                     merges=[(int(p), {int(k): int(v) for k, v in r.items()}) for p, r in data.get("merges") or []])


@dataclass(frozen=True)
class Span:
    chain: int
    lo: int
    hi: int  # OPEN: to the chain's end, whatever it grows to


@dataclass(frozen=True)
class ChainUpdate:
    """What adding commits changed: new labels, chains created, chains whose tip, merges or reach moved."""

    labels: dict[str, Label]
    created: frozenset[int]
    touched: frozenset[int]  # chains (new or old) whose spans may need recomputing: new ones and merges


def _merge_max(into: dict[int, int], other: Mapping[int, int]) -> None:
    for chain, pos in other.items():
        if pos > into.get(chain, -1):
            into[chain] = pos


class ReachIndex:
    """Labels and chains of one repo (all of them, or the part a store read for one question)."""

    def __init__(self, chains: Iterable[Chain] = (), labels: Mapping[str, Label] | None = None,
                 next_chain: int | None = None) -> None:
        self.chains: dict[int, Chain] = {c.id: c for c in chains}
        self.labels: dict[str, Label] = dict(labels or {})
        self._next = next_chain if next_chain is not None else max(self.chains, default=0) + 1

    # -- reach ------------------------------------------------------------------------------

    def reach_of(self, label: Label) -> dict[int, int]:
        """Every chain's highest position that the commit at ``label`` descends from (itself included)."""
        chain = self.chains[label.chain]
        reach = dict(chain.reach)
        if chain.merges:
            i = bisect.bisect_right([p for p, _ in chain.merges], label.pos) - 1
            if i >= 0:
                _merge_max(reach, chain.merges[i][1])
        reach[label.chain] = max(reach.get(label.chain, -1), label.pos)
        return reach

    def is_ancestor(self, ancestor: Label, commit: Label) -> bool:
        """Whether ``ancestor`` is ``commit`` or one of its ancestors."""
        if ancestor.chain == commit.chain:
            return ancestor.pos <= commit.pos
        chain = self.chains[commit.chain]
        if chain.reach.get(ancestor.chain, -1) >= ancestor.pos:
            return True
        if not chain.merges:
            return False
        i = bisect.bisect_right([p for p, _ in chain.merges], commit.pos) - 1
        return i >= 0 and chain.merges[i][1].get(ancestor.chain, -1) >= ancestor.pos

    def first_reaching(self, chain_id: int, target: Label) -> int | None:
        """The lowest position of chain ``chain_id`` that descends from ``target`` (None: none does yet)."""
        chain = self.chains[chain_id]
        if target.chain == chain_id:
            return target.pos if target.pos <= chain.tip else None
        if chain.reach.get(target.chain, -1) >= target.pos:
            return 0
        for pos, reach in chain.merges:
            if reach.get(target.chain, -1) >= target.pos:
                return pos
        return None

    # -- growing ----------------------------------------------------------------------------

    def add(self, commits: Sequence[tuple[str, Sequence[str]]]) -> ChainUpdate:
        """Label new commits, oldest first (``(sha, parents)``, first parent first); known ones are skipped.

        A parent the index does not know becomes a root first (it is a commit, with unknown parents).
        """
        new: dict[str, Label] = {}
        created: set[int] = set()
        touched: set[int] = set()
        for sha, parents in commits:
            if sha in self.labels:
                continue
            for parent in parents:
                if parent not in self.labels and parent != sha:
                    self._add_one(parent, (), new, created, touched)
            self._add_one(sha, [p for p in parents if p != sha], new, created, touched)
        return ChainUpdate(labels=new, created=frozenset(created), touched=frozenset(touched))

    def _new_chain(self, root: int | None, reach: dict[int, int], starts_at_root: bool) -> Chain:
        chain_id = self._next
        self._next += 1
        chain = Chain(id=chain_id, root=root if root is not None else chain_id, reach=reach, tip=0,
                      starts_at_root=starts_at_root)
        self.chains[chain_id] = chain
        return chain

    def _add_one(self, sha: str, parents: Sequence[str], new: dict[str, Label], created: set[int],
                 touched: set[int]) -> None:
        if sha in self.labels:
            return
        if not parents:
            chain = self._new_chain(None, {}, True)
            label = Label(chain.id, 0)
            created.add(chain.id)
            touched.add(chain.id)
        else:
            first = self.labels[parents[0]]
            parent_chain = self.chains[first.chain]
            if parent_chain.tip == first.pos:
                parent_chain.tip += 1
                label = Label(first.chain, parent_chain.tip)
            else:
                chain = self._new_chain(parent_chain.root, self.reach_of(first), False)
                label = Label(chain.id, 0)
                created.add(chain.id)
                touched.add(chain.id)
            extra = [self.labels[p] for p in parents[1:] if p in self.labels]
            if extra:
                gained: dict[int, int] = {}
                for p in extra:
                    _merge_max(gained, self.reach_of(p))
                chain = self.chains[label.chain]
                if label.pos == 0:
                    _merge_max(chain.reach, gained)
                else:
                    cumulative = dict(chain.merges[-1][1]) if chain.merges else {}
                    _merge_max(cumulative, gained)
                    chain.merges.append((label.pos, cumulative))
                touched.add(label.chain)
        self.labels[sha] = label
        new[sha] = label

    # -- advisories -------------------------------------------------------------------------

    def roots_reaching(self, fixed: Iterable[Label]) -> set[int] | None:
        """Root chains whose root commit is an ancestor of some ``fixed`` commit (None: no fixed, all roots)."""
        fixed = list(fixed)
        if not fixed:
            return None
        roots = set()
        for f in fixed:
            for chain_id in self.reach_of(f):
                chain = self.chains.get(chain_id)
                if chain is not None and chain.starts_at_root:
                    roots.add(chain_id)
        return roots

    def affected(self, events: Sequence[Mapping[str, str]], commit: Label) -> bool:
        """Whether one range's events affect the commit at ``commit`` (labels of event commits looked up here)."""
        introduced, fixed, zero = self.resolve(events)
        if any(self.is_ancestor(f, commit) for f in fixed):
            return False
        if any(self.is_ancestor(i, commit) for i in introduced):
            return True
        if zero:
            roots = self.roots_reaching(fixed)
            reach = self.reach_of(commit)
            return any(self.chains[c].starts_at_root and (roots is None or c in roots) for c in reach)
        return False

    def resolve(self, events: Sequence[Mapping[str, str]]) -> tuple[list[Label], list[Label], bool]:
        """A range's events as labels: (introduced, fixed, whether it is introduced at "0", the first commit).

        Events naming a commit this index does not hold are left out.
        """
        introduced, fixed, zero = [], [], False
        for event in events:
            for key, value in event.items():
                value = str(value).lower()
                if key == "introduced":
                    if value == "0":
                        zero = True
                    elif value in self.labels:
                        introduced.append(self.labels[value])
                elif key == "fixed" and value in self.labels:
                    fixed.append(self.labels[value])
        return introduced, fixed, zero


def events_of(record: Mapping[str, Any]) -> list[dict[str, str]]:
    """The events of a record's GIT ranges (the tracker writes one range per record)."""
    return [e for a in record.get("affected") or [] for r in a.get("ranges") or [] if r.get("type") == "GIT"
            for e in r.get("events") or []]


def span_for_chain(index: ReachIndex, events: Sequence[Mapping[str, str]], chain_id: int) -> Span | None:
    """The positions of one chain that a range affects, or None when it affects none of them."""
    introduced, fixed, zero = index.resolve(events)
    starts = [p for p in (index.first_reaching(chain_id, i) for i in introduced) if p is not None]
    if zero:
        roots = index.roots_reaching(fixed)
        for pos, reach in [(0, index.reach_of(Label(chain_id, 0)))] + [
                (p, r) for p, r in index.chains[chain_id].merges]:
            if any(index.chains[c].starts_at_root and (roots is None or c in roots) for c in reach
                   if c in index.chains):
                starts.append(pos)
                break
    if not starts:
        return None
    lo = min(starts)
    stops = [p for p in (index.first_reaching(chain_id, f) for f in fixed) if p is not None]
    hi = min(stops) - 1 if stops else OPEN
    return Span(chain_id, lo, hi) if hi >= lo else None


def spans_for(index: ReachIndex, events: Sequence[Mapping[str, str]],
              chains: Iterable[int] | None = None) -> list[Span]:
    """An advisory's spans over ``chains`` (default: every chain of the index)."""
    out = []
    for chain_id in sorted(index.chains if chains is None else chains):
        span = span_for_chain(index, events, chain_id)
        if span is not None:
            out.append(span)
    return out
