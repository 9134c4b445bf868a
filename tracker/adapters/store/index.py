"""The reachability index in the database: commit labels, chains and advisory spans, kept in step.

The pure rules are ``tracker.core.advisory.reach``; this module reads the few rows a question needs
and writes what changed, on the caller's connection (inside its transaction):

* listing commits labels them (one row each) and moves their chains' tips; only a new chain (a
  fork, a new root) or a merge makes the live advisories of the repo get a span on that chain;
* writing an advisory whose range events changed replaces its spans, one row per chain it touches;
* reading a record computes its ``versions`` from its spans (or its listed commits), the newest
  ``max_versions`` of them, and says in ``database_specific.versions`` when more are affected.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, false, func, insert, or_, select, true, update

from tracker.adapters.store.tables import (
    advisories,
    advisory_commits,
    advisory_spans,
    commit_chains,
    commit_labels,
)
from tracker.core.advisory.reach import (
    LISTED_KINDS,
    OPEN,
    Chain,
    Label,
    ReachIndex,
    Span,
    events_of,
    ranged,
    span_for_chain,
    spans_for,
)
from tracker.core.advisory.record import OsvJson

CHUNK = 500  # shas per IN (...) list


def _chunks(items: Sequence[Any], size: int = CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


# -- reading the index --------------------------------------------------------------------------


def load_index(conn: Connection, repo_pk: int, shas: Iterable[str] = ()) -> ReachIndex:
    """Every chain of a repo, and the labels of ``shas`` (those indexed)."""
    chains = [Chain.from_json(r.chain, r.root, r.tip, bool(r.starts_at_root), r.reach)
              for r in conn.execute(select(commit_chains).where(commit_chains.c.repo_pk == repo_pk))]
    labels: dict[str, Label] = {}
    wanted = sorted({s for s in shas if s})
    for chunk in _chunks(wanted):
        for r in conn.execute(select(commit_labels.c.sha, commit_labels.c.chain, commit_labels.c.pos).where(
                and_(commit_labels.c.repo_pk == repo_pk, commit_labels.c.sha.in_(chunk)))):
            labels[r.sha] = Label(r.chain, r.pos)
    return ReachIndex(chains, labels, next_chain=max((c.id for c in chains), default=0) + 1)


def label_of(conn: Connection, repo_pk: int, sha: str) -> Label | None:
    row = conn.execute(select(commit_labels.c.chain, commit_labels.c.pos).where(and_(
        commit_labels.c.repo_pk == repo_pk, commit_labels.c.sha == sha))).first()
    return Label(row.chain, row.pos) if row else None


def _event_shas(events: Iterable[Mapping[str, str]]) -> set[str]:
    return {str(v).lower() for e in events for v in e.values() if str(v) != "0"}


# -- growing the graph --------------------------------------------------------------------------


def index_commits(conn: Connection, repo_pk: int, commits: Sequence[tuple[str, Sequence[str]]]) -> None:
    """Label newly listed commits (oldest first); a new chain or a merge gets the live advisories' spans."""
    if not commits:
        return
    index = load_index(conn, repo_pk, {s for s, _ in commits} | {p for _, ps in commits for p in ps})
    before = {c.id: (c.tip, json.dumps(c.to_json(), sort_keys=True)) for c in index.chains.values()}
    change = index.add(commits)
    if not change.labels:
        return
    for chunk in _chunks(list(change.labels.items())):
        conn.execute(insert(commit_labels), [{"repo_pk": repo_pk, "sha": s, "chain": lab.chain, "pos": lab.pos}
                                             for s, lab in chunk])
    write_chains(conn, repo_pk, index, before)
    if change.touched:
        live = conn.execute(select(advisories.c.id, advisories.c.kind, advisories.c.record).where(and_(
            advisories.c.repo_pk == repo_pk, advisories.c.withdrawn.is_(False)))).all()
        ranged_rows = [(r.id, events_of(r.record)) for r in live if ranged(r.kind)]
        extra = load_index(conn, repo_pk, set().union(*(_event_shas(ev) for _, ev in ranged_rows)) if ranged_rows
                           else set())
        for sha, lab in extra.labels.items():
            index.labels.setdefault(sha, lab)
        for advisory_id, events in ranged_rows:
            for chain in sorted(change.touched):
                _put_span(conn, repo_pk, advisory_id, chain, span_for_chain(index, events, chain))


def write_chains(conn: Connection, repo_pk: int, index: ReachIndex,
                 before: Mapping[int, tuple[int, str]]) -> None:
    """Insert new chains and update those whose tip, reach or merges moved."""
    for chain in index.chains.values():
        data = chain.to_json()
        state = (chain.tip, json.dumps(data, sort_keys=True))
        if chain.id not in before:
            conn.execute(insert(commit_chains).values(repo_pk=repo_pk, chain=chain.id, root=chain.root, tip=chain.tip,
                                                      starts_at_root=chain.starts_at_root, reach=data))
        elif before[chain.id] != state:
            conn.execute(update(commit_chains).where(and_(commit_chains.c.repo_pk == repo_pk,
                                                          commit_chains.c.chain == chain.id))
                         .values(tip=chain.tip, reach=data))


def _put_span(conn: Connection, repo_pk: int, advisory_id: str, chain: int, span: Span | None) -> None:
    conn.execute(delete(advisory_spans).where(and_(advisory_spans.c.advisory_id == advisory_id,
                                                   advisory_spans.c.chain == chain)))
    if span is not None:
        conn.execute(insert(advisory_spans).values(advisory_id=advisory_id, chain=chain, repo_pk=repo_pk,
                                                   lo=span.lo, hi=span.hi))


# -- advisories ---------------------------------------------------------------------------------


def set_spans(conn: Connection, repo_pk: int, advisory_id: str, events: Sequence[Mapping[str, str]]) -> None:
    """Replace an advisory's spans with those its range events give over the repo's whole graph."""
    index = load_index(conn, repo_pk, _event_shas(events))
    drop_index(conn, advisory_id)
    spans = spans_for(index, events)
    if spans:
        conn.execute(insert(advisory_spans), [{"advisory_id": advisory_id, "chain": s.chain, "repo_pk": repo_pk,
                                               "lo": s.lo, "hi": s.hi} for s in spans])


def set_listed(conn: Connection, repo_pk: int, advisory_id: str, shas: Iterable[str]) -> None:
    conn.execute(delete(advisory_commits).where(advisory_commits.c.advisory_id == advisory_id))
    rows = [{"advisory_id": advisory_id, "sha": s, "repo_pk": repo_pk} for s in sorted(set(shas))]
    for chunk in _chunks(rows):
        conn.execute(insert(advisory_commits), list(chunk))


def drop_index(conn: Connection, advisory_id: str) -> None:
    conn.execute(delete(advisory_spans).where(advisory_spans.c.advisory_id == advisory_id))


def stored_record(record: Mapping[str, Any]) -> OsvJson:
    """A record as stored: ``versions`` empty (computed when read) and no bounded-versions note."""
    out = dict(record)
    out["affected"] = [{**a, "versions": []} for a in record.get("affected") or []]
    ds = record.get("database_specific")
    if isinstance(ds, Mapping) and "versions" in ds:
        out["database_specific"] = {k: v for k, v in ds.items() if k != "versions"}
    return out


def live_ids_for_commit(sha: str, repo_pk: int | None = None) -> Any:
    """A selectable of the advisories that affect a commit: ``advisory_id``, and ``ranged`` (true: by a
    span; false: the commit is listed).

    Withdrawing an advisory deletes its spans and listed commits in the same transaction, so these
    are live advisories; callers that read the advisories' rows anyway check ``withdrawn`` too.
    One statement (one round trip): the commit's labels (an index look-up on the sha, a row per
    repo holding it) joined to the spans by an index range on (repo, chain, hi) for each label,
    the plan SQLite and PostgreSQL both take.
    """
    labels = select(commit_labels.c.repo_pk, commit_labels.c.chain, commit_labels.c.pos).where(
        commit_labels.c.sha == sha)
    if repo_pk is not None:
        labels = labels.where(commit_labels.c.repo_pk == repo_pk)
    label = labels.subquery()
    spans = (select(advisory_spans.c.advisory_id.label("advisory_id"), true().label("ranged"))
             .join(label, and_(advisory_spans.c.repo_pk == label.c.repo_pk, advisory_spans.c.chain == label.c.chain,
                               advisory_spans.c.hi >= label.c.pos, advisory_spans.c.lo <= label.c.pos)))
    listed = select(advisory_commits.c.advisory_id.label("advisory_id"), false().label("ranged")).where(
        advisory_commits.c.sha == sha)
    if repo_pk is not None:
        listed = listed.where(advisory_commits.c.repo_pk == repo_pk)
    return spans.union(listed)


def live_ids_for_commits(shas: Sequence[str], repo_pk: int) -> Any:
    """(sha, advisory id) of the live advisories affecting each of some commits of one repo."""
    spans = (select(commit_labels.c.sha, advisory_spans.c.advisory_id)
             .join(advisory_spans, and_(advisory_spans.c.repo_pk == commit_labels.c.repo_pk,
                                        advisory_spans.c.chain == commit_labels.c.chain,
                                        advisory_spans.c.lo <= commit_labels.c.pos,
                                        advisory_spans.c.hi >= commit_labels.c.pos))
             .join(advisories, advisories.c.id == advisory_spans.c.advisory_id)
             .where(commit_labels.c.repo_pk == repo_pk, commit_labels.c.sha.in_(list(shas)),
                    advisories.c.withdrawn.is_(False)))
    listed = (select(advisory_commits.c.sha, advisory_commits.c.advisory_id)
              .join(advisories, advisories.c.id == advisory_commits.c.advisory_id)
              .where(advisory_commits.c.repo_pk == repo_pk, advisory_commits.c.sha.in_(list(shas)),
                     advisories.c.withdrawn.is_(False)))
    return spans.union(listed)


# -- versions on read ---------------------------------------------------------------------------


def spans_of(conn: Connection, ids: Sequence[str]) -> dict[str, list[Any]]:
    """Each advisory's spans, with its chain's tip (``tip``, and the tip commit's ``tip_id`` and ``tip_sha``)."""
    spans: dict[str, list[Any]] = {}
    tip = commit_labels.alias("tip")
    for chunk in _chunks(ids):
        for r in conn.execute(select(advisory_spans.c.advisory_id, advisory_spans.c.repo_pk, advisory_spans.c.chain,
                                     advisory_spans.c.lo, advisory_spans.c.hi, commit_chains.c.tip,
                                     tip.c.id.label("tip_id"), tip.c.sha.label("tip_sha"))
                              .join(commit_chains, and_(commit_chains.c.repo_pk == advisory_spans.c.repo_pk,
                                                        commit_chains.c.chain == advisory_spans.c.chain))
                              .outerjoin(tip, and_(tip.c.repo_pk == commit_chains.c.repo_pk,
                                                   tip.c.chain == commit_chains.c.chain,
                                                   tip.c.pos == commit_chains.c.tip))
                              .where(advisory_spans.c.advisory_id.in_(chunk))):
            spans.setdefault(r.advisory_id, []).append(r)
    return spans


class ChainCache:
    """Each chain's commits in position order, ``(label id, sha)``, read once and then extended as the
    chain grows; least recently used out, bounded by the number of commits held.

    A chain only ever grows at its tip, and its positions are the first-parent history of its tip
    commit: an entry that holds the chain's tip as the database has it (same label, same sha) holds
    every commit below it as the database does. An entry that does not (a repo removed and
    another stored under the same key) is read again.
    """

    def __init__(self, max_ids: int = 200_000) -> None:
        self.max_ids = max_ids
        self._entries: OrderedDict[tuple[int, int], list[tuple[int, str]]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def commits(self, conn: Connection, repo_pk: int, chain: int, tip: tuple[int, int, str]) -> list[tuple[int, str]] | None:
        """The chain's commits at positions 0 to the tip ``(pos, label id, sha)``; None when the index
        does not hold them all (the caller reads what it needs itself)."""
        pos, tip_label = tip[0], (tip[1], tip[2])
        key = (repo_pk, chain)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
        if entry is not None and len(entry) > pos and entry[pos] == tip_label:
            return entry
        start = len(entry) - 1 if entry is not None and len(entry) <= pos else 0
        read = [(r[0], r[1], r[2]) for r in conn.execute(
            select(commit_labels.c.pos, commit_labels.c.id, commit_labels.c.sha).where(and_(
                commit_labels.c.repo_pk == repo_pk, commit_labels.c.chain == chain,
                commit_labels.c.pos.between(start, pos))).order_by(commit_labels.c.pos))]
        if [r[0] for r in read] != list(range(start, pos + 1)) or (read[-1][1], read[-1][2]) != tip_label:
            return None
        if start and entry is not None and (read[0][1], read[0][2]) == entry[-1]:
            found = entry + [(r[1], r[2]) for r in read[1:]]
        elif start:
            return self.commits(conn, repo_pk, chain, tip) if self._drop(key) else None
        else:
            found = [(r[1], r[2]) for r in read]
        self._put(key, found)
        return found

    def _drop(self, key: tuple[int, int]) -> bool:
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._held -= len(entry)
            return entry is not None

    def _put(self, key: tuple[int, int], found: list[tuple[int, str]]) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            self._held += len(found) - (len(old) if old is not None else 0)
            self._entries[key] = found
            while self._held > self.max_ids and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._held -= len(dropped)


class VersionsCache:
    """Computed ``versions`` by (advisory, its spans, their chains' tips), least recently used out.

    Commits are only ever appended to a chain, so the same spans over the same tips always list
    the same commits: an entry never goes stale, it just stops being asked for. Bounded by the
    number of commit ids held.
    """

    def __init__(self, max_ids: int = 200_000) -> None:
        self.max_ids = max_ids
        self._entries: OrderedDict[tuple[Any, ...], tuple[list[str], int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> tuple[list[str], int] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: tuple[Any, ...], value: tuple[list[str], int]) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = value
            self._held += len(value[0])
            while self._held > self.max_ids and self._entries:
                _, dropped = self._entries.popitem(last=False)
                self._held -= len(dropped[0])


def affected_counts(conn: Connection, items: Sequence[tuple[str, bool]],
                    spans: Mapping[str, list[Any]]) -> dict[str, int]:
    """How many commits each advisory ``(id, ranged)`` affects, from its ``spans`` (those of the ranged
    ones, with their chains' tips) or its listed commits alone: no commit is read."""
    out = {i: 0 for i, _ in items}
    for advisory_id, is_ranged in items:
        if is_ranged:
            out[advisory_id] = sum(max(0, min(r.hi, r.tip) - r.lo + 1) for r in spans.get(advisory_id, []))
    listed_ids = [i for i, is_ranged in items if not is_ranged]
    for chunk in _chunks(listed_ids):
        for advisory_id, count in conn.execute(
                select(advisory_commits.c.advisory_id, func.count()).where(advisory_commits.c.advisory_id.in_(chunk))
                .group_by(advisory_commits.c.advisory_id)):
            out[advisory_id] = int(count)
    return out


VersionsFound = dict[str, tuple[list[str], int]]  # advisory id -> (versions listed, commits affected)


def versions_of(conn: Connection, items: Sequence[tuple[str, int, str]], max_versions: int, *,
                spans: Mapping[str, list[Any]] | None = None, cache: VersionsCache | None = None,
                chains: ChainCache | None = None) -> VersionsFound:
    """(versions, how many commits are affected) per advisory ``(id, repo_pk, kind)``: the newest
    ``max_versions`` affected commits (in the order they were indexed), sorted by sha.

    The commits are read once per chain for all the advisories asked about: the union of the
    windows each needs (its newest ``max_versions`` positions on that chain).
    """
    out: VersionsFound = {}
    ranged_ids = [i for i, _, kind in items if ranged(kind)]
    if spans is None:
        spans = spans_of(conn, ranged_ids)
    keys = {i: (i, max_versions, tuple((r.repo_pk, r.chain, r.lo, r.hi, r.tip) for r in spans.get(i, [])))
            for i in ranged_ids}
    if cache is not None:
        for advisory_id in ranged_ids:
            hit = cache.get(keys[advisory_id])
            if hit is not None:
                out[advisory_id] = hit
        ranged_ids = [i for i in ranged_ids if i not in out]
    at = _chain_windows(conn, ranged_ids, spans, max_versions, chains)
    for advisory_id in ranged_ids:
        out[advisory_id] = _ranged_versions(spans.get(advisory_id, []), at, max_versions)
        if cache is not None:
            cache.put(keys[advisory_id], out[advisory_id])
    out.update(_listed_versions(conn, [i for i, _, kind in items if not ranged(kind)], max_versions))
    return out


def _window(r: Any, max_versions: int) -> tuple[int, int] | None:
    """The positions of a span's chain whose commits it lists: its newest ``max_versions`` (None: empty)."""
    top = min(r.hi, r.tip)
    return (max(r.lo, top - max_versions + 1), top) if top >= r.lo else None


def _merged(ranges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Overlapping or adjacent ``(lo, hi)`` ranges as one."""
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return merged


# (repo, chain) -> positions (sorted), the (label id, sha) at each
ChainCommits = dict[tuple[int, int], tuple[Sequence[int], list[tuple[int, str]]]]


def _chain_windows(conn: Connection, ids: Sequence[str], spans: Mapping[str, list[Any]],
                   max_versions: int, chains: ChainCache | None = None) -> ChainCommits:
    """Per chain: the positions the advisories' windows cover (sorted) and their (label id, sha), one read
    each (or none: from ``chains``, which holds each chain's commits once read)."""
    windows: dict[tuple[int, int], list[tuple[int, int]]] = {}
    tips: dict[tuple[int, int], tuple[int, int, str]] = {}
    for advisory_id in ids:
        for r in spans.get(advisory_id, []):
            window = _window(r, max_versions)
            if window is not None:
                windows.setdefault((r.repo_pk, r.chain), []).append(window)
                if r.tip_sha is not None:
                    tips[(r.repo_pk, r.chain)] = (r.tip, r.tip_id, r.tip_sha)
    at: ChainCommits = {}
    for (repo_pk, chain), ranges in windows.items():
        held = chains.commits(conn, repo_pk, chain, tips[(repo_pk, chain)]) if (
            chains is not None and (repo_pk, chain) in tips) else None
        if held is not None:
            at[(repo_pk, chain)] = (range(len(held)), held)
            continue
        cond = or_(*(commit_labels.c.pos.between(lo, hi) for lo, hi in _merged(ranges)))
        read = conn.execute(select(commit_labels.c.pos, commit_labels.c.id, commit_labels.c.sha).where(and_(
            commit_labels.c.repo_pk == repo_pk, commit_labels.c.chain == chain, cond))
            .order_by(commit_labels.c.pos)).all()
        at[(repo_pk, chain)] = ([r[0] for r in read], [(r[1], r[2]) for r in read])
    return at


def _ranged_versions(spans: Sequence[Any], at: ChainCommits, max_versions: int) -> tuple[list[str], int]:
    """One ranged advisory's versions (sliced from the chains read, by bisection) and affected count."""
    picked: list[tuple[int, str]] = []
    total = 0
    chains = 0
    for r in spans:
        window = _window(r, max_versions)
        if window is None:
            continue
        total += min(r.hi, r.tip) - r.lo + 1
        chains += 1
        positions, labels = at.get((r.repo_pk, r.chain), ([], []))
        picked += labels[bisect.bisect_left(positions, window[0]):bisect.bisect_right(positions, window[1])]
    if chains > 1:  # the newest across chains, by the order they were indexed
        picked.sort(reverse=True)
        picked = picked[:max_versions]
    return sorted(sha for _, sha in picked), total


def _listed_versions(conn: Connection, ids: Sequence[str], max_versions: int) -> VersionsFound:
    """Versions of advisories that list their commits one by one: the newest indexed first."""
    out: VersionsFound = {}
    for chunk in _chunks(ids):
        listed_rows = conn.execute(select(advisory_commits.c.advisory_id, advisory_commits.c.sha, commit_labels.c.id)
                                   .outerjoin(commit_labels, and_(commit_labels.c.repo_pk == advisory_commits.c.repo_pk,
                                                                  commit_labels.c.sha == advisory_commits.c.sha))
                                   .where(advisory_commits.c.advisory_id.in_(chunk))).all()
        grouped: dict[str, list[tuple[int, str]]] = {}
        for row in listed_rows:
            grouped.setdefault(row.advisory_id, []).append((row.id or 0, row.sha))
        for advisory_id in chunk:
            listed = sorted(grouped.get(advisory_id, []), reverse=True)
            out[advisory_id] = (sorted(sha for _, sha in listed[:max_versions]), len(listed))
    return out


def _note(listed: int, total: int) -> dict[str, Any]:
    return {"listed": listed, "affected": total,
            "note": f"the newest {listed} of {total} affected commits are listed; the GIT range covers them all"}


def with_versions(record: Mapping[str, Any], versions: list[str], total: int) -> OsvJson:
    """A stored record as served: its ``versions`` filled in, and the note when they were bounded."""
    out = dict(record)
    affected = [dict(a) for a in record.get("affected") or []]
    if affected:
        affected[0]["versions"] = list(versions)
    out["affected"] = affected
    if total > len(versions):
        out["database_specific"] = {**(record.get("database_specific") or {}), "versions": _note(len(versions), total)}
    return out


_EMPTY = '"versions": []'
_DS = '"database_specific": {'


def with_versions_text(text: str, versions: list[str], total: int) -> str:
    """:func:`with_versions` on a record's stored JSON text, without decoding it (the API's hot path).

    The stored text is ``json.dumps`` output: the first ``"versions": []`` is ``affected[0]``'s (no key
    before ``affected`` holds one, and strings escape their quotes), and the first ``"database_specific":
    {`` is the record's own (it comes after ``affected``).
    """
    if _EMPTY not in text:
        return json.dumps(with_versions(json.loads(text), versions, total), allow_nan=False)
    at = text.find(_DS) if total > len(versions) else -1
    if at >= 0:  # the note first, while the text is short
        at += len(_DS)
        note = '"versions": ' + json.dumps(_note(len(versions), total)) + ("" if text[at:at + 1] == "}" else ", ")
        text = text[:at] + note + text[at:]
    # Commit ids are 40 hex digits (checked when written): joined as they are, not encoded one by one.
    start = text.find(_EMPTY)
    listed = '["' + '", "'.join(versions) + '"]' if versions else "[]"
    return "".join((text[:start], '"versions": ', listed, text[start + len(_EMPTY):]))


__all__ = ["LISTED_KINDS", "OPEN", "index_commits", "label_of", "live_ids_for_commit", "load_index", "ranged",
           "set_listed", "set_spans", "stored_record", "versions_of", "with_versions", "with_versions_text"]
