"""Which commits an OSV ``GIT`` range affects: pure commit-graph logic.

OSV.dev answers "which advisories affect commit X" by computing every affected
commit when a record is imported and indexing commit -> advisory ids; nothing
is walked at query time. The tracker does the same, and this module is the
"compute" half, following OSV.dev's ``osv/impact.py`` and gitter as described
in ``shared/osv/NOTES.md`` §2.6:

* ``introduced: X`` - X and every descendant of X (a BFS over child edges);
* ``introduced: "0"`` - "before everything": the root commits, restricted to
  the roots that are ancestors of some ``fixed`` commit when the range has one
  (a fix on one history says nothing about an unrelated root);
* ``fixed: F`` - F and all its descendants are *not* affected; the BFS from
  ``introduced`` does not enter them;
* ``last_affected: L`` (inclusive) - instead of the BFS, the commits on the
  first-parent path from L back to the nearest ``introduced`` commit,
  both ends included;
* ``limit: M`` - instead of the BFS, the commits on the first-parent path from
  M's first parent back to the nearest ``introduced`` commit (``git rev-list
  introduced..limit``: introduced included, limit excluded).

A range with ``limit`` or ``last_affected`` events yields the union of their
walks; ``fixed`` descendants are removed from every result. Event values that
are not in the graph contribute nothing (OSV.dev cannot resolve them either).

The graph is ``parents``: commit -> its parents, first parent first (git's
order; merges have several). Commits that appear only as parents are treated as
commits with unknown parents, i.e. roots. Everything is iterative, so a graph
of any depth is fine, and cycles (corrupt input) cannot loop forever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["affected_commits", "children_of", "commit_affected", "descendants", "graph_commits",
           "record_affected_commits"]


def graph_commits(parents: Mapping[str, list[str]]) -> set[str]:
    """Every commit of a ``parents`` graph: its keys and every parent they name."""
    commits = set(parents)
    for ps in parents.values():
        commits.update(ps)
    return commits


def children_of(parents: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Invert ``parents``: commit -> its children (every commit is a key)."""
    children: dict[str, list[str]] = {c: [] for c in graph_commits(parents)}
    for child, ps in parents.items():
        for p in ps:
            children[p].append(child)
    return children


def descendants(children: Mapping[str, list[str]], starts: Iterable[str]) -> set[str]:
    """``starts`` (those in the graph) and every commit reachable through child edges."""
    seen = {s for s in starts if s in children}
    queue = deque(seen)
    while queue:
        for child in children[queue.popleft()]:
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return seen


def ancestors(parents: Mapping[str, list[str]], starts: Iterable[str]) -> set[str]:
    """``starts`` and every commit reachable through parent edges."""
    seen = set(starts)
    queue = deque(seen)
    while queue:
        for p in parents.get(queue.popleft(), ()):
            if p not in seen:
                seen.add(p)
                queue.append(p)
    return seen


def _first_parent_walk(
    parents: Mapping[str, list[str]], start: str | None, introduced: set[str]
) -> set[str]:
    """Commits from ``start`` back along first parents to the nearest introduced one.

    Empty when the walk reaches a root without meeting an introduced commit:
    the range's end is then not a descendant of its start and nothing is affected.
    """
    path: list[str] = []
    seen: set[str] = set()
    current = start
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        if current in introduced:
            return set(path)
        ps = parents.get(current) or []
        current = ps[0] if ps else None
    return set()


def _value(event: Mapping[str, Any]) -> tuple[str, str]:
    if len(event) != 1:
        raise ValueError(f"an OSV event has exactly one key, got {sorted(event)}")
    ((key, value),) = event.items()
    if key not in ("introduced", "fixed", "last_affected", "limit"):
        raise ValueError(f"unknown OSV event {key!r}")
    if not isinstance(value, str):
        raise ValueError(f"OSV event {key!r} value must be a string, got {value!r}")
    return key, value.lower()


def affected_commits(parents: Mapping[str, list[str]], events: list[dict[str, Any]]) -> set[str]:
    """The commits of the graph that one GIT range's ``events`` affect.

    ``parents`` maps each commit to its parents (first parent first); ``events``
    is the range's ``events`` list. Returns a set of commit ids as they appear in
    ``parents`` (compare lower-case hex). See the module docstring for the rules.
    """
    by_kind: dict[str, list[str]] = {"introduced": [], "fixed": [], "last_affected": [], "limit": []}
    for event in events:
        key, value = _value(event)
        by_kind[key].append(value)
    if not by_kind["introduced"]:
        return set()

    commits = graph_commits(parents)
    children = children_of(parents)
    fixed = [f for f in by_kind["fixed"] if f in commits]

    introduced: set[str] = set()
    for value in by_kind["introduced"]:
        if value == "0":
            roots = {c for c in commits if not parents.get(c)}
            if fixed:
                roots &= ancestors(parents, fixed)
            introduced |= roots
        elif value in commits:
            introduced.add(value)

    unaffected = descendants(children, fixed)

    ends = [(v, True) for v in by_kind["last_affected"]] + [(v, False) for v in by_kind["limit"]]
    if ends:
        result: set[str] = set()
        for value, inclusive in ends:
            if value not in commits:
                continue
            if inclusive:
                start: str | None = value
            else:
                ps = parents.get(value) or []
                start = ps[0] if ps else None
            result |= _first_parent_walk(parents, start, introduced)
        return result - unaffected

    affected: set[str] = set()
    queue = deque(c for c in introduced if c not in unaffected)
    affected.update(queue)
    while queue:
        for child in children[queue.popleft()]:
            if child not in affected and child not in unaffected:
                affected.add(child)
                queue.append(child)
    return affected


def record_affected_commits(
    parents: Mapping[str, list[str]], record: Mapping[str, Any], repo_url: str | None = None
) -> set[str]:
    """Every commit an OSV record affects in this graph: its GIT ranges plus ``versions``.

    As in OSV, a commit is affected when any range affects it **or** it is listed
    in ``affected[].versions``; the tracker lists affected commits there so a
    record keeps its meaning after upstream squashes history, so listed commits
    count even when they are no longer in ``parents``. A withdrawn record affects
    nothing (OSV.dev drops withdrawn records from commit matches). ``repo_url``,
    when given, restricts the ranges to that repo (compared without a trailing
    ``/`` or ``.git``).
    """
    if record.get("withdrawn"):
        return set()

    def norm(url: str) -> str:
        url = url.rstrip("/")
        return url.removesuffix(".git")

    result: set[str] = set()
    for affected in record.get("affected") or []:
        git_ranges = [r for r in affected.get("ranges") or [] if r.get("type") == "GIT"]
        if repo_url is not None:
            git_ranges = [r for r in git_ranges if norm(r.get("repo", "")) == norm(repo_url)]
            package = affected.get("package") or {}
            if not git_ranges and norm(package.get("name", "")) != norm(repo_url):
                continue
        for rng in git_ranges:
            result |= affected_commits(parents, rng.get("events") or [])
        result |= {v.lower() for v in affected.get("versions") or []}
    return result


def commit_affected(
    parents: Mapping[str, list[str]],
    events: list[dict[str, Any]],
    commit: str,
    commit_ancestors: set[str],
    *,
    all_commits: set[str] | None = None,
    rootsets: dict[str, set[str]] | None = None,
) -> bool:
    """Whether one range's ``events`` affect ``commit``, given the commit's ancestry (itself included).

    The incremental form of :func:`affected_commits`, for the commit a new revision adds:
    a commit is affected when it descends from an introduced commit and from no fixed
    one (any path from an introduced commit to it runs through its own ancestors, so
    the BFS there cannot be cut off anywhere else). Costs one membership test per event
    once ``commit_ancestors`` is known; ``rootsets`` memoises the roots under each fixed
    commit across calls. Ranges with ``last_affected`` or ``limit`` fall back to the full walk.
    """
    by_kind: dict[str, list[str]] = {"introduced": [], "fixed": [], "last_affected": [], "limit": []}
    for event in events:
        key, value = _value(event)
        by_kind[key].append(value)
    if by_kind["last_affected"] or by_kind["limit"]:
        return commit in affected_commits(parents, events)
    if not by_kind["introduced"] or any(f in commit_ancestors for f in by_kind["fixed"]):
        return False
    commits = all_commits if all_commits is not None else graph_commits(parents)
    for value in by_kind["introduced"]:
        if value != "0":
            if value in commit_ancestors:
                return True
            continue
        roots_here = {a for a in commit_ancestors if not parents.get(a)}
        fixed = [f for f in by_kind["fixed"] if f in commits]
        if not fixed:
            if roots_here:
                return True
            continue
        memo = rootsets if rootsets is not None else {}
        for f in fixed:
            if f not in memo:
                memo[f] = {a for a in ancestors(parents, [f]) if not parents.get(a)}
            if roots_here & memo[f]:
                return True
    return False
