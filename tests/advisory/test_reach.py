"""The reachability index (labels, chains, spans) agrees with the full walk of ``affected_commits``.

Random DAGs with merges and new roots, and 5,000-commit linear histories: for every commit, the
index's answer and the commits its spans enumerate are exactly the full walk's.
"""

from __future__ import annotations

import random

import pytest

from tracker.core.advisory.affected import affected_commits
from tracker.core.advisory.reach import OPEN, Label, ReachIndex, Span, spans_for


def _dag(rng: random.Random, n: int, *, merges: float = 0.15, roots: float = 0.08) -> list[tuple[str, list[str]]]:
    names = [f"{i:040x}" for i in range(n)]
    out = []
    for i, name in enumerate(names):
        if i == 0 or rng.random() < roots:
            out.append((name, []))  # a new root (re-created repo, phantom parent)
            continue
        ps = [names[rng.randrange(max(0, i - 4), i)]]  # mostly the tip, sometimes a fork
        if rng.random() < merges:
            other = names[rng.randrange(0, i)]
            if other != ps[0]:
                ps.append(other)  # a merge
        out.append((name, ps))
    return out


def _enumerate(index: ReachIndex, spans: list[Span]) -> set[str]:
    by_label = {label: sha for sha, label in index.labels.items()}
    return {by_label[Label(s.chain, p)] for s in spans
            for p in range(s.lo, min(s.hi, index.chains[s.chain].tip) + 1)}


def _random_events(rng: random.Random, names: list[str]) -> list[dict]:
    events: list[dict] = [{"introduced": "0" if rng.random() < 0.5 else rng.choice(names)}]
    for _ in range(rng.randrange(0, 3)):
        events.append({"fixed": rng.choice(names) if rng.random() < 0.9 else "f" * 40})
    if rng.random() < 0.2:
        events.append({"introduced": rng.choice(names)})
    return events


@pytest.mark.parametrize("seed", range(60))
def test_index_matches_the_full_walk_on_dags_with_merges(seed):
    rng = random.Random(seed)
    commits = _dag(rng, rng.randrange(5, 60))
    parents = dict(commits)
    names = [sha for sha, _ in commits]
    index = ReachIndex()
    index.add(commits)
    for _ in range(8):
        events = _random_events(rng, names)
        full = affected_commits(parents, events)
        for sha in names:
            assert index.affected(events, index.labels[sha]) == (sha in full), (events, sha)
        assert _enumerate(index, spans_for(index, events)) == full, events


@pytest.mark.parametrize("seed", range(10))
def test_spans_kept_up_as_the_graph_grows_match_spans_computed_at_the_end(seed):
    """What the store does: spans computed once, then only the chains each addition touches recomputed."""
    rng = random.Random(100 + seed)
    commits = _dag(rng, 80)
    names = [sha for sha, _ in commits]
    events = _random_events(rng, names[:20])
    index = ReachIndex()
    index.add(commits[:20])
    kept = {s.chain: s for s in spans_for(index, events)}
    for i in range(20, len(commits)):
        update = index.add([commits[i]])
        for chain in update.touched:
            kept.pop(chain, None)
            span = spans_for(index, events, [chain])
            if span:
                kept[chain] = span[0]
    assert sorted(kept.values(), key=lambda s: s.chain) == spans_for(index, events)
    assert _enumerate(index, list(kept.values())) == affected_commits(dict(commits), events)


def test_a_5000_commit_linear_history_is_one_chain_and_each_advisory_one_span():
    names = [f"{i:040x}" for i in range(5000)]
    commits = [(s, [names[i - 1]] if i else []) for i, s in enumerate(names)]
    parents = dict(commits)
    index = ReachIndex()
    update = index.add(commits)
    assert update.created == {1} and len(index.chains) == 1 and index.chains[1].tip == 4999
    rng = random.Random(5)
    for _ in range(5):
        fix = rng.randrange(1, 5000)
        update_events = [{"introduced": "0"}, {"fixed": names[fix]}]
        assert spans_for(index, update_events) == [Span(1, 0, fix - 1)]
        risk, undo = sorted(rng.sample(range(5000), 2))
        risk_events = [{"introduced": names[risk]}, {"fixed": names[undo]}]
        assert spans_for(index, risk_events) == [Span(1, risk, undo - 1)]
        assert spans_for(index, [{"introduced": names[risk]}]) == [Span(1, risk, OPEN)]
        for events in (update_events, risk_events):
            full = affected_commits(parents, events)
            assert _enumerate(index, spans_for(index, events)) == full
            for k in rng.sample(range(5000), 200):
                assert index.affected(events, index.labels[names[k]]) == (names[k] in full)


def test_a_fork_starts_a_chain_that_remembers_where_it_left():
    a, b, c, d, e = (f"{i:040x}" for i in range(5))
    index = ReachIndex()
    index.add([(a, []), (b, [a]), (c, [b])])
    update = index.add([(d, [b]), (e, [d])])  # history rewritten from b
    assert update.created == {2} and index.labels[d] == Label(2, 0) and index.labels[e] == Label(2, 1)
    assert index.chains[2].reach == {1: 1} and index.chains[2].root == 1
    assert index.is_ancestor(index.labels[b], index.labels[e])
    assert not index.is_ancestor(index.labels[c], index.labels[e])
    # An update fixed at c: a, b on the first chain, and all of the rewritten one.
    assert spans_for(index, [{"introduced": "0"}, {"fixed": c}]) == [Span(1, 0, 1), Span(2, 0, OPEN)]
