"""Advisories end to end, beyond the happy path: repo events, revisions older than the baseline,
risks undone by a revert (or not), and withdrawal by re-analysis with newer rules."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tests.core.test_advisories import torch_zip
from tracker.core.advisory import advisory_id, repo_event_id, validate
from tracker.core.advisory.record import to_osv
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app

REPO = RepoId("acme/event-model")
EOS_OLD = b'{"eos_token_id": 128001}'
EOS_NEW = b'{"eos_token_id": [128001, 128009]}'
EOS_FIX = "generation.eos_token_id_changed"


def advisories(tracker) -> dict:
    return {a.id: a for a in tracker.store.advisories.find()}


def all_valid(tracker) -> dict:
    """(f) every advisory the tracker holds validates against the OSV schema."""
    found = advisories(tracker)
    assert found, "expected at least one advisory"
    for adv in found.values():
        validate(to_osv(adv.record))
    return found


def query_ids(tracker, revision: str) -> list[str]:
    return sorted(v.id for v in tracker.query(REPO, revision).vulns)


def api_ids(tracker, revision: str) -> list[str]:
    client = TestClient(create_app(tracker))
    out = set()
    for body in ({"commit": revision}, {"package": {"name": REPO}, "version": revision}):
        answer = client.post("/v1/query", json=body)
        assert answer.status_code == 200, answer.text
        out.add(tuple(sorted(v["id"] for v in answer.json().get("vulns", []))))
    assert len(out) == 1, f"the two query shapes disagree: {out}"
    return list(out.pop())


@pytest.fixture
def watched(hub_standin, settings, make):
    """A repo with a baseline (r0) and a fix (r1, eos_token_id), both read."""
    hub_standin.create_repo(REPO)
    r0 = hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": EOS_OLD})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    r1 = hub_standin.commit(REPO, {"generation_config.json": EOS_NEW}, message="fix eos")
    tracker.poll()
    assert set(advisories(tracker)) == {advisory_id(REPO, r1, "update")}
    return tracker, r0, r1


# -- (a) history rewritten -----------------------------------------------------------------


def test_super_squash_with_the_same_content_is_one_history_rewritten_advisory(hub_standin, watched):
    tracker, r0, r1 = watched
    squashed = hub_standin.squash(REPO)
    (result,) = tracker.poll()
    assert result.events == ["history_rewritten"]
    tracker.poll()  # polling again changes nothing

    found = all_valid(tracker)
    rewrites = [a for a in found.values() if a.kind == "history_rewritten"]
    assert len(rewrites) == 1
    (rewrite,) = rewrites
    assert rewrite.id == repo_event_id(REPO, "history_rewritten", sorted([r0, r1]))
    assert rewrite.revision_sha is None
    assert rewrite.severity == "high"
    record = to_osv(rewrite.record)
    assert record["affected"][0]["versions"] == sorted([r0, r1])
    assert "ranges" not in record["affected"][0]  # the old commits are gone from the branch
    assert record["database_specific"]["event"] == "history_rewritten"
    # Same content: nothing but the rewrite itself is new.
    assert set(found) == {rewrite.id, advisory_id(REPO, r1, "update")}

    for old in (r0, r1):
        assert rewrite.id in query_ids(tracker, old)
        assert rewrite.id in api_ids(tracker, old)
    assert rewrite.id not in query_ids(tracker, squashed)
    result = tracker.query(REPO, r0)
    assert result.known and result.head == squashed


def test_gated_again_keeps_the_advisory_and_its_published_date(hub_standin, watched):
    tracker, r0, r1 = watched
    hub_standin.set_gated(REPO, True)
    assert tracker.poll()[0].events == ["gated"]
    (first,) = [a for a in all_valid(tracker).values() if a.kind == "gated"]
    assert first.id == repo_event_id(REPO, "gated", [r0, r1]) and first.id in query_ids(tracker, r0)
    hub_standin.set_gated(REPO, False)
    assert tracker.poll()[0].events == ["restored"]
    hub_standin.set_gated(REPO, True)
    assert tracker.poll()[0].events == ["gated"]
    (again,) = [a for a in all_valid(tracker).values() if a.kind == "gated"]
    assert again.id == first.id  # same revisions concerned: same id, no duplicate
    assert to_osv(again.record)["published"] == to_osv(first.record)["published"]


# -- (b) deleted and created again ----------------------------------------------------------


def test_deleted_and_recreated_under_the_same_id_is_a_critical_advisory(hub_standin, watched):
    tracker, r0, r1 = watched
    hub_standin.delete_repo(REPO)
    (result,) = tracker.poll()
    assert result.events == ["deleted"]
    hub_standin.create_repo(REPO)
    evil = hub_standin.commit(REPO, {"config.json": config_json(model_type="evil"),
                                     "generation_config.json": EOS_NEW})
    (result,) = tracker.poll()
    assert "recreated" in result.events

    found = all_valid(tracker)
    by_kind = {}
    for adv in found.values():
        by_kind.setdefault(adv.kind, []).append(adv)
    (recreated,) = by_kind["recreated"]
    (deleted,) = by_kind["deleted"]
    assert recreated.severity == "critical"
    assert to_osv(recreated.record)["database_specific"]["severity"] == "CRITICAL"
    assert to_osv(recreated.record)["database_specific"]["event"] == "recreated"
    # The id is fixed by the revisions known when the take-over was seen; the new owner's commits
    # join its versions as they arrive.
    assert recreated.id == repo_event_id(REPO, "recreated", [r0, r1])
    assert to_osv(recreated.record)["affected"][0]["versions"] == sorted([r0, r1, evil])
    assert deleted.id == repo_event_id(REPO, "deleted", [r0, r1]) and deleted.severity == "critical"
    # Everyone pinned to a revision of the old repo is told.
    assert {r0, r1} <= set(to_osv(recreated.record)["affected"][0]["versions"])
    for old in (r0, r1):
        assert recreated.id in query_ids(tracker, old)
        assert recreated.id in api_ids(tracker, old)
    # Polling again does not mint a second one.
    tracker.poll()
    assert len([a for a in advisories(tracker).values() if a.kind == "recreated"]) == 1

    # The revisions served under the taken-over name are the dangerous ones: the record's own range
    # (introduced "0", never fixed) covers them, so the index should too.
    assert recreated.id in query_ids(tracker, evil)
    assert recreated.id in api_ids(tracker, evil)


# -- (c) a revision older than the baseline ----------------------------------------------------


@pytest.fixture
def three_commits(hub_standin, settings, make):
    """c0 < c1 < c2 on the Hub; the tracker starts watching at c2 (its baseline)."""
    hub_standin.create_repo(REPO)
    c0 = hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": EOS_OLD})
    c1 = hub_standin.commit(REPO, {"README.md": "# one\n"})
    c2 = hub_standin.commit(REPO, {"README.md": "# two\n"})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    (result,) = tracker.poll()
    assert result.status == "baseline"
    assert [r.sha for r in tracker.store.revisions.of_repo(tracker.store.repos.get(REPO).pk)] == [c2]
    return tracker, c0, c1, c2


def package_ids(tracker, revision: str) -> list[str]:
    """The package-shaped query alone: it looks revisions the tracker has not read up on the Hub."""
    answer = TestClient(create_app(tracker)).post("/v1/query", json={"package": {"name": REPO}, "version": revision})
    assert answer.status_code == 200, answer.text
    return sorted(v["id"] for v in answer.json().get("vulns", []))


def test_a_revision_older_than_the_baseline_is_looked_up_and_later_fixes_affect_it(hub_standin, three_commits):
    tracker, c0, c1, c2 = three_commits
    pk = tracker.store.repos.get(REPO).pk
    assert not tracker.store.revisions.has_commit(pk, c0)
    hub_standin.clear_log()
    result = tracker.query(REPO, c0)
    assert any("/commits/" in r.path for r in hub_standin.requests), "expected a Hub lookup"
    assert (result.known, result.revision, result.vulns, result.behind, result.head) == (True, c0, [], 2, c2)
    assert tracker.store.revisions.commit_graph(pk) == {c2: []}  # a read writes nothing
    hub_standin.clear_log()
    assert tracker.query(REPO, c0).behind == 2
    assert hub_standin.requests == []  # answered from the graph the first look-up fetched

    fix = hub_standin.commit(REPO, {"generation_config.json": EOS_NEW}, message="fix eos")
    tracker.poll()
    fix_id = advisory_id(REPO, fix, "update")
    assert set(all_valid(tracker)) == {fix_id}
    assert to_osv(advisories(tracker)[fix_id].record)["affected"][0]["versions"] == [c2]  # the commits listed
    for sha, behind in ((c0, 3), (c1, 2), (c2, 1)):
        result = tracker.query(REPO, sha)
        assert ([v.id for v in result.vulns], result.behind, result.known) == ([fix_id], behind, True)
        assert package_ids(tracker, sha) == [fix_id]
    assert api_ids(tracker, c2) == [fix_id]  # listed: both query shapes agree
    assert tracker.query(REPO, fix).vulns == []


def test_an_older_revision_queried_after_the_fix_is_covered_too(hub_standin, three_commits):
    tracker, c0, c1, c2 = three_commits
    fix = hub_standin.commit(REPO, {"generation_config.json": EOS_NEW}, message="fix eos")
    tracker.poll()
    fix_id = advisory_id(REPO, fix, "update")
    assert to_osv(advisories(tracker)[fix_id].record)["affected"][0]["versions"] == [c2]
    # Asked about through the HTTP API with its package (a bare {"commit"} names no repo to look
    # it up in: it only matches commits the tracker listed), then by a short sha.
    client = TestClient(create_app(tracker))
    answer = client.post("/v1/query", json={"package": {"name": REPO}, "version": c0}).json()
    assert [v["id"] for v in answer["vulns"]] == [fix_id]
    unread = client.post("/v1/query", json={"commit": c0})  # not listed: an error, never {} that reads as safe
    assert (unread.status_code, unread.json()["code"]) == (404, 5)
    assert unread.json()["message"].startswith(f"the tracker has not read commit {c0}")
    result = tracker.query(REPO, c1[:12])
    assert (result.revision, [v.id for v in result.vulns], result.behind) == (c1, [fix_id], 2)
    record = to_osv(all_valid(tracker)[fix_id].record)
    assert record["affected"][0]["versions"] == [c2]  # reads never rewrite a record


# -- (d) risks undone by a revert, or not ---------------------------------------------------


SAFE = torch_zip(b"\0" * 4096)  # built once: zip entries carry a timestamp
EVIL = torch_zip(b"\0" * 4096, ("os", "system"))
EVIL_TOO = torch_zip(b"\1" * 4096, ("builtins", "eval"))
SAFE_OTHER = torch_zip(b"\2" * 4096)


@pytest.fixture
def pickled(hub_standin, settings, make):
    """r0 (baseline) ships a clean pickle; r1 replaces it with one that imports os.system."""
    hub_standin.create_repo(REPO)
    r0 = hub_standin.commit(REPO, {"config.json": config_json(), "pytorch_model.bin": SAFE})
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    r1 = hub_standin.commit(REPO, {"pytorch_model.bin": EVIL}, message="new weights")
    tracker.poll()
    risk = advisory_id(REPO, r1, "risk")
    adv = advisories(tracker)[risk]
    assert "weights.pickle_dangerous_import" in [f["code"] for f in to_osv(adv.record)["database_specific"]["findings"]]
    assert adv.fixed_sha is None
    return tracker, r0, r1, risk


def test_a_risk_undone_by_reverting_the_file_content_is_fixed(hub_standin, pickled):
    tracker, r0, r1, risk = pickled
    r2 = hub_standin.commit(REPO, {"README.md": "# weights\n"}, message="docs")
    r3 = hub_standin.commit(REPO, {"pytorch_model.bin": SAFE}, message="revert weights")
    tracker.poll()
    adv = all_valid(tracker)[risk]
    assert adv.fixed_sha == r3
    assert to_osv(adv.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": r1}, {"fixed": r3}]
    assert to_osv(adv.record)["affected"][0]["versions"] == sorted([r1, r2])
    assert {"type": "FIX", "url": f"{hub_standin.url}/{REPO}/commit/{r3}"} in to_osv(adv.record)["references"]
    assert risk in query_ids(tracker, r1) and risk in query_ids(tracker, r2)
    assert risk not in query_ids(tracker, r3) and risk not in api_ids(tracker, r3)
    assert risk not in query_ids(tracker, r0)


def test_a_risk_whose_file_changes_to_something_still_risky_is_not_fixed(hub_standin, pickled):
    tracker, _r0, r1, risk = pickled
    r2 = hub_standin.commit(REPO, {"pytorch_model.bin": EVIL_TOO}, message="other weights")
    tracker.poll()
    found = all_valid(tracker)
    adv = found[risk]
    assert adv.fixed_sha is None
    assert to_osv(adv.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": r1}]
    assert to_osv(adv.record)["affected"][0]["versions"] == sorted([r1, r2])
    # The new file is a risk of its own.
    assert advisory_id(REPO, r2, "risk") in found
    assert set(query_ids(tracker, r2)) >= {risk, advisory_id(REPO, r2, "risk")}


def test_a_risk_whose_file_is_replaced_by_a_different_clean_pickle(hub_standin, pickled):
    tracker, _r0, _r1, risk = pickled
    r2 = hub_standin.commit(REPO, {"pytorch_model.bin": SAFE_OTHER}, message="clean weights")
    tracker.poll()
    found = all_valid(tracker)
    assert advisory_id(REPO, r2, "risk") not in found  # nothing risky is introduced by r2
    assert found[risk].fixed_sha is not None
    assert found[risk].fixed_sha == r2


# -- (e) withdrawn by re-analysis with newer rules -------------------------------------------


def test_reanalysis_with_a_severity_override_withdraws_the_advisory(watched, settings, make):
    tracker, r0, r1 = watched
    fix_id = advisory_id(REPO, r1, "update")
    before = to_osv(advisories(tracker)[fix_id].record)
    assert fix_id in query_ids(tracker, r0) and api_ids(tracker, r0) == [fix_id]

    newer = make(settings, severity={EOS_FIX: "info"})
    assert newer.reanalyse(REPO) == 1
    found = all_valid(newer)
    assert set(found) == {fix_id}  # same id, no duplicate
    adv = found[fix_id]
    assert adv.withdrawn and "withdrawn" in to_osv(adv.record)
    assert to_osv(adv.record)["modified"] == to_osv(adv.record)["withdrawn"] and to_osv(adv.record)["modified"] > before["modified"]
    assert to_osv(adv.record)["published"] == before["published"]
    assert to_osv(adv.record)["summary"].startswith("Withdrawn")

    assert query_ids(newer, r0) == [], "Advisor.query returns a withdrawn advisory"
    assert api_ids(newer, r0) == []
    client = TestClient(create_app(newer))
    batch = client.post("/v1/querybatch", json={"queries": [{"commit": r0}]}).json()
    assert batch == {"results": [{}]}
    assert client.get(f"/v1/vulns/{fix_id}").json()["withdrawn"] == to_osv(adv.record)["withdrawn"]

    # Re-analysing again with the same rules changes nothing.
    assert newer.reanalyse(REPO) == 0
    assert to_osv(advisories(newer)[fix_id].record) == to_osv(adv.record)
