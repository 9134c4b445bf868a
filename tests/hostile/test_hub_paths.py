"""Tree paths are checked before any URL is built with them: ``../../etc/config.json`` is never requested."""

from __future__ import annotations

import json

import httpx2
import pytest
from hubstandin import HubStandin

from tests.hostile.hub_support import make_repo
from tracker.adapters.hub import HubClient
from tracker.adapters.hub.guards import unsafe_path_reason
from tracker.core.errors import UpstreamFileError
from tracker.core.hub_types import RejectedPath
from tracker.core.model import RepoId

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


def test_a_poll_of_a_repo_listing_hostile_paths_never_requests_them(hub_standin: HubStandin, tmp_path: object) -> None:
    """Through the whole tracker: the tree lists ``../../etc/config.json`` and an index names a shard outside."""
    from tracker.adapters.settings import Settings
    from tracker.app import make_tracker

    hub_standin.create_repo("acme/tiny")
    hub_standin.commit("acme/tiny", {"config.json": b'{"model_type": "bert"}'}, message="first")
    index = {"metadata": {}, "weight_map": {"w": "../../etc/evil.safetensors", "v": "/etc/abs.safetensors"}}
    sha = hub_standin.commit("acme/tiny", {"config.json": b'{"model_type": "bert", "hidden_size": 8}',
                                           "model.safetensors.index.json": json.dumps(index).encode()},
                             message="second")
    real = httpx2.get(f"{hub_standin.url}/api/models/acme/tiny/tree/{sha}", params={"recursive": "true"}).json()
    fake = [{"type": "file", "oid": "1" * 40, "size": 10, "path": path} for path in EVIL]
    hub_standin.faults.add(f"/tree/{sha}", body=json.dumps(real + fake).encode(), times=None)
    hub_standin.clear_log()
    settings = Settings(database={"url": f"sqlite:///{tmp_path}/t.sqlite3"},
                        hub={"endpoint": hub_standin.url, "timeout": 60.0})
    tracker = make_tracker(settings, hub=HubClient.from_settings(settings, token=False, sleep=lambda _s: None))
    tracker.store.repos.add(REPO, now=tracker.clock())
    tracker.poll(backfill=2)
    tree_reads = [r for r in hub_standin.requests if f"/tree/{sha}" in r.path]
    assert tree_reads and all(r.fault for r in tree_reads)  # the hostile listing was served
    assert not any("/etc/" in r.path or ".." in r.path or "%2e" in r.path.lower() for r in hub_standin.requests)
    # ...and the revision says so: one finding per path left out, never a silent drop.
    row = tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, sha)
    unsafe = sorted((f.path, f.evidence["reason"]) for f in row.findings if f.code == "upstream.unsafe_path")
    assert [path for path, _ in unsafe] == sorted(EVIL)
    assert ("../../etc/config.json", "'..' segment in path") in unsafe
    assert all(f.severity.value == "high" for f in row.findings if f.code == "upstream.unsafe_path")
