"""The pages: server-rendered HTML over the store, module-level routers for ``create_app`` to include.

``/`` (the watched repos), ``/repos/{owner}/{name}`` (the timeline, the chart, the feeds),
``/repos/{owner}/{name}/revisions/{sha}`` (side-by-side diffs, the card table, the advisories),
``/advisories/{id}`` (the OSV record, readable; ``/advisories/{id}/download`` as a JSON file) and
``/assets/pages.css``. No script anywhere: every page reads the same without JavaScript, and a
strict Content-Security-Policy says so. Each page costs a fixed number of queries (the pages' reads,
``Advisories.pages()`` in tracker/services/advisories.py), whatever the number of revisions; a revision
and an advisory are read through the services.

Bad input never becomes a 500: a repo id that is not ``owner/name``, a sha that is not hex, an
id that is not an advisory id, or anything the store does not hold is a 404 page; a store that
cannot be reached is a 503 page.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import ChainableUndefined, Environment, FileSystemLoader
from markdown_it import MarkdownIt
from markdown_it.token import Token
from markupsafe import Markup
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.app import Tracker
from tracker.core.advisory.ids import ID_RE
from tracker.core.bounded import json_safe
from tracker.core.errors import RevisionUnresolved, StoreError
from tracker.core.escaping import escape_controls
from tracker.core.findings.rules import SeverityRules, severity_policy
from tracker.core.model import AdvisoryRow, RepoId, validate_repo_id
from tracker.pipeline.ports import Pages
from tracker.services import Advisories, Revisions
from tracker.surfaces.api_deps import PagesDep, RulesDep, TrackerDep
from tracker.surfaces.api_errors import http_error
from tracker.surfaces.web import apidoc, charts
from tracker.surfaces.web.measured import measured_view, revision_measured
from tracker.surfaces.web.views import (
    ADVISORY_PAGE,
    CATEGORY_LABELS,
    SEARCH_SHOWN,
    SEVERITIES,
    TIMELINE_PAGE,
    AdvisoryFilters,
    advisory_filters,
    advisory_findings,
    category_label,
    estimate_changes,
    estimate_view,
    explain_code,
    filter_query,
    group_findings,
    paging,
    revision_sections,
    show_value,
    shown_text,
    when,
    worst,
)

HERE = Path(__file__).resolve().parent
log = logging.getLogger(__name__)
SHA_PREFIX_RE = re.compile(r"^[0-9a-f]{7,40}\Z")
# No script, no inline style, nothing from elsewhere; inline SVG is markup, not an image.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _shown(value: Any) -> Any:
    """A template value as shown: strings (and markup) with control characters escaped, newlines kept."""
    if isinstance(value, Markup):
        return Markup(escape_controls(str(value), keep_whitespace=True))
    if isinstance(value, str):
        return escape_controls(value, keep_whitespace=True)
    return value


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The templates, autoescaped (every upstream string is untrusted text), control characters escaped.

    ``finalize`` sees every ``{{ value }}`` before it is written: a right-to-left override or an
    escape sequence in a file name or commit title is shown as ``\\u202e``, in every template.
    """
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=ChainableUndefined,
                      trim_blocks=True, lstrip_blocks=True, finalize=_shown)
    env.filters["when"] = when
    env.filters["short"] = lambda sha: (sha or "")[:12]
    env.filters["value"] = show_value
    env.filters["text"] = shown_text
    env.filters["thousands"] = lambda n: f"{n:,}"
    env.filters["markdown"] = lambda text: Markup(markdown().render(str(text or "")))
    # a URL path may break after a slash, never inside a word ("revision s")
    env.filters["path_breaks"] = lambda path: Markup("/<wbr>").join(str(path).split("/"))
    return env


def markdown() -> MarkdownIt:
    """CommonMark with raw HTML off: an advisory's details are upstream-derived text."""
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")


# The sections of an advisory's details that the page shows as its own sections (the findings with their
# links, the estimate as a table): the details show the rest, so nothing is said twice.
SHOWN_APART = ("Findings", "Estimate changes")


def _blocks(tokens: list[Token]) -> list[list[Token]]:
    """Markdown tokens grouped into top-level blocks (a heading, a list, a paragraph, a fence)."""
    blocks: list[list[Token]] = []
    depth = 0
    for token in tokens:
        if depth == 0:
            blocks.append([])
        blocks[-1].append(token)
        depth += token.nesting
    return blocks


def advisory_details(text: str) -> tuple[str, str]:
    """(the details as HTML less the sections shown apart, the diff excerpts of its findings section as HTML).

    The findings section's lines are the page's findings list already; its diff excerpts (a paragraph
    naming the file, then a fenced diff) are kept, to be shown under that list.
    """
    md = markdown()
    kept: list[Token] = []
    excerpts: list[Token] = []
    section = ""
    for block in _blocks(md.parse(text)):
        head = block[0]
        if head.type == "heading_open" and head.tag == "h2":
            section = block[1].content.strip() if len(block) > 1 else ""
        if section not in SHOWN_APART:
            kept += block
        elif section == "Findings" and head.type in ("paragraph_open", "fence"):
            excerpts += block
    return md.renderer.render(kept, md.options, {}), md.renderer.render(excerpts, md.options, {})


class _NotFound(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


def _page(template: str, code: int = 200, /, **context: Any) -> HTMLResponse:
    body = environment().get_template(template).render(**context)
    return HTMLResponse(body, status_code=code, headers=SECURITY_HEADERS)


def _repo_id(owner: str, name: str) -> RepoId:
    try:
        return validate_repo_id(f"{owner}/{name}")
    except ValueError:
        raise _NotFound(f"There is no repo {owner}/{name} here: not a valid repo id.") from None


def _guard(render: Callable[[], HTMLResponse]) -> HTMLResponse:
    """Unknown things are 404 pages, an unreachable store a 503 page, never a traceback."""
    try:
        return render()
    except _NotFound as exc:
        return _page("not_found.html.jinja", 404, title="Not found", message=exc.what)
    except StoreError as exc:
        return _unavailable(exc)


def _unavailable(exc: StoreError) -> HTMLResponse:
    """The 503 page: what failed, never where the database is (its URL, user, host, port: logged)."""
    log.warning("pages.database_error: %s", exc)
    return _page("not_found.html.jinja", 503, title="Unavailable",
                 message=f"The tracker's database cannot be read right now: {exc.public}")


def _repo_status(repo: Any) -> tuple[str, str]:
    """(status word, its CSS class) for a repo's last poll."""
    if repo.last_error:
        return f"error: {repo.last_error.splitlines()[0][:200]}", "bad"
    if repo.last_polled_at is None:
        return "not polled yet", "muted"
    state = str(repo.state)
    return ("ok", "good") if state == "active" else (state.replace("_", " "), "bad")


# Plain `def` handlers: FastAPI runs them in its threadpool, off the event loop.
pages_router = APIRouter(include_in_schema=False)


@pages_router.get("/assets/pages.css")
def stylesheet() -> Response:
    return Response((HERE / "static" / "pages.css").read_bytes(), media_type="text/css; charset=utf-8",
                    headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"})


def _index_rows(reads: Pages) -> list[dict[str, Any]]:
    rows = []
    for s in reads.repo_summaries(recent=charts.STRIP_REVISIONS):
        status, status_class = _repo_status(s.repo)
        rows.append({"summary": s, "status": status, "status_class": status_class,
                     "strip": charts.severity_strip(s.recent),
                     "open_worst": worst(s.open_by_severity), "open_count": sum(s.open_by_severity.values())})
    return rows


@pages_router.get("/", response_class=HTMLResponse)
def index(reads: PagesDep) -> HTMLResponse:
    return _guard(lambda: _page("index.html.jinja", title="Watched repos", rows=_index_rows(reads)))


def _owner_page(reads: Pages, owner: str) -> HTMLResponse:
    _repo_id(owner, "x")  # the owner part must be a valid id part
    prefix = owner.lower() + "/"
    rows = [r for r in _index_rows(reads) if r["summary"].repo.repo_id.lower().startswith(prefix)]
    if not rows:
        raise _NotFound(f"No repo of {owner} is watched here.")
    return _page("owner.html.jinja", title=owner, owner=owner, rows=rows)


@pages_router.get("/repos/{owner}", response_class=HTMLResponse)
def owner_page(reads: PagesDep, owner: str) -> HTMLResponse:
    return _guard(lambda: _owner_page(reads, owner))


def _repo_page(reads: Pages, owner: str, name: str, page: str) -> HTMLResponse:
    repo_id = _repo_id(owner, name)
    repo = reads.repo(repo_id)
    if repo is None:
        raise _NotFound(f"{repo_id} is not watched here.")
    total, advisory_count = reads.counts(repo.pk)
    pages = paging(page, total, TIMELINE_PAGE)
    timeline = reads.timeline(repo.pk, limit=TIMELINE_PAGE, offset=(pages.number - 1) * TIMELINE_PAGE)
    lines = reads.advisory_lines(repo.pk, page_of=[r.sha for r in timeline])  # this page's, and the repo's
    by_revision: dict[str | None, list[Any]] = {}
    for line in lines:
        by_revision.setdefault(line.revision_sha, []).append(line)
    entries = [{"rev": r, "groups": group_findings(r.findings), "advisories": by_revision.get(r.sha, [])}
               for r in timeline]
    reruns, older = reads.chart_figures(repo.pk, limit=charts.RERUNS_CHARTED)
    pts = charts.points([(sha[:12], est) for sha, est in reruns])
    chart = charts.estimate_chart(pts)
    status, status_class = _repo_status(repo)
    return _page("repo.html.jinja", title=repo_id, repo=repo, entries=entries, chart=chart,
                 chart_narrow=charts.estimate_chart(pts, charts.NARROW), axis_note=charts.axis_note(pts),
                 chart_window=charts.RERUNS_CHARTED if older else None,
                 status=status, status_class=status_class, total=total, pages=pages,
                 repo_advisories=by_revision.get(None, []), advisory_count=advisory_count)


@pages_router.get("/repos/{owner}/{name}", response_class=HTMLResponse)
def repo_page(reads: PagesDep, owner: str, name: str, page: str = "1") -> HTMLResponse:
    return _guard(lambda: _repo_page(reads, owner, name, page))


def _revision_page(reads: Pages, tracker: Tracker, owner: str, name: str, sha: str) -> HTMLResponse:
    repo_id = _repo_id(owner, name)
    if not SHA_PREFIX_RE.match(sha):
        raise _NotFound(f"{sha[:80]!r} is not a revision: give 7 to 40 hex digits of a commit sha.")
    repo = reads.repo(repo_id)
    if repo is None:
        raise _NotFound(f"{repo_id} is not watched here.")
    try:
        row = Revisions(tracker).stored(repo, sha)
    except RevisionUnresolved as exc:
        raise _NotFound(str(exc)) from None
    if row is None:
        raise _NotFound(f"The tracker has not read revision {sha} of {repo_id}.")
    findings = list(row.findings or ())
    older, newer = reads.neighbours(repo.pk, row.seq)
    in_force = reads.estimate_in_force(repo.pk, row.seq)
    estimate = None
    if in_force is not None:
        estimate = {"view": estimate_view(in_force[1]), "sha": in_force[0], "here": in_force[0] == row.sha,
                    "changes": estimate_changes(in_force[1].delta)}
    lines = reads.advisory_lines(repo.pk, revision_sha=row.sha)
    return _page("revision.html.jinja", title=f"{repo_id} @ {row.sha[:12]}", repo=repo, row=row,
                 sections=revision_sections(findings, row.diff), estimate=estimate, advisories=lines,
                 finding_count=len(findings), older=older, newer=newer,
                 measured=revision_measured([line.measured for line in lines]))


@pages_router.get("/repos/{owner}/{name}/revisions/{sha}", response_class=HTMLResponse)
def revision_page(reads: PagesDep, tracker: TrackerDep, owner: str, name: str, sha: str) -> HTMLResponse:
    return _guard(lambda: _revision_page(reads, tracker, owner, name, sha))


def _advisory_row(tracker: Tracker, vuln_id: str) -> AdvisoryRow:
    if not ID_RE.match(vuln_id):
        raise _NotFound(f"{vuln_id[:80]!r} is not an advisory id here (they look like x_HFUT-xxxx-xxxx-xxxx).")
    row = Advisories(tracker).get(vuln_id)
    if row is None:
        raise _NotFound(f"There is no advisory {vuln_id}.")
    return row


def _advisories_page(reads: Pages, request: Request, wanted: AdvisoryFilters, page: str) -> HTMLResponse:
    listed = [a for a in reads.advisory_list(severities=wanted.severities, since=wanted.since)
              if wanted.matches(a.categories, a.libraries)]
    pages = paging(page, len(listed), ADVISORY_PAGE)
    start = (pages.number - 1) * ADVISORY_PAGE
    dated = [(a.line.published or a.modified, a.line.severity) for a in listed]
    timeline = charts.severity_timeline([(when, severity) for when, severity in dated if when is not None])
    return _page("advisories.html.jinja", title="Advisories", listed=listed[start:start + ADVISORY_PAGE],
                 timeline=timeline,
                 total=len(listed), pages=pages, filters=wanted, categories=sorted(CATEGORY_LABELS),
                 severities=SEVERITIES, query=filter_query(request.query_params))


async def _filter_args(severity: str = "", category: str = "", library: str = "", since: str = "") -> dict[str, str]:
    """The advisory list's filters as given (checked by ``advisory_filters``)."""
    return {"severity": severity, "category": category, "library": library, "since": since}


@pages_router.get("/advisories", response_class=HTMLResponse)
def advisories_page(request: Request, reads: PagesDep, args: Annotated[dict[str, str], Depends(_filter_args)],
                    page: str = "1") -> HTMLResponse:
    try:
        wanted = advisory_filters(**args)
    except ValueError as exc:
        return _page("not_found.html.jinja", 400, title="Bad filter", message=str(exc))
    return _guard(lambda: _advisories_page(reads, request, wanted, page))


def _search_page(reads: Pages, rules: SeverityRules, q: str) -> HTMLResponse:
    text = " ".join(q.split())[:200]
    if not text:
        return _page("search.html.jinja", title="Search", q="", repos=[], advisories=[], codes=[])
    found_repos, found_ids = reads.search_ids(text)
    codes = [c for c in sorted(rules.table) if text.lower() in c.lower()][:SEARCH_SHOWN]
    exact = [*(f"/repos/{r}" for r in found_repos if r.lower() == text.lower()),
             *(f"/advisories/{i}" for i in found_ids if i.lower() == text.lower()),
             *(f"/findings/{c}" for c in codes if c.lower() == text.lower())]
    if len(exact) == 1:
        return HTMLResponse("", status_code=303, headers={**SECURITY_HEADERS, "Location": exact[0]})
    return _page("search.html.jinja", title=f"Search: {text}", q=text, repos=found_repos,
                 advisories=found_ids, codes=codes)


@pages_router.get("/search", response_class=HTMLResponse)
def search_page(reads: PagesDep, rules: RulesDep, q: str = "") -> HTMLResponse:
    return _guard(lambda: _search_page(reads, rules, q))


def _findings_index(rules: SeverityRules) -> HTMLResponse:
    groups: dict[str, list[tuple[str, str]]] = {}
    for code in sorted(rules.table):
        groups.setdefault(code.split(".", 1)[0], []).append((code, rules.severity(code).value))
    return _page("findings.html.jinja", title="Finding codes",
                 groups=[(category_label(c), c, groups[c]) for c in sorted(groups)])


@pages_router.get("/findings", response_class=HTMLResponse)
def findings_index(rules: RulesDep) -> HTMLResponse:
    return _guard(lambda: _findings_index(rules))


def _finding_page(rules: SeverityRules, code: str) -> HTMLResponse:
    if code not in rules.table:
        raise _NotFound(f"{code[:80]!r} is not a finding code here; the list is at /findings.")
    policy = severity_policy({c: s.value for c, s in rules.overrides.items()})[code]
    return _page("finding.html.jinja", title=code, explained=explain_code(code, policy.severity.value, policy.why))


@pages_router.get("/findings/{code}", response_class=HTMLResponse)
def finding_page(rules: RulesDep, code: str) -> HTMLResponse:
    return _guard(lambda: _finding_page(rules, code))


def _advisory_page(tracker: Tracker, vuln_id: str) -> HTMLResponse:
    row = _advisory_row(tracker, vuln_id)
    record = row.record
    details, excerpts = advisory_details(record.details or "")
    estimate = estimate_changes(record.specific.estimate_delta)
    findings = advisory_findings(record.specific.findings, table=bool(estimate and estimate.cards))
    return _page("advisory.html.jinja", title=row.id, row=row, record=record, ds=record.specific, details=details,
                 excerpts=excerpts, estimate=estimate, findings=findings,
                 revision=record.specific.revision,
                 measured=measured_view(row.osv.get("database_specific", {}).get("measured")),
                 references=[r for r in record.references if r.url.startswith(("https://", "http://"))])


@pages_router.get("/advisories/{vuln_id}", response_class=HTMLResponse)
def advisory_page(tracker: TrackerDep, vuln_id: str) -> HTMLResponse:
    return _guard(lambda: _advisory_page(tracker, vuln_id))


@pages_router.get("/advisories/{vuln_id}/download")
def advisory_download(tracker: TrackerDep, vuln_id: str) -> Response:
    try:
        row = _advisory_row(tracker, vuln_id)
    except _NotFound as exc:
        return _page("not_found.html.jinja", 404, title="Not found", message=exc.what)
    except StoreError as exc:
        return _unavailable(exc)
    body = json.dumps(json_safe(row.osv), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return Response(body, media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="{row.id}.json"',
                             "X-Content-Type-Options": "nosniff"})


# -- what every site answers: HEAD, a favicon, 404 pages for browsers, the API's own docs page ----


class HeadAsGet:
    """``HEAD`` answered as ``GET`` without the body (FastAPI routes declare GET only: HEAD was a 405)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body"):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


def wants_html(request: Request) -> bool:
    """A browser (it asks for text/html), not an API client, which gets JSON errors."""
    return "text/html" in request.headers.get("accept", "")


site_router = APIRouter(include_in_schema=False)


@lru_cache(maxsize=1)
def _favicon() -> bytes:
    return (HERE / "static" / "favicon.svg").read_bytes()


@site_router.get("/favicon.ico")
@site_router.get("/favicon.svg")
def favicon() -> Response:
    return Response(_favicon(), media_type="image/svg+xml",
                    headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"})


@site_router.get("/docs", response_class=HTMLResponse)
def docs(request: Request) -> HTMLResponse:
    document = request.app.openapi()
    return _page("docs.html.jinja", title="HTTP API", operations=apidoc.operations(document),
                 schemas=apidoc.schemas(document))


async def _not_here(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if not wants_html(request) or exc.status_code not in (404, 405):
        return await http_error(request, exc)
    message = (f"There is no page at {request.url.path[:200]}." if exc.status_code == 404
               else f"{request.method} is not allowed at {request.url.path[:200]}.")
    return _page("not_found.html.jinja", exc.status_code, title="Not found" if exc.status_code == 404
                 else "Not allowed", message=message)


def install_site(app: FastAPI) -> None:
    """HEAD support, the favicon, the /docs page and HTML 404/405 pages for browsers (JSON for the rest)."""
    app.add_middleware(HeadAsGet)
    app.include_router(site_router)
    app.add_exception_handler(StarletteHTTPException, _not_here)
