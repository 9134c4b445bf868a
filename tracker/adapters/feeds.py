"""Change feeds: Atom (feedgen) and JSON Feed 1.1 documents, their ETags and conditional GET.

``/feeds/{owner}/{name}.atom|.json``, ``/feeds/{owner}.atom|.json`` and ``/feeds/all.atom|.json``,
filtered with ``?min_severity=`` and ``?category=`` (repeatable, or comma-separated). One entry per
advisory, newest change first: a stable id, title = summary, content = the findings and the
estimator delta as HTML, a link to the advisory page, ``updated`` = ``modified``. A withdrawn (or
re-scoped) advisory keeps its entry id and moves its ``updated``, so readers replace it.

The routes that serve them are in ``tracker/surfaces/api_feeds.py``. Conditional GET: every answer carries an ``ETag`` (from the entries' ids and ``modified``) and a
``Last-Modified``; ``If-None-Match`` / ``If-Modified-Since`` that still match get ``304``. Feeds read
the advisories table directly: they need no outbox.

JSON Feed 1.1 is written by hand (feedgen has no JSON Feed writer): it is a small JSON object
whose fields are set out at https://www.jsonfeed.org/version/1.1/.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from feedgen.feed import FeedGenerator

from tracker.adapters.delivery.plan import record_categories
from tracker.adapters.delivery.text import estimate_lines, findings_of, revision_url
from tracker.adapters.store.advisories import FeedItem
from tracker.core.advisory.record import Advisory
from tracker.core.escaping import escape_controls

FEED_LIMIT = 100  # entries per feed, most recently modified first
FINDINGS_SHOWN = 50
ID_PREFIX = "tag:upstream-tracker,2026:"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
JSON_FEED_TYPE = "application/feed+json; charset=utf-8"


def entry_id(advisory_id: str) -> str:
    """The stable id of an advisory's entry, in every feed that shows it."""
    return f"{ID_PREFIX}advisory:{advisory_id}"


def entry_html(record: Advisory) -> str:
    """An advisory as readable HTML: what, where, the findings and the estimator delta."""
    ds = record.specific

    def esc(text: str) -> str:
        return html.escape(escape_controls(text, keep_whitespace=True))

    parts = [f"<p><strong>{esc((ds.severity or '').lower())}</strong> &middot; {esc(ds.repo_id or '')}"]
    rev_url, revision = revision_url(record), ds.revision
    if rev_url and revision:
        parts.append(f" &middot; revision <a href=\"{esc(rev_url)}\"><code>{esc(revision[:12])}</code></a>")
    parts.append("</p>")
    if record.withdrawn:
        parts.append(f"<p><strong>Withdrawn</strong> {esc(record.withdrawn)}: {esc(ds.withdrawn_reason or '')}</p>")
    findings = findings_of(record)
    if findings:
        items = "".join(
            f"<li><strong>{esc(str(f.get('severity', '')))}</strong> {esc(str(f.get('summary', '')))} "
            f"<code>{esc(str(f.get('code', '')))}</code>"
            + (f" ({esc(str(f['path']))})" if f.get("path") else "") + "</li>"
            for f in findings[:FINDINGS_SHOWN])
        more = (f"<li>&hellip; and {len(findings) - FINDINGS_SHOWN} more</li>"
                if len(findings) > FINDINGS_SHOWN else "")
        parts.append(f"<h3>Findings</h3><ul>{items}{more}</ul>")
    estimates = estimate_lines(ds.estimate_delta)
    if estimates:
        parts.append("<h3>Estimator</h3><ul>" + "".join(f"<li>{esc(line)}</li>" for line in estimates) + "</ul>")
    if not findings and record.details:
        parts.append(f"<pre>{esc(record.details)}</pre>")
    return "".join(parts)


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def entry_title(item: FeedItem) -> str:
    """An entry's title leads with its severity, so a feed reader's list shows what matters: "[HIGH] ..."."""
    return escape_controls(f"[{str(item.severity).upper()}] {item.record.summary or item.id}")


@dataclass(frozen=True)
class FeedHead:
    """What a feed says of itself: its id (Atom), title, own URL, the site's base URL, the page it mirrors."""

    feed_id: str
    title: str
    self_url: str
    home: str
    page: str


def _atom(items: Sequence[FeedItem], head: FeedHead) -> bytes:
    fg = FeedGenerator()
    fg.id(head.feed_id)
    fg.title(head.title)
    fg.author({"name": "upstream-tracker"})
    fg.link(href=head.self_url, rel="self")
    fg.link(href=head.page, rel="alternate")
    fg.updated(max((i.modified for i in items), default=datetime(1970, 1, 1, tzinfo=UTC)))
    fg.generator("upstream-tracker")
    for item in items:
        fe = fg.add_entry(order="append")
        fe.id(entry_id(item.id))
        fe.title(entry_title(item))
        fe.updated(item.modified)
        fe.published(item.published)
        fe.link(href=f"{head.home}/advisories/{item.id}", rel="alternate")
        fe.content(entry_html(item.record), type="html")
        for category in record_categories(item.record):
            fe.category(term=category)
    body: bytes = fg.atom_str(pretty=False)
    return body


def _json_feed(items: Sequence[FeedItem], head: FeedHead) -> bytes:
    feed = {
        "version": "https://jsonfeed.org/version/1.1",
        "title": head.title,
        "home_page_url": head.page,
        "feed_url": head.self_url,
        "authors": [{"name": "upstream-tracker"}],
        "items": [
            {
                "id": entry_id(item.id),
                "url": f"{head.home}/advisories/{item.id}",
                "title": entry_title(item),
                "content_html": entry_html(item.record),
                "date_published": _rfc3339(item.published),
                "date_modified": _rfc3339(item.modified),
                "tags": list(record_categories(item.record)),
                "_upstream_tracker": {"advisory_id": item.id, "repo_id": item.repo_id, "severity": item.severity,
                                      "withdrawn": item.withdrawn},
            }
            for item in items
        ],
    }
    return json.dumps(feed, ensure_ascii=False, separators=(",", ":")).encode()


def feed_etag(fmt: str, query: str, base: str, items: Sequence[FeedItem]) -> str:
    """The ETag of a feed: its format, filters and base URL, and each entry's id and ``modified``."""
    digest = hashlib.sha256(json.dumps([fmt, query, base, [(i.id, _rfc3339(i.modified)) for i in items]])
                            .encode()).hexdigest()[:32]
    return f'"{digest}"'


def not_modified(if_none_match: str | None, if_modified_since: str | None, etag: str,
                 last_modified: datetime | None) -> bool:
    """Whether a conditional GET's validators still match (then the answer is 304)."""
    if if_none_match is not None:
        tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        return "*" in tags or etag in tags
    if if_modified_since and last_modified is not None:
        try:
            when = parsedate_to_datetime(if_modified_since)
        except (TypeError, ValueError):
            return False
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return last_modified.replace(microsecond=0) <= when
    return False


def render_feed(items: Sequence[FeedItem], fmt: str, head: FeedHead) -> tuple[bytes, str]:
    """A feed document in ``fmt`` ("atom" or "json") and its media type."""
    if fmt == "atom":
        return _atom(items, head), ATOM_TYPE
    return _json_feed(items, head), JSON_FEED_TYPE
