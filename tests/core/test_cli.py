"""The `tracker` command line, end to end against the stand-in."""

from __future__ import annotations

import json
import re

import pytest

from tests.core.conftest import config_json

REPO = "acme/tiny-model"


def test_watch_add_list_remove(cli, tmp_path):
    (tmp_path / "repos.txt").write_text("# my models\nacme/a\n\nacme/b  # the big one\n")
    result = cli("watch", "add", "acme/c", "--from", str(tmp_path / "repos.txt"), "--every", "15m", "--no-check")
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "watching acme/c (main, every 15m)", "watching acme/a (main, every 15m)", "watching acme/b (main, every 15m)"
    ]
    listed = json.loads(cli("watch", "list", "--json").output)
    assert [(r["repo"], r["every"], r["every_seconds"], r["state"], r["last_seen_sha"]) for r in listed] == [
        ("acme/a", "15m", 900.0, "active", None), ("acme/b", "15m", 900.0, "active", None),
        ("acme/c", "15m", 900.0, "active", None),
    ]
    assert cli("watch", "remove", "acme/b").output == "removed acme/b\n"
    result = cli("watch", "remove", "acme/b")
    assert (result.exit_code, result.output) == (1, "error: not watched: acme/b\n")
    assert [r["repo"] for r in json.loads(cli("watch", "list", "--json").output)] == ["acme/a", "acme/c"]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("gpt2", "error: invalid repo id 'gpt2': expected exactly one '/' as in 'owner/name'"),
        ("a/b/c", "error: invalid repo id 'a/b/c': expected exactly one '/' as in 'owner/name'"),
        ("acme/-bad", "error: invalid repo id 'acme/-bad': each part must be 1-96 letters, digits, '-', '_' or "
                      "'.', not start or end with '-' or '.', and not contain '--' or '..'"),
        ("acme/a..b", "error: invalid repo id 'acme/a..b': each part must be 1-96 letters, digits, '-', '_' or "
                      "'.', not start or end with '-' or '.', and not contain '--' or '..'"),
    ],
)
def test_invalid_repo_ids_are_refused_and_nothing_is_added(cli, bad, message):
    result = cli("watch", "add", "acme/fine", bad)
    assert result.exit_code == 2
    assert result.output.splitlines() == [message, "nothing added: fix the ids above and run again"]
    assert json.loads(cli("watch", "list", "--json").output) == []


def test_bad_duration_is_a_usage_error(cli):
    result = cli("watch", "add", "acme/a", "--every", "soon")
    assert result.exit_code == 2
    assert "invalid duration 'soon': use e.g. 90s, 15m, 1h30m, 2d" in result.output


def test_poll_revisions_and_diff(cli, hub_standin):
    hub_standin.create_repo(REPO)
    first = hub_standin.commit(REPO, {"config.json": config_json()}, message="initial")
    assert cli("watch", "add", REPO).exit_code == 0
    assert cli("poll").output == f"{REPO}: baseline, 1 new revision(s), 1 analysed\n"
    second = hub_standin.commit(REPO, {"config.json": config_json(max_position_embeddings=1024),
                                       "generation_config.json": b'{"eos_token_id": 2}'}, message="longer context")
    assert cli("poll", REPO).output == f"{REPO}: new, 1 new revision(s), 1 analysed\n"

    revisions = json.loads(cli("revisions", REPO, "--json").output)
    assert [(r["sha"], r["title"], r["baseline"], r["parent"]) for r in revisions] == [
        (first, "initial", True, None), (second, "longer context", False, first)]
    assert revisions[1]["files"] == {"added": ["generation_config.json"], "removed": [], "changed": ["config.json"]}
    text = cli("revisions", REPO).output
    assert f"{second[:12]}" in text and "longer context" in text

    result = json.loads(cli("diff", REPO, first[:10], second, "--json").output)
    assert (result["from"], result["to"]) == (first, second)
    assert [c["path"] for c in result["files"]["changed"]] == ["config.json"]
    assert result["texts"]["config.json"]["deepdiff"]["values_changed"] == {
        "root['max_position_embeddings']": {"new_value": 1024, "old_value": 512}}
    # A revision not read yet is fetched from the Hub (here by branch name).
    third = hub_standin.commit(REPO, {"config.json": config_json(max_position_embeddings=2048)})
    result = json.loads(cli("diff", REPO, second, "main", "--json").output)
    assert result["to"] == third
    assert [c["path"] for c in result["files"]["changed"]] == ["config.json"]


def test_reading_back_an_unwatched_repo_that_does_not_exist(cli):
    # An unwatched repo is listed from the Hub (tests/ops/test_status.py); one the Hub does not know is an error.
    result = cli("revisions", "acme/nope")
    assert (result.exit_code, result.output) == (
        1, "error: acme/nope is not watched, and not found on the Hub (check the id; private and gated repos need "
           "HF_TOKEN)\n")


def test_revisions_print_each_finding_once_with_its_code_and_one_kind_of_arrow(cli, hub_standin, monkeypatch):
    hub_standin.create_repo(REPO)
    first = hub_standin.commit(REPO, {"config.json": config_json(eos_token_id=2),
                                      "generation_config.json": b'{"eos_token_id": 2}'}, message="initial")
    second = hub_standin.commit(REPO, {"config.json": config_json(eos_token_id=250001, max_position_embeddings=8194),
                                       "generation_config.json": b'{"eos_token_id": 250001}'}, message="eos and context")
    assert cli("watch", "add", REPO).exit_code == 0
    assert cli("poll", REPO, "--backfill", "2").exit_code == 0
    expected = (
        f"2026-01-01 00:00  {first[:12]}  [info] initial\n"
        "    - [info] first tracked revision: 2 files, 271 bytes  (files.baseline)\n"
        "    - [info] licence: (none) (restricted)  (licence.detected)\n"
        f"2026-01-01 00:01  {second[:12]}  [high] eos and context\n"
        "    - [high] eos_token_id: 2 → 250001  (config.token_id_changed, generation.eos_token_id_changed)\n"
        "    - [high] parameters 22,713,216 → 25,663,104  (estimate.params_changed)\n"
        "    - [moderate] max_position_embeddings: 512 → 8194  (config.context_length_changed)\n"
        "    - [moderate] context 512 → 8194 (sized at 512 → 2048 tokens)  (estimate.context_changed)\n"
        "    - [moderate] serving on A100-40: batch 7361 → 1840 (-75%) (+7 more like it)  "
        "(estimate.serve_batch_changed)\n"
        "    - [info] changed config.json (252 bytes → 258 bytes) (+1 more like it)  (files.changed)\n")
    assert cli("revisions", REPO).output == expected
    monkeypatch.setenv("NO_COLOR", "1")  # the estimate says "->", the findings "→": one of them, never both
    assert cli("revisions", REPO).output == expected.replace("→", "->")


def test_past_six_findings_one_line_says_where_to_read_the_rest():
    from tracker.core.model import Finding, Severity
    from tracker.surfaces.cli.reading import finding_lines

    findings = [Finding(code=f"x.c{i}", category="config", severity=Severity.LOW,
                        summary=f"change number {i} of the config") for i in range(9)]
    assert finding_lines(findings, more="`tracker diff acme/x a b`") == [
        *(f"    - [low] change number {i} of the config  (x.c{i})" for i in range(6)),
        "    (+3 more: `tracker diff acme/x a b`)"]


def test_re_adding_a_watch_changes_only_what_is_given(cli, hub_standin):
    hub_standin.create_repo("acme/base")
    hub_standin.commit("acme/base", {"config.json": config_json()})
    hub_standin.create_repo("acme/ft")
    hub_standin.commit("acme/ft", {"README.md": "---\nbase_model: acme/base\n---\n# A fine-tune\n"})
    assert cli("watch", "add", "acme/ft", "--every", "2h", "--branch", "dev", "--no-check").output == (
        "watching acme/ft (dev, every 2h)\n")
    assert cli("watch", "add", "acme/ft", "--no-check").output == "already watching acme/ft (dev, every 2h)\n"
    assert cli("watch", "add", "acme/ft", "--branch", "main").output == "updated acme/ft (main, every 2h)\n"
    assert cli("watch", "add", "acme/ft", "--with-base").output == (
        "already watching acme/ft (main, every 2h)\nwatching acme/base as the base of acme/ft\n")
    listed = {r["repo"]: (r["branch"], r["every"]) for r in json.loads(cli("watch", "list", "--json").output)}
    assert listed == {"acme/base": ("main", "2h"), "acme/ft": ("main", "2h")}


def test_watch_list_shows_minutes_and_its_json_the_rules(cli, hub_standin):
    hub_standin.create_repo(REPO)
    hub_standin.commit(REPO, {"config.json": config_json()})
    assert cli("watch", "add", "--rule", "author=acme").exit_code == 0
    assert cli("poll").exit_code == 0
    rows = cli("watch", "list").output.splitlines()
    assert re.fullmatch(rf"{REPO} +main +2h +active +[0-9a-f]{{12}} +\d{{4}}-\d\d-\d\d \d\d:\d\d  \(rule 1\)", rows[1])
    (entry,) = json.loads(cli("watch", "list", "--json").output)
    assert (entry["repo"], entry["rule"], entry["rule_terms"]) == (REPO, 1, "author=acme")


def test_removing_a_repo_the_config_lists_says_how_to_remove_it_for_good(cli, tmp_path):
    (tmp_path / "tracker.toml").write_text('[poll]\nevery = "2h"\n\n[[watch]]\nrepo = "acme/listed"\n')
    assert [r["repo"] for r in json.loads(cli("watch", "list", "--json").output)] == ["acme/listed"]
    result = cli("watch", "remove", "acme/listed")
    assert (result.exit_code, result.stdout, result.stderr) == (
        1, "", f"error: acme/listed is listed in {tmp_path / 'tracker.toml'} ([[watch]] repo = \"acme/listed\"), "
               "which every command watches again: delete that entry, then run `tracker watch remove acme/listed`\n")
    (tmp_path / "tracker.toml").write_text('[poll]\nevery = "2h"\n')
    assert cli("watch", "remove", "acme/listed").output == "removed acme/listed\n"
    assert json.loads(cli("watch", "list", "--json").output) == []


def test_backfill_on_a_repo_read_before_reads_older_revisions(cli, hub_standin):
    hub_standin.create_repo(REPO)
    shas = [hub_standin.commit(REPO, {"config.json": config_json(max_position_embeddings=512 * (i + 1))},
                               message=f"step {i}") for i in range(4)]
    assert cli("watch", "add", REPO).exit_code == 0
    assert cli("poll").output == f"{REPO}: baseline, 1 new revision(s), 1 analysed\n"
    again = cli("poll", REPO, "--backfill", "2")
    assert (again.exit_code, again.output) == (0, f"{REPO}: new, 2 new revision(s), 3 analysed\n")
    revisions = json.loads(cli("revisions", REPO, "--json").output)
    assert [(r["sha"], r["baseline"], r["parent"]) for r in revisions] == [
        (shas[1], True, None), (shas[2], False, shas[1]), (shas[3], False, shas[2])]
    assert "config.context_length_changed" in {f["code"] for f in revisions[2]["top_findings"]}  # diffed now
    assert cli("poll", REPO, "--backfill", "5").output == f"{REPO}: new, 1 new revision(s), 2 analysed\n"
    assert cli("poll", REPO, "--backfill", "5").output == f"{REPO}: unchanged\n"  # nothing older left


def test_events_with_nothing_to_report_say_so(cli, hub_standin):
    assert cli("watch", "add", "acme/quiet", "--no-check").exit_code == 0
    assert cli("events", "acme/quiet").output == "no events for acme/quiet\n"
    assert cli("events").output == "no events: no upstream surprises in any watched repo\n"
