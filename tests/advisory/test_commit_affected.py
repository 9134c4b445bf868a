"""The incremental test of one commit agrees with the full walk on random graphs."""

from __future__ import annotations

import random

import pytest

from tracker.core.advisory.affected import affected_commits, ancestors, commit_affected, graph_commits


def _graph(rng: random.Random, n: int) -> dict[str, list[str]]:
    parents: dict[str, list[str]] = {}
    names = [f"{i:040x}" for i in range(n)]
    for i, name in enumerate(names):
        if i == 0 or rng.random() < 0.08:
            parents[name] = []  # a new root (re-created repo, phantom parent)
        else:
            ps = [names[rng.randrange(max(0, i - 4), i)]]
            if rng.random() < 0.15:
                ps.append(names[rng.randrange(0, i)])  # a merge
            parents[name] = ps
    return parents


@pytest.mark.parametrize("seed", range(40))
def test_commit_affected_matches_full_walk(seed):
    rng = random.Random(seed)
    parents = _graph(rng, rng.randrange(5, 40))
    names = sorted(parents)
    for _ in range(8):
        events: list[dict] = [{"introduced": "0" if rng.random() < 0.5 else rng.choice(names)}]
        for _ in range(rng.randrange(0, 3)):
            events.append({"fixed": rng.choice(names) if rng.random() < 0.9 else "f" * 40})
        full = affected_commits(parents, events)
        every = graph_commits(parents)
        memo: dict[str, set[str]] = {}
        for commit in names:
            got = commit_affected(parents, events, commit, ancestors(parents, [commit]), all_commits=every,
                                  rootsets=memo)
            assert got == (commit in full), (events, commit)
