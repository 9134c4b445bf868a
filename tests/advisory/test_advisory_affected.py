"""OSV GIT range semantics over a commit graph (NOTES.md §2.6), table-driven."""

from __future__ import annotations

import pytest

from tests.advisory.support import sha
from tracker.core.advisory.affected import affected_commits, record_affected_commits

C = {i: sha(i) for i in range(1, 12)}
LINEAR = {C[1]: [], C[2]: [C[1]], C[3]: [C[2]], C[4]: [C[3]], C[5]: [C[4]]}

# The 5-commit table of NOTES.md §2.6 ([ran] with git merge-base), plus edge cases.
LINEAR_CASES = [
    ([{"introduced": C[3]}, {"fixed": C[5]}], {3, 4}),
    ([{"introduced": C[3]}], {3, 4, 5}),
    ([{"introduced": "0"}, {"last_affected": C[2]}], {1, 2}),
    ([{"introduced": C[2]}, {"limit": C[4]}], {2, 3}),
    ([{"introduced": "0"}], {1, 2, 3, 4, 5}),
    ([{"introduced": "0"}, {"fixed": C[3]}], {1, 2}),
    ([{"introduced": C[3]}, {"fixed": C[3]}], set()),
    ([{"introduced": C[4]}, {"fixed": C[2]}], set()),  # fixed before introduced: its descendants are clean
    ([{"introduced": C[2]}, {"last_affected": C[4]}], {2, 3, 4}),
    ([{"introduced": C[4]}, {"last_affected": C[2]}], set()),  # walk never meets introduced
    ([{"introduced": "f" * 40}], set()),  # unknown commit
    ([{"introduced": C[2]}, {"fixed": "f" * 40}], {2, 3, 4, 5}),  # unknown fix removes nothing
    ([{"fixed": C[2]}], set()),  # no introduced: nothing
    # A fix covers all its descendants, so re-introducing on the same line needs its own range.
    ([{"introduced": C[2]}, {"fixed": C[3]}, {"introduced": C[4]}, {"fixed": C[5]}], {2}),
]


@pytest.mark.parametrize(("events", "expected"), LINEAR_CASES)
def test_linear(events, expected):
    assert affected_commits(LINEAR, events) == {C[i] for i in expected}


# A merge graph:          c1 - c2 - c3 ------ c6 (merge: first parent c3, second c5) - c7
#                                \            /
#                                 c4 ---- c5
# plus an unrelated root c9 - c10 (an orphan branch).
MERGE = {
    C[1]: [], C[2]: [C[1]], C[3]: [C[2]], C[4]: [C[2]], C[5]: [C[4]],
    C[6]: [C[3], C[5]], C[7]: [C[6]], C[9]: [], C[10]: [C[9]],
}
MERGE_CASES = [
    ([{"introduced": C[4]}], {4, 5, 6, 7}),  # reaches the merge and beyond through the second parent
    ([{"introduced": C[2]}, {"fixed": C[6]}], {2, 3, 4, 5}),
    ([{"introduced": C[4]}, {"fixed": C[5]}], {4}),
    ([{"introduced": C[3]}, {"fixed": C[4]}], {3}),  # the merge c6 brings the side-branch fix in
    ([{"introduced": "0"}], {1, 2, 3, 4, 5, 6, 7, 9, 10}),  # every root
    ([{"introduced": "0"}, {"fixed": C[6]}], {1, 2, 3, 4, 5}),  # only roots that are ancestors of the fix
    ([{"introduced": C[2]}, {"limit": C[7]}], {2, 3, 6}),  # first-parent path only
    ([{"introduced": C[4]}, {"limit": C[7]}], set()),  # c4 is not on c7's first-parent path
    ([{"introduced": C[2]}, {"last_affected": C[5]}], {2, 4, 5}),
    ([{"introduced": C[9]}], {9, 10}),
]


@pytest.mark.parametrize(("events", "expected"), MERGE_CASES)
def test_merge_graph(events, expected):
    assert affected_commits(MERGE, events) == {C[i] for i in expected}


def test_commits_only_seen_as_parents_count_as_roots():
    graph = {C[2]: [C[1]]}
    assert affected_commits(graph, [{"introduced": "0"}]) == {C[1], C[2]}


def test_bad_event_is_rejected():
    with pytest.raises(ValueError, match="exactly one key"):
        affected_commits(LINEAR, [{"introduced": C[1], "fixed": C[2]}])
    with pytest.raises(ValueError, match="unknown OSV event"):
        affected_commits(LINEAR, [{"introduce": C[1]}])


def test_cycle_terminates():
    cyclic = {C[1]: [C[2]], C[2]: [C[1]]}
    assert affected_commits(cyclic, [{"introduced": C[1]}]) == {C[1], C[2]}


def test_record_affected_commits_unions_ranges_and_versions():
    url = "https://huggingface.co/org/m"
    record = {
        "affected": [{
            "ranges": [{"type": "GIT", "repo": url, "events": [{"introduced": C[4]}]}],
            "versions": [C[8]],  # squashed away: still affected
        }],
    }
    assert record_affected_commits(LINEAR, record) == {C[4], C[5], C[8]}
    assert record_affected_commits(LINEAR, record, repo_url=url + ".git") == {C[4], C[5], C[8]}
    assert record_affected_commits(LINEAR, record, repo_url="https://huggingface.co/other/m") == set()
    assert record_affected_commits(LINEAR, {**record, "withdrawn": "2026-01-01T00:00:00Z"}) == set()
