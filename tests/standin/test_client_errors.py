"""Every error the tracker must handle reaches the real client as the right exception type."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import pytest
from hubstandin import HubStandin
from huggingface_hub import HfApi, hf_hub_download
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from .helpers import make_demo


def test_not_found_family(hub_standin: HubStandin, hf_api: HfApi, tmp_path: Path) -> None:
    demo = make_demo(hub_standin)
    with pytest.raises(RepositoryNotFoundError) as repo_err:
        hf_api.model_info("acme/missing")
    assert type(repo_err.value) is RepositoryNotFoundError
    with pytest.raises(RevisionNotFoundError):
        hf_api.model_info("acme/tiny", revision="nope")
    with pytest.raises(RevisionNotFoundError):
        hf_api.list_repo_commits("acme/tiny", revision="0" * 40)
    with pytest.raises(RemoteEntryNotFoundError):
        hf_hub_download(
            "acme/tiny", "nope.json", revision=demo.first, endpoint=hub_standin.url, cache_dir=tmp_path
        )
    with pytest.raises(RemoteEntryNotFoundError):
        list(hf_api.list_repo_tree("acme/tiny", path_in_repo="nowhere"))
    miss = [r for r in hub_standin.requests if r.status == 404 and "/resolve/" in r.path]
    assert len(miss) == 1 and miss[0].method == "HEAD"


def test_entry_not_found_404_carries_x_repo_commit(hub_standin: HubStandin) -> None:
    demo = make_demo(hub_standin)
    r = httpx2.head(f"{hub_standin.url}/acme/tiny/resolve/main/nope.json")
    assert r.status_code == 404
    assert r.headers["x-error-code"] == "EntryNotFound"
    assert r.headers["x-repo-commit"] == demo.second
    r = httpx2.get(f"{hub_standin.url}/api/models/acme/missing")
    assert (r.status_code, r.headers["x-error-code"], r.json()) == (
        401,
        "RepoNotFound",
        {"error": "Repository not found"},
    )


def test_gated_repo(hub_standin: HubStandin, tmp_path: Path) -> None:
    make_demo(hub_standin)
    hub_standin.set_gated("acme/tiny", True)
    hub_standin.allow_token("acme/tiny", "hf_good")
    api = HfApi(endpoint=hub_standin.url)
    assert api.model_info("acme/tiny").gated == "auto"  # metadata stays public, as on the Hub
    with pytest.raises(GatedRepoError):
        hf_hub_download("acme/tiny", "config.json", endpoint=hub_standin.url, cache_dir=tmp_path / "a")
    with pytest.raises(GatedRepoError):
        hf_hub_download(
            "acme/tiny", "config.json", endpoint=hub_standin.url, cache_dir=tmp_path / "b", token="hf_bad"
        )
    with pytest.raises(GatedRepoError):
        api.file_exists("acme/tiny", "config.json")  # file_exists re-raises gating
    path = hf_hub_download(
        "acme/tiny", "config.json", endpoint=hub_standin.url, cache_dir=tmp_path / "c", token="hf_good"
    )
    assert json.loads(Path(path).read_text()) == {"hidden_size": 8}
    assert [r.status for r in hub_standin.requests if r.method == "HEAD"] == [401, 403, 401, 200]


def test_private_repo_hides_itself(hub_standin: HubStandin) -> None:
    make_demo(hub_standin)
    hub_standin.set_private("acme/tiny", True)
    hub_standin.allow_token("acme/tiny", "hf_owner")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub_standin.url).model_info("acme/tiny")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub_standin.url, token="hf_other").model_info("acme/tiny")
    assert [r.status for r in hub_standin.requests] == [401, 404]
    assert HfApi(endpoint=hub_standin.url, token="hf_owner").model_info("acme/tiny").private is True
    assert list(HfApi(endpoint=hub_standin.url).list_models(author="acme")) == []


def test_disabled_repo(hub_standin: HubStandin, hf_api: HfApi) -> None:
    make_demo(hub_standin)
    hub_standin.disable("acme/tiny")
    with pytest.raises(DisabledRepoError):
        hf_api.model_info("acme/tiny")


def test_429_and_500_raise_on_calls_without_retry(hub_standin: HubStandin, hf_api: HfApi) -> None:
    make_demo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", status=429, ratelimit=("api", 0, 30))
    with pytest.raises(HfHubHTTPError) as err:
        hf_api.model_info("acme/tiny")
    assert err.value.response.status_code == 429
    assert err.value.response.headers["ratelimit"] == '"api";r=0;t=30'
    assert err.value.response.headers["ratelimit-policy"] == '"fixed window";"api";q=500;w=300'
    hub_standin.faults.add("/api/models/acme/tiny", status=500)
    with pytest.raises(HfHubHTTPError) as err:
        hf_api.model_info("acme/tiny")
    assert err.value.response.status_code == 500
    assert hf_api.model_info("acme/tiny").id == "acme/tiny"  # faults fire `times` times, then vanish
    assert hub_standin.faults.pending() == []


def test_list_repo_commits_retries_429_honouring_retry_after(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    hub_standin.faults.add("/commits/", status=429, retry_after=0, method="GET")
    commits = hf_api.list_repo_commits("acme/tiny")
    assert [c.commit_id for c in commits] == [demo.second, demo.first]
    assert [r.status for r in hub_standin.requests] == [429, 200]


def test_slow_answer_hits_client_timeout(hub_standin: HubStandin, hf_api: HfApi) -> None:
    make_demo(hub_standin)
    hub_standin.faults.add(re.compile(r"^/api/models/acme/tiny$"), delay=5.0)
    with pytest.raises(httpx2.ReadTimeout):
        hf_api.model_info("acme/tiny", timeout=0.3)  # the answer would come after 5 s


def test_truncated_body_raises(hub_standin: HubStandin, hf_api: HfApi, tmp_path: Path) -> None:
    demo = make_demo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", truncate_after=20)
    with pytest.raises(httpx2.RemoteProtocolError):
        hf_api.model_info("acme/tiny")
    record = hub_standin.requests[-1]
    assert (record.status, record.bytes_out, record.fault) == (200, 20, True)
    # A CDN body cut short once: the client notices (Content-Length) and fetches again.
    hub_standin.faults.add("/cdn-lfs/", truncate_after=10)
    path = hf_hub_download(
        "acme/tiny", "model.safetensors", revision=demo.first, endpoint=hub_standin.url, cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == demo.weights
    cut, resumed = [r for r in hub_standin.requests if r.path.startswith("/cdn-lfs/")]
    assert (cut.status, cut.bytes_out, cut.fault, resumed.fault) == (200, 10, True, False)
    assert resumed.bytes_out == len(demo.weights) - (int(resumed.range[6:-1]) if resumed.range else 0)


def test_malformed_json(hub_standin: HubStandin, hf_api: HfApi) -> None:
    make_demo(hub_standin)
    hub_standin.faults.add("/api/models/acme/tiny", body=b"{not json")
    with pytest.raises(json.JSONDecodeError):
        hf_api.model_info("acme/tiny")


def test_rename_redirects_and_model_info_shows_new_id(
    hub_standin: HubStandin, hf_api: HfApi, tmp_path: Path
) -> None:
    demo = make_demo(hub_standin)
    hub_standin.rename("acme/tiny", "newco/tiny")
    assert hf_api.model_info("acme/tiny").id == "newco/tiny"
    first, second = hub_standin.requests
    assert (first.path, first.status, second.path, second.status) == (
        "/api/models/acme/tiny",
        307,
        "/api/models/newco/tiny",
        200,
    )
    r = httpx2.head(f"{hub_standin.url}/acme/tiny/resolve/main/config.json")
    assert (r.status_code, r.headers["location"]) == (307, "/newco/tiny/resolve/main/config.json")
    path = hf_hub_download(
        "acme/tiny", "config.json", revision=demo.second, endpoint=hub_standin.url, cache_dir=tmp_path
    )
    assert Path(path).read_bytes() == demo.config2
    assert [c.commit_id for c in hf_api.list_repo_commits("acme/tiny")] == [demo.second, demo.first]


def test_squash_makes_old_sha_unknown(hub_standin: HubStandin, hf_api: HfApi) -> None:
    demo = make_demo(hub_standin)
    new = hub_standin.squash("acme/tiny", message="Squash")
    assert hub_standin.commits("acme/tiny") == [new]
    assert hf_api.model_info("acme/tiny").sha == new
    with pytest.raises(RevisionNotFoundError):
        hf_api.model_info("acme/tiny", revision=demo.first)
    # A tag still reaching an old commit keeps it resolvable, as on the Hub.
    hub_standin.tag("acme/tiny", "keep", demo.second)
    assert hf_api.model_info("acme/tiny", revision=demo.second).sha == demo.second


def test_delete_and_recreate_gives_a_new_repo(hub_standin: HubStandin, hf_api: HfApi) -> None:
    make_demo(hub_standin)
    before = httpx2.get(f"{hub_standin.url}/api/models/acme/tiny").json()["_id"]
    hub_standin.delete_repo("acme/tiny")
    with pytest.raises(RepositoryNotFoundError):
        hf_api.model_info("acme/tiny")
    hub_standin.create_repo("acme/tiny")
    after = httpx2.get(f"{hub_standin.url}/api/models/acme/tiny").json()
    assert after["_id"] != before and "sha" not in after and after["siblings"] == []
