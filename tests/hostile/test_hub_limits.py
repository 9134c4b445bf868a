"""Every answer the adapter reads is bounded, and every failure is one of the tracker's own errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hubstandin import HubStandin

from tests.hostile.hub_support import make_repo
from tracker.adapters.hub import HubClient
from tracker.adapters.hub.guards import server_wait
from tracker.core.errors import ConfigError, HubRateLimited, HubUnavailable, UpstreamFileError
from tracker.core.model import RepoId

INFO = "/api/models/acme/tiny?expand=sha&expand=gated&expand=private"  # an identity check: never the siblings list

REPO = RepoId("acme/tiny")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def client(hub: HubStandin, **options: object) -> HubClient:
    return HubClient(hub.url, token=False, sleep=lambda _s: None, **options)  # type: ignore[arg-type]


# -- wait hints -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "999999999999999"}, 86400.0),
        ({"retry-after": "9" * 150}, 86400.0),
        ({"retry-after": "9" * 5000}, None),  # not a header anyone sends: ignored
        ({"retry-after": "-5"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "1e400"}, None),
        ({"retry-after": "Thu, 01 Jan 2026 00:01:40 GMT"}, 100.0),
        ({"retry-after": "Wed, 31 Dec 2025 00:00:00 GMT"}, 0.0),  # in the past
        ({"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"}, 86400.0),
        ({"retry-after": "Thu, 01 Jan 2026 00:01:40 -0000"}, 100.0),  # naive date: read as GMT
        ({"ratelimit": '"api";r=0;t=55'}, 55.0),
        ({"ratelimit": '"api";r=0;t=999999999999999', "retry-after": "5"}, 86400.0),
        ({"ratelimit": '"api";r=3;t=55', "retry-after": "5"}, 5.0),  # not exhausted: Retry-After counts
        ({"ratelimit": '"api";r=0;t=-1', "retry-after": "5"}, 5.0),
    ],
)
def test_wait_hints_are_parsed_without_overflow_and_capped(headers: dict[str, str], expected: float | None) -> None:
    assert server_wait(headers, cap=86400.0, now=NOW) == expected


def test_a_huge_retry_after_defers_by_max_defer_at_most(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=429, retry_after="999999999999999")
    with pytest.raises(HubRateLimited) as caught:
        client(hub_standin).repo_info(REPO)
    assert caught.value.retry_after == 86400.0
    hub_standin.faults.add("/api/models/acme/tiny", status=503, ratelimit=("api", 0, 10**15))
    with pytest.raises(HubRateLimited) as caught:
        client(hub_standin, max_defer=3600.0).repo_info(REPO)
    assert caught.value.retry_after == 3600.0
    assert str(caught.value) == f"GET {hub_standin.url}{INFO}: 503, server asks to wait 3600s"


def test_a_garbage_retry_after_is_retried_then_rate_limited_without_a_hint(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=429, retry_after="-1", times=None)
    with pytest.raises(HubRateLimited) as caught:
        client(hub_standin, max_retries=2).repo_info(REPO)
    assert caught.value.retry_after is None
    assert len(hub_standin.requests) == 3


# -- redirects, URLs, decoding -----------------------------------------------------------------


def test_a_get_redirect_loop_is_a_clear_hub_unavailable(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=302, headers={"Location": "/api/models/acme/tiny"},
                           times=None)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin, max_redirects=5).repo_info(REPO)
    assert str(caught.value) == f"GET {hub_standin.url}{INFO}: more than 5 redirects (a redirect loop?)"
    assert len(hub_standin.requests) == 6


def test_a_head_redirect_loop_ends_in_the_api_fallback(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    hub_standin.faults.add("/resolve/", method="HEAD", status=307,
                           headers={"Location": "/acme/tiny/resolve/main/config.json"}, times=None)
    assert client(hub_standin).head(REPO).sha == sha
    assert [r.method for r in hub_standin.requests] == ["HEAD", "HEAD", "HEAD", "GET"]


@pytest.mark.parametrize("location", ["http://[::1", "ftp://127.0.0.1/x", "file:///etc/passwd"])
def test_a_malformed_or_foreign_scheme_redirect_is_hub_unavailable(hub_standin: HubStandin, location: str) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=302, headers={"Location": location})
    with pytest.raises(HubUnavailable, match=r"redirect to a (malformed|non-HTTP) URL"):
        client(hub_standin).repo_info(REPO)


def test_a_repo_id_with_a_trailing_newline_is_refused_before_any_request(hub_standin: HubStandin) -> None:
    with pytest.raises(ConfigError) as caught:
        client(hub_standin).head(RepoId("acme/tiny\n"))
    assert str(caught.value).startswith("invalid repo id 'acme/tiny\\n': each part must be")
    assert hub_standin.requests == []


def test_an_undecodable_body_is_hub_unavailable(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=b"this is not gzip", headers={"Content-Encoding": "gzip"})
    with pytest.raises(HubUnavailable, match="body cut off: DecodingError"):
        client(hub_standin).repo_info(REPO)


# -- sizes --------------------------------------------------------------------------------------


def test_an_api_answer_announcing_10_gb_is_refused_before_reading(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=b"[" + b" " * 65536, endless=True,
                           headers={"Content-Length": "10000000000"})
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin, max_api_bytes=1024 * 1024).repo_info(REPO)
    assert str(caught.value) == "acme/tiny info: the Hub announced 10,000,000,000 bytes, over the 1,048,576-byte cap"


def test_an_api_answer_that_never_ends_is_cut_at_the_cap(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/tree/", body=b"[" + b" " * 65536, endless=True)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin, max_api_bytes=1024 * 1024).snapshot(REPO, "main")
    assert str(caught.value) == "acme/tiny@main tree: answer over the 1,048,576-byte cap"


def test_a_deeply_nested_api_answer_is_malformed_json_not_a_recursion_error(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin).repo_info(REPO)
    assert str(caught.value) == "acme/tiny info: the Hub answered malformed JSON: JSON nested deeper than 64 levels"


def test_a_deeply_nested_error_answer_is_still_mapped(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=500, body=b"[" * 30_000 + b"]" * 30_000)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin, max_retries=0).repo_info(REPO)
    assert str(caught.value) == f"GET {hub_standin.url}{INFO}: HTTP 500 (after 0 retries)"
    hub_standin.faults.add("/api/models/acme/tiny", status=400, body=b"[" * 30_000 + b"]" * 30_000)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin, max_retries=0).repo_info(REPO)
    assert str(caught.value) == "Bad request:"  # huggingface_hub's words, the hostile body dropped


def test_a_safetensors_header_nested_100000_deep_is_an_unreadable_header(hub_standin: HubStandin) -> None:
    header = b"[" * 100_000 + b"]" * 100_000
    hub_standin.create_repo("acme/w")
    sha = hub_standin.commit("acme/w", {"model.safetensors": len(header).to_bytes(8, "little") + header})
    with pytest.raises(UpstreamFileError) as caught:
        client(hub_standin).safetensors_header(RepoId("acme/w"), sha, "model.safetensors", max_bytes=1 << 25)
    assert str(caught.value) == "model.safetensors: safetensors header is unreadable: JSON nested deeper than 64 levels"


# -- listings -----------------------------------------------------------------------------------


def _commit(sha: str) -> dict[str, object]:
    return {"id": sha, "title": "t", "message": "", "date": "2026-01-01T00:00:00.000Z", "authors": []}


def test_commit_listing_stops_at_max_pages(tmp_path: object) -> None:
    with HubStandin(f"{tmp_path}/hub", commits_page_size=1) as hub:
        shas = make_repo(hub, commits=5)
        with pytest.raises(HubUnavailable) as caught:
            client(hub, max_pages=3).commits_since(REPO, "main", "0" * 40)
        assert str(caught.value) == "acme/tiny commits: more than 3 pages (hub.max_pages); stopped"
        assert len(hub.requests) == 3
        listing = client(hub, max_pages=5).commits_since(REPO, "main", "0" * 40)
        assert ([c.sha for c in listing.commits], listing.pages, listing.reached_since) == (shas, 5, False)


def test_a_next_page_link_back_to_a_page_already_read_ends_paging(hub_standin: HubStandin) -> None:
    make_repo(hub_standin)
    url = f"{hub_standin.url}/api/models/acme/tiny/commits/main?p=1"
    hub_standin.faults.add("/commits/", body=json.dumps([_commit("a" * 40)]).encode(),
                           headers={"Link": f'<{url}>; rel="next"'}, times=None)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin).commits_since(REPO, "main", "b" * 40)
    assert str(caught.value) == (
        "acme/tiny commits: the next-page link returns to a page already read (a cycle); stopped after 2 pages"
    )
    assert len(hub_standin.requests) == 2


@pytest.mark.parametrize(
    "entry",
    [{"id": "a" * 40 + "\n"}, {"id": "a" * 40, "date": "not a date"}, {"id": "a" * 40, "date": 12},
     {"id": "a" * 40, "date": "9999-12-31T23:59:59-01:00"}, ["a" * 40], "a" * 40],
)
def test_malformed_commit_entries_are_hub_unavailable(hub_standin: HubStandin, entry: object) -> None:
    make_repo(hub_standin)
    hub_standin.faults.add("/commits/", body=json.dumps([entry]).encode())
    with pytest.raises(HubUnavailable, match="acme/tiny commits: malformed entry"):
        client(hub_standin).commits_since(REPO, "main", None, limit=5)


def test_huggingface_hub_offline_mode_is_hub_unavailable(hub_standin: HubStandin, monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubUnavailable) as caught:
        client(hub_standin).head(REPO)
    assert str(caught.value) == f"cannot reach {hub_standin.url}: offline mode is enabled (HF_HUB_OFFLINE)"
    assert hub_standin.requests == []


def test_reading_an_endless_answer_holds_memory_near_the_cap(hub_standin: HubStandin) -> None:
    import tracemalloc

    make_repo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=b"[" + b"0," * 32768, endless=True)
    cap = 8 * 1024 * 1024
    hub = client(hub_standin, max_api_bytes=cap)
    tracemalloc.start()
    try:
        with pytest.raises(HubUnavailable, match="answer over the 8,388,608-byte cap"):
            hub.repo_info(REPO)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * cap
