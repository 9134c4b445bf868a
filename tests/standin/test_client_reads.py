"""The real huggingface_hub client reads the stand-in exactly as it reads the Hub.

Environment (telemetry/Xet off, private HF_HOME) is set by tests/conftest.py and the
stand-in pytest plugin before huggingface_hub is imported.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

from hubstandin import HubStandin
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.hf_api import RepoFile, RepoFolder

from .helpers import git_blob_sha1, make_demo, pointer


def test_model_info_main_revision_and_files_metadata(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    info = hf_api.model_info("acme/tiny")
    assert info.id == "acme/tiny"
    assert info.sha == demo.second
    assert info.last_modified == dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC)
    assert [s.rfilename for s in info.siblings] == ["config.json", "model.safetensors", "sub/extra.txt"]
    assert info.safetensors is not None and info.safetensors.total == 16

    old = hf_api.model_info("acme/tiny", revision=demo.first, files_metadata=True)
    assert old.sha == demo.first
    by_name = {s.rfilename: s for s in old.siblings}
    assert by_name["config.json"].blob_id == git_blob_sha1(demo.config1)
    assert by_name["config.json"].size == len(demo.config1)
    weights = by_name["model.safetensors"]
    assert weights.blob_id == git_blob_sha1(pointer(demo.weights))
    assert weights.lfs is not None
    assert weights.lfs.sha256 == hashlib.sha256(demo.weights).hexdigest()
    assert weights.lfs.size == len(demo.weights) == weights.size
    assert weights.lfs.pointer_size == len(pointer(demo.weights))
    assert hub_standin.requests[-1].query == "blobs=true"


def test_model_info_expand_returns_only_requested_keys(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    info = hf_api.model_info("acme/tiny", expand=["sha", "lastModified"])
    assert info.sha == demo.second
    assert info.siblings is None and info.private is None
    assert hub_standin.requests[-1].query == "expand=sha&expand=lastModified"


def test_pr_revision_is_routed_on_the_raw_path(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    pr = hub_standin.commit("acme/tiny", {"README.md": "# hi\n"}, branch="refs/pr/1", message="Add README")
    assert hf_api.model_info("acme/tiny", revision="refs/pr/1").sha == pr
    assert hub_standin.requests[-1].path == "/api/models/acme/tiny/revision/refs%2Fpr%2F1"
    refs = hf_api.list_repo_refs("acme/tiny", include_pull_requests=True)
    assert [(b.name, b.target_commit) for b in refs.branches] == [("main", demo.second)]
    assert [(p.ref, p.target_commit) for p in refs.pull_requests or []] == [("refs/pr/1", pr)]
    assert hf_api.list_repo_commits("acme/tiny", revision="refs/pr/1")[1].commit_id == demo.second


def test_refs_lists_tags(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    hub_standin.tag("acme/tiny", "v1", demo.first)
    refs = hf_api.list_repo_refs("acme/tiny")
    assert [(t.name, t.ref, t.target_commit) for t in refs.tags] == [("v1", "refs/tags/v1", demo.first)]
    assert refs.converts == [] and refs.pull_requests is None
    assert hf_api.model_info("acme/tiny", revision="v1").sha == demo.first
    assert hf_api.resolve_revision("acme/tiny", revision="v1").resolved == demo.first


def test_commits_newest_first_with_real_pagination(tmp_path: Path) -> None:
    with HubStandin(tmp_path / "hub", commits_page_size=2) as hub:
        hub.create_repo("acme/many")
        shas = [hub.commit("acme/many", {"n.txt": str(i)}, message=f"commit {i}") for i in range(5)]
        assert hub.commits("acme/many") == shas
        commits = HfApi(endpoint=hub.url).list_repo_commits("acme/many", formatted=True)
        assert [c.commit_id for c in commits] == shas[::-1]
        assert [c.title for c in commits] == [f"commit {i}" for i in range(4, -1, -1)]
        assert commits[0].formatted_title == "commit 4"
        dates = [c.created_at for c in commits]
        assert dates == sorted(dates, reverse=True) and len(set(dates)) == 5
        assert [r.url_path for r in hub.requests] == [
            "/api/models/acme/many/commits/main?expand%5B%5D=formatted",
            "/api/models/acme/many/commits/main?expand%5B%5D=formatted&p=1",
            "/api/models/acme/many/commits/main?expand%5B%5D=formatted&p=2",
        ]


def test_commit_body_and_author(hub_standin: HubStandin, hf_api: HfApi) -> None:
    make_demo(hub_standin)
    first = hf_api.list_repo_commits("acme/tiny")[-1]
    assert (first.title, first.message, first.authors) == ("Initial commit", "With a body.", ["standin"])


def test_tree_recursive_expand_and_subpath(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    flat = list(hf_api.list_repo_tree("acme/tiny", recursive=True))
    assert [(type(e).__name__, e.path) for e in flat] == [
        ("RepoFile", "config.json"),
        ("RepoFile", "model.safetensors"),
        ("RepoFolder", "sub"),
        ("RepoFile", "sub/extra.txt"),
    ]
    weights = flat[1]
    assert isinstance(weights, RepoFile) and weights.lfs is not None
    assert weights.lfs.sha256 == hashlib.sha256(demo.weights).hexdigest()
    assert weights.blob_id == git_blob_sha1(pointer(demo.weights))
    assert weights.size == len(demo.weights)
    top = list(hf_api.list_repo_tree("acme/tiny", revision=demo.first))
    assert [e.path for e in top] == ["config.json", "model.safetensors", "sub"]

    expanded = {e.path: e for e in hf_api.list_repo_tree("acme/tiny", recursive=True, expand=True)}
    assert expanded["config.json"].last_commit.oid == demo.second  # type: ignore[union-attr]
    assert expanded["model.safetensors"].last_commit.oid == demo.first  # type: ignore[union-attr]
    assert expanded["model.safetensors"].security.safe is True  # type: ignore[union-attr]
    sub = expanded["sub"]
    assert (
        isinstance(sub, RepoFolder)
        and sub.last_commit is not None
        and sub.last_commit.title == "Initial commit"
    )

    inside = list(hf_api.list_repo_tree("acme/tiny", path_in_repo="sub"))
    assert [(e.path, e.blob_id) for e in inside] == [("sub/extra.txt", git_blob_sha1(b"extra\n"))]  # type: ignore[union-attr]


def test_tree_cursor_pagination_uses_absolute_links(tmp_path: Path) -> None:
    with HubStandin(tmp_path / "hub", tree_page_size=3, tree_expand_page_size=2) as hub:
        hub.create_repo("acme/wide")
        files = {f"f{i:02d}.txt": str(i) for i in range(7)}
        hub.commit("acme/wide", files)
        api = HfApi(endpoint=hub.url)
        assert [e.path for e in api.list_repo_tree("acme/wide")] == sorted(files)
        assert len(hub.requests) == 3
        hub.clear_log()
        assert [e.path for e in api.list_repo_tree("acme/wide", expand=True)] == sorted(files)
        assert len(hub.requests) == 4


def test_paths_info_drops_missing_paths(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    infos = hf_api.get_paths_info("acme/tiny", ["config.json", "missing.txt", "sub"], revision=demo.first)
    assert [(type(i).__name__, i.path) for i in infos] == [("RepoFile", "config.json"), ("RepoFolder", "sub")]
    assert infos[0].blob_id == git_blob_sha1(demo.config1)  # type: ignore[union-attr]
    [expanded] = hf_api.get_paths_info("acme/tiny", "model.safetensors", expand=True)
    assert expanded.last_commit.oid == demo.first  # type: ignore[union-attr]


def test_download_by_sha_regular_and_lfs(hub_standin: HubStandin, tmp_path: Path) -> None:
    demo = make_demo(hub_standin)
    hub_standin.clear_log()
    config = hf_hub_download(
        "acme/tiny", "config.json", revision=demo.first, endpoint=hub_standin.url, cache_dir=tmp_path / "c"
    )
    assert Path(config).read_bytes() == demo.config1
    assert f"snapshots/{demo.first}/config.json" in config
    weights = hf_hub_download(
        "acme/tiny",
        "model.safetensors",
        revision=demo.first,
        endpoint=hub_standin.url,
        cache_dir=tmp_path / "c",
        token="secret",
    )
    assert Path(weights).read_bytes() == demo.weights
    head, cdn = hub_standin.requests[-2:]
    assert (head.method, head.status, head.host) == ("HEAD", 302, hub_standin.url.removeprefix("http://"))
    assert (cdn.method, cdn.status, cdn.host) == ("GET", 200, hub_standin.cdn_url.removeprefix("http://"))
    assert head.headers["authorization"] == "Bearer secret"
    assert "authorization" not in cdn.headers  # the client strips auth off the Hub origin
    assert cdn.bytes_out == len(demo.weights)


def test_file_exists_and_list_models(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    make_demo(hub_standin, "other/model")
    assert hf_api.file_exists("acme/tiny", "config.json")
    assert hf_api.file_exists("acme/tiny", "model.safetensors")
    assert not hf_api.file_exists("acme/tiny", "nope.json")
    assert not hf_api.file_exists("acme/nope", "config.json")
    assert not hf_api.file_exists("acme/tiny", "config.json", revision="no-such-branch")
    models = list(hf_api.list_models(author="acme", expand=["sha", "lastModified"]))
    assert [(m.id, m.sha) for m in models] == [("acme/tiny", demo.second)]
    assert [m.id for m in hf_api.list_models(search="model")] == ["other/model"]
    assert hf_api.revision_exists("acme/tiny", demo.first)


def test_super_squash_through_the_client(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    hf_api.super_squash_history("acme/tiny", commit_message="squashed")
    [only] = hf_api.list_repo_commits("acme/tiny")
    assert only.title == "squashed" and only.commit_id == hub_standin.head("acme/tiny") != demo.second
    assert hub_standin.tree("acme/tiny") == hub_standin.store.tree("acme/tiny", demo.second)


def test_a_growing_history_is_logged_incrementally_and_a_rewrite_in_full(tmp_path: Path) -> None:
    """The stand-in reads only a head's new commits when it descends from the last head logged; a
    branch moved back and grown elsewhere (a force push) is logged from scratch. Both equal git's log."""
    with HubStandin(tmp_path / "hub") as hub:
        hub.create_repo("acme/long")
        shas = [hub.commit("acme/long", {"n.txt": str(i)}, message=f"commit {i}") for i in range(3)]
        assert [c.id for c in hub.store.log("acme/long", "main")] == shas[::-1]
        shas += [hub.commit("acme/long", {"n.txt": str(i)}, message=f"commit {i}") for i in range(3, 6)]
        grown = hub.store.log("acme/long", "main")
        assert [c.id for c in grown] == shas[::-1]
        assert [c.title for c in grown] == [f"commit {i}" for i in range(5, -1, -1)]
        assert [c.parent for c in grown] == [*shas[::-1][1:], None]
        hub.branch("acme/long", "main", shas[1])  # force push: main back to commit 1, then elsewhere
        other = hub.commit("acme/long", {"n.txt": "other"}, message="elsewhere")
        assert [c.id for c in hub.store.log("acme/long", "main")] == [other, shas[1], shas[0]]
        assert [c.id for c in hub.store.log("acme/long", shas[5])] == shas[::-1]  # an old head, cached
