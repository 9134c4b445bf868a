"""Slack messages: Block Kit within Slack's limits, with a plain text fallback, whatever the change."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from slack_sdk.models.blocks import Block

from tracker.adapters.delivery.slack import slack_message
from tracker.core.advisory.build import build_revision_advisory, repo_event_advisory, withdraw
from tracker.core.advisory.record import parse_advisory
from tracker.core.model import Finding, Severity

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
REV, PARENT = "a" * 40, "b" * 40
DELTA = {"T4.full_batch": {"before": 7, "after": 0}, "A100-80GB.serve_batch": {"before": 120, "after": 96},
         "params": {"before": 22_713_216, "after": 33_360_000}}


def record(findings: list[Finding], *, kind: str = "update", delta: dict | None = None) -> dict:
    built = build_revision_advisory(
        kind=kind, repo_id="acme/chat-model", revision=REV, parent=PARENT, revision_date=NOW, findings=findings,
        endpoint="https://huggingface.co", tracker_url=None, estimate_delta=delta, related=[],
        affected_commits=[PARENT], now=NOW)
    assert built is not None
    return built


def many(n: int, summary_len: int = 200) -> list[Finding]:
    return [Finding(code=f"tokenizer.token_{i}_changed", category="tokenizer", severity=Severity.HIGH,
                    summary=f"token {i} <changed> & " + "x" * summary_len, path="tokenizer.json")
            for i in range(n)]


def check_limits(message: dict) -> None:
    blocks = message["blocks"]
    assert 1 <= len(blocks) <= 50
    assert isinstance(message["text"], str) and 0 < len(message["text"]) <= 3000
    for block in blocks:
        Block.parse(block).to_dict()  # slack_sdk's own validation: raises past Slack's limits
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150 and block["text"]["type"] == "plain_text"
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= 3000
        if block["type"] == "context":
            assert all(len(e["text"]) <= 3000 for e in block["elements"])


def test_a_small_change_reads_well():
    eos = Finding(code="generation.eos_token_id_changed", category="generation", severity=Severity.HIGH,
                  summary="eos_token_id: 128001 → [128001, 128009]", path="generation_config.json")
    rec = record([eos], delta=DELTA)
    message = slack_message("advisory.created", parse_advisory(rec), tracker_url="https://tracker.example.org")
    check_limits(message)
    header, lead, findings, estimator, context = message["blocks"]
    assert header["text"]["text"] == ":large_orange_circle: New advisory: acme/chat-model (high)"
    assert lead["text"]["text"] == (f"*{rec['summary']}*\nRevision "
                                    f"<https://huggingface.co/acme/chat-model/commit/{REV}|{REV[:12]}>")
    assert findings["text"]["text"] == ("*Findings* (1)\n• *high* eos_token_id: 128001 → [128001, 128009] "
                                        "(`generation.eos_token_id_changed`)")
    assert estimator["text"]["text"] == ("*Estimator*\n• serving on A100-80GB: batch 120 → batch 96\n"
                                         "• full fine-tune on T4: batch 7 → does not fit\n"
                                         "• parameters: 22,713,216 → 33,360,000")
    assert context["elements"][0]["text"] == (
        f"`{rec['id']}` · modified 2026-12-01T12:00:00Z · "
        f"<https://tracker.example.org/advisories/{rec['id']}|advisory>")
    assert message["text"] == f"New advisory: [HIGH] {rec['summary']}"


@pytest.mark.parametrize("n", [11, 300, 1000])
def test_hundreds_of_findings_stay_within_the_limits(n):
    rec = record(many(n, summary_len=400), delta={f"card{i}.full_batch": {"before": i + 1, "after": 0}
                                                  for i in range(200)})
    message = slack_message("advisory.created", parse_advisory(rec))
    check_limits(message)
    findings = message["blocks"][2]["text"]["text"]
    assert findings.startswith(f"*Findings* ({n})\n")
    shown = findings.count("\n• ")
    assert 1 <= shown <= 10
    assert findings.endswith(f"_… and {n - shown} more findings_")
    assert "&lt;changed&gt; &amp;" in findings  # mrkdwn control characters escaped
    assert message["blocks"][3]["text"]["text"].endswith("_… and 190 more estimate changes_")


def test_a_long_repo_id_and_summary_are_clipped_not_refused():
    long_repo = "a" * 96 + "/" + "b" * 96
    rec = repo_event_advisory(repo_id=long_repo, kind="recreated", detail={}, revisions=[REV],
                              endpoint="https://huggingface.co", now=NOW)
    message = slack_message("advisory.created", parse_advisory(rec))
    check_limits(message)
    assert message["blocks"][0]["text"]["text"].endswith("…")
    assert len(message["blocks"][0]["text"]["text"]) == 150


def test_a_withdrawal_says_why_and_lists_no_findings():
    rec = withdraw(record(many(3)), NOW, "re-analysis no longer reports findings")
    message = slack_message("advisory.withdrawn", parse_advisory(rec))
    check_limits(message)
    assert [b["type"] for b in message["blocks"]] == ["header", "section", "context"]
    assert message["blocks"][0]["text"]["text"] == ":large_orange_circle: Advisory withdrawn: acme/chat-model (high)"
    assert "Withdrawn: re-analysis no longer reports findings" in message["blocks"][1]["text"]["text"]
    assert message["text"].startswith("Advisory withdrawn: [HIGH] Withdrawn (")
