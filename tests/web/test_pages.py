"""The pages over HTTP: 404s for anything unknown or malformed, headers, downloads, escaping, and a
fixed number of SQL statements per page whatever the history's length (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.web.conftest import History
from tests.web.synthetic import build, sha_of
from tracker.adapters.settings import Settings
from tracker.app import make_tracker
from tracker.core.advisory.record import to_osv
from tracker.core.report import AdvisoryWrite
from tracker.surfaces.api import create_app
from tracker.surfaces.web import charts
from tracker.surfaces.web.demo import REPO

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")


@pytest.fixture(scope="module")
def client(history: History):
    with httpx.Client(base_url=history.url, timeout=10) as c:
        yield c


@pytest.mark.parametrize("path,message", [
    ("/repos/acme/missing", "acme/missing is not watched here."),
    ("/repos/acme/bad..name", "There is no repo acme/bad..name here: not a valid repo id."),
    ("/repos/-x/y/revisions/abcdef0", "There is no repo -x/y here: not a valid repo id."),
    (f"/repos/{REPO}/revisions/{'0' * 40}", f"The tracker has not read revision {'0' * 40} of {REPO}."),
    (f"/repos/{REPO}/revisions/HEAD", "&#39;HEAD&#39; is not a revision: give 7 to 40 hex digits of a commit sha."),
    (f"/repos/{REPO}/revisions/abc", "&#39;abc&#39; is not a revision: give 7 to 40 hex digits of a commit sha."),
    ("/advisories/x_HFUT-aaaa-aaaa-aaaa", "There is no advisory x_HFUT-aaaa-aaaa-aaaa."),
    ("/advisories/GHSA-1234", "&#39;GHSA-1234&#39; is not an advisory id here (they look like x_HFUT-xxxx-xxxx-xxxx)."),
    ("/advisories/x_HFUT-aaaa-aaaa-aaaa/download", "There is no advisory x_HFUT-aaaa-aaaa-aaaa."),
])
def test_unknown_or_malformed_things_are_404_pages(client, path, message):
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert f'<p class="message">{message}</p>' in response.text


def test_pages_carry_a_strict_content_security_policy_and_no_script(client, history):
    for path in ("/", f"/repos/{REPO}", f"/repos/{REPO}/revisions/{history.template}",
                 f"/advisories/{history.advisory(history.template, 'update')}"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "<script" not in response.text
        assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in response.text


def test_a_short_sha_prefix_finds_the_revision(client, history):
    response = client.get(f"/repos/{REPO}/revisions/{history.template[:7]}")
    assert response.status_code == 200
    assert f'<code class="sha">{history.template}</code>' in response.text


def test_the_stylesheet_is_served(client):
    response = client.get("/assets/pages.css")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/css; charset=utf-8"
    assert response.text.startswith("/* upstream-tracker pages")


def test_the_advisory_downloads_as_its_osv_record(client, history):
    advisory = history.advisory(history.context, "risk")
    response = client.get(f"/advisories/{advisory}/download")
    assert response.status_code == 200
    assert response.headers["content-disposition"] == f'attachment; filename="{advisory}.json"'
    assert json.loads(response.text) == client.get(f"/v1/vulns/{advisory}").json()
    assert json.loads(response.text)["id"] == advisory


def test_the_repo_feeds_linked_from_its_page_answer(client, history):
    page = client.get(f"/repos/{REPO}").text
    for href, kind in ((f"/feeds/{REPO}.atom", "application/atom+xml"), (f"/feeds/{REPO}.json", "application/feed+json")):
        assert f'href="{href}"' in page
        response = client.get(href)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(kind)


# -- over a store written directly: escaping, and queries per page ---------------------------------


@pytest.fixture
def app_on(db_url):
    trackers = []

    def make():
        tracker = make_tracker(Settings(database={"url": db_url}, hub={"endpoint": "http://127.0.0.1:9"}),
                               auto_upgrade=True)
        trackers.append(tracker)
        return tracker, TestClient(create_app(tracker))

    yield make
    for t in trackers:
        t.store.close()


def test_upstream_text_is_escaped_and_advisory_markdown_has_no_raw_html(app_on):
    tracker, client = app_on()
    (sha,) = build(tracker.store, "acme/evil", 1)
    repo = tracker.store.repos.get("acme/evil")
    [advisory] = tracker.store.advisories.find(repo_pk=repo.pk)
    record = {**to_osv(advisory.record), "summary": "<script>alert(1)</script>",
              "details": "**bold** <img src=x onerror=alert(1)> [x](javascript:alert(1))",
              "references": [{"type": "WEB", "url": "javascript:alert(1)"}, {"type": "WEB", "url": "https://example.org/a"}]}
    revision = tracker.store.revisions.get(repo.pk, sha)
    tracker.store.revisions.save_reanalysis(
        revision.pk, repo.pk, findings=(), estimate=None, now=tracker.clock(), dependencies_pending=None,
        advisories=[AdvisoryWrite(record=record, revision_sha=sha, kind="update", severity="high", fixed_sha=None)])
    page = client.get(f"/advisories/{advisory.id}").text
    assert "<script>alert(1)</script>" not in page
    assert '<p class="summary">&lt;script&gt;alert(1)&lt;/script&gt;</p>' in page
    assert "<strong>bold</strong> &lt;img src=x onerror=alert(1)&gt; [x](javascript:alert(1))" in page
    assert 'href="javascript:' not in page
    assert 'href="https://example.org/a"' in page


def test_a_missing_store_table_is_a_503_page_not_a_traceback(app_on):
    tracker, client = app_on()
    build(tracker.store, "acme/model", 2)
    with tracker.store.db.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE advisory_commits")
        conn.exec_driver_sql("DROP TABLE advisory_spans")
        conn.exec_driver_sql("DROP TABLE advisories")
    response = client.get("/repos/acme/model")
    assert response.status_code == 503
    assert "The tracker&#39;s database cannot be read right now" in response.text


def test_each_page_runs_the_same_number_of_statements_for_5_and_60_revisions(app_on):
    tracker, client = app_on()
    short, long = build(tracker.store, "acme/short", 5), build(tracker.store, "acme/long", 60)
    advisory = {name: tracker.store.advisories.find(repo_pk=tracker.store.repos.get(name).pk)[-1].id
                for name in ("acme/short", "acme/long")}
    statements: list[str] = []
    event.listen(tracker.store.db.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))

    def count(path: str) -> int:
        statements.clear()
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        return len(statements)

    for name, shas in (("acme/short", short), ("acme/long", long)):
        assert count(f"/repos/{name}") == 5
        assert count(f"/repos/{name}?page=2") == 5
        assert count(f"/repos/{name}/revisions/{shas[-1]}") == 6
        # The record, then its spans: its versions are computed on read (the commits themselves
        # come from the versions cache, warmed by advisories_for above), whatever the history.
        assert count(f"/advisories/{advisory[name]}") == 2
    assert count("/") == 5  # the repos, their counts, newest revisions, open advisories, severity strips
    assert count("/repos/acme") == 5
    # the strip shows the newest 30 revisions of the long history, 5 of the short one
    index = client.get("/").text
    assert re.findall(r'aria-label="Worst severity of the last (\d+) revisions, oldest first', index) == ["30", "5"]
    assert count("/advisories") == 1
    # and the long timeline is all there, newest first, 50 revisions a page
    first, second = client.get("/repos/acme/long").text, client.get("/repos/acme/long?page=2").text
    assert first.count('<li class="revision"') == 50 and second.count('<li class="revision"') == 10
    assert first.index(f'id="rev-{sha_of("acme/long", 59)}"') < first.index(f'id="rev-{sha_of("acme/long", 10)}"')
    assert f'id="rev-{sha_of("acme/long", 9)}"' in second and f'id="rev-{sha_of("acme/long", 0)}"' in second
    assert '<a rel="next" href="/repos/acme/long?page=2">Older →</a>' in first
    assert '<a rel="prev" href="/repos/acme/long?page=1">← Newer</a>' in second


def test_the_repo_chart_draws_the_newest_estimator_reruns_only(app_on, monkeypatch):
    tracker, client = app_on()
    build(tracker.store, "acme/long", 60)  # the estimator reran at every fifth revision: 12 reruns
    build(tracker.store, "acme/short", 12)  # 3 reruns
    shown = re.compile(r"<title>([0-9a-f]{12}): parameters [^<]*</title>")

    def charted(name: str) -> tuple[list[str], int, str]:
        page = client.get(f"/repos/{name}").text
        # two drawings of one chart (wide, narrow for phones): the same points in each
        wide, narrow = (re.search(rf'<svg [^>]*class="chart chart-{d}".*?</svg>', page, re.S) for d in ("wide", "narrow"))
        assert wide and narrow
        assert shown.findall(wide[0]) == shown.findall(narrow[0])
        assert wide[0].count("<circle ") == narrow[0].count("<circle ")
        return shown.findall(wide[0]), wide[0].count("<circle "), page

    # every rerun is a point (three series each), the revisions in between none
    labels, circles, page = charted("acme/short")
    assert (labels, circles) == ([sha_of("acme/short", i)[:12] for i in (0, 5, 10)], 9)
    assert "the newest" not in page
    monkeypatch.setattr(charts, "RERUNS_CHARTED", 4)
    labels, circles, page = charted("acme/long")
    assert (labels, circles) == ([sha_of("acme/long", i)[:12] for i in (40, 45, 50, 55)], 12)
    assert "(the newest 4; older ones are on the timeline's later pages)" in page


# -- what every site answers, and the pages that find things ----------------------------------------

BROWSER = {"accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize("path", ["/nowhere", "/repos/intfloat/multilingual-e5-large/nothing", "/v1/nothing"])
def test_an_unknown_path_is_an_html_page_for_browsers_and_json_for_api_clients(client, path):
    page = client.get(path, headers=BROWSER)
    assert page.status_code == 404
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert f'<p class="message">There is no page at {path}.</p>' in page.text
    assert page.headers["content-security-policy"] == CSP
    api = client.get(path, headers={"accept": "application/json"})
    assert (api.status_code, api.json()) == (404, {"code": 5, "message": f"no such endpoint: {path} (see /docs)"})


def test_a_wrong_method_is_an_html_405_for_browsers(client):
    page = client.post("/", headers=BROWSER)
    assert page.status_code == 405
    assert '<p class="message">POST is not allowed at /.</p>' in page.text
    assert client.post("/").json() == {"code": 12, "message": "method POST is not allowed on /: use GET"}


@pytest.mark.parametrize("path", ["/", f"/repos/{REPO}", "/advisories", "/findings", "/docs", "/assets/pages.css",
                                  "/favicon.ico", "/healthz", f"/feeds/{REPO}.atom"])
def test_head_answers_as_get_without_a_body(client, path):
    got, head = client.get(path), client.head(path)
    assert (head.status_code, got.status_code) == (200, 200)
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["content-length"] == str(len(got.content))


def test_the_favicon_is_served_and_linked(client):
    for path in ("/favicon.ico", "/favicon.svg"):
        icon = client.get(path)
        assert icon.status_code == 200
        assert icon.headers["content-type"] == "image/svg+xml"
        assert icon.text.startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert '<link rel="icon" href="/favicon.svg" type="image/svg+xml">' in client.get("/").text


def test_the_api_docs_page_lists_every_operation_and_loads_nothing_from_elsewhere(client):
    page = client.get("/docs")
    assert page.status_code == 200 and page.headers["content-security-policy"] == CSP
    spec = client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        for method in item:
            # a path may break after a slash only
            shown = path.replace("/", "/<wbr>")
            assert f'<h2><code class="method">{method.upper()}</code> <code class="path">{shown}</code></h2>' \
                in page.text, path
    # each operation's parameters, request body and responses, the schemas they name linked to their entry
    watch = page.text[page.text.index('<section class="operation" id="op-post-v1-watch">'):]
    watch = watch[:watch.index("</section>")]
    assert '<p><code>application/json</code>: <a href="#schema-WatchIn"><code>WatchIn</code></a></p>' in watch
    assert ('<tr><td data-label="Status"><code>201</code></td><td data-label="Meaning">Successful Response</td>'
            '<td data-label="Body"><code>application/json</code>: <a href="#schema-WatchOut"><code>WatchOut</code></a>'
            '</td></tr>') in watch
    revisions = page.text[page.text.index('id="op-get-v1-repos-owner-name-revisions"'):]
    assert ('<tr><td data-label="Name"><code class="name">branch</code></td><td data-label="In">query</td>'
            '<td data-label="Type">string (1 to 200 characters, default main)</td><td data-label="Description">'
            '<p>for a repo not watched: the branch to list</p>\n</td></tr>') in revisions
    assert ('<tr><td data-label="Name"><code class="name">check</code></td><td data-label="Type">boolean '
            '(default true)</td>') in page.text
    assert '<section class="schema" id="schema-WatchIn">' in page.text
    # Markdown in the document is rendered, never shown raw
    assert "`" not in page.text
    assert "cdn" not in page.text.lower() and "<script" not in page.text
    for url in ("https://", "http://", "//"):
        assert f'src="{url}' not in page.text and f'href="{url}' not in page.text


def test_every_page_refers_to_no_outside_host(client, history):
    advisory = history.advisory(history.context, "risk")
    for path in ("/", "/repos/intfloat", f"/repos/{REPO}", f"/repos/{REPO}/revisions/{history.template}",
                 f"/advisories/{advisory}", "/advisories", "/findings", "/findings/weights.pickle_added",
                 "/search?q=e5", "/docs", "/nowhere"):
        text = client.get(path, headers=BROWSER).text
        # links out (a reference, the Hub's commit page) are plain anchors; nothing is loaded from elsewhere
        assert not re.search(r'<(?:link|img|script|iframe|source)[^>]+(?:src|href)="(?:https?:)?//', text), path


def test_the_owner_page_lists_the_owners_watched_repos(client):
    page = client.get("/repos/intfloat")
    assert page.status_code == 200
    assert f'<a class="repo" href="/repos/{REPO}">{REPO}</a>' in page.text
    assert '<link rel="alternate" type="application/atom+xml" title="intfloat (Atom)" href="/feeds/intfloat.atom">' \
        in page.text
    missing = client.get("/repos/nobody")
    assert missing.status_code == 404 and "No repo of nobody is watched here." in missing.text
    assert '<a href="/repos/intfloat">intfloat</a>' in client.get(f"/repos/{REPO}").text


def listed_ids(html: str) -> list[str]:
    return re.findall(r'<li><span class="sev sev-\w+">\w+</span> <a href="/advisories/([^"]+)">', html)


def test_the_advisories_page_filters_by_severity_category_library_and_date(client, history):
    store = history.tracker.store
    every = sorted(a.id for a in store.advisories.find(repo_pk=store.repos.get(REPO).pk))
    assert sorted(listed_ids(client.get("/advisories").text)) == every
    high = sorted(a.id for a in store.advisories.find(repo_pk=store.repos.get(REPO).pk)
                  if a.severity in ("critical", "high"))
    assert high and sorted(listed_ids(client.get("/advisories?severity=high").text)) == high
    moderate_up = sorted(listed_ids(client.get("/advisories?severity=moderate").text))
    assert set(high) < set(moderate_up)
    weights = sorted(listed_ids(client.get("/advisories?category=weights").text))
    assert history.advisory(history.context, "risk") in weights
    assert history.advisory(history.template, "update") not in weights
    records = [to_osv(a.record) for a in store.advisories.find(repo_pk=store.repos.get(REPO).pk)]
    for library in ("transformers", "sentence-transformers"):
        about = sorted(r["id"] for r in records if any(
            f.get("library") == library for f in r["database_specific"].get("findings") or []))
        assert sorted(listed_ids(client.get(f"/advisories?library={library}").text)) == about, library
    assert listed_ids(client.get("/advisories?library=no-such-library").text) == []
    assert listed_ids(client.get("/advisories?since=2999-01-01").text) == []
    assert sorted(listed_ids(client.get("/advisories?since=2000-01-01").text)) == every
    for query, message in (("severity=urgent", "Unknown severity &#39;urgent&#39;"),
                           ("category=nope", "Unknown category &#39;nope&#39;"),
                           ("since=yesterday", "Invalid date &#39;yesterday&#39;: give YYYY-MM-DD.")):
        bad = client.get(f"/advisories?{query}")
        assert bad.status_code == 400 and message in bad.text, query


def test_the_advisories_page_is_paged_with_its_filters_kept(app_on):
    tracker, client = app_on()
    build(tracker.store, "acme/long", 600)  # an advisory every tenth revision: 60
    first = client.get("/advisories?severity=info").text
    second = client.get("/advisories?severity=info&page=2").text
    assert len(listed_ids(first)) == 50 and len(listed_ids(second)) == 10
    assert not set(listed_ids(first)) & set(listed_ids(second))
    assert '<a rel="next" href="/advisories?severity=info&amp;page=2">Older →</a>' in first
    assert "<span>Page 2 of 2</span>" in second
    assert "<span>Page 2 of 2</span>" in client.get("/advisories?page=999").text  # clamped, never an empty page


def test_search_finds_repos_advisories_and_finding_codes(client, history):
    advisory = history.advisory(history.context, "risk")
    page = client.get("/search?q=e5-large").text
    assert f'<li><a href="/repos/{REPO}">{REPO}</a></li>' in page
    page = client.get("/search?q=pickle").text
    assert '<li><a href="/findings/weights.pickle_added">weights.pickle_added</a></li>' in page
    page = client.get(f"/search?q={advisory[:10]}").text
    assert f'<li><a href="/advisories/{advisory}">{advisory}</a></li>' in page
    nothing = client.get("/search?q=zzzz-nothing").text
    assert "Nothing matches zzzz-nothing" in nothing
    # an exact id goes straight to its page
    for q, target in ((REPO, f"/repos/{REPO}"), (advisory, f"/advisories/{advisory}"),
                      ("weights.pickle_added", "/findings/weights.pickle_added")):
        jump = client.get(f"/search?q={q}", follow_redirects=False)
        assert (jump.status_code, jump.headers["location"]) == (303, target)


def test_every_finding_code_has_a_page_and_the_findings_link_to_it(client, history):
    index = client.get("/findings").text
    from tracker.core.findings.rules import SeverityRules

    for code, severity in SeverityRules.default().table.items():
        assert f'<span class="sev sev-{severity.value}">{severity.value}</span> <a href="/findings/{code}">' \
               f'{code}</a>' in index
    page = client.get("/findings/weights.pickle_added")
    assert page.status_code == 200
    assert "<h1><code>weights.pickle_added</code></h1>" in page.text
    assert ("<h2>What it means and why it is moderate</h2>\n<p>a pickle-based file appeared whose imports are only "
            "torch/numpy/collections tensor-rebuild globals</p>") in page.text
    assert "never load a pickle you have not scanned" in page.text
    assert client.get("/findings/nope.nothing").status_code == 404
    revision = client.get(f"/repos/{REPO}/revisions/{history.context}").text
    assert '<a class="code" href="/findings/weights.pickle_added">weights.pickle_added</a>' in revision
    advisory = client.get(f"/advisories/{history.advisory(history.context, 'risk')}").text
    assert '<a class="code" href="/findings/weights.pickle_added">weights.pickle_added</a>' in advisory


def test_revision_pages_link_the_previous_and_next_revision(client, history):
    middle = client.get(f"/repos/{REPO}/revisions/{history.template}").text
    assert (f'<a rel="prev" href="/repos/{REPO}/revisions/{history.readme}">← Previous '
            f'<code>{history.readme[:12]}</code></a>') in middle
    assert (f'<a rel="next" href="/repos/{REPO}/revisions/{history.context}">Next '
            f'<code>{history.context[:12]}</code> →</a>') in middle
    first = client.get(f"/repos/{REPO}/revisions/{history.baseline}").text
    last = client.get(f"/repos/{REPO}/revisions/{history.context}").text
    assert 'rel="prev"' not in first and 'rel="next"' in first
    assert 'rel="next"' not in last and 'rel="prev"' in last


def test_pages_write_one_arrow(client, history):
    for path in (f"/repos/{REPO}", f"/repos/{REPO}/revisions/{history.context}", "/advisories", "/"):
        assert " -&gt; " not in client.get(path).text, path


def test_the_index_shows_a_severity_strip_per_repo(client):
    page = client.get("/").text
    strip = re.search(r'<td data-label="Recent revisions">(.*?)</td>', page)
    assert strip is not None
    assert strip[1] == (
        '<svg xmlns="http://www.w3.org/2000/svg" class="strip" width="30" height="14" viewBox="0 0 30 14" role="img" '
        'aria-label="Worst severity of the last 4 revisions, oldest first: 1 critical, 1 high, 2 info">'
        '<rect x="0" y="0" width="6" height="14" rx="1" fill="#d0d7de"><title>info</title></rect>'
        '<rect x="8" y="0" width="6" height="14" rx="1" fill="#d0d7de"><title>info</title></rect>'
        '<rect x="16" y="0" width="6" height="14" rx="1" fill="#c0392b"><title>high</title></rect>'
        '<rect x="24" y="0" width="6" height="14" rx="1" fill="#6e0b14"><title>critical</title></rect></svg>')


def test_the_advisories_page_draws_them_over_time_by_severity(client, history):
    store = history.tracker.store
    listed = store.advisories.find(repo_pk=store.repos.get(REPO).pk)
    day = max(a.published for a in listed).date()
    page = client.get("/advisories").text
    figure = re.search(r'<figure class="timeline-strip">(.*?)</figure>', page, re.S)
    assert figure is not None
    counts = {s: sum(1 for a in listed if a.severity == s) for s in ("critical", "high", "moderate")}
    assert (f'aria-label="Advisories published from {day - timedelta(days=39)} to {day} by severity: '
            f'{counts["critical"]} critical, {counts["high"]} high, {counts["moderate"]} moderate">') in figure[1]
    assert (f"<figcaption>Published per day, {day - timedelta(days=39)} (left) to {day} (right), by severity."
            "</figcaption>") in figure[1]
    filtered = client.get("/advisories?severity=critical").text
    assert f"by severity: {counts['critical']} critical\">" in filtered
    assert ", of the advisories these filters match.</figcaption>" in filtered
    assert '<figure class="timeline-strip">' not in client.get("/advisories?since=2999-01-01").text


def test_the_estimate_changes_are_a_card_table_on_the_advisory_and_the_revision_page(client, history):
    t4 = ('<tr><th scope="row">T4 16 GB</th><td data-label="Full fine-tune"><span class="move">7 → 1</span>\n'
          '    <svg class="bar" width="96" height="12" viewBox="0 0 96 12" aria-hidden="true" focusable="false">'
          '<rect x="0" y="0" width="96.0" height="5" fill="#8c959f"/><rect x="0" y="7" width="13.7" height="5" '
          'fill="#c0392b"/></svg></td>')
    params = ('<tr><td data-label="Figure">Parameters</td><td data-label="Before">559,890,432</td>'
              '<td data-label="After">567,754,752</td><td data-label="Change">+1.4%</td></tr>')
    advisory = client.get(f"/advisories/{history.advisory(history.context, 'update')}").text
    assert t4 in advisory and params in advisory
    # each finding once: the 8 per-card serving findings are one line, the details no longer list them
    assert advisory.count("serving on ") == 1
    assert ("serving on A100-40: batch 666 → 167 (-75%), and 7 more cards like it (see the estimate changes) "
            '<a class="code" href="/findings/estimate.serve_batch_changed">') in advisory
    assert advisory.count("weights.file_replaced") == 2  # its link's text and address, in one line
    details = advisory.split('<section class="details">')[1].split("</section>")[0]
    assert "A100-40.full_batch" not in advisory and "Findings" not in details and "Estimate changes" not in details
    revision = client.get(f"/repos/{REPO}/revisions/{history.context}").text
    assert "<h3>What moved</h3>" in revision and t4 in revision and params in revision
    assert "full fine-tune on T4" not in revision
