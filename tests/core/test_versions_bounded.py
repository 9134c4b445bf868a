"""``versions`` are computed when a record is read, and bounded by ``[advisories] max_versions``.

The one way records may differ from those the tracker stored with their versions before: past
``max_versions`` affected commits a record lists the newest ones and says so in
``database_specific.versions``. Every read (the query API's hot path, ``/v1/vulns``, the CLI, the
export) gives the same record.
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tracker.core.advisory import advisory_id, validate
from tracker.core.advisory.record import to_osv
from tracker.core.model import RepoId
from tracker.services import advisories
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

REPO = RepoId("acme/many-fixes")


def test_versions_past_max_versions_list_the_newest_and_say_so(hub_standin, settings, make, tmp_path):
    hub_standin.create_repo(REPO)
    shas = [hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 0}'})]
    tracker = make(settings, advisories={"max_versions": 3})
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    for k in range(1, 6):
        shas.append(hub_standin.commit(REPO, {"generation_config.json": json.dumps({"eos_token_id": k}).encode()},
                                       message=f"fix {k}"))
    tracker.poll()
    last = advisory_id(REPO, shas[5], "update")  # affects shas[0..4]: five commits, three listed
    second = advisory_id(REPO, shas[2], "update")  # affects shas[0..1]: all listed
    row = tracker.store.advisories.get(last)
    assert row is not None
    validate(to_osv(row.record))
    assert to_osv(row.record)["affected"][0]["versions"] == sorted(shas[2:5])  # the newest three
    assert to_osv(row.record)["database_specific"]["versions"] == {
        "listed": 3, "affected": 5,
        "note": "the newest 3 of 5 affected commits are listed; the GIT range covers them all"}
    assert to_osv(row.record)["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": shas[5]}]
    small = tracker.store.advisories.get(second)
    assert small is not None
    assert to_osv(small.record)["affected"][0]["versions"] == sorted(shas[:2])
    assert "versions" not in to_osv(small.record)["database_specific"]

    # Every read serves the same record: the API's text splice, /v1/vulns, the CLI, the export.
    client = TestClient(create_app(tracker))
    page = client.post("/v1/query", json={"commit": shas[0]}).json()
    assert [v["id"] for v in page["vulns"]] == sorted(advisory_id(REPO, s, "update") for s in shas[1:])
    served = {v["id"]: v for v in page["vulns"]}
    assert served[last] == to_osv(row.record) and served[second] == to_osv(small.record)
    assert client.get(f"/v1/vulns/{last}").json() == to_osv(row.record)
    # JSON out sends the record as read, byte for byte: the note's keys in the order they were written.
    assert list(row.osv["database_specific"]["versions"]) == ["listed", "affected", "note"]
    assert client.get(f"/v1/vulns/{last}").content == json.dumps(
        row.osv, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    assert tracker.query(REPO, shas[0]).vulns[0].osv["affected"][0]["versions"] in (
        sorted(shas[:k]) if k <= 3 else sorted(shas[k - 3:k]) for k in range(1, 6))
    out = tmp_path / "export"
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": settings.database.url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}
    (tmp_path / "tracker.toml").write_text("[advisories]\nmax_versions = 3\n")
    result = CliRunner().invoke(main, ["export", "osv", str(out)], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote 5 advisories and all.zip to {out}"
    assert json.loads((out / f"{last}.json").read_text()) == to_osv(row.record)
    assert not (out / "all.zip.partial").exists()


def test_query_pages_end_at_the_versions_budget_and_together_answer_everything(
        hub_standin, settings, make, monkeypatch):
    """A page of /v1/query ends once its records list PAGE_VERSIONS versions (one record at least);
    following next_page_token gives every advisory once, in id order, each as /v1/vulns serves it."""
    hub_standin.create_repo(REPO)
    shas = [hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 0}'})]
    tracker = make(settings, advisories={"max_versions": 3})
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    for k in range(1, 8):
        shas.append(hub_standin.commit(REPO, {"generation_config.json": json.dumps({"eos_token_id": k}).encode()},
                                       message=f"fix {k}"))
    tracker.poll()
    # The fix at shas[k] affects shas[0..k-1]: k commits, min(k, 3) of them listed.
    listed = {advisory_id(REPO, shas[k], "update"): min(k, 3) for k in range(1, 8)}
    monkeypatch.setattr(advisories, "PAGE_VERSIONS", 3)
    client = TestClient(create_app(tracker))
    pages, token = [], None
    while True:
        body = {"commit": shas[0], **({"page_token": token} if token else {})}
        page = client.post("/v1/query", json=body).json()
        pages.append([v["id"] for v in page["vulns"]])
        for v in page["vulns"]:
            assert v == client.get(f"/v1/vulns/{v['id']}").json()
            assert len(v["affected"][0]["versions"]) == listed[v["id"]]
        token = page.get("next_page_token")
        if token is None:
            break
        assert token == str(sum(len(p) for p in pages))
    assert [i for p in pages for i in p] == sorted(listed)
    expected, current, count = [], [], 0  # the rule: add records until the page lists 3 versions
    for vid in sorted(listed):
        if current and count >= 3:
            expected.append(current)
            current, count = [], 0
        current.append(vid)
        count += listed[vid]
    assert pages == [*expected, current]
    assert len(pages) > 3  # 18 versions in all: the budget cut the answer into pages
    # Ids only (querybatch) are not cut by the budget.
    batch = client.post("/v1/querybatch", json={"queries": [{"commit": shas[0]}]}).json()
    assert [v["id"] for v in batch["results"][0]["vulns"]] == sorted(listed)


def _fixes(hub_standin, repo, start, count):
    return [hub_standin.commit(repo, {"generation_config.json": json.dumps({"eos_token_id": k}).encode()},
                               message=f"fix {k}") for k in range(start, start + count)]


def test_versions_follow_a_growing_chain_and_a_repo_stored_again_under_the_same_key(hub_standin, settings, make):
    """Served versions come from each chain's commits as read once (then extended as the chain grows):
    they follow new commits, and a repo removed and another one stored (SQLite gives it the same
    key) is read afresh, never served the commits of the one before."""
    hub_standin.create_repo(REPO)
    shas = [hub_standin.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 0}'})]
    tracker = make(settings, advisories={"max_versions": 3})
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    shas += _fixes(hub_standin, REPO, 1, 3)
    tracker.poll()
    client = TestClient(create_app(tracker))

    def served(sha: str) -> dict[str, list[str]]:
        page = client.post("/v1/query", json={"commit": sha}).json()
        return {v["id"]: v["affected"][0]["versions"] for v in page.get("vulns", [])}

    assert served(shas[0]) == {advisory_id(REPO, shas[k], "update"): sorted(shas[max(0, k - 3):k]) for k in (1, 2, 3)}
    shas += _fixes(hub_standin, REPO, 4, 2)  # the chain grows past what was read
    tracker.poll()
    assert served(shas[4]) == {advisory_id(REPO, shas[5], "update"): sorted(shas[2:5])}
    assert served(shas[0])[advisory_id(REPO, shas[5], "update")] == sorted(shas[2:5])

    pk = tracker.store.repos.get(REPO).pk
    assert tracker.store.repos.remove(REPO)
    other = RepoId("acme/other-fixes")
    hub_standin.create_repo(other)
    again = [hub_standin.commit(other, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 9}'})]
    tracker.store.repos.add(other, now=tracker.clock())
    tracker.poll()
    again += _fixes(hub_standin, other, 10, 2)
    tracker.poll()
    assert tracker.store.repos.get(other).pk == pk  # the key of the repo removed: nothing cached may apply
    assert served(again[0]) == {advisory_id(other, again[1], "update"): [again[0]],
                                advisory_id(other, again[2], "update"): sorted(again[:2])}
    assert served(shas[0]) == {}
