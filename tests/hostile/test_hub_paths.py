"""Tree paths are checked before any URL is built with them: ``../../etc/config.json`` is never requested."""

from __future__ import annotations

import json

import httpx2
import pytest
from hubstandin import HubStandin

from tests.hostile.hub_support import make_repo
from tracker.errors import UpstreamFileError
from tracker.hub import HubClient
from tracker.hub.client import RejectedPath
from tracker.hub.guards import unsafe_path_reason
from tracker.model import RepoId

REPO = RepoId("acme/tiny")
EVIL = ["../../etc/config.json", "/etc/config.json", "sub\\..\\..\\config.json", "a\nb.json", "a//b.json",
        "./config.json", "sub/", "x/\x7f.json"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../../etc/config.json", "'..' segment in path"),
        ("sub/../config.json", "'..' segment in path"),
        ("./config.json", "'.' segment in path"),
        ("/etc/config.json", "absolute path"),
        ("sub\\config.json", "backslash in path"),
        ("a\nb.json", "control character in path"),
        ("a\x00b.json", "control character in path"),
        ("x/\x7f.json", "control character in path"),
        ("a\u2028b", "control character in path"),
        ("a//b.json", "empty path segment"),
        ("sub/", "empty path segment"),
        ("", "empty path"),
        (None, "empty path"),
        ("x" * 5000, "path longer than 4096 characters"),
        ("config.json", None),
        ("sub/dir/naïve model.json", None),
        ("..hidden/a..b.json", None),
    ],
)
def test_unsafe_path_reasons(path: object, reason: str | None) -> None:
    assert unsafe_path_reason(path) == reason


def test_a_tree_listing_with_hostile_paths_never_leads_to_a_request_for_them(hub_standin: HubStandin) -> None:
    (sha,) = make_repo(hub_standin)
    real = httpx2.get(f"{hub_standin.url}/api/models/acme/tiny/tree/{sha}", params={"recursive": "true"}).json()
    fake = [{"type": "file", "oid": "1" * 40, "size": 10, "path": path} for path in EVIL]
    hub_standin.faults.add("/tree/", body=json.dumps(real + fake).encode(), times=None)
    hub_standin.clear_log()
    hub = HubClient(hub_standin.url, token=False)

    snapshot, rejected = hub.snapshot_checked(REPO, sha)
    assert [f.path for f in snapshot.files] == ["config.json"]
    assert rejected == (
        RejectedPath("../../etc/config.json", "'..' segment in path"),
        RejectedPath("/etc/config.json", "absolute path"),
        RejectedPath("sub\\..\\..\\config.json", "backslash in path"),
        RejectedPath("a\nb.json", "control character in path"),
        RejectedPath("a//b.json", "empty path segment"),
        RejectedPath("./config.json", "'.' segment in path"),
        RejectedPath("sub/", "empty path segment"),
        RejectedPath("x/\x7f.json", "control character in path"),
    )
    assert [f.path for f in hub.snapshot(REPO, sha).files] == ["config.json"]
    for entry in snapshot.files:  # what the tracker does next: read the listed files
        assert json.loads(hub.read_file(REPO, sha, entry.path, max_bytes=1000)) == {"n": 0}
    for path in EVIL:  # and a caller that asks anyway (a shard named in an index file) is refused
        with pytest.raises(UpstreamFileError, match=": not requested$"):
            hub.read_file(REPO, sha, path, max_bytes=1000)
        with pytest.raises(UpstreamFileError, match=": not requested$"):
            hub.safetensors_header(REPO, sha, path, max_bytes=1000)

    paths = [r.path for r in hub_standin.requests]
    assert paths == [f"/api/models/acme/tiny/tree/{sha}", f"/api/models/acme/tiny/tree/{sha}",
                     f"/acme/tiny/resolve/{sha}/config.json"]
    assert not any("/etc/" in r.path or ".." in r.path for r in hub_standin.requests)


def test_the_refusal_names_the_path_and_the_reason(hub_standin: HubStandin) -> None:
    with pytest.raises(UpstreamFileError) as caught:
        HubClient(hub_standin.url, token=False).read_file(REPO, "a" * 40, "../../etc/config.json", max_bytes=10)
    assert (caught.value.path, caught.value.reason) == ("../../etc/config.json", "'..' segment in path: not requested")
    assert hub_standin.requests == []
