"""The OSV.dev client against the stand-in: batches, pagination, retries, failures, cache."""

from __future__ import annotations

import pytest

from tracker.adapters.osvdev import OsvClient

MODIFIED_37Q5 = "2024-04-10T22:20:57Z"


def client(standin, **kw):
    kw.setdefault("backoff", 0)
    return OsvClient(base_url=standin.url, timeout=5, **kw)


def test_querybatch(osv_standin):
    with client(osv_standin) as osv:
        result = osv.querybatch([("PyPI", "transformers", "4.36.0"), ("PyPI", "torch", "2.7.1"),
                                 ("PyPI", "torch", "2.7.1"), ("PyPI", "numpy", "1.26.4")])
    assert result.ok and result.failed == {} and result.cached == set()
    assert len(result.vulns[("transformers", "4.36.0")]) == 27
    assert len(result.vulns[("torch", "2.7.1")]) == 15
    assert result.vulns[("numpy", "1.26.4")] == []
    assert all(set(v) == {"id", "modified"} for v in result.vulns[("transformers", "4.36.0")])
    assert {"id": "GHSA-37q5-v5qm-c9v8", "modified": MODIFIED_37Q5} in result.vulns[("transformers", "4.36.0")]
    assert len(osv_standin.requests) == 1


def test_querybatch_follows_page_tokens(osv_standin):
    osv_standin.set_page_size(batch_page_size=4)
    with client(osv_standin) as osv:
        result = osv.querybatch([("PyPI", "transformers", "4.36.0"), ("PyPI", "torch", "2.7.1"),
                                 ("PyPI", "transformers", "99")])
    ids = [v["id"] for v in result.vulns[("transformers", "4.36.0")]]
    assert len(ids) == len(set(ids)) == 27
    assert len(result.vulns[("torch", "2.7.1")]) == 15 and result.vulns[("transformers", "99")] == []
    # 27 results at 4 a page: 7 requests; later pages re-send only the queries that still have a token
    assert len(osv_standin.requests) == 7
    assert [len(r.body["queries"]) for r in osv_standin.requests] == [3, 2, 2, 2, 1, 1, 1]
    assert "page_token" in osv_standin.requests[1].body["queries"][0]


def test_retries_on_500(osv_standin):
    osv_standin.fail_next(2, status=500)
    with client(osv_standin, max_attempts=3) as osv:
        result = osv.querybatch([("PyPI", "torch", "2.7.1")])
    assert result.ok and len(result.vulns[("torch", "2.7.1")]) == 15
    assert [r.status for r in osv_standin.requests] == [500, 500, 200]


def test_failure_is_reported_not_raised(osv_standin):
    osv_standin.fail_next(3, status=503)
    with client(osv_standin, max_attempts=3) as osv:
        result = osv.querybatch([("PyPI", "torch", "2.7.1"), ("PyPI", "transformers", "4.36.0")])
        assert not result.ok and result.vulns == {}
        assert set(result.failed) == {("torch", "2.7.1"), ("transformers", "4.36.0")}
        assert "gave up after 3 attempts" in result.failed[("torch", "2.7.1")]
        # the next poll retries and succeeds
        assert osv.querybatch([("PyPI", "torch", "2.7.1")]).ok


def test_unreachable_server_is_not_fatal():
    with OsvClient(base_url="http://127.0.0.1:9", timeout=1, backoff=0, max_attempts=2) as osv:
        result = osv.querybatch([("PyPI", "torch", "2.7.1")])
        assert "ConnectError" in result.failed[("torch", "2.7.1")]
        lookup = osv.get_vuln("PYSEC-2025-41")
        assert not lookup.found and "ConnectError" in lookup.error


def test_bad_request_is_not_retried(osv_standin):
    with client(osv_standin) as osv:
        result = osv.querybatch([("Hugging Face", "x", "1")])
    assert "HTTP 400" in result.failed[("x", "1")]
    assert len(osv_standin.requests) == 1


def test_cache_hit_makes_no_request(osv_standin):
    cache: dict = {}
    now = [1000.0]
    with client(osv_standin, cache=cache, clock=lambda: now[0], max_age=60) as osv:
        first = osv.querybatch([("PyPI", "torch", "2.7.1"), ("PyPI", "numpy", "1.0")])
        assert len(osv_standin.requests) == 1
        again = osv.querybatch([("PyPI", "torch", "2.7.1"), ("PyPI", "numpy", "1.0")])
        assert again.vulns == first.vulns and again.cached == {("torch", "2.7.1"), ("numpy", "1.0")}
        assert len(osv_standin.requests) == 1
        now[0] += 61  # stale: asked again
        assert osv.querybatch([("PyPI", "torch", "2.7.1")]).cached == set()
        assert len(osv_standin.requests) == 2


def test_get_vuln_and_cache_by_modified(osv_standin):
    cache: dict = {}
    with client(osv_standin, cache=cache) as osv:
        found = osv.get_vuln("PYSEC-2025-41")
        assert found.found and found.record["aliases"] == ["CVE-2025-32434", "GHSA-53q9-r3pm-6pq6"]
        assert osv.get_vuln("PYSEC-2025-41", modified=found.record["modified"]).record == found.record
        assert len(osv_standin.requests) == 1
        missing = osv.get_vuln("PYSEC-0000-0")
        assert not missing.found and missing.error is None
    assert len(osv_standin.requests) == 2


@pytest.mark.parametrize("status", [429, 500])
def test_get_vuln_retries(osv_standin, status):
    osv_standin.fail_next(1, status=status)
    with client(osv_standin) as osv:
        assert osv.get_vuln("GHSA-282v-666c-3fvg").found
