"""The suggested revision is a fixed point: the same wherever the pin is, never a worse open risk than the pin.

The history (``acme/advised``) has each kind of advisory a branch can carry:

- c0 initial; c1 fixes eos_token_id (an ``update``, high: c0 lacks it);
- c2 adds a clean pickle (a ``risk``, moderate, open on c2 and c3); c3 edits the README;
- c4 removes the pickle (the risk is undone, and an ``update`` for the removal: c0..c3 lack it);
- c5 adds a pickle that imports ``os.system`` (a critical ``risk``, open at the head).

The newest of the least-advised revisions is c4: every pin, and a floating reference, is told
to move there (or to stay, at c4). "The newest revision none of the pin's advisories affects"
would send c0 and c1 to the critical head.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hubstandin.hub import HubStandin

from tests.core.conftest import config_json
from tests.core.test_advisories import README, torch_zip
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.advisory import advisory_id
from tracker.core.model import RepoId, Severity
from tracker.pipeline.scan.advice import explain, heft, risk_weight, suggest
from tracker.pipeline.scan.model import PinStatus
from tracker.pipeline.scan.source import AdvisorySource

REPO = RepoId("acme/advised")
C, H, M, L, I = Severity.CRITICAL, Severity.HIGH, Severity.MODERATE, Severity.LOW, Severity.INFO


@dataclass
class Looked:
    shas: list[str]
    statuses: dict[str | None, PinStatus]


@pytest.fixture(scope="module")
def looked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Looked]:
    """The history on a stand-in, and one lookup (of every revision, and of no revision) through scratch stores."""
    work = tmp_path_factory.mktemp("advice")
    hub = HubStandin(work / "hub").start()
    try:
        hub.create_repo(REPO)
        shas = [hub.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 128001}',
                                  "README.md": README}, message="initial")]
        shas.append(hub.commit(REPO, {"generation_config.json": b'{"eos_token_id": [128001, 128009]}'},
                               message="fix eos"))
        shas.append(hub.commit(REPO, {"pytorch_model.bin": torch_zip(b"\0" * 4096)}, message="add pt weights"))
        shas.append(hub.commit(REPO, {"README.md": README + "\nBetter words.\n"}, message="docs"))
        shas.append(hub.commit(REPO, {}, delete=["pytorch_model.bin"], message="remove pickle"))
        shas.append(hub.commit(REPO, {"pytorch_model.bin": torch_zip(b"\0" * 4096, ("os", "system"))},
                               message="new weights"))
        settings = Settings(database={"url": f"sqlite:///{work}/user.sqlite3"},
                            hub={"endpoint": hub.url, "timeout": 30.0})
        with AdvisorySource(settings, tracker=None, new_tracker=make_tracker) as source:
            statuses = source.lookup(REPO, [*shas, None])
        yield Looked(shas=shas, statuses=statuses)
    finally:
        hub.stop(wait=False)


def test_each_revision_carries_the_advisories_of_the_history(looked):
    c = looked.shas
    fix, removal = advisory_id(REPO, c[1], "update"), advisory_id(REPO, c[4], "update")
    pickle, evil = advisory_id(REPO, c[2], "risk"), advisory_id(REPO, c[5], "risk")
    seen = {i: sorted((a.id, a.kind, a.severity) for a in looked.statuses[sha].advisories) for i, sha in enumerate(c)}
    assert seen == {
        0: sorted([(fix, "update", H), (removal, "update", M)]),
        1: [(removal, "update", M)],
        2: sorted([(removal, "update", M), (pickle, "risk", M)]),
        3: sorted([(removal, "update", M), (pickle, "risk", M)]),
        4: [],
        5: [(evil, "risk", C)],
    }


def test_every_pin_and_the_floating_reference_are_told_the_same_revision(looked):
    c = looked.shas
    assert {i: looked.statuses[sha].suggested for i, sha in enumerate(c)} == dict.fromkeys(range(6), c[4])
    floating = looked.statuses[None]
    assert (floating.revision, [a.severity for a in floating.advisories], floating.suggested) == (c[5], [C], c[4])


def test_pinning_the_suggestion_suggests_it_again(looked):
    c = looked.shas
    suggested = looked.statuses[c[0]].suggested
    assert suggested is not None
    assert looked.statuses[suggested].suggested == suggested
    assert looked.statuses[suggested].advisories == ()


def test_the_suggestion_never_carries_a_worse_open_risk_than_the_pin(looked):
    by_sha = {sha: status for sha, status in looked.statuses.items() if sha is not None}

    def open_on(sha):
        return [(a.severity, a.kind) for a in by_sha[sha].advisories]

    for sha, status in by_sha.items():
        assert status.suggested is not None
        assert risk_weight(open_on(status.suggested)) <= risk_weight(open_on(sha)), sha
        assert heft(open_on(status.suggested)) <= heft(open_on(sha)), sha


# -- the rule itself, without a Hub ----------------------------------------------------------------------


def r(*severities: Severity) -> list[tuple[Severity, str]]:
    """Open risks."""
    return [(s, "risk") for s in severities]


def u(*severities: Severity) -> list[tuple[Severity, str]]:
    """Open updates (the revision lacks them)."""
    return [(s, "update") for s in severities]


@pytest.mark.parametrize("branch, pinned, expected", [
    pytest.param([("h", []), ("g", [])], None, "h", id="all clean: the head"),
    pytest.param([("h", u(M)), ("g", u(M)), ("f", u(H))], None, "h", id="equal weights: the newest"),
    pytest.param([("h", r(C)), ("g", u(H, M)), ("f", u(H))], None, "f", id="critical before any number of highs"),
    pytest.param([("h", u(M, M)), ("g", u(M)), ("f", u(M, L))], None, "g", id="fewer of the same severity"),
    pytest.param([("h", u(I)), ("g", [])], None, "g", id="info still weighs"),
    pytest.param([("h", r(C)), ("g", u(C))], None, "g", id="at equal weight, a risk weighs more than an update"),
    pytest.param([("h", r(C)), ("g", u(C))], ("h", r(C)), "g", id="pinned at the risk: the update it lacks"),
    pytest.param([("h", r(L)), ("g", u(C, C))], ("g", u(C, C)), "g",
                 id="never a worse open risk than the pin, however many updates it lacks"),
    pytest.param([("h", r(L)), ("g", u(C, C))], ("h", r(L)), "h", id="the low risk is lighter than two criticals"),
    pytest.param([("h", r(C)), ("g", u(M))], ("x", []), "x", id="an off-branch pin lighter than the branch stays"),
    pytest.param([("h", r(C)), ("g", u(M))], ("x", u(H)), "g", id="an off-branch pin heavier than the best moves"),
    pytest.param([("h", r(C)), ("g", u(M))], ("x", u(M)), "g", id="an off-branch pin as heavy as the best moves"),
    pytest.param([("h", r(H)), ("g", r(M))], ("x", []), "x", id="an off-branch pin with no risk, risks on the line"),
    pytest.param([], ("x", []), None, id="nothing read: no suggestion"),
])
def test_the_rule(branch, pinned, expected):
    assert suggest(branch, pinned=pinned) == expected
    if expected is not None:
        # A fixed point: from the suggestion, the same suggestion.
        weighed = dict(branch)
        again = (expected, weighed[expected]) if expected in weighed else pinned
        assert suggest(branch, pinned=again) == expected


def test_each_suggestion_says_what_it_fixes_keeps_and_why_an_older_commit(looked):
    c = looked.shas
    reasons = {i: looked.statuses[sha].reason for i, sha in enumerate(c)}
    assert reasons == {
        0: "fixes 1 high, 1 moderate",
        1: "fixes 1 moderate",
        2: "fixes 2 moderate",
        3: "fixes 2 moderate",
        4: None,  # the suggestion itself
        5: "fixes 1 critical; an older commit than the pin: every newer revision carries worse",
    }
    floating = looked.statuses[None]
    assert floating.reason == "fixes 1 critical; an older commit than the pin: every newer revision carries worse"


H1, H2, C1, M1, MU = ("h1", H, "update"), ("h2", H, "update"), ("c1", C, "risk"), ("m1", M, "risk"), ("m2", M, "update")


@pytest.mark.parametrize("pin, target, line, older, expected", [
    pytest.param([C1, H1, H2], [C1], [{"c1", "h1", "h2"}, {"c1"}], False,
                 "fixes 2 high; keeps 1 critical (no revision without it)", id="the issue's example"),
    pytest.param([C1, H1], [C1], [{"c1", "h1"}, {"c1"}, {"m9"}], False,
                 "fixes 1 high; keeps 1 critical (every revision without it carries worse)", id="kept, avoidable"),
    pytest.param([H1, H2], [M1, MU], [{"h1", "h2"}, {"m1", "m2"}], True,
                 "fixes 2 high; adds 1 moderate risk, lighter than what it fixes; lacks 1 moderate update (a missing "
                 "update weighs less than a risk); an older commit than the pin: every newer revision carries worse",
                 id="older, with what it adds"),
    pytest.param([], [], [set(), set()], False, "nothing open on either; the newest of the lightest revisions",
                 id="newer, nothing open"),
])
def test_the_reason(pin, target, line, older, expected):
    assert explain(pin, target, line, older=older) == expected
