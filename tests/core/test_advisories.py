"""Advisories end to end: a history with a fix, a risk later undone and cosmetic edits."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from tests.core.conftest import config_json
from tracker.core.advisory import advisory_id, validate
from tracker.core.advisory.record import to_osv
from tracker.core.model import RepoId
from tracker.surfaces.api import create_app
from tracker.surfaces.cli import main

REPO = RepoId("acme/chat-model")


def torch_zip(payload: bytes = b"", globals_: tuple[str, str] = ("collections", "OrderedDict")) -> bytes:
    """A PyTorch-style zip checkpoint whose data.pkl imports one global; built, never unpickled."""
    module, name = globals_
    pkl = b"\x80\x02c" + f"{module}\n{name}\n".encode() + b")R."
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/data/0", payload)
    return buf.getvalue()


README = "---\nlicense: apache-2.0\n---\n# Chat model\n"


@pytest.fixture
def history(hub_standin, settings, make):
    hub = hub_standin
    hub.create_repo(REPO)
    r0 = hub.commit(REPO, {"config.json": config_json(), "generation_config.json": b'{"eos_token_id": 128001}',
                           "README.md": README}, message="initial")
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll()
    r1 = hub.commit(REPO, {"generation_config.json": b'{"eos_token_id": [128001, 128009]}'}, message="fix eos")
    r2 = hub.commit(REPO, {"README.md": README + "\nBetter words.\n"}, message="typo")
    r3 = hub.commit(REPO, {"pytorch_model.bin": torch_zip(b"\0" * 4096)}, message="add pt weights")
    r4 = hub.commit(REPO, {"README.md": README + "\nEven better words.\n"}, message="docs")
    r5 = hub.commit(REPO, {}, delete=["pytorch_model.bin"], message="remove pickle")
    tracker.poll()
    return tracker, [r0, r1, r2, r3, r4, r5]


def ids(tracker):
    return {a.id: a for a in tracker.store.advisories.find()}


def test_exactly_the_expected_advisories(history):
    tracker, (r0, r1, r2, r3, r4, r5) = history
    advisories = ids(tracker)
    fix, risk, removal = advisory_id(REPO, r1, "update"), advisory_id(REPO, r3, "risk"), advisory_id(REPO, r5, "update")
    assert set(advisories) == {fix, risk, removal}
    for adv in advisories.values():
        validate(to_osv(adv.record))

    eos = to_osv(advisories[fix].record)
    assert eos["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": r1}]
    assert eos["affected"][0]["versions"] == [r0]
    assert eos["database_specific"]["kind"] == "update"
    assert [f["code"] for f in eos["database_specific"]["findings"]] == ["generation.eos_token_id_changed"]
    assert eos["summary"] == (f"Upstream change in acme/chat-model@{r1[:12]}: "
                              "eos_token_id: 128001 → [128001, 128009]")

    pickled = to_osv(advisories[risk].record)
    assert pickled["affected"][0]["ranges"][0]["events"] == [{"introduced": r3}, {"fixed": r5}]
    assert pickled["affected"][0]["versions"] == sorted([r3, r4])
    assert advisories[risk].fixed_sha == r5
    assert pickled["database_specific"]["kind"] == "risk"
    assert "weights.pickle_added" in [f["code"] for f in pickled["database_specific"]["findings"]]


@pytest.mark.parametrize("index, expected", [
    (0, ["fix", "removal"]), (1, ["removal"]), (2, ["removal"]), (3, ["risk", "removal"]), (4, ["risk", "removal"]),
    (5, []),
])
def test_querying_each_revision_returns_exactly_the_expected_ids(history, index, expected):
    tracker, revs = history
    names = {"fix": advisory_id(REPO, revs[1], "update"), "risk": advisory_id(REPO, revs[3], "risk"),
             "removal": advisory_id(REPO, revs[5], "update")}
    want = sorted(names[n] for n in expected)
    result = tracker.query(REPO, revs[index])
    assert sorted(v.id for v in result.vulns) == want
    assert result.behind == 5 - index and result.head == revs[5] and result.known

    app = create_app(tracker)
    client = TestClient(app)
    for body in ({"commit": revs[index]}, {"package": {"name": REPO}, "version": revs[index]},
                 {"package": {"purl": f"pkg:huggingface/{REPO}"}, "version": revs[index]}):
        answer = client.post("/v1/query", json=body)
        assert answer.status_code == 200
        assert sorted(v["id"] for v in answer.json().get("vulns", [])) == want
        if not want:
            assert answer.json() == {}


def test_polling_again_and_reanalysing_never_duplicate_and_keep_modified(history, sleeps):
    tracker, revs = history
    before = {i: (to_osv(a.record)["modified"], to_osv(a.record)) for i, a in ids(tracker).items()}
    tracker.poll()
    assert tracker.reanalyse(REPO) == 0
    after = {i: (to_osv(a.record)["modified"], to_osv(a.record)) for i, a in ids(tracker).items()}
    assert after == before


def test_cli_query_advisories_and_export(history, hub_standin, tmp_path, monkeypatch):
    tracker, revs = history
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracker.toml").write_text("")
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": tracker.settings.database.url,
           "TRACKER_CONFIG": str(tmp_path / "tracker.toml")}
    runner = CliRunner()
    fix, risk, removal = (advisory_id(REPO, revs[1], "update"), advisory_id(REPO, revs[3], "risk"),
                          advisory_id(REPO, revs[5], "update"))
    expected = [[fix, removal], [removal], [removal], [risk, removal], [risk, removal], []]
    for index, want in enumerate(expected):
        out = runner.invoke(main, ["query", "--repo", REPO, "--revision", revs[index][:12], "--json"], env=env)
        assert out.exit_code == 0, out.output
        data = json.loads(out.output)
        assert sorted(v["id"] for v in data["vulns"]) == sorted(want)
        assert (data["revision"], data["behind"], data["head"]) == (revs[index], 5 - index, revs[5])
    text = runner.invoke(main, ["query", "--repo", REPO, "--revision", revs[5]], env=env).output
    assert text == f"{REPO}@{revs[5][:12]}: 0 revision(s) behind {revs[5][:12]}\nno advisories affect this revision\n"

    listed = json.loads(runner.invoke(main, ["advisories", "--repo", REPO, "--json"], env=env).output)
    assert len(listed) == 3
    assert json.loads(runner.invoke(main, ["advisories", "--since", "2999-01-01", "--json"], env=env).output) == []

    out = runner.invoke(main, ["export", "osv", str(tmp_path / "osv")], env=env)
    assert out.exit_code == 0 and "wrote 3 advisories" in out.output
    files = sorted(p.name for p in (tmp_path / "osv").iterdir())
    assert files == sorted([f"{i}.json" for i in ids(tracker)] + ["all.zip"])
    with zipfile.ZipFile(tmp_path / "osv" / "all.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"{i}.json" for i in ids(tracker))
        for name in zf.namelist():
            validate(json.loads(zf.read(name)))


def test_a_revision_not_read_yet_is_looked_up_on_the_hub(history, hub_standin):
    tracker, revs = history
    # A commit on main the tracker has not polled yet: found on the Hub, placed after r5.
    r6 = hub_standin.commit(REPO, {"README.md": README + "\nNew.\n"}, message="later")
    result = tracker.query(REPO, r6)
    assert result.known and result.vulns == [] and result.behind is None
    # A branch name resolves through the Hub too.
    result = tracker.query(REPO, "main")
    assert result.revision == r6


def test_api_vulns_pagination_and_errors(history):
    tracker, revs = history
    app = create_app(tracker, page_size=1)
    client = TestClient(app)
    first = client.post("/v1/query", json={"commit": revs[3]}).json()
    assert len(first["vulns"]) == 1 and first["next_page_token"] == "1"
    second = client.post("/v1/query", json={"commit": revs[3], "page_token": first["next_page_token"]}).json()
    assert len(second["vulns"]) == 1 and "next_page_token" not in second
    assert {first["vulns"][0]["id"], second["vulns"][0]["id"]} == {advisory_id(REPO, revs[3], "risk"),
                                                                   advisory_id(REPO, revs[5], "update")}
    batch = client.post("/v1/querybatch", json={"queries": [{"commit": revs[5]}, {"commit": revs[1]}]}).json()
    assert batch["results"][0] == {}
    assert batch["results"][1]["vulns"] == [{"id": advisory_id(REPO, revs[5], "update"),
                                             "modified": ids(tracker)[advisory_id(REPO, revs[5], "update")]
                                             .record.modified}]
    vuln_id = advisory_id(REPO, revs[1], "update")
    assert client.get(f"/v1/vulns/{vuln_id}").json() == to_osv(ids(tracker)[vuln_id].record)
    assert client.get("/v1/vulns/x_HFUT-nope").json() == {"code": 5, "message": "Bug not found."}
    bad = client.post("/v1/query", json={"commit": "abc"})
    assert (bad.status_code, bad.json()) == (400, {"code": 3, "message": "commit must be a full 40-hex sha"})
    assert client.post("/v1/query", content=b"{nope").status_code == 400
    page = client.get(f"/advisories/{vuln_id}")
    assert page.status_code == 200 and vuln_id in page.text
