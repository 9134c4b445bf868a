"""The OSV stand-in answers like OSV.dev over the real PyPA/GHSA records (NOTES.md §2, §4)."""

from __future__ import annotations

import httpx
import pytest
from hubstandin.osv import OsvDatabase

from tracker.core.advisory.validate import validate


@pytest.fixture(scope="module")
def db(osv_standin_server) -> OsvDatabase:
    """The stand-in's database, loaded from the real records (once per session)."""
    return osv_standin_server.state.db


def test_every_fixture_record_loads_and_validates(db):
    assert len(db.records) == 68
    for record in db.records.values():
        validate(record)  # YAML timestamps came back as RFC 3339 'Z' strings
    assert db.records["PYSEC-2025-41"]["modified"] == "2025-05-28T15:23:37.843138Z"


@pytest.mark.parametrize(
    ("name", "version", "count"),
    [("transformers", "4.36.0", 27), ("transformers", "4.53.0", 11), ("torch", "2.7.1", 15), ("torch", "1.13.1", 28)],
)
def test_counts_match_notes(db, name, version, count):
    assert len(db.match_package("PyPI", name, version)) == count


def test_unparsable_events_are_skipped_but_versions_apply(db):
    # PYSEC records with last_affected "2.6.0-NA" / "2.6.0-cu124": the bound is skipped.
    hits = {r["id"] for r in db.match_package("PyPI", "torch", "2.7.1")}
    assert "PYSEC-2025-41" not in hits  # fixed: 2.6.0
    assert "PYSEC-2025-41" in {r["id"] for r in db.match_package("PyPI", "Torch", "1.13.1")}
    # Nine torch records bound by "2.5.0-NA"/"2.6.0-cu124" only: skipped, the range is unbounded
    # and, as on OSV.dev, they match every later version too.
    assert [r["id"] for r in db.match_package("PyPI", "torch", "99")] == [
        "PYSEC-2025-189", "PYSEC-2025-190", "PYSEC-2025-192", "PYSEC-2025-193", "PYSEC-2025-194",
        "PYSEC-2025-195", "PYSEC-2025-196", "PYSEC-2025-197", "PYSEC-2025-210"]
    assert db.match_package("PyPI", "transformers", "99") == []


def test_query_shapes(osv_standin):
    with httpx.Client(base_url=osv_standin.url) as http:
        r = http.post("/v1/query", json={"package": {"name": "transformers", "ecosystem": "PyPI"}, "version": "4.36.0"})
        assert r.status_code == 200 and len(r.json()["vulns"]) == 27 and "next_page_token" not in r.json()
        assert http.post("/v1/query", json={"package": {"name": "transformers", "ecosystem": "PyPI"},
                                            "version": "99.0"}).json() == {}
        assert len(http.post("/v1/query", json={"package": {"purl": "pkg:pypi/torch@2.7.1"}}).json()["vulns"]) == 15
        assert http.post("/v1/query", json={"package": {"purl": "pkg:npm/left-pad@1.0.0"}}).json() == {}
        bad = http.post("/v1/query", json={"package": {"purl": "pkg:pypi/torch@2.7.1"}, "version": "2.7.1"})
        assert bad.status_code == 400 and bad.json() == {"code": 3, "message": "version specified in params and PURL query"}
        assert http.post("/v1/query", json={"commit": "xyz"}).json() == {"code": 3, "message": "invalid hash"}
        assert http.post("/v1/query", json={"package": {"name": "x", "ecosystem": "Hugging Face"},
                                            "version": "1"}).status_code == 400
        batch = http.post("/v1/querybatch", json={"queries": [
            {"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.7.1"},
            {"package": {"name": "transformers", "ecosystem": "PyPI"}, "version": "99"},
        ]}).json()
        assert len(batch["results"]) == 2 and batch["results"][1] == {}
        assert all(set(v) == {"id", "modified"} for v in batch["results"][0]["vulns"])
        assert http.post("/v1/querybatch", json={"queries": [{}] * 1001}).json()["message"] == "too many queries"
        assert http.post("/v1/querybatch", json={"queries": [{"commit": ""}]}).json()["message"] == \
            "error in query at index 0: invalid hash"
        assert http.get("/v1/vulns/GHSA-282v-666c-3fvg").json()["id"] == "GHSA-282v-666c-3fvg"
        missing = http.get("/v1/vulns/PYSEC-0000-0")
        assert missing.status_code == 404 and missing.json() == {"code": 5, "message": "Vulnerability not found"}


def test_query_pagination(osv_standin):
    osv_standin.set_page_size(page_size=10)
    body = {"package": {"name": "transformers", "ecosystem": "PyPI"}, "version": "4.36.0"}
    ids, pages = [], 0
    with httpx.Client(base_url=osv_standin.url) as http:
        while True:
            data = http.post("/v1/query", json=body).json()
            pages += 1
            ids += [v["id"] for v in data.get("vulns", [])]
            if not data.get("next_page_token"):
                break
            body["page_token"] = data["next_page_token"]
    assert pages == 3 and len(ids) == len(set(ids)) == 27


def test_fault_knob(osv_standin):
    osv_standin.fail_next(2, status=429)
    with httpx.Client(base_url=osv_standin.url) as http:
        assert http.get("/v1/vulns/PYSEC-2025-41").status_code == 429
        assert http.get("/v1/vulns/PYSEC-2025-41").json() == {"code": 8, "message": "injected fault"}
        assert http.get("/v1/vulns/PYSEC-2025-41").status_code == 200
    assert [r.status for r in osv_standin.requests] == [429, 429, 200]
