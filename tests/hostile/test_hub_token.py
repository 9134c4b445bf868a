"""The Hub token goes to the configured Hub origin only: never on a redirect, never on a next-page Link.

Each test points a hop at a second local server that records every header it receives.
"""

from __future__ import annotations

import json

import pytest
from hubstandin import HubStandin

from tests.hostile.hub_support import TOKEN, Recorder, json_answer, make_repo
from tracker.adapters.hub import HubClient
from tracker.core.errors import HubUnavailable
from tracker.core.model import RepoId

REPO = RepoId("acme/tiny")


def client(hub: HubStandin, **options: object) -> HubClient:
    return HubClient(hub.url, token=TOKEN, sleep=lambda _s: None, **options)  # type: ignore[arg-type]


def hub_authorizations(hub: HubStandin) -> set[str]:
    """What reached the stand-in's API origin (127.0.0.1): proves the token was in use."""
    return {r.headers.get("authorization", "") for r in hub.requests if r.host.startswith("127.0.0.1")}


def test_head_redirect_to_another_origin_is_not_followed_the_api_answers(hub_standin: HubStandin) -> None:
    """The adapter used to follow this by hand, token included; now the head comes from the Hub's API."""
    (sha,) = make_repo(hub_standin)
    with Recorder(lambda method, path: (200, {"X-Repo-Commit": "f" * 40}, b"")) as other:
        hub_standin.faults.add("/resolve/", method="HEAD", status=302,
                               headers={"Location": f"{other.url}/acme/tiny/resolve/main/config.json"})
        head = client(hub_standin).head(REPO)
    assert head.sha == sha and head.renamed_to is None  # not the foreign server's claim
    assert other.seen == []
    assert [(r.method, r.path) for r in hub_standin.requests] == [
        ("HEAD", "/acme/tiny/resolve/main/config.json"), ("GET", "/api/models/acme/tiny/revision/main")
    ]
    assert hub_authorizations(hub_standin) == {f"Bearer {TOKEN}"}


def test_head_rename_redirect_on_the_hub_origin_keeps_the_token(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    hub_standin.rename("acme/tiny", "acme/renamed")
    head = client(hub_standin).head(REPO)
    assert (head.sha, head.renamed_to) == (sha, "acme/renamed")
    assert [r.status for r in hub_standin.requests] == [307, 200]
    assert hub_authorizations(hub_standin) == {f"Bearer {TOKEN}"}


def test_api_get_redirect_to_another_origin_goes_without_the_token(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    info = {"id": "acme/tiny", "_id": "x" * 24, "sha": sha, "private": False, "gated": False}
    with Recorder(lambda method, path: json_answer(info)) as other:
        hub_standin.faults.add("/api/models/acme/tiny", status=307, headers={"Location": f"{other.url}/elsewhere"})
        got = client(hub_standin).repo_info(REPO)
    assert (got.repo_id, got.sha) == ("acme/tiny", sha)
    assert [(s.method, s.path) for s in other.seen] == [("GET", "/elsewhere")]
    assert other.authorizations() == []
    assert hub_authorizations(hub_standin) == {f"Bearer {TOKEN}"}


def test_file_get_redirect_to_another_origin_goes_without_the_token(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    with Recorder(lambda method, path: (200, {}, b'{"n": 41}')) as other:
        hub_standin.faults.add("/resolve/", method="GET", status=302, headers={"Location": f"{other.url}/blob"})
        body = client(hub_standin).read_file(REPO, sha, "config.json", max_bytes=1000)
    assert body == b'{"n": 41}'
    assert [(s.method, s.path) for s in other.seen] == [("GET", "/blob")]
    assert other.authorizations() == []


def test_redirect_chain_keeps_the_token_off_every_foreign_hop(hub_standin: HubStandin) -> None:
    """Hub -> other -> other again -> back to the Hub: only the Hub's own hops carry the token."""
    (sha,) = make_repo(hub_standin)
    back = f"{hub_standin.url}/acme/tiny/resolve/{sha}/config.json"

    def answer(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        return (302, {"Location": "/second"}, b"") if path == "/first" else (302, {"Location": back}, b"")

    with Recorder(answer) as other:
        hub_standin.faults.add("/resolve/", method="GET", status=302, headers={"Location": f"{other.url}/first"})
        body = client(hub_standin).read_file(REPO, sha, "config.json", max_bytes=1000)
    assert json.loads(body) == {"n": 0}
    assert [s.path for s in other.seen] == ["/first", "/second"]
    assert other.authorizations() == []
    resolves = [r for r in hub_standin.requests if "/resolve/" in r.path]
    assert [r.headers.get("authorization") for r in resolves] == [f"Bearer {TOKEN}", f"Bearer {TOKEN}"]


def test_lfs_downloads_from_the_cdn_origin_never_carry_the_token(hub_standin: HubStandin) -> None:
    """The stand-in's LFS redirect goes to its 'CDN' under the other loopback name: another origin."""
    hub_standin.create_repo("acme/big")
    sha = hub_standin.commit("acme/big", {"weights.bin": b"\x00" * 20_000_000})  # over the LFS threshold
    data = client(hub_standin).read_range(RepoId("acme/big"), sha, "weights.bin", 0, 15)
    assert data == b"\x00" * 16
    cdn = [r for r in hub_standin.requests if r.path.startswith("/cdn-lfs/")]
    assert len(cdn) == 1 and cdn[0].host.startswith("localhost:")
    assert "authorization" not in cdn[0].headers
    assert hub_authorizations(hub_standin) == {f"Bearer {TOKEN}"}


def test_a_next_page_link_to_another_origin_is_refused(hub_standin: HubStandin) -> None:
    shas = make_repo(hub_standin, commits=2)
    page = json.dumps([{"id": shas[1], "title": "c1", "date": "2026-01-01T00:00:00.000Z", "authors": []}])
    with Recorder(lambda method, path: json_answer([])) as other:
        hub_standin.faults.add("/commits/", body=page.encode(),
                               headers={"Link": f'<{other.url}/api/models/acme/tiny/commits/main?p=1>; rel="next"'})
        port = other.url.rsplit(":", 1)[1]
        with pytest.raises(HubUnavailable) as caught:
            client(hub_standin).commits_since(REPO, "main", "0" * 40)
    assert str(caught.value) == (
        f"acme/tiny commits: refused a next-page Link to another origin (http://127.0.0.1:{port}); "
        "listings are read from the Hub's origin only"
    )
    assert other.seen == []


def test_a_tree_link_to_another_origin_is_refused(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    with Recorder(lambda method, path: json_answer([])) as other:
        hub_standin.faults.add("/tree/", body=b"[]", headers={"Link": f'<{other.url}/next>; rel="next"'})
        with pytest.raises(HubUnavailable, match="refused a next-page Link to another origin"):
            client(hub_standin).snapshot(REPO, sha)
    assert other.seen == []
