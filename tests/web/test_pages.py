"""The pages over HTTP: 404s for anything unknown or malformed, headers, downloads, escaping, and a
fixed number of SQL statements per page whatever the history's length (SQLite and PostgreSQL)."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.web.conftest import History
from tests.web.synthetic import build, sha_of
from tracker.api import create_app
from tracker.app import make_tracker
from tracker.settings import Settings
from tracker.web.demo import REPO

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
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
        tracker = make_tracker(Settings(database_url=db_url, hub_endpoint="http://127.0.0.1:9"), auto_upgrade=True)
        trackers.append(tracker)
        return tracker, TestClient(create_app(tracker))

    yield make
    for t in trackers:
        t.store.close()


def test_upstream_text_is_escaped_and_advisory_markdown_has_no_raw_html(app_on):
    tracker, client = app_on()
    (sha,) = build(tracker.store, "acme/evil", 1)
    repo = tracker.store.get_repo("acme/evil")
    [advisory] = tracker.store.advisories_for(repo_pk=repo.pk)
    record = {**advisory.record, "summary": "<script>alert(1)</script>",
              "details": "**bold** <img src=x onerror=alert(1)> [x](javascript:alert(1))",
              "references": [{"type": "WEB", "url": "javascript:alert(1)"}, {"type": "WEB", "url": "https://example.org/a"}]}
    tracker.store.save_advisory(repo.pk, record, revision_sha=sha, kind="update", severity="high", fixed_sha=None,
                                affected=None)
    page = client.get(f"/advisories/{advisory.id}").text
    assert "<script>alert(1)</script>" not in page
    assert '<p class="summary">&lt;script&gt;alert(1)&lt;/script&gt;</p>' in page
    assert "<strong>bold</strong> &lt;img src=x onerror=alert(1)&gt; [x](javascript:alert(1))" in page
    assert 'href="javascript:' not in page
    assert 'href="https://example.org/a"' in page


def test_a_missing_store_table_is_a_503_page_not_a_traceback(app_on):
    tracker, client = app_on()
    build(tracker.store, "acme/model", 2)
    with tracker.store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE advisory_commits")
        conn.exec_driver_sql("DROP TABLE advisory_spans")
        conn.exec_driver_sql("DROP TABLE advisories")
    response = client.get("/repos/acme/model")
    assert response.status_code == 503
    assert "The tracker&#39;s database cannot be read right now" in response.text


def test_each_page_runs_the_same_number_of_statements_for_5_and_60_revisions(app_on):
    tracker, client = app_on()
    short, long = build(tracker.store, "acme/short", 5), build(tracker.store, "acme/long", 60)
    advisory = {name: tracker.store.advisories_for(repo_pk=tracker.store.get_repo(name).pk)[-1].id
                for name in ("acme/short", "acme/long")}
    statements: list[str] = []
    event.listen(tracker.store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))

    def count(path: str) -> int:
        statements.clear()
        response = client.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        return len(statements)

    for name, shas in (("acme/short", short), ("acme/long", long)):
        assert count(f"/repos/{name}") == 3
        assert count(f"/repos/{name}/revisions/{shas[-1]}") == 4
        # The record, then its spans: its versions are computed on read (the commits themselves
        # come from the versions cache, warmed by advisories_for above), whatever the history.
        assert count(f"/advisories/{advisory[name]}") == 2
    assert count("/") == 4
    # and the long timeline is all there, newest first
    page = client.get("/repos/acme/long").text
    assert page.count('<li class="revision"') == 60
    assert page.index(f'id="rev-{sha_of("acme/long", 59)}"') < page.index(f'id="rev-{sha_of("acme/long", 0)}"')
