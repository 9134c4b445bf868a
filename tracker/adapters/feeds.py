"""Change feeds: Atom (feedgen) and JSON Feed 1.1 per repo, per owner and for everything.

``/feeds/{owner}/{name}.atom|.json``, ``/feeds/{owner}.atom|.json`` and ``/feeds/all.atom|.json``,
filtered with ``?min_severity=`` and ``?category=`` (repeatable, or comma-separated). One entry per
advisory, newest change first: a stable id, title = summary, content = the findings and the
estimator delta as HTML, a link to the advisory page, ``updated`` = ``modified``. A withdrawn (or
re-scoped) advisory keeps its entry id and moves its ``updated``, so readers replace it.

Conditional GET: every answer carries an ``ETag`` (from the entries' ids and ``modified``) and a
``Last-Modified``; ``If-None-Match`` / ``If-Modified-Since`` that still match get ``304``. Feeds read
the advisories table directly: they need no outbox.

JSON Feed 1.1 is written by hand (feedgen has no JSON Feed writer): it is a small JSON object
whose fields are set out at https://www.jsonfeed.org/version/1.1/.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any, Protocol

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from feedgen.feed import FeedGenerator

from tracker.adapters.delivery.plan import CATEGORIES, record_categories
from tracker.adapters.delivery.text import estimate_lines, findings_of, revision_url
from tracker.adapters.store.advisories import FeedItem
from tracker.core.escaping import escape_controls
from tracker.core.model import Severity, validate_repo_id

FEED_LIMIT = 100  # entries per feed, most recently modified first
FINDINGS_SHOWN = 50
ID_PREFIX = "tag:upstream-tracker,2026:"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
JSON_FEED_TYPE = "application/feed+json; charset=utf-8"


class FeedAdvisories(Protocol):
    def feed_items(self, *, repo_id: str | None = None, owner: str | None = None,
                   min_severity: Severity | None = None, limit: int = 100) -> list[FeedItem]: ...


class FeedRepos(Protocol):
    def owner_watched(self, owner: str) -> bool: ...

    def get(self, repo_id: str) -> Any: ...


class FeedStore(Protocol):
    """What the feeds read: the watch list and the advisories (``SqlStore``)."""

    @property
    def repos(self) -> FeedRepos: ...

    @property
    def advisories(self) -> FeedAdvisories: ...


def entry_id(advisory_id: str) -> str:
    """The stable id of an advisory's entry, in every feed that shows it."""
    return f"{ID_PREFIX}advisory:{advisory_id}"


def entry_html(record: Mapping[str, Any]) -> str:
    """An advisory as readable HTML: what, where, the findings and the estimator delta."""
    ds = record.get("database_specific") or {}

    def esc(text: str) -> str:
        return html.escape(escape_controls(text, keep_whitespace=True))

    parts = [f"<p><strong>{esc(str(ds.get('severity', '')).lower())}</strong> &middot; "
             f"{esc(str(ds.get('repo_id', '')))}"]
    rev_url, revision = revision_url(record), ds.get("revision")
    if rev_url and revision:
        parts.append(f" &middot; revision <a href=\"{esc(rev_url)}\"><code>{esc(str(revision)[:12])}</code></a>")
    parts.append("</p>")
    if record.get("withdrawn"):
        parts.append(f"<p><strong>Withdrawn</strong> {esc(str(record['withdrawn']))}: "
                     f"{esc(str(ds.get('withdrawn_reason', '')))}</p>")
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
    estimates = estimate_lines(ds.get("estimate_delta"))
    if estimates:
        parts.append("<h3>Estimator</h3><ul>" + "".join(f"<li>{esc(line)}</li>" for line in estimates) + "</ul>")
    if not findings and record.get("details"):
        parts.append(f"<pre>{esc(str(record['details']))}</pre>")
    return "".join(parts)


def _rfc3339(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def entry_title(item: FeedItem) -> str:
    """An entry's title leads with its severity, so a feed reader's list shows what matters: "[HIGH] ..."."""
    return escape_controls(f"[{str(item.severity).upper()}] {item.record.get('summary') or item.id}")


def _atom(items: Sequence[FeedItem], *, feed_id: str, title: str, self_url: str, home: str,
          updated: datetime, page: str) -> bytes:
    fg = FeedGenerator()
    fg.id(feed_id)
    fg.title(title)
    fg.author({"name": "upstream-tracker"})
    fg.link(href=self_url, rel="self")
    fg.link(href=page, rel="alternate")
    fg.updated(updated)
    fg.generator("upstream-tracker")
    for item in items:
        fe = fg.add_entry(order="append")
        fe.id(entry_id(item.id))
        fe.title(entry_title(item))
        fe.updated(item.modified)
        fe.published(item.published)
        fe.link(href=f"{home}/advisories/{item.id}", rel="alternate")
        fe.content(entry_html(item.record), type="html")
        for category in record_categories(item.record):
            fe.category(term=category)
    return fg.atom_str(pretty=False)


def _json_feed(items: Sequence[FeedItem], *, title: str, self_url: str, home: str, page: str) -> bytes:
    feed = {
        "version": "https://jsonfeed.org/version/1.1",
        "title": title,
        "home_page_url": page,
        "feed_url": self_url,
        "authors": [{"name": "upstream-tracker"}],
        "items": [
            {
                "id": entry_id(item.id),
                "url": f"{home}/advisories/{item.id}",
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


def _not_modified(request: Request, etag: str, last_modified: datetime | None) -> bool:
    given = request.headers.get("if-none-match")
    if given is not None:
        tags = {t.strip().removeprefix("W/") for t in given.split(",")}
        return "*" in tags or etag in tags
    since = request.headers.get("if-modified-since")
    if since and last_modified is not None:
        try:
            when = parsedate_to_datetime(since)
        except (TypeError, ValueError):
            return False
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return last_modified.replace(microsecond=0) <= when
    return False


def _error(status: int, code: int, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


def feeds_router(store: FeedStore, *, tracker_url: str | None = None, limit: int = FEED_LIMIT) -> APIRouter:
    """The feed endpoints over ``store``; links point at ``tracker_url`` (else the request's own base URL)."""
    router = APIRouter()

    def serve(request: Request, scope: str, fmt: str, *, repo_id: str | None, owner: str | None,
              min_severity: str | None, category: list[str]) -> Response:
        if fmt not in ("atom", "json"):
            return _error(404, 5, "feeds end in .atom or .json")
        threshold = None
        if min_severity:
            try:
                threshold = Severity(min_severity.strip().lower())
            except ValueError:
                return _error(400, 3, f"invalid min_severity {min_severity!r}: expected one of "
                                      f"{', '.join(s.value for s in Severity)}")
        wanted = {c.strip().lower() for value in category for c in value.split(",") if c.strip()}
        unknown = sorted(wanted - set(CATEGORIES))
        if unknown:
            return _error(400, 3, f"unknown category {unknown[0]!r}: expected one of {', '.join(CATEGORIES)}")
        if repo_id is not None and store.repos.get(repo_id) is None:
            return _error(404, 5, f"not watched: {repo_id}")
        if owner is not None and not store.repos.owner_watched(owner):
            return _error(404, 5, f"no watched repo belongs to {owner}")
        # Category filtering happens here (categories are a JSON list), so ask for more than a page.
        items = store.advisories.feed_items(repo_id=repo_id, owner=owner, min_severity=threshold,
                                 limit=limit * 10 if wanted else limit)
        if wanted:
            items = [i for i in items if wanted & set(record_categories(i.record))][:limit]

        query = "&".join(f"{k}={v}" for k, v in sorted(request.query_params.multi_items()))
        base = (tracker_url or str(request.base_url)).rstrip("/")
        self_url = f"{base}{request.url.path}" + (f"?{query}" if query else "")
        digest = hashlib.sha256(json.dumps([fmt, query, base, [(i.id, _rfc3339(i.modified)) for i in items]])
                                .encode()).hexdigest()[:32]
        etag = f'"{digest}"'
        last_modified = max((i.modified for i in items), default=None)
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if last_modified is not None:
            headers["Last-Modified"] = format_datetime(last_modified.astimezone(UTC), usegmt=True)
        if _not_modified(request, etag, last_modified):
            return Response(status_code=304, headers=headers)
        title = f"upstream-tracker: {scope}" + (f" ({min_severity} and above)" if threshold else "")
        # The page a feed mirrors: the repo's, the owner's, or the site's.
        page = f"{base}/repos/{repo_id}" if repo_id else f"{base}/repos/{owner}" if owner else base
        if fmt == "atom":
            body = _atom(items, feed_id=f"{ID_PREFIX}feed:{request.url.path}" + (f"?{query}" if query else ""),
                         title=title, self_url=self_url, home=base,
                         updated=last_modified or datetime(1970, 1, 1, tzinfo=UTC), page=page)
            return Response(body, media_type=ATOM_TYPE, headers=headers)
        return Response(_json_feed(items, title=title, self_url=self_url, home=base, page=page),
                        media_type=JSON_FEED_TYPE, headers=headers)

    # Plain `def` handlers: FastAPI runs them in its threadpool, off the event loop.
    @router.get("/feeds/{owner}/{filename}")
    def repo_feed(request: Request, owner: str, filename: str, min_severity: str | None = None,
                  category: list[str] = Query(default=[])) -> Response:
        name, _, fmt = filename.rpartition(".")
        try:
            repo_id = validate_repo_id(f"{owner}/{name}")
        except ValueError as exc:
            return _error(400, 3, str(exc))
        return serve(request, repo_id, fmt, repo_id=repo_id, owner=None, min_severity=min_severity,
                     category=category)

    @router.get("/feeds/{filename}")
    def owner_feed(request: Request, filename: str, min_severity: str | None = None,
                   category: list[str] = Query(default=[])) -> Response:
        owner, _, fmt = filename.rpartition(".")
        if owner == "all":
            return serve(request, "all watched repos", fmt, repo_id=None, owner=None, min_severity=min_severity,
                         category=category)
        try:
            validate_repo_id(f"{owner}/x")
        except ValueError:
            return _error(400, 3, f"invalid owner {owner!r}")
        return serve(request, owner, fmt, repo_id=None, owner=owner, min_severity=min_severity, category=category)

    return router
