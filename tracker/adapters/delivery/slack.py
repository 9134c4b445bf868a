"""Slack incoming-webhook messages in Block Kit, within Slack's limits, with a plain ``text`` fallback.

Built with slack_sdk's Block Kit model classes, whose ``to_dict()`` refuses a header over 150
characters or a section over 3,000: a message that renders is one Slack accepts. A change with
hundreds of findings shows the top ones and says how many more there are; a message never has more
than a handful of blocks (Slack's cap is 50).
"""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from tracker.adapters.delivery.text import advisory_url, clip, estimate_lines, findings_of, revision_url
from tracker.core.advisory.record import Advisory

MAX_BLOCKS = 50
HEADER_MAX = 150
SECTION_MAX = 3000
TEXT_MAX = 3000
TOP_FINDINGS = 10
TOP_ESTIMATES = 10

_ICONS = {"critical": ":red_circle:", "high": ":large_orange_circle:", "moderate": ":large_yellow_circle:",
          "low": ":large_blue_circle:", "info": ":white_circle:"}
_VERBS = {"advisory.created": "New advisory", "advisory.updated": "Advisory updated",
          "advisory.withdrawn": "Advisory withdrawn"}


def escape(text: str) -> str:
    """Slack's mrkdwn control characters (https://api.slack.com/reference/surfaces/formatting#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str, label: str) -> str:
    return f"<{url.replace('|', '%7C').replace('>', '%3E')}|{escape(label)}>"


def _bullets(title: str, lines: list[str], total: int, more_label: str) -> str:
    """A section text of as many lines as fit in Slack's 3,000 characters, then "… and N more"."""
    text, shown = title, 0
    for line in lines:
        tail = f"\n_… and {total - shown - 1} more {more_label}_" if shown + 1 < total else ""
        candidate = f"{text}\n{line}"
        if len(candidate) + len(tail) > SECTION_MAX - 60:
            break
        text, shown = candidate, shown + 1
    if shown < total:
        text += f"\n_… and {total - shown} more {more_label}_"
    return clip(text, SECTION_MAX)


def slack_message(event_type: str, record: Advisory, *, tracker_url: str | None = None) -> dict[str, Any]:
    """The JSON body to POST to a Slack incoming webhook for one advisory event."""
    ds = record.specific
    repo = ds.repo_id or "a watched repo"
    severity = (ds.severity or "info").lower()
    verb = _VERBS.get(event_type, "Advisory")
    summary = record.summary or record.id
    blocks: list[Block] = [HeaderBlock(text=PlainTextObject(
        text=clip(f"{_ICONS.get(severity, '')} {verb}: {repo} ({severity})".strip(), HEADER_MAX), emoji=True))]

    lead = [f"*{escape(summary)}*"]
    rev_url, adv_url = revision_url(record), advisory_url(record, tracker_url)
    if rev_url and ds.revision:
        lead.append(f"Revision {_link(rev_url, ds.revision[:12])}")
    if ds.withdrawn_reason:
        lead.append(f"Withdrawn: {escape(ds.withdrawn_reason)}")
    blocks.append(SectionBlock(text=MarkdownTextObject(text=clip("\n".join(lead), SECTION_MAX))))

    findings = findings_of(record)
    if findings and event_type != "advisory.withdrawn":
        lines = [f"• *{escape(str(f.get('severity', '')))}* {escape(clip(str(f.get('summary', '')), 300))} "
                 f"(`{escape(str(f.get('code', '')))}`)" for f in findings[:TOP_FINDINGS]]
        title = f"*Findings* ({len(findings)})"
        blocks.append(SectionBlock(text=MarkdownTextObject(text=_bullets(title, lines, len(findings), "findings"))))

    estimates = estimate_lines(ds.estimate_delta)
    if estimates and event_type != "advisory.withdrawn":
        lines = [f"• {escape(line)}" for line in estimates[:TOP_ESTIMATES]]
        blocks.append(SectionBlock(text=MarkdownTextObject(
            text=_bullets("*Estimator*", lines, len(estimates), "estimate changes"))))

    context = [f"`{escape(record.id)}`", f"modified {escape(record.modified)}"]
    if adv_url:
        context.append(_link(adv_url, "advisory"))
    blocks.append(ContextBlock(elements=[MarkdownTextObject(text=clip(" · ".join(context), SECTION_MAX))]))

    assert len(blocks) <= MAX_BLOCKS
    text = clip(f"{verb}: [{severity.upper()}] {summary}", TEXT_MAX)
    return {"text": text, "blocks": [block.to_dict() for block in blocks]}
