"""Polling against the Hub stand-in, through the real huggingface_hub plumbing."""

from __future__ import annotations

from tests.core.conftest import config_json
from tracker.core.model import RepoId

REPO = RepoId("acme/tiny-model")


def seed(hub) -> list[str]:
    hub.create_repo(REPO)
    shas = [hub.commit(REPO, {"config.json": config_json(), "README.md": "---\nlicense: apache-2.0\n---\n# tiny\n"},
                       message="initial")]
    shas.append(hub.commit(REPO, {"model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      "},
                           message="weights"))
    return shas


def test_first_poll_takes_the_head_as_baseline_and_later_commits_are_read_in_order(hub_standin, settings, make):
    base = seed(hub_standin)
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    (result,) = tracker.poll()
    assert (result.status, result.new_revisions, result.processed) == ("baseline", 1, 1)

    c1 = hub_standin.commit(REPO, {"config.json": config_json(max_position_embeddings=1024)}, message="longer")
    c2 = hub_standin.commit(REPO, {"generation_config.json": b'{"eos_token_id": 2}'}, message="gen")
    c3 = hub_standin.commit(REPO, {}, delete=["model.safetensors"], message="drop weights")
    (result,) = tracker.poll()
    assert (result.status, result.new_revisions, result.processed) == ("new", 3, 3)

    repo = tracker.store.repos.get(REPO)
    rows = tracker.store.revisions.of_repo(repo.pk)
    assert [(r.sha, r.parent_sha, r.title, r.status) for r in rows] == [
        (base[1], None, "weights", "done"),
        (c1, base[1], "longer", "done"),
        (c2, c1, "gen", "done"),
        (c3, c2, "drop weights", "done"),
    ]
    assert rows[0].baseline and rows[0].diff is None
    assert [f.path for f in rows[0].snapshot.files] == ["README.md", "config.json", "model.safetensors"]
    files = [r.diff.files for r in rows[1:]]
    assert [[c["path"] for c in f["changed"]] for f in files] == [["config.json"], [], []]
    assert [[a["path"] for a in f["added"]] for f in files] == [[], ["generation_config.json"], []]
    assert [[a["path"] for a in f["removed"]] for f in files] == [[], [], ["model.safetensors"]]
    assert rows[1].diff.texts["config.json"] == {
        "kind": "json",
        "deepdiff": {"values_changed": {"root['max_position_embeddings']": {"new_value": 1024, "old_value": 512}}},
    }
    assert rows[2].diff.texts["generation_config.json"]["kind"] == "json"
    removed = files[2]["removed"][0]
    assert removed["lfs_sha256"] is not None and removed["size"] == 16

    # A second poll adds nothing, and costs one request.
    hub_standin.clear_log()
    (result,) = tracker.poll()
    assert (result.status, result.new_revisions, result.processed) == ("unchanged", 0, 0)
    assert [(r.method, r.url_path) for r in hub_standin.requests] == [
        ("HEAD", f"/{REPO}/resolve/main/config.json")
    ]
    assert len(tracker.store.revisions.of_repo(repo.pk)) == 4


def test_backfill_reads_the_last_revisions_on_the_first_poll(hub_standin, settings, make):
    base = seed(hub_standin)
    more = [hub_standin.commit(REPO, {"config.json": config_json(num_hidden_layers=n)}) for n in (7, 8)]
    tracker = make(settings)
    tracker.store.repos.add(REPO, now=tracker.clock())
    (result,) = tracker.poll(backfill=2)
    assert (result.status, result.new_revisions, result.processed) == ("baseline", 3, 3)
    rows = tracker.store.revisions.of_repo(tracker.store.repos.get(REPO).pk)
    assert [r.sha for r in rows] == [base[1], *more]
    assert [r.baseline for r in rows] == [True, False, False]
    assert rows[2].diff.texts["config.json"]["deepdiff"]["values_changed"] == {
        "root['num_hidden_layers']": {"new_value": 8, "old_value": 7}
    }
