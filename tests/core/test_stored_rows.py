"""A revision's stored findings, diff and estimate are read once, in the store, into ``Finding``, ``RawDiff`` and
``StoredEstimate``; written back, each is the JSON it was read from, key for key and in the same order.

A history is polled from the stand-in once for the module: a baseline, a config change (the estimator reruns
and states what moved), a generation change (it does not rerun). Rows as older versions wrote them, without
keys added since, read the same way; a value that does not read is one line naming the revision.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from tests.core.conftest import config_json
from tracker.adapters.hub import HubClient
from tracker.adapters.settings import Settings
from tracker.adapters.store.tables import revisions
from tracker.app import make_tracker
from tracker.core.errors import StoreCorrupt
from tracker.core.model import Finding, RawDiff, StoredEstimate
from tracker.surfaces.cli import main

REPO = "acme/rows"
TOKENIZER = {"added_tokens": [{"id": 0, "content": "[PAD]", "special": True}], "model": {"type": "WordPiece"}}


def tracker_on(hub: Any, database: Path) -> Any:
    settings = Settings(database={"url": f"sqlite:///{database}"}, hub={"endpoint": hub.url, "timeout": 60.0})
    return make_tracker(settings, hub=HubClient(settings.hub.endpoint, timeout=60.0, sleep=lambda _s: None))


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """(the stand-in, the database file, the four shas oldest first) after polling each commit."""
    from hubstandin import HubStandin

    root = tmp_path_factory.mktemp("stored-rows")
    hub = HubStandin(root / "hub").start()
    with tracker_on(hub, root / "tracker.sqlite3") as tracker:
        hub.create_repo(REPO)
        shas = [hub.commit(REPO, {"config.json": config_json(), "tokenizer.json": json.dumps(TOKENIZER).encode(),
                                  "README.md": b"---\nlicense: mit\n---\n# rows\n"})]
        tracker.store.repos.add(REPO, now=tracker.clock())
        assert all(r.error is None for r in tracker.poll([REPO]))
        for files in ({"config.json": config_json(hidden_size=768, max_position_embeddings=1024)},
                      {"generation_config.json": b'{"eos_token_id": 2}'},
                      {"README.md": b"---\nlicense: apache-2.0\n---\n# rows\n"}):
            shas.append(hub.commit(REPO, files))
            assert all(r.error is None for r in tracker.poll([REPO]))
    try:
        yield hub, root / "tracker.sqlite3", shas
    finally:
        hub.stop(wait=False)


def copy_of(history, tmp_path: Path) -> Any:
    hub, database, _ = history
    shutil.copyfile(database, tmp_path / "tracker.sqlite3")
    return tracker_on(hub, tmp_path / "tracker.sqlite3")


def stored(tracker: Any) -> dict[str, Any]:
    """sha -> the row's JSON columns as the database holds them."""
    with tracker.store.db.read() as conn:
        return {r.sha: r for r in conn.execute(select(revisions.c.sha, revisions.c.findings, revisions.c.diff,
                                                      revisions.c.estimate))}


def dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)  # key order kept: what a JSON output would send


def test_each_stored_value_reads_into_its_core_type_and_writes_back_as_it_was(history, tmp_path):
    _, _, shas = history
    with copy_of(history, tmp_path) as tracker:
        raw = stored(tracker)
        rows = {r.sha: r for r in tracker.store.revisions.of_repo(tracker.store.repos.get(REPO).pk)}
    assert list(rows) == shas and all(r.status == "done" for r in rows.values())
    for sha, row in rows.items():
        assert row.findings is not None and all(isinstance(f, Finding) for f in row.findings)
        assert dumped([f.to_json() for f in row.findings]) == dumped(raw[sha].findings)
        assert (row.diff is None) == (raw[sha].diff is None) == (sha == shas[0])
        if row.diff is not None:
            assert isinstance(row.diff, RawDiff) and dumped(row.diff.to_json()) == dumped(raw[sha].diff)
        if row.estimate is not None:
            assert isinstance(row.estimate, StoredEstimate) and dumped(row.estimate.to_json()) == dumped(raw[sha].estimate)
    # the history holds what the round trip must carry: an estimate and what moved in it, findings with evidence
    baseline, longer, generation, readme = (rows[s] for s in shas)
    assert (baseline.estimate.params, baseline.estimate.delta) == (22_713_216, {})
    assert longer.estimate.params == 53_183_232 and longer.estimate.delta["params"] == {
        "before": 22_713_216, "after": 53_183_232}
    assert [c["card"] for c in longer.estimate.cards][:2] == ["T4", "L4"]
    assert generation.estimate is None and readme.estimate is None
    assert longer.diff.touched() == {"config.json"} and generation.diff.touched() == {"generation_config.json"}
    assert ("generation.eos_token_id_changed", "high") in [(f.code, f.severity.value) for f in generation.findings]
    assert [(f.code, f.before, f.after) for f in readme.findings if f.code == "licence.changed"] == [
        ("licence.changed", {"license": "mit"}, {"license": "apache-2.0"})]


def test_rows_written_before_newer_keys_read_as_they_are_and_show_the_same(history, tmp_path):
    """A finding without ``library``, an estimate without ``checkpoint_note``, ``components``, ``buffers``,
    ``implausible`` or ``delta``, a diff without ``texts``: as an older tracker stored them."""
    _, _, shas = history
    with copy_of(history, tmp_path) as tracker:
        before = CliRunner().invoke(main, ["revisions", REPO, "--json"], env=env_of(history, tmp_path))
        raw = stored(tracker)
        newer = ("checkpoint_note", "components", "buffers", "implausible", "delta")
        with tracker.store.db.transaction() as conn:
            for sha, r in raw.items():
                old_findings = [{k: v for k, v in f.items() if k != "library"} for f in r.findings]
                old_estimate = {k: v for k, v in r.estimate.items() if k not in newer} if r.estimate else None
                old_diff = {"files": r.diff["files"]} if r.diff else None
                conn.execute(update(revisions).where(revisions.c.sha == sha).values(
                    findings=old_findings, estimate=old_estimate, diff=old_diff))
        old = stored(tracker)
        rows = {r.sha: r for r in tracker.store.revisions.of_repo(tracker.store.repos.get(REPO).pk)}
        after = CliRunner().invoke(main, ["revisions", REPO, "--json"], env=env_of(history, tmp_path))
    assert before.exit_code == after.exit_code == 0 and after.output == before.output
    for sha, row in rows.items():
        assert [f.library for f in row.findings] == [None] * len(row.findings)
        assert [f.to_json() for f in row.findings] == [{**f, "library": None} for f in old[sha].findings]
        if old[sha].estimate is not None:
            assert dumped(row.estimate.to_json()) == dumped(old[sha].estimate)
            assert not set(newer) & set(row.estimate.to_json())
            assert row.estimate.delta is None and row.estimate.implausible is False
        if row.diff is not None:
            assert row.diff.texts == {} and row.diff.files == old[sha].diff["files"]
    assert rows[shas[1]].estimate.params == 53_183_232


def env_of(history, tmp_path: Path) -> dict[str, str]:
    hub, _, _ = history
    return {"HF_ENDPOINT": hub.url, "TRACKER_DATABASE_URL": f"sqlite:///{tmp_path}/tracker.sqlite3"}


@pytest.mark.parametrize(("column", "value", "reason"), [
    ("findings", [{"code": "config.changed", "category": "config", "severity": "urgent", "summary": "x"}],
     "'urgent' is not a valid Severity"),
    ("findings", [{"category": "config", "severity": "high", "summary": "x"}], "no 'code'"),
    ("findings", {"code": "config.changed"}, "a list was expected, not dict"),
    ("estimate", {"supported": True, "params": "many"}, "'params' is str, not what an estimate stores there"),
    ("estimate", {"supported": True, "cards": {"T4": 1}}, "'cards' is not a list of objects"),
    ("diff", {"files": {"added": [{"size": 3}]}, "texts": {}}, "an entry of files.added has no path"),
])
def test_a_stored_value_that_does_not_read_is_one_line_naming_the_revision(history, tmp_path, column, value, reason):
    _, _, shas = history
    with copy_of(history, tmp_path) as tracker:
        with tracker.store.db.transaction() as conn:
            conn.execute(update(revisions).where(revisions.c.sha == shas[1]).values({column: value}))
        with pytest.raises(StoreCorrupt) as caught:
            tracker.store.revisions.get(tracker.store.repos.get(REPO).pk, shas[1])
        assert str(caught.value) == (
            f"revision {shas[1]}: its stored {column} cannot be read ({reason}); the database was changed "
            "outside the tracker: restore it from a backup")
        result = CliRunner().invoke(main, ["revisions", REPO], env=env_of(history, tmp_path))
    assert (result.exit_code, result.output) == (1, f"error: {caught.value}\n")
