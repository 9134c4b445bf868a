"""Revision and repo-event advisories: content, ids, modified stability, fixes, withdrawal.

Every record produced here goes through ``checked`` (schema + strict keys).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from tests.advisory.support import ENDPOINT, T0, T1, T2, checked, sha
from tracker.core.advisory.affected import affected_commits
from tracker.core.advisory.build import (
    advisory_events,
    build_revision_advisories,
    build_revision_advisory,
    classify,
    format_timestamp,
    mark_fixed,
    repo_event_advisory,
    withdraw,
)
from tracker.core.advisory.ids import advisory_id, is_advisory_id, repo_event_id
from tracker.core.model import Finding, Severity

REPO = "example-org/tiny-chat-model"
URL = f"{ENDPOINT}/{REPO}"

PICKLE = Finding("weights.pickle_added", "weights", Severity.CRITICAL, "pickle file added: pytorch_model.bin",
                 path="pytorch_model.bin", after={"globals": [["torch._utils", "_rebuild_tensor_v2"]]})
EOS = Finding("generation.eos_token_id_changed", "generation", Severity.HIGH, "eos_token_id: 128001 → [128001, 128009]",
              path="generation_config.json", before=128001, after=[128001, 128009])
TEMPLATE = Finding("chat_template.rendered_prompt_changed", "chat_template", Severity.HIGH,
                   "rendered prompt now ends with <|eot_id|>", path="tokenizer_config.json",
                   evidence={"rendered_prompt_diff": "--- old\n+++ new\n-Hello\n+Hello<|eot_id|>"})
COSMETIC = Finding("files.readme_changed", "files", Severity.INFO, "README.md edited", path="README.md")
FAILED = Finding("analysis.failed", "analysis", Severity.MODERATE, "tokenizer analysis failed: boom")


def build(kind, findings, *, c, parents, now=T1, previous=None, **kw):
    revision = kw.pop("revision", c[3])
    args = dict(
        kind=kind, repo_id=REPO, revision=revision, parent=kw.pop("parent", c[2]), revision_date=T0,
        findings=findings, endpoint=ENDPOINT, tracker_url=kw.pop("tracker_url", "https://tracker.example"),
        estimate_delta=kw.pop("estimate_delta", None), related=kw.pop("related", []),
        affected_commits=affected_commits(parents, advisory_events(kind, revision)), now=now, previous=previous,
    )
    args.update(kw)
    return checked(build_revision_advisory(**args))


def test_classification_table():
    assert classify("weights.pickle_added") == "risk"
    assert classify("weights.pickle_removed") == "update"
    assert classify("weights.pickle_dangerous_import") == "risk"
    assert classify("weights.pickle_unscanned") == "risk"
    assert classify("weights.values_changed") == "update"
    assert classify("config.repaired") == "update"
    assert classify("config.malformed") == "risk"
    assert classify("chat_template.render_recovered") == "update"
    assert classify("upstream.file_unreadable") == "risk"
    assert classify("code.remote_code_changed") == "risk"
    assert classify("code.remote_code_removed") == "update"
    assert classify("config.auto_map_changed") == "risk"
    assert classify("chat_template.compile_failed") == "risk"
    assert classify("chat_template.render_failed") == "risk"
    assert classify("licence.more_restrictive") == "risk"
    assert classify("dependencies.known_vulnerability") == "risk"
    assert classify("generation.eos_token_id_changed") == "update"
    assert classify("chat_template.rendered_prompt_changed") == "update"
    assert classify("analysis.failed") == "ignore"
    assert classify("something.new_nobody_classified") == "update"


def test_risk_record(linear5):
    c, parents = linear5
    r = build("risk", [PICKLE, EOS], c=c, parents=parents)
    assert r["id"] == advisory_id(REPO, c[3], "risk")
    assert r["schema_version"] == "1.7.5"
    assert r["modified"] == r["published"] == "2026-08-21T10:15:00Z"
    assert r["summary"] == "Risk introduced in example-org/tiny-chat-model@c30000000000: pickle file added: pytorch_model.bin"
    assert r["affected"] == [{
        "package": {"ecosystem": "GIT", "name": URL, "purl": f"pkg:huggingface/{REPO}"},
        "ranges": [{"type": "GIT", "repo": URL, "events": [{"introduced": c[3]}]}],
        "versions": [c[3], c[4], c[5]],
    }]
    assert r["references"] == [
        {"type": "PACKAGE", "url": URL},
        {"type": "INTRODUCED", "url": f"{URL}/commit/{c[3]}"},
        {"type": "ADVISORY", "url": f"https://tracker.example/advisories/{r['id']}"},
    ]
    ds = r["database_specific"]
    assert ds["kind"] == "risk" and ds["severity"] == "CRITICAL" and ds["categories"] == ["weights"]
    assert ds["revision"] == c[3] and ds["parent"] == c[2] and ds["revision_date"] == "2026-08-20T09:00:00Z"
    assert ds["findings"] == [PICKLE.to_json() | {"after": {"globals": [["torch._utils", "_rebuild_tensor_v2"]]}}]
    assert "related" not in r and "withdrawn" not in r


def test_update_record_with_diff_estimate_and_related(linear5):
    c, parents = linear5
    delta = {"params": {"before": 559890432, "after": 560000000}, "fits": {"T4 full": "7 -> 0"}}
    r = build("update", [COSMETIC, TEMPLATE, EOS, PICKLE], c=c, parents=parents, estimate_delta=delta,
              related=["PYSEC-2024-227", "GHSA-282v-666c-3fvg", "PYSEC-2024-227"], tracker_url=None)
    assert r["id"] == advisory_id(REPO, c[3], "update") != advisory_id(REPO, c[3], "risk")
    assert r["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": c[3]}]
    assert r["affected"][0]["versions"] == [c[1], c[2]]
    assert r["references"] == [{"type": "PACKAGE", "url": URL}, {"type": "FIX", "url": f"{URL}/commit/{c[3]}"}]
    assert r["related"] == ["GHSA-282v-666c-3fvg", "PYSEC-2024-227"]
    ds = r["database_specific"]
    # The INFO finding is below the default threshold, the pickle belongs to the risk advisory.
    assert [f["code"] for f in ds["findings"]] == ["chat_template.rendered_prompt_changed",
                                                   "generation.eos_token_id_changed"]
    assert ds["estimate_delta"] == delta and ds["severity"] == "HIGH"
    assert r["summary"] == ("Upstream change in example-org/tiny-chat-model@c30000000000: "
                            "rendered prompt now ends with <|eot_id|> (+1 more)")
    d = r["details"]
    assert "### High\n- rendered prompt now ends with <|eot_id|> (`chat_template.rendered_prompt_changed`, " \
           "`tokenizer_config.json`)\n- eos_token_id: 128001 → [128001, 128009]" in d
    assert "```diff\n--- old\n+++ new\n-Hello\n+Hello<|eot_id|>\n```" in d
    assert "## Estimate changes\n- `fits`: `{\"T4 full\": \"7 -> 0\"}`\n- `params`: `559890432` → `560000000`" in d
    assert "## Related OSV.dev advisories\n- GHSA-282v-666c-3fvg\n- PYSEC-2024-227" in d
    assert "README" not in d


def test_nothing_at_threshold_gives_none(linear5):
    c, parents = linear5
    assert build("update", [COSMETIC], c=c, parents=parents) is None
    assert build("risk", [EOS], c=c, parents=parents) is None
    assert build("update", [FAILED], c=c, parents=parents) is None
    r = build("update", [COSMETIC], c=c, parents=parents, min_severity=Severity.INFO)
    assert r["database_specific"]["severity"] == "INFO"


def test_ids_are_deterministic_and_case_insensitive_on_repo():
    a = advisory_id(REPO, sha(3), "risk")
    assert a == advisory_id(REPO.upper(), sha(3).upper(), "risk")
    assert is_advisory_id(a) and a.startswith("x_HFUT-") and len(a) == len("x_HFUT-xxxx-xxxx-xxxx")
    assert len({advisory_id(REPO, sha(3), "risk"), advisory_id(REPO, sha(4), "risk"),
                advisory_id("other/model", sha(3), "risk"), advisory_id(REPO, sha(3), "update")}) == 4
    assert repo_event_id(REPO, "deleted", [sha(1), sha(2)]) == repo_event_id(REPO, "deleted", [sha(2), sha(1), sha(1)])
    assert repo_event_id(REPO, "deleted", [sha(1)]) != repo_event_id(REPO, "recreated", [sha(1)])


def test_rebuild_keeps_modified_when_content_is_unchanged(linear5):
    c, parents = linear5
    first = build("risk", [PICKLE], c=c, parents=parents, now=T1)
    again = build("risk", [PICKLE], c=c, parents=parents, now=T2, previous=copy.deepcopy(first))
    assert again == first
    assert again["modified"] == "2026-08-21T10:15:00Z"


def test_rebuild_moves_modified_when_content_changes(linear5):
    c, parents = linear5
    first = build("risk", [PICKLE], c=c, parents=parents, now=T1)
    newer_rules = Finding(**{**PICKLE.__dict__, "severity": Severity.HIGH})
    again = build("risk", [newer_rules], c=c, parents=parents, now=T2, previous=first)
    assert again["id"] == first["id"]
    assert again["published"] == "2026-08-21T10:15:00Z"
    assert again["modified"] == "2026-08-22T11:30:00Z"
    assert again["database_specific"]["severity"] == "HIGH"


def test_modified_never_goes_backwards(linear5):
    c, parents = linear5
    first = build("risk", [PICKLE], c=c, parents=parents, now=T2)
    again = build("risk", [PICKLE, PICKLE], c=c, parents=parents, now=T1, previous=first)
    assert again["modified"] == "2026-08-22T11:30:00.000001Z"


def test_previous_with_other_id_is_an_error(linear5):
    c, parents = linear5
    first = build("risk", [PICKLE], c=c, parents=parents)
    with pytest.raises(ValueError, match="is not"):
        build("update", [EOS], c=c, parents=parents, previous=first)


def test_rebuild_with_no_findings_withdraws(linear5):
    c, parents = linear5
    first = build("risk", [PICKLE], c=c, parents=parents, now=T1)
    gone = build("risk", [COSMETIC], c=c, parents=parents, now=T2, previous=first)
    assert gone["id"] == first["id"]
    assert gone["withdrawn"] == gone["modified"] == "2026-08-22T11:30:00Z"
    assert gone["summary"].startswith("Withdrawn (re-analysis no longer reports findings")
    assert build("risk", [COSMETIC], c=c, parents=parents, now=T2, previous=gone) == gone
    back = build("risk", [PICKLE], c=c, parents=parents, now=T2, previous=gone)
    assert "withdrawn" not in back and back["published"] == first["published"]


def test_withdraw_is_idempotent(linear5):
    c, parents = linear5
    r = build("update", [EOS], c=c, parents=parents)
    w = checked(withdraw(r, T2, reason="rule retired"))
    assert w["withdrawn"] == "2026-08-22T11:30:00Z"
    assert w["database_specific"]["withdrawn_reason"] == "rule retired"
    assert w["details"].startswith("**Withdrawn** on 2026-08-22T11:30:00Z: rule retired.\n\n")
    assert checked(withdraw(w, datetime(2027, 1, 1, tzinfo=UTC))) == w
    assert "withdrawn" not in r  # input untouched


def test_mark_fixed_then_rebuild_keeps_the_fix(linear5):
    c, parents = linear5
    r = build("risk", [PICKLE], c=c, parents=parents, now=T1)
    events = advisory_events("risk", c[3], [c[5]])
    fixed = checked(mark_fixed(r, c[5], T2, affected_commits(parents, events)))
    assert fixed["affected"][0]["ranges"][0]["events"] == [{"introduced": c[3]}, {"fixed": c[5]}]
    assert fixed["affected"][0]["versions"] == [c[3], c[4]]
    assert fixed["modified"] == "2026-08-22T11:30:00Z" and fixed["published"] == r["published"]
    assert {"type": "FIX", "url": f"{URL}/commit/{c[5]}"} in fixed["references"]
    assert fixed["references"][-1]["type"] == "ADVISORY"
    assert fixed["details"].endswith(f"## Undone\n- revision [`c50000000000`]({URL}/commit/{c[5]}) undoes it; "
                                     "it and its descendants are no longer affected.")
    # idempotent
    assert mark_fixed(fixed, c[5], datetime(2027, 1, 1, tzinfo=UTC),
                      affected_commits(parents, events)) == fixed
    # re-analysing the introducing revision keeps the fix and the modified time
    rebuilt = checked(build_revision_advisory(
        kind="risk", repo_id=REPO, revision=c[3], parent=c[2], revision_date=T0, findings=[PICKLE],
        endpoint=ENDPOINT, tracker_url="https://tracker.example", estimate_delta=None, related=[],
        affected_commits=affected_commits(parents, events), now=datetime(2027, 1, 1, tzinfo=UTC),
        previous=fixed))
    assert rebuilt == fixed


def test_mark_fixed_refuses_update_advisories(linear5):
    c, parents = linear5
    r = build("update", [EOS], c=c, parents=parents)
    with pytest.raises(ValueError, match="fixed by its own revision"):
        mark_fixed(r, c[5], T2, [])


def test_build_revision_advisories_splits_kinds(linear5):
    c, parents = linear5
    args = dict(repo_id=REPO, revision=c[3], parent=c[2], revision_date=T0, endpoint=ENDPOINT,
                tracker_url=None, estimate_delta=None, related=[], parents=parents)
    records = [checked(r) for r in build_revision_advisories(findings=[EOS, PICKLE, COSMETIC, FAILED], now=T1, **args)]
    assert [r["database_specific"]["kind"] for r in records] == ["risk", "update"]
    assert records[0]["affected"][0]["versions"] == [c[3], c[4], c[5]]
    assert records[1]["affected"][0]["versions"] == [c[1], c[2]]
    # polling again: the same records, nothing new
    assert build_revision_advisories(findings=[PICKLE, EOS], now=T2, previous=records, **args) == records
    # newer rules drop the pickle finding: the risk advisory is withdrawn, not duplicated
    later = [checked(r) for r in build_revision_advisories(findings=[EOS], now=T2, previous=records, **args)]
    assert [r["id"] for r in later] == [r["id"] for r in records]
    assert later[0]["withdrawn"] == "2026-08-22T11:30:00Z" and later[1] == records[1]
    assert build_revision_advisories(findings=[COSMETIC], now=T1, **args) == []


def test_input_validation(linear5):
    c, parents = linear5
    with pytest.raises(ValueError, match="40-hex"):
        build("risk", [PICKLE], c=c, parents=parents, revision=c[3][:12])
    with pytest.raises(ValueError, match="timezone-aware"):
        build("risk", [PICKLE], c=c, parents=parents, now=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="invalid repo id"):
        build("risk", [PICKLE], c=c, parents=parents, repo_id="not a repo")


def test_format_timestamp():
    assert format_timestamp(datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)) == "2026-01-02T03:04:05.12Z"


@pytest.mark.parametrize(
    ("kind", "severity", "has_range"),
    [("history_rewritten", "HIGH", False), ("renamed", "MODERATE", True), ("deleted", "CRITICAL", True),
     ("recreated", "CRITICAL", True), ("gated", "HIGH", True), ("private", "CRITICAL", True)],
)
def test_repo_event_advisories(kind, severity, has_range):
    revisions = [sha(2), sha(1)]
    r = checked(repo_event_advisory(repo_id=REPO, kind=kind, detail={"new_repo_id": "new-org/m"} if kind == "renamed"
                                    else {"old_head": sha(2)}, revisions=revisions, endpoint=ENDPOINT, now=T1,
                                    tracker_url="https://tracker.example"))
    assert r["id"] == repo_event_id(REPO, kind, revisions)
    assert r["database_specific"]["severity"] == severity
    assert r["database_specific"]["event"] == kind
    assert r["affected"][0]["versions"] == [sha(1), sha(2)]
    assert ("ranges" in r["affected"][0]) is has_range
    if has_range:
        assert r["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}]
    if kind == "renamed":
        assert r["summary"] == f"{REPO}: repo renamed (now new-org/m)"
    again = repo_event_advisory(repo_id=REPO, kind=kind, detail=r["database_specific"]["detail"],
                                revisions=list(reversed(revisions)), endpoint=ENDPOINT, now=T2,
                                tracker_url="https://tracker.example", previous=r)
    assert again == r


def test_repo_event_recreated_is_critical_and_fixable():
    r = checked(repo_event_advisory(repo_id=REPO, kind="recreated", detail={}, revisions=[sha(9)],
                                    endpoint=ENDPOINT, now=T1))
    assert r["summary"] == f"{REPO}: repo deleted and created again under the same id: possible takeover"
    fixed = checked(mark_fixed(r, sha(10), T2, [sha(9)]))
    assert fixed["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}, {"fixed": sha(10)}]
    with pytest.raises(ValueError, match="unknown repo event"):
        repo_event_advisory(repo_id=REPO, kind="exploded", detail={}, revisions=[sha(1)], endpoint=ENDPOINT, now=T1)
