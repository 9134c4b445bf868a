"""Wire-level contract of the stand-in (hub-protocol.md sections 4, 7, 12), storage and test hooks."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import subprocess
from pathlib import Path

import httpx2
import pytest
from hubstandin import HubStandin
from hubstandin.__main__ import seed_demo
from huggingface_hub import HfApi, hf_hub_download

from .helpers import git_blob_sha1, make_demo, pointer


def test_resolve_head_regular_file(hub_standin: HubStandin) -> None:
    demo = make_demo(hub_standin)
    r = httpx2.head(
        f"{hub_standin.url}/acme/tiny/resolve/{demo.first}/config.json",
        headers={"Accept-Encoding": "identity"},
    )
    assert r.status_code == 200
    assert r.headers["content-length"] == str(len(demo.config1))
    assert r.headers["etag"] == f'"{git_blob_sha1(demo.config1)}"'
    assert r.headers["x-repo-commit"] == demo.first
    assert not [h for h in r.headers if h.startswith("x-xet")]
    assert hub_standin.requests[-1].bytes_out == 0


def test_resolve_lfs_redirects_to_another_origin(hub_standin: HubStandin) -> None:
    demo = make_demo(hub_standin)
    r = httpx2.head(f"{hub_standin.url}/acme/tiny/resolve/main/model.safetensors")
    sha256 = hashlib.sha256(demo.weights).hexdigest()
    assert r.status_code == 302
    assert r.headers["location"].startswith(f"{hub_standin.cdn_url}/cdn-lfs/{sha256}?")
    assert hub_standin.cdn_url != hub_standin.url
    assert r.headers["x-linked-etag"] == f'"{sha256}"'
    assert r.headers["x-linked-size"] == str(len(demo.weights))
    assert r.headers["etag"] == f'"{git_blob_sha1(pointer(demo.weights))}"'
    assert r.headers["x-repo-commit"] == demo.second
    assert not [h for h in r.headers if h.startswith("x-xet") or h == "link"]


@pytest.mark.parametrize(
    ("range_header", "status", "content_range", "body_slice"),
    [
        ("bytes=0-9", 206, "bytes 0-9/{n}", slice(0, 10)),
        ("bytes=5-", 206, "bytes 5-{last}/{n}", slice(5, None)),
        ("bytes=-4", 206, "bytes {tail}-{last}/{n}", slice(-4, None)),
        ("bytes=0-100000", 206, "bytes 0-{last}/{n}", slice(None)),
        ("bytes=99999-", 416, "bytes */{n}", slice(0, 0)),
    ],
)
def test_range_on_both_origins(
    hub_standin: HubStandin, range_header: str, status: int, content_range: str, body_slice: slice
) -> None:
    demo = make_demo(hub_standin)
    n = len(demo.weights)
    expected_range = content_range.format(n=n, last=n - 1, tail=n - 4)
    with httpx2.Client(follow_redirects=True) as client:
        lfs = client.get(
            f"{hub_standin.url}/acme/tiny/resolve/main/model.safetensors", headers={"Range": range_header}
        )
        regular = client.get(
            f"{hub_standin.url}/acme/tiny/resolve/main/config.json", headers={"Range": "bytes=2-4"}
        )
    assert (lfs.status_code, lfs.headers["content-range"], lfs.content) == (
        status,
        expected_range,
        demo.weights[body_slice],
    )
    assert str(lfs.url).startswith(hub_standin.cdn_url)
    assert (regular.status_code, regular.headers["content-range"], regular.content) == (
        206,
        f"bytes 2-4/{len(demo.config2)}",
        demo.config2[2:5],
    )


def test_agent_harnesses_and_unknown_pages(hub_standin: HubStandin) -> None:
    assert httpx2.get(f"{hub_standin.url}/api/agent-harnesses").json() == {
        "standardEnvVars": [],
        "harnesses": {},
    }
    assert httpx2.get(f"{hub_standin.url}/nothing/here").status_code == 404


def test_legacy_single_segment_repo_id(hub_standin: HubStandin, hf_api: HfApi, tmp_path: Path) -> None:
    hub_standin.create_repo("gpt2")
    sha = hub_standin.commit("gpt2", {"config.json": b"{}"})
    assert hf_api.model_info("gpt2").sha == sha
    assert (
        Path(
            hf_hub_download("gpt2", "config.json", endpoint=hub_standin.url, cache_dir=tmp_path)
        ).read_bytes()
        == b"{}"
    )
    assert [c.commit_id for c in hf_api.list_repo_commits("gpt2")] == [sha]


def test_request_log_records_what_was_sent(hub_standin: HubStandin) -> None:
    demo = make_demo(hub_standin)
    with httpx2.Client(follow_redirects=True, headers={"Authorization": "Bearer t0k"}) as client:
        client.get(
            f"{hub_standin.url}/acme/tiny/resolve/main/model.safetensors", headers={"Range": "bytes=0-7"}
        )
    redirect, cdn = hub_standin.requests
    assert (redirect.method, redirect.path, redirect.status, redirect.range) == (
        "GET",
        "/acme/tiny/resolve/main/model.safetensors",
        302,
        "bytes=0-7",
    )
    assert redirect.headers["authorization"] == "Bearer t0k"
    assert (cdn.status, cdn.bytes_out, cdn.query.startswith("response-content-disposition=")) == (
        206,
        8,
        True,
    )
    assert hub_standin.bytes_served() == redirect.bytes_out + 8
    hub_standin.clear_log()
    assert hub_standin.requests == [] and hub_standin.bytes_served() == 0
    _ = demo


def test_fault_matching_method_times_and_regex(hub_standin: HubStandin) -> None:
    make_demo(hub_standin)
    url = f"{hub_standin.url}/api/models/acme/tiny"
    hub_standin.faults.add(re.compile(r"/api/models/acme/tiny$"), status=503, times=2, method="GET")
    hub_standin.faults.add("/refs", status=429, ratelimit=("api", 0, 7, 1000), times=None)
    assert httpx2.head(url).status_code == 200  # method filter
    assert [httpx2.get(url).status_code for _ in range(3)] == [503, 503, 200]
    for _ in range(3):
        r = httpx2.get(f"{url}/refs")
        assert (r.status_code, r.headers["ratelimit"], r.headers["ratelimit-policy"]) == (
            429,
            '"api";r=0;t=7',
            '"fixed window";"api";q=1000;w=300',
        )
    hub_standin.faults.clear()
    assert httpx2.get(f"{url}/refs").status_code == 200
    assert [r.fault for r in hub_standin.requests] == [False, True, True, False, True, True, True, False]


def test_storage_is_real_git_with_lfs_pointers(hub_standin: HubStandin) -> None:
    demo = make_demo(hub_standin)
    git_dir = hub_standin.store.git_dir("acme/tiny")
    fsck = subprocess.run(
        ["git", "--git-dir", str(git_dir), "fsck", "--strict"], capture_output=True, text=True, check=False
    )
    assert fsck.returncode == 0, fsck.stderr
    shown = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{demo.first}:model.safetensors"],
        capture_output=True,
        check=True,
    ).stdout
    assert shown == pointer(demo.weights)
    tree = hub_standin.tree("acme/tiny", demo.first)
    sub = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", f"{demo.first}:sub"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert tree["sub"].oid == sub
    assert hub_standin.store.lfs_path(hashlib.sha256(demo.weights).hexdigest()).read_bytes() == demo.weights


def test_builder_dates_lfs_override_and_deletes(hub_standin: HubStandin, hf_api: HfApi) -> None:
    hub_standin.create_repo("acme/b")
    when = dt.datetime(2027, 5, 1, 12, 0, tzinfo=dt.UTC)
    a = hub_standin.commit(
        "acme/b",
        {"big.bin": b"x" * 10, "notes.txt": b"lfs please", "d/x": b"1", "d/y": b"2"},
        lfs={"notes.txt"},
        date=when,
    )
    b = hub_standin.commit("acme/b", {}, delete=["d"])
    c = hub_standin.commit("acme/b", {"e.txt": b""})
    commits = hf_api.list_repo_commits("acme/b")
    assert [x.commit_id for x in commits] == [c, b, a]
    assert [x.created_at for x in commits] == [
        when + dt.timedelta(minutes=2),
        when + dt.timedelta(minutes=1),
        when,
    ]
    tree = hub_standin.tree("acme/b", a)
    assert tree["big.bin"].lfs is None and tree["notes.txt"].lfs is not None
    assert sorted(hub_standin.tree("acme/b")) == ["big.bin", "e.txt", "notes.txt"]
    with pytest.raises(FileNotFoundError):
        hub_standin.commit("acme/b", {}, delete=["missing"])


def test_restart_over_the_same_root_serves_the_same_repos(tmp_path: Path) -> None:
    with HubStandin(tmp_path / "hub") as hub:
        seed_demo(hub)
        info = httpx2.get(f"{hub.url}/api/models/acme/tiny-model").json()
        hub.rename("acme/sharded-model", "acme/sharded")
    with HubStandin(tmp_path / "hub") as again:
        api = HfApi(endpoint=again.url)
        assert httpx2.get(f"{again.url}/api/models/acme/tiny-model").json() == info
        assert api.model_info("acme/sharded-model").id == "acme/sharded"
        assert api.get_safetensors_metadata("acme/sharded").parameter_count == {"F16": 16, "F32": 2}
        refs = api.list_repo_refs("acme/tiny-model", include_pull_requests=True)
        assert [t.name for t in refs.tags] == ["v1"] and [p.ref for p in refs.pull_requests or []] == [
            "refs/pr/1"
        ]
        later = again.commit("acme/tiny-model", {"x.txt": "x"})
        assert (
            api.list_repo_commits("acme/tiny-model")[0].created_at
            > api.list_repo_commits("acme/tiny-model", revision=later)[1].created_at
        )
